package capacity

import (
	"slices"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/report"
	"github.com/eppsim/eppsim/sim"
)

func TestParseTerm(t *testing.T) {
	good := []struct {
		in               string
		metric, stat, op string
		bound            float64
		scope            int
		label            string
	}{
		{"ttft_p99<=2s", "ttft", "p99", "<=", 2000, WholeRun, "TTFT p99 ≤ 2 s"},
		{"tpot_p90 < 50ms", "tpot", "p90", "<", 50, WholeRun, "TPOT p90 < 50 ms"},
		{"queue_mean<=7.5", "queue", "mean", "<=", 7.5, WholeRun, "queue wait mean ≤ 7.5 ms"},
		{"success>=99%", "success", "", ">=", 0.99, WholeRun, "success ≥ 0.99"},
		{"stage:ttft_p90<=1s", "ttft", "p90", "<=", 1000, EveryStage, "every stage's TTFT p90 ≤ 1 s"},
		{"stage1:success>0.9", "success", "", ">", 0.9, 1, "stage 1's success > 0.9"},
	}
	for _, g := range good {
		tm, err := ParseTerm(g.in)
		if err != nil {
			t.Errorf("%s: %v", g.in, err)
			continue
		}
		if tm.Metric != g.metric || tm.Stat != g.stat || tm.Op != g.op || tm.Bound != g.bound || tm.Scope != g.scope || tm.Label() != g.label {
			t.Errorf("%s: %+v (label %q)", g.in, tm, tm.Label())
		}
	}
	bad := map[string]string{
		"ttft_p98<=2s":        "unknown metric",
		"ttft_p99=2s":         "operator",
		"ttft_p99":            "want METRIC<=VALUE",
		"ttft_p99<=fast":      "bound",
		"ttft_p99<=-1ms":      "≥ 0",
		"success>=1.5":        "share",
		"node:ttft_p99<=1s":   "scope",
		"stage:queue_p99<=1s": "a stage reports",
		"ttft_p99<=NaN":       "finite",
	}
	for in, want := range bad {
		if _, err := ParseTerm(in); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--slo") {
			t.Errorf("%s: error %v, want one naming --slo and containing %q", in, err, want)
		}
	}
}

// TestStopperMatchesPercentile: the early stop of a p99 bound over n
// requests fires on exactly the miss that makes the nearest-rank p99 of
// n samples (report's) fail, never before; a mean's on the sample that
// takes the sum past bound × n; success's on the rejection one too many.
func TestStopperMatchesPercentile(t *testing.T) {
	terms, err := ParseSLO([]string{"ttft_p99<=100ms"})
	if err != nil {
		t.Fatal(err)
	}
	const n = 250 // p99 is the 248th of 250 sorted: 2 misses allowed
	for misses := 0; misses <= 3; misses++ {
		stop := Stopper(terms, n, nil)
		agg := report.NewAggregator()
		stopped := false
		for i := range n {
			r := &sim.Record{Outcome: sim.Completed, TTFT: 50e6, E2E: 60e6, OutputTokens: 2}
			if i < misses {
				r.TTFT = 101e6
			}
			agg.Add(r)
			if stop(r) != "" {
				stopped = true
			}
		}
		p99 := agg.Summary(nil).Latency.TTFT.P99.Float()
		if fails := p99 > 100; stopped != fails || fails != (misses > 2) {
			t.Errorf("%d misses: stopped %v, p99 %.0f ms", misses, stopped, p99)
		}
	}
	mean := Stopper([]Term{mustTerm(t, "queue_mean<=10ms")}, 4, nil)
	for i, q := range []int64{20e6, 10e6, 10e6} {
		if got := mean(&sim.Record{Outcome: sim.Completed, Queue: q}); got != "" {
			t.Fatalf("mean stopped after sample %d (sum %d ms of 40 allowed): %s", i, 40, got)
		}
	}
	if mean(&sim.Record{Outcome: sim.Completed, Queue: 1e6}) == "" {
		t.Error("mean: a sum of 41 ms over at most 4 samples of a 10 ms mean did not stop")
	}
	succ := Stopper([]Term{mustTerm(t, "success>=0.9")}, 20, nil)
	for i := range 3 {
		got := succ(&sim.Record{Outcome: sim.Rejected})
		if (got != "") != (i == 2) {
			t.Errorf("success ≥ 0.9 of 20: rejection %d: %q", i+1, got)
		}
	}
	if Stopper([]Term{mustTerm(t, "stage:ttft_p99<=1s"), mustTerm(t, "ttft_p50>=1ms")}, 10, nil) != nil {
		t.Error("a stage term without stage sizes, or a lower latency bound, made a stopper")
	}
	// A stage term counts its own stage's records against its own size:
	// stage 1 of 10 requests allows no miss of a p90 (10 − 9 = 1: the
	// second miss), and stage 0's misses do not count there.
	st := Stopper([]Term{mustTerm(t, "stage:ttft_p90<=100ms")}, 1000, []int{500, 10})
	miss := func(stage int) string {
		return st(&sim.Record{Outcome: sim.Completed, Stage: stage, TTFT: 200e6, E2E: 300e6, OutputTokens: 2})
	}
	for range 40 {
		if got := miss(0); got != "" {
			t.Fatalf("stage 0 stopped after fewer than 51 misses of 500: %s", got)
		}
	}
	if miss(1) != "" {
		t.Fatal("stage 1 stopped on its first miss (one of 10 is allowed)")
	}
	if got := miss(1); !strings.Contains(got, "in stage 1") {
		t.Fatalf("stage 1's second miss: %q", got)
	}
}

