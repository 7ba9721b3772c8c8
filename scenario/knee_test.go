package scenario

import (
	"math"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/report"
	"github.com/eppsim/eppsim/sim"
)

// TestRunKnee: a run's knee is every replica's sustainable rate for the
// run's mean request (replica.SustainableRate, recomputed here from the
// summary's own figures), summed over the fleet, with the busiest
// replica's routed share of the offered load over its own rate.
func TestRunKnee(t *testing.T) {
	spec := testSpec(t, 200)
	s, err := Run(spec, ForSource("round-robin"), Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	k := s.Knee
	if k == nil {
		t.Fatal("no knee")
	}
	p := spec.Fleet[0].Preset
	cfg, err := p.EngineConfig()
	if err != nil {
		t.Fatal(err)
	}
	m, err := p.Model()
	if err != nil {
		t.Fatal(err)
	}
	done := float64(s.Requests.Complete)
	prompt := float64(s.Cache.PromptTokens) / done
	mix := replica.Mix{PromptTokens: prompt, CachedTokens: prompt * s.Cache.TrueHitRatio.Float(),
		OutputTokens: s.Throughput.OutputTokensPerS.Float() / s.Throughput.RequestsPerS.Float()}
	one, err := replica.SustainableRate(cfg, m, mix)
	if err != nil {
		t.Fatal(err)
	}
	// Two identical replicas; round robin gives each half the load.
	if got := k.MaxRequestsPerS.Float(); math.Abs(got-2*one.MaxRate) > 1e-9*got {
		t.Errorf("fleet rate %v, want 2 × %v", got, one.MaxRate)
	}
	if want := s.OfferedLoad.RequestsPerS.Float() / (2 * one.MaxRate); math.Abs(k.Utilization.Float()-want) > 1e-12 {
		t.Errorf("utilization %v, want %v", k.Utilization, want)
	}
	busiest := 0
	for _, n := range s.Routing.PerReplica {
		busiest = max(busiest, n)
	}
	share := float64(busiest) / float64(s.Requests.Complete)
	if want := s.OfferedLoad.RequestsPerS.Float() * share / one.MaxRate; math.Abs(k.BusiestUtilization.Float()-want) > 1e-12 || k.Binding != one.Binding {
		t.Errorf("busiest %v bound by %s, want %v by %s", k.BusiestUtilization, k.Binding, want, one.Binding)
	}
	// Far below the knee: the intervals are the calibration's factors
	// alone (TTFT p99 takes ttft_p99's, TPOT p50 itl_mean's). Llama-3.1-8B
	// was fitted on the L40S only, so on H100 it is a deployment without a
	// step offset: the model-out factors, and a sentence that says so.
	if k.NearKnee {
		t.Errorf("near knee at utilization %v", k.BusiestUtilization)
	}
	f := p.Calibration.Intervals
	iv := s.Intervals
	if iv == nil || len(iv.Scales) != 0 || !strings.Contains(iv.Basis, ", leave one model out;") || len(iv.Beyond) != 1 ||
		!strings.Contains(iv.Beyond[0], "on H100 at TP 1 is not a deployment the calibration was fitted on") {
		t.Fatalf("intervals %+v", iv)
	}
	for _, tc := range []struct {
		name   string
		got    [2]report.Num
		v      report.Num
		metric string
	}{
		{"TTFT p99", iv.TTFTP99, s.Latency.TTFT.P99, "ttft_p99"},
		{"TPOT p50", iv.TPOTP50, s.Latency.TPOT.P50, "itl_mean"},
		{"E2E p99", iv.E2EP99, s.Latency.E2E.P99, "e2e_p99"},
	} {
		want := [2]float64{tc.v.Float() * f[tc.metric].Low, tc.v.Float() * f[tc.metric].High}
		if math.Abs(tc.got[0].Float()-want[0]) > 1e-9*want[0] || math.Abs(tc.got[1].Float()-want[1]) > 1e-9*want[1] {
			t.Errorf("%s interval %v, want %v", tc.name, tc.got, want)
		}
	}
}

// TestWidenIntervals: an interval widens to what the fast and slow runs
// measured, never narrows, and records the scales.
func TestWidenIntervals(t *testing.T) {
	s, fast, slow := &report.Summary{}, &report.Summary{}, &report.Summary{}
	s.Intervals = &report.LatencyIntervals{Basis: "x",
		TTFTP50: [2]report.Num{10, 20}, TTFTP99: [2]report.Num{30, 60}, TPOTP50: [2]report.Num{5, 6}, E2EP99: [2]report.Num{100, 200}}
	fast.Latency.TTFT.P50, slow.Latency.TTFT.P50 = 12, 18  // inside: unchanged
	fast.Latency.TTFT.P99, slow.Latency.TTFT.P99 = 25, 900 // both ends widen
	fast.Latency.TPOT.P50, slow.Latency.TPOT.P50 = 4.5, 6.5
	fast.Latency.E2E.P99, slow.Latency.E2E.P99 = 90, report.Undefined() // an undefined end is ignored
	WidenIntervals(s, fast, slow, 0.9, 1.1)
	iv := s.Intervals
	for _, tc := range []struct {
		name string
		got  [2]report.Num
		want [2]report.Num
	}{
		{"TTFT p50", iv.TTFTP50, [2]report.Num{10, 20}},
		{"TTFT p99", iv.TTFTP99, [2]report.Num{25, 900}},
		{"TPOT p50", iv.TPOTP50, [2]report.Num{4.5, 6.5}},
		{"E2E p99", iv.E2EP99, [2]report.Num{90, 200}},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	if len(iv.Scales) != 2 || iv.Scales[0] != 0.9 || iv.Scales[1] != 1.1 {
		t.Errorf("scales %v", iv.Scales)
	}
}

// TestFleetFactorsBeyondTheCalibration: a fleet with a replica at a TP
// size its calibration never saw takes, per metric, the wider of the
// factors (the model-out ones and the TP protocol's), says so once, and
// its knee simulations run at the widened ITL factors; a fleet the
// calibration covers keeps the model-out factors. Factors by hand.
func TestFleetFactorsBeyondTheCalibration(t *testing.T) {
	c := &replica.Calibration{Name: "x",
		Intervals: map[string]replica.Interval{"itl_mean": {Low: 0.8, High: 1.15, Runs: 26}, "ttft_p99": {Low: 0.4, High: 2.1, Runs: 26}},
		Extrapolation: map[string]replica.Extrapolation{
			"tp":  {Seen: []string{"1", "2", "4"}, Intervals: map[string]replica.Interval{"itl_mean": {Low: 0.7, High: 1.1, Runs: 26}}},
			"gpu": {Seen: []string{"H100"}},
		}}
	replicaAt := func(tp int) sim.ReplicaSpec {
		p := replica.Preset{TensorParallelSize: tp, Calibration: c}
		p.GPU.Name = "H100"
		return sim.ReplicaSpec{Preset: p}
	}
	s := &report.Summary{}
	s.Latency.TPOT.P50, s.Latency.TTFT.P99 = 10, 100
	s.Knee = &report.Knee{BusiestUtilization: 0.8}

	covered := []sim.ReplicaSpec{replicaAt(2), replicaAt(4)}
	iv := intervalsOf(covered, s)
	if iv.TPOTP50 != [2]report.Num{8, 11.5} || len(iv.Beyond) != 0 {
		t.Errorf("covered fleet: TPOT %v, beyond %q", iv.TPOTP50, iv.Beyond)
	}
	// 0.8 × 1.15 = 0.92 ≥ 0.9: near its knee either way.
	if low, high, near, ok := StepScales(covered, s); !ok || low != 0.8 || high != 1.15 || !near {
		t.Errorf("covered fleet's scales %v %v %v %v", low, high, near, ok)
	}

	mixed := []sim.ReplicaSpec{replicaAt(2), replicaAt(8), replicaAt(8)}
	iv = intervalsOf(mixed, s)
	if iv.TPOTP50 != [2]report.Num{7, 11.5} || iv.TTFTP99 != [2]report.Num{40, 210} {
		t.Errorf("TP 8 fleet: TPOT %v (want 7–11.5), TTFT p99 %v (want 40–210)", iv.TPOTP50, iv.TTFTP99)
	}
	want := "TP 8 is outside the calibration's TP sizes (1, 2, 4); the intervals include its leave-one-TP-size-out errors"
	if len(iv.Beyond) != 1 || iv.Beyond[0] != want || !strings.Contains(iv.Basis, want) {
		t.Errorf("TP 8 fleet: beyond %q, basis %q", iv.Beyond, iv.Basis)
	}
	if low, high, _, ok := StepScales(mixed, s); !ok || low != 0.7 || high != 1.15 {
		t.Errorf("TP 8 fleet's scales %v %v", low, high)
	}
}

// TestStepScalesFullBatch: the knee simulations' slow end is the larger
// of the ITL factor (1.15) and the calibration's full-batch factor; a
// run at utilization 0.7 is not near its knee at 1.15 (0.805) but is at
// 1.3 (0.91 ≥ 0.9); a full-batch factor below 1.15 changes nothing.
func TestStepScalesFullBatch(t *testing.T) {
	c := &replica.Calibration{Name: "x", Intervals: map[string]replica.Interval{"itl_mean": {Low: 0.8, High: 1.15, Runs: 26}}}
	p := replica.Preset{TensorParallelSize: 1, Calibration: c}
	p.GPU.Name = "H100"
	fleet := []sim.ReplicaSpec{{Preset: p}}
	s := &report.Summary{}
	s.Knee = &report.Knee{BusiestUtilization: 0.7}
	if _, high, near, ok := StepScales(fleet, s); !ok || high != 1.15 || near {
		t.Errorf("no full-batch factor: high %v near %v ok %v; want 1.15, not near", high, near, ok)
	}
	c.FullBatch = &replica.FullBatch{Factor: 1.3, Runs: 3}
	if low, high, near, ok := StepScales(fleet, s); !ok || low != 0.8 || high != 1.3 || !near {
		t.Errorf("full-batch 1.3: %v %v %v %v; want 0.8, 1.3, near", low, high, near, ok)
	}
	c.FullBatch.Factor = 1.1
	if _, high, near, _ := StepScales(fleet, s); high != 1.15 || near {
		t.Errorf("full-batch 1.1: high %v near %v; want 1.15, not near", high, near)
	}
}
