package latency

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/replica"
)

// TestExtrapolations: the reach records the fitted runs' TP sizes (by
// value, not as strings: 16 after 4) and GPUs, and the factors of the
// axis protocol's held-out errors, none from fewer than 5 (the GPU
// protocol's 2 here). The six errors are TestFactors's: 0.825–1.275.
func TestExtrapolations(t *testing.T) {
	fitted := []*Experiment{
		run("a", "A", "H100", 4, 1000, 1), run("b", "B", "H100", 1, 1000, 1),
		run("c", "C", "L40S", 16, 1000, 1), run("d", "D", "H100", 1, 1000, 1),
	}
	rowsOf := func(ratios ...float64) []Row {
		var rows []Row
		for i, r := range ratios {
			rows = append(rows, Row{Experiment: string(rune('a' + i)), Scope: "summary", Metric: "itl_mean", Predicted: 10, Actual: 10 * r})
		}
		return rows
	}
	x := Extrapolations(fitted, map[string][]Row{"tp": rowsOf(1.1, 0.8, 1.3, 1.0, 0.9, 1.2), "gpu": rowsOf(1.1, 1.2)})
	want := map[string]replica.Extrapolation{
		"tp":  {Seen: []string{"1", "4", "16"}, Intervals: map[string]replica.Interval{"itl_mean": {Low: 0.825, High: 1.275, Runs: 6}}},
		"gpu": {Seen: []string{"H100", "L40S"}},
	}
	if !reflect.DeepEqual(x, want) {
		t.Errorf("Extrapolations = %+v, want %+v", x, want)
	}
	if x := Extrapolations(nil, nil); x != nil {
		t.Errorf("no fitted runs: %+v", x)
	}
	// The seen models: the fitted runs' models, sorted, with the factors
	// of the load errors given (the same six errors), or none without.
	model, _ := LookupProtocol("model")
	fitted = append(fitted, run("a2", "A", "H100", 4, 1000, 1))
	sm := seenModels(fitted, rowsOf(1.1, 0.8, 1.3, 1.0, 0.9, 1.2))
	if want := (&replica.SeenModels{Models: []string{"A", "B", "C", "D"}, Intervals: map[string]replica.Interval{"itl_mean": {Low: 0.825, High: 1.275, Runs: 6}}}); !reflect.DeepEqual(sm, want) {
		t.Errorf("seenModels = %+v, want %+v", sm, want)
	}
	if sm := SeenModelsOf(fitted, []ProtocolRows{{Protocol: model, Rows: rowsOf(1.1, 0.8, 1.3, 1.0, 0.9, 1.2)}}); sm == nil || len(sm.Models) != 4 || sm.Intervals != nil {
		t.Errorf("without the load protocol: %+v, want the models alone", sm)
	}
	if sm := SeenModelsOf(nil, nil); sm != nil {
		t.Errorf("no fitted runs: %+v", sm)
	}
	if got := slices.SortedFunc(slices.Values([]string{"b", "10", "2", "a", "1"}), numberFirst); !slices.Equal(got, []string{"1", "2", "10", "a", "b"}) {
		t.Errorf("numberFirst order %q", got)
	}
}

