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

// runAtUtilization simulates mini.json's measured run with c and o and
// sets its predicted utilization to u.
func runAtUtilization(t *testing.T, c replica.Calibration, o Options, u float64) (Experiment, *Result) {
	t.Helper()
	f, err := Parse([]byte(miniFile), "mini.json")
	if err != nil {
		t.Fatal(err)
	}
	e := f.Experiments[0]
	res, err := Simulate(context.Background(), &e, c, o)
	if err != nil {
		t.Fatal(err)
	}
	res.Utilization = u
	return e, res
}

// itlPool is a protocol's predictions of five runs of another model
// (Org/X, copies of e) whose measured ITL is 0.9 to 1.1 times the
// predicted: the pool a run of e's model takes its ITL factors from.
func itlPool(p Protocol, e Experiment) ProtocolRows {
	pr := ProtocolRows{Protocol: p}
	for i, r := range []float64{0.9, 0.95, 1.0, 1.05, 1.1} {
		x := e
		x.ID, x.Model = fmt.Sprintf("x%d", i), "Org/X"
		pr.Results = append(pr.Results, &Result{Experiment: &x, Predicted: map[string]Values{"summary": {"itl_mean": 10}}})
		pr.Rows = append(pr.Rows, Row{Experiment: x.ID, Scope: "summary", Metric: "itl_mean", Predicted: 10, Actual: 10 * r})
	}
	return pr
}

