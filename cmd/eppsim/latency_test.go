package main

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/latency"
	"github.com/eppsim/eppsim/replica"
)

// resultsDirs are the inference-perf results directories of the latency
// package's tests (latency/testdata/results/README.md).
var resultsDirs = struct{ codegen, mixtral, sglang string }{
	codegen: "../../latency/testdata/results/llama-2-7b-tp1-codegen",
	mixtral: "../../latency/testdata/results/mixtral-8x7b-tp2-roleplay",
	sglang:  "../../latency/testdata/results/llama-2-7b-tp1-codegen-sglang",
}

// TestValidateLatencyResultsDir: validate latency reads an inference-perf
// results directory (its engine.yaml beside the reports) and compares its
// measured latencies.
func TestValidateLatencyResultsDir(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	stdout, stderr, err := runCLI(t, "validate", "latency", resultsDirs.codegen, resultsDirs.mixtral, "--out", out)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(stdout, "2 runs") || !strings.Contains(stdout, "e2e_mean") {
		t.Errorf("stdout:\n%s", stdout)
	}
	csv, err := os.ReadFile(filepath.Join(out, "latency.csv"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		// The measured E2E mean, ms (the report says 2.0807397430955556 s).
		resultsDirs.codegen + ",summary,e2e_mean,",
		",2080.7397,",
		resultsDirs.codegen + ",stage_1,ttft_p99,",
		"mixtral-8x7b-tp2-roleplay (inference-perf results),stage_0,itl_mean,",
	} {
		if !strings.Contains(string(csv), want) {
			t.Errorf("latency.csv has no %q", want)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "latency.md")); err != nil {
		t.Error(err)
	}
}

// TestCalibrateResultsDir: calibrate fits on a results directory.
func TestCalibrateResultsDir(t *testing.T) {
	out := filepath.Join(t.TempDir(), "mine.yaml")
	stdout, stderr, err := runCLI(t, "calibrate", resultsDirs.codegen, "--out", out, "--budget", "2", "--stage-limit", "20", "--quiet")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if stderr != "" {
		t.Errorf("--quiet, yet stderr:\n%s", stderr)
	}
	if !strings.Contains(stdout, "on 1 runs") {
		t.Errorf("stdout:\n%s", stdout)
	}
	y, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(y), "coefficients:") || !strings.Contains(string(y), "llama-2-7b-tp1-codegen: 1 measured runs") {
		t.Errorf("calibration:\n%s", y)
	}
}

