package replica

import (
	"fmt"
	"strings"
	"testing"
)

// TestMoEKernelClasses works vLLM's fused-MoE kernel classes by hand for
// a top-2 mixture of experts (Mixtral) under max_num_seqs 128 and a 2,048
// token budget: CUDA graphs up to min(2·128, 512, 2048) = 256 tokens, and
// the profiling pass at 2,048 tokens (key 2048, index 15; 2048·2 = 4096 is
// divisible by 16: class 31).
func TestMoEKernelClasses(t *testing.T) {
	k := newMoEKernels(2, vllmCUDAGraphSizes(128, 2048), 2048)
	if k.largest != 256 || k.warm != 31 {
		t.Fatalf("largest %d, warm class %d; want 256, 31", k.largest, k.warm)
	}
	stall := int64(2 * MoEKernelCompileMs * 1e6)
	for _, c := range []struct {
		n     int
		class int
		ok    bool
	}{
		{1, 0, false},    // padded to a captured graph
		{256, 0, false},  // the largest graph
		{257, 22, true},  // key 256 (index 11); 514 % 16 = 2
		{600, 25, true},  // key 512 (|600−512| = 88 < 424); 1200 % 16 = 0
		{601, 24, true},  // key 512; 1202 % 16 = 2
		{768, 25, true},  // a tie of 512 and 1024 goes to the first key, 512; 1536 % 16 = 0
		{769, 26, true},  // key 1024 (index 13); 1538 % 16 = 2
		{2047, 30, true}, // key 2048 (index 15); 4094 % 16 = 14
		{2048, 0, false}, // the profiling pass's class
		{5000, 35, true}, // beyond the keys: 4096 (index 17); 10000 % 16 = 0
	} {
		class, s, ok := k.class(c.n)
		if ok != c.ok || (ok && (class != c.class || s != stall)) {
			t.Errorf("%d tokens: class %d, stall %d, %v; want %d, %d, %v", c.n, class, s, ok, c.class, stall, c.ok)
		}
	}
	// A budget at most the largest graph: no step runs eagerly.
	small := newMoEKernels(2, vllmCUDAGraphSizes(256, 512), 512)
	for n := 1; n <= 512; n++ {
		if _, _, ok := small.class(n); ok {
			t.Fatalf("%d tokens compile with every step under a graph", n)
		}
	}
}

// compilingSteps is a step model of 1 ms steps whose steps above 100
// tokens compile class n%3 for 5 ms at first use.
type compilingSteps struct{ Linear }

func (compilingSteps) compilesKernels() bool { return true }

func (compilingSteps) compileClass(n int) (int, int64, bool) {
	if n <= 100 {
		return 0, 0, false
	}
	return n % 3, 5 * ms, true
}

