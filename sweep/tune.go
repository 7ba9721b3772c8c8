package sweep

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"gonum.org/v1/gonum/optimize"
	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/eppsim/eppsim/report"
	"github.com/eppsim/eppsim/scenario"
	"github.com/eppsim/eppsim/workload"
)

// Tune output files.
const (
	TrajectoryFile = "trajectory.csv"
	TuneFile       = "tune.json"
	PlotTrajectory = "trajectory"
)

// Tuning methods.
const (
	MethodNelderMead = "nelder-mead"
	MethodCMAES      = "cmaes"
)

// Default tuning bounds of a weight.
const (
	DefaultWeightLo = 0
	DefaultWeightHi = 10
)

// infeasiblePenalty is what the optimiser sees for an infeasible or failed
// evaluation (a finite value, so that the methods keep going).
const infeasiblePenalty = 1e18

// weightDecimals is the precision of tuned weights: evaluations use the
// rounded weight, so best.yaml holds exactly what was simulated.
const weightDecimals = 3

// TuneParam is a tuned scorer weight with its bounds.
type TuneParam struct {
	Name   string
	Lo, Hi float64
	dim    Dim
}

// ParseTuneParam parses --param PLUGIN.weight[=LO:HI] (default bounds
// [0, 10]).
func ParseTuneParam(s string) (TuneParam, error) {
	name, bounds, hasBounds := strings.Cut(s, "=")
	name = strings.TrimSpace(name)
	d, err := parseName(name)
	if err != nil {
		return TuneParam{}, fmt.Errorf("--param %q: %w", s, err)
	}
	if d.kind != kindWeight {
		return TuneParam{}, fmt.Errorf("--param %q: tune optimises scorer weights (PLUGIN.weight); use eppsim sweep for %s", s, name)
	}
	p := TuneParam{Name: name, Lo: DefaultWeightLo, Hi: DefaultWeightHi, dim: d}
	if hasBounds {
		a, b, ok := strings.Cut(bounds, ":")
		if !ok {
			return TuneParam{}, fmt.Errorf("--param %q: bounds: want LO:HI", s)
		}
		if p.Lo, err = parseNumber(strings.TrimSpace(a)); err != nil {
			return TuneParam{}, fmt.Errorf("--param %q: lower bound: %w", s, err)
		}
		if p.Hi, err = parseNumber(strings.TrimSpace(b)); err != nil {
			return TuneParam{}, fmt.Errorf("--param %q: upper bound: %w", s, err)
		}
		if !(p.Lo < p.Hi) {
			return TuneParam{}, fmt.Errorf("--param %q: want LO < HI", s)
		}
	}
	return p, nil
}

// TuneSpec defines a tuning run.
type TuneSpec struct {
	Version string
	Spec    *scenario.Spec
	EPP     scenario.EPP
	Fleet   string
	// Params are the tuned weights (none: every scorer of the base config,
	// bounds [0, 10]).
	Params      []TuneParam
	Objective   Objective
	Constraints []Constraint
	// Budget is the number of optimiser evaluations, the start included.
	Budget int
	// Seeds > 1 averages every evaluation over that many seeds (the run
	// seed and the next ones).
	Seeds   int
	Method  string
	Workers int
	// Progress receives one status line per evaluation (nil: none).
	Progress io.Writer
	DPI      int
}

// TuneEval is one evaluated weight vector.
type TuneEval struct {
	N       int       `json:"n"`
	Weights []float64 `json:"weights"`
	// Mean, Std (sample standard deviation), Min and Max of the objective
	// over the seeds; Values per seed.
	Mean     jsonFloat   `json:"mean"`
	Std      jsonFloat   `json:"std"`
	Min      jsonFloat   `json:"min"`
	Max      jsonFloat   `json:"max"`
	Values   []jsonFloat `json:"values"`
	Feasible bool        `json:"feasible"`
	Violated []string    `json:"violated,omitempty"`
	Error    string      `json:"error,omitempty"`
}

