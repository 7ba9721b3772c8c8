package latency

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/eppsim/eppsim/replica"
)

func TestScratchCalibrate(t *testing.T) {
	f, err := Load("../../shared/latency/experiments.json")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	runs := FitRuns(f)
	c := replica.DefaultCalibration()
	for _, lim := range []int{0, 300, 120} {
		t0 := time.Now()
		v, err := Objective(context.Background(), runs, c, Options{Seed: 1, StageLimit: lim}, 2)
		t.Logf("limit %d: objective %.4f in %v", lim, v, time.Since(t0))
		if err != nil {
			t.Fatal(err)
		}
	}
	res, err := Calibrate(context.Background(), f, CalibrateOptions{Start: c, Budget: 500, StageLimit: 200, Workers: 2, Progress: os.Stderr, Name: "scratch", Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v %v", res.Calibration, time.Since(start))
	rows := Rows(res.Results)
	for _, m := range Metrics {
		v, n := MAPE(rows, m, func(id string) bool { for _, e := range runs { if e.ID == id { return true } }; return false })
		t.Logf("%s MAPE %.1f%% over %d", m, v, n)
	}
	for _, r := range rows {
		if r.Scope == "summary" && (r.Metric == "e2e_mean" || r.Metric == "ttft_mean" || r.Metric == "ttft_p99" || r.Metric == "itl_mean") {
			t.Logf("%-55s %-10s %10.1f %10.1f %6.1f%%", r.Experiment, r.Metric, r.Predicted, r.Actual, r.APE)
		}
	}
}
