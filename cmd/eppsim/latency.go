package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/eppsim/eppsim/latency"
	"github.com/eppsim/eppsim/replica"
)

// inputsHelp describes the inputs of validate latency and calibrate.
const inputsHelp = `Each INPUT is an experiments file (the schema of ../shared/latency/experiments.json: model,
GPU, tensor parallelism, vLLM's engine arguments and an inference-perf workload, with or without
the measured latencies) or an inference-perf results directory: the directory inference-perf
wrote its reports to (config.yaml, summary_lifecycle_metrics.json, stage_N_lifecycle_metrics.json;
a report_file_prefix is found), with an engine.yaml there saying what served the run, in vLLM's
argument names:

  model: meta-llama/Llama-3.1-8B-Instruct   # an embedded config's Hugging Face id, or a config.json path
  gpu: H100
  tensor-parallel-size: 1
  max-num-seqs: 256                          # omitted arguments take vLLM's defaults
  max-num-batched-tokens: 8192
  gpu-memory-utilization: 0.9
  # total-gpu-kv-blocks: N                   # optional: the GPU KV blocks vLLM logged

An SGLang run says engine-type: sglang and gives SGLang's server flags, by SGLang's names, in an
sglang: block instead of vLLM's arguments (which are refused for it), e.g. sglang: {
max_running_requests: 128, chunked_prefill_size: 2048, max_total_tokens: 400000 }; it is simulated
on an SGLang replica with the same step-time model (docs/latency.md, "SGLang runs").

--engine FILE gives one engine file for every results directory instead. A results directory's
run is simulated with its own config.yaml (constant or poisson load of shared_prefix, random or
synthetic data, streamed, ignore_eos), its latencies read from the reports (seconds there). The
runs of all inputs are pooled; run ids must be unique (a results directory's id is its path, or
id: in its engine file). A run of an experiments file that is well formed but cannot be simulated
(its GPU not in the catalogue, a model that does not fit it, a quantisation eppsim does not read)
is refused apart: listed with its reason before the figures (and in latency.md), the others
validated or fitted; a malformed field fails the whole file. docs/latency.md, "Your own runs",
has the details:

  eppsim validate latency reports-20260301-120000/ --out out/mine
  eppsim calibrate ../shared/latency/experiments.json run-a/ run-b/ --out mine.yaml`

func newValidateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "validate",
		Short: "Check eppsim against measured runs",
	}
	cmd.AddCommand(newValidateLatencyCmd())
	return cmd
}

type validateLatencyFlags struct {
	calibration string
	engine      string
	out         string
	force       bool
	workers     int
	seed        uint64
	dpi         int
}

func newValidateLatencyCmd() *cobra.Command {
	f := &validateLatencyFlags{}
	cmd := &cobra.Command{
		Use:   "latency INPUT... --out DIR",
		Short: "Simulate measured vLLM or SGLang runs and compare predicted with measured latency",
		Long: `validate latency simulates every run of its inputs (experiments files and inference-perf
results directories, below) on one replica with the step-time calibration, and writes to --out:

  latency.csv              experiment,scope,metric,predicted,actual,ape_pct for every run, scope
                           (summary, stage_0, stage_1, ...) and metric (e2e_mean, e2e_p90,
                           e2e_p99, ttft_mean, ttft_p90, ttft_p99, itl_mean); actual and ape_pct
                           empty without a measurement
  latency.md               MAPE per metric and per GPU, beside every other simulator whose
                           predictions the file carries; the overloaded runs; every run
  predicted_vs_actual.svg/png

It prints the MAPE table. itl_mean is (E2E mean − TTFT mean) / (output_len − 1), on both sides.

` + inputsHelp,
		Example: `  eppsim validate latency ../shared/latency/experiments.json --out out/latency`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return validateLatencyMain(cmd, f, args)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.calibration, "calibration", "", "step-time calibration file (default: the one that ships)")
	fl.StringVar(&f.engine, "engine", "", engineHelp)
	fl.StringVar(&f.out, "out", "", "directory for latency.csv, latency.md and the plot (required)")
	fl.BoolVar(&f.force, "force", false, "write into a non-empty --out directory")
	fl.IntVar(&f.workers, "workers", runtime.GOMAXPROCS(0), "runs simulated at once (results do not depend on it)")
	fl.Uint64Var(&f.seed, "seed", 1, kneeSeedHelp)
	fl.IntVar(&f.dpi, "dpi", 150, "resolution of the PNG plot")
	return cmd
}

const engineHelp = "engine file (model, gpu, vLLM's engine arguments or engine-type sglang with an sglang: block) of every results directory among the inputs (default: each directory's engine.yaml)"

// loadInputs reads and pools the runs of the command's inputs; the
// returned source names them for reports.
func loadInputs(paths []string, engine string) (*latency.File, string, error) {
	f, err := latency.LoadInputs(paths, engine)
	if err != nil {
		return nil, "", withExitCode(2, err)
	}
	return f, strings.Join(paths, ", "), nil
}

