package sglang

import (
	"math"
	"testing"

	"github.com/eppsim/eppsim/arch"
	"github.com/eppsim/eppsim/replica"
)

func preset(t *testing.T, model, gpu string, tp int) replica.Preset {
	t.Helper()
	m, err := arch.LookupModel(model)
	if err != nil {
		t.Fatal(err)
	}
	g, err := arch.DefaultGPUs().Lookup(gpu)
	if err != nil {
		t.Fatal(err)
	}
	p, err := replica.NewPreset(m, g, tp)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConfigForWorkedExample checks A.1's worked example: Qwen3-32B, TP2
// on H100, mem_fraction_static 0.9 → ≈ 330k tokens. The spec's figure is
// itself an estimate from rounded memory terms (79 GiB free, 30.5 GiB
// weights, 40 GiB rest), each good to about ±0.5 GiB of 40: the tolerance
// is 3%.
func TestConfigForWorkedExample(t *testing.T) {
	c, err := ConfigFor(preset(t, "Qwen/Qwen3-32B", "H100", 2), replica.SGLangFlags{MemFractionStatic: 0.9})
	if err != nil {
		t.Fatal(err)
	}
	if d := math.Abs(float64(c.MaxTotalNumTokens)/330000 - 1); d > 0.03 {
		t.Fatalf("max_total_num_tokens %d, want 330k ± 3%%", c.MaxTotalNumTokens)
	}
	// Defaults (C, A.1): page 1, chunk 8192 on an 80 GB GPU, 16384
	// prefill tokens, fcfs, ratio 0.7; context 40960 → max_num_reqs
	// min(max(⌊330k/40960·512⌋, 2048), 4096) = 4096 and max_running =
	// min(max_total//2, 4096) = 4096.
	if c.PageSize != 1 || c.ChunkedPrefillSize != 8192 || c.MaxPrefillTokens != 16384 || c.InitNewTokenRatio != 0.7 ||
		c.DecodeLogInterval != 40 || c.MaxRunningRequests != 4096 || c.MaxNumReqs != 4096 || c.KVEvents {
		t.Fatalf("defaults %+v", c)
	}
	t.Logf("Qwen3-32B TP2 H100 mfs 0.9: %d tokens, context %d", c.MaxTotalNumTokens, c.ContextLen)
}

func TestConfigForFlags(t *testing.T) {
	p := preset(t, "meta-llama/Llama-3.1-8B-Instruct", "H100", 1)
	cases := []struct {
		name  string
		f     replica.SGLangFlags
		check func(Config) bool
	}{
		{"page floor and cap", replica.SGLangFlags{PageSize: 16, MaxTotalTokens: 100007}, func(c Config) bool { return c.MaxTotalNumTokens == 100000 && c.PageSize == 16 }},
		{"max running flag", replica.SGLangFlags{MaxRunningRequests: 64}, func(c Config) bool { return c.MaxRunningRequests == 64 && c.MaxNumReqs == 64 }},
		{"chunking off", replica.SGLangFlags{ChunkedPrefillSize: -1}, func(c Config) bool { return c.ChunkedPrefillSize == -1 }},
		{"lpm", replica.SGLangFlags{SchedulePolicy: "lpm"}, func(c Config) bool { return !c.KVEvents && c.SchedulePolicy == PolicyLPM }},
		// Llama-3.1-8B: context 131072, ~400k tokens → 1562 → clamp 2048 (A.1).
		{"slot pool clamp", replica.SGLangFlags{}, func(c Config) bool { return c.MaxNumReqs == 2048 && c.MaxRunningRequests == 2048 }},
	}
	for _, tc := range cases {
		c, err := ConfigFor(p, tc.f)
		if err != nil || !tc.check(c) {
			t.Fatalf("%s: %+v, %v", tc.name, c, err)
		}
	}
	if _, err := ConfigFor(p, replica.SGLangFlags{MemFractionStatic: 0.1}); err == nil {
		t.Fatal("mem_fraction_static 0.1 leaves no KV pool, want an error")
	}
}

func TestMemFractionStaticDefault(t *testing.T) {
	// C: H100 80 GB (81559 MiB) TP1: reserved 512 + 1.5·8192 + 2·256 + 128 =
	// 13440 → round(68119/81559, 3) = 0.835.
	if got := MemFractionStaticDefault(81559, 1, 8192); got != 0.835 {
		t.Fatalf("H100 TP1: %g, want 0.835", got)
	}
	if got := MemFractionStaticDefault(0, 1, 8192); got != 0.88 {
		t.Fatalf("unknown GPU: %g, want 0.88", got)
	}
	for _, tc := range []struct {
		mib  float64
		want int
	}{{16 * 1024, 2048}, {40 * 1024, 4096}, {81559, 8192}, {140 * 1024, 8192}, {192 * 1024, 16384}, {0, 4096}} {
		if got := ChunkedPrefillDefault(tc.mib); got != tc.want {
			t.Fatalf("chunk default for %g MiB: %d, want %d", tc.mib, got, tc.want)
		}
	}
}
