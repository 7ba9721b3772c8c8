package report

import (
	"maps"
	"math"
	"slices"

	"github.com/eppsim/eppsim/sim"
)

// Prediction compares a prefix producer's predicted match fraction on the
// chosen replica (match/total router blocks at routing time) with the true
// fraction of the prompt the replica reused (num_cached_tokens at first
// scheduling).
type Prediction struct {
	Requests      int     `json:"requests"`
	MeanPredicted float64 `json:"mean_predicted_fraction"`
	MeanTrue      float64 `json:"mean_true_fraction"`
	MAE           float64 `json:"mae"`
	Bias          float64 `json:"bias"`
	// PhantomRate: predicted > 0 but nothing reused. MissedRate: reuse the
	// producer did not predict.
	PhantomRate float64 `json:"phantom_rate"`
	MissedRate  float64 `json:"missed_rate"`
	// Over/under: predicted above/below the true fraction by more than one
	// router block (1/total of the prompt).
	OverpredictedRate  float64 `json:"overpredicted_rate"`
	UnderpredictedRate float64 `json:"underpredicted_rate"`
	// Calibration buckets predicted fractions in tenths.
	Calibration []CalibrationBucket `json:"calibration"`
	// ErrorByCause splits Σ|predicted − true| (in prompt tokens) by cause;
	// values are shares summing to 1 (see predAcc.add for the rules).
	ErrorByCause map[string]float64 `json:"error_by_cause,omitempty"`
	// ByTier compares the prediction with the true reuse per KV tier when
	// replicas have a CPU tier; absent otherwise.
	ByTier *TierPrediction `json:"by_tier,omitempty"`
}

// CalibrationBucket is one predicted-fraction bucket [Lo, Hi).
type CalibrationBucket struct {
	Lo            float64 `json:"lo"`
	Hi            float64 `json:"hi"`
	Requests      int     `json:"requests"`
	MeanPredicted float64 `json:"mean_predicted_fraction"`
	MeanTrue      float64 `json:"mean_true_fraction"`
}

// Error causes.
const (
	// CauseSchedulingChange: the chosen replica's cache changed between
	// routing and first scheduling (evictions by earlier admissions, or
	// blocks cached by requests scheduled just before).
	CauseSchedulingChange = "routing_vs_scheduling_change"
	// CauseGranularity: the belief differs from the replica's cache at
	// routing time by at most one router block — 64-token router blocks
	// (and their partial tail) vs 16-token engine blocks, pseudo-tokens vs
	// real tokens.
	CauseGranularity = "granularity"
	// CauseEvictionUnseen: the index believes in more than the replica
	// holds — evictions the index never saw, optimistic inserts.
	CauseEvictionUnseen = "eviction_unseen"
	// CauseIndexMissed: the replica holds more than the index believes —
	// index capacity smaller than the cache, decode blocks never indexed.
	CauseIndexMissed = "index_missed"
)

type predAcc struct {
	n                          int
	predSum, trueSum, absErr   float64
	phantom, missed, over, und int
	buckets                    [10]struct {
		n           int
		pred, truth float64
	}
	cause map[string]float64
	tiers tierAcc
}

// add accounts one routed request. With P the predicted tokens (fraction ×
// prompt), R the chosen replica's cached prefix at routing time and T the
// true reuse: |R − T| goes to CauseSchedulingChange; P − R goes to
// CauseGranularity when within one router block, else to
// CauseEvictionUnseen (P > R) or CauseIndexMissed (P < R).
func (p *predAcc) add(r *sim.Record, pred float64, blocks int) {
	if r.PromptTokens <= 0 || r.Outcome != sim.Completed || r.Warmup {
		return
	}
	prompt := float64(r.PromptTokens)
	truth := float64(r.CachedTokens) / prompt
	p.n++
	p.tiers.add(r, pred)
	p.predSum += pred
	p.trueSum += truth
	p.absErr += math.Abs(pred - truth)
	if pred > 0 && r.CachedTokens == 0 {
		p.phantom++
	}
	if pred == 0 && r.CachedTokens > 0 {
		p.missed++
	}
	block := 1.0
	if blocks > 0 {
		block = 1 / float64(blocks)
	}
	switch {
	case pred-truth > block:
		p.over++
	case truth-pred > block:
		p.und++
	}
	b := min(int(pred*10), 9)
	p.buckets[b].n++
	p.buckets[b].pred += pred
	p.buckets[b].truth += truth
	if p.cause == nil {
		p.cause = map[string]float64{}
	}
	predTok, routed := pred*prompt, float64(r.RoutedCachedTokens)
	p.cause[CauseSchedulingChange] += math.Abs(routed - float64(r.CachedTokens))
	switch d := predTok - routed; {
	case math.Abs(d) <= block*prompt:
		p.cause[CauseGranularity] += math.Abs(d)
	case d > 0:
		p.cause[CauseEvictionUnseen] += d
	default:
		p.cause[CauseIndexMissed] += -d
	}
}

func (p *predAcc) summary() *Prediction {
	if p.n == 0 {
		return nil
	}
	n := float64(p.n)
	out := &Prediction{
		Requests: p.n, MeanPredicted: p.predSum / n, MeanTrue: p.trueSum / n, MAE: p.absErr / n,
		Bias: (p.predSum - p.trueSum) / n, PhantomRate: float64(p.phantom) / n, MissedRate: float64(p.missed) / n,
		OverpredictedRate: float64(p.over) / n, UnderpredictedRate: float64(p.und) / n,
	}
	for i, b := range p.buckets {
		cb := CalibrationBucket{Lo: float64(i) / 10, Hi: float64(i+1) / 10, Requests: b.n}
		if b.n > 0 {
			cb.MeanPredicted, cb.MeanTrue = b.pred/float64(b.n), b.truth/float64(b.n)
		}
		out.Calibration = append(out.Calibration, cb)
	}
	// Sum in a fixed order: float addition is not associative, and map
	// order would make the last digits vary from run to run.
	var total float64
	for _, k := range slices.Sorted(maps.Keys(p.cause)) {
		total += p.cause[k]
	}
	if total > 0 {
		out.ErrorByCause = map[string]float64{}
		for k, v := range p.cause {
			out.ErrorByCause[k] = v / total
		}
	}
	return out
}
