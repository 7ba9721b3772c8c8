package latency

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/scenario"
	"github.com/eppsim/eppsim/sim"
)

// sglangFixture is the synthetic SGLang results directory
// (testdata/results/README.md): the codegen workload shortened to two
// 20 s stages (100 and 200 requests), its "measured" values a short
// simulation's.
var sglangFixture = filepath.Join("testdata", "results", "llama-2-7b-tp1-codegen-sglang")

// TestParseEngineSGLang: an engine file with engine-type sglang takes an
// sglang block of SGLang's flags (either spelling), refuses vLLM's engine
// arguments with the SGLang flag to give instead, and names the line and
// key of every error.
func TestParseEngineSGLang(t *testing.T) {
	e, err := ParseEngine([]byte(`engine-type: sglang
model: meta-llama/Llama-2-7b-hf
gpu: H100
tensor-parallel-size: 1
data-parallel-size: 1
sglang:
  mem_fraction_static: 0.8
  page-size: 16
  max_running_requests: 64
  chunked_prefill_size: -1
  max_prefill_tokens: 8192
  max_total_tokens: 200000
  schedule_policy: lpm
  schedule_conservativeness: 1.5
  enable_mixed_chunk: true
  context_length: 4096
  radix_eviction_policy: fifo
  decode_log_interval: 20
  kv_cache_dtype: fp8_e4m3
`), "engine.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	want := replica.SGLangFlags{MemFractionStatic: 0.8, PageSize: 16, MaxRunningRequests: 64, ChunkedPrefillSize: -1,
		MaxPrefillTokens: 8192, MaxTotalTokens: 200000, SchedulePolicy: "lpm", ScheduleConservativeness: 1.5,
		EnableMixedChunk: true, ContextLength: 4096, RadixEvictionPolicy: "fifo", DecodeLogInterval: 20, KVCacheDtype: "fp8_e4m3"}
	if e.EngineType != replica.EngineSGLang || e.SGLang == nil || *e.SGLang != want {
		t.Errorf("engine %q, flags %+v", e.EngineType, e.SGLang)
	}
	// No sglang block: SGLang's defaults.
	e, err = ParseEngine([]byte("engine_type: sglang\nmodel: meta-llama/Llama-2-7b-hf\ngpu: H100\n"), "engine.yaml", "")
	if err != nil || e.EngineType != replica.EngineSGLang || e.SGLang != nil {
		t.Errorf("%+v, %v", e, err)
	}
	const head = "engine-type: sglang\nmodel: meta-llama/Llama-2-7b-hf\ngpu: H100\n"
	bad := []struct{ in, want string }{
		{head + "max-num-seqs: 64\n", "engine.yaml:4: max-num-seqs: a vLLM engine argument, but engine_type is sglang: give sglang.max_running_requests"},
		{"max_num_batched_tokens: 4096\n" + head, "engine.yaml:1: max_num_batched_tokens: a vLLM engine argument, but engine_type is sglang: give sglang.chunked_prefill_size"},
		{head + "total-gpu-kv-blocks: 7463\n", "engine.yaml:4: total-gpu-kv-blocks: a vLLM engine argument, but engine_type is sglang: give sglang.max_total_tokens"},
		{head + "num-gpu-blocks-override: 7463\n", "give sglang.max_total_tokens"},
		{head + "gpu-memory-utilization: 0.9\n", "engine.yaml:4: gpu-memory-utilization: a vLLM engine argument, but engine_type is sglang: give sglang.mem_fraction_static"},
		{head + "block-size: 16\n", "give sglang.page_size"},
		{head + "max-model-len: 4096\n", "give sglang.context_length"},
		{head + "enable-prefix-caching: true\n", "SGLang's radix cache is always on here"},
		{head + "dp-lb-engine-counts: false\n", "vLLM's data-parallel load balancer"},
		{head + "data-parallel-size: 2\n", "engine.yaml:4: data-parallel-size: a vLLM engine argument, but engine_type is sglang: SGLang's --dp-size"},
		{"model: meta-llama/Llama-2-7b-hf\ngpu: H100\nsglang:\n  page_size: 16\n", "engine.yaml:3: sglang: SGLang's server flags, but the run's engine is vLLM"},
		{"engine-type: sglnag\nmodel: meta-llama/Llama-2-7b-hf\ngpu: H100\n", `engine.yaml:1: engine-type: unknown engine "sglnag" (have vllm, sglang); did you mean "sglang"?`},
		{head + "sglang: 16\n", "engine.yaml:4: sglang: expected a mapping of SGLang's server flags"},
		{head + "sglang:\n  page_sise: 16\n", "engine.yaml:5: sglang.page_sise: unknown SGLang flag; did you mean page_size?"},
		{head + "sglang:\n  page_size: 0\n", "engine.yaml:5: sglang.page_size: 0: must be at least 1"},
		{head + "sglang:\n  page_size: 1\n  page-size: 2\n", "engine.yaml:6: sglang.page-size: given twice (also line 5)"},
		{head + "sglang:\n  max_total_tokens: 1.5\n", "engine.yaml:5: sglang.max_total_tokens: expected a whole number, got 1.5"},
		{head + "sglang:\n  chunked_prefill_size: 0\n", "engine.yaml:5: sglang.chunked_prefill_size: 0: give a number of tokens, or -1"},
		{head + "sglang:\n  chunked_prefill_size: -2\n", "engine.yaml:5: sglang.chunked_prefill_size: -2: must be at least -1"},
		{head + "sglang:\n  mem_fraction_static: 0\n", "engine.yaml:5: sglang.mem_fraction_static: 0: must be positive"},
		{head + "sglang:\n  mem_fraction_static: 1.2\n", "engine.yaml:5: sglang.mem_fraction_static: must be in (0, 1)"},
		{head + "sglang:\n  schedule_policy: lof\n", `engine.yaml:5: sglang.schedule_policy: "lof" is not modelled (have fcfs, lpm)`},
		{head + "sglang:\n  radix_eviction_policy: lfu\n", `engine.yaml:5: sglang.radix_eviction_policy: "lfu" is not modelled`},
		{head + "sglang:\n  kv_cache_dtype: int4\n", `engine.yaml:5: sglang.kv_cache_dtype: "int4": want auto or an fp8 type`},
		{head + "sglang:\n  enable_mixed_chunk: 1\n", "engine.yaml:5: sglang.enable_mixed_chunk: expected true or false, got 1"},
	}
	for _, c := range bad {
		_, err := ParseEngine([]byte(c.in), "engine.yaml", "")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one saying %q", c.in, err, c.want)
		}
	}
}