func mustTerm(t *testing.T, s string) Term {
	t.Helper()
	tm, err := ParseTerm(s)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// TestFindingsBeyondTheCalibration: a search whose runs rest on a fleet
// beyond its calibration says so once, whichever points and configs
// carry the sentence; runs without it add nothing.
func TestFindingsBeyondTheCalibration(t *testing.T) {
	const tp8 = "TP 8 is outside the calibration's TP sizes (1, 2, 4); the intervals include its leave-one-TP-size-out errors"
	withBeyond := func(notes ...string) Run { return Run{Intervals: &report.LatencyIntervals{Beyond: notes}} }
	r := &Result{Configs: []Config{
		{Name: "a", Points: []Point{{Runs: []Run{withBeyond(tp8), withBeyond(tp8)}}, {Runs: []Run{{}}}}},
		{Name: "b", Points: []Point{{Runs: []Run{withBeyond(tp8)}}}},
	}}
	if got, want := r.beyondCalibration(), []string{"Beyond the calibration: " + tp8 + "."}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := (&Result{Configs: []Config{{Points: []Point{{Runs: []Run{withBeyond()}}}}}}).beyondCalibration(); len(got) != 0 {
		t.Errorf("covered fleet: %q", got)
	}
}

// TestFindingsGatewayRefusals: config a's gateway refused requests in 2
// of its 3 simulations, b's in none (no sentence for b).
func TestFindingsGatewayRefusals(t *testing.T) {
	r := &Result{Configs: []Config{
		{Name: "a", Points: []Point{{Runs: []Run{{GatewayRefused: 5}, {}}}, {Runs: []Run{{GatewayRefused: 1}}}}},
		{Name: "b", Points: []Point{{Runs: []Run{{}}}}},
	}}
	want := []string{"a: the gateway refused requests in 2 of its 3 simulations (--gateway-max-requests): a success term can bind at the gateway's limit on requests in flight, which more replicas do not raise."}
	if got := r.gatewayRefusals(); !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

// TestJudgeCountsGatewayRefusals: a run's record carries the gateway's
// refusals after warm-up (2 here; the warm-up one and the engine's are
// not counted).
func TestJudgeCountsGatewayRefusals(t *testing.T) {
	a := report.NewAggregator()
	a.Add(&sim.Record{ID: 0, Replica: -1, Warmup: true, Outcome: sim.Rejected, Cause: sim.CauseGatewayOverflow})
	a.Add(&sim.Record{ID: 1, Replica: 0, Arrival: 1e9, TTFT: 1e8, E2E: 5e8, Completion: 1.5e9, OutputTokens: 5, Outcome: sim.Completed})
	a.Add(&sim.Record{ID: 2, Replica: -1, Arrival: 2e9, Outcome: sim.Rejected, HTTPStatus: 500, Cause: sim.CauseGatewayOverflow})
	a.Add(&sim.Record{ID: 3, Replica: -1, Arrival: 3e9, Outcome: sim.Rejected, HTTPStatus: 500, Cause: sim.CauseGatewayOverflow})
	a.Add(&sim.Record{ID: 4, Replica: -1, Arrival: 4e9, Outcome: sim.Rejected, HTTPStatus: 400, Cause: sim.CauseEngineRejected})
	sum := a.Summary(&sim.Result{Replicas: []sim.ReplicaResult{{Name: "r0"}}})
	if r := judge(nil, sum, 1, 5); r.GatewayRefused != 2 {
		t.Errorf("gateway refused %d, want 2", r.GatewayRefused)
	}
}
