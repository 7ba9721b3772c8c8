package latency

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/replica"
)

// sharedExperiments is the measured runs of the project's shared folder.
const sharedExperiments = "../../shared/latency/experiments.json"

// miniFile is a small experiments file: one short measured run, one
// without a measurement.
const miniFile = `{"experiments": [
 {"id": "qwen-short", "model": "Qwen/Qwen2.5-7B-Instruct", "hardware": "H100-80GB-HBM3 (SXM)", "tp": 1,
  "engine": {"max_num_seqs": 128, "max_num_batched_tokens": 2048, "max_model_len": 4096, "block_size": 16},
  "workload": {"api": {"type": "completion", "streaming": true}, "ignore_eos": true, "data_type": "shared_prefix",
   "shared_prefix_requested": {"system_prompt_len": 100, "question_len": 400, "output_len": 60},
   "stages": [{"rate_rps": 4, "duration_s": 20}, {"rate_rps": 8, "duration_s": 20}]},
  "measured": {"summary": {"e2e_ms": {"mean": 500, "p90": 550, "p99": 600}, "ttft_ms": {"mean": 25, "p90": 30, "p99": 40}},
               "stage_0": {"e2e_ms": {"mean": 480}, "ttft_ms": {"mean": 24}}}},
 {"id": "llama-unmeasured", "model": "meta-llama/Llama-3.1-8B-Instruct", "hardware": "L40S", "tp": 1,
  "engine": {"max_num_seqs": 64, "max_num_batched_tokens": 2048, "max_model_len": 4096},
  "workload": {"shared_prefix_requested": {"system_prompt_len": 50, "question_len": 200, "output_len": 30},
   "stages": [{"rate_rps": 2, "duration_s": 10}]}}
]}`

