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
	// router block (1/total of the prompt); shares of requests.
	OverpredictedRate  float64 `json:"overpredicted_rate"`
	UnderpredictedRate float64 `json:"underpredicted_rate"`
	// Token-weighted error, with P = predicted fraction × prompt tokens
	// and T = the true reuse (cached tokens) of each request:
	// OverPredictedTokens = Σ max(0, P − T) ÷ Σ P, the share of the
	// producer's belief that was not in the cache (undefined when Σ P =
	// 0); UnderPredictedTokens = Σ max(0, T − P) ÷ Σ T, the share of the
	// true reuse it did not predict (undefined when Σ T = 0).
	// PredictedTokens = Σ P and TrueTokens = Σ T.
	OverPredictedTokens  Num     `json:"over_predicted_tokens"`
	UnderPredictedTokens Num     `json:"under_predicted_tokens"`
	PredictedTokens      float64 `json:"predicted_tokens"`
	TrueTokens           int64   `json:"true_tokens"`
	// Calibration buckets predicted fractions in tenths.
	Calibration []CalibrationBucket `json:"calibration"`
	// ErrorByCause splits Σ|predicted − true| (in prompt tokens) by cause;
	// values are shares summing to 1 (see predAcc.add for the rules).
	ErrorByCause map[string]float64 `json:"error_by_cause,omitempty"`
	// OverByCause and UnderByCause split the over- and under-predicted
	// tokens by cause; shares summing to 1, absent when there is none.
	OverByCause  map[string]float64 `json:"over_predicted_by_cause,omitempty"`
	UnderByCause map[string]float64 `json:"under_predicted_by_cause,omitempty"`
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
	// Token-weighted: Σ P, Σ T, Σ max(0, P − T), Σ max(0, T − P), and
	// the latter two by cause.
	predTok, overTok, underTok float64
	trueTok                    int64
	overCause, underCause      map[string]float64
	tiers                      tierAcc
}

// add accounts one routed request. With P the predicted tokens (fraction ×
// prompt), R the chosen replica's cached prefix at routing time and T the
// true reuse: |R − T| goes to CauseSchedulingChange; P − R goes to
// CauseGranularity when within one router block, else to
// CauseEvictionUnseen (P > R) or CauseIndexMissed (P < R).
//
// The over-predicted tokens max(0, P − T) = max(0, (P − R) + (R − T)) are
// split between the positive one(s) of the two terms in proportion to
// their size: P − R > 0 is the index's cause as above, R − T > 0 is
// CauseSchedulingChange (evicted while the request waited). The
// under-predicted tokens max(0, T − P) are split between the negative
// ones likewise (R − T < 0: computed while it waited).
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
	predTok, routed, trueTok := pred*prompt, float64(r.RoutedCachedTokens), float64(r.CachedTokens)
	p.cause[CauseSchedulingChange] += math.Abs(routed - trueTok)
	index := CauseGranularity // the cause of d1 = P − R
	d1, d2 := predTok-routed, routed-trueTok
	switch {
	case math.Abs(d1) <= block*prompt:
		p.cause[CauseGranularity] += math.Abs(d1)
	case d1 > 0:
		index = CauseEvictionUnseen
		p.cause[CauseEvictionUnseen] += d1
	default:
		index = CauseIndexMissed
		p.cause[CauseIndexMissed] += -d1
	}
	p.predTok += predTok
	p.trueTok += int64(r.CachedTokens)
	if p.overCause == nil {
		p.overCause, p.underCause = map[string]float64{}, map[string]float64{}
	}
	split := func(total float64, a, b float64, into map[string]float64) {
		// total = a + b − (the other sign's parts); a, b >= 0, a + b >= total.
		if total <= 0 || a+b <= 0 {
			return
		}
		into[index] += total * a / (a + b)
		into[CauseSchedulingChange] += total * b / (a + b)
	}
	if over := predTok - trueTok; over > 0 {
		p.overTok += over
		split(over, max(d1, 0), max(d2, 0), p.overCause)
	} else if under := -over; under > 0 {
		p.underTok += under
		split(under, max(-d1, 0), max(-d2, 0), p.underCause)
	}
}

// shares normalises a cause map to shares summing to 1, summing in a fixed
// order (float addition is not associative; map order would make the last
// digits vary from run to run); nil when it sums to 0.
func shares(m map[string]float64) map[string]float64 {
	var total float64
	for _, k := range slices.Sorted(maps.Keys(m)) {
		total += m[k]
	}
	if !(total > 0) {
		return nil
	}
	out := map[string]float64{}
	for k, v := range m {
		if v > 0 {
			out[k] = v / total
		}
	}
	return out
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
	out.PredictedTokens, out.TrueTokens = p.predTok, p.trueTok
	out.OverPredictedTokens = ratio(p.overTok, p.predTok)
	out.UnderPredictedTokens = ratio(p.underTok, float64(p.trueTok))
	out.OverByCause, out.UnderByCause = shares(p.overCause), shares(p.underCause)
	return out
}
