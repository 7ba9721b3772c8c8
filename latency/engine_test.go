package latency

import (
	"strings"
	"testing"
)

func TestParseEngine(t *testing.T) {
	e, err := ParseEngine([]byte(`# vLLM's names, with - or _
model: meta-llama/Llama-3.1-8B-Instruct
gpu: nvidia a100-sxm4-80gb
max_num_seqs: 256
max-num-batched-tokens: 4096
max-model-len: 8192
block-size: 32
gpu-memory-utilization: 0.85
enable-prefix-caching: false
num-gpu-blocks-override: 20000
total-gpu-kv-blocks: 20000
data-parallel-size: 1
`), "engine.yaml", "")
	if err != nil {
		t.Fatal(err)
	}
	if e.Model != "meta-llama/Llama-3.1-8B-Instruct" || e.GPU != "A100-80GB" || e.TensorParallelSize != 1 || e.MaxNumSeqs != 256 ||
		e.MaxNumBatchedTokens != 4096 || e.MaxModelLen != 8192 || e.BlockSize != 32 || e.GPUMemoryUtilization != 0.85 ||
		e.EnablePrefixCaching == nil || *e.EnablePrefixCaching || e.NumGPUBlocks != 20000 || e.ModelArch != nil || e.ID != "" {
		t.Errorf("%+v", e)
	}
	// The least: model and GPU; the rest are vLLM's defaults.
	e, err = ParseEngine([]byte("model: meta-llama/Llama-2-7b-hf\ngpu: H100\n"), "engine.yaml", "")
	if err != nil || e.TensorParallelSize != 1 || e.MaxNumSeqs != 0 || e.EnablePrefixCaching != nil {
		t.Errorf("%+v, %v", e, err)
	}
	bad := map[string]string{
		"":                                  "engine.yaml: empty file",
		"model: meta-llama/Llama-2-7b-hf\n": "engine.yaml:1: gpu: missing",
		"gpu: H100\n":                       "engine.yaml:1: model: missing",
		"model: 7\ngpu: H100\n":             "engine.yaml:1: model: expected a non-empty string, got 7",
		"model: meta-llama/Llama-2-7b-hf\ngpu: H100\ntensor-parallel-size: 0\n":     "engine.yaml:3: tensor-parallel-size: 0: must be at least 1",
		"model: meta-llama/Llama-2-7b-hf\ngpu: H100\nblock-size: 16.5\n":            "engine.yaml:3: block-size: expected a whole number, got 16.5",
		"model: meta-llama/Llama-2-7b-hf\ngpu: H100\nenable-prefix-caching: yes\n":  "engine.yaml:3: enable-prefix-caching: expected true or false, got \"yes\"",
		"model: meta-llama/Llama-2-7b-hf\ngpu: H100\nnum-gpu-blocks-override: 1\n":  "engine.yaml:3: num-gpu-blocks-override: 1: must be at least 2",
		"model: meta-llama/Llama-2-7b-hf\ngpu: H100\npipeline-parallel-size: 2\n":   "engine.yaml:3: pipeline-parallel-size: 2: pipeline parallelism is not simulated",
		"model: meta-llama/Llama-2-7b-hf\ngpu: H100\nkv-cache-dtype: fp8\n":         "engine.yaml:3: kv-cache-dtype: unknown key",
		"model: meta-llama/Llama-2-7b-hf\ngpu: H100\ngpu-memory-utilisation: 0.9\n": "did you mean gpu-memory-utilization?",
		"model: meta-llama/Llama-2-7b-hf\ngpu: &g H100\nid: *g\n":                   "engine.yaml:3: id: aliases are not supported",
		"model: meta-llama/Llama-2-7b-hf\ngpu: H100\n? [a]\n: 1\n":                  "engine.yaml:3: keys must be plain strings",
	}
	for in, want := range bad {
		_, err := ParseEngine([]byte(in), "engine.yaml", "")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one saying %q", in, err, want)
		}
	}
}

// FuzzParseEngine: any engine file is read or refused with the file named,
// never a panic.
func FuzzParseEngine(f *testing.F) {
	f.Add([]byte("model: meta-llama/Llama-2-7b-hf\ngpu: H100\ntensor-parallel-size: 2\nmax-num-seqs: 64\n"))
	f.Add([]byte("model: mistralai/Mixtral-8x7B-v0.1\ngpu: H100\nenable_prefix_caching: false\ntotal_gpu_kv_blocks: 9000\n"))
	f.Add([]byte("model: x\ngpu: &a H100\n<<: {b: 1}\n"))
	f.Add([]byte("- 1\n- [2, {3: 4}]\n"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := ParseEngine(data, "engine.yaml", dir)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "engine.yaml") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if e.Model == "" || e.GPU == "" || e.TensorParallelSize < 1 {
			t.Fatalf("%+v", e)
		}
	})
}

// TestEngineFileKernelCacheWarm: kernel-cache-warm reaches the replica's
// engine arguments, so a Mixtral run on a warm pod compiles nothing; it
// must be a boolean and is refused in an SGLang run's file.
func TestEngineFileKernelCacheWarm(t *testing.T) {
	const head = "model: mistralai/Mixtral-8x7B-v0.1\ngpu: H100\ntensor-parallel-size: 2\n"
	e, err := ParseEngine([]byte(head+"kernel-cache-warm: true\n"), "engine.yaml", "")
	if err != nil || !e.KernelCacheWarm {
		t.Fatalf("%+v, %v", e, err)
	}
	for _, warm := range []bool{false, true} {
		x := &Experiment{ID: "x", Model: "mistralai/Mixtral-8x7B-v0.1", Hardware: "H100", TP: 2,
			Engine: Engine{MaxNumSeqs: 128, MaxNumBatchedTokens: 2048, KernelCacheWarm: warm}}
		p, err := x.enginePreset()
		if err != nil {
			t.Fatal(err)
		}
		if p.Engine.KernelCacheWarm != warm {
			t.Errorf("warm %v: the preset's kernel_cache_warm is %v", warm, p.Engine.KernelCacheWarm)
		}
	}
	for in, want := range map[string]string{
		head + "kernel-cache-warm: yes please\n":                "engine.yaml:4: kernel-cache-warm",
		head + "engine-type: sglang\nkernel-cache-warm: true\n": "engine.yaml:5: kernel-cache-warm",
	} {
		if _, err := ParseEngine([]byte(in), "engine.yaml", ""); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one starting %q", in, err, want)
		}
	}
}
