package latency

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/replica"
)

// TestMedianOfDraws: each scope's metrics are their medians over the
// draws that have them (worked by hand); counts, engines and knee are the
// first draw's.
func TestMedianOfDraws(t *testing.T) {
	d := func(ttft, e2e float64, stage bool, completed int) *Result {
		r := &Result{Predicted: map[string]Values{"summary": {"ttft_mean": ttft, "e2e_mean": e2e}}, Completed: map[string]int{"summary": completed}, Engines: []int{completed}, Utilization: float64(completed) / 100}
		if stage {
			r.Predicted["stage_1"] = Values{"ttft_p99": ttft * 10}
		}
		return r
	}
	got := medianOfDraws([]*Result{d(50, 900, true, 7), d(400, 1000, false, 8), d(70, 1200, true, 9), d(60, 800, true, 10), d(2000, 950, true, 11)})
	want := map[string]Values{
		// ttft 50, 60, 70, 400, 2000 → 70; e2e 800, 900, 950, 1000, 1200 → 950.
		"summary": {"ttft_mean": 70, "e2e_mean": 950},
		// Four draws have stage_1: 500, 600, 700, 20000 → (600+700)/2.
		"stage_1": {"ttft_p99": 650},
	}
	for scope, vs := range want {
		for m, v := range vs {
			if g := got.Predicted[scope][m]; g != v {
				t.Errorf("%s %s: %v, want %v", scope, m, g, v)
			}
		}
		if len(got.Predicted[scope]) != len(vs) {
			t.Errorf("%s: %v, want only %v", scope, got.Predicted[scope], vs)
		}
	}
	if got.Completed["summary"] != 7 || !slices.Equal(got.Engines, []int{7}) || got.Utilization != 0.07 {
		t.Errorf("counts and knee %v %v %v, want the first draw's", got.Completed, got.Engines, got.Utilization)
	}
}

// TestNearKnee: a run is near its knee for the draws from a utilization
// of DrawsUtilization (0.75) on, whatever the calibration.
func TestNearKnee(t *testing.T) {
	for _, c := range []struct {
		util float64
		want bool
	}{
		{0.749, false},
		{0.75, true},
		{2.5, true}, // past the knee
		{0, false},  // nothing completed
	} {
		if got := nearKnee(&Result{Utilization: c.util}); got != c.want {
			t.Errorf("utilization %v: %v, want %v", c.util, got, c.want)
		}
	}
}