// TestParseSGLangFields: an experiment with engine_type sglang takes a
// strictly decoded sglang block; given values must be SGLang's (0 is not
// the default), vLLM's engine object is refused with the flag to give
// instead, and a vLLM run has no sglang block. Errors name the file, the
// experiment and the field.
func TestParseSGLangFields(t *testing.T) {
	doc := func(fields string) string {
		return `{"experiments": [{"id": "s", "model": "meta-llama/Llama-2-7b-hf", "hardware": "H100", "tp": 1` + fields + `,
		  "workload": {"shared_prefix_requested": {"system_prompt_len": 10, "question_len": 40, "output_len": 20},
		   "stages": [{"rate_rps": 1, "duration_s": 5}]}}]}`
	}
	f, err := Parse([]byte(doc(`, "engine_type": "sglang", "engine": {"max_num_seqs": null},
	  "sglang": {"mem_fraction_static": 0.8, "page_size": 4, "max_running_requests": 32, "chunked_prefill_size": 1024,
	   "max_total_tokens": 100000, "schedule_policy": "fcfs", "enable_mixed_chunk": true, "context_length": 2048}`)), "runs.json")
	if err != nil {
		t.Fatal(err)
	}
	e := &f.Experiments[0]
	want := replica.SGLangFlags{MemFractionStatic: 0.8, PageSize: 4, MaxRunningRequests: 32, ChunkedPrefillSize: 1024,
		MaxTotalTokens: 100000, SchedulePolicy: "fcfs", EnableMixedChunk: true, ContextLength: 2048}
	if !e.IsSGLang() || e.SGLang == nil || *e.SGLang != want {
		t.Fatalf("engine %q, flags %+v", e.EngineType, e.SGLang)
	}
	p, err := e.enginePreset()
	if err != nil || p.EngineType != replica.EngineSGLang || p.SGLang == nil || *p.SGLang != want {
		t.Errorf("preset %q %+v, %v", p.EngineType, p.SGLang, err)
	}
	// Absent and null blocks, and an explicit vllm, are accepted.
	for _, fields := range []string{`, "engine_type": "sglang"`, `, "engine_type": "sglang", "sglang": null`, `, "engine_type": "vllm", "engine": {"max_num_seqs": 8}`} {
		if _, err := Parse([]byte(doc(fields)), "runs.json"); err != nil {
			t.Errorf("%s: %v", fields, err)
		}
	}
	const where = "runs.json: experiments[0] (s): "
	bad := []struct{ fields, want string }{
		{`, "engine_type": "sglang", "engine": {"max_num_seqs": 8}`, "engine.max_num_seqs: a vLLM engine argument, but engine_type is sglang: give sglang.max_running_requests"},
		{`, "engine_type": "sglang", "engine": {"total_gpu_kv_blocks": 7463}`, "engine.total_gpu_kv_blocks: a vLLM engine argument, but engine_type is sglang: give sglang.max_total_tokens"},
		{`, "engine_type": "sglang", "engine": {"cpu_kv_blocks": 100}`, "engine.cpu_kv_blocks: a vLLM engine argument, but engine_type is sglang: vLLM's CPU KV tier"},
		{`, "engine_type": "sglang", "dp": 2`, "dp: 2: an SGLang run is one engine here"},
		{`, "engine_type": "tgi"`, `engine_type: unknown engine "tgi" (have vllm, sglang)`},
		{`, "sglang": {"page_size": 4}`, "sglang: SGLang's server flags, but the run's engine_type is vllm"},
		{`, "engine_type": "sglang", "sglang": {"page_sise": 4}`, `sglang: unknown field "page_sise"; did you mean page_size?`},
		{`, "engine_type": "sglang", "sglang": {"page_size": 0}`, "sglang.page_size: 0 is not SGLang's default"},
		{`, "engine_type": "sglang", "sglang": {"mem_fraction_static": 0}`, "sglang.mem_fraction_static: 0 is not SGLang's default"},
		{`, "engine_type": "sglang", "sglang": {"page_size": -4}`, "sglang.page_size: must be at least 1"},
		{`, "engine_type": "sglang", "sglang": {"page_size": 1.5}`, "runs.json: json: cannot unmarshal number 1.5 into Go struct field SGLangFlags.experiments.sglang.page_size"},
		{`, "engine_type": "sglang", "sglang": {"schedule_policy": ""}`, "sglang.schedule_policy: empty"},
		{`, "engine_type": "sglang", "sglang": {"schedule_policy": "lof"}`, `sglang.schedule_policy: "lof" is not modelled`},
		{`, "engine_type": "sglang", "sglang": [1]`, "runs.json: json: cannot unmarshal array"},
		// What SGLang itself would refuse: a KV pool under two pages.
		{`, "engine_type": "sglang", "sglang": {"max_total_tokens": 1}`, "sglang: sglang config: preset"},
	}
	for _, c := range bad {
		_, err := Parse([]byte(doc(c.fields)), "runs.json")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "runs.json: ") {
			t.Errorf("%s: error %v, want one naming the file and saying %q", c.fields, err, c.want)
			continue
		}
		if !strings.HasPrefix(c.want, "runs.json") && !strings.HasPrefix(err.Error(), where) {
			t.Errorf("%s: error %q does not name the experiment", c.fields, err)
		}
	}
}

