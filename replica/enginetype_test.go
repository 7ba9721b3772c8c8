package replica

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/arch"
)

const presetHead = "model: meta-llama/Llama-3.1-8B-Instruct\ngpu: H100\n"

// TestPresetEngineType: engine_type and the sglang block decode from a
// preset file; bad values are refused naming the file and the field.
func TestPresetEngineType(t *testing.T) {
	p, err := ParsePreset([]byte(presetHead), "p.yaml", "", nil)
	if err != nil || p.EngineType != "" || p.EngineTypeOf() != EngineVLLM || p.SGLang != nil {
		t.Fatalf("default: %v %q %v", err, p.EngineType, p.SGLang)
	}
	doc := presetHead + `engine_type: sglang
sglang:
  mem_fraction_static: 0.9
  page_size: 16
  max_running_requests: 256
  chunked_prefill_size: -1
  max_total_tokens: 100000
  schedule_policy: lpm
  enable_mixed_chunk: true
  context_length: 8192
`
	p, err = ParsePreset([]byte(doc), "sg.yaml", "", nil)
	want := SGLangFlags{MemFractionStatic: 0.9, PageSize: 16, MaxRunningRequests: 256, ChunkedPrefillSize: -1,
		MaxTotalTokens: 100000, SchedulePolicy: "lpm", EnableMixedChunk: true, ContextLength: 8192}
	if err != nil || p.EngineTypeOf() != EngineSGLang || p.SGLang == nil || *p.SGLang != want {
		t.Fatalf("sglang: %v %q %+v", err, p.EngineType, p.SGLang)
	}
	// Overrides merge into a copy of the block.
	q, err := p.WithOverrides([]byte(`{"sglang": {"page_size": 64}}`))
	if err != nil || q.SGLang.PageSize != 64 || q.SGLang.MemFractionStatic != 0.9 || p.SGLang.PageSize != 16 {
		t.Fatalf("override: %v %+v (original %+v)", err, q.SGLang, p.SGLang)
	}
	for _, c := range []struct{ doc, want string }{
		{"engine_type: sglng", `bad.yaml: engine_type: unknown engine "sglng" (have vllm, sglang); did you mean "sglang"?`},
		{"engine_type: tgi", `bad.yaml: engine_type: unknown engine "tgi" (have vllm, sglang)`},
		{"engine: sglang", "bad.yaml: engine: is the vLLM engine arguments' block; the engine itself is engine_type (vllm, sglang)"},
		{"sglang: {page_size: -1}", "bad.yaml: sglang.page_size: must be at least 1"},
		{"sglang: {mem_fraction_static: 1.2}", "bad.yaml: sglang.mem_fraction_static: must be in (0, 1)"},
		{"sglang: {chunked_prefill_size: -2}", "bad.yaml: sglang.chunked_prefill_size: must be a number of tokens, or -1"},
		{"sglang: {schedule_policy: priority}", `bad.yaml: sglang.schedule_policy: "priority" is not modelled (have fcfs, lpm)`},
		{"sglang: {schedule_policy: dfs-weight}", `bad.yaml: sglang.schedule_policy: "dfs-weight" is not modelled`},
		{"sglang: {page_size: 0}", "bad.yaml: sglang.page_size: 0 is not a value SGLang accepts (leave the key out for the default)"},
		{"sglang: {mem_fraction_static: 0}", "bad.yaml: sglang.mem_fraction_static: 0 is not a value SGLang accepts"},
		{"sglang: {radix_eviction_policy: lfu}", `bad.yaml: sglang.radix_eviction_policy: "lfu" is not modelled (have lru, fifo, filo, mru)`},
		{"sglang: {kv_cache_dtype: int4}", `bad.yaml: sglang.kv_cache_dtype: "int4": want auto or an fp8 type`},
		{"sglang: {max_running_requests: -3}", "bad.yaml: sglang.max_running_requests: must be at least 1"},
		{"sglang: {pagesize: 16}", `bad.yaml: unknown field "pagesize"; did you mean page_size?`},
	} {
		_, err := ParsePreset([]byte(presetHead+c.doc+"\n"), "bad.yaml", "", nil)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q...", c.doc, err, c.want)
		}
	}
	if _, err := p.WithOverrides([]byte(`{"engine_type": "vlm"}`)); err == nil || !strings.Contains(err.Error(), `engine_type: unknown engine "vlm"`) {
		t.Errorf("override of engine_type: %v", err)
	}
}

