package replica

import (
	"fmt"
	"math"
)

// Mix is a workload's mean request as one engine sees it: what the
// steady-state knee (SustainableRate) depends on.
type Mix struct {
	// PromptTokens, CachedTokens and OutputTokens are the mean prompt, the
	// mean prefix-cache hit at first scheduling, and the mean output.
	PromptTokens, CachedTokens, OutputTokens float64
	// KVTokensPerSequence is the mean KV a running request holds that no
	// other running request shares (tokens); 0 takes PromptTokens +
	// OutputTokens/2, its mean context over its decode when nothing is
	// shared.
	KVTokensPerSequence float64
}

// The binding limits SustainableRate names.
const (
	LimitMaxNumSeqs          = "max_num_seqs"
	LimitKVBlocks            = "kv_blocks"
	LimitMaxNumBatchedTokens = "max_num_batched_tokens"
	LimitCompute             = "compute"
)

// Knee is one engine's steady-state limit for a workload mix: the highest
// request rate it sustains, the limit that binds there, and the running
// batch each limit allows.
type Knee struct {
	// MaxRate is the sustainable rate, requests/s: at higher rates the
	// queue grows without bound.
	MaxRate float64 `json:"max_rate"`
	// Binding is the limit that sets it: max_num_seqs (decode slots),
	// kv_blocks, max_num_batched_tokens (the step's token budget), or
	// compute (the step time grows about as fast as the batch, so more
	// slots or KV would not carry more load).
	Binding string `json:"binding"`
	// Batch is the running batch at MaxRate and StepSeconds its step.
	Batch       float64 `json:"batch"`
	StepSeconds float64 `json:"step_seconds"`
	// SeqLimit, KVLimit and TokenLimit are the running batches
	// max_num_seqs, the KV blocks and the token budget allow.
	SeqLimit, KVLimit, TokenLimit float64 `json:"-"`
}

// computeBound: when doubling the batch from half the limit to the limit
// raises the sustainable rate by less than this factor, the step time
// grows nearly in proportion to the batch and the engine is bound by its
// compute (or memory traffic), not by the limit on the batch.
const computeBound = 1.1

// SustainableRate estimates the steady state of an engine at its knee
// (docs/latency.md, "The knee"): B requests running, each step decoding
// one token of each and prefilling the uncached prompts of the requests
// that arrive meanwhile. A request holds its slot for about OutputTokens
// steps (its prefill step and OutputTokens−1 decodes), so B running
// requests complete at λ = B/(O·t) per second, t the step time of B
// decodes at the mean context P + O/2 plus B·(P−C)/O prefill tokens
// (the prompts arriving per step, chunked prefill spreading them over the
// steps). B is bounded by max_num_seqs, by the KV blocks (B·KV per
// sequence ≤ the pool), and by the token budget (B + B·(P−C)/O ≤
// max_num_batched_tokens); the sustainable rate is the largest λ(B) over
// the allowed batches. The estimate is of the mean: arrivals that bunch,
// and stages that change rate, queue before it.
func SustainableRate(cfg Config, m StepModel, mix Mix) (Knee, error) {
	p, c, o := mix.PromptTokens, mix.CachedTokens, mix.OutputTokens
	switch {
	case !(o >= 1) || !(p >= 1) || c < 0 || c > p || math.IsInf(p+o, 0):
		return Knee{}, fmt.Errorf("knee: a mix needs prompt ≥ 1, 0 ≤ cached ≤ prompt, output ≥ 1 tokens (got %v, %v, %v)", p, c, o)
	case cfg.MaxNumSeqs < 1 || cfg.MaxNumBatchedTokens < 1 || cfg.NumGPUBlocks < 2 || cfg.BlockSize < 1:
		return Knee{}, fmt.Errorf("knee: engine config without limits (max_num_seqs %d, max_num_batched_tokens %d, %d blocks of %d)",
			cfg.MaxNumSeqs, cfg.MaxNumBatchedTokens, cfg.NumGPUBlocks, cfg.BlockSize)
	}
	kvPer := mix.KVTokensPerSequence
	if kvPer <= 0 {
		kvPer = p + o/2
	}
	prefillPerSeq := (p - c) / o // prefill tokens per step per running request
	k := Knee{
		SeqLimit: float64(cfg.MaxNumSeqs),
		// The null block holds nothing; a sequence's last block is half
		// full on average.
		KVLimit:    float64(cfg.NumGPUBlocks-1) * float64(cfg.BlockSize) / (kvPer + float64(cfg.BlockSize)/2),
		TokenLimit: float64(cfg.MaxNumBatchedTokens) / (1 + prefillPerSeq),
	}
	limit, binding := k.SeqLimit, LimitMaxNumSeqs
	if k.KVLimit < limit {
		limit, binding = k.KVLimit, LimitKVBlocks
	}
	if k.TokenLimit < limit {
		limit, binding = k.TokenLimit, LimitMaxNumBatchedTokens
	}
	ctx := int(math.Round(p + o/2))
	cached := int(math.Round(c))
	// One buffer for every batch tried: b decodes, then the prefill chunk
	// in the slot after them.
	decode := BatchEntry{NewTokens: 1, Context: ctx, Decode: true}
	var buf []BatchEntry
	rate := func(b int) (float64, float64) {
		for len(buf) < b+1 {
			buf = append(buf, decode)
		}
		batch := buf[:b]
		if n := int(math.Round(float64(b) * prefillPerSeq)); n > 0 {
			buf[b] = BatchEntry{NewTokens: n, Context: cached}
			batch = buf[:b+1]
			defer func() { buf[b] = decode }()
		}
		t := float64(m.StepTime(batch)) / 1e9
		if t <= 0 {
			return math.Inf(1), t
		}
		return float64(b) / (o * t), t
	}
	best, bestB, bestT, compute := PeakRate(max(int(math.Floor(limit)), 1), rate)
	k.MaxRate, k.Batch, k.StepSeconds, k.Binding = best, float64(bestB), bestT, binding
	if compute {
		k.Binding = LimitCompute
	}
	return k, nil
}

// PeakRate is the largest sustainable rate rate(b) gives over the batches
// 1..top, with its batch and step time (rate returns requests/s and the
// step's seconds). λ(B) rises with B while batching amortizes the
// weights, so it is at the top unless steps become compute-bound and the
// per-sequence costs win. compute reports that bound: the best batch is
// below top, or doubling the batch from half of top raises the rate by
// less than computeBound.
func PeakRate(top int, rate func(b int) (perSecond, stepSeconds float64)) (best float64, batch int, step float64, compute bool) {
	for b := 1; b <= top; b++ {
		if r, t := rate(b); r > best {
			best, batch, step = r, b, t
		}
	}
	half, _ := rate(max(top/2, 1))
	return best, batch, step, top >= 2 && (batch < top || best < computeBound*half)
}
