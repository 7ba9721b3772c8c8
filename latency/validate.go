package latency

import (
	"bytes"
	"context"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/eppsim/eppsim/arch"
	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/report"
)

// Output files of Validate's report.
const (
	CSVFile      = "latency.csv"
	OOSFile      = "latency_out_of_sample.csv"
	MarkdownFile = "latency.md"
	PlotName     = "predicted_vs_actual"
)

// CSVHeader is latency.csv's header line: per run, scope and metric the
// prediction, the measurement and the APE; for whole runs the 90%
// interval (low90, high90); per run its predicted and measured regime
// (overloaded or sustained), the utilization of its busiest stage, the
// limit that binds at its knee (an SGLang run's by SGLang's flag names)
// and the engine that served it (vllm, sglang).
const CSVHeader = "experiment,scope,metric,predicted,actual,ape_pct,low90,high90,regime,measured_regime,utilization,binding,engine"

// HeadlineMetrics are the metrics the report's tables lead with (the
// issue's targets and the published comparisons' columns).
var HeadlineMetrics = []string{"e2e_mean", "ttft_mean", "ttft_p99", "itl_mean"}

// OverloadedTTFT is the TTFT mean (ms) from which a prediction counts as
// overloaded: tens of seconds, as the overloaded runs measure.
const OverloadedTTFT = 10_000

// Report is the validation of a calibration on the runs of a file.
type Report struct {
	Source      string // the experiments file
	Calibration replica.Calibration
	Results     []*Result
	Rows        []Row
	// OutOfSample are each out-of-sample protocol's predictions of the
	// runs its folds held out, by the refits without them (the
	// calibration's folds); the report shows their MAPE beside the
	// in-sample figures.
	OutOfSample []ProtocolRows
	// Coverage is the share of measured values inside their predicted
	// 90% intervals, in sample and under each protocol; Bounds the
	// in-sample intervals by run id and metric (whole runs).
	Coverage []Coverage
	Bounds   map[string]map[string]Bounds
	// Refused are the input's runs that could not be simulated
	// (File.Refused); they are in no figure.
	Refused []RefusedRun
	// Seed is the first arrival draw's seed (Options.Seed); a run near its
	// knee also takes the next KneeDraws−1.
	Seed uint64
}

// ProtocolRows are one protocol's held-out predictions.
type ProtocolRows struct {
	Protocol Protocol
	// Folds is the number of refits whose runs were predicted.
	Folds   int
	Results []*Result
	// Coefficients[i] and Offsets[i] predicted Results[i] (its fold's
	// refit and step offsets).
	Coefficients []replica.Coefficients
	Offsets      [][]replica.StepOffset
	// FullBatch[i] are the full-batch errors of every overloaded run of
	// the file, predicted by the fold that predicted Results[i]: the
	// slow end of that run's knee simulations takes those of other
	// models (fullBatchFor), so that nothing the fold held out reaches
	// its intervals through another run's prediction.
	FullBatch [][]FullBatchError
	// HeldOutFullBatch are the full-batch errors of the overloaded runs,
	// each predicted by the fold that held out its model, TP size or GPU
	// (the load protocol's one fold: every overloaded run), in the
	// file's order.
	HeldOutFullBatch []FullBatchError
	// ByFold are each fold's full-batch errors, in the calibration's
	// order of folds.
	ByFold []FoldFullBatch
	Rows   []Row
	// Bounds are the 90% intervals of the held-out runs under this
	// protocol, by run id and metric (whole runs; SetCoverage).
	Bounds map[string]map[string]Bounds
}

// Validate simulates every run of f with calibration c, and the runs of
// each of c's folds with the fold's refit.
func Validate(ctx context.Context, f *File, source string, c replica.Calibration, o Options, workers int) (*Report, error) {
	exps := make([]*Experiment, len(f.Experiments))
	for i := range f.Experiments {
		exps[i] = &f.Experiments[i]
	}
	res, err := SimulateAll(ctx, exps, c, o, workers)
	if err != nil {
		return nil, err
	}
	oos, err := OutOfSample(ctx, f, c, o, workers)
	if err != nil {
		return nil, err
	}
	r := &Report{Source: source, Calibration: c, Results: res, Rows: Rows(res), OutOfSample: oos, Refused: f.Refused, Seed: o.Seed}
	if err := r.SetCoverage(ctx, o, workers); err != nil {
		return nil, err
	}
	return r, nil
}

