package latency

import (
	"context"
	"math"
	"slices"
	"sync"

	"github.com/eppsim/eppsim/replica"
)

// Row is one line of latency.csv: a metric of a run's scope, predicted
// and (when measured) actual, with the absolute percentage error.
type Row struct {
	Experiment string
	Scope      string
	Metric     string
	Predicted  float64
	// Actual and APE are NaN when the run has no measurement of the
	// metric.
	Actual, APE float64
}

// Rows lists every run's metrics by scope in Metrics order.
func Rows(results []*Result) []Row {
	var out []Row
	for _, r := range results {
		e := r.Experiment
		for _, scope := range e.Scopes() {
			p := r.Predicted[scope]
			if p == nil {
				continue
			}
			a := e.MeasuredValues(scope)
			for _, m := range Metrics {
				row := Row{Experiment: e.ID, Scope: scope, Metric: m, Predicted: p[m], Actual: math.NaN(), APE: math.NaN()}
				if v, ok := a[m]; ok {
					row.Actual = v
					row.APE = ape(p[m], v)
				}
				out = append(out, row)
			}
		}
	}
	return out
}

// ape is |predicted − actual| / actual in percent, as the published
// comparisons compute it (../shared/latency/README.md).
func ape(pred, actual float64) float64 {
	return math.Abs(pred-actual) / actual * 100
}

// MAPE is the mean APE of metric over the summary (whole-run) rows of the
// runs keep selects (nil: all), and the number of runs it averages.
func MAPE(rows []Row, metric string, keep func(id string) bool) (float64, int) {
	v := wholeRunAPEs(rows, metric, keep)
	if len(v) == 0 {
		return math.NaN(), 0
	}
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v)), len(v)
}

// MedianAPE is the median APE of metric over the summary rows of the
// runs keep selects (nil: all), and the number of runs: unlike the MAPE it
// is not carried by one run on the wrong side of its knee.
func MedianAPE(rows []Row, metric string, keep func(id string) bool) (float64, int) {
	v := wholeRunAPEs(rows, metric, keep)
	if len(v) == 0 {
		return math.NaN(), 0
	}
	slices.Sort(v)
	return percentile(v, 50), len(v)
}

// wholeRunAPEs are the APEs of metric over the summary rows of the runs
// keep selects (nil: all), where measured.
func wholeRunAPEs(rows []Row, metric string, keep func(id string) bool) []float64 {
	var v []float64
	for _, r := range rows {
		if r.Scope == "summary" && r.Metric == metric && !math.IsNaN(r.APE) && (keep == nil || keep(r.Experiment)) {
			v = append(v, r.APE)
		}
	}
	return v
}

// SimulateAll predicts every experiment with calibration c, workers at a
// time, and returns the results in the experiments' order. A run near its
// knee (nearKnee) is simulated o.draws() times, seeds o.Seed, o.Seed+1, …,
// and predicted by each metric's median over the draws (KneeDraws). The
// first error (in that order) is returned once every started simulation
// ends.
func SimulateAll(ctx context.Context, exps []*Experiment, c replica.Calibration, o Options, workers int) ([]*Result, error) {
	type job struct {
		run  int
		seed uint64
	}
	runJobs := func(jobs []job) ([]*Result, error) {
		res := make([]*Result, len(jobs))
		errs := make([]error, len(jobs))
		ch := make(chan int)
		var wg sync.WaitGroup
		for range max(1, min(workers, len(jobs))) {
			wg.Go(func() {
				for i := range ch {
					so := o
					so.Seed = jobs[i].seed
					res[i], errs[i] = Simulate(ctx, exps[jobs[i].run], c, so)
				}
			})
		}
		for i := range jobs {
			if ctx.Err() != nil {
				break
			}
			ch <- i
		}
		close(ch)
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return nil, err
			}
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return res, nil
	}
	first := make([]job, len(exps))
	for i := range exps {
		first[i] = job{run: i, seed: o.Seed}
	}
	res, err := runJobs(first)
	if err != nil {
		return nil, err
	}
	var more []job
	for i, r := range res {
		if nearKnee(r) {
			for d := 1; d < o.draws(); d++ {
				more = append(more, job{run: i, seed: o.Seed + uint64(d)})
			}
		}
	}
	if len(more) == 0 {
		return res, nil
	}
	extra, err := runJobs(more)
	if err != nil {
		return nil, err
	}
	draws := map[int][]*Result{}
	for i, j := range more {
		draws[j.run] = append(draws[j.run], extra[i])
	}
	for i, ds := range draws {
		res[i] = medianOfDraws(append([]*Result{res[i]}, ds...))
	}
	return res, nil
}

// DrawsUtilization is the utilization (Result.Utilization) from which a
// run counts as near its knee for KneeDraws. It depends on the simulated
// run alone, not on a calibration's intervals, so that calibrate, which
// computes its figures before it has intervals, and validate latency
// predict the same runs the same way. It is a round figure below 0.77,
// the lowest utilization the intervals' rule (NearKnee) takes for near the
// knee with the ITL factor of the calibration it was chosen with (0.9 / 1.165,
// default@25c075af; 0.9 / 1.103 = 0.82 with default@1d0c9cee, 0.9 / 1.089 = 0.83
// with default@020cab2a), so that the
// draws cover every run whose intervals take the knee simulations.
const DrawsUtilization = 0.75

// nearKnee reports whether r's run is near its knee for the draws: its
// busiest engine's utilization reaches DrawsUtilization.
func nearKnee(r *Result) bool {
	return r.Utilization >= DrawsUtilization
}

// medianOfDraws combines simulations of one run with different arrival
// draws: each scope's metrics are their medians over the draws that
// completed requests in it; the request counts, engines and knee are the
// first draw's.
func medianOfDraws(ds []*Result) *Result {
	out := *ds[0]
	out.Predicted = map[string]Values{}
	for scope := range ds[0].Predicted {
		v := Values{}
		for _, m := range Metrics {
			var xs []float64
			for _, d := range ds {
				if x, ok := d.Predicted[scope][m]; ok {
					xs = append(xs, x)
				}
			}
			if len(xs) > 0 {
				slices.Sort(xs)
				v[m] = percentile(xs, 50)
			}
		}
		out.Predicted[scope] = v
	}
	return &out
}