// TestCalibrateSGLangRun: calibrate fits on a vLLM run and an SGLang run
// together (the shared coefficients), and validate latency reports each
// run's engine: latency.csv's engine column, latency.md's engine column,
// and the SGLang run's binding limit by SGLang's flag names.
func TestCalibrateSGLangRun(t *testing.T) {
	dir := t.TempDir()
	cal := filepath.Join(dir, "mine.yaml")
	stdout, stderr, err := runCLI(t, "calibrate", resultsDirs.codegen, resultsDirs.sglang, "--out", cal, "--budget", "2", "--stage-limit", "5", "--quiet")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(stdout, "on 2 runs") {
		t.Errorf("stdout:\n%s", stdout)
	}
	out := filepath.Join(dir, "out")
	if _, stderr, err := runCLI(t, "validate", "latency", resultsDirs.sglang, "--calibration", cal, "--out", out); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	csv, err := os.ReadFile(filepath.Join(out, "latency.csv"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(csv)), "\n")
	if !strings.HasSuffix(lines[0], ",binding,engine") || len(lines) != 1+3*7 {
		t.Fatalf("latency.csv:\n%s", csv)
	}
	for _, l := range lines[1:] {
		if !strings.HasPrefix(l, resultsDirs.sglang+",") || !strings.HasSuffix(l, ",sglang") ||
			!(strings.HasSuffix(l, ",max_running_requests,sglang") || strings.HasSuffix(l, ",compute,sglang") ||
				strings.HasSuffix(l, ",max_total_tokens,sglang") || strings.HasSuffix(l, ",chunked_prefill_size,sglang")) {
			t.Errorf("latency.csv row %q: want the SGLang run, its SGLang binding and engine", l)
		}
	}
	md, err := os.ReadFile(filepath.Join(out, "latency.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "| "+resultsDirs.sglang+" | sglang | H100 | 1 |") {
		t.Errorf("latency.md:\n%s", md)
	}
}

// TestLatencyInputsEngineFlag: --engine gives the engine of a results
// directory that has none.
func TestLatencyInputsEngineFlag(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"config.yaml", "summary_lifecycle_metrics.json", "stage_0_lifecycle_metrics.json", "stage_1_lifecycle_metrics.json"} {
		data, err := os.ReadFile(filepath.Join(resultsDirs.codegen, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "out")
	_, stderr, err := runCLI(t, "validate", "latency", dir, "--out", out)
	if exitCode(err) != 2 || !strings.Contains(err.Error(), "engine.yaml: missing") {
		t.Fatalf("without an engine file: %v (exit %d)\n%s", err, exitCode(err), stderr)
	}
	_, stderr, err = runCLI(t, "validate", "latency", dir, "--out", out, "--engine", filepath.Join(resultsDirs.codegen, "engine.yaml"))
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	csv, err := os.ReadFile(filepath.Join(out, "latency.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(csv), dir+",summary,e2e_mean,") {
		t.Errorf("latency.csv:\n%s", csv)
	}
}

// TestLatencyInputsBad: bad inputs are usage errors (exit 2) naming the
// file.
func TestLatencyInputsBad(t *testing.T) {
	tmp := t.TempDir()
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no input", []string{"validate", "latency", "--out", filepath.Join(tmp, "a")}, "requires at least 1 arg"},
		{"missing directory", []string{"validate", "latency", filepath.Join(tmp, "nope"), "--out", filepath.Join(tmp, "b")}, "nope"},
		{"a report, not its directory", []string{"calibrate", filepath.Join(resultsDirs.codegen, "summary_lifecycle_metrics.json"), "--out", filepath.Join(tmp, "c.yaml")}, "give its directory"},
		{"same run twice", []string{"calibrate", resultsDirs.codegen, resultsDirs.codegen, "--out", filepath.Join(tmp, "d.yaml")}, "run ids must be unique"},
		{"bad engine file", []string{"validate", "latency", resultsDirs.codegen, "--engine", filepath.Join(resultsDirs.codegen, "config.yaml"), "--out", filepath.Join(tmp, "e")}, "config.yaml:1: api: unknown key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := runCLI(t, c.args...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
			if exitCode(err) != 2 {
				t.Errorf("exit %d, want 2", exitCode(err))
			}
		})
	}
}

// TestCalibrateProtocols: with two runs every leave-one-model-out fold
// would fit on one run, fewer than a fold may be fitted on: calibrate
// skips each and says why, and the calibration records no fold.
func TestCalibrateProtocols(t *testing.T) {
	out := filepath.Join(t.TempDir(), "mine.yaml")
	stdout, stderr, err := runCLI(t, "calibrate", resultsDirs.codegen, resultsDirs.mixtral, "--out", out, "--budget", "2",
		"--fold-budget", "2", "--stage-limit", "20", "--protocol", "model", "--quiet")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(stdout, "leave one model out: 0 refits") || strings.Count(stdout, "skipped without") != 2 ||
		!strings.Contains(stdout, "1 runs would remain to fit on (at least 5 needed)") {
		t.Errorf("stdout:\n%s", stdout)
	}
	y, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(y), "folds:") {
		t.Errorf("a calibration with skipped folds only records folds:\n%s", y)
	}
	if _, _, err := runCLI(t, "calibrate", resultsDirs.codegen, "--out", out+"2", "--protocol", "seed"); exitCode(err) != 2 || !strings.Contains(err.Error(), `unknown protocol "seed"`) {
		t.Errorf("--protocol seed: %v", err)
	}
}