// SetCoverage builds the report's 90% intervals and counts the measured
// values inside them, each run's from errors on other models' runs only:
// under each protocol, from that protocol's held-out errors, except that
// under the load protocol a run without a fold offset for its deployment
// takes the model protocol's, as eppsim run would give it; on the
// report's own runs, as eppsim run builds them
// (replica.Calibration.IntervalsFor): a run of a fitted deployment from
// the load protocol's errors, any other from the leave-one-model-out
// errors, or else, for runs the calibration's folds do not predict, from
// the calibration's recorded factors.
func (r *Report) SetCoverage(ctx context.Context, o Options, workers int) error {
	r.Coverage, r.Bounds = nil, nil
	modelOf := map[string]string{}
	pools := map[string]ProtocolRows{}
	for _, res := range r.Results {
		modelOf[res.Experiment.ID] = res.Experiment.Model
	}
	for _, pr := range r.OutOfSample {
		for _, res := range pr.Results {
			modelOf[res.Experiment.ID] = res.Experiment.Model
		}
		pools[pr.Protocol.Name] = pr
	}
	// The knee simulations' slow end: the full-batch errors of the
	// report's runs measured past their knee (no fit sees them), each run
	// taking those of other models only; under each protocol, as its
	// run's fold predicts them, and in sample as the calibration does.
	fullBatch := FullBatchErrors(r.Results)
	for j, pr := range r.OutOfSample {
		cases := make([]intervalCase, len(pr.Results))
		for i, res := range pr.Results {
			cases[i] = intervalCase{res: res, co: pr.Coefficients[i]}
			if i < len(pr.Offsets) {
				cases[i].off = pr.Offsets[i]
			}
			if i < len(pr.FullBatch) {
				cases[i].fullBatch = fullBatchFor(pr.FullBatch[i], res.Experiment.Model)
			}
		}
		factors := otherModels(pr.Rows, modelOf)
		if model, ok := pools["model"]; ok && pr.Protocol.Name == "load" && len(r.Calibration.Offsets) > 0 {
			// A run without a fold offset is not a fitted deployment to
			// its fold: it takes the model-out errors, as IntervalsFor
			// gives such a run.
			withOffset, narrow, wide := offsetRuns(pr), factors, otherModels(model.Rows, modelOf)
			factors = func(e *Experiment) map[string]replica.Interval {
				if withOffset[e.ID] {
					return narrow(e)
				}
				return wide(e)
			}
		}
		cov, bounds, err := coverage(ctx, pr.Protocol.Label, cases, factors, r.Calibration, o, workers)
		if err != nil {
			return err
		}
		r.OutOfSample[j].Bounds = bounds
		r.Coverage = append(r.Coverage, cov)
	}
	cases := make([]intervalCase, len(r.Results))
	for i, res := range r.Results {
		cases[i] = intervalCase{res: res, co: r.Calibration.Coefficients, off: r.Calibration.Offsets}
		if len(pools["model"].Results) > 0 {
			cases[i].fullBatch = fullBatchFor(fullBatch, res.Experiment.Model)
		} else {
			// Runs the calibration's folds do not predict (a user's own):
			// the calibration's factor, as eppsim run takes it.
			cases[i].fullBatch = r.Calibration.SlowEnd(0)
		}
	}
	var factors func(*Experiment) map[string]replica.Interval
	if lomo, ok := pools["model"]; ok {
		// The runs the folds predict: each run's factors leave its own
		// model's errors out (otherModels), from the pool IntervalsFor
		// would take them from; a run beyond the fit's TP sizes or GPUs
		// is widened as eppsim run would widen it.
		unseen, seen := otherModels(lomo.Rows, modelOf), otherModels(lomo.Rows, modelOf)
		if load, ok := pools["load"]; ok && r.Calibration.SeenModels != nil {
			seen = otherModels(load.Rows, modelOf) // SeenModelsOf's pool
		}
		factors = func(e *Experiment) map[string]replica.Interval {
			base := unseen
			if r.Calibration.FittedDeployment(placementOf(e)) {
				base = seen
			}
			f, _ := r.Calibration.Widen(base(e), placementOf(e))
			return f
		}
	} else {
		if len(r.Calibration.Intervals) == 0 {
			return nil
		}
		factors = func(e *Experiment) map[string]replica.Interval {
			f, _, _ := r.Calibration.IntervalsFor(placementOf(e))
			return f
		}
	}
	cov, bounds, err := coverage(ctx, r.SampleLabel(), cases, factors, r.Calibration, o, workers)
	r.Bounds = bounds
	if err != nil {
		return err
	}
	r.Coverage = append([]Coverage{cov}, r.Coverage...)
	return nil
}

// SampleLabel names the report's figures on all its runs by whether the
// calibration was fitted on them: "in sample" when every measured run
// that is not overloaded (no fit sees those) is one its
// leave-one-model-out folds hold out, which are exactly its fitted runs;
// "runs the fit never saw" when none is, as for a user's own runs, whose figures
// are then out of sample; "in sample for K of N runs" when some are; and "in
// sample" when the calibration has no such folds to tell by.
func (r *Report) SampleLabel() string {
	fitted := map[string]bool{}
	for _, f := range r.Calibration.Folds {
		if f.Protocol == "model" {
			for _, id := range f.Runs {
				fitted[id] = true
			}
		}
	}
	if len(fitted) == 0 {
		return "in sample"
	}
	var k, n int
	for _, res := range r.Results {
		e := res.Experiment
		if !e.HasMeasurement() || e.Overloaded() {
			continue
		}
		n++
		if fitted[e.ID] {
			k++
		}
	}
	switch {
	case k == n:
		return "in sample"
	case k == 0:
		return "runs the fit never saw"
	}
	return fmt.Sprintf("in sample for %d of %d runs", k, n)
}

// RegimeCheck is how many runs the predictions put on the right side of
// the knee: predicted overloaded (a TTFT mean of at least OverloadedTTFT)
// exactly when the measurement is.
type RegimeCheck struct {
	Label        string
	Right, Total int
	// Wrong lists the runs on the wrong side.
	Wrong []string
}