// TuneResult is a tuning run's outcome.
type TuneResult struct {
	Spec        SpecDoc
	Method      string
	Objective   Objective
	Constraints []Constraint
	Params      []TuneParam
	Seeds       []uint64
	Budget      int
	// Trajectory lists the distinct evaluations in order (the start is
	// number 0); Evaluations counts the optimiser's calls (repeats of a
	// weight vector are not simulated again).
	Trajectory  []*TuneEval
	Evaluations int
	Start, Best *TuneEval
	Status      string
	Wall        time.Duration
}

// Noise states the seed noise of the improvement (nil without a feasible
// start and best).
func (r *TuneResult) Noise() *Noise { return r.tuneNoise() }

// SwitchedOff lists the scorers the best weights set to 0.
func (r *TuneResult) SwitchedOff() []string { return r.tuneSwitchedOff() }

// SwitchedOffNote says which scorers the best point switches off ("" for
// none).
func SwitchedOffNote(scorers []string) string { return switchedOffNote(scorers) }

// Improvement is how much better the best evaluation is than the start
// (positive = better, in the objective's unit) and that as a fraction of
// the start's value.
func (r *TuneResult) Improvement() (abs, rel float64) {
	if r.Best == nil || r.Start == nil || !r.Start.Feasible {
		return math.NaN(), math.NaN()
	}
	abs = float64(r.Start.Mean) - float64(r.Best.Mean)
	if r.Objective.Maximize {
		abs = -abs
	}
	if s := math.Abs(float64(r.Start.Mean)); s > 0 {
		rel = abs / s
	}
	return abs, rel
}

// tuner holds a tuning run's state.
type tuner struct {
	ctx     context.Context
	ts      TuneSpec
	spec    *scenario.Spec
	base    *base
	dims    []Dim
	seeds   []uint64
	workers int
	cache   map[string]*TuneEval
	res     *TuneResult
	// pool shares the trace between evaluations (scenario.Pool).
	pool *scenario.Pool
}

// Tune optimises scorer weights with gonum/optimize (Nelder-Mead or
// CMA-ES) over the normalised box of the parameters' bounds; a proposal
// outside the box is evaluated at its projection onto it. Evaluations run
// one after another (Nelder-Mead is sequential); the seeds of one
// evaluation, and the initial simplex, run in parallel.
func Tune(ctx context.Context, ts TuneSpec) (*TuneResult, error) {
	start := time.Now()
	t, err := newTuner(ctx, ts)
	if err != nil {
		return nil, &scenario.InputError{Err: err}
	}
	t.pool = scenario.NewPool(0)
	defer t.pool.Close()
	return t.run(start)
}

