package latency

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/gonum/optimize"

	"github.com/eppsim/eppsim/arch"
	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/scenario"
)

// FitMetrics are the metrics the calibration objective compares, in every
// scope (the whole run and each stage).
var FitMetrics = Metrics

// DefaultFree are the coefficients calibrate fits by default. The others
// keep their starting values:
//   - per_output_token_us: vLLM streams outputs from a process of its own,
//     so it adds nothing a run can tell apart from the step time;
//   - eta_link: it only matters for compute-heavy tensor-parallel steps,
//     which the shipped runs hardly have (their prefills are almost all
//     prefix-cache hits), so it stays at its documented prior unless a
//     user's runs include such steps;
//   - eta_experts: read from a published kernel measurement (docs/latency.md,
//     "Mixtures of experts"); Mixtral-8x7B is the only unquantised mixture
//     of experts among the shared runs, so a refit that held it out would
//     have nothing to fit it on.
var DefaultFree = []string{"step_us", "layer_us", "seq_us", "eta_weights", "eta_kv", "mfu", "roofline_exponent", "all_reduce_us",
	"ingest_us", "ingest_jitter"}

// CalibrateOptions configure Calibrate.
type CalibrateOptions struct {
	// Start is the starting calibration (its name and notes are replaced).
	// The full fit and every protocol's refit start from it.
	Start replica.Calibration
	// Free names the coefficients to fit (default DefaultFree).
	Free []string
	// Budget is the number of objective evaluations of the fit (each
	// simulates every fitted run); FoldBudget that of each protocol
	// refit (0: Budget).
	Budget, FoldBudget int
	// StageLimit shortens the simulated stages while fitting (seconds; 0:
	// as recorded). The reported fit always simulates the full runs.
	StageLimit int
	// Protocols names the out-of-sample protocols (Protocols' names) to
	// run after the fit: each refits once per fold without the fold's
	// runs, from Start with FoldBudget evaluations, and predicts them.
	Protocols []string
	// Weights weigh the objective's terms by metric (absent: 1); see
	// WeightedObjective. With Candidates it is ignored.
	Weights map[string]float64
	// Candidates, when it holds more than one set of metric weights, has
	// every fit choose its weights by a nested cross-validation on its own
	// training runs only (Select): the full fit on all runs, each protocol
	// refit on the runs outside its fold, so that a fold's runs never
	// inform the choice its figures measure.
	Candidates []map[string]float64
	// MinTrainRuns is the fewest runs a protocol refit is fitted on
	// (0: MinTrainRuns): folds that would leave fewer are skipped.
	MinTrainRuns int
	// InnerFolds and InnerBudget set that selection's inner
	// cross-validation: runs grouped by model into InnerFolds folds (0:
	// 3), each inner fit InnerBudget evaluations (0: Budget/3).
	InnerFolds, InnerBudget int
	Seed                    uint64
	Workers                 int
	// Draws is how many arrival draws predict a run near its knee in the
	// objective (Options.Draws): 0 means KneeDraws, the median over the
	// draws that validate latency predicts such a run by, so that the fit
	// minimises the error of the estimator its figures measure; 1 is one
	// draw, the objective of the calibrations fitted before 2026-12-03.
	// With one draw, a run near its knee is fitted to whichever side of
	// its bimodal TTFT tail the seed fell on (docs/latency.md, "Tails"),
	// and coefficients that move that one draw's bursts past a full batch
	// or not change the objective as much as the runs far from the knee.
	Draws int
	// Pool shares the runs' shortened workloads between the evaluations
	// of the objective (Options.Pool); nil: Calibrate makes one (NewPool)
	// and closes it when it returns. The simulations of the full runs
	// that measure the fit read their own workloads (KeepBytes says why).
	Pool *scenario.Pool
	// OffsetAware scores every evaluation as the calibration predicts
	// once fitted: the runs are simulated with the coefficients alone,
	// each deployment's step offset is set from those predictions
	// (Offsets, the rule the fit's own offsets follow), and the objective
	// is that of the runs simulated again with the offsets. It costs a
	// second simulation per evaluation. Without it the objective scores
	// the coefficients alone, and a deployment's level error, which its
	// offset takes away afterwards, can weigh on coefficients that set how
	// the step grows with the batch and its contexts (docs/latency.md,
	// "The knee"). Not with Candidates: an inner fold's score would
	// take offsets from the runs it scores.
	OffsetAware bool
	// Remeasure keeps Start's coefficients: no search, no weights chosen
	// (Budget, Candidates and Protocols unused), only the figures of the
	// runs simulated with them. It re-measures a calibration after a
	// change that does not call for a refit (calibrate --continue FILE
	// --budget 0).
	Remeasure bool
	// Progress receives a line per improvement (nil: none).
	Progress io.Writer
	// Name labels the calibration; Source says what it was fitted on.
	Name, Source, Version string
}

