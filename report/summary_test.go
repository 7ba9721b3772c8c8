package report

import (
	"math"
	"testing"

	"github.com/eppsim/eppsim/sim"
)

func TestDistNearestRank(t *testing.T) {
	v := []float64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6} // 1..10
	d := dist(v)
	want := Dist{Mean: 5.5, P50: 5, P90: 9, P95: 10, P99: 10, Max: 10}
	if d != want {
		t.Fatalf("dist = %+v, want %+v", d, want)
	}
	// An empty sample has no mean and no percentile: every field is
	// undefined (null in summary.json), not 0.
	e := dist(nil)
	for name, v := range map[string]Num{"mean": e.Mean, "p50": e.P50, "p90": e.P90, "p95": e.P95, "p99": e.P99, "max": e.Max} {
		if v.Defined() {
			t.Errorf("empty dist: %s = %v, want undefined", name, v)
		}
	}
}

func TestAggregatorTokenWeightedHitRatio(t *testing.T) {
	a := NewAggregator()
	recs := []sim.Record{
		// replica 0: 900 of 1000 tokens reused; replica 1: 0 of 100.
		{ID: 1, Replica: 0, PromptTokens: 1000, OutputTokens: 11, CachedTokens: 900, OracleCachedTokens: 900, RoutedCachedTokens: 900, TTFT: 2e6, E2E: 12e6, Completion: 12e6, Outcome: sim.Completed, HasPredicted: true, Predicted: 1, PredictedBlocks: 16},
		{ID: 2, Replica: 1, PromptTokens: 100, OutputTokens: 1, CachedTokens: 0, OracleCachedTokens: 96, TTFT: 4e6, E2E: 4e6, Arrival: 1e6, Completion: 5e6, Outcome: sim.Completed, HasPredicted: true, Predicted: 0.5, PredictedBlocks: 2},
		{ID: 3, Replica: -1, Outcome: sim.Rejected, Reason: "too long"},
	}
	for i := range recs {
		a.Add(&recs[i])
	}
	res := &sim.Result{Replicas: []sim.ReplicaResult{{Name: "r0"}, {Name: "r1"}}}
	s := a.Summary(res)
	// Token-weighted: 900/1100, not the mean of 0.9 and 0. Regret is
	// oracle − routed: 0 for request 1, 96 − 0 for request 2.
	if s.Cache.TrueHitRatio != 900.0/1100 || s.Cache.OracleHitRatio != 996.0/1100 || s.Cache.RegretTokens != 96 ||
		s.Cache.RoutedHitRatio != 900.0/1100 || s.Cache.QueueEffectTokens != 0 {
		t.Fatalf("cache %+v", s.Cache)
	}
	if s.Requests.Total != 3 || s.Requests.Complete != 2 || s.Requests.Rejected != 1 || s.Requests.Reasons["too long"] != 1 {
		t.Fatalf("requests %+v", s.Requests)
	}
	p := s.Prediction["approx-prefix-cache-producer"]
	// True fractions 0.9 and 0; predicted 1 and 0.5; the second is phantom.
	if p == nil || p.MAE != (0.1+0.5)/2 || p.PhantomRate != 0.5 || p.MissedRate != 0 || p.Bias != (1.5-0.9)/2 {
		t.Fatalf("prediction %+v", p)
	}
	if len(s.Prediction) != 1 {
		t.Fatalf("precise prediction reported without a precise producer: %v", s.Prediction)
	}
	// Request 1 is over by 0.1 > one router block (1/16); request 2 by
	// exactly one block (1/2), which is not "more than one block".
	if p.OverpredictedRate != 0.5 || p.UnderpredictedRate != 0 {
		t.Fatalf("over/under %v/%v", p.OverpredictedRate, p.UnderpredictedRate)
	}
	if b := p.Calibration[9]; b.Requests != 1 || b.MeanTrue != 0.9 || p.Calibration[5].Requests != 1 || p.Calibration[0].Requests != 0 {
		t.Fatalf("calibration %+v", p.Calibration)
	}
	// Causes in tokens: request 1 believes 1000 vs 900 held at routing
	// (100 > one 62.5-token block: eviction unseen); request 2 believes 50
	// vs 0 (within one 50-token block: granularity). Shares 2/3 and 1/3.
	if c := p.ErrorByCause; c[CauseEvictionUnseen] != 100.0/150 || c[CauseGranularity] != 50.0/150 || c[CauseSchedulingChange] != 0 {
		t.Fatalf("causes %v", c)
	}
	// TPOT only for the 11-token output: (12-2)/10 = 1 ms.
	if s.Latency.TPOT.Mean != 1 || s.Latency.TTFT.Max != 4 {
		t.Fatalf("latency %+v", s.Latency)
	}
	if s.Routing.Imbalance != 1 || s.Cache.PerReplica["r0"] != 0.9 {
		t.Fatalf("routing %+v per replica %v", s.Routing, s.Cache.PerReplica)
	}
}