// Regimes checks the regime of every measured run, in sample and under
// each protocol (its held-out runs; overloaded runs, which no fit sees,
// from the full fit).
func (r *Report) Regimes() []RegimeCheck {
	check := func(label string, results []*Result) RegimeCheck {
		rc := RegimeCheck{Label: label}
		for _, res := range results {
			e := res.Experiment
			if !e.HasMeasurement() || res.Predicted["summary"] == nil {
				continue
			}
			rc.Total++
			if res.PredictedOverloaded() == e.Overloaded() {
				rc.Right++
			} else {
				rc.Wrong = append(rc.Wrong, e.ID)
			}
		}
		return rc
	}
	out := []RegimeCheck{check(r.SampleLabel(), r.Results)}
	for _, pr := range r.OutOfSample {
		results := slices.Clone(pr.Results)
		for _, res := range r.Results {
			if res.Experiment.Overloaded() {
				results = append(results, res)
			}
		}
		out = append(out, check(pr.Protocol.Label, results))
	}
	return out
}

// OutOfSample predicts, for each protocol c has folds of, the measured
// runs of f that a fold held out, with that fold's refit. Runs of f that
// no fold names (a user's own runs, which the calibration never saw) are
// not part of it: their in-sample figures are already out of sample.
func OutOfSample(ctx context.Context, f *File, c replica.Calibration, o Options, workers int) ([]ProtocolRows, error) {
	byID := map[string]*Experiment{}
	for i := range f.Experiments {
		byID[f.Experiments[i].ID] = &f.Experiments[i]
	}
	// The overloaded runs: no fold fits them, every fold predicts them
	// for its full-batch errors.
	var over []*Experiment
	for i := range f.Experiments {
		if e := &f.Experiments[i]; e.HasMeasurement() && e.Overloaded() {
			over = append(over, e)
		}
	}
	var out []ProtocolRows
	for _, p := range Protocols {
		pr := ProtocolRows{Protocol: p}
		heldOut := map[string]FullBatchError{}
		for _, fold := range c.Folds {
			if fold.Protocol != p.Name {
				continue
			}
			var test []*Experiment
			for _, id := range fold.Runs {
				if e, ok := byID[id]; ok && e.HasMeasurement() {
					test = append(test, e)
				}
			}
			if len(test) == 0 {
				continue
			}
			fc := c
			fc.Coefficients, fc.Offsets = fold.Coefficients, fold.Offsets
			rs, err := SimulateAll(ctx, test, fc, o, workers)
			if err != nil {
				return nil, fmt.Errorf("%s fold without %s: %w", p.Name, fold.HeldOut, err)
			}
			fb, err := foldFullBatch(ctx, over, fc, o, workers)
			if err != nil {
				return nil, fmt.Errorf("%s fold without %s: %w", p.Name, fold.HeldOut, err)
			}
			if len(fb) > 0 {
				pr.ByFold = append(pr.ByFold, FoldFullBatch{HeldOut: fold.HeldOut, EtaKV: fold.Coefficients.EtaKV, Errors: fb})
			}
			for _, fe := range fb {
				if p.HoldsOut(fold.HeldOut, byID[fe.ID]) {
					heldOut[fe.ID] = fe
				}
			}
			pr.Folds++
			pr.Results = append(pr.Results, rs...)
			for range rs {
				pr.Coefficients = append(pr.Coefficients, fold.Coefficients)
				pr.Offsets = append(pr.Offsets, fold.Offsets)
				pr.FullBatch = append(pr.FullBatch, fb)
			}
		}
		if pr.Folds > 0 {
			for _, e := range over {
				if fe, ok := heldOut[e.ID]; ok {
					pr.HeldOutFullBatch = append(pr.HeldOutFullBatch, fe)
				}
			}
			pr.Rows = Rows(pr.Results)
			out = append(out, pr)
		}
	}
	return out, nil
}

// FoldFullBatch is one fold's prediction of the overloaded runs: what
// it held out, the KV streaming efficiency its refit found, and the
// runs' full-batch errors.
type FoldFullBatch struct {
	HeldOut string
	EtaKV   float64
	Errors  []FullBatchError
}

// foldFullBatch predicts the overloaded runs with a fold's calibration
// and returns their full-batch errors.
func foldFullBatch(ctx context.Context, over []*Experiment, fc replica.Calibration, o Options, workers int) ([]FullBatchError, error) {
	if len(over) == 0 {
		return nil, nil
	}
	rs, err := SimulateAll(ctx, over, fc, o, workers)
	if err != nil {
		return nil, fmt.Errorf("overloaded runs: %w", err)
	}
	return FullBatchErrors(rs), nil
}

// ProtocolMAPEs is each out-of-sample protocol's whole-run MAPE per metric.
func (r *Report) ProtocolMAPEs() []LabelledMAPE {
	var out []LabelledMAPE
	for _, pr := range r.OutOfSample {
		m, med := map[string]float64{}, map[string]float64{}
		n := 0
		for _, name := range Metrics {
			if v, k := MAPE(pr.Rows, name, nil); k > 0 {
				m[name] = v
				n = max(n, k)
			}
			if v, k := MedianAPE(pr.Rows, name, nil); k > 0 {
				med[name] = v
			}
		}
		out = append(out, LabelledMAPE{Label: pr.Protocol.Label, Runs: n, MAPE: m, Median: med})
	}
	return out
}

// LabelledMAPE is one row of whole-run MAPE per metric over Runs runs,
// with the median APE beside it.
type LabelledMAPE struct {
	Label        string
	Runs         int
	MAPE, Median map[string]float64
}