// newTuner validates a tuning run.
func newTuner(ctx context.Context, ts TuneSpec) (*tuner, error) {
	if ts.Spec == nil {
		return nil, errors.New("tune: no scenario")
	}
	if ts.EPP.Source == "" && ts.EPP.YAML == nil {
		ts.EPP.Source = "default"
	}
	if ts.Method == "" {
		ts.Method = MethodNelderMead
	}
	if ts.Method != MethodNelderMead && ts.Method != MethodCMAES {
		return nil, fmt.Errorf("--method %q: want %s or %s", ts.Method, MethodNelderMead, MethodCMAES)
	}
	if ts.Objective.Metric.Path == "" {
		o, err := ParseObjective(DefaultObjective)
		if err != nil {
			return nil, err
		}
		ts.Objective = o
	}
	if ts.Seeds < 1 {
		ts.Seeds = 1
	}
	b, err := loadBase(ts.EPP)
	if err != nil {
		return nil, err
	}
	if b.builtin == "round-robin" {
		return nil, errors.New("--epp-config round-robin: the baseline has no scorer weights to tune")
	}
	if len(ts.Params) == 0 {
		for _, name := range b.scorerOrder() {
			p, err := ParseTuneParam(name + ".weight")
			if err != nil {
				return nil, err
			}
			ts.Params = append(ts.Params, p)
		}
		if len(ts.Params) == 0 {
			return nil, errors.New("--epp-config has no scorers to tune")
		}
	}
	t := &tuner{ctx: ctx, ts: ts, base: b, cache: map[string]*TuneEval{}}
	seen := map[string]bool{}
	for _, p := range ts.Params {
		if seen[p.Name] {
			return nil, fmt.Errorf("--param %s given twice", p.Name)
		}
		seen[p.Name] = true
		if err := b.check(p.dim); err != nil {
			return nil, fmt.Errorf("--param %s: %w", p.Name, err)
		}
		t.dims = append(t.dims, p.dim)
	}
	d := len(ts.Params)
	minBudget := d + 2
	if ts.Method == MethodCMAES {
		minBudget = 2
	}
	if ts.Budget < minBudget {
		return nil, fmt.Errorf("--budget %d: %s over %d weights needs at least %d evaluations", ts.Budget, ts.Method, d, minBudget)
	}
	spec := *ts.Spec
	if spec.Workload.Tokenizer == nil {
		if spec.Workload.Tokenizer, err = workload.NewTokenizer(); err != nil {
			return nil, err
		}
	}
	if b.builtin == "oracle" {
		spec.Env.KVEventLag = 0
	}
	t.spec = &spec
	for k := range ts.Seeds {
		t.seeds = append(t.seeds, spec.Env.Seed+uint64(k))
	}
	t.workers = ts.Workers
	if t.workers <= 0 {
		t.workers = runtime.GOMAXPROCS(0)
	}
	doc, err := specDoc(Sweep{Version: ts.Version, EPP: ts.EPP, Fleet: ts.Fleet}, &spec, b, 0)
	if err != nil {
		return nil, err
	}
	t.res = &TuneResult{Spec: doc, Method: ts.Method, Objective: ts.Objective, Constraints: ts.Constraints,
		Params: ts.Params, Seeds: t.seeds, Budget: ts.Budget}
	return t, nil
}

// run optimises.
func (t *tuner) run(start time.Time) (*TuneResult, error) {
	ctx, ts, b, spec := t.ctx, t.ts, t.base, t.spec
	d := len(ts.Params)
	u0 := make([]float64, d)
	for i, p := range ts.Params {
		u0[i] = clamp01((b.weights[p.dim.plugin] - p.Lo) / (p.Hi - p.Lo))
	}
	// The start and (Nelder-Mead) the initial simplex, in parallel.
	verts := [][]float64{u0}
	if ts.Method == MethodNelderMead {
		for i := range d {
			v := slices.Clone(u0)
			if v[i]+0.25 <= 1 {
				v[i] += 0.25
			} else {
				v[i] -= 0.25
			}
			verts = append(verts, v)
		}
	}
	evals, err := t.evalMany(verts)
	if err != nil {
		return nil, err
	}
	t.res.Start = evals[0]
	if t.res.Start.Error != "" {
		return nil, fmt.Errorf("tune: the start weights fail: %s", t.res.Start.Error)
	}
	settings := &optimize.Settings{Recorder: ctxRecorder{ctx}}
	f := func(u []float64) float64 {
		if ctx.Err() != nil {
			return infeasiblePenalty
		}
		e, err := t.eval(u)
		if err != nil {
			return infeasiblePenalty
		}
		t.res.Evaluations++
		return t.value(e)
	}
	var method optimize.Method
	switch ts.Method {
	case MethodNelderMead:
		vals := make([]float64, len(evals))
		for i, e := range evals {
			vals[i] = t.value(e)
		}
		method = &optimize.NelderMead{InitialVertices: verts, InitialValues: vals}
		settings.InitValues = &optimize.Location{F: vals[0]}
		settings.FuncEvaluations = ts.Budget - len(verts)
	case MethodCMAES:
		method = &optimize.CmaEsChol{InitStepSize: 0.25, Src: rand.NewPCG(spec.Env.Seed, 0xc3a35)}
		settings.FuncEvaluations = ts.Budget - 1
	}
	t.res.Evaluations = len(verts)
	res, err := optimize.Minimize(optimize.Problem{Func: f}, u0, settings, method)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("tune %w after %d evaluations", ErrInterrupted, len(t.res.Trajectory))
	}
	switch {
	case err != nil && res == nil:
		return nil, fmt.Errorf("tune: %w", err)
	case err != nil:
		t.res.Status = res.Status.String() + ": " + err.Error()
	default:
		t.res.Status = res.Status.String()
	}
	for _, e := range t.res.Trajectory {
		if e.Feasible && (t.res.Best == nil || t.ts.Objective.signed(float64(e.Mean)) < t.ts.Objective.signed(float64(t.res.Best.Mean))) {
			t.res.Best = e
		}
	}
	t.res.Wall = time.Since(start)
	return t.res, nil
}