// TestSimulateAllDrawsNearKnee: SimulateAll predicts a run near its knee
// by the median of Draws single-draw simulations with seeds Seed, Seed+1,
// … (each computed here with Simulate), and a run far from it by the one
// draw of Seed.
func TestSimulateAllDrawsNearKnee(t *testing.T) {
	c := replica.DefaultCalibration()
	near := loadFixture(t, resultsFixtures[2]) // Llama-2-7B reasoning, measured overloaded
	far := loadFixture(t, resultsFixtures[1])  // Mixtral roleplay, utilization about 0.3
	o := Options{Seed: 7, StageLimit: 40, Draws: 3}
	got, err := SimulateAll(context.Background(), []*Experiment{near, far}, c, o, 2)
	if err != nil {
		t.Fatal(err)
	}
	single := func(e *Experiment, seed uint64) *Result {
		so := o
		so.Seed, so.Draws = seed, 1
		r, err := Simulate(context.Background(), e, c, so)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	draws := []*Result{single(near, 7), single(near, 8), single(near, 9)}
	if !nearKnee(draws[0]) || nearKnee(single(far, 7)) {
		t.Fatalf("fixtures: utilizations %v and %v do not straddle the knee", draws[0].Utilization, single(far, 7).Utilization)
	}
	moved := 0
	for scope, vs := range got[0].Predicted {
		for m, v := range vs {
			if v != draws[0].Predicted[scope][m] {
				moved++
			}
			xs := []float64{draws[0].Predicted[scope][m], draws[1].Predicted[scope][m], draws[2].Predicted[scope][m]}
			slices.Sort(xs)
			if v != xs[1] {
				t.Errorf("near: %s %s = %v, want the middle of %v", scope, m, v, xs)
			}
		}
	}
	if moved == 0 {
		t.Error("near: every metric is seed 7's: the test cannot tell the median from one draw")
	}
	if a, b := draws[0].Predicted["summary"]["ttft_p99"], draws[1].Predicted["summary"]["ttft_p99"]; a == b {
		t.Errorf("near: seeds 7 and 8 give the same TTFT p99 %v: the draws do not differ", a)
	}
	one := single(far, 7)
	for scope, vs := range got[1].Predicted {
		for m, v := range vs {
			if v != one.Predicted[scope][m] {
				t.Errorf("far: %s %s = %v, want seed 7's %v", scope, m, v, one.Predicted[scope][m])
			}
		}
	}
}

// TestCalibrateObjectiveDraws: calibrate's objective predicts a run near
// its knee as validate latency does, by the median of its draws (Draws 0:
// KneeDraws), unless told one draw. A run near its knee (Llama-3.1-8B at
// 100 requests/s, utilization about 0.85) whose "measured" latencies are
// the default calibration's five-draw prediction is fitted exactly at the
// default calibration by the median objective (objective 0), and not by
// one draw, whose TTFT tail differs from the median's; the fitted-on note
// says which objective it was. The objective leaves itl_mean out (weight
// 0): the prediction's is the median of the draws' ITLs, the measurement's
// is computed from the medianed E2E and TTFT means, and the two differ.
func TestCalibrateObjectiveDraws(t *testing.T) {
	f := parseRuns(t, dpRun("knee", 1, 100, 30, ""))
	truth := replica.DefaultCalibration()
	ctx := context.Background()
	e := &f.Experiments[0]
	res, err := SimulateAll(ctx, []*Experiment{e}, truth, Options{Seed: 1}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !nearKnee(res[0]) {
		t.Fatalf("utilization %v: the run is not near its knee", res[0].Utilization)
	}
	e.Measured = map[string]Measurement{}
	for scope, v := range res[0].Predicted {
		e.Measured[scope] = Measurement{E2E: Distribution{v["e2e_mean"], v["e2e_p90"], v["e2e_p99"]},
			TTFT: Distribution{v["ttft_mean"], v["ttft_p90"], v["ttft_p99"]}}
	}
	for _, tc := range []struct {
		draws int
		exact bool
		note  string
	}{
		{0, true, "; runs near their knee by the median of 5 arrival draws"},
		{1, false, "; one arrival draw per run"},
	} {
		fit, err := Calibrate(ctx, f, CalibrateOptions{Start: truth, Free: []string{"step_us"}, Budget: 3, Draws: tc.draws,
			Weights: map[string]float64{"itl_mean": 0}, Seed: 1, Workers: 2, Name: "t"})
		if err != nil {
			t.Fatal(err)
		}
		if exact := fit.Objective == 0; exact != tc.exact {
			t.Errorf("draws %d: objective %v, want zero: %v", tc.draws, fit.Objective, tc.exact)
		}
		if !strings.HasSuffix(fit.Calibration.FittedOn, tc.note) {
			t.Errorf("draws %d: fitted on %q, want it to end in %q", tc.draws, fit.Calibration.FittedOn, tc.note)
		}
	}
}

// TestFoldDraws: a fold records the number of draws of its objective near
// the knee, and nothing (0, what a fold without the field means) for one.
func TestFoldDraws(t *testing.T) {
	for _, tc := range []struct{ draws, want int }{{0, KneeDraws}, {1, 0}, {3, 3}, {5, 5}} {
		if got := FoldDraws(tc.draws); got != tc.want {
			t.Errorf("FoldDraws(%d) = %d, want %d", tc.draws, got, tc.want)
		}
	}
}