// Medians is the in-sample median APE per metric over the measured runs
// that are not overloaded.
func (r *Report) Medians() map[string]float64 { return r.inSample(MedianAPE) }

// protocolRows returns the rows of the named protocol (nil: none).
func (r *Report) protocolRows(name string) []Row {
	for _, pr := range r.OutOfSample {
		if pr.Protocol.Name == name {
			return pr.Rows
		}
	}
	return nil
}

// normal reports whether a run counts in the accuracy tables: measured and
// not overloaded (overloaded runs are checked apart, OverloadedCheck).
func (r *Report) normal(id string) bool {
	for _, res := range r.Results {
		if res.Experiment.ID == id {
			return res.Experiment.HasMeasurement() && !res.Experiment.Overloaded()
		}
	}
	return false
}

// MAPEs is eppsim's whole-run MAPE per metric over the measured runs that
// are not overloaded.
func (r *Report) MAPEs() map[string]float64 { return r.inSample(MAPE) }

// inSample is stat (MAPE or MedianAPE) per metric over the measured runs
// that are not overloaded.
func (r *Report) inSample(stat func([]Row, string, func(string) bool) (float64, int)) map[string]float64 {
	out := map[string]float64{}
	for _, m := range Metrics {
		if v, n := stat(r.Rows, m, r.normal); n > 0 {
			out[m] = v
		}
	}
	return out
}

// CSV renders latency.csv.
func (r *Report) CSV() []byte {
	var b bytes.Buffer
	b.WriteString(CSVHeader + "\n")
	byID := map[string]*Result{}
	for _, res := range r.Results {
		byID[res.Experiment.ID] = res
	}
	for _, row := range r.Rows {
		lo, hi := math.NaN(), math.NaN()
		if bb, ok := r.Bounds[row.Experiment][row.Metric]; ok && row.Scope == "summary" {
			lo, hi = bb.Low, bb.High
		}
		regime, measured, util, binding, engine := "", "", math.NaN(), "", ""
		if res := byID[row.Experiment]; res != nil {
			engine = res.Experiment.EngineTypeOf()
			regime = regimeName(res.PredictedOverloaded())
			if res.Experiment.HasMeasurement() {
				measured = regimeName(res.Experiment.Overloaded())
			}
			if res.Knee != nil {
				util, binding = res.Utilization, res.Knee.Binding
			}
		}
		fmt.Fprintf(&b, "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n", csvField(row.Experiment), row.Scope, row.Metric, csvNum(row.Predicted), csvNum(row.Actual), csvNum(row.APE),
			csvNum(lo), csvNum(hi), regime, measured, csvNum(util), binding, engine)
	}
	return b.Bytes()
}

// csvNum formats a value of latency.csv and latency_out_of_sample.csv:
// four decimals, empty for NaN (no measurement).
func csvNum(v float64) string {
	if math.IsNaN(v) {
		return ""
	}
	return strconv.FormatFloat(v, 'f', 4, 64)
}

// OOSHeader is latency_out_of_sample.csv's header line: each protocol's
// prediction of every held-out run, scope and metric, by the refit
// without it (the fold names what it held out), and the whole run's 90%
// interval under that protocol (low90, high90: empty for stages and for
// runs without one), the columns coverage counts. They come last so
// that files written before them keep their columns' places.
const OOSHeader = "protocol,fold,experiment,scope,metric,predicted,actual,ape_pct,regime,low90,high90"

// OutOfSampleCSV renders latency_out_of_sample.csv (its header alone when
// the calibration records no folds).
func (r *Report) OutOfSampleCSV() []byte {
	var b bytes.Buffer
	b.WriteString(OOSHeader + "\n")
	for _, pr := range r.OutOfSample {
		fold := map[string]string{}
		for _, f := range r.Calibration.Folds {
			if f.Protocol == pr.Protocol.Name {
				for _, id := range f.Runs {
					fold[id] = f.HeldOut
				}
			}
		}
		regime := map[string]string{}
		for _, res := range pr.Results {
			regime[res.Experiment.ID] = regimeName(res.PredictedOverloaded())
		}
		for _, row := range pr.Rows {
			lo, hi := math.NaN(), math.NaN()
			if bb, ok := pr.Bounds[row.Experiment][row.Metric]; ok && row.Scope == "summary" {
				lo, hi = bb.Low, bb.High
			}
			fmt.Fprintf(&b, "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n", pr.Protocol.Name, csvField(fold[row.Experiment]), csvField(row.Experiment), row.Scope, row.Metric,
				csvNum(row.Predicted), csvNum(row.Actual), csvNum(row.APE), regime[row.Experiment], csvNum(lo), csvNum(hi))
		}
	}
	return b.Bytes()
}

// regimeName names a regime in latency.csv.
func regimeName(overloaded bool) string {
	if overloaded {
		return "overloaded"
	}
	return "sustained"
}

func csvField(s string) string {
	if strings.ContainsAny(s, ",\"\n") {
		return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
	}
	return s
}

// simulatorMAPE is another simulator's whole-run MAPE on the runs it
// predicted, with eppsim's on the same runs.
type simulatorMAPE struct {
	name   string
	runs   int
	theirs map[string]float64 // metric → MAPE
	ours   map[string]float64
	lomo   map[string]float64 // eppsim leave-one-model-out (when the report has it)
}