// ctxRecorder stops the optimisation when ctx is cancelled.
type ctxRecorder struct{ ctx context.Context }

func (ctxRecorder) Init() error { return nil }
func (r ctxRecorder) Record(*optimize.Location, optimize.Operation, *optimize.Stats) error {
	return r.ctx.Err()
}

func clamp01(v float64) float64 { return math.Min(1, math.Max(0, v)) }

// weights maps a point of the normalised box (projected onto it) to
// rounded weights.
func (t *tuner) weights(u []float64) []float64 {
	w := make([]float64, len(u))
	scale := math.Pow10(weightDecimals)
	for i, p := range t.ts.Params {
		v := p.Lo + clamp01(u[i])*(p.Hi-p.Lo)
		w[i] = math.Min(p.Hi, math.Max(p.Lo, math.Round(v*scale)/scale))
	}
	return w
}

func weightKey(w []float64) string {
	parts := make([]string, len(w))
	for i, v := range w {
		parts[i] = formatNum(v)
	}
	return strings.Join(parts, ",")
}

// value is what the optimiser minimises for an evaluation.
func (t *tuner) value(e *TuneEval) float64 {
	if !e.Feasible {
		return infeasiblePenalty
	}
	return t.ts.Objective.signed(float64(e.Mean))
}

// eval evaluates one point of the box (cached by rounded weights).
func (t *tuner) eval(u []float64) (*TuneEval, error) {
	es, err := t.evalMany([][]float64{u})
	if err != nil {
		return nil, err
	}
	return es[0], nil
}

// evalMany evaluates points of the box, simulating every (new point, seed)
// pair on the workers; new evaluations join the trajectory in order.
func (t *tuner) evalMany(us [][]float64) ([]*TuneEval, error) {
	out := make([]*TuneEval, len(us))
	type job struct {
		e    *TuneEval
		seed int
	}
	var jobs []job
	var fresh []*TuneEval
	for i, u := range us {
		w := t.weights(u)
		key := weightKey(w)
		if e, ok := t.cache[key]; ok {
			out[i] = e
			continue
		}
		e := &TuneEval{Weights: w, Values: make([]jsonFloat, len(t.seeds))}
		t.cache[key] = e
		out[i] = e
		fresh = append(fresh, e)
		for k := range t.seeds {
			jobs = append(jobs, job{e, k})
		}
	}
	type result struct {
		v        float64
		violated []string
		err      error
	}
	results := make(map[*TuneEval][]result, len(fresh))
	for _, e := range fresh {
		results[e] = make([]result, len(t.seeds))
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, t.workers)
	for _, j := range jobs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			v, viol, err := t.simulate(j.e.Weights, t.seeds[j.seed])
			mu.Lock()
			results[j.e][j.seed] = result{v, viol, err}
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, e := range fresh {
		e.N = len(t.res.Trajectory)
		e.Feasible = true
		var vals []float64
		for k, r := range results[e] {
			e.Values[k] = jsonFloat(r.v)
			switch {
			case r.err != nil:
				e.Error = fmt.Sprintf("seed %d: %v", t.seeds[k], r.err)
				e.Feasible = false
			case math.IsNaN(r.v):
				e.Feasible = false
			}
			for _, v := range r.violated {
				if !slices.Contains(e.Violated, v) {
					e.Violated = append(e.Violated, v)
				}
				e.Feasible = false
			}
			vals = append(vals, r.v)
		}
		e.Mean, e.Std = jsonFloat(math.NaN()), jsonFloat(math.NaN())
		e.Min, e.Max = jsonFloat(math.NaN()), jsonFloat(math.NaN())
		if e.Error == "" {
			e.Mean = jsonFloat(stat.Mean(vals, nil))
			e.Std = 0
			if len(vals) > 1 {
				e.Std = jsonFloat(stat.StdDev(vals, nil))
			}
			e.Min, e.Max = jsonFloat(slices.Min(vals)), jsonFloat(slices.Max(vals))
		}
		t.res.Trajectory = append(t.res.Trajectory, e)
		t.progress(e)
	}
	return out, nil
}