// TestErrorByCauseIsDeterministic: the cause shares are sums of floats, and
// float addition depends on order; summing in map order made the last
// digits differ between runs of the same seed. With addends whose sum
// depends on the order, every summary must give the same bits.
func TestErrorByCauseIsDeterministic(t *testing.T) {
	p := &predAcc{n: 1, cause: map[string]float64{
		CauseSchedulingChange: 0.1, CauseGranularity: 0.2, CauseEvictionUnseen: 0.3, CauseIndexMissed: 1e-17,
	}}
	want := p.summary().ErrorByCause
	for range 200 {
		got := p.summary().ErrorByCause
		for k, v := range want {
			if math.Float64bits(got[k]) != math.Float64bits(v) {
				t.Fatalf("%s: %v then %v", k, v, got[k])
			}
		}
	}
}

// ladderRecords is a fixed run of three replicas worked out by hand in
// TestSummaryLadderAndTokenError (r2 receives only a warm-up request).
func ladderRecords() []sim.Record {
	return []sim.Record{
		// P = 0.9 × 1000 = 900 believed, R = 800 held at routing, T = 600
		// reused: 200 evicted while it waited.
		{ID: 1, Replica: 0, Arrival: 0, PromptTokens: 1000, OutputTokens: 2, CachedTokens: 600, RoutedCachedTokens: 800,
			OracleCachedTokens: 800, InfiniteCachedTokens: 900, HasPredicted: true, Predicted: 0.9, PredictedBlocks: 16,
			TTFT: 10e6, E2E: 20e6, Completion: 20e6, Outcome: sim.Completed, Tied: true},
		// P = 50, R = 100, T = 400: 300 computed while it waited.
		{ID: 2, Replica: 1, Arrival: 2e9, PromptTokens: 500, OutputTokens: 2, CachedTokens: 400, RoutedCachedTokens: 100,
			OracleCachedTokens: 300, InfiniteCachedTokens: 400, HasPredicted: true, Predicted: 0.1, PredictedBlocks: 10,
			TTFT: 10e6, E2E: 20e6, Completion: 2.02e9, Outcome: sim.Completed},
		{ID: 3, Replica: 1, Arrival: 4e9, PromptTokens: 200, OutputTokens: 2, HasPredicted: true, PredictedBlocks: 4,
			TTFT: 10e6, E2E: 20e6, Completion: 4.02e9, Outcome: sim.Completed},
		{ID: 4, Replica: -1, Arrival: 5e9, PromptTokens: 300, Outcome: sim.Rejected, Reason: "too long"},
		{ID: 5, Replica: 2, Arrival: 0.5e9, PromptTokens: 100, OutputTokens: 2, CachedTokens: 50, OracleCachedTokens: 100,
			InfiniteCachedTokens: 100, TTFT: 1e6, E2E: 2e6, Completion: 0.502e9, Outcome: sim.Completed, Warmup: true},
	}
}

func ladderSummary() *Summary {
	a := NewAggregator()
	recs := ladderRecords()
	for i := range recs {
		a.Add(&recs[i])
	}
	return a.Summary(&sim.Result{Replicas: []sim.ReplicaResult{{Name: "r0"}, {Name: "r1"}, {Name: "r2"}}})
}