// TestCalibrateContinue: --continue FILE starts the full fit from FILE's
// coefficients and keeps FILE's folds, protocol figures and intervals,
// provided FILE's leave-one-model-out folds held out exactly the runs this
// fit fits; otherwise it exits 2 and writes nothing.
func TestCalibrateContinue(t *testing.T) {
	dir := t.TempDir()
	first := filepath.Join(dir, "first.yaml")
	report := filepath.Join(dir, "report")
	if _, stderr, err := runCLI(t, "calibrate", resultsDirs.codegen, resultsDirs.mixtral, "--out", first, "--budget", "2",
		"--stage-limit", "20", "--report", report, "--quiet"); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	csv, err := os.ReadFile(filepath.Join(report, "latency.csv"))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, line := range strings.Split(string(csv), "\n")[1:] {
		if id, _, ok := strings.Cut(line, ","); ok && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	if len(ids) != 2 {
		t.Fatalf("runs %q", ids)
	}
	y, err := os.ReadFile(first)
	if err != nil {
		t.Fatal(err)
	}
	cal, err := replica.ParseCalibration(y, first)
	if err != nil {
		t.Fatal(err)
	}
	withFolds := func(runs ...string) string {
		c := cal
		c.Coefficients.IngestUs = 6543.25 // far from the prior's 5000: the continued fit must start here
		c.Folds = nil
		for i, id := range runs {
			c.Folds = append(c.Folds, replica.CalibrationFold{Protocol: "model", HeldOut: fmt.Sprintf("model %d", i), Runs: []string{id}, TrainedOn: 1, Draws: latency.KneeDraws, Coefficients: cal.Coefficients})
		}
		c.Intervals = map[string]replica.Interval{"itl_mean": {Low: 0.9, High: 1.2, Runs: 2}}
		c.Fit = maps.Clone(c.Fit)
		c.Fit["lomo_mape_itl_mean"] = 12.5
		out, err := c.MarshalYAML()
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, fmt.Sprintf("with-%d.yaml", len(runs)))
		if err := os.WriteFile(p, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := withFolds(ids...)
	next := filepath.Join(dir, "next.yaml")
	contOut, stderr, err := runCLI(t, "calibrate", resultsDirs.codegen, resultsDirs.mixtral, "--out", next, "--budget", "2",
		"--stage-limit", "20", "--continue", good, "--quiet")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	// What it prints of the knee and the coverage is what validate latency
	// prints for the file it wrote: the carried folds' held-out runs are
	// predicted with their refits, and the in-sample intervals come from
	// the other model's held-out errors, not from the file's recorded
	// intervals (0.9–1.2 on itl_mean alone).
	valOut, stderr, err := runCLI(t, "validate", "latency", resultsDirs.codegen, resultsDirs.mixtral, "--calibration", next, "--out", filepath.Join(dir, "val"))
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	kneeBlock := func(out string) string {
		_, after, ok := strings.Cut(out, "the knee (predicted overloaded")
		before, _, _ := strings.Cut(after, "\n\n")
		before, _, _ = strings.Cut(before, "\nwrote ") // calibrate's last line
		if !ok || !strings.Contains(before, "leave one model out") {
			t.Fatalf("no knee block with the protocol in:\n%s", out)
		}
		return before
	}
	if c, v := kneeBlock(contOut), kneeBlock(valOut); c != v {
		t.Errorf("calibrate --continue's knee and coverage:\n%s\nvalidate latency's:\n%s", c, v)
	}
	y, err = os.ReadFile(next)
	if err != nil {
		t.Fatal(err)
	}
	got, err := replica.ParseCalibration(y, next)
	if err != nil {
		t.Fatal(err)
	}
	// The carried folds' figures are measured again (FILE's 12.5% is made
	// up), as validate latency prints them for the file written.
	var lomoITL string
	for _, line := range strings.Split(valOut, "\n") {
		if f := strings.Fields(line); len(f) > 2 && strings.HasPrefix(strings.TrimSpace(line), "leave one model out (") {
			lomoITL = f[len(f)-1]
		}
	}
	if len(got.Folds) != 2 || got.Folds[1].Runs[0] != ids[1] || got.Intervals["itl_mean"].High != 1.2 ||
		fmt.Sprintf("%.1f%%", got.Fit["lomo_mape_itl_mean"]) != lomoITL || got.Fit["lomo_mape_itl_mean"] == 12.5 || got.Fit["mape_itl_mean"] == 0 {
		t.Errorf("continued calibration: folds %v, intervals %v, fit %v (validate's leave-one-model-out ITL %s)", got.Folds, got.Intervals, got.Fit, lomoITL)
	}
	// With one evaluation the fit has not moved far from its start, FILE's
	// coefficients (Nelder-Mead's first step moves one coordinate).
	one := filepath.Join(dir, "one.yaml")
	if _, stderr, err := runCLI(t, "calibrate", resultsDirs.codegen, resultsDirs.mixtral, "--out", one, "--budget", "1",
		"--stage-limit", "20", "--continue", good, "--quiet"); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if y, err = os.ReadFile(one); err != nil {
		t.Fatal(err)
	}
	if c, err := replica.ParseCalibration(y, one); err != nil || c.Coefficients.IngestUs != 6543.25 {
		t.Errorf("one evaluation: %+v, want ingest_us 6543.25 from --continue's file (%v)", c.Coefficients, err)
	}
	// --budget 0 re-measures: every coefficient and fold of FILE kept, the
	// fit's reach recorded (these runs are TP 1 and TP 2 on H100; FILE
	// has leave-one-model-out folds only, so no TP or GPU factors).
	same := filepath.Join(dir, "same.yaml")
	remOut, stderr, err := runCLI(t, "calibrate", resultsDirs.codegen, resultsDirs.mixtral, "--out", same, "--budget", "0",
		"--stage-limit", "20", "--continue", good, "--quiet")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(remOut, "re-measured on 2 runs, not refitted") {
		t.Errorf("--budget 0 printed:\n%s", remOut)
	}
	if y, err = os.ReadFile(same); err != nil {
		t.Fatal(err)
	}
	rem, err := replica.ParseCalibration(y, same)
	if err != nil {
		t.Fatal(err)
	}
	wantCo := cal.Coefficients
	wantCo.IngestUs = 6543.25
	if rem.Coefficients != wantCo || len(rem.Folds) != 2 || rem.Fit["lomo_mape_itl_mean"] != got.Fit["lomo_mape_itl_mean"] {
		t.Errorf("re-measured: coefficients %+v (want %+v), %d folds, fit %v", rem.Coefficients, wantCo, len(rem.Folds), rem.Fit)
	}
	if tp, gpu := rem.Extrapolation["tp"], rem.Extrapolation["gpu"]; !slices.Equal(tp.Seen, []string{"1", "2"}) || len(tp.Intervals) != 0 || !slices.Equal(gpu.Seen, []string{"H100"}) {
		t.Errorf("re-measured reach: %+v", rem.Extrapolation)
	}
	// The seen models: the two runs' models, with no factors of another
	// load (FILE has no load folds); the model-out intervals stay FILE's,
	// since its two folds give fewer than the 5 errors a factor needs.
	if s := rem.SeenModels; s == nil || !slices.Equal(s.Models, []string{"meta-llama/Llama-2-7b-hf", "mistralai/Mixtral-8x7B-v0.1"}) || s.Intervals != nil || rem.Intervals["itl_mean"].High != 1.2 {
		t.Errorf("re-measured seen models %+v, intervals %v", rem.SeenModels, rem.Intervals)
	}
	if !strings.Contains(rem.Notes, "Re-measured without refitting") || rem.FittedOn != cal.FittedOn {
		t.Errorf("re-measured provenance: fitted_on %q, notes %q", rem.FittedOn, rem.Notes)
	}
	if _, _, err := runCLI(t, "calibrate", resultsDirs.codegen, "--out", filepath.Join(dir, "never.yaml"), "--budget", "0"); exitCode(err) != 2 || !strings.Contains(err.Error(), "0 only with --continue") {
		t.Errorf("--budget 0 without --continue: %v", err)
	}
	// --refit-folds continues every carried fold from its own
	// coefficients with --free alone moving (good's folds carry cal's).
	refit := filepath.Join(dir, "refit.yaml")
	if _, stderr, err := runCLI(t, "calibrate", resultsDirs.codegen, resultsDirs.mixtral, "--out", refit, "--budget", "1",
		"--stage-limit", "20", "--continue", good, "--refit-folds", "--free", "step_us", "--fold-budget", "3", "--offset-aware", "--quiet"); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if y, err = os.ReadFile(refit); err != nil {
		t.Fatal(err)
	}
	rf, err := replica.ParseCalibration(y, refit)
	if err != nil {
		t.Fatal(err)
	}
	moved := 0
	for _, fd := range rf.Folds {
		co := fd.Coefficients
		if co.StepUs != cal.Coefficients.StepUs {
			moved++
		}
		co.StepUs = cal.Coefficients.StepUs
		if co != cal.Coefficients {
			t.Errorf("fold %s: %+v moved beyond step_us from %+v", fd.HeldOut, fd.Coefficients, cal.Coefficients)
		}
	}
	const scored = "each evaluation scored with the step offsets its own predictions give"
	if len(rf.Folds) != 2 || moved == 0 || !strings.Contains(rf.Notes, "Every fold continued from its own coefficients (free: step_us; 3 evaluations each; "+scored+")") ||
		!strings.Contains(rf.FittedOn, scored) {
		t.Errorf("--refit-folds --offset-aware: %d folds, %d moved step_us, fitted_on %q, notes %q", len(rf.Folds), moved, rf.FittedOn, rf.Notes)
	}
	for _, args := range [][]string{{"--refit-folds"}, {"--refit-folds", "--continue", good, "--budget", "0"}} {
		_, _, err := runCLI(t, append([]string{"calibrate", resultsDirs.codegen, "--out", filepath.Join(dir, "never.yaml")}, args...)...)
		if exitCode(err) != 2 || !strings.Contains(err.Error(), "--refit-folds continues the folds of --continue's file with a fit") {
			t.Errorf("%v: %v", args, err)
		}
	}
	// Folds that never held out one of the fitted runs do not describe
	// this fit. Such a file is refused before the fit, which on the shared
	// runs takes most of an hour: the progress shows no evaluation.
	partial := withFolds(ids[0])
	bad := filepath.Join(dir, "bad.yaml")
	_, stderr, err = runCLI(t, "calibrate", resultsDirs.codegen, resultsDirs.mixtral, "--out", bad, "--budget", "2",
		"--stage-limit", "20", "--continue", partial)
	if exitCode(err) != 2 || !strings.Contains(err.Error(), "never hold out "+ids[1]) || strings.Contains(stderr, "evaluation") {
		t.Errorf("partial folds: %v, progress %q", err, stderr)
	}
	if _, err := os.Stat(bad); err == nil {
		t.Error("a refused --continue wrote its --out")
	}
	// Nor does a fold of another protocol recorded on other runs (here
	// trained on 5, where these inputs leave 1).
	other, err := replica.LoadCalibration(good)
	if err != nil {
		t.Fatal(err)
	}
	other.Folds = append(other.Folds, replica.CalibrationFold{Protocol: "tp", HeldOut: "TP 9", Runs: []string{ids[0]}, TrainedOn: 5, Draws: latency.KneeDraws, Coefficients: cal.Coefficients})
	oy, err := other.MarshalYAML()
	if err != nil {
		t.Fatal(err)
	}
	otherPath := filepath.Join(dir, "other.yaml")
	if err := os.WriteFile(otherPath, oy, 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, err = runCLI(t, "calibrate", resultsDirs.codegen, resultsDirs.mixtral, "--out", bad, "--budget", "2",
		"--stage-limit", "20", "--continue", otherPath)
	if exitCode(err) != 2 || !strings.Contains(err.Error(), "fold tp/TP 9 held out 1 runs and was fitted on 5; of these inputs' 2 fitted runs it would hold out 1 and fit on 1") || strings.Contains(stderr, "evaluation") {
		t.Errorf("a fold recorded on other runs: %v, progress %q", err, stderr)
	}
	// Folds fitted with the median of five draws near the knee do not
	// describe a fit with one (--draws 1).
	_, stderr, err = runCLI(t, "calibrate", resultsDirs.codegen, resultsDirs.mixtral, "--out", bad, "--budget", "2",
		"--stage-limit", "20", "--continue", good, "--draws", "1")
	if exitCode(err) != 2 || !strings.Contains(err.Error(), "by 5 arrival draws, this fit by 1 (--draws)") || strings.Contains(stderr, "evaluation") {
		t.Errorf("folds of another --draws: %v, progress %q", err, stderr)
	}
	if _, err := os.Stat(bad); err == nil {
		t.Error("a refused --continue wrote its --out")
	}
	if _, _, err := runCLI(t, "calibrate", resultsDirs.codegen, "--out", bad, "--continue", good, "--protocol", "model"); exitCode(err) != 2 {
		t.Errorf("--continue with --protocol: %v", err)
	}
}

// TestValidateRefusesRunsApart: a well-formed run that cannot be simulated
// (here an H100 PCIe, which the catalogue does not hold) is set aside
// with its reason, on stdout and in latency.md, and the file's other runs
// are validated; a file of such runs alone still fails (exit 2).
func TestValidateRefusesRunsApart(t *testing.T) {
	const run = `{"id": %q, "model": "meta-llama/Llama-3.1-8B-Instruct", "hardware": %q, "tp": 1,
	  "engine": {"max_num_seqs": 64, "max_num_batched_tokens": 2048, "max_model_len": 4096},
	  "workload": {"shared_prefix_requested": {"system_prompt_len": 50, "question_len": 200, "output_len": 30},
	   "stages": [{"rate_rps": 2, "duration_s": 10}]}}`
	dir := t.TempDir()
	both := filepath.Join(dir, "both.json")
	doc := `{"experiments": [` + fmt.Sprintf(run, "ok", "H100") + "," + fmt.Sprintf(run, "pcie", "H100 PCIe") + `]}`
	if err := os.WriteFile(both, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	stdout, stderr, err := runCLI(t, "validate", "latency", both, "--out", out)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	const why = `both.json: experiments[1] (pcie): hardware: unknown GPU "H100 PCIe"`
	if !strings.Contains(stdout, "refused 1 of 2 runs") || !strings.Contains(stdout, why) || !strings.Contains(stdout, ": 1 runs") {
		t.Errorf("stdout:\n%s", stdout)
	}
	md, err := os.ReadFile(filepath.Join(out, "latency.md"))
	if err != nil || !strings.Contains(string(md), "**Refused 1 of 2 runs**") || !strings.Contains(string(md), why) {
		t.Errorf("latency.md (%v):\n%s", err, md)
	}
	alone := filepath.Join(dir, "alone.json")
	if err := os.WriteFile(alone, []byte(`{"experiments": [`+fmt.Sprintf(run, "pcie", "H100 PCIe")+`]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runCLI(t, "validate", "latency", alone, "--out", filepath.Join(dir, "out2")); exitCode(err) != 2 || !strings.Contains(err.Error(), "alone.json: experiments[0] (pcie): hardware: unknown GPU") {
		t.Errorf("a file of refused runs only: %v", err)
	}
}