// simulate runs the weights with one seed and returns the objective and
// the violated constraints.
func (t *tuner) simulate(w []float64, seed uint64) (v float64, violated []string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	vals := make([]string, len(w))
	for i, x := range w {
		vals[i] = formatNum(x)
	}
	_, y, err := t.base.configFor(t.dims, vals)
	if err != nil {
		return 0, nil, err
	}
	spec := *t.spec
	spec.Env.Seed, spec.Workload.Seed = seed, int64(seed)
	s, err := t.pool.Run(t.ctx, &spec, scenario.EPP{Name: "tune", YAML: y}, scenario.Hooks{})
	if err != nil {
		return 0, nil, err
	}
	raw, err := summaryJSON(s)
	if err != nil {
		return 0, nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return 0, nil, err
	}
	for _, c := range t.ts.Constraints {
		if !c.Holds(c.Metric.Value(doc)) {
			violated = append(violated, c.String())
		}
	}
	if !Measured(doc) {
		violated = append(violated, NoMeasuredRequest)
	}
	return t.ts.Objective.Metric.Value(doc), violated, nil
}

func (t *tuner) progress(e *TuneEval) {
	if t.ts.Progress == nil {
		return
	}
	best := math.NaN()
	for _, x := range t.res.Trajectory {
		if x.Feasible && (math.IsNaN(best) || t.ts.Objective.signed(float64(x.Mean)) < t.ts.Objective.signed(best)) {
			best = float64(x.Mean)
		}
	}
	fmt.Fprintf(t.ts.Progress, "\rtune: evaluation %d/%d · weights %s → %s · best %s      ",
		e.N+1, t.ts.Budget, weightKey(e.Weights), fmtValue(float64(e.Mean)), fmtValue(best))
}

// scorerOrder lists the base config's scorers in profile order.
func (b *base) scorerOrder() []string {
	var out []string
	for _, p := range b.cfg.SchedulingProfiles {
		for _, r := range p.Plugins {
			if len(b.scorerProfiles[r.PluginRef]) > 0 && !slices.Contains(out, r.PluginRef) {
				out = append(out, r.PluginRef)
			}
		}
	}
	return out
}

// WriteTune writes trajectory.csv, best.yaml, tune.json and the
// trajectory plot into dir.
func WriteTune(dir string, r *TuneResult, dpi int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	if err := writeAtomic(dir, TrajectoryFile, r.trajectoryCSV()); err != nil {
		return err
	}
	if r.Best != nil {
		y, err := r.bestYAML()
		if err != nil {
			return err
		}
		if err := writeAtomic(dir, BestFile, y); err != nil {
			return err
		}
	}
	j, err := r.json()
	if err != nil {
		return err
	}
	if err := writeAtomic(dir, TuneFile, j); err != nil {
		return err
	}
	w, h, fn := r.trajectoryPlot()
	return report.SavePlot(dir, PlotTrajectory, w, h, dpi, fn)
}

