package latency

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/replica"
)

// run is a synthetic fitted run: stages at the given rates, each with a
// measured E2E mean of e2e ms.
func run(id, model, gpu string, tp int, e2e float64, rates ...float64) *Experiment {
	e := &Experiment{ID: id, Model: model, Hardware: gpu, TP: tp, Measured: map[string]Measurement{}}
	for i, r := range rates {
		e.Workload.Stages = append(e.Workload.Stages, Stage{RateRPS: r, DurationS: 600})
		e.Measured[fmt.Sprintf("stage_%d", i)] = Measurement{E2E: Distribution{Mean: e2e, P90: math.NaN(), P99: math.NaN()}}
	}
	e.Measured["summary"] = Measurement{E2E: Distribution{Mean: e2e}, TTFT: Distribution{Mean: 1}}
	return e
}

func testRuns() []*Experiment {
	return []*Experiment{
		run("a1", "A", "H100", 1, 2000, 5, 10), // load 20
		run("a2", "A", "H100", 1, 4000, 4),     // load 16
		run("a3", "A", "H100", 1, 1000, 30),    // load 30: A's highest
		run("b1", "B", "H100", 2, 3000, 8, 20), // load 60: B's highest
		run("b2", "B", "A100", 2, 3000, 6),     // load 18
		run("c1", "C", "L40S", 4, 2000, 2),     // C has one run: not in the load fold
		run("d1", "D", "H100", 4, 1000, 6),
		run("d2", "D", "H100", 4, 1000, 6), // ties d1 at 6: the later id is held out
	}
}

func runIDs(es []*Experiment) string {
	var out []string
	for _, e := range es {
		out = append(out, e.ID)
	}
	return strings.Join(out, ",")
}

// TestProtocolFolds: each protocol's folds, worked by hand from
// testRuns.
func TestProtocolFolds(t *testing.T) {
	runs := testRuns()
	for _, tc := range []struct {
		protocol string
		want     []string // "group: ids"
	}{
		{"model", []string{"A: a1,a2,a3", "B: b1,b2", "C: c1", "D: d1,d2"}},
		{"tp", []string{"TP 1: a1,a2,a3", "TP 2: b1,b2", "TP 4: c1,d1,d2"}},
		{"gpu", []string{"A100-80GB: b2", "H100: a1,a2,a3,b1,d1,d2", "L40S: c1"}},
		{"load", []string{"highest load of each model: a3,b1,d2"}},
	} {
		p, err := LookupProtocol(tc.protocol)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range p.Folds(runs) {
			got = append(got, f.Group+": "+runIDs(f.Test))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: folds %q, want %q", tc.protocol, got, tc.want)
		}
	}
	if _, err := LookupProtocol("lotpo"); err != nil {
		t.Errorf("protocol key: %v", err)
	}
	if _, err := LookupProtocol("seed"); err == nil || !strings.Contains(err.Error(), "model, load, tp, gpu") {
		t.Errorf("unknown protocol: %v", err)
	}
}

// TestLoadLevel: rate × measured E2E mean of the busiest stage, with the
// whole run's E2E for stages measured alone.
func TestLoadLevel(t *testing.T) {
	e := run("x", "A", "H100", 1, 2500, 8, 20)
	if got := e.LoadLevel(); got != 50 {
		t.Errorf("load %v, want 20/s × 2.5 s = 50", got)
	}
	delete(e.Measured, "stage_1")
	e.Measured["summary"] = Measurement{E2E: Distribution{Mean: 3000}}
	if got := e.LoadLevel(); got != 60 {
		t.Errorf("load %v, want 20/s × 3 s (whole run) = 60", got)
	}
}

// fakeFitter records the runs every fit and score call sees; a fit's
// coefficients carry the weight of ttft_p99 in StepUs, and a score is
// fixed per weight, so which candidate wins is known.
type fakeFitter struct {
	seen   []string
	scores map[float64]float64 // ttft_p99 weight → inner score
}

func (f *fakeFitter) fit(_ context.Context, runs []*Experiment, w map[string]float64, _ int, _ string) (replica.Coefficients, error) {
	f.seen = append(f.seen, runIDs(runs))
	return replica.Coefficients{StepUs: w["ttft_p99"]}, nil
}

func (f *fakeFitter) score(_ context.Context, runs []*Experiment, co replica.Coefficients) (float64, error) {
	f.seen = append(f.seen, runIDs(runs))
	return f.scores[co.StepUs], nil
}