// TestSetCoverageFullBatch: in a report, a run at utilization 0.7 whose
// ITL factors end at 1.1 is near its knee only through another model's
// full-batch error (1.5: 0.7 × 1.5 ≥ 0.9); the same error on its own
// model's overloaded run does not slow its knee simulations.
func TestSetCoverageFullBatch(t *testing.T) {
	c, o := replica.DefaultCalibration(), Options{Seed: 1, StageLimit: 5}
	e, res := runAtUtilization(t, c, o, 0.7)
	model, _ := LookupProtocol("model")
	mp := itlPool(model, e)
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

// TestOutOfSampleFoldFullBatch: each fold predicts the file's overloaded
// runs with its own refit, so a fold whose steps cost more predicts a
// slower full-batch decode (a smaller ratio) than one whose steps cost
// less; the run is listed as held out only under the fold that held out
// its model (model protocol) or TP size (tp protocol: the fold without
// TP 2 does not hold out a TP 1 run). Mutation-checked: predicting the
// overloaded runs with the full fit's coefficients gives every fold the
// same ratio.
func TestOutOfSampleFoldFullBatch(t *testing.T) {
	f, err := Parse([]byte(miniFile), "mini.json")
	if err != nil {
		t.Fatal(err)
	}
	f.Experiments = f.Experiments[:1]
	over := f.Experiments[0]
	over.ID, over.RegimeFlags = "over", []string{"overloaded"}
	// Two slots and 20 requests/s of 60-token answers: its slots bind.
	over.Engine.MaxNumSeqs = 2
	over.Workload.Stages = []Stage{{RateRPS: 20, DurationS: 10}}
	other := f.Experiments[0]
	other.ID, other.Model = "other", "meta-llama/Llama-2-7b-hf"
	f.Experiments = append(f.Experiments, other, over)

	c := replica.DefaultCalibration()
	slow := c.Coefficients
	slow.StepUs += 3000
	c.Folds = []replica.CalibrationFold{
		{Protocol: "model", HeldOut: "meta-llama/Llama-2-7b-hf", Runs: []string{"other"}, Coefficients: c.Coefficients},
		{Protocol: "model", HeldOut: "Qwen/Qwen2.5-7B-Instruct", Runs: []string{"qwen-short"}, Coefficients: slow},
		{Protocol: "tp", HeldOut: "TP 2", Runs: []string{"qwen-short"}, Coefficients: slow},
	}
	o := Options{Seed: 1, Draws: 1}
	oos, err := OutOfSample(context.Background(), f, c, o, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(oos) != 2 {
		t.Fatalf("%d protocols, want model and tp", len(oos))
	}
	model, tp := oos[0], oos[1]
	if len(model.FullBatch) != 2 || len(model.FullBatch[0]) != 1 || len(model.FullBatch[1]) != 1 {
		t.Fatalf("model protocol's full-batch errors %+v, want the overloaded run under each fold", model.FullBatch)
	}
	fast, slowed := model.FullBatch[0][0], model.FullBatch[1][0]
	if fast.ID != "over" || !(slowed.Predicted > fast.Predicted+2) {
		t.Errorf("decode predicted %v (default) and %v (steps 3 ms longer): want the second longer by more than 2 ms", fast.Predicted, slowed.Predicted)
	}
	// The fold without Qwen predicted the Qwen run: held out there.
	if len(model.HeldOutFullBatch) != 1 || model.HeldOutFullBatch[0].Predicted != slowed.Predicted {
		t.Errorf("held out under the model protocol %+v, want the fold without Qwen's prediction %v", model.HeldOutFullBatch, slowed.Predicted)
	}
	if len(tp.FullBatch) != 1 || len(tp.FullBatch[0]) != 1 || len(tp.HeldOutFullBatch) != 0 {
		t.Errorf("tp protocol: %+v, held out %+v; want the run predicted and not held out (TP 1, the fold holds out TP 2)", tp.FullBatch, tp.HeldOutFullBatch)
	}
	// Every fold's errors are kept by fold, with its eta_kv.
	if len(model.ByFold) != 2 || model.ByFold[1].HeldOut != "Qwen/Qwen2.5-7B-Instruct" || model.ByFold[1].Errors[0] != slowed || model.ByFold[0].EtaKV != c.Coefficients.EtaKV {
		t.Errorf("model protocol by fold %+v", model.ByFold)
	}
	// The model protocol's results carry their own fold's errors.
	for i, res := range model.Results {
		want := fast
		if res.Experiment.ID == "qwen-short" {
			want = slowed
		}
		if model.FullBatch[i][0] != want {
			t.Errorf("%s carries %+v, want its fold's %+v", res.Experiment.ID, model.FullBatch[i][0], want)
		}
	}
}

// TestProtocolHoldsOut: a fold of a grouped protocol holds out the runs
// of its group; the load protocol's one fold every run.
func TestProtocolHoldsOut(t *testing.T) {
	e := &Experiment{Model: "Org/M", TP: 2, Hardware: "H100"}
	for _, tc := range []struct {
		protocol, group string
		want            bool
	}{
		{"model", "Org/M", true}, {"model", "Org/N", false},
		{"tp", "TP 2", true}, {"tp", "TP 4", false},
		{"gpu", gpuOf(e), true}, {"gpu", "A100-80GB", false}, {"load", "highest load of each model", true},
	} {
		p, err := LookupProtocol(tc.protocol)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.HoldsOut(tc.group, e); got != tc.want {
			t.Errorf("%s fold without %s holds out %+v: %v, want %v", tc.protocol, tc.group, e, got, tc.want)
		}
	}
}

// TestSetCoverageFoldFullBatch: under a protocol, a run at utilization
// 0.7 with ITL factors ending at 1.1 is near its knee when its own
// fold's prediction of another model's overloaded run is 1.5× slow, and
// not when only the full fit's is (the full fit saw the held-out model,
// so its errors would leak into the fold's intervals). Mutation-checked:
// taking the full fit's errors under each protocol fails both cases.
func TestSetCoverageFoldFullBatch(t *testing.T) {
	c, o := replica.DefaultCalibration(), Options{Seed: 1, StageLimit: 5}
	e, res := runAtUtilization(t, c, o, 0.7)
	model, _ := LookupProtocol("model")
	for _, tc := range []struct {
		name         string
		fold, full   float64 // the overloaded Org/B run's ratio (0: not slots-bound)
		nearProtocol int
	}{
		{"the fold's error", 1.5, 0, 1},
		{"the full fit's error only", 0, 1.5, 0},
	} {
		mp := itlPool(model, e)
		mp.FullBatch = make([][]FullBatchError, len(mp.Results))
		mp.Results = append(mp.Results, res)
		mp.Rows = append(mp.Rows, Row{Experiment: e.ID, Scope: "summary", Metric: "itl_mean", Predicted: res.Predicted["summary"]["itl_mean"], Actual: math.NaN(), APE: math.NaN()})
		var fold []FullBatchError
		if tc.fold > 0 {
			fold = FullBatchErrors(fullBatchResults(t, fullBatchRun{"b", "Org/B", replica.LimitMaxNumSeqs, true, tc.fold}))
		}
		mp.FullBatch = append(mp.FullBatch, fold)
		for range mp.Results {
			mp.Coefficients = append(mp.Coefficients, c.Coefficients)
		}
		var inSample []*Result
		if tc.full > 0 {
			inSample = fullBatchResults(t, fullBatchRun{"b", "Org/B", replica.LimitMaxNumSeqs, true, tc.full})
		}
		r := &Report{Calibration: c, Results: inSample, OutOfSample: []ProtocolRows{mp}}
		if err := r.SetCoverage(context.Background(), o, 1); err != nil {
			t.Fatal(err)
		}
		if len(r.Coverage) != 2 {
			t.Fatalf("%s: coverage %+v, want in sample and the protocol", tc.name, r.Coverage)
		}
		if got := r.Coverage[1].NearKnee; got != tc.nearProtocol {
			t.Errorf("%s: %d runs near the knee under the protocol, want %d", tc.name, got, tc.nearProtocol)
		}
		// The protocol's intervals are kept, and written to
		// latency_out_of_sample.csv: the ITL's slow end is the run
		// simulated with every step 1.5× near the knee (well above 1.3×
		// the prediction), the pool's upper factor (at most 1.1)
		// otherwise.
		p := res.Predicted["summary"]["itl_mean"]
		b, ok := r.OutOfSample[0].Bounds[e.ID]["itl_mean"]
		if !ok {
			t.Fatalf("%s: no protocol interval for %s", tc.name, e.ID)
		}
		if near := b.High > 1.3*p; near != (tc.nearProtocol == 1) || !(b.High > p) || !(b.Low < p) {
			t.Errorf("%s: ITL interval %v–%v of a prediction %v", tc.name, b.Low, b.High, p)
		}
		want := fmt.Sprintf(",sustained,%s,%s\n", csvNum(b.Low), csvNum(b.High))
		var row string
		for _, line := range strings.Split(string(r.OutOfSampleCSV()), "\n") {
			if strings.Contains(line, ","+e.ID+",summary,itl_mean,") {
				row = line + "\n"
			}
		}
		if !strings.HasSuffix(row, want) {
			t.Errorf("%s: latency_out_of_sample.csv row %q, want it to end %q", tc.name, row, want)
		}
	}
}

// TestFoldFullBatchTable: one row per fold with its eta_kv and each
// run's ratio (measured ÷ predicted: 30/20 = 1.5, 22/20 = 1.1), a dash
// for a run the fold did not find at full batch; nothing without folds.
func TestFoldFullBatchTable(t *testing.T) {
	runs := []FullBatchError{{ID: "a", Model: "Org/A", TP: 2, Measured: 30, Predicted: 25}, {ID: "b", Model: "Org/B", TP: 4, Measured: 22, Predicted: 21}}
	model, _ := LookupProtocol("model")
	prs := []ProtocolRows{{Protocol: model, ByFold: []FoldFullBatch{
		{HeldOut: "Org/A", EtaKV: 0.68, Errors: []FullBatchError{{ID: "a", Measured: 30, Predicted: 20}, {ID: "b", Measured: 22, Predicted: 20}}},
		{HeldOut: "Org/B", EtaKV: 0.85, Errors: []FullBatchError{{ID: "a", Measured: 30, Predicted: 24}}},
	}}}
	got := foldFullBatchTable(prs, runs)
	for _, want := range []string{
		"| protocol | fold without | eta_kv | A TP 2 | B TP 4 |\n|---|---|---:|---:|---:|\n",
		"| leave one model out | Org/A | 0.680 | 1.500 | 1.100 |\n",
		"| leave one model out | Org/B | 0.850 | 1.250 | – |\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table %q lacks %q", got, want)
		}
	}
	if foldFullBatchTable(nil, runs) != "" {
		t.Error("no folds: want no table")
	}
}
