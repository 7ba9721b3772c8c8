package sglang

import (
	"math"
	"testing"

	"github.com/eppsim/eppsim/replica"
)

// TestSustainableRate works the SGLang knee by hand with every step 10 ms
// (replica.Linear with a constant term only): 1,000-token prompts without
// hits, 100 output tokens, chunk 8,192 (8 prompts a prefill step, 1.25 ms
// of prefill each).
//   - 64 running requests, an ample pool: λ(64) = 1/(100·0.01/64 + 0.00125)
//     = 59.26/s, bound by max_running_requests (λ(32) = 30.77: doubling
//     the batch nearly doubles it).
//   - a pool of 30,000 tokens: B ≤ 30000/(1000 + 50 + 0.5) = 28.56, so
//     λ(28) = 1/(1/28 + 0.00125) = 27.05/s, bound by the token pool.
//   - a 20,000-token prompt chunked: 3 prefill steps (30 ms) per request.
func TestSustainableRate(t *testing.T) {
	m := &replica.Linear{StepUs: 10_000}
	base := Config{MaxTotalNumTokens: 10_000_000, PageSize: 1, MaxRunningRequests: 64, ChunkedPrefillSize: 8192, MaxPrefillTokens: 16384}
	pool := base
	pool.MaxTotalNumTokens = 30_000
	for _, c := range []struct {
		name    string
		cfg     Config
		mix     replica.Mix
		rate    float64
		batch   float64
		binding string
	}{
		{"slots", base, replica.Mix{PromptTokens: 1000, OutputTokens: 100}, 1 / (1.0/64 + 0.00125), 64, LimitMaxRunningRequests},
		{"pool", pool, replica.Mix{PromptTokens: 1000, OutputTokens: 100}, 1 / (1.0/28 + 0.00125), 28, LimitTokenPool},
		{"chunked", base, replica.Mix{PromptTokens: 20000, OutputTokens: 100}, 1 / (1.0/64 + 0.03), 64, LimitMaxRunningRequests},
	} {
		k, err := SustainableRate(c.cfg, m, c.mix)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if math.Abs(k.MaxRate/c.rate-1) > 1e-9 || k.Batch != c.batch || k.Binding != c.binding {
			t.Errorf("%s: rate %.4f batch %g binding %s, want %.4f, %g, %s", c.name, k.MaxRate, k.Batch, k.Binding, c.rate, c.batch, c.binding)
		}
	}
	if _, err := SustainableRate(base, m, replica.Mix{PromptTokens: 0, OutputTokens: 1}); err == nil {
		t.Error("an empty prompt was estimated")
	}
}