// otherSimulators gathers the predictions the file carries.
func (r *Report) otherSimulators() []simulatorMAPE {
	type acc struct {
		sum map[string]float64
		n   map[string]int
		ids map[string]bool
	}
	by := map[string]*acc{}
	for _, res := range r.Results {
		e := res.Experiment
		if e.Overloaded() {
			continue
		}
		for src, sims := range e.Predictions {
			for sim, scopes := range sims {
				name := sim + " (" + src + ")"
				a := by[name]
				if a == nil {
					a = &acc{sum: map[string]float64{}, n: map[string]int{}, ids: map[string]bool{}}
					by[name] = a
				}
				for m, p := range scopes["summary"] {
					if p.MAPE > 0 || p.Predicted > 0 {
						a.sum[m] += p.MAPE
						a.n[m]++
						a.ids[e.ID] = true
					}
				}
			}
		}
	}
	var out []simulatorMAPE
	for name, a := range by {
		s := simulatorMAPE{name: name, runs: len(a.ids), theirs: map[string]float64{}, ours: map[string]float64{}, lomo: map[string]float64{}}
		for m, n := range a.n {
			s.theirs[m] = a.sum[m] / float64(n)
		}
		for _, m := range Metrics {
			if v, n := MAPE(r.Rows, m, func(id string) bool { return a.ids[id] && r.normal(id) }); n > 0 {
				s.ours[m] = v
			}
			if v, n := MAPE(r.protocolRows("model"), m, func(id string) bool { return a.ids[id] }); n > 0 {
				s.lomo[m] = v
			}
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b simulatorMAPE) int {
		if a.runs != b.runs {
			return b.runs - a.runs
		}
		return strings.Compare(a.name, b.name)
	})
	return out
}

// SimulatorComparison is another simulator's whole-run MAPE per headline
// metric on the runs it predicted, beside eppsim's on the same runs.
type SimulatorComparison struct {
	Name string
	Runs int
	// Theirs, Ours and OursLOMO map a metric to its MAPE; a metric is
	// absent where there is no value (OursLOMO: without
	// leave-one-model-out predictions).
	Theirs, Ours, OursLOMO map[string]float64
}

// OtherSimulators compares eppsim with every other simulator whose
// predictions the file carries, the simulators with most runs first.
func (r *Report) OtherSimulators() []SimulatorComparison {
	var out []SimulatorComparison
	for _, s := range r.otherSimulators() {
		out = append(out, SimulatorComparison{Name: s.name, Runs: s.runs, Theirs: s.theirs, Ours: s.ours, OursLOMO: s.lomo})
	}
	return out
}

// OverloadedCheck lists each overloaded run's measured and predicted TTFT
// mean and whether the prediction is overloaded too: at least
// OverloadedTTFT and within a factor of ten of the measurement.
func (r *Report) OverloadedCheck() []OverloadedRun {
	var out []OverloadedRun
	for _, res := range r.Results {
		e := res.Experiment
		if !e.Overloaded() {
			continue
		}
		o := OverloadedRun{ID: e.ID, Measured: math.NaN(), Predicted: math.NaN()}
		if a := e.MeasuredValues("summary"); a != nil {
			o.Measured = a["ttft_mean"]
		}
		if p := res.Predicted["summary"]; p != nil {
			o.Predicted = p["ttft_mean"]
		}
		o.OK = o.Predicted >= OverloadedTTFT && (math.IsNaN(o.Measured) || (o.Predicted/o.Measured <= 10 && o.Measured/o.Predicted <= 10))
		out = append(out, o)
	}
	return out
}

// OverloadedRun is one overloaded run's TTFT mean, measured and predicted
// (ms).
type OverloadedRun struct {
	ID                  string
	Measured, Predicted float64
	OK                  bool
}

// gpuOf is a run's GPU as the catalogue names it.
func gpuOf(e *Experiment) string {
	if g, err := arch.DefaultGPUs().Lookup(e.Hardware); err == nil {
		return g.Name
	}
	return e.Hardware
}