func TestPercentileAndMetrics(t *testing.T) {
	xs := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	// numpy.percentile(range(1, 11), [50, 90, 99]) = 5.5, 9.1, 9.91
	for p, want := range map[float64]float64{50: 5.5, 90: 9.1, 99: 9.91, 100: 10, 0: 1} {
		if got := percentile(xs, p); math.Abs(got-want) > 1e-12 {
			t.Errorf("p%v = %v, want %v", p, got, want)
		}
	}
	v := metricsOf([]float64{20, 30}, []float64{1000, 1200}, 101)
	if v["ttft_mean"] != 25 || v["e2e_mean"] != 1100 || math.Abs(v["itl_mean"]-(1100-25)/100.0) > 1e-12 {
		t.Errorf("metrics %v", v)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"experiments": []}`, "x.json: experiments: none"},
		{`{"experiments": [{"id": "a"}]}`, "experiments[0] (a): model: required"},
		{`{"experiments": [{"id": "a", "model": "meta-llama/Llama-3.1-8B-Instruct", "hardware": "TPU", "tp": 1,
			"workload": {"shared_prefix_requested": {"question_len": 5, "output_len": 5}, "stages": [{"rate_rps": 1, "duration_s": 1}]}}]}`, "hardware: "},
		{`{"experiments": [{"id": "a", "model": "meta-llama/Llama-3.1-8B-Instruct", "hardware": "H100", "tp": 0}]}`, "tp: must be at least 1"},
		{`{"experiments": [{"id": "a", "model": "meta-llama/Llama-3.1-8B-Instruct", "hardware": "H100", "tp": 1,
			"workload": {"shared_prefix_requested": {"question_len": 5, "output_len": 5}, "stages": [{"rate_rps": 0, "duration_s": 1}]}}]}`, "workload.stages[0]: rate_rps and duration_s must be positive"},
		{`{"experiments": [{"id": "a", "model": "nope/nope", "hardware": "H100", "tp": 1,
			"workload": {"shared_prefix_requested": {"question_len": 5, "output_len": 5}, "stages": [{"rate_rps": 1, "duration_s": 1}]}}]}`, "model: \"nope/nope\" is not an embedded config"},
		{`{"experiments": [`, "x.json: "},
		// A UTF-8 byte order mark is skipped.
		{"\xef\xbb\xbf" + `{"experiments": []}`, "x.json: experiments: none"},
	} {
		_, err := Parse([]byte(tc.doc), "x.json")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.60s: error %v, want %q", tc.doc, err, tc.want)
		}
	}
}

// TestValidateMiniFile simulates a small file end to end and checks the
// report's structure: every scope and metric in the CSV, empty actual
// cells without a measurement, the APE arithmetic, the Markdown tables.
func parseF(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return v
}

func TestValidateMiniFile(t *testing.T) {
	f, err := Parse([]byte(miniFile), "mini.json")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Validate(context.Background(), f, "mini.json", replica.DefaultCalibration(), Options{Seed: 1}, 2)
	if err != nil {
		t.Fatal(err)
	}
	// 3 scopes × 7 metrics for the first run, 2 × 7 for the second.
	if got := len(rep.Rows); got != 3*7+2*7 {
		t.Fatalf("%d rows", got)
	}
	for _, r := range rep.Rows {
		if !(r.Predicted > 0) {
			t.Errorf("%+v: no prediction", r)
		}
		switch {
		case r.Experiment == "llama-unmeasured" || (r.Scope == "stage_1") || (r.Scope == "stage_0" && !strings.HasSuffix(r.Metric, "_mean")):
			if !math.IsNaN(r.Actual) {
				t.Errorf("%+v: an actual value without a measurement", r)
			}
		default:
			if want := math.Abs(r.Predicted-r.Actual) / r.Actual * 100; math.Abs(r.APE-want) > 1e-9 {
				t.Errorf("%+v: APE, want %v", r, want)
			}
		}
	}
	csv := string(rep.CSV())
	if !strings.HasPrefix(csv, CSVHeader+"\n") || !strings.Contains(csv, "\nllama-unmeasured,summary,e2e_mean,") {
		t.Errorf("csv:\n%s", csv)
	}
	// An unmeasured run: no actual, APE or measured regime, but its
	// predicted regime, utilization and binding limit, and the interval of
	// the calibration's recorded factors (a run outside the calibration's
	// folds takes them as they are): another load of a model it was fitted
	// on, so those of the leave-the-highest-load-out errors.
	iv := replica.DefaultCalibration().SeenModels.Intervals
	for _, line := range strings.Split(csv, "\n") {
		if !strings.HasPrefix(line, "llama-unmeasured,summary,") {
			continue
		}
		f := strings.Split(line, ",")
		if len(f) != 13 || f[4] != "" || f[5] != "" || f[8] != "sustained" || f[9] != "" || f[10] == "" || f[11] != "max_num_seqs" || f[12] != "vllm" {
			t.Errorf("unmeasured row %q", line)
			continue
		}
		p, lo, hi := parseF(t, f[3]), parseF(t, f[6]), parseF(t, f[7])
		if factor := iv[f[2]]; math.Abs(lo-p*factor.Low) > 1e-3 || math.Abs(hi-p*factor.High) > 1e-3 {
			t.Errorf("unmeasured row %q: interval %v–%v, want %v × [%v, %v]", line, lo, hi, p, factor.Low, factor.High)
		}
	}
	md := string(rep.Markdown())
	for _, want := range []string{"## eppsim, whole-run MAPE", "| all measured runs, runs the fit never saw | 1 |", "| GPU H100 | 1 |", "llama-unmeasured | vllm | L40S | 1 |", "median over 5 draws of its arrivals (seeds 1 to 5)"} {
		if !strings.Contains(md, want) {
			t.Errorf("latency.md lacks %q:\n%s", want, md)
		}
	}
	dir := t.TempDir()
	if err := rep.WriteDir(dir, 40); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{CSVFile, MarkdownFile, PlotName + ".svg", PlotName + ".png"} {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
	// The same seed gives the same predictions.
	again, err := Validate(context.Background(), f, "mini.json", replica.DefaultCalibration(), Options{Seed: 1}, 1)
	if err != nil || string(again.CSV()) != csv {
		t.Errorf("not deterministic: %v", err)
	}
}

// TestCalibrateRecoversCoefficients: runs simulated with known
// coefficients and recorded as "measured" are fitted back: the objective
// at the generating coefficients is 0 and a fit started away from them
// gets close.
func TestCalibrateRecoversCoefficients(t *testing.T) {
	f, err := Parse([]byte(miniFile), "mini.json")
	if err != nil {
		t.Fatal(err)
	}
	f.Experiments = f.Experiments[:1]
	truth := replica.DefaultCalibration()
	truth.Coefficients.IngestUs, truth.Coefficients.StepUs = 9000, 800
	truth.Offsets = nil // the fit recovers coefficients; offsets come after it
	res, err := SimulateAll(context.Background(), []*Experiment{&f.Experiments[0]}, truth, Options{Seed: 1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	e := &f.Experiments[0]
	e.Measured = map[string]Measurement{}
	for scope, v := range res[0].Predicted {
		e.Measured[scope] = Measurement{E2E: Distribution{v["e2e_mean"], v["e2e_p90"], v["e2e_p99"]},
			TTFT: Distribution{v["ttft_mean"], v["ttft_p90"], v["ttft_p99"]}}
	}
	if v, err := Objective(context.Background(), FitRuns(f), truth, Options{Seed: 1}, 1); err != nil || v > 1e-12 {
		t.Fatalf("objective at the truth: %v, %v", v, err)
	}
	start := truth
	start.Coefficients.IngestUs, start.Coefficients.StepUs = 4000, 300
	fit, err := Calibrate(context.Background(), f, CalibrateOptions{Start: start, Free: []string{"ingest_us", "step_us"},
		Budget: 60, Seed: 1, Workers: 1, Name: "t"})
	if err != nil {
		t.Fatal(err)
	}
	got := fit.Calibration.Coefficients
	if math.Abs(got.IngestUs-9000)/9000 > 0.05 || math.Abs(got.StepUs-800)/800 > 0.15 || fit.Objective > 0.01 {
		t.Errorf("fit ingest %.0f (9000), step %.0f (800), objective %.4f", got.IngestUs, got.StepUs, fit.Objective)
	}
	if fit.Calibration.Fit["mape_ttft_mean"] > 2 {
		t.Errorf("reported fit %v", fit.Calibration.Fit)
	}
}

// TestWeightedObjective: with one term off by a factor e (|log| = 1: the
// whole run's TTFT p99) and every other term exact, the objective of one
// run is 1/n over its n terms; weighing ttft_p99 by 3 weighs that term and
// the k − 1 other scopes' (exact) TTFT p99 terms, so it is 3/(n − k + 3k);
// weights of 1 change nothing.
func TestWeightedObjective(t *testing.T) {
	f, err := Parse([]byte(miniFile), "mini.json")
	if err != nil {
		t.Fatal(err)
	}
	f.Experiments = f.Experiments[:1]
	c := replica.DefaultCalibration()
	ctx := context.Background()
	res, err := SimulateAll(ctx, []*Experiment{&f.Experiments[0]}, c, Options{Seed: 1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	e := &f.Experiments[0]
	e.Measured = map[string]Measurement{}
	for scope, v := range res[0].Predicted {
		p99 := v["ttft_p99"]
		if scope == "summary" {
			p99 *= math.E
		}
		e.Measured[scope] = Measurement{E2E: Distribution{v["e2e_mean"], v["e2e_p90"], v["e2e_p99"]},
			TTFT: Distribution{v["ttft_mean"], v["ttft_p90"], p99}}
	}
	if _, ok := e.Measured["summary"]; !ok {
		t.Fatalf("no summary scope among %v", e.Scopes())
	}
	plain, err := Objective(ctx, FitRuns(f), c, Options{Seed: 1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	n := math.Round(1 / plain)
	if n < 2 || math.Abs(plain-1/n) > 1e-9 {
		t.Fatalf("objective %v: want 1/n for a whole number n of terms", plain)
	}
	w3, err := WeightedObjective(ctx, FitRuns(f), c, Options{Seed: 1}, 1, map[string]float64{"ttft_p99": 3})
	if err != nil {
		t.Fatal(err)
	}
	k := float64(len(e.Scopes()))
	if want := 3 / (n - k + 3*k); math.Abs(w3-want) > 1e-9 {
		t.Errorf("weighted objective %v, want 3/(%v−%v+3·%v) = %v", w3, n, k, k, want)
	}
	w1, err := WeightedObjective(ctx, FitRuns(f), c, Options{Seed: 1}, 1, map[string]float64{"ttft_p99": 1, "e2e_mean": 1})
	if err != nil || w1 != plain {
		t.Errorf("weights of 1: %v (%v), want %v", w1, err, plain)
	}
}

// TestLongShippedCalibration (make test-long): the calibration that ships,
// validated on the shared measured runs, reproduces the in-sample fit it
// records (calibrate's round trip), predicts every overloaded run as
// overloaded, and meets the accuracy the documentation states.
func TestLongShippedCalibration(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates the 30 shared runs (make test-long)")
	}
	f, err := Load(sharedExperiments)
	if err != nil {
		if os.IsNotExist(err) || strings.Contains(err.Error(), "no such file") {
			t.Skip("shared measured runs not present")
		}
		t.Fatal(err)
	}
	c := replica.DefaultCalibration()
	rep, err := Validate(context.Background(), f, sharedExperiments, c, Options{Seed: 1}, 2)
	if err != nil {
		t.Fatal(err)
	}
	got := rep.MAPEs()
	for _, m := range Metrics {
		want, ok := c.Fit["mape_"+m]
		if !ok {
			t.Errorf("the shipped calibration records no in-sample %s", m)
			continue
		}
		if math.Abs(got[m]-want) > 0.01 {
			t.Errorf("%s: validating gives %.2f%%, the calibration records %.2f%%", m, got[m], want)
		}
	}
	for _, o := range rep.OverloadedCheck() {
		if !o.OK {
			t.Errorf("%s: measured TTFT mean %.0f ms, predicted %.0f ms: not predicted as overloaded", o.ID, o.Measured, o.Predicted)
		}
	}
}

// TestWriteDirPredictionsOnly: a file whose runs have no measurement (a
// prediction of runs not yet made) writes every file, the plot with empty
// axes; it used to fail drawing a log scale over no points.
func TestWriteDirPredictionsOnly(t *testing.T) {
	rep := &Report{Rows: []Row{{Experiment: "x", Scope: "summary", Metric: "ttft_mean", Predicted: 40, Actual: math.NaN(), APE: math.NaN()}}}
	dir := t.TempDir()
	if err := rep.WriteDir(dir, 40); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{CSVFile, OOSFile, MarkdownFile, PlotName + ".svg", PlotName + ".png"} {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestStartOfAbsentExperts: a start without eta_experts (0) that fits it
// starts it at eta_weights; one that does not fit it, or that has it,
// starts as given.
func TestStartOfAbsentExperts(t *testing.T) {
	idx := func(names ...string) []int {
		v, err := freeIndexes(names)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	old := replica.Coefficients{EtaWeights: 0.74, EtaKV: 0.8}
	if got := startOf(old, idx("step_us", "eta_experts")); got.EtaExperts != 0.74 || got.EtaWeights != 0.74 {
		t.Errorf("freed and absent: %+v, want eta_experts 0.74", got)
	}
	if got := startOf(old, idx("step_us")); got != old {
		t.Errorf("absent, not freed: %+v, want it unchanged", got)
	}
	with := old
	with.EtaExperts = 0.84
	if got := startOf(with, idx("eta_experts")); got.EtaExperts != 0.84 {
		t.Errorf("present: %+v, want 0.84 kept", got)
	}
}

// TestStartOfAndExercisedKVMHA: a start without eta_kv_mha that fits it
// starts it at eta_kv (the efficiency it stands for); a fit on runs
// without a multi-head-attention model does not free it (nothing there
// identifies it, so it keeps its start), a fit with Llama-2-7B among its
// runs does.
func TestStartOfAndExercisedKVMHA(t *testing.T) {
	free, err := freeIndexes([]string{"step_us", "eta_kv", "eta_kv_mha"})
	if err != nil {
		t.Fatal(err)
	}
	if got := startOf(replica.Coefficients{EtaKV: 0.7}, free); got.EtaKVMHA != 0.7 {
		t.Errorf("freed and absent: eta_kv_mha %v, want eta_kv's 0.7", got.EtaKVMHA)
	}
	if got := startOf(replica.Coefficients{EtaKV: 0.7, EtaKVMHA: 0.85}, free); got.EtaKVMHA != 0.85 {
		t.Errorf("present: eta_kv_mha %v, want 0.85 kept", got.EtaKVMHA)
	}
	gqa := &Experiment{Model: "meta-llama/Llama-3.1-8B-Instruct"}
	mha := &Experiment{Model: "meta-llama/Llama-2-7b-hf"}
	names := func(idx []int) string {
		var out []string
		for _, i := range idx {
			out = append(out, replica.CoefficientNames[i])
		}
		return strings.Join(out, ",")
	}
	if got := names(exercised(free, []*Experiment{gqa})); got != "step_us,eta_kv" {
		t.Errorf("grouped-query runs only: free %s, want step_us,eta_kv", got)
	}
	if got := names(exercised(free, []*Experiment{gqa, mha})); got != "step_us,eta_kv,eta_kv_mha" {
		t.Errorf("with Llama-2-7B: free %s, want all three", got)
	}
	if got := names(free); got != "step_us,eta_kv,eta_kv_mha" {
		t.Errorf("exercised changed its argument: %s", got)
	}
	// eta_experts alike: only an unquantised mixture of experts (Mixtral)
	// fits it; Scout's FP8 experts stream at eta_weights.
	withExperts, err := freeIndexes([]string{"eta_weights", "eta_experts"})
	if err != nil {
		t.Fatal(err)
	}
	scout := &Experiment{Model: "RedHatAI/Llama-4-Scout-17B-16E-Instruct-FP8-dynamic"}
	mixtral := &Experiment{Model: "mistralai/Mixtral-8x7B-v0.1"}
	if got := names(exercised(withExperts, []*Experiment{gqa, scout})); got != "eta_weights" {
		t.Errorf("dense and FP8 experts: free %s, want eta_weights", got)
	}
	if got := names(exercised(withExperts, []*Experiment{gqa, mixtral})); got != "eta_weights,eta_experts" {
		t.Errorf("with Mixtral: free %s, want eta_weights,eta_experts", got)
	}
}