// reportRefused says which runs the inputs hold that cannot be simulated
// (latency.File.Refused): each with its reason, on w, before the figures
// of the others, so that no figure is read as covering them.
func reportRefused(w io.Writer, f *latency.File) {
	if len(f.Refused) == 0 {
		return
	}
	fmt.Fprintf(w, "refused %d of %d runs (not simulated, in no figure below):\n", len(f.Refused), len(f.Refused)+len(f.Experiments))
	for _, r := range f.Refused {
		fmt.Fprintf(w, "  %v\n", r.Err)
	}
}

// loadCalibration reads --calibration, or returns the shipped one.
func loadCalibration(path string) (replica.Calibration, error) {
	if path == "" {
		return replica.DefaultCalibration(), nil
	}
	c, err := replica.LoadCalibration(path)
	if err != nil {
		return c, fmt.Errorf("--calibration: %w", err)
	}
	return c, nil
}

func validateLatencyMain(cmd *cobra.Command, f *validateLatencyFlags, paths []string) error {
	// Handle signals from the start: reading the inputs can take a while,
	// and a signal then must end the command as it does later (no output,
	// its exit code), not kill it.
	ctx, stop := signalContext(cmd.Context())
	defer stop()
	if f.out == "" {
		return withExitCode(2, errors.New("--out is required"))
	}
	if f.workers < 1 {
		return withExitCode(2, fmt.Errorf("--workers %d: must be at least 1", f.workers))
	}
	c, err := loadCalibration(f.calibration)
	if err != nil {
		return withExitCode(2, err)
	}
	file, source, err := loadInputs(paths, f.engine)
	if err != nil {
		return err
	}
	if err := checkOutDir(f.out, f.force); err != nil {
		return withExitCode(2, err)
	}
	rep, err := latency.Validate(ctx, file, source, c, latency.Options{Seed: f.seed}, f.workers)
	if err != nil {
		if ctx.Err() != nil {
			return interrupted(ctx, nil)
		}
		return err
	}
	if err := rep.WriteDir(f.out, f.dpi); err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "latency validation of %s with calibration %s: %d runs\n\n", source, c.ID(), len(rep.Results))
	reportRefused(w, file)
	printMAPE(w, "MAPE", append([]mapeRow{{"eppsim, " + rep.SampleLabel(), rep.MAPEs()}}, protocolRows(rep)...)...)
	printMedians(w, rep)
	printKnee(w, rep)
	printDecodeRise(w, rep)
	printOthers(w, rep)
	printOverloaded(w, rep)
	fmt.Fprintf(w, "\nwrote %s, %s, %s, %s.svg/png in %s\n", latency.CSVFile, latency.OOSFile, latency.MarkdownFile, latency.PlotName, f.out)
	return nil
}

// mapeRow is one labelled line of whole-run MAPE per metric.
type mapeRow struct {
	label string
	mape  map[string]float64
}