func (r *TuneResult) trajectoryCSV() []byte {
	var b bytes.Buffer
	head := []string{"n"}
	for _, p := range r.Params {
		head = append(head, p.Name)
	}
	head = append(head, "objective_mean", "objective_std", "objective_min", "objective_max", "feasible", "best_so_far", "error")
	b.WriteString(strings.Join(head, ",") + "\n")
	best := math.NaN()
	for _, e := range r.Trajectory {
		if e.Feasible && (math.IsNaN(best) || r.Objective.signed(float64(e.Mean)) < r.Objective.signed(best)) {
			best = float64(e.Mean)
		}
		row := []string{strconv.Itoa(e.N)}
		for _, w := range e.Weights {
			row = append(row, formatNum(w))
		}
		row = append(row, fmtValue(float64(e.Mean)), fmtValue(float64(e.Std)), fmtValue(float64(e.Min)), fmtValue(float64(e.Max)),
			strconv.FormatBool(e.Feasible), fmtValue(best), csvField(oneLine(e.Error)))
		b.WriteString(strings.Join(row, ",") + "\n")
	}
	return b.Bytes()
}

func (r *TuneResult) bestYAML() ([]byte, error) {
	spec := r.Spec
	spec.Dims = nil
	vals := make([]string, len(r.Params))
	for i, p := range r.Params {
		vals[i] = formatNum(r.Best.Weights[i])
		spec.Dims = append(spec.Dims, DimDoc{Name: p.Name, Values: []string{vals[i]}})
	}
	return bestConfigYAML(spec, vals, func(b *bytes.Buffer) {
		fmt.Fprintf(b, "# eppsim tune (%s): best of %d evaluations: %s = %s", r.Method, len(r.Trajectory), r.Objective.Label(), fmtValue(float64(r.Best.Mean)))
		if len(r.Seeds) > 1 {
			fmt.Fprintf(b, " (mean of %d seeds, std %s)", len(r.Seeds), fmtValue(float64(r.Best.Std)))
		}
		b.WriteString("\n")
		if abs, rel := r.Improvement(); !math.IsNaN(abs) {
			fmt.Fprintf(b, "# start (base config weights): %s; improvement %s (%.1f%%)\n", fmtValue(float64(r.Start.Mean)), fmtValue(abs), 100*rel)
		}
		if n := r.tuneNoise(); n != nil {
			fmt.Fprintf(b, "# %s\n", n.Note)
		}
		if note := switchedOffNote(r.tuneSwitchedOff()); note != "" {
			fmt.Fprintf(b, "# %s\n", note)
		}
		for i, p := range r.Params {
			fmt.Fprintf(b, "# %s = %s (start %s)\n", p.Name, vals[i], formatNum(r.Start.Weights[i]))
		}
	})
}

// tuneDoc is tune.json.
type tuneDoc struct {
	Format      string     `json:"format"`
	Spec        SpecDoc    `json:"spec"`
	Method      string     `json:"method"`
	Objective   string     `json:"objective"`
	Constraints []string   `json:"constraints,omitempty"`
	Params      []paramDoc `json:"params"`
	Seeds       []uint64   `json:"seeds"`
	Budget      int        `json:"budget"`
	Evaluations int        `json:"evaluations"`
	Simulations int        `json:"simulations"`
	Status      string     `json:"status"`
	Start       *TuneEval  `json:"start"`
	Best        *TuneEval  `json:"best"`
	Improvement struct {
		Absolute jsonFloat `json:"absolute"`
		Relative jsonFloat `json:"relative"`
		// Noise: the improvement per seed and whether it exceeds the
		// seed noise (verified only with --seeds 2 or more).
		Noise *Noise `json:"noise,omitempty"`
	} `json:"improvement"`
	// BestSwitchesOff lists the scorers the best weights set to 0.
	BestSwitchesOff []string    `json:"best_switches_off,omitempty"`
	Trajectory      []*TuneEval `json:"trajectory"`
}

