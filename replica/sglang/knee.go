package sglang

import (
	"fmt"
	"math"

	"github.com/eppsim/eppsim/replica"
)

// Limits an SGLang engine's knee names (replica.Knee.Binding): the running
// requests SGLang admits, its token pool, or compute (replica.LimitCompute).
const (
	LimitMaxRunningRequests = "max_running_requests"
	LimitTokenPool          = "kv_tokens"
)

// SustainableRate is replica.SustainableRate for an SGLang engine
// (docs/latency.md "The knee", docs/replicas.md "SGLang replicas"): a step
// prefills or decodes, never both (A.7), so with B requests running the
// engine spends O decode steps of B sequences per B requests and, apart,
// the prefill of each one's uncached prompt, P − C tokens (at least one:
// the N − 1 rule leaves the last token to compute), in batches of as many
// prompts as a chunk takes (chunked_prefill_size, or max_prefill_tokens
// without chunking; a longer prompt in chunks of that size):
//
//	λ(B) = 1 / (O·t_decode(B)/B + t_prefill)
//
// B is bounded by max_running_requests and by the token pool (B requests
// of P + O/2 tokens, half a page each besides); there is no step token
// budget on decodes. The binding limit is the one that bounds B, or
// compute when doubling the batch from half the bound raises λ by less
// than 10%, as for vLLM. An estimate of the mean: SGLang's admission
// reserves future decode tokens (new_token_ratio), so its queue starts to
// grow somewhat below the pool limit.
func SustainableRate(cfg Config, m replica.StepModel, mix replica.Mix) (replica.Knee, error) {
	p, c, o := mix.PromptTokens, mix.CachedTokens, mix.OutputTokens
	switch {
	case !(o >= 1) || !(p >= 1) || c < 0 || c > p || math.IsInf(p+o, 0):
		return replica.Knee{}, fmt.Errorf("knee: a mix needs prompt ≥ 1, 0 ≤ cached ≤ prompt, output ≥ 1 tokens (got %v, %v, %v)", p, c, o)
	case cfg.MaxRunningRequests < 1 || cfg.MaxTotalNumTokens < 2 || cfg.PageSize < 1:
		return replica.Knee{}, fmt.Errorf("knee: SGLang config without limits (max_running_requests %d, max_total_num_tokens %d, page %d)",
			cfg.MaxRunningRequests, cfg.MaxTotalNumTokens, cfg.PageSize)
	}
	kvPer := mix.KVTokensPerSequence
	if kvPer <= 0 {
		kvPer = p + o/2
	}
	k := replica.Knee{
		SeqLimit:   float64(cfg.MaxRunningRequests),
		KVLimit:    float64(cfg.MaxTotalNumTokens) / (kvPer + float64(cfg.PageSize)/2),
		TokenLimit: math.Inf(1),
	}
	limit, binding := k.SeqLimit, LimitMaxRunningRequests
	if k.KVLimit < limit {
		limit, binding = k.KVLimit, LimitTokenPool
	}
	prefill, err := prefillSeconds(cfg, m, max(p-c, 1), int(math.Round(c)))
	if err != nil {
		return replica.Knee{}, err
	}
	ctx := int(math.Round(p + o/2))
	var buf []replica.BatchEntry
	rate := func(b int) (float64, float64) {
		for len(buf) < b {
			buf = append(buf, replica.BatchEntry{NewTokens: 1, Context: ctx, Decode: true})
		}
		t := float64(m.StepTime(buf[:b])) / 1e9
		per := o*t/float64(b) + prefill
		if per <= 0 {
			return math.Inf(1), t
		}
		return 1 / per, t
	}
	best, bestB, bestT, compute := replica.PeakRate(max(int(math.Floor(limit)), 1), rate)
	k.MaxRate, k.Batch, k.StepSeconds, k.Binding = best, float64(bestB), bestT, binding
	if compute {
		k.Binding = replica.LimitCompute
	}
	return k, nil
}

// prefillSeconds is one request's share of prefill time: n new tokens after
// cached ones, batched with as many like it as a chunk holds, or chunked
// itself when longer than a chunk.
func prefillSeconds(cfg Config, m replica.StepModel, n float64, cached int) (float64, error) {
	chunk := cfg.ChunkedPrefillSize
	if chunk <= 0 {
		chunk = cfg.MaxPrefillTokens
	}
	chunk = min(chunk, max(cfg.MaxPrefillTokens, 1))
	if chunk < 1 {
		return 0, fmt.Errorf("knee: SGLang config without a prefill budget (chunked_prefill_size %d, max_prefill_tokens %d)", cfg.ChunkedPrefillSize, cfg.MaxPrefillTokens)
	}
	tokens := int(math.Round(n))
	if tokens <= chunk {
		per := max(chunk/tokens, 1)
		batch := make([]replica.BatchEntry, per)
		for i := range batch {
			batch[i] = replica.BatchEntry{NewTokens: tokens, Context: cached}
		}
		return float64(m.StepTime(batch)) / 1e9 / float64(per), nil
	}
	var sec float64
	for done := 0; done < tokens; done += chunk {
		step := min(chunk, tokens-done)
		sec += float64(m.StepTime([]replica.BatchEntry{{NewTokens: step, Context: cached + done}})) / 1e9
	}
	return sec, nil
}