// CalibrateResult is a fit and how good it is.
type CalibrateResult struct {
	Calibration replica.Calibration
	// Fitted are the runs fitted on; Results their full-length
	// predictions with the fitted calibration (every run of the file,
	// overloaded ones included).
	Fitted  []*Experiment
	Results []*Result
	// Objective is the fit's objective (mean |log(predicted/actual)| per
	// run, averaged over runs) on the shortened runs; Evaluations the
	// number of objective evaluations.
	Objective   float64
	Evaluations int
	// Weights are the metric weights the full fit used, and Selection
	// how they were chosen (nil: given, not selected).
	Weights   map[string]float64
	Selection *Selection
	// Protocols are the out-of-sample predictions, one per protocol run.
	Protocols []ProtocolResult
}

// ProtocolResult is one protocol's out-of-sample predictions: every fold's
// runs predicted by the refit without them.
type ProtocolResult struct {
	Protocol Protocol
	Folds    []FoldResult
	// Results are the held-out runs' predictions, over all folds.
	Results []*Result
}

// FoldResult is one fold of a protocol: its refit, or why it was skipped.
type FoldResult struct {
	Fold      Fold
	TrainedOn int
	Skipped   string // non-empty: not refitted, and why
	Fit       replica.CalibrationFold
}

// FitRuns selects the runs a calibration is fitted on: measured and not
// overloaded (overloaded runs are saturation checks only).
func FitRuns(f *File) []*Experiment {
	var out []*Experiment
	for i := range f.Experiments {
		e := &f.Experiments[i]
		if e.HasMeasurement() && !e.Overloaded() {
			out = append(out, e)
		}
	}
	return out
}