type paramDoc struct {
	Name  string  `json:"name"`
	Lo    float64 `json:"lo"`
	Hi    float64 `json:"hi"`
	Start float64 `json:"start"`
}

func (r *TuneResult) json() ([]byte, error) {
	d := tuneDoc{Format: "eppsim-tune/1", Spec: r.Spec, Method: r.Method, Objective: r.Objective.String(),
		Seeds: r.Seeds, Budget: r.Budget, Evaluations: r.Evaluations, Simulations: len(r.Trajectory) * len(r.Seeds),
		Status: r.Status, Start: r.Start, Best: r.Best, Trajectory: r.Trajectory}
	for _, c := range r.Constraints {
		d.Constraints = append(d.Constraints, c.String())
	}
	for i, p := range r.Params {
		d.Params = append(d.Params, paramDoc{Name: p.Name, Lo: p.Lo, Hi: p.Hi, Start: r.Start.Weights[i]})
	}
	abs, rel := r.Improvement()
	d.Improvement.Absolute, d.Improvement.Relative = jsonFloat(abs), jsonFloat(rel)
	d.Improvement.Noise, d.BestSwitchesOff = r.tuneNoise(), r.tuneSwitchedOff()
	out, err := json.MarshalIndent(&d, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", TuneFile, err)
	}
	return append(out, '\n'), nil
}

// trajectoryPlot: every evaluation's objective (with its seed range) and
// the best so far.
func (r *TuneResult) trajectoryPlot() (vg.Length, vg.Length, func(draw.Canvas)) {
	p := newPlot("tune ("+r.Method+"): "+r.Objective.Label(), "evaluation", r.Objective.Metric.Path)
	var pts, bestPts, bad plotter.XYs
	var errs plotter.YErrors
	best := math.NaN()
	for _, e := range r.Trajectory {
		if math.IsNaN(float64(e.Mean)) {
			continue
		}
		xy := plotter.XY{X: float64(e.N), Y: float64(e.Mean)}
		if !e.Feasible {
			bad = append(bad, xy)
			continue
		}
		pts = append(pts, xy)
		errs = append(errs, struct{ Low, High float64 }{float64(e.Mean - e.Min), float64(e.Max - e.Mean)})
		if math.IsNaN(best) || r.Objective.signed(float64(e.Mean)) < r.Objective.signed(best) {
			best = float64(e.Mean)
		}
		bestPts = append(bestPts, plotter.XY{X: float64(e.N), Y: best})
	}
	if len(pts) > 0 {
		if sc, err := plotter.NewScatter(pts); err == nil {
			sc.GlyphStyle = draw.GlyphStyle{Color: pointColor, Radius: vg.Points(2.5), Shape: draw.CircleGlyph{}}
			p.Add(sc)
			p.Legend.Add("evaluation", sc)
		}
		if len(r.Seeds) > 1 {
			if eb, err := plotter.NewYErrorBars(struct {
				plotter.XYs
				plotter.YErrors
			}{pts, errs}); err == nil {
				eb.LineStyle.Color = pointColor
				p.Add(eb)
				p.Legend.Add(fmt.Sprintf("bars: min–max over %d seeds", len(r.Seeds)))
			}
		}
		if ln, err := plotter.NewLine(bestPts); err == nil {
			ln.StepStyle = plotter.PostStep
			ln.LineStyle = draw.LineStyle{Color: frontColor, Width: vg.Points(1.8)}
			p.Add(ln)
			p.Legend.Add("best so far", ln)
		}
	}
	if len(bad) > 0 {
		if sc, err := plotter.NewScatter(bad); err == nil {
			sc.GlyphStyle = draw.GlyphStyle{Color: infeasibleTint, Radius: vg.Points(3), Shape: draw.CrossGlyph{}}
			p.Add(sc)
			p.Legend.Add("infeasible", sc)
		}
	}
	p.Legend.Top = true
	pad(p)
	p.X.Tick.Marker = IntegerTicks{}
	return inches(7), inches(4.2), func(c draw.Canvas) { p.Draw(c) }
}
