package latency

import (
	"fmt"
	"math"
	"slices"
)

// DecodeRise is how much a run's decode time per output token rises from
// its first load stage to its last (itl_mean of the last stage ÷ that of
// the first), measured and predicted: the issue of decode slowing under
// load as measured, run by run (docs/latency.md, "The knee").
type DecodeRise struct {
	ID                  string
	Measured, Predicted float64
}

// Error is the relative error of the predicted rise, predicted ÷
// measured − 1 (positive: the prediction rises more steeply).
func (d DecodeRise) Error() float64 { return d.Predicted/d.Measured - 1 }

// DecodeRises returns the rises of results' runs that have two or more
// load stages, a measurement and a prediction of each, and were not
// measured overloaded, in their order.
func DecodeRises(results []*Result) []DecodeRise {
	var out []DecodeRise
	for _, r := range results {
		e := r.Experiment
		n := len(e.Workload.Stages)
		if n < 2 || !e.HasMeasurement() || e.Overloaded() {
			continue
		}
		first, last := "stage_0", fmt.Sprintf("stage_%d", n-1)
		a0, ok0 := e.MeasuredValues(first)["itl_mean"]
		a1, ok1 := e.MeasuredValues(last)["itl_mean"]
		p0, p1 := r.Predicted[first]["itl_mean"], r.Predicted[last]["itl_mean"]
		if !ok0 || !ok1 || !(a0 > 0) || !(a1 > 0) || !(p0 > 0) || !(p1 > 0) {
			continue
		}
		out = append(out, DecodeRise{ID: e.ID, Measured: a1 / a0, Predicted: p1 / p0})
	}
	return out
}

// RiseErrors summarises rises: the mean and the median of |Error| (%) and
// the largest by magnitude; NaN without rises.
func RiseErrors(rs []DecodeRise) (meanAbs, medianAbs float64, worst DecodeRise) {
	if len(rs) == 0 {
		return math.NaN(), math.NaN(), DecodeRise{}
	}
	abs := make([]float64, len(rs))
	worst = rs[0]
	for i, d := range rs {
		abs[i] = 100 * math.Abs(d.Error())
		if math.Abs(d.Error()) > math.Abs(worst.Error()) {
			worst = d
		}
	}
	slices.Sort(abs)
	return mean(abs), percentile(abs, 50), worst
}
