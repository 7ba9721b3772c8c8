package report

import (
	"math"

	"github.com/eppsim/eppsim/sim"
)

// OffloadCache splits a run's true prefix-cache hits by KV tier: the GPU
// prefix cache and a replica's CPU offload tier (pd-offload.md B). It is
// present only when some replica of the fleet has a CPU tier.
type OffloadCache struct {
	// GPUHitRatio and CPUHitRatio are token-weighted over the fleet (Σ
	// tokens reused from the tier ÷ Σ prompt tokens); they add up to
	// cache.true_hit_ratio.
	// Both are undefined without measured prompt tokens.
	GPUHitRatio Num `json:"gpu_hit_ratio"`
	CPUHitRatio Num `json:"cpu_hit_ratio"`
	// GPUHitTokens and CPUHitTokens are the Σ behind them.
	GPUHitTokens int64 `json:"gpu_hit_tokens"`
	CPUHitTokens int64 `json:"cpu_hit_tokens"`
	// CPUHitRequests counts the requests that loaded from a CPU tier.
	CPUHitRequests int `json:"cpu_hit_requests"`
	// The replicas' CPU tier counters over the whole run (warm-up
	// included): load and store jobs, blocks moved each way, chunks
	// evicted from the CPU tier, and the mean copy time of a load (ms, the
	// copy alone: queueing behind other loads and the wait for the step
	// that notices it come on top; undefined without a load).
	Loads          int64 `json:"cpu_loads"`
	LoadedBlocks   int64 `json:"cpu_loaded_blocks"`
	StoredBlocks   int64 `json:"cpu_stored_blocks"`
	CPUEvictions   int64 `json:"cpu_evictions"`
	MeanLoadCopyMs Num   `json:"mean_load_copy_ms"`
}

// TierPrediction compares a prefix producer's prediction with the true
// reuse per tier, token-weighted over requests. A request's true prefix is
// its GPU hit, then the tokens loaded from the CPU tier; its predicted
// prefix (predicted fraction × prompt tokens) covers the GPU part first.
// Of each tier's true tokens, those beyond the predicted prefix are
// under-predicted: for the CPU tier, the llm-d-router #1650 effect (an
// approximate index sized to the GPU cache forgets prefixes the CPU tier
// still holds).
type TierPrediction struct {
	GPU TierError `json:"gpu"`
	CPU TierError `json:"cpu"`
	// OverpredictedTokens are predicted tokens beyond the true reuse.
	OverpredictedTokens int64 `json:"overpredicted_tokens"`
}

// TierError is one tier's share of a TierPrediction.
type TierError struct {
	TrueTokens           int64 `json:"true_tokens"`
	PredictedTokens      int64 `json:"predicted_tokens"`
	UnderpredictedTokens int64 `json:"underpredicted_tokens"`
	// UnderpredictedShare is UnderpredictedTokens ÷ TrueTokens
	// (undefined when the tier served nothing).
	UnderpredictedShare Num `json:"underpredicted_share"`
}

// tierAcc accumulates a TierPrediction.
type tierAcc struct {
	gpuTrue, gpuPred, cpuTrue, cpuPred, over float64
}

// add splits one request's prediction of pred (fraction of the prompt) by
// tier.
func (t *tierAcc) add(r *sim.Record, pred float64) {
	p := pred * float64(r.PromptTokens)
	cpu := float64(r.CPUCachedTokens)
	gpu := float64(r.CachedTokens) - cpu
	t.gpuTrue += gpu
	t.cpuTrue += cpu
	t.gpuPred += min(p, gpu)
	t.cpuPred += min(max(p-gpu, 0), cpu)
	t.over += max(p-gpu-cpu, 0)
}

func (t *tierAcc) summary() *TierPrediction {
	tier := func(truth, pred float64) TierError {
		e := TierError{TrueTokens: int64(math.Round(truth)), PredictedTokens: int64(math.Round(pred))}
		e.UnderpredictedTokens = e.TrueTokens - e.PredictedTokens
		e.UnderpredictedShare = ratio(truth-pred, truth)
		return e
	}
	return &TierPrediction{GPU: tier(t.gpuTrue, t.gpuPred), CPU: tier(t.cpuTrue, t.cpuPred), OverpredictedTokens: int64(math.Round(t.over))}
}

// offloadSummary is the run's OffloadCache, or nil when no replica has a
// CPU tier (every admission on one records external queries, B.6).
func (a *Aggregator) offloadSummary(res *sim.Result) *OffloadCache {
	if res == nil {
		return nil
	}
	on := false
	o := &OffloadCache{}
	var loadTime int64
	for _, rr := range res.Replicas {
		st := &rr.Stats
		// External queries beyond the P/D reads' come from a CPU tier.
		on = on || st.ExternalQueries > st.PulledTokens || st.OffloadStores > 0
		o.Loads += st.OffloadLoads
		o.LoadedBlocks += st.OffloadLoadedBlocks
		o.StoredBlocks += st.OffloadStoredBlocks
		o.CPUEvictions += st.CPUEvictions
		loadTime += st.OffloadLoadTime
	}
	if !on {
		return nil
	}
	o.MeanLoadCopyMs = Undefined()
	if o.Loads > 0 {
		o.MeanLoadCopyMs = Num(float64(loadTime) / float64(o.Loads) / 1e6)
	}
	o.CPUHitTokens, o.GPUHitTokens, o.CPUHitRequests = a.cpuCached, a.cached-a.cpuCached, a.cpuHits
	o.GPUHitRatio = ratio(float64(o.GPUHitTokens), float64(a.promptTokens))
	o.CPUHitRatio = ratio(float64(o.CPUHitTokens), float64(a.promptTokens))
	return o
}