// TestCheckEngineType: the empty type and the listed ones pass.
func TestCheckEngineType(t *testing.T) {
	for _, ok := range []string{"", "vllm", "sglang"} {
		if err := CheckEngineType(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	if !reflect.DeepEqual(EngineTypes, []string{"vllm", "sglang"}) {
		t.Errorf("EngineTypes %v", EngineTypes)
	}
}

// TestNewPresetDelaysCalibrated: a preset built from a model and a GPU
// takes its delays from the default calibration before anything builds its
// step model (the calibration's ingest_us, per_output_token_us and
// ingest_jitter, not the uncalibrated preset's 15.6 ms and 45.9 µs a
// token): the simulator reads a replica's delays from a copy of its preset
// whose model was never built.
func TestNewPresetDelaysCalibrated(t *testing.T) {
	p := mustPreset(t, "Qwen/Qwen3-32B", "H100", 2)
	c := DefaultCalibration().Coefficients
	ingest, perTok, jitter := p.Delays()
	if ingest != c.IngestUs || perTok != c.PerOutputTokenUs || jitter != c.IngestJitter {
		t.Errorf("delays %g µs, %g µs/token, jitter %g; want the default calibration's %g, %g, %g", ingest, perTok, jitter, c.IngestUs, c.PerOutputTokenUs, c.IngestJitter)
	}
}

// TestSGLangWithoutSymmetricMemory: at TP 8 on H100 a vLLM replica's
// decode all-reduces of 1 MiB run multimem (symmetric memory, on by
// default in vLLM) and an SGLang replica's the custom two-stage kernel
// (SGLang enables symmetric memory only with --enable-torch-symm-mem), so
// the same step of 64 Llama-3.1-70B decodes differs by exactly 2·80 calls
// of the difference between the two, worked from allreduce.go.
func TestSGLangWithoutSymmetricMemory(t *testing.T) {
	vllm := mustPreset(t, "meta-llama/Llama-3.1-70B-Instruct", "H100", 8)
	a, b := vllmAndSGLangModels(t, vllm)
	batch := repeat(BatchEntry{NewTokens: 1, Context: 1000}, 64)
	co := vllm.Calibration.Coefficients
	size := 64 * 8192 * 2.0 // 1 MiB
	mm := co.AllReduceUs*1e-6 + (1+1.0/8)*size/(450e9*customLinkShare)
	two := (co.AllReduceUs+twoStageExtraUs)*1e-6 + 2*7.0/8*size/(450e9*customLinkShare)
	want := 2 * 80 * (two - mm)
	if got := float64(b.StepTime(batch)-a.StepTime(batch)) * 1e-9; math.Abs(got-want) > 2e-9 {
		t.Errorf("SGLang's step is %.6f ms slower than vLLM's, want %.6f ms", got*1e3, want*1e3)
	}
}

// mustPreset is NewPreset of an embedded model on a catalogue GPU.
func mustPreset(t *testing.T, model, gpu string, tp int) Preset {
	t.Helper()
	m, err := arch.ResolveModel(model, "")
	if err != nil {
		t.Fatal(err)
	}
	g, err := arch.DefaultGPUs().Lookup(gpu)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPreset(m, g, tp)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// vllmAndSGLangModels builds the step models of p as a vLLM replica and
// as an SGLang one.
func vllmAndSGLangModels(t *testing.T, p Preset) (vllm, sglang StepModel) {
	t.Helper()
	sg := p
	sg.EngineType = EngineSGLang
	vllm, err := p.Model()
	if err != nil {
		t.Fatal(err)
	}
	if sglang, err = sg.Model(); err != nil {
		t.Fatal(err)
	}
	return vllm, sglang
}
