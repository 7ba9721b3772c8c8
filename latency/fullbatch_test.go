package latency

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/replica/sglang"
	"github.com/eppsim/eppsim/report"
)

// fullBatchResults: runs of mini.json's experiment measured at ratio ×
// their predicted decode time per token, overloaded or not, with the
// binding limit their prediction's knee names ("": no knee).
func fullBatchResults(t *testing.T, runs ...struct {
	id, model, binding string
	overloaded         bool
	ratio              float64
}) []*Result {
	t.Helper()
	f, err := Parse([]byte(miniFile), "mini.json")
	if err != nil {
		t.Fatal(err)
	}
	var out []*Result
	for _, r := range runs {
		e := f.Experiments[0]
		e.ID, e.Model = r.id, r.model
		if r.overloaded {
			e.RegimeFlags = []string{"overloaded"}
		}
		a := e.MeasuredValues("summary")["itl_mean"]
		if !(a > 0) {
			t.Fatalf("%s: no measured decode time", r.id)
		}
		res := &Result{Experiment: &e, Predicted: map[string]Values{"summary": {"itl_mean": a / r.ratio}}}
		if r.binding != "" {
			res.Knee = &report.Knee{MaxRequestsPerS: 4, Binding: r.binding}
		}
		out = append(out, res)
	}
	return out
}

type fullBatchRun = struct {
	id, model, binding string
	overloaded         bool
	ratio              float64
}

// TestFullBatchErrors: only runs measured overloaded whose prediction
// binds at the engine's slots (max_num_seqs, SGLang's
// max_running_requests) count (a KV-bound run preempts, a sustained run
// is not at full batch, a run without a knee says nothing); the factor
// is the largest ratio, and a run of a model takes the largest among the
// other models' runs (compared without regard to case).
func TestFullBatchErrors(t *testing.T) {
	rs := fullBatchResults(t,
		fullBatchRun{"a", "Org/A", replica.LimitMaxNumSeqs, true, 1.5},
		fullBatchRun{"b-kv", "Org/B", replica.LimitKVBlocks, true, 0.7},
		fullBatchRun{"c-sustained", "Org/C", replica.LimitMaxNumSeqs, false, 2.0},
		fullBatchRun{"c", "Org/C", replica.LimitMaxNumSeqs, true, 1.2},
		fullBatchRun{"d-noknee", "Org/D", "", true, 3.0},
		fullBatchRun{"e-sglang", "Org/E", sglang.LimitMaxRunningRequests, true, 1.1},
	)
	errs := FullBatchErrors(rs)
	var ids []string
	for _, fe := range errs {
		ids = append(ids, fe.ID)
	}
	if got := strings.Join(ids, ","); got != "a,c,e-sglang" {
		t.Fatalf("full-batch runs %q, want a,c,e-sglang", got)
	}
	if math.Abs(errs[0].Ratio()-1.5) > 1e-9 || math.Abs(errs[1].Ratio()-1.2) > 1e-9 {
		t.Errorf("ratios %+v, want 1.5 and 1.2", errs)
	}
	if fb := FullBatchOf(rs); fb == nil || fb.Factor != 1.5 || fb.Runs != 3 {
		t.Errorf("FullBatchOf %+v, want factor 1.5 over 3 runs", fb)
	}
	for model, want := range map[string]float64{"Org/A": 1.2, "org/a": 1.2, "Org/C": 1.5, "Org/D": 1.5} {
		if got := fullBatchFor(errs, model); math.Abs(got-want) > 1e-9 {
			t.Errorf("fullBatchFor(%s) = %v, want %v", model, got, want)
		}
	}
	if got := fullBatchFor(errs[:1], "Org/A"); got != 0 {
		t.Errorf("A's own run only: %v, want 0", got)
	}
	if FullBatchOf(rs[1:3]) != nil {
		t.Error("no qualifying run: want no factor")
	}
	// The report's lines: the rate at the measured decode is the
	// predicted rate over the ratio, 4 / 1.5.
	rows := errs
	if len(rows) != 3 || rows[0].Rate != 4 || !strings.Contains(rows[0].Sentence(), "about 2.67 at the measured decode") || !strings.Contains(rows[0].Sentence(), "(×1.500)") {
		t.Errorf("rows %+v: %q", rows, rows[0].Sentence())
	}
}

