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
	if dist(nil) != (Dist{}) {
		t.Fatal("empty dist not zero")
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
	// Token-weighted: 900/1100, not the mean of 0.9 and 0.
	if s.Cache.TrueHitRatio != 900.0/1100 || s.Cache.OracleHitRatio != 996.0/1100 || s.Cache.RegretTokens != 96 {
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