// Calibrate fits the calibrated step-time model to the measured runs of
// f by simulating them inside a Nelder-Mead search (gonum/optimize) over
// the free coefficients (efficiencies on a logit scale, overheads on a log
// scale, so every point is physical). The objective is each run's mean
// |log(predicted/actual)| over the scopes and FitMetrics, averaged over
// the runs: every run counts alike, and a prediction twice too high costs
// what one half too low does. Then each protocol of o.Protocols refits
// per fold and predicts the held-out runs.
func Calibrate(ctx context.Context, f *File, o CalibrateOptions) (*CalibrateResult, error) {
	runs := FitRuns(f)
	if len(runs) == 0 {
		return nil, errors.New("calibrate: no measured run that is not overloaded")
	}
	if o.Free == nil {
		o.Free = DefaultFree
	}
	free, err := freeIndexes(o.Free)
	if err != nil {
		return nil, err
	}
	if o.OffsetAware && len(o.Candidates) > 1 {
		return nil, errors.New("calibrate: an offset-aware objective does not choose among metric weights (an inner fold's score would take its offsets from the runs it scores)")
	}
	o.Start.Coefficients = startOf(o.Start.Coefficients, free)
	var protocols []Protocol
	for _, name := range o.Protocols {
		p, err := LookupProtocol(name)
		if err != nil {
			return nil, fmt.Errorf("calibrate: %w", err)
		}
		if !slices.ContainsFunc(protocols, func(q Protocol) bool { return q.Name == p.Name }) {
			protocols = append(protocols, p)
		}
	}
	if o.Budget <= 0 {
		o.Budget = 300
	}
	if o.FoldBudget <= 0 {
		o.FoldBudget = o.Budget
	}
	if o.Pool == nil {
		o.Pool = NewPool()
		defer o.Pool.Close()
	}
	start := time.Now()
	fr := simFitter{o: o, free: free}
	var (
		weights map[string]float64
		sel     *Selection
		fit     = o.Start.Coefficients
		evals   int
		obj     = math.NaN()
	)
	if o.Remeasure {
		weights, protocols = o.Weights, nil
	} else {
		if weights, sel, err = chooseWeights(ctx, fr, runs, o, "fit"); err != nil {
			return nil, err
		}
		if fit, evals, obj, err = fitOn(ctx, runs, o.Start.Coefficients, free, o.Budget, o, weights, "fit"); err != nil {
			return nil, err
		}
	}
	res := &CalibrateResult{Fitted: runs, Objective: obj, Evaluations: evals, Weights: weights, Selection: sel}
	res.Calibration = replica.Calibration{Name: o.Name, Coefficients: fit, EppsimVersion: o.Version,
		FittedOn: fmt.Sprintf("%s: %d measured runs that are not overloaded (%s); free: %s; %d evaluations, objective %.4f%s",
			o.Source, len(runs), strings.Join(modelsOf(runs), ", "), strings.Join(o.Free, ", "), evals, obj, weightsNote(weights)) + drawsNote(o.Draws) + offsetsNote(o.OffsetAware)}
	all := make([]*Experiment, len(f.Experiments))
	for i := range f.Experiments {
		all[i] = &f.Experiments[i]
	}
	// The deployments' step offsets come from the runs predicted by the
	// coefficients alone; the figures below are the calibration's, offsets
	// included (docs/latency.md, "Deployment offsets").
	if res.Results, err = SimulateAll(ctx, all, res.Calibration, Options{Seed: o.Seed}, o.Workers); err != nil {
		return nil, err
	}
	if res.Calibration.Offsets, err = Offsets(res.Results); err != nil {
		return nil, err
	}
	if len(res.Calibration.Offsets) > 0 {
		if res.Results, err = SimulateAll(ctx, all, res.Calibration, Options{Seed: o.Seed}, o.Workers); err != nil {
			return nil, err
		}
	}
	// The knee simulations' slow end for eppsim run: the full-batch
	// errors of the runs measured past their knee (no fit sees them).
	res.Calibration.FullBatch = FullBatchOf(res.Results)
	rows := Rows(res.Results)
	fitted := func(id string) bool {
		return slices.ContainsFunc(runs, func(e *Experiment) bool { return e.ID == id })
	}
	res.Calibration.Fit = map[string]float64{}
	for _, m := range Metrics {
		if v, n := MAPE(rows, m, fitted); n > 0 {
			res.Calibration.Fit["mape_"+m] = round(v, 2)
		}
	}
	heldOut := map[string][]Row{}
	for _, p := range protocols {
		pr := ProtocolResult{Protocol: p}
		if pr.Folds, err = refitFolds(ctx, fr, p, runs, o); err != nil {
			return nil, err
		}
		for _, fres := range pr.Folds {
			if fres.Skipped != "" {
				continue
			}
			c := res.Calibration
			c.Coefficients = fres.Fit.Coefficients
			if fres.Fit.Offsets, err = foldOffsets(ctx, c, fres.Fold.trainOf(runs), fres.Fold.Test, Options{Seed: o.Seed}, o.Workers); err != nil {
				return nil, err
			}
			c.Offsets = fres.Fit.Offsets
			rs, err := SimulateAll(ctx, fres.Fold.Test, c, Options{Seed: o.Seed}, o.Workers)
			if err != nil {
				return nil, err
			}
			pr.Results = append(pr.Results, rs...)
			res.Calibration.Folds = append(res.Calibration.Folds, fres.Fit)
		}
		prows := Rows(pr.Results)
		for _, m := range Metrics {
			if v, n := MAPE(prows, m, nil); n > 0 {
				res.Calibration.Fit[p.Key+"_mape_"+m] = round(v, 2)
			}
		}
		if p.Name == "model" {
			// The intervals eppsim run shows: the errors on models the
			// refits never saw.
			res.Calibration.Intervals = modelOutIntervals(prows, runs)
		}
		res.Protocols = append(res.Protocols, pr)
		heldOut[p.Name] = prows
	}
	res.Calibration.Extrapolation = Extrapolations(runs, heldOut)
	res.Calibration.SeenModels = seenModels(runs, heldOut["load"])
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "calibrate: done in %s\n", time.Since(start).Round(time.Second))
	}
	return res, nil
}

