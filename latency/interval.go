package latency

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/eppsim/eppsim/replica"
)

// IntervalLevel is the share of out-of-sample errors a latency interval
// is built to bound (docs/latency.md, "Intervals").
const IntervalLevel = 0.90

// NearKnee is the utilization at which a run counts as near its knee
// when its steps are as slow as the interval allows: its utilization
// (Result.Utilization) times the slow end of the ITL interval reaches
// it. Such a run's intervals also take the simulations at both ends of
// the step-time uncertainty, since near the knee a few per cent of step
// time move TTFT by orders of magnitude.
const NearKnee = 0.9

// Factors computes, per metric, the interval factors of the whole-run rows
// keep selects: the (1−IntervalLevel)/2 and (1+IntervalLevel)/2 quantiles
// of measured ÷ predicted (linear interpolation between order
// statistics). Metrics with fewer than 5 errors get none.
func Factors(rows []Row, keep func(id string) bool) map[string]replica.Interval {
	by := map[string][]float64{}
	for _, r := range rows {
		if r.Scope != "summary" || math.IsNaN(r.Actual) || !(r.Predicted > 0) || (keep != nil && !keep(r.Experiment)) {
			continue
		}
		by[r.Metric] = append(by[r.Metric], r.Actual/r.Predicted)
	}
	out := map[string]replica.Interval{}
	for m, v := range by {
		if len(v) < 5 {
			continue
		}
		slices.Sort(v)
		out[m] = replica.Interval{Low: quantile(v, (1-IntervalLevel)/2), High: quantile(v, (1+IntervalLevel)/2), Runs: len(v)}
	}
	return out
}

// quantile is the q-quantile of sorted v with linear interpolation
// between the closest ranks (numpy's default).
func quantile(v []float64, q float64) float64 {
	r := q * float64(len(v)-1)
	lo := int(math.Floor(r))
	if lo >= len(v)-1 {
		return v[len(v)-1]
	}
	return v[lo] + (r-float64(lo))*(v[lo+1]-v[lo])
}

// Bounds is a prediction's interval.
type Bounds struct{ Low, High float64 }

// Contains reports whether x is inside b.
func (b Bounds) Contains(x float64) bool { return x >= b.Low && x <= b.High }

// Coverage is how many measured values fell inside their predicted
// intervals, whole runs, every metric.
type Coverage struct {
	Label         string
	Inside, Total int
	// ByMetric counts inside and total per metric.
	ByMetric map[string][2]int
	// NearKnee counts the runs whose intervals took the knee
	// simulations.
	NearKnee int
}

// Share is Inside/Total (NaN when nothing was checked).
func (c Coverage) Share() float64 {
	if c.Total == 0 {
		return math.NaN()
	}
	return float64(c.Inside) / float64(c.Total)
}

// intervalCase is one run's prediction whose intervals coverage checks:
// the coefficients and step offsets that predicted it (for the knee
// simulations).
type intervalCase struct {
	res *Result
	co  replica.Coefficients
	off []replica.StepOffset
	// fullBatch is the full-batch factor of the run's knee simulations
	// (FullBatchError; 0: none): their slow end is at least this.
	fullBatch float64
}

// coverage builds every case's intervals — factorsOf's factors for its
// run and, near the knee, the simulations with steps scaled to both ends
// of the ITL interval — and counts the measured values inside. Runs
// measured overloaded get none (their TTFT is in minutes, and no fit saw
// them). It also returns each case's intervals by run id and metric.
func coverage(ctx context.Context, label string, cases []intervalCase, factorsOf func(*Experiment) map[string]replica.Interval, c replica.Calibration, o Options, workers int) (Coverage, map[string]map[string]Bounds, error) {
	cov := Coverage{Label: label, ByMetric: map[string][2]int{}}
	bounds := map[string]map[string]Bounds{}
	for _, k := range cases {
		e := k.res.Experiment
		f := factorsOf(e)
		if e.Overloaded() || len(f) == 0 {
			continue
		}
		b, near, err := runBounds(ctx, k, f, c, o, workers)
		if err != nil {
			return Coverage{}, nil, err
		}
		bounds[e.ID] = b
		if e.HasMeasurement() {
			if near {
				cov.NearKnee++
			}
			cov.count(e, b)
		}
	}
	return cov, bounds, nil
}

// otherModels returns the factors of the pool's errors on the runs of
// other models than a run's (conformal, leave one model out: no run's
// interval is widened by its own error); modelOf names the runs' models
// (a run it does not name counts as another model's).
func otherModels(pool []Row, modelOf map[string]string) func(*Experiment) map[string]replica.Interval {
	return func(e *Experiment) map[string]replica.Interval {
		return Factors(pool, func(id string) bool {
			m, ok := modelOf[id]
			return !ok || m != e.Model
		})
	}
}

// roundInterval rounds factors to 4 decimals for a calibration file.
func roundInterval(iv replica.Interval) replica.Interval {
	return replica.Interval{Low: round(iv.Low, 4), High: round(iv.High, 4), Runs: iv.Runs}
}

// count adds run e's measured whole-run values, inside b or not.
func (cov *Coverage) count(e *Experiment, b map[string]Bounds) {
	a := e.MeasuredValues("summary")
	for _, m := range Metrics {
		bb, ok := b[m]
		av, measured := a[m]
		if !ok || !measured {
			continue
		}
		in := cov.ByMetric[m]
		in[1]++
		cov.Total++
		if bb.Contains(av) {
			in[0]++
			cov.Inside++
		}
		cov.ByMetric[m] = in
	}
}

// runBounds is one prediction's intervals per metric (whole run): p·Low
// to p·High of the factors, widened near the knee to the predictions of
// the run simulated with every step Low and High times the ITL factors,
// High raised to the case's full-batch factor when that is larger (as
// replica.Calibration.SlowEnd raises it for eppsim run).
func runBounds(ctx context.Context, k intervalCase, f map[string]replica.Interval, c replica.Calibration, o Options, workers int) (map[string]Bounds, bool, error) {
	p := k.res.Predicted["summary"]
	out := map[string]Bounds{}
	for _, m := range Metrics {
		iv, ok := f[m]
		v, has := p[m]
		if !ok || !has {
			continue
		}
		out[m] = Bounds{Low: v * iv.Low, High: v * iv.High}
	}
	itl, ok := f["itl_mean"]
	slow := max(itl.High, k.fullBatch)
	if !ok || !(k.res.Utilization*slow >= NearKnee) {
		return out, false, nil
	}
	fc := c
	fc.Coefficients, fc.Offsets = k.co, k.off
	ends := make([]Values, 2)
	for i, scale := range []float64{itl.Low, slow} {
		so := o
		so.StepScale = scale
		rs, err := SimulateAll(ctx, []*Experiment{k.res.Experiment}, fc, so, workers)
		if err != nil {
			return nil, false, fmt.Errorf("knee interval: %w", err)
		}
		ends[i] = rs[0].Predicted["summary"]
	}
	for m, b := range out {
		if v, ok := ends[0][m]; ok {
			b.Low = min(b.Low, v)
		}
		if v, ok := ends[1][m]; ok {
			b.High = max(b.High, v)
		}
		out[m] = b
	}
	return out, true, nil
}
