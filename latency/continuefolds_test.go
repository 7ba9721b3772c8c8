package latency

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/replica"
)

// TestContinueFolds: each fold is continued from its own coefficients on
// its own training runs only, with the free coefficients alone moving; a
// fold whose runs have no multi-head-attention model leaves eta_kv_mha
// absent (eta_kv stands in), one trained on Llama-2-7B fits it from
// eta_kv; a fold whose record does not match the inputs is refused.
func TestContinueFolds(t *testing.T) {
	f := miniTwoModels(t)
	mha, gqa := &f.Experiments[len(f.Experiments)-1], &f.Experiments[0]
	if len(FitRuns(f)) != 2 {
		t.Fatalf("fitted runs %d, want 2", len(FitRuns(f)))
	}
	prior := replica.PriorCalibration()
	// Two folds with distinct starts, so that a fold continued from the
	// other's coefficients, or from the prior, would show.
	startWithoutMHA, startWithoutGQA := prior.Coefficients, prior.Coefficients
	startWithoutMHA.StepUs, startWithoutGQA.StepUs = 250, 350
	startWithoutMHA.EtaKV, startWithoutGQA.EtaKV = 0.6, 0.8
	cal := prior
	cal.Folds = []replica.CalibrationFold{
		{Protocol: "model", HeldOut: mha.Model, Runs: []string{mha.ID}, TrainedOn: 1, Coefficients: startWithoutMHA},
		{Protocol: "model", HeldOut: gqa.Model, Runs: []string{gqa.ID}, TrainedOn: 1, Coefficients: startWithoutGQA},
	}
	o := CalibrateOptions{Free: []string{"step_us", "eta_kv", "eta_kv_mha"}, FoldBudget: 6, StageLimit: 20, Seed: 1, Workers: 2}
	if err := ContinueFolds(context.Background(), f, &cal, o); err != nil {
		t.Fatal(err)
	}
	free := map[string]bool{"step_us": true, "eta_kv": true, "eta_kv_mha": true}
	for i, start := range []replica.Coefficients{startWithoutMHA, startWithoutGQA} {
		got, from := cal.Folds[i].Coefficients.Vector(), start.Vector()
		for k, name := range replica.CoefficientNames {
			if !free[name] && got[k] != from[k] {
				t.Errorf("fold %d: %s moved %v → %v, though not free", i, name, from[k], got[k])
			}
		}
	}
	// Without Llama-2-7B the runs are grouped-query only: eta_kv_mha is
	// not fitted and stays absent.
	if v := cal.Folds[0].Coefficients.EtaKVMHA; v != 0 {
		t.Errorf("fold without the multi-head model: eta_kv_mha %v, want absent (0)", v)
	}
	// Trained on Llama-2-7B's run alone: the search from the fold's own
	// start (eta_kv_mha at its eta_kv, 0.8) on that run, and no other,
	// gives the same coefficients, and never a worse objective than the
	// start's on that run.
	train := []*Experiment{mha}
	free3, err := freeIndexes(o.Free)
	if err != nil {
		t.Fatal(err)
	}
	s := startOf(startWithoutGQA, free3)
	if s.EtaKVMHA != 0.8 {
		t.Fatalf("start eta_kv_mha %v, want eta_kv's 0.8", s.EtaKVMHA)
	}
	want, _, _, err := fitOn(context.Background(), train, s, free3, o.FoldBudget, o, nil, "check")
	if err != nil {
		t.Fatal(err)
	}
	if got := cal.Folds[1].Coefficients; got != want {
		t.Errorf("fold without the grouped-query model: %+v, the fit on Llama-2-7B's run from its own start gives %+v", got, want)
	}
	objective := func(c replica.Coefficients) float64 {
		v, err := Objective(context.Background(), train, replica.Calibration{Name: "x", Coefficients: c}, Options{Seed: 1, StageLimit: 20, Draws: o.Draws}, 2)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if a, b := objective(cal.Folds[1].Coefficients), objective(s); !(a <= b) || math.IsNaN(a) {
		t.Errorf("continued fold's objective %v, its start's %v", a, b)
	}
	if !strings.Contains(cal.Notes, "Every fold continued from its own coefficients (free: step_us, eta_kv, eta_kv_mha; 6 evaluations each)") {
		t.Errorf("notes %q", cal.Notes)
	}

	// A fold recorded as trained on runs these inputs do not give.
	bad := prior
	bad.Folds = []replica.CalibrationFold{{Protocol: "model", HeldOut: "x", Runs: []string{"not-a-run"}, TrainedOn: 2, Coefficients: prior.Coefficients}}
	err = ContinueFolds(context.Background(), f, &bad, o)
	if err == nil || !strings.HasPrefix(err.Error(), "calibrate: fold model/x held out 1 runs and was fitted on 2; of these inputs' 2 fitted runs it would hold out 0 and fit on 2") {
		t.Errorf("mismatched fold: %v", err)
	}
	// Every fold is checked before any is fitted: a good fold before the
	// bad one keeps its coefficients.
	mixed := cal
	mixed.Folds = []replica.CalibrationFold{cal.Folds[0], bad.Folds[0]}
	mixed.Folds[0].Coefficients.StepUs += 17
	kept := mixed.Folds[0].Coefficients
	if err := ContinueFolds(context.Background(), f, &mixed, o); err == nil || mixed.Folds[0].Coefficients != kept {
		t.Errorf("a good fold before a mismatched one: err %v, coefficients %+v, want %+v kept", err, mixed.Folds[0].Coefficients, kept)
	}
	if err := CheckFolds(f, cal.Folds); err != nil {
		t.Errorf("CheckFolds of the folds it fitted: %v", err)
	}
	o.FoldBudget = 0
	if err := ContinueFolds(context.Background(), f, &cal, o); err == nil || !strings.Contains(err.Error(), "fold budget of at least 1") {
		t.Errorf("fold budget 0: %v", err)
	}
}

// TestOffsetAwareObjective: a run measured 1.3× slower per step than the
// coefficients predict (its deployment's step offset) costs the plain
// objective ln 1.3 in ITL; the offset-aware one sets the offset from the
// coefficients' own prediction first, shrunk to the half of the log of
// one run (replica.ShrunkOffset, n/(n+1) = 1/2), so it costs half that;
// offsets already on the calibration are replaced, not kept.
func TestOffsetAwareObjective(t *testing.T) {
	f, err := Parse([]byte(miniFile), "mini.json")
	if err != nil {
		t.Fatal(err)
	}
	e := &f.Experiments[0]
	runs := []*Experiment{e}
	truth := replica.DefaultCalibration()
	truth.Offsets = nil
	d, err := deploymentOf(e)
	if err != nil {
		t.Fatal(err)
	}
	slow := truth
	slow.Offsets = []replica.StepOffset{{Deployment: d, Runs: 1, Factor: 1.3}}
	res, err := SimulateAll(context.Background(), runs, slow, Options{Seed: 1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	e.Measured = map[string]Measurement{}
	for scope, v := range res[0].Predicted {
		e.Measured[scope] = Measurement{E2E: Distribution{v["e2e_mean"], v["e2e_p90"], v["e2e_p99"]},
			TTFT: Distribution{v["ttft_mean"], v["ttft_p90"], v["ttft_p99"]}}
	}
	itlOnly := map[string]float64{}
	for _, m := range FitMetrics {
		itlOnly[m] = 0
	}
	itlOnly["itl_mean"] = 1
	ctx := context.Background()
	plain, err := CalibrateOptions{Seed: 1, Workers: 1}.objective(ctx, runs, truth, itlOnly)
	if err != nil {
		t.Fatal(err)
	}
	aware, err := CalibrateOptions{Seed: 1, Workers: 1, OffsetAware: true}.objective(ctx, runs, truth, itlOnly)
	if err != nil {
		t.Fatal(err)
	}
	if want := math.Log(1.3); math.Abs(plain-want) > 0.1*want {
		t.Errorf("plain objective %.4f, want about ln 1.3 = %.4f", plain, want)
	}
	if want := math.Log(1.3) / 2; math.Abs(aware-want) > 0.1*want {
		t.Errorf("offset-aware objective %.4f, want about ln 1.3 / 2 = %.4f", aware, want)
	}
	again, err := CalibrateOptions{Seed: 1, Workers: 1, OffsetAware: true}.objective(ctx, runs, slow, itlOnly)
	if err != nil || again != aware {
		t.Errorf("offset-aware objective of a calibration with offsets %v (%v), want %v: its offsets are set again", again, err, aware)
	}
	// Not with a choice among metric weights.
	_, err = Calibrate(ctx, f, CalibrateOptions{Start: truth, Free: []string{"step_us"}, Budget: 1, OffsetAware: true,
		Candidates: []map[string]float64{nil, {"ttft_p99": 3}}, Workers: 1})
	if err == nil || !strings.Contains(err.Error(), "offset-aware objective does not choose among metric weights") {
		t.Errorf("offset-aware with weight candidates: %v", err)
	}
}