// refitFolds refits p's folds of runs with fr: each fold's weights are
// chosen (chooseWeights) and its coefficients fitted on the runs outside
// the fold only. A fold that would leave fewer than MinTrainRuns runs is
// skipped, and says why.
func refitFolds(ctx context.Context, fr fitter, p Protocol, runs []*Experiment, o CalibrateOptions) ([]FoldResult, error) {
	var out []FoldResult
	for _, fold := range p.Folds(runs) {
		train := fold.trainOf(runs)
		fres := FoldResult{Fold: fold, TrainedOn: len(train)}
		least := o.MinTrainRuns
		if least <= 0 {
			least = MinTrainRuns
		}
		if len(train) < least {
			fres.Skipped = fmt.Sprintf("%d runs would remain to fit on (at least %d needed)", len(train), least)
			if o.Progress != nil {
				fmt.Fprintf(o.Progress, "calibrate (%s, without %s): skipped: %s\n", p.Label, fold.Group, fres.Skipped)
			}
			out = append(out, fres)
			continue
		}
		label := p.Name + " without " + fold.Group
		w, _, err := chooseWeights(ctx, fr, train, o, label)
		if err != nil {
			return nil, err
		}
		co, err := fr.fit(ctx, train, w, o.FoldBudget, label)
		if err != nil {
			return nil, err
		}
		fres.Fit = replica.CalibrationFold{Protocol: p.Name, HeldOut: fold.Group, Runs: fold.ids(), TrainedOn: len(train), Weights: w, Draws: FoldDraws(o.Draws), Coefficients: co}
		out = append(out, fres)
	}
	return out, nil
}

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

func modelsOf(runs []*Experiment) []string {
	var out []string
	for _, e := range runs {
		if !slices.Contains(out, e.Model) {
			out = append(out, e.Model)
		}
	}
	slices.Sort(out)
	return out
}

func freeIndexes(names []string) ([]int, error) {
	var out []int
	for _, n := range names {
		i := slices.Index(replica.CoefficientNames, n)
		if i < 0 {
			return nil, fmt.Errorf("calibrate: unknown coefficient %q (have %s)", n, strings.Join(replica.CoefficientNames, ", "))
		}
		if slices.Contains(out, i) {
			return nil, fmt.Errorf("calibrate: coefficient %q given twice", n)
		}
		out = append(out, i)
	}
	if len(out) == 0 {
		return nil, errors.New("calibrate: no coefficient to fit")
	}
	return out, nil
}

// startOf is where the search starts from start with the free
// coefficients free: start itself, except that an absent optional
// coefficient (0, a calibration written before it existed:
// replica.OptionalCoefficients) that is fitted starts at the value of the
// one it stands for (eta_experts at eta_weights, eta_kv_mha at eta_kv),
// rather than at the clamp of its logit (1e-6 of the bandwidth).
func startOf(start replica.Coefficients, free []int) replica.Coefficients {
	v := start.Vector()
	for _, i := range free {
		if by := replica.OptionalCoefficients[replica.CoefficientNames[i]]; by != "" && v[i] == 0 {
			v[i] = v[slices.Index(replica.CoefficientNames, by)]
		}
	}
	return replica.CoefficientsFromVector(v)
}

// exercised drops from free the optional coefficients that no run of
// runs exercises (replica.CoefficientExercised), which keep their
// starting values: eta_kv_mha without a model of multi-head attention
// among them, eta_experts without an unquantised mixture of experts (a
// refit that held out the only such model has nothing to fit it on, and
// the objective would be flat along it).
func exercised(free []int, runs []*Experiment) []int {
	var models []*arch.Model
	for _, e := range runs {
		if m, err := e.ArchModel(); err == nil {
			models = append(models, m)
		}
	}
	return slices.DeleteFunc(slices.Clone(free), func(i int) bool {
		name := replica.CoefficientNames[i]
		return replica.OptionalCoefficients[name] != "" &&
			!slices.ContainsFunc(models, func(m *arch.Model) bool { return replica.CoefficientExercised(name, m) })
	})
}