// TestEngineCompilesOnce: an engine pays a class's compile on the first
// step of that class only, and counts it.
func TestEngineCompilesOnce(t *testing.T) {
	e, err := NewEngine(Config{BlockSize: 16, NumGPUBlocks: 400, MaxNumBatchedTokens: 512, MaxNumSeqs: 8, CheckInvariants: true},
		&compilingSteps{Linear{StepUs: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{t: t, e: e}
	durations := func(prompt int) (first int64) {
		r := &Request{ID: int64(prompt), Prompt: seq(prompt*1000, prompt), OutputLen: 1}
		if err := e.Add(r, c.now); err != nil {
			t.Fatal(err)
		}
		start := c.now
		c.step()
		return c.now - start
	}
	for i, want := range []struct {
		prompt int
		dur    int64
	}{
		{50, 1 * ms},  // under 100 tokens: nothing compiles
		{301, 6 * ms}, // class 1: compiled now
		{304, 1 * ms}, // 304 % 3 = 1: compiled by the 301-token step
		{302, 6 * ms}, // class 2: compiled now
		{305, 1 * ms}, // class 2 again
	} {
		if got := durations(want.prompt); got != want.dur {
			t.Errorf("step %d (%d tokens): %d ns, want %d", i, want.prompt, got, want.dur)
		}
	}
	if got := e.Stats().KernelCompiles; got != 2 {
		t.Errorf("KernelCompiles %d, want 2", got)
	}
}

// TestPresetCompilesMoEKernels: a vLLM replica of an unquantised mixture
// of experts compiles fused-MoE classes at first use; a dense model, FP8
// experts, a warm kernel cache and an SGLang replica do not.
func TestPresetCompilesMoEKernels(t *testing.T) {
	compiles := func(model, gpu string, tp int, edit func(*Preset)) bool {
		t.Helper()
		p, err := NewPreset(mustModel(t, model), mustGPU(t, gpu), tp)
		if err != nil {
			t.Fatal(err)
		}
		p.Engine.MaxNumSeqs, p.Engine.MaxNumBatchedTokens = 128, 2048
		if edit != nil {
			edit(&p)
		}
		m, err := p.Model()
		if err != nil {
			t.Fatal(err)
		}
		k, ok := m.(kernelCompiler)
		if !ok {
			return false
		}
		_, _, ok = k.compileClass(600)
		if ok != k.compilesKernels() {
			t.Errorf("%s: compiles at 600 tokens %v, compilesKernels %v", model, ok, k.compilesKernels())
		}
		return ok
	}
	if !compiles("mistralai/Mixtral-8x7B-v0.1", "H100", 2, nil) {
		t.Error("Mixtral on vLLM compiles nothing at 600 tokens")
	}
	if !compiles("mistralai/Mixtral-8x7B-v0.1", "H100", 2, func(p *Preset) { p.StepScale = 1.1 }) {
		t.Error("a scaled Mixtral model hides its compiles")
	}
	if compiles("mistralai/Mixtral-8x7B-v0.1", "H100", 2, func(p *Preset) { p.Engine.KernelCacheWarm = true }) {
		t.Error("a warm kernel cache compiles")
	}
	if compiles("mistralai/Mixtral-8x7B-v0.1", "H100", 2, func(p *Preset) { p.EngineType = EngineSGLang }) {
		t.Error("an SGLang replica compiles vLLM's kernels")
	}
	if compiles("meta-llama/Llama-3.1-8B-Instruct", "H100", 1, nil) {
		t.Error("a dense model compiles fused-MoE kernels")
	}
	if compiles("RedHatAI/Llama-4-Scout-17B-16E-Instruct-FP8-dynamic", "H100", 2, nil) {
		t.Error("FP8 experts compile the unquantised kernel")
	}
}

// TestPresetFileKernelCacheWarm: kernel_cache_warm is an engine argument
// of a preset file, and a misspelling of it is refused by name.
func TestPresetFileKernelCacheWarm(t *testing.T) {
	const file = "model: mistralai/Mixtral-8x7B-v0.1\ngpu: H100\ntensor_parallel_size: 2\nengine: {max_num_seqs: 128, max_num_batched_tokens: 2048, %s: true}\n"
	for _, c := range []struct {
		key      string
		compiles bool
		err      string
	}{
		{"enable_prefix_caching", true, ""},
		{"kernel_cache_warm", false, ""},
		{"kernel_cache_warmed", false, "kernel_cache_warmed"},
	} {
		p, err := ParsePreset([]byte(fmt.Sprintf(file, c.key)), "mixtral.yaml", ".", nil)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want one naming %s", c.key, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.key, err)
		}
		m, err := p.Model()
		if err != nil {
			t.Fatal(err)
		}
		k, ok := m.(kernelCompiler)
		if !ok {
			t.Fatalf("%s: model %T compiles no kernels", c.key, m)
		}
		if _, _, compiles := k.compileClass(600); compiles != c.compiles {
			t.Errorf("%s: compiles at 600 tokens %v, want %v", c.key, !c.compiles, c.compiles)
		}
	}
}