// Markdown renders latency.md.
func (r *Report) Markdown() []byte {
	var b bytes.Buffer
	pct := func(v float64, ok bool) string {
		if !ok || math.IsNaN(v) {
			return "–"
		}
		return fmt.Sprintf("%.1f%%", v)
	}
	fmt.Fprintf(&b, "# eppsim latency validation\n\n")
	fmt.Fprintf(&b, "Runs: `%s` (%d runs). Calibration: `%s`", r.Source, len(r.Results), r.Calibration.ID())
	if r.Calibration.FittedOn != "" {
		fmt.Fprintf(&b, " (fitted on %s)", r.Calibration.FittedOn)
	}
	b.WriteString(".\n\n")
	if len(r.Refused) > 0 {
		fmt.Fprintf(&b, "**Refused %d of %d runs**, not simulated and in no figure below:\n\n", len(r.Refused), len(r.Refused)+len(r.Results))
		for _, rr := range r.Refused {
			fmt.Fprintf(&b, "- `%s`: %v\n", rr.ID, rr.Err)
		}
		b.WriteString("\n")
	}
	b.WriteString("MAPE is the mean of |predicted − actual| / actual over whole runs (the published comparisons' definition); " +
		"itl_mean is (E2E mean − TTFT mean) / (output_len − 1) on both sides. Overloaded runs are checked apart (below). " +
		"Metrics are defined in docs/latency.md.\n\n")

	header := func() {
		b.WriteString("| runs | n |")
		for _, m := range Metrics {
			fmt.Fprintf(&b, " %s |", m)
		}
		b.WriteString("\n|---|---:|" + strings.Repeat("---:|", len(Metrics)) + "\n")
	}
	// row writes one line of stat (MAPE or MedianAPE) per metric over the
	// rows keep selects, when there is any.
	row := func(stat func([]Row, string, func(string) bool) (float64, int), label string, rows []Row, keep func(string) bool) {
		n := 0
		cells := ""
		for _, m := range Metrics {
			v, k := stat(rows, m, keep)
			n = max(n, k)
			cells += " " + pct(v, k > 0) + " |"
		}
		if n > 0 {
			fmt.Fprintf(&b, "| %s | %d |%s\n", label, n, cells)
		}
	}
	b.WriteString("## eppsim, whole-run MAPE\n\n")
	header()
	row(MAPE, "all measured runs, "+r.SampleLabel(), r.Rows, r.normal)
	for _, pr := range r.OutOfSample {
		row(MAPE, fmt.Sprintf("%s (%d %s)", pr.Protocol.Label, pr.Folds, map[bool]string{true: "refit", false: "refits"}[pr.Folds == 1]), pr.Rows, nil)
	}
	var gpus []string
	for _, res := range r.Results {
		if g := gpuOf(res.Experiment); !slices.Contains(gpus, g) {
			gpus = append(gpus, g)
		}
	}
	slices.Sort(gpus)
	for _, g := range gpus {
		row(MAPE, "GPU "+g, r.Rows, func(id string) bool {
			return r.normal(id) && slices.ContainsFunc(r.Results, func(res *Result) bool { return res.Experiment.ID == id && gpuOf(res.Experiment) == g })
		})
	}
	if len(r.OutOfSample) > 0 {
		b.WriteString("\nThe median APE, which one run on the wrong side of its knee does not carry:\n\n")
		header()
		row(MedianAPE, r.SampleLabel(), r.Rows, r.normal)
		for _, pr := range r.OutOfSample {
			row(MedianAPE, pr.Protocol.Label, pr.Rows, nil)
		}
	}

	if rc := r.Regimes(); len(rc) > 0 {
		b.WriteString("\n## The knee: regime and intervals\n\nA run is on the right side of the knee when it is predicted overloaded (TTFT mean ≥ 10 s) exactly when " +
			"the measurement is. A 90% interval is the prediction times the factors that bound 90% of the out-of-sample errors on other " +
			"models' runs: those of the protocol's own predictions under each protocol; for a run of a deployment the calibration has a step offset for, " +
			"those of its leave-the-highest-load-out predictions (another load of a deployment it saw, as eppsim run builds them), for any other " +
			"run its leave-one-model-out predictions; near the knee (utilization × the slow end of the ITL interval ≥ 0.9) it also spans the run simulated with every " +
			"step at both ends of that interval. A run at a utilization of " + strconv.FormatFloat(DrawsUtilization, 'g', -1, 64) + " or more is predicted by each metric's median over " + strconv.Itoa(KneeDraws) + " draws of its arrivals (seeds " +
			strconv.FormatUint(r.Seed, 10) + " to " + strconv.FormatUint(r.Seed+KneeDraws-1, 10) + "), since there one draw's bursts decide the TTFT tail. Coverage is the share of measured whole-run values inside their intervals (target 85–95%).\n\n" +
			"| predictions | right side of the knee | interval coverage | runs near the knee |\n|---|---:|---:|---:|\n")
		cov := map[string]Coverage{}
		for _, c := range r.Coverage {
			cov[c.Label] = c
		}
		for _, g := range rc {
			c, ok := cov[g.Label]
			cell, near := "–", "–"
			if ok && c.Total > 0 {
				cell, near = fmt.Sprintf("%.1f%% (%d of %d)", 100*c.Share(), c.Inside, c.Total), strconv.Itoa(c.NearKnee)
			}
			fmt.Fprintf(&b, "| %s | %d of %d | %s | %s |\n", g.Label, g.Right, g.Total, cell, near)
		}
		for _, g := range rc {
			for _, id := range g.Wrong {
				fmt.Fprintf(&b, "\n- %s: %s on the wrong side of the knee", g.Label, id)
			}
		}
		for _, n := range ExtrapolationNotes(r.Calibration, r.Results) {
			fmt.Fprintf(&b, "\n- beyond the calibration: %s", n)
		}
		b.WriteString("\n")
	}

	if others := r.otherSimulators(); len(others) > 0 {
		lomo := r.protocolRows("model") != nil
		b.WriteString("\n## Beside other simulators\n\nEach simulator's published whole-run MAPE on the runs it predicted, and eppsim's on the same runs " +
			"(their APEs as the file states them; some were computed on a prefix of the run). eppsim's in-sample figures are on runs its " +
			"calibration was fitted on")
		if lomo {
			b.WriteString("; its leave-one-model-out figures (LOMO) predict each run with a calibration fitted without that run's model")
		}
		b.WriteString(".\n\n| simulator | runs |")
		cols := 2
		for _, m := range HeadlineMetrics {
			if lomo {
				fmt.Fprintf(&b, " %s theirs | eppsim | eppsim LOMO |", m)
			} else {
				fmt.Fprintf(&b, " %s theirs | eppsim |", m)
			}
		}
		if lomo {
			cols = 3
		}
		b.WriteString("\n|---|---:|" + strings.Repeat("---:|", cols*len(HeadlineMetrics)) + "\n")
		for _, s := range others {
			fmt.Fprintf(&b, "| %s | %d |", s.name, s.runs)
			for _, m := range HeadlineMetrics {
				t, tok := s.theirs[m]
				o, ook := s.ours[m]
				fmt.Fprintf(&b, " %s | %s |", pct(t, tok), pct(o, ook))
				if lomo {
					l, lok := s.lomo[m]
					fmt.Fprintf(&b, " %s |", pct(l, lok))
				}
			}
			b.WriteString("\n")
		}
	}

	if ov := r.OverloadedCheck(); len(ov) > 0 {
		b.WriteString("\n## Overloaded runs\n\nPredicted as overloaded when the TTFT mean is at least 10 s and within 10× of the measurement.\n\n" +
			"| run | TTFT mean measured (s) | predicted (s) | predicted overloaded |\n|---|---:|---:|---|\n")
		for _, o := range ov {
			verdict := "yes"
			if !o.OK {
				verdict = "**no**"
			}
			fmt.Fprintf(&b, "| %s | %.1f | %.1f | %s |\n", o.ID, o.Measured/1000, o.Predicted/1000, verdict)
		}
	}
	if fb := FullBatchErrors(r.Results); len(fb) > 0 {
		b.WriteString("\n## Decode at full batch\n\nThe overloaded runs whose prediction binds at their slots (max_num_seqs) decode that many sequences at nearly every step, " +
			"real and simulated: their decode time per output token ((E2E mean − TTFT mean) / (output_len − 1)) checks the step time at full batch, " +
			"which no fit sees. Where the slots bind, a request holds its slot for its decode, so the sustainable rate scales as the inverse " +
			"of the decode time. A run's knee simulations are slowed to at least the largest ratio among other models' runs (docs/latency.md, \"The knee\").\n\n" +
			"| run | decode measured (ms) | predicted (ms) | measured ÷ predicted | sustainable rate predicted (req/s) | at the measured decode |\n|---|---:|---:|---:|---:|---:|\n")
		for _, fr := range fb {
			rate, at := "–", "–"
			if fr.Rate > 0 {
				rate, at = fmt.Sprintf("%.2f", fr.Rate), fmt.Sprintf("%.2f", fr.Rate/fr.Ratio())
			}
			fmt.Fprintf(&b, "| %s | %.2f | %.2f | %.3f | %s | %s |\n", fr.ID, fr.Measured, fr.Predicted, fr.Ratio(), rate, at)
		}
		var held strings.Builder
		for _, pr := range r.OutOfSample {
			for _, fe := range pr.HeldOutFullBatch {
				fmt.Fprintf(&held, "| %s | %s | %.2f | %.2f | %.3f |\n", pr.Protocol.Label, fe.ID, fe.Measured, fe.Predicted, fe.Ratio())
			}
		}
		if held.Len() > 0 {
			b.WriteString("\nThe same runs predicted by each protocol's fold that held out their model, TP size or GPU (the highest-load fold for the load protocol). " +
				"Under each protocol a run's knee simulations take the ratios of its own fold's predictions, on other models' runs.\n\n" +
				"| protocol | run | decode measured (ms) | predicted (ms) | measured ÷ predicted |\n|---|---|---:|---:|---:|\n")
			b.WriteString(held.String())
		}
		b.WriteString(foldFullBatchTable(r.OutOfSample, fb))
	}

	if rs := DecodeRises(r.Results); len(rs) > 0 {
		mean, median, _ := RiseErrors(rs)
		fmt.Fprintf(&b, "\n## Decode under load\n\nDecode time per output token in each run's last load stage ÷ its first, measured and predicted "+
			"(runs with two or more stages, not overloaded; %s): |predicted ÷ measured − 1| has a mean of %.1f%% and a median of %.1f%%.\n\n"+
			"| run | rise measured | predicted | predicted ÷ measured − 1 |\n|---|---:|---:|---:|\n", r.SampleLabel(), mean, median)
		for _, d := range rs {
			fmt.Fprintf(&b, "| %s | ×%.3f | ×%.3f | %+.1f%% |\n", d.ID, d.Measured, d.Predicted, 100*d.Error())
		}
	}

	b.WriteString("\n## Every run (whole run)\n\nUtilization is the busiest stage's rate, per engine, over the sustainable rate eppsim estimates for the run's mean request " +
		"(docs/latency.md, \"The knee\"), with the limit that binds there (an SGLang run's by SGLang's flags).\n\n| run | engine | GPU | TP | utilization (binding) |")
	for _, m := range HeadlineMetrics {
		fmt.Fprintf(&b, " %s predicted / actual (APE) |", m)
	}
	b.WriteString("\n|---|---|---|---:|---|" + strings.Repeat("---:|", len(HeadlineMetrics)) + "\n")
	for _, res := range r.Results {
		e := res.Experiment
		knee := "–"
		if res.Knee != nil {
			knee = fmt.Sprintf("%.2f (%s)", res.Utilization, res.Knee.Binding)
		}
		par := fmt.Sprint(e.TP)
		if dp := e.DataParallel(); dp > 1 {
			par += fmt.Sprintf(" × DP %d", dp)
		}
		fmt.Fprintf(&b, "| %s%s | %s | %s | %s | %s |", e.ID, map[bool]string{true: " (overloaded)"}[e.Overloaded()], e.EngineTypeOf(), gpuOf(e), par, knee)
		p, a := res.Predicted["summary"], e.MeasuredValues("summary")
		for _, m := range HeadlineMetrics {
			av, ok := a[m]
			if !ok {
				fmt.Fprintf(&b, " %s / – |", fmtMS(p[m]))
				continue
			}
			fmt.Fprintf(&b, " %s / %s (%.1f%%) |", fmtMS(p[m]), fmtMS(av), ape(p[m], av))
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\nFiles: `%s` (every scope and metric), `%s` (each protocol's held-out predictions), `%s.svg`, `%s.png`.\n", CSVFile, OOSFile, PlotName, PlotName)
	return b.Bytes()
}

// fmtMS prints milliseconds with three significant digits.
func fmtMS(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// WriteDir writes latency.csv, latency.md and the predicted-vs-actual plot
// into dir (created if needed), each through a temporary file renamed into
// place.
func (r *Report) WriteDir(dir string, dpi int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{CSVFile, r.CSV()}, {OOSFile, r.OutOfSampleCSV()}, {MarkdownFile, r.Markdown()}} {
		if err := report.WriteFileAtomic(filepath.Join(dir, f.name), f.data); err != nil {
			return err
		}
	}
	return report.SavePlot(dir, PlotName, 7*vg.Inch, 6*vg.Inch, dpi, r.drawPlot)
}

// drawPlot is predicted against actual on log axes, one series per
// headline metric (whole runs), with the identity line.
func (r *Report) drawPlot(c draw.Canvas) {
	p := plot.New()
	p.Title.Text = "eppsim predicted vs measured latency (whole runs, ms)"
	p.X.Label.Text = "measured (ms)"
	p.Y.Label.Text = "predicted (ms)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	lo, hi := math.Inf(1), math.Inf(-1)
	colors := []color.Color{color.RGBA{31, 119, 180, 255}, color.RGBA{214, 39, 40, 255}, color.RGBA{44, 160, 44, 255}, color.RGBA{148, 103, 189, 255}}
	shapes := []draw.GlyphDrawer{draw.CircleGlyph{}, draw.TriangleGlyph{}, draw.SquareGlyph{}, draw.CrossGlyph{}}
	for i, m := range HeadlineMetrics {
		var pts plotter.XYs
		for _, row := range r.Rows {
			if row.Scope != "summary" || row.Metric != m || math.IsNaN(row.Actual) || !(row.Predicted > 0) {
				continue
			}
			pts = append(pts, plotter.XY{X: row.Actual, Y: row.Predicted})
			lo = min(lo, row.Actual, row.Predicted)
			hi = max(hi, row.Actual, row.Predicted)
		}
		if len(pts) == 0 {
			continue
		}
		s, err := plotter.NewScatter(pts)
		if err != nil {
			continue
		}
		s.GlyphStyle.Color, s.GlyphStyle.Shape, s.GlyphStyle.Radius = colors[i], shapes[i], vg.Points(3)
		p.Add(s)
		p.Legend.Add(m, s)
	}
	if math.IsInf(lo, 1) {
		// No run has a measurement (predictions only): empty axes of one
		// decade rather than a log scale over nothing.
		p.Title.Text += ": no measured values"
		lo, hi = 10, 100
		p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = lo, hi, lo, hi
	} else {
		lo, hi = lo/1.5, hi*1.5
		id, err := plotter.NewLine(plotter.XYs{{X: lo, Y: lo}, {X: hi, Y: hi}})
		if err == nil {
			id.LineStyle.Color = color.Gray{150}
			id.LineStyle.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			p.Add(id)
			p.Legend.Add("predicted = measured", id)
		}
		p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = lo, hi, lo, hi
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	p.Draw(c)
}

// foldFullBatchTable renders every fold's measured ÷ predicted decode
// time at full batch, one row per fold, one column per run of runs (the
// calibration's own errors), with the fold's eta_kv: which runs a fit saw
// moves the efficiency of the KV reads, and with it the step time at
// full batch. Empty when no fold predicted any.
func foldFullBatchTable(prs []ProtocolRows, runs []FullBatchError) string {
	var rows strings.Builder
	for _, pr := range prs {
		for _, fold := range pr.ByFold {
			ratio := map[string]float64{}
			for _, fe := range fold.Errors {
				ratio[fe.ID] = fe.Ratio()
			}
			fmt.Fprintf(&rows, "| %s | %s | %.3f |", pr.Protocol.Label, fold.HeldOut, fold.EtaKV)
			for _, fe := range runs {
				if v, ok := ratio[fe.ID]; ok {
					fmt.Fprintf(&rows, " %.3f |", v)
				} else {
					rows.WriteString(" – |")
				}
			}
			rows.WriteString("\n")
		}
	}
	if rows.Len() == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\nEvery fold's prediction of them, measured ÷ predicted, beside the fold's `eta_kv` (the KV streaming efficiency its refit found).\n\n| protocol | fold without | eta_kv |")
	for _, fe := range runs {
		fmt.Fprintf(&b, " %s |", fe.Short())
	}
	b.WriteString("\n|---|---|---:|" + strings.Repeat("---:|", len(runs)) + "\n")
	b.WriteString(rows.String())
	return b.String()
}