// isEfficiency reports whether coefficient i is a fraction (searched on
// a logit scale).
func isEfficiency(i int) bool {
	n := replica.CoefficientNames[i]
	return strings.HasPrefix(n, "eta_") || n == "mfu" || n == "ingest_jitter"
}

// toFree maps a coefficient to the search space: logit for efficiencies,
// log(p − 1) for the roofline exponent, log for overheads (a floor of
// 1e-3 µs keeps zero finite).
func toFree(i int, v float64) float64 {
	switch {
	case isEfficiency(i):
		v = min(max(v, 1e-6), 1-1e-6)
		return math.Log(v / (1 - v))
	case replica.CoefficientNames[i] == "roofline_exponent":
		return math.Log(max(v-1, 1e-3))
	}
	return math.Log(max(v, 1e-3))
}

func fromFree(i int, x float64) float64 {
	switch {
	case isEfficiency(i):
		return 1 / (1 + math.Exp(-x))
	case replica.CoefficientNames[i] == "roofline_exponent":
		return 1 + math.Exp(x)
	}
	return math.Exp(x)
}

// fitOn runs the Nelder-Mead search on runs from start.
func fitOn(ctx context.Context, runs []*Experiment, start replica.Coefficients, free []int, budget int, o CalibrateOptions, weights map[string]float64, label string) (replica.Coefficients, int, float64, error) {
	free = exercised(free, runs)
	if len(free) == 0 {
		// Nothing these runs exercise is free: the start is the fit.
		c := replica.Calibration{Name: "fit", Coefficients: start}
		v, err := o.objective(ctx, runs, c, weights)
		if err != nil {
			return replica.Coefficients{}, 1, 0, err
		}
		return start, 1, v, nil
	}
	base := start.Vector()
	x0 := make([]float64, len(free))
	for k, i := range free {
		x0[k] = toFree(i, base[i])
	}
	coeffs := func(x []float64) replica.Coefficients {
		v := slices.Clone(base)
		for k, i := range free {
			v[i] = fromFree(i, x[k])
		}
		return replica.CoefficientsFromVector(v)
	}
	best := math.Inf(1)
	bestX := slices.Clone(x0)
	evals := 0
	var simErr error
	objective := func(x []float64) float64 {
		evals++
		c := replica.Calibration{Name: "fit", Coefficients: coeffs(x)}
		v, err := o.objective(ctx, runs, c, weights)
		if err != nil {
			if ctx.Err() == nil && simErr == nil && !errors.Is(err, errUnphysical) {
				simErr = err
			}
			return math.Inf(1)
		}
		if v < best {
			best = v
			copy(bestX, x)
			if o.Progress != nil {
				fmt.Fprintf(o.Progress, "calibrate (%s): evaluation %d: objective %.4f\n", label, evals, v)
			}
		}
		return v
	}
	// The simplex starts 0.4 away from the start in each coordinate: a
	// factor of about 1.5 on an overhead or an efficiency's odds.
	verts := [][]float64{slices.Clone(x0)}
	for k := range x0 {
		v := slices.Clone(x0)
		v[k] += 0.4
		verts = append(verts, v)
	}
	vals := make([]float64, len(verts))
	for k, v := range verts {
		vals[k] = objective(v)
	}
	settings := &optimize.Settings{FuncEvaluations: max(budget-len(verts), 1), InitValues: &optimize.Location{F: vals[0]},
		Converger: &optimize.FunctionConverge{Absolute: 1e-5, Iterations: 60}}
	_, err := optimize.Minimize(optimize.Problem{Func: objective}, x0, settings,
		&optimize.NelderMead{InitialVertices: verts, InitialValues: vals})
	if ctx.Err() != nil {
		return replica.Coefficients{}, evals, 0, ctx.Err()
	}
	if math.IsInf(best, 1) {
		if simErr != nil {
			return replica.Coefficients{}, evals, 0, simErr
		}
		return replica.Coefficients{}, evals, 0, fmt.Errorf("calibrate (%s): no evaluation succeeded: %v", label, err)
	}
	return coeffs(bestX), evals, best, nil
}