// TestSummaryLadderAndTokenError checks the ladder, regret, queue effect,
// token-weighted prediction error and its causes, offered load and idle
// replicas against values worked out by hand from ladderRecords.
func TestSummaryLadderAndTokenError(t *testing.T) {
	s := ladderSummary()
	near := func(what string, got Num, want float64) {
		t.Helper()
		if math.Abs(got.Float()-want) > 1e-12 {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	// Completed after warm-up: requests 1-3, 1,700 prompt tokens.
	c := s.Cache
	if c.PromptTokens != 1700 || c.RegretTokens != 200 || c.QueueGainedTokens != 300 || c.QueueLostTokens != 200 || c.QueueEffectTokens != 100 {
		t.Fatalf("cache tokens %+v", c)
	}
	near("infinite", c.InfiniteHitRatio, 1300.0/1700)
	near("oracle", c.OracleHitRatio, 1100.0/1700)
	near("routed", c.RoutedHitRatio, 900.0/1700)
	near("true", c.TrueHitRatio, 1000.0/1700)
	// true = routed + queue effect ÷ prompt tokens.
	near("true - routed", c.TrueHitRatio-c.RoutedHitRatio, 100.0/1700)

	p := s.Prediction["approx-prefix-cache-producer"]
	// Σ P = 900 + 50 + 0, Σ T = 600 + 400 + 0. Over: request 1, 900 − 600;
	// under: request 2, 400 − 50.
	if p.PredictedTokens != 950 || p.TrueTokens != 1000 {
		t.Fatalf("token sums %v %v", p.PredictedTokens, p.TrueTokens)
	}
	near("over_predicted_tokens", p.OverPredictedTokens, 300.0/950)
	near("under_predicted_tokens", p.UnderPredictedTokens, 350.0/1000)
	// Request 1: P − R = 100 > one 62.5-token block (eviction unseen),
	// R − T = 200 (scheduling change): over 300 = 100 + 200. Request 2:
	// P − R = −50, within one 50-token block (granularity), R − T = −300:
	// under 350 = 50 + 300.
	near("over eviction", Num(p.OverByCause[CauseEvictionUnseen]), 1.0/3)
	near("over scheduling", Num(p.OverByCause[CauseSchedulingChange]), 2.0/3)
	near("under granularity", Num(p.UnderByCause[CauseGranularity]), 1.0/7)
	near("under scheduling", Num(p.UnderByCause[CauseSchedulingChange]), 6.0/7)
	if len(p.OverByCause) != 2 || len(p.UnderByCause) != 2 {
		t.Fatalf("causes %v %v", p.OverByCause, p.UnderByCause)
	}
	// Narrow per-request rates: no request predicted > 0 with zero reuse,
	// none reused with nothing predicted (request 3 has neither).
	if p.PhantomRate != 0 || p.MissedRate != 0 {
		t.Fatalf("phantom %v missed %v", p.PhantomRate, p.MissedRate)
	}

	// Offered: requests 1-4 (the warm-up one excluded), arrivals 0-5 s,
	// 2,000 prompt tokens.
	near("offered req/s", s.OfferedLoad.RequestsPerS, 4.0/5)
	near("offered prompt tokens/s", s.OfferedLoad.PromptTokensPerS, 2000.0/5)
	near("arrival span", s.OfferedLoad.ArrivalSpanS, 5)

	// r2 received only the warm-up request: idle. r1 has 2 of 3.
	r := s.Routing
	if r.Replicas != 3 || r.IdleReplicas != 1 || r.PerReplica["r2"] != 0 || len(r.PerReplica) != 3 || r.BusiestReplica != "r1" {
		t.Fatalf("routing %+v", r)
	}
	near("busiest share", r.BusiestShare, 2.0/3)
	near("imbalance", r.Imbalance, 2/(3.0/3))
	near("tie share", r.TieShare, 1.0/3)
}