// TestRunBoundsFullBatch: a run at utilization 0.7 with an ITL interval
// of 0.9–1.1 is not near its knee (0.7 × 1.1 = 0.77 < 0.9); a
// full-batch factor of 1.3 makes its slow end 1.3 (0.91 ≥ 0.9), and the
// knee simulations run at 0.9 and 1.3. Mutation-checked: runBounds
// ignoring the case's factor leaves the run outside the knee.
func TestRunBoundsFullBatch(t *testing.T) {
	f, err := Parse([]byte(miniFile), "mini.json")
	if err != nil {
		t.Fatal(err)
	}
	e := &f.Experiments[0]
	o := Options{Seed: 1, StageLimit: 5}
	c := replica.DefaultCalibration()
	res, err := Simulate(context.Background(), e, c, o)
	if err != nil {
		t.Fatal(err)
	}
	res.Utilization = 0.7
	factors := map[string]replica.Interval{"itl_mean": {Low: 0.9, High: 1.1, Runs: 9}}
	k := intervalCase{res: res, co: c.Coefficients, off: c.Offsets}
	if _, near, err := runBounds(context.Background(), k, factors, c, o, 1); err != nil || near {
		t.Fatalf("without a full-batch factor: near %v, %v; want not near", near, err)
	}
	k.fullBatch = 1.3
	b, near, err := runBounds(context.Background(), k, factors, c, o, 1)
	if err != nil || !near {
		t.Fatalf("with 1.3: near %v, %v; want near", near, err)
	}
	p := res.Predicted["summary"]["itl_mean"]
	slow, err := Simulate(context.Background(), e, c, Options{Seed: 1, StageLimit: 5, StepScale: 1.3})
	if err != nil {
		t.Fatal(err)
	}
	if hi := b["itl_mean"].High; math.Abs(hi-max(1.1*p, slow.Predicted["summary"]["itl_mean"])) > 1e-9 || hi <= 1.1*p {
		t.Errorf("ITL high %v, want the run at steps ×1.3 (%v), above 1.1 × %v", hi, slow.Predicted["summary"]["itl_mean"], p)
	}
}

// TestSetCoverageFullBatch: in a report, a run at utilization 0.7 whose
// ITL factors end at 1.1 is near its knee only through another model's
// full-batch error (1.5: 0.7 × 1.5 ≥ 0.9); the same error on its own
// model's overloaded run does not slow its knee simulations.
func TestSetCoverageFullBatch(t *testing.T) {
	f, err := Parse([]byte(miniFile), "mini.json")
	if err != nil {
		t.Fatal(err)
	}
	c := replica.DefaultCalibration()
	o := Options{Seed: 1, StageLimit: 5}
	e := f.Experiments[0]
	res, err := Simulate(context.Background(), &e, c, o)
	if err != nil {
		t.Fatal(err)
	}
	res.Utilization = 0.7
	model, _ := LookupProtocol("model")
	mp := ProtocolRows{Protocol: model}
	for i, r := range []float64{0.9, 0.95, 1.0, 1.05, 1.1} {
		x := e
		x.ID, x.Model = fmt.Sprintf("x%d", i), "Org/X"
		mp.Results = append(mp.Results, &Result{Experiment: &x, Predicted: map[string]Values{"summary": {"itl_mean": 10}}})
		mp.Rows = append(mp.Rows, Row{Experiment: x.ID, Scope: "summary", Metric: "itl_mean", Predicted: 10, Actual: 10 * r})
	}
	mp.Coefficients = make([]replica.Coefficients, len(mp.Results))
	for _, tc := range []struct {
		overloadedModel string
		near            int
	}{{"Org/B", 1}, {e.Model, 0}} {
		b := fullBatchResults(t, fullBatchRun{"b", tc.overloadedModel, replica.LimitMaxNumSeqs, true, 1.5})[0]
		r := &Report{Calibration: c, Results: []*Result{res, b}, OutOfSample: []ProtocolRows{mp}}
		if err := r.SetCoverage(context.Background(), o, 1); err != nil {
			t.Fatal(err)
		}
		if got := r.Coverage[0].NearKnee; got != tc.near {
			t.Errorf("overloaded run of %s: %d runs near the knee in sample, want %d", tc.overloadedModel, got, tc.near)
		}
	}
}