var errUnphysical = errors.New("unphysical coefficients")

// Objective is the calibration objective of c on runs: each run's mean
// |log(predicted/actual)| over its scopes and FitMetrics, averaged over
// the runs.
func Objective(ctx context.Context, runs []*Experiment, c replica.Calibration, o Options, workers int) (float64, error) {
	return WeightedObjective(ctx, runs, c, o, workers, nil)
}

// WeightedObjective is Objective with each metric's terms weighted by
// weights[metric] (absent: 1): each run's weighted mean of
// |log(predicted/actual)|, averaged over the runs. With every weight 1 it
// is Objective.
func WeightedObjective(ctx context.Context, runs []*Experiment, c replica.Calibration, o Options, workers int, weights map[string]float64) (float64, error) {
	if err := c.Coefficients.Validate(); err != nil {
		return 0, fmt.Errorf("%w: %v", errUnphysical, err)
	}
	results, err := SimulateAll(ctx, runs, c, o, workers)
	if err != nil {
		return 0, err
	}
	var total float64
	for _, r := range results {
		var s, n float64
		for _, scope := range r.Experiment.Scopes() {
			p, a := r.Predicted[scope], r.Experiment.MeasuredValues(scope)
			for _, m := range FitMetrics {
				av, ok := a[m]
				if !ok || p == nil {
					continue
				}
				pv := p[m]
				if !(pv > 0) {
					return 0, fmt.Errorf("%s: %s %s predicted %v", r.Experiment.ID, scope, m, pv)
				}
				w, ok := weights[m]
				if !ok {
					w = 1
				}
				s += w * math.Abs(math.Log(pv/av))
				n += w
			}
		}
		if n > 0 {
			total += s / n
		}
	}
	return total / float64(len(results)), nil
}

// objective is the fit's objective of c on runs with o's settings:
// WeightedObjective, after setting c's step offsets from the runs
// predicted with c's coefficients alone when o.OffsetAware.
func (o CalibrateOptions) objective(ctx context.Context, runs []*Experiment, c replica.Calibration, weights map[string]float64) (float64, error) {
	so := Options{Seed: o.Seed, StageLimit: o.StageLimit, Draws: o.Draws, Pool: o.Pool}
	if o.OffsetAware {
		if err := c.Coefficients.Validate(); err != nil {
			return 0, fmt.Errorf("%w: %v", errUnphysical, err)
		}
		c.Offsets = nil
		results, err := SimulateAll(ctx, runs, c, so, o.Workers)
		if err != nil {
			return 0, err
		}
		if c.Offsets, err = Offsets(results); err != nil {
			return 0, err
		}
	}
	return WeightedObjective(ctx, runs, c, so, o.Workers, weights)
}

// FoldDraws is what a fold records of an objective with draws
// (CalibrateOptions.Draws): its number of arrival draws near the knee, 0
// for one draw, which is what a fold without the field means.
func FoldDraws(draws int) int {
	if n := (Options{Draws: draws}).draws(); n > 1 {
		return n
	}
	return 0
}

// offsetsNote says when the objective scored the runs with their
// deployments' step offsets (CalibrateOptions.OffsetAware).
func offsetsNote(aware bool) string {
	if aware {
		return "; each evaluation scored with the step offsets its own predictions give"
	}
	return ""
}

// drawsNote says how the objective predicted runs near their knee.
func drawsNote(draws int) string {
	if n := FoldDraws(draws); n > 0 {
		return fmt.Sprintf("; runs near their knee by the median of %d arrival draws", n)
	}
	return "; one arrival draw per run"
}

// weightsNote says which metrics the objective weighed (empty when none).
func weightsNote(w map[string]float64) string {
	if len(w) == 0 {
		return ""
	}
	var parts []string
	for _, m := range FitMetrics {
		if v, ok := w[m]; ok {
			parts = append(parts, fmt.Sprintf("%s=%g", m, v))
		}
	}
	return " (metric weights " + strings.Join(parts, ", ") + ")"
}
