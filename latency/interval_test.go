package latency

import (
	"context"
	"math"
	"testing"

	"github.com/eppsim/eppsim/replica"
)

// TestFactors: the 5% and 95% quantiles of measured ÷ predicted, by
// numpy's linear interpolation: for ratios 0.8, 0.9, …, 1.3 (six runs)
// the 5% quantile sits a quarter of the way from 0.8 to 0.9 and the 95%
// three quarters of the way from 1.2 to 1.3.
func TestFactors(t *testing.T) {
	var rows []Row
	for i, r := range []float64{1.1, 0.8, 1.3, 1.0, 0.9, 1.2} {
		rows = append(rows, Row{Experiment: string(rune('a' + i)), Scope: "summary", Metric: "ttft_mean", Predicted: 100, Actual: 100 * r})
	}
	rows = append(rows, Row{Experiment: "x", Scope: "stage_0", Metric: "ttft_mean", Predicted: 100, Actual: 900}) // not a whole run
	f := Factors(rows, nil)
	iv, ok := f["ttft_mean"]
	if !ok || math.Abs(iv.Low-0.825) > 1e-12 || math.Abs(iv.High-1.275) > 1e-12 || iv.Runs != 6 {
		t.Errorf("factors %+v, want 0.825 and 1.275 over 6 runs", iv)
	}
	if _, ok := Factors(rows[:4], nil)["ttft_mean"]; ok {
		t.Error("factors from 4 errors, want none below 5")
	}
}

// TestCoverageLeavesTheModelOut: a run's interval comes from the other
// models' errors only, and the measured values inside it are counted.
func TestCoverageLeavesTheModelOut(t *testing.T) {
	mk := func(id, model string, pred, actual float64) (*Result, Row) {
		e := run(id, model, "H100", 1, actual, 5)
		e.Measured["summary"] = Measurement{E2E: Distribution{Mean: actual, P90: math.NaN(), P99: math.NaN()}, TTFT: Distribution{Mean: 1, P90: math.NaN(), P99: math.NaN()}}
		res := &Result{Experiment: e, Predicted: map[string]Values{"summary": {"e2e_mean": pred}}}
		return res, Row{Experiment: id, Scope: "summary", Metric: "e2e_mean", Predicted: pred, Actual: actual, APE: ape(pred, actual)}
	}
	var cases []intervalCase
	var pool []Row
	// Model A's five runs err by 0.9–1.1; model B's one run by 2.0, far
	// outside what A's errors allow; B's interval is A's 5%–95% (0.91–1.09: a fifth of a step from each end),
	// and A's runs, judged on B's one error, get none (fewer than 5).
	for i, r := range []float64{0.9, 0.95, 1.0, 1.05, 1.1} {
		res, row := mk(string(rune('a'+i)), "A", 1000, 1000*r)
		cases, pool = append(cases, intervalCase{res: res}), append(pool, row)
	}
	res, row := mk("z", "B", 1000, 2000)
	cases, pool = append(cases, intervalCase{res: res}), append(pool, row)
	modelOf := map[string]string{}
	for _, k := range cases {
		modelOf[k.res.Experiment.ID] = k.res.Experiment.Model
	}
	cov, bounds, err := coverage(context.Background(), "test", cases, otherModels(pool, modelOf), replica.Calibration{}, Options{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if cov.Total != 1 || cov.Inside != 0 || cov.NearKnee != 0 {
		t.Errorf("coverage %+v, want B's one value checked and outside", cov)
	}
	if b := bounds["z"]["e2e_mean"]; math.Abs(b.Low-910) > 1e-9 || math.Abs(b.High-1090) > 1e-9 {
		t.Errorf("B's interval %+v, want 910–1090", b)
	}
}