// TestCoverageBeyondTheCalibration: in sample, a run at a TP size the
// calibration never saw is judged on the interval eppsim run would give
// it, widened by the TP protocol's factors; a run it covers is not, and
// only the first is listed as beyond the calibration.
func TestCoverageBeyondTheCalibration(t *testing.T) {
	c := replica.Calibration{Name: "x",
		Intervals:     map[string]replica.Interval{"e2e_mean": {Low: 0.9, High: 1.1, Runs: 26}},
		Extrapolation: map[string]replica.Extrapolation{"tp": {Seen: []string{"1"}, Intervals: map[string]replica.Interval{"e2e_mean": {Low: 0.5, High: 1.5, Runs: 26}}}},
	}
	var results []*Result
	for _, tc := range []struct {
		id string
		tp int
	}{{"covered", 1}, {"tp8", 8}} {
		e := run(tc.id, "A", "H100", tc.tp, 1400, 5)
		e.Measured["summary"] = Measurement{E2E: Distribution{Mean: 1400, P90: math.NaN(), P99: math.NaN()}, TTFT: Distribution{Mean: 1, P90: math.NaN(), P99: math.NaN()}} // only e2e_mean predicted
		results = append(results, &Result{Experiment: e, Predicted: map[string]Values{"summary": {"e2e_mean": 1000}}})
	}
	r := &Report{Calibration: c, Results: results}
	if err := r.SetCoverage(context.Background(), Options{}, 1); err != nil {
		t.Fatal(err)
	}
	if len(r.Coverage) != 1 || r.Coverage[0].Inside != 1 || r.Coverage[0].Total != 2 {
		t.Errorf("coverage %+v, want the TP 8 run's value inside and the covered run's outside", r.Coverage)
	}
	if b := r.Bounds["tp8"]["e2e_mean"]; math.Abs(b.Low-500) > 1e-9 || math.Abs(b.High-1500) > 1e-9 {
		t.Errorf("TP 8 interval %+v, want 500–1500", b)
	}
	if b := r.Bounds["covered"]["e2e_mean"]; math.Abs(b.Low-900) > 1e-9 || math.Abs(b.High-1100) > 1e-9 {
		t.Errorf("covered interval %+v, want 900–1100", b)
	}
	notes := ExtrapolationNotes(c, results)
	if len(notes) != 1 || !strings.HasPrefix(notes[0], "tp8: TP 8 is outside the calibration's TP sizes (1)") {
		t.Errorf("notes %q", notes)
	}
}

// TestCoverageSeenModels: in sample, a run of a model the calibration
// was fitted on is judged on the leave-the-highest-load-out errors of
// other models' runs, as eppsim run would judge another load of it, and
// a run of any other model on the leave-one-model-out errors. The pools'
// six errors each give, by TestFactors's arithmetic, 0.825–1.275 (model
// out: 0.8 to 1.3) and 0.955–1.045 (load: 0.95 to 1.05 by 0.02).
func TestCoverageSeenModels(t *testing.T) {
	pool := func(prefix string, ratios ...float64) ([]*Result, []replica.Coefficients) {
		var rs []*Result
		for i, r := range ratios {
			e := run(fmt.Sprintf("%s%d", prefix, i), string(rune('P'+i)), "H100", 1, 1000*r, 5)
			e.Measured["summary"] = Measurement{E2E: Distribution{Mean: 1000 * r, P90: math.NaN(), P99: math.NaN()}, TTFT: Distribution{Mean: 1, P90: math.NaN(), P99: math.NaN()}}
			rs = append(rs, &Result{Experiment: e, Predicted: map[string]Values{"summary": {"e2e_mean": 1000}}})
		}
		return rs, make([]replica.Coefficients, len(rs))
	}
	model, _ := LookupProtocol("model")
	load, _ := LookupProtocol("load")
	mr, mc := pool("m", 0.8, 0.9, 1.0, 1.1, 1.2, 1.3)
	lr, lc := pool("l", 0.95, 0.97, 0.99, 1.01, 1.03, 1.05)
	var results []*Result
	for _, tc := range []struct{ id, model string }{{"seen", "A"}, {"unseen", "Z"}} {
		e := run(tc.id, tc.model, "H100", 1, 1200, 5)
		e.Measured["summary"] = Measurement{E2E: Distribution{Mean: 1200, P90: math.NaN(), P99: math.NaN()}, TTFT: Distribution{Mean: 1, P90: math.NaN(), P99: math.NaN()}}
		results = append(results, &Result{Experiment: e, Predicted: map[string]Values{"summary": {"e2e_mean": 1000}}})
	}
	r := &Report{
		Calibration: replica.Calibration{Name: "x", SeenModels: &replica.SeenModels{Models: []string{"A"}}},
		Results:     results,
		OutOfSample: []ProtocolRows{
			{Protocol: model, Results: mr, Coefficients: mc, Rows: Rows(mr)},
			{Protocol: load, Results: lr, Coefficients: lc, Rows: Rows(lr)},
		},
	}
	if err := r.SetCoverage(context.Background(), Options{}, 1); err != nil {
		t.Fatal(err)
	}
	if b := r.Bounds["seen"]["e2e_mean"]; math.Abs(b.Low-955) > 1e-9 || math.Abs(b.High-1045) > 1e-9 {
		t.Errorf("seen model's interval %+v, want 955–1045", b)
	}
	if b := r.Bounds["unseen"]["e2e_mean"]; math.Abs(b.Low-825) > 1e-9 || math.Abs(b.High-1275) > 1e-9 {
		t.Errorf("unseen model's interval %+v, want 825–1275", b)
	}
	if c := r.Coverage[0]; c.Inside != 1 || c.Total != 2 {
		t.Errorf("in-sample coverage %+v, want the unseen model's 1200 inside and the seen one's outside", c)
	}
}