// TestNestedSelectionNeverSeesTheFold: every fit and score that chooses a
// fold's weights and fits its coefficients sees only runs outside the
// fold; the candidate with the lowest inner score is chosen.
func TestNestedSelectionNeverSeesTheFold(t *testing.T) {
	runs := testRuns()
	o := CalibrateOptions{FoldBudget: 5, InnerFolds: 2, InnerBudget: 3,
		Candidates: []map[string]float64{{}, {"ttft_p99": 3}, {"ttft_p99": 5}}}
	ff := &fakeFitter{scores: map[float64]float64{0: 0.3, 3: 0.1, 5: 0.2}}
	p, _ := LookupProtocol("model")
	folds, err := refitFolds(context.Background(), ff, p, runs, o)
	if err != nil {
		t.Fatal(err)
	}
	// Model A's fold trains on 5 runs; B's on 6; C's on 7; D's on 6:
	// all refitted, each with ttft_p99=3 (the lowest inner score).
	if len(folds) != 4 {
		t.Fatalf("%d folds, want 4", len(folds))
	}
	for _, f := range folds {
		if f.Skipped != "" {
			t.Errorf("fold %s skipped: %s", f.Fold.Group, f.Skipped)
		}
		if f.Fit.Coefficients.StepUs != 3 || f.Fit.Weights["ttft_p99"] != 3 {
			t.Errorf("fold %s: weights %v, want ttft_p99=3", f.Fold.Group, f.Fit.Weights)
		}
	}
	// Replay the calls per fold: 3 candidates × 2 inner folds × (fit +
	// score) + the fold's own fit = 13 calls each.
	if len(ff.seen) != 4*13 {
		t.Fatalf("%d fit/score calls, want %d", len(ff.seen), 4*13)
	}
	for i, f := range folds {
		for _, call := range ff.seen[i*13 : (i+1)*13] {
			for _, e := range f.Fold.Test {
				if slices.Contains(strings.Split(call, ","), e.ID) {
					t.Errorf("fold %s: a call saw held-out run %s (%s)", f.Fold.Group, e.ID, call)
				}
			}
		}
	}
	// The gpu protocol's H100 fold would leave 2 runs: skipped, and says so.
	g, _ := LookupProtocol("gpu")
	gf, err := refitFolds(context.Background(), &fakeFitter{}, g, runs, CalibrateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range gf {
		wantSkip := f.Fold.Group == "H100"
		if (f.Skipped != "") != wantSkip || (wantSkip && !strings.Contains(f.Skipped, "2 runs would remain")) {
			t.Errorf("gpu fold %s: skipped %q", f.Fold.Group, f.Skipped)
		}
	}
}

// TestSelectNeedsTwoModels: choosing weights on one model's runs cannot
// cross-validate by model and says so.
func TestSelectNeedsTwoModels(t *testing.T) {
	runs := testRuns()[:3]
	_, err := Select(context.Background(), &fakeFitter{}, runs, []map[string]float64{{}, {"ttft_p99": 3}}, 3, 1, "fit")
	if err == nil || !strings.Contains(err.Error(), "at least 2 models") {
		t.Errorf("err %v", err)
	}
}

// miniTwoModels is the mini file with two measured runs of two models:
// its first run, Qwen2.5-7B's (grouped-query attention), and a copy of it
// as Llama-2-7B's (multi-head), id "copy", last; the file's unmeasured run
// is not fitted.
func miniTwoModels(t *testing.T) *File {
	t.Helper()
	f, err := Parse([]byte(miniFile), "mini.json")
	if err != nil {
		t.Fatal(err)
	}
	f.Experiments = append(f.Experiments, f.Experiments[0])
	last := &f.Experiments[len(f.Experiments)-1]
	last.ID, last.Model = "copy", "meta-llama/Llama-2-7b-hf"
	return f
}

// TestCalibrateRecordsFolds: a calibration with a protocol records each
// fold's refit, and validating it predicts every held-out run with its
// fold's coefficients, exactly as simulating that run with them does.
func TestCalibrateRecordsFolds(t *testing.T) {
	f := miniTwoModels(t)
	res, err := Calibrate(context.Background(), f, CalibrateOptions{Start: replica.PriorCalibration(), Budget: 2, StageLimit: 20,
		Protocols: []string{"model"}, MinTrainRuns: 1, Workers: 2, Name: "t", Source: "mini.json"})
	if err != nil {
		t.Fatal(err)
	}
	c := res.Calibration
	if len(c.Folds) != 2 || c.Folds[0].Protocol != "model" || c.Folds[0].TrainedOn != 1 {
		t.Fatalf("folds %+v", c.Folds)
	}
	// The fitted runs' models are recorded; without the load protocol,
	// no factors of another load.
	if s := c.SeenModels; s == nil || len(s.Models) != 2 || !slices.IsSorted(s.Models) || s.Intervals != nil {
		t.Errorf("seen models %+v", c.SeenModels)
	}
	rep, err := Validate(context.Background(), f, "mini.json", c, Options{Seed: 1}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.OutOfSample) != 1 || rep.OutOfSample[0].Folds != 2 || len(rep.OutOfSample[0].Results) != 2 {
		t.Fatalf("out of sample %+v", rep.OutOfSample)
	}
	// The full fit has an offset per deployment (each run is one, n = 1);
	// a model-out fold's held-out run shares no deployment with its
	// training run, so the fold has none, and its run is predicted without
	// the full fit's offsets, which its own residual made.
	if len(c.Offsets) != 2 {
		t.Errorf("offsets %+v, want one per run's deployment", c.Offsets)
	}
	for _, fold := range c.Folds {
		if fold.Offsets != nil {
			t.Errorf("fold %s has offsets %+v", fold.HeldOut, fold.Offsets)
		}
		fc := c
		fc.Coefficients, fc.Offsets = fold.Coefficients, fold.Offsets
		var e *Experiment
		for i := range f.Experiments {
			if f.Experiments[i].ID == fold.Runs[0] {
				e = &f.Experiments[i]
			}
		}
		want, err := Simulate(context.Background(), e, fc, Options{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, got := range rep.OutOfSample[0].Results {
			if got.Experiment.ID == e.ID && got.Predicted["summary"]["e2e_mean"] != want.Predicted["summary"]["e2e_mean"] {
				t.Errorf("%s: held-out E2E %v, its fold's refit gives %v", e.ID, got.Predicted["summary"]["e2e_mean"], want.Predicted["summary"]["e2e_mean"])
			}
		}
	}
}