// printMAPE prints rows of whole-run MAPE per metric as one table.
func printMAPE(w io.Writer, title string, rows ...mapeRow) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, title+"\t")
	for _, name := range latency.Metrics {
		fmt.Fprintf(tw, "%s\t", name)
	}
	fmt.Fprintln(tw)
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t", r.label)
		for _, name := range latency.Metrics {
			if v, ok := r.mape[name]; ok && !math.IsNaN(v) {
				fmt.Fprintf(tw, "%.1f%%\t", v)
			} else {
				fmt.Fprint(tw, "–\t")
			}
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// printKnee prints, in sample and per protocol, how many runs are on the
// right side of the knee and the coverage of the 90% intervals.
func printKnee(w io.Writer, rep *latency.Report) {
	cov := map[string]latency.Coverage{}
	for _, c := range rep.Coverage {
		cov[c.Label] = c
	}
	fmt.Fprintln(w, "\nthe knee (predicted overloaded, TTFT mean ≥ 10 s, exactly when measured) and 90% interval coverage (target 85–95%)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "predictions\tright side of the knee\tinterval coverage\tnear the knee\t\n")
	for _, g := range rep.Regimes() {
		c, ok := cov[g.Label]
		cell, near := "–", "–"
		if ok && c.Total > 0 {
			cell, near = fmt.Sprintf("%.1f%% of %d", 100*c.Share(), c.Total), fmt.Sprint(c.NearKnee)
		}
		fmt.Fprintf(tw, "%s\t%d of %d\t%s\t%s\t\n", g.Label, g.Right, g.Total, cell, near)
	}
	tw.Flush()
	for _, g := range rep.Regimes() {
		for _, id := range g.Wrong {
			fmt.Fprintf(w, "  wrong side (%s): %s\n", g.Label, id)
		}
	}
	for _, n := range latency.ExtrapolationNotes(rep.Calibration, rep.Results) {
		fmt.Fprintf(w, "  beyond the calibration: %s\n", n)
	}
}

// printMedians prints the median APE beside the MAPE when the report has
// out-of-sample rows: one run on the wrong side of its knee carries a MAPE
// but not a median.
func printMedians(w io.Writer, rep *latency.Report) {
	if len(rep.OutOfSample) == 0 {
		return
	}
	rows := []mapeRow{{rep.SampleLabel(), rep.Medians()}}
	for _, p := range rep.ProtocolMAPEs() {
		rows = append(rows, mapeRow{p.Label, p.Median})
	}
	fmt.Fprintln(w)
	printMAPE(w, "median APE", rows...)
}

// protocolRows are the report's out-of-sample rows, one per protocol.
func protocolRows(rep *latency.Report) []mapeRow {
	var rows []mapeRow
	for _, p := range rep.ProtocolMAPEs() {
		rows = append(rows, mapeRow{fmt.Sprintf("%s (%d runs)", p.Label, p.Runs), p.MAPE})
	}
	return rows
}

// printOthers prints each other simulator's whole-run MAPE beside
// eppsim's on the same runs.
func printOthers(w io.Writer, rep *latency.Report) {
	others := rep.OtherSimulators()
	if len(others) == 0 {
		return
	}
	fmt.Fprintln(w, "\nbeside other simulators (whole-run MAPE on the runs each predicted: theirs / eppsim's on the same runs)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "simulator\truns\t")
	for _, m := range latency.HeadlineMetrics {
		fmt.Fprintf(tw, "%s\t", m)
	}
	fmt.Fprintln(tw)
	cell := func(v float64, ok bool) string {
		if !ok {
			return "–"
		}
		return fmt.Sprintf("%.1f%%", v)
	}
	for _, o := range others {
		fmt.Fprintf(tw, "%s\t%d\t", o.Name, o.Runs)
		for _, m := range latency.HeadlineMetrics {
			t, tok := o.Theirs[m]
			e, eok := o.Ours[m]
			fmt.Fprintf(tw, "%s / %s\t", cell(t, tok), cell(e, eok))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// printDecodeRise prints how the predicted decode time per token rises
// from each run's first load stage to its last against the measured rise,
// in sample and under each protocol.
func printDecodeRise(w io.Writer, rep *latency.Report) {
	type set struct {
		label   string
		results []*latency.Result
	}
	sets := []set{{rep.SampleLabel(), rep.Results}}
	for _, pr := range rep.OutOfSample {
		sets = append(sets, set{pr.Protocol.Label, pr.Results})
	}
	head := false
	for _, set := range sets {
		rs := latency.DecodeRises(set.results)
		if len(rs) == 0 {
			continue
		}
		if !head {
			fmt.Fprintln(w, "\ndecode time per token from the first load stage to the last (last ÷ first): |predicted rise ÷ measured − 1|")
			head = true
		}
		mean, median, worst := latency.RiseErrors(rs)
		fmt.Fprintf(w, "  %s: %d runs, mean %.1f%%, median %.1f%%; largest %s, measured ×%.3f, predicted ×%.3f\n", set.label, len(rs), mean, median, worst.ID, worst.Measured, worst.Predicted)
	}
}

func printOverloaded(w io.Writer, rep *latency.Report) {
	ov := rep.OverloadedCheck()
	if len(ov) == 0 {
		return
	}
	ok := 0
	for _, o := range ov {
		if o.OK {
			ok++
		}
	}
	fmt.Fprintf(w, "\noverloaded runs predicted as overloaded (TTFT mean ≥ 10 s, within 10× of the measurement): %d of %d\n", ok, len(ov))
	for _, o := range ov {
		if !o.OK {
			fmt.Fprintf(w, "  not: %s (measured %.1f s, predicted %.1f s)\n", o.ID, o.Measured/1000, o.Predicted/1000)
		}
	}
	if fb := latency.FullBatchErrors(rep.Results); len(fb) > 0 {
		fmt.Fprintln(w, "decode at full batch (overloaded runs whose prediction binds at max_num_seqs; no fit sees them):")
		for _, r := range fb {
			fmt.Fprintf(w, "  %s: %s\n", r.ID, r.Sentence())
		}
		for _, pr := range rep.OutOfSample {
			if len(pr.HeldOutFullBatch) == 0 {
				continue
			}
			parts := make([]string, len(pr.HeldOutFullBatch))
			for i, fe := range pr.HeldOutFullBatch {
				parts[i] = fmt.Sprintf("%s ×%.3f", fe.Short(), fe.Ratio())
			}
			fmt.Fprintf(w, "  %s (each predicted by the fold that held it out): %s\n", pr.Protocol.Label, strings.Join(parts, ", "))
		}
		fmt.Fprintln(w, "  a run's knee simulations are slowed to at least the largest ratio on another model's runs: in sample the calibration's, under each protocol its own fold's")
	}
}

type calibrateFlags struct {
	out         string
	engine      string
	start       string
	cont        string
	refitFolds  bool
	offsetAware bool
	name        string
	free        string
	budget      int
	foldBudget  int
	stageLimit  int
	lomo        bool
	protocols   []string
	weights     []string
	candidates  []string
	innerFolds  int
	innerBudget int
	report      string
	force       bool
	workers     int
	seed        uint64
	draws       int
	dpi         int
	quiet       bool
}

func newCalibrateCmd() *cobra.Command {
	f := &calibrateFlags{}
	cmd := &cobra.Command{
		Use:   "calibrate INPUT... --out calibration.yaml",
		Short: "Fit the step-time model's coefficients to measured vLLM or SGLang runs",
		Long: `calibrate fits the calibrated step-time model (docs/latency.md) to the measured runs of its
inputs (experiments files and inference-perf results directories, below): it simulates the runs inside a
Nelder-Mead search over the free coefficients, minimising each run's mean |log(predicted/actual)|
over every scope and metric, averaged over the runs (overloaded runs are not fitted). It writes the
calibration (--out) for run --calibration and the calibration key of preset and fleet files,
prints the fit per run, and with --leave-one-model-out also refits once per model without that
model's runs to measure the error on models the calibration never saw. --report DIR writes the
validation report of the result (validate latency's files, with the leave-one-model-out rows).

Validating the written calibration on the same inputs reproduces the fit it reports.

` + inputsHelp,
		Example: `  eppsim calibrate ../shared/latency/experiments.json --out calibration.yaml --report out/calibration
  eppsim run --calibration calibration.yaml`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return calibrateMain(cmd, f, args)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.out, "out", "", "calibration file to write (required)")
	fl.StringVar(&f.engine, "engine", "", engineHelp)
	fl.StringVar(&f.start, "start", "", "calibration to start from, the full fit and every --protocol refit alike (default: the documented prior, replica/calibrations/prior.yaml; starting from a calibration fitted on the same runs would carry what the held-out runs taught it into the refits)")
	fl.StringVar(&f.cont, "continue", "", "calibration FILE to continue: the full fit starts from FILE's coefficients, and FILE's out-of-sample folds, their figures and its intervals are kept as they are (each fold was refitted without the full fit, so continuing it does not change them; its reach beyond the fitted TP sizes and GPUs is measured again from them); FILE's leave-one-model-out folds must have held out exactly these inputs' fitted runs, and every fold as many of them as it records, with these metric weights and --draws (checked before the fit); not with --start, --protocol or --weight-candidate. With --budget 0 nothing is fitted: FILE's coefficients are kept and its figures measured again (after a change to eppsim that does not call for a refit)")
	fl.BoolVar(&f.refitFolds, "refit-folds", false, "with --continue: continue FILE's out-of-sample folds too, each from its own coefficients with --free and --fold-budget evaluations on its own training runs, so that a stage added after the full fit (say, fewer coefficients freed) is added to every fold and the protocols measure the whole procedure; their figures, intervals and reach are then measured from the continued folds")
	fl.BoolVar(&f.offsetAware, "offset-aware", false, "score every evaluation of every fit as the calibration predicts once fitted: with each deployment's step offset set from the evaluation's own predictions (a second simulation per evaluation; docs/latency.md, \"Deployment offsets\"); not with --weight-candidate")
	fl.StringVar(&f.name, "name", "", "name of the calibration (default: the --out file's base name)")
	fl.StringVar(&f.free, "free", strings.Join(latency.DefaultFree, ","), "coefficients to fit, comma-separated (of "+strings.Join(replica.CoefficientNames, ", ")+")")
	fl.IntVar(&f.budget, "budget", 300, "objective evaluations of the fit (each simulates every fitted run); 0 only with --continue, to re-measure without fitting")
	fl.IntVar(&f.foldBudget, "fold-budget", 0, "objective evaluations of each --protocol refit (0: --budget)")
	fl.IntVar(&f.foldBudget, "lomo-budget", 0, "old name of --fold-budget")
	_ = fl.MarkDeprecated("lomo-budget", "use --fold-budget")
	fl.IntVar(&f.stageLimit, "stage-limit", 300, "simulate at most this many seconds of each load stage while fitting (0: whole runs); the reported fit simulates whole runs")
	fl.StringArrayVar(&f.weights, "metric-weight", nil, "METRIC=W: weigh METRIC's terms in the objective by W > 0 (default 1; metrics: "+strings.Join(latency.FitMetrics, ", ")+"); repeatable")
	fl.StringArrayVar(&f.protocols, "protocol", nil, "out-of-sample protocol to run after the fit (repeatable; \"all\" for every one): "+protocolNames()+
		"; each refits once per held-out group, from --start with --fold-budget evaluations, and predicts the group's runs")
	fl.BoolVar(&f.lomo, "leave-one-model-out", false, "same as --protocol model")
	fl.StringArrayVar(&f.candidates, "weight-candidate", nil, "a candidate set of metric weights, \"uniform\" or METRIC=W,METRIC=W (repeatable): with two or more, every fit chooses among them by an inner cross-validation on its own training runs (--inner-folds, --inner-budget); overrides --metric-weight")
	fl.IntVar(&f.innerFolds, "inner-folds", 3, "folds (runs grouped by model) of the inner cross-validation that chooses among --weight-candidate")
	fl.IntVar(&f.innerBudget, "inner-budget", 0, "objective evaluations of each inner fit (0: --budget/3)")
	fl.StringVar(&f.report, "report", "", "also write the validation report of the result to this directory")
	fl.BoolVar(&f.force, "force", false, "overwrite --out and write into a non-empty --report directory")
	fl.IntVar(&f.workers, "workers", runtime.GOMAXPROCS(0), "runs simulated at once (results do not depend on it)")
	fl.Uint64Var(&f.seed, "seed", 1, kneeSeedHelp+"; the fit's objective predicts them alike (--draws)")
	fl.IntVar(&f.draws, "draws", latency.KneeDraws, "arrival draws (seeds SEED, SEED+1, …) whose median predicts a run near its knee in the fit's objective, as validate latency predicts it; 1: one draw per run, as calibrations fitted before 2026-12-03 were")
	fl.IntVar(&f.dpi, "dpi", 150, "resolution of the report's PNG plot")
	fl.BoolVar(&f.quiet, "quiet", false, "no progress lines on stderr")
	return cmd
}

func calibrateMain(cmd *cobra.Command, f *calibrateFlags, paths []string) error {
	ctx, stop := signalContext(cmd.Context()) // from the start, as validate latency's
	defer stop()
	switch {
	case f.out == "":
		return withExitCode(2, errors.New("--out is required (the calibration file to write)"))
	case f.budget < 0 || (f.budget == 0 && f.cont == ""):
		return withExitCode(2, fmt.Errorf("--budget %d: must be at least 1 (0 only with --continue, which then re-measures FILE without fitting)", f.budget))
	case f.foldBudget < 0:
		return withExitCode(2, fmt.Errorf("--fold-budget %d: must not be negative", f.foldBudget))
	case f.innerFolds < 2:
		return withExitCode(2, fmt.Errorf("--inner-folds %d: must be at least 2", f.innerFolds))
	case f.innerBudget < 0:
		return withExitCode(2, fmt.Errorf("--inner-budget %d: must not be negative", f.innerBudget))
	case f.stageLimit < 0:
		return withExitCode(2, fmt.Errorf("--stage-limit %d: must not be negative (0 = whole runs)", f.stageLimit))
	case f.workers < 1:
		return withExitCode(2, fmt.Errorf("--workers %d: must be at least 1", f.workers))
	case f.draws < 1:
		return withExitCode(2, fmt.Errorf("--draws %d: must be at least 1", f.draws))
	case f.refitFolds && (f.cont == "" || f.budget == 0):
		return withExitCode(2, errors.New("--refit-folds continues the folds of --continue's file with a fit: it needs --continue and a --budget of at least 1"))
	}
	target, err := checkOutFile("--out", f.out)
	if err != nil {
		return err
	}
	if target.exists && !f.force {
		return withExitCode(2, fmt.Errorf("--out %s exists: pass --force to overwrite it", f.out))
	}
	if f.report != "" {
		if err := checkOutDir(f.report, f.force); err != nil {
			return withExitCode(2, fmt.Errorf("--report: %w", err))
		}
	}
	weights, err := parseMetricWeights(f.weights)
	if err != nil {
		return withExitCode(2, err)
	}
	candidates, err := parseWeightCandidates(f.candidates)
	if err != nil {
		return withExitCode(2, err)
	}
	protocols, err := parseProtocols(f.protocols, f.lomo)
	if err != nil {
		return withExitCode(2, err)
	}
	start := replica.PriorCalibration()
	if f.start != "" {
		if start, err = loadCalibration(f.start); err != nil {
			return withExitCode(2, fmt.Errorf("--start: %w", err))
		}
	}
	var carried *replica.Calibration
	if f.cont != "" {
		if f.start != "" || len(protocols) > 0 || len(candidates) > 0 {
			return withExitCode(2, fmt.Errorf("--continue %s: continues a full fit and keeps that file's protocols; it takes no --start, --protocol or --weight-candidate", f.cont))
		}
		c, err := replica.LoadCalibration(f.cont)
		if err != nil {
			return withExitCode(2, fmt.Errorf("--continue: %w", err))
		}
		carried, start = &c, c
	}
	var free []string
	for _, n := range strings.Split(f.free, ",") {
		if n = strings.TrimSpace(n); n != "" {
			free = append(free, n)
		}
	}
	file, source, err := loadInputs(paths, f.engine)
	if err != nil {
		return err
	}
	reportRefused(cmd.ErrOrStderr(), file)
	if carried != nil {
		if err := checkCarried(*carried, file, weights, f.draws); err != nil {
			return withExitCode(2, fmt.Errorf("--continue %s: %w", f.cont, err))
		}
	}
	bases := make([]string, len(paths))
	for i, p := range paths {
		bases[i] = filepath.Base(p)
	}
	name := f.name
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(f.out), filepath.Ext(f.out))
	}
	var progress io.Writer
	if !f.quiet {
		progress = cmd.ErrOrStderr()
	}
	opts := latency.CalibrateOptions{
		Start: start, Free: free, Budget: f.budget, FoldBudget: f.foldBudget, StageLimit: f.stageLimit,
		Protocols: protocols, Weights: weights, Candidates: candidates, InnerFolds: f.innerFolds, InnerBudget: f.innerBudget,
		Seed: f.seed, Draws: f.draws, Workers: f.workers, Progress: progress, Remeasure: carried != nil && f.budget == 0, OffsetAware: f.offsetAware,
		Name: name, Source: strings.Join(bases, ", "), Version: version,
	}
	res, err := latency.Calibrate(ctx, file, opts)
	if err != nil {
		if ctx.Err() != nil {
			return interrupted(ctx, nil)
		}
		if strings.HasPrefix(err.Error(), "calibrate: ") {
			return withExitCode(2, err)
		}
		return err
	}
	var carriedOOS []latency.ProtocolRows
	if carried != nil {
		carryProtocols(&res.Calibration, *carried)
		if f.refitFolds {
			if err := latency.ContinueFolds(ctx, file, &res.Calibration, opts); err != nil {
				if ctx.Err() != nil {
					return interrupted(ctx, nil)
				}
				if strings.HasPrefix(err.Error(), "calibrate: ") {
					return withExitCode(2, fmt.Errorf("--refit-folds: %w", err))
				}
				return fmt.Errorf("--refit-folds: %w", err)
			}
		}
		if f.budget == 0 {
			res.Calibration.FittedOn = carried.FittedOn
			res.Calibration.Notes = strings.TrimSpace(carried.Notes + fmt.Sprintf(" Re-measured without refitting by eppsim %s (calibrate --continue --budget 0).", version))
		}
		// The folds came with --continue's file, not from this fit: predict
		// their held-out runs with their refits, as validate latency does, so
		// that the protocols' figures and the in-sample coverage printed here
		// (whose intervals come from the leave-one-model-out errors of other
		// models' runs) are the ones validate latency prints for the file
		// written, not coverage by the file's pooled intervals; and measure
		// from them how far the calibration reaches beyond its fitted TP
		// sizes and GPUs.
		// Each carried fold's step offsets are measured again from its own
		// training runs with its coefficients (latency.SetFoldOffsets), as
		// a fit's folds get theirs.
		if err := latency.SetFoldOffsets(ctx, file, &res.Calibration, latency.Options{Seed: f.seed}, f.workers); err != nil {
			if ctx.Err() != nil {
				return interrupted(ctx, nil)
			}
			return err
		}
		if carriedOOS, err = latency.OutOfSample(ctx, file, res.Calibration, latency.Options{Seed: f.seed}, f.workers); err != nil {
			if ctx.Err() != nil {
				return interrupted(ctx, nil)
			}
			return err
		}
		res.Calibration.Extrapolation = latency.ExtrapolationsOf(res.Fitted, carriedOOS)
		// The carried folds' figures, measured again with their offsets.
		for _, pr := range carriedOOS {
			for _, m := range latency.Metrics {
				if v, n := latency.MAPE(pr.Rows, m, nil); n > 0 {
					res.Calibration.Fit[pr.Protocol.Key+"_mape_"+m] = math.Round(v*100) / 100
				}
			}
		}
		if iv := latency.IntervalsOf(res.Fitted, carriedOOS); iv != nil {
			res.Calibration.Intervals = iv
		}
		res.Calibration.SeenModels = latency.SeenModelsOf(res.Fitted, carriedOOS)
	}
	y, err := res.Calibration.MarshalYAML()
	if err != nil {
		return err
	}
	if err := writeOutFile(ctx, target, y); err != nil {
		if ctx.Err() != nil {
			return interrupted(ctx, nil)
		}
		return err
	}
	rep := &latency.Report{Source: source, Calibration: res.Calibration, Results: res.Results, Rows: latency.Rows(res.Results), Seed: f.seed}
	for _, p := range res.Protocols {
		n := 0
		for _, fr := range p.Folds {
			if fr.Skipped == "" {
				n++
			}
		}
		pr := latency.ProtocolRows{Protocol: p.Protocol, Folds: n, Results: p.Results, Rows: latency.Rows(p.Results)}
		for _, fr := range p.Folds {
			if fr.Skipped == "" {
				for range fr.Fold.Test {
					pr.Coefficients = append(pr.Coefficients, fr.Fit.Coefficients)
					pr.Offsets = append(pr.Offsets, fr.Fit.Offsets)
				}
			}
		}
		rep.OutOfSample = append(rep.OutOfSample, pr)
	}
	if carried != nil {
		rep.OutOfSample = carriedOOS
	}
	w := cmd.OutOrStdout()
	if carried != nil && f.budget == 0 {
		fmt.Fprintf(w, "calibration %s: %s's coefficients re-measured on %d runs, not refitted\n\n", res.Calibration.ID(), f.cont, len(res.Fitted))
	} else {
		fmt.Fprintf(w, "calibration %s: fitted %s on %d runs in %d evaluations (objective %.4f)\n\n", res.Calibration.ID(),
			strings.Join(free, ", "), len(res.Fitted), res.Evaluations, res.Objective)
	}
	printCoefficients(w, res.Calibration.Coefficients)
	fmt.Fprintln(w)
	printFit(w, rep)
	fmt.Fprintln(w)
	if err := rep.SetCoverage(ctx, latency.Options{Seed: f.seed}, f.workers); err != nil {
		return err
	}
	rows := append([]mapeRow{{rep.SampleLabel(), rep.MAPEs()}}, protocolRows(rep)...)
	for _, p := range res.Protocols {
		var refits, skipped []string
		for _, fr := range p.Folds {
			if fr.Skipped != "" {
				skipped = append(skipped, fmt.Sprintf("without %s: %s", fr.Fold.Group, fr.Skipped))
			} else {
				refits = append(refits, fr.Fold.Group)
			}
		}
		fmt.Fprintf(w, "%s: %d refits, each without %s\n", p.Protocol.Label, len(refits), strings.Join(refits, "; "))
		for _, sk := range skipped {
			fmt.Fprintf(w, "  skipped %s\n", sk)
		}
	}
	if res.Selection != nil {
		fmt.Fprintf(w, "metric weights chosen by inner cross-validation: candidate %d of %d (scores %v)\n", res.Selection.Chosen+1, len(res.Selection.Candidates), res.Selection.Scores)
	}
	fmt.Fprintln(w)
	printMAPE(w, "MAPE", rows...)
	printMedians(w, rep)
	printKnee(w, rep)
	printDecodeRise(w, rep)
	printOthers(w, rep)
	printOverloaded(w, rep)
	if f.report != "" {
		if err := rep.WriteDir(f.report, f.dpi); err != nil {
			return err
		}
		fmt.Fprintf(w, "\nreport: %s\n", f.report)
	}
	fmt.Fprintf(w, "wrote %s\n", f.out)
	return nil
}

// checkCarried refuses --continue's file unless its out-of-sample folds
// describe the fit about to run: no fold can be carried otherwise, and
// the check needs only the inputs, so it runs before the fit (which takes
// most of an hour on the shared runs), not after it. The folds stay valid
// because no fold was fitted from the full fit (each starts from the
// prior), provided they held out the same runs with the same objective:
// from's leave-one-model-out folds must partition exactly the runs this
// fit is fitted on (latency.FitRuns), every fold must describe them
// (latency.CheckFolds), each with the metric weights and the arrival
// draws given now.
func checkCarried(from replica.Calibration, file *latency.File, weights map[string]float64, draws int) error {
	if err := latency.CheckFolds(file, from.Folds); err != nil {
		return err
	}
	fitted := latency.FitRuns(file)
	fit := map[string]bool{}
	for _, e := range fitted {
		fit[e.ID] = true
	}
	held := map[string]bool{}
	for _, fd := range from.Folds {
		if !maps.Equal(fd.Weights, weights) {
			return fmt.Errorf("fold %s/%s was fitted with metric weights %v, this fit with %v", fd.Protocol, fd.HeldOut, fd.Weights, weights)
		}
		if got, want := max(fd.Draws, 1), max(latency.FoldDraws(draws), 1); got != want {
			return fmt.Errorf("fold %s/%s predicted a run near its knee by %d arrival draws, this fit by %d (--draws)", fd.Protocol, fd.HeldOut, got, want)
		}
		if fd.Protocol != "model" {
			continue
		}
		for _, id := range fd.Runs {
			if !fit[id] {
				return fmt.Errorf("its leave-one-model-out folds hold out %s, which these inputs do not fit", id)
			}
			held[id] = true
		}
	}
	if len(held) == 0 {
		return errors.New("it has no leave-one-model-out folds to keep")
	}
	for _, e := range fitted {
		if !held[e.ID] {
			return fmt.Errorf("its leave-one-model-out folds never hold out %s, which these inputs fit", e.ID)
		}
	}
	return nil
}

// carryProtocols gives cal, a full fit continued from from (checked by
// checkCarried), from's out-of-sample folds, their figures (every fit key
// but the in-sample mape_*) and its intervals (which the caller measures
// again from the folds' predictions, with the seen models' and the reach,
// when they give factors).
func carryProtocols(cal *replica.Calibration, from replica.Calibration) {
	cal.Folds, cal.Intervals = from.Folds, from.Intervals
	for k, v := range from.Fit {
		if !strings.HasPrefix(k, "mape_") {
			if cal.Fit == nil {
				cal.Fit = map[string]float64{}
			}
			cal.Fit[k] = v
		}
	}
}

func printCoefficients(w io.Writer, c replica.Coefficients) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for i, v := range c.Vector() {
		name := replica.CoefficientNames[i]
		if by := replica.OptionalCoefficients[name]; by != "" && v == 0 {
			fmt.Fprintf(tw, "  %s\t0 (absent: %s)\n", name, by)
			continue
		}
		fmt.Fprintf(tw, "  %s\t%.6g\n", name, v)
	}
	tw.Flush()
}

// printFit prints every run's whole-run headline metrics.
func printFit(w io.Writer, rep *latency.Report) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "run\t")
	for _, m := range latency.HeadlineMetrics {
		fmt.Fprintf(tw, "%s pred/actual\tAPE\t", m)
	}
	fmt.Fprintln(tw)
	byRun := map[string]map[string]latency.Row{}
	for _, r := range rep.Rows {
		if r.Scope != "summary" {
			continue
		}
		if byRun[r.Experiment] == nil {
			byRun[r.Experiment] = map[string]latency.Row{}
		}
		byRun[r.Experiment][r.Metric] = r
	}
	for _, res := range rep.Results {
		id := res.Experiment.ID
		label := id
		if res.Experiment.Overloaded() {
			label += " (overloaded)"
		}
		fmt.Fprintf(tw, "%s\t", label)
		for _, m := range latency.HeadlineMetrics {
			r, ok := byRun[id][m]
			if !ok || math.IsNaN(r.Actual) {
				fmt.Fprintf(tw, "%.4g/–\t–\t", r.Predicted)
				continue
			}
			fmt.Fprintf(tw, "%.4g/%.4g\t%.1f%%\t", r.Predicted, r.Actual, r.APE)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// parseMetricWeights reads calibrate's --metric-weight values (METRIC=W,
// METRIC one of latency.FitMetrics, W a finite number > 0).
// protocolNames lists the out-of-sample protocols for help texts.
func protocolNames() string {
	var parts []string
	for _, p := range latency.Protocols {
		parts = append(parts, fmt.Sprintf("%s (%s)", p.Name, p.Label))
	}
	return strings.Join(parts, ", ")
}

// parseProtocols reads --protocol values ("all" for every protocol) and
// --leave-one-model-out.
func parseProtocols(vals []string, lomo bool) ([]string, error) {
	var out []string
	add := func(name string) {
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	if lomo {
		add("model")
	}
	for _, v := range vals {
		if v == "all" {
			for _, p := range latency.Protocols {
				add(p.Name)
			}
			continue
		}
		p, err := latency.LookupProtocol(v)
		if err != nil {
			return nil, fmt.Errorf("--protocol: %w", err)
		}
		add(p.Name)
	}
	return out, nil
}

// parseWeightCandidates reads --weight-candidate values: "uniform" or
// METRIC=W pairs separated by commas.
func parseWeightCandidates(vals []string) ([]map[string]float64, error) {
	var out []map[string]float64
	for _, v := range vals {
		if strings.TrimSpace(v) == "uniform" {
			out = append(out, map[string]float64{})
			continue
		}
		w, err := parseMetricWeights(strings.Split(v, ","))
		if err != nil {
			return nil, fmt.Errorf("--weight-candidate %q: %w", v, err)
		}
		out = append(out, w)
	}
	return out, nil
}

func parseMetricWeights(vals []string) (map[string]float64, error) {
	if len(vals) == 0 {
		return nil, nil
	}
	w := map[string]float64{}
	for _, v := range vals {
		m, ws, ok := strings.Cut(v, "=")
		if !ok {
			return nil, fmt.Errorf("--metric-weight %q: want METRIC=W (e.g. ttft_p99=3)", v)
		}
		if !slices.Contains(latency.FitMetrics, m) {
			return nil, fmt.Errorf("--metric-weight %q: unknown metric %q (want one of %s)", v, m, strings.Join(latency.FitMetrics, ", "))
		}
		x, err := strconv.ParseFloat(ws, 64)
		if err != nil || !(x > 0) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("--metric-weight %q: weight %q must be a number > 0", v, ws)
		}
		w[m] = x
	}
	return w, nil
}

// kneeSeedHelp is the --seed help of the verbs that predict measured runs.
var kneeSeedHelp = fmt.Sprintf("%s; a run near its knee is predicted by each metric's median over %d draws, seeds SEED to SEED+%d (docs/latency.md, \"Tails\")",
	seedHelp, latency.KneeDraws, latency.KneeDraws-1)