// TestSampleLabel: the figures on all runs are "in sample" only when the
// calibration was fitted on every one of them that is not overloaded
// (its leave-one-model-out folds name its fitted runs).
func TestSampleLabel(t *testing.T) {
	over := run("over", "A", "H100", 1, 1000, 1)
	over.RegimeFlags = []string{"overloaded"}
	results := func(es ...*Experiment) []*Result {
		var out []*Result
		for _, e := range es {
			out = append(out, &Result{Experiment: e})
		}
		return out
	}
	a, b, mine := run("a", "A", "H100", 1, 1000, 1), run("b", "B", "H100", 2, 1000, 1), run("mine", "C", "H100", 8, 1000, 1)
	folds := []replica.CalibrationFold{{Protocol: "model", Runs: []string{"a"}}, {Protocol: "model", Runs: []string{"b"}}, {Protocol: "tp", Runs: []string{"mine"}}}
	for _, tc := range []struct {
		name  string
		folds []replica.CalibrationFold
		runs  []*Experiment
		want  string
	}{
		{"the fitted runs and an overloaded one", folds, []*Experiment{a, b, over}, "in sample"},
		{"a user's runs", folds, []*Experiment{mine}, "runs the fit never saw"},
		{"both", folds, []*Experiment{a, mine, over}, "in sample for 1 of 2 runs"},
		{"no folds to tell by", nil, []*Experiment{mine}, "in sample"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Report{Calibration: replica.Calibration{Folds: tc.folds}, Results: results(tc.runs...)}
			if got := r.SampleLabel(); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestCoverageFittedDeployments: with step offsets, a fitted deployment
// takes the load protocol's factors, from all its errors (six runs at
// 0.95 to 1.05 and a Mixtral run at 2.0 without a fold offset: the 5%
// and 95% quantiles of the seven, 0.956 and 1.715), and the same model at
// another TP size the model-out ones (0.8 to 1.3: 825–1275). Under the
// load protocol the offset runs are judged on the other models' load
// errors and the Mixtral run on the model protocol's (2.0 outside
// 825–1275).
func TestCoverageFittedDeployments(t *testing.T) {
	f, err := Parse([]byte(miniFile), "mini.json")
	if err != nil {
		t.Fatal(err)
	}
	mk := func(id, model string, tp int, ratio float64) *Result {
		e := f.Experiments[0]
		e.ID, e.Model, e.TP = id, model, tp
		e.Measured = map[string]Measurement{"summary": {E2E: Distribution{Mean: 1000 * ratio, P90: math.NaN(), P99: math.NaN()}, TTFT: Distribution{Mean: 1, P90: math.NaN(), P99: math.NaN()}}}
		return &Result{Experiment: &e, Predicted: map[string]Values{"summary": {"e2e_mean": 1000}}}
	}
	others := []string{"01-ai/Yi-34B", "Qwen/Qwen3-14B", "mistralai/Mistral-Nemo-Instruct-2407", "meta-llama/Llama-3.1-8B-Instruct", "codellama/CodeLlama-34b-Instruct-hf", "Qwen/Qwen2.5-7B-Instruct"}
	model, _ := LookupProtocol("model")
	load, _ := LookupProtocol("load")
	mp := ProtocolRows{Protocol: model}
	lp := ProtocolRows{Protocol: load}
	for i, m := range others {
		mp.Results = append(mp.Results, mk(fmt.Sprintf("m%d", i), m, 2, 0.8+0.1*float64(i)))
		r := mk(fmt.Sprintf("l%d", i), m, 2, 0.95+0.02*float64(i))
		d, err := deploymentOf(r.Experiment)
		if err != nil {
			t.Fatal(err)
		}
		lp.Results = append(lp.Results, r)
		lp.Offsets = append(lp.Offsets, []replica.StepOffset{{Deployment: d, Runs: 2, Factor: 0.97}})
	}
	lp.Results = append(lp.Results, mk("mixtral", "mistralai/Mixtral-8x7B-v0.1", 2, 2.0))
	lp.Offsets = append(lp.Offsets, nil)
	for _, pr := range []*ProtocolRows{&mp, &lp} {
		pr.Rows = Rows(pr.Results)
		pr.Coefficients = make([]replica.Coefficients, len(pr.Results))
	}
	fit, newTP := mk("fit", "meta-llama/Llama-2-7b-hf", 1, 1.2), mk("newtp", "meta-llama/Llama-2-7b-hf", 2, 1.2)
	d, err := deploymentOf(fit.Experiment)
	if err != nil {
		t.Fatal(err)
	}
	c := replica.Calibration{Name: "x", SeenModels: &replica.SeenModels{Models: []string{"meta-llama/Llama-2-7b-hf"}},
		Offsets: []replica.StepOffset{{Deployment: d, Runs: 3, Factor: 0.96}}}
	r := &Report{Calibration: c, Results: []*Result{fit, newTP}, OutOfSample: []ProtocolRows{mp, lp}}
	if err := r.SetCoverage(context.Background(), Options{}, 1); err != nil {
		t.Fatal(err)
	}
	if b := r.Bounds["fit"]["e2e_mean"]; math.Abs(b.Low-956) > 1e-9 || math.Abs(b.High-1715) > 1e-9 {
		t.Errorf("fitted deployment's interval %+v, want 956–1715", b)
	}
	if b := r.Bounds["newtp"]["e2e_mean"]; math.Abs(b.Low-825) > 1e-9 || math.Abs(b.High-1275) > 1e-9 {
		t.Errorf("the fitted model at TP 2: %+v, want 825–1275", b)
	}
	// Under the load protocol all seven values are judged (which pool
	// each takes, the in-sample bounds above test through the same rule).
	for _, cov := range r.Coverage {
		if cov.Label == load.Label && cov.Total != 7 {
			t.Errorf("load protocol coverage %+v, want 7 values", cov)
		}
	}
	sm := SeenModelsOf([]*Experiment{fit.Experiment}, []ProtocolRows{mp, lp})
	if iv := sm.Intervals["e2e_mean"]; math.Abs(iv.Low-0.956) > 1e-12 || math.Abs(iv.High-1.715) > 1e-12 || iv.Runs != 7 {
		t.Errorf("seen-model factors %+v, want 0.956–1.715 over the 7 runs", iv)
	}
	_, basis, notes := c.IntervalsFor(placementOf(newTP.Experiment))
	if basis != "leave one model out" || len(notes) != 1 || !strings.Contains(notes[0], "meta-llama/Llama-2-7b-hf (float16, vllm) on H100 at TP 2 is not a deployment the calibration was fitted on") {
		t.Errorf("TP 2: %q, %q", basis, notes)
	}
}
