package replica

import (
	"math"
	"strings"
	"testing"
)

// stepFunc is a step-time model from a function of the batch.
type stepFunc func(batch []BatchEntry) int64

func (f stepFunc) StepTime(batch []BatchEntry) int64 { return f(batch) }

// constantStep takes 10 ms whatever the batch; linearStep 1 ms per decode.
var (
	constantStep = stepFunc(func([]BatchEntry) int64 { return 10e6 })
	linearStep   = stepFunc(func(b []BatchEntry) int64 {
		n := 0
		for _, e := range b {
			if e.Decode {
				n++
			}
		}
		return int64(n) * 1e6
	})
)

// TestSustainableRate: the knee of each limit, worked by hand from
// λ(B) = B/(O·t).
func TestSustainableRate(t *testing.T) {
	big := Config{MaxNumSeqs: 64, MaxNumBatchedTokens: 1 << 20, NumGPUBlocks: 1 << 20, BlockSize: 16}
	for _, tc := range []struct {
		name    string
		cfg     Config
		m       StepModel
		mix     Mix
		rate    float64
		binding string
	}{
		// 10 ms steps, 100-token outputs: each running request completes
		// every second, so 64 slots carry 64 requests/s.
		{"slots", big, constantStep, Mix{PromptTokens: 100, OutputTokens: 100}, 64, LimitMaxNumSeqs},
		// 100 usable blocks of 16 = 1600 tokens; a request holds 100 +
		// 100/2 = 150 tokens plus half a block: 1600/158 = 10.1 requests.
		{"KV blocks", Config{MaxNumSeqs: 64, MaxNumBatchedTokens: 1 << 20, NumGPUBlocks: 101, BlockSize: 16}, constantStep,
			Mix{PromptTokens: 100, OutputTokens: 100}, 10, LimitKVBlocks},
		// 500 uncached prompt tokens per 100 outputs: 5 prefill tokens per
		// step per request, so a 100-token budget runs 100/6 = 16.7.
		{"token budget", Config{MaxNumSeqs: 64, MaxNumBatchedTokens: 100, NumGPUBlocks: 1 << 20, BlockSize: 16}, constantStep,
			Mix{PromptTokens: 500, OutputTokens: 100}, 16, LimitMaxNumBatchedTokens},
		// ... but with 400 of the 500 cached, 1 per step: 100/2 = 50.
		{"token budget, cached", Config{MaxNumSeqs: 64, MaxNumBatchedTokens: 100, NumGPUBlocks: 1 << 20, BlockSize: 16}, constantStep,
			Mix{PromptTokens: 500, CachedTokens: 400, OutputTokens: 100}, 50, LimitMaxNumBatchedTokens},
		// 1 ms per running request: B/(100·B·1 ms) = 10 requests/s at any
		// batch; no limit on the batch would help.
		{"compute", big, linearStep, Mix{PromptTokens: 100, OutputTokens: 100}, 10, LimitCompute},
	} {
		k, err := SustainableRate(tc.cfg, tc.m, tc.mix)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if math.Abs(k.MaxRate-tc.rate) > 1e-9 || k.Binding != tc.binding {
			t.Errorf("%s: %.4f requests/s bound by %s, want %.4f by %s", tc.name, k.MaxRate, k.Binding, tc.rate, tc.binding)
		}
	}
	// The calibrated model: a Llama-3.1-8B on an H100 with 128 slots and
	// short cached prompts is bound by its slots, and its rate is the
	// slots over the output's decode time at that batch.
	m, g := mustModel(t, "meta-llama/Llama-3.1-8B-Instruct"), mustGPU(t, "H100")
	cm, err := NewCalibratedModel(DefaultCalibration().Coefficients, m, &g, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{MaxNumSeqs: 128, MaxNumBatchedTokens: 8192, NumGPUBlocks: 30000, BlockSize: 16}
	mix := Mix{PromptTokens: 560, CachedTokens: 544, OutputTokens: 248}
	k, err := SustainableRate(cfg, cm, mix)
	if err != nil {
		t.Fatal(err)
	}
	batch := repeat(BatchEntry{NewTokens: 1, Context: 684, Decode: true}, 128)
	batch = append(batch, BatchEntry{NewTokens: 8, Context: 544}) // 128·16/248 = 8.3 prefill tokens
	want := 128 / (248 * float64(cm.StepTime(batch)) / 1e9)
	if k.Binding != LimitMaxNumSeqs || math.Abs(k.MaxRate-want) > 1e-9 {
		t.Errorf("8B/H100: %.3f requests/s bound by %s, want %.3f by max_num_seqs", k.MaxRate, k.Binding, want)
	}
	if _, err := SustainableRate(cfg, cm, Mix{PromptTokens: 10, CachedTokens: 20, OutputTokens: 5}); err == nil || !strings.Contains(err.Error(), "cached ≤ prompt") {
		t.Errorf("bad mix: %v", err)
	}
}

// TestStepScale: a preset's StepScale multiplies every step its model
// gives, and names itself in the step model's id.
func TestStepScale(t *testing.T) {
	p, err := LookupPreset("llama-3.1-8b-h100")
	if err != nil {
		t.Fatal(err)
	}
	base, err := p.Model()
	if err != nil {
		t.Fatal(err)
	}
	p.StepScale = 1.25
	scaled, err := p.Model()
	if err != nil {
		t.Fatal(err)
	}
	batch := repeat(BatchEntry{NewTokens: 1, Context: 700, Decode: true}, 40)
	if got, want := scaled.StepTime(batch), int64(float64(base.StepTime(batch))*1.25+0.5); got != want {
		t.Errorf("scaled step %d ns, want %d", got, want)
	}
	if id := p.StepModelID(); !strings.HasSuffix(id, " ×1.25") {
		t.Errorf("step model id %q does not name the scale", id)
	}
}