// cachedTokens simulates run e (calibration c, seed 1) and returns each
// completed request's prompt-cache hit (tokens) and prompt length.
func cachedTokens(t *testing.T, e *Experiment) (hits, prompts []int) {
	t.Helper()
	spec, err := Spec(e, replica.DefaultCalibration(), Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = scenario.RunContext(context.Background(), spec, router(e), scenario.Hooks{OnRecord: func(r *sim.Record) {
		if r.Outcome == sim.Completed {
			hits, prompts = append(hits, r.CachedTokens), append(prompts, r.PromptTokens)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	return hits, prompts
}

// TestSGLangResultsDir: the SGLang results directory is read as an SGLang
// run and simulated on an SGLang replica. The evidence is the engine's own
// behaviour on the run's shared_prefix prompts (10 groups × 10 prompts, a
// system prompt shared within each group, 300 requests so that prompts
// repeat): SGLang's radix cache reuses prefixes token by token (page_size
// 1), so a group's system prompt is reused whole, a hit that is no
// multiple of 16, and a repeated prompt of N tokens hits N − 1 (the last
// token is always computed). The same run on vLLM (block_size 16) reuses
// whole blocks only: every hit is a multiple of 16. The knee is
// estimated from the SGLang config and named by SGLang's flags, and the
// report names the engine.
func TestSGLangResultsDir(t *testing.T) {
	f, err := LoadInputs([]string{sglangFixture}, "")
	if err != nil {
		t.Fatal(err)
	}
	e := &f.Experiments[0]
	if !e.IsSGLang() || e.SGLang == nil || e.SGLang.MaxRunningRequests != 128 || e.SGLang.ChunkedPrefillSize != 2048 {
		t.Fatalf("engine %q, flags %+v", e.EngineType, e.SGLang)
	}
	spec, err := Spec(e, replica.DefaultCalibration(), Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(spec.Fleet) != 1 || spec.Fleet[0].Preset.EngineTypeOf() != replica.EngineSGLang {
		t.Fatalf("fleet %+v", spec.Fleet)
	}
	hits, prompts := cachedTokens(t, e)
	if len(hits) != 300 {
		t.Fatalf("%d requests completed, want 5 × 20 + 10 × 20 = 300", len(hits))
	}
	whole, unaligned := 0, 0
	for i, h := range hits {
		if h == prompts[i]-1 {
			whole++
		}
		if h%16 != 0 {
			unaligned++
		}
	}
	// 300 requests over 100 prompts: at least 200 repeat one.
	if whole < 200 || unaligned == 0 {
		t.Errorf("SGLang: %d hits of N − 1 tokens (want ≥ 200), %d not a multiple of 16 (want some)", whole, unaligned)
	}
	v := *e
	v.EngineType, v.SGLang = "", nil
	vh, _ := cachedTokens(t, &v)
	for _, h := range vh {
		if h%16 != 0 {
			t.Fatalf("vLLM: a hit of %d tokens, not whole blocks of 16", h)
		}
	}

	rep, err := Validate(context.Background(), f, sglangFixture, replica.DefaultCalibration(), Options{Seed: 1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	res := rep.Results[0]
	if res.Knee == nil || !slices.Contains(kneeNames["sglang"], res.Knee.Binding) {
		t.Errorf("knee %+v: want one named by SGLang's flags", res.Knee)
	}
	csv := string(rep.CSV())
	if !strings.Contains(csv, "\n"+sglangFixture+",summary,e2e_mean,") || !strings.Contains(csv, ","+res.Knee.Binding+",sglang\n") {
		t.Errorf("latency.csv:\n%s", csv)
	}
	if md := string(rep.Markdown()); !strings.Contains(md, "| "+sglangFixture+" | sglang | H100 | 1 |") {
		t.Errorf("latency.md:\n%s", md)
	}
}

// kneeNames are the binding limits of each engine's knee.
var kneeNames = map[string][]string{
	"vllm":   {"max_num_seqs", "kv_blocks", "max_num_batched_tokens", "compute"},
	"sglang": {"max_running_requests", "kv_tokens", "compute"},
}

// TestCalibrateSGLangAndVLLM: calibrate fits one set of coefficients on a
// vLLM run and an SGLang run together, simulating each on its own engine.
func TestCalibrateSGLangAndVLLM(t *testing.T) {
	f, err := LoadInputs([]string{sglangFixture, filepath.Join("testdata", "results", "llama-2-7b-tp1-codegen")}, "")
	if err != nil {
		t.Fatal(err)
	}
	// The fit's evaluations on runs shortened to 5 s stages; the reported
	// predictions are of the whole runs, as recorded.
	res, err := Calibrate(context.Background(), f, CalibrateOptions{Start: replica.DefaultCalibration(), Budget: 2, StageLimit: 5, Workers: 2, Name: "t", Source: "mix"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Fitted) != 2 || len(res.Results) != 2 {
		t.Fatalf("fitted %d runs, %d results", len(res.Fitted), len(res.Results))
	}
	engines := map[string]string{}
	for _, r := range res.Results {
		e := r.Experiment
		spec, err := Spec(e, res.Calibration, Options{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		engines[e.EngineTypeOf()] = spec.Fleet[0].Preset.EngineTypeOf()
		// 300 requests in the SGLang run; 5 × 600 + 10 × 600 in the vLLM one.
		want := map[string]int{"sglang": 300, "vllm": 9000}[e.EngineTypeOf()]
		if r.Completed["summary"] != want || r.Knee == nil {
			t.Fatalf("%s: %d requests completed (want %d), knee %+v", e.ID, r.Completed["summary"], want, r.Knee)
		}
		// Each knee is estimated from its own engine's limits, named by
		// its flags.
		if names := kneeNames[e.EngineTypeOf()]; !slices.Contains(names, r.Knee.Binding) {
			t.Errorf("%s: binding %q, want one of %v", e.ID, r.Knee.Binding, names)
		}
	}
	if engines["sglang"] != "sglang" || engines["vllm"] != "vllm" {
		t.Errorf("engines simulated %v", engines)
	}
}
