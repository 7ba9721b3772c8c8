package workload

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
)

// LogNormal is a lognormal distribution given by its median and the standard
// deviation of its logarithm, optionally clamped to [Min, Max] (Max 0 means
// unbounded). Units are the caller's (ns for times, tokens for lengths).
type LogNormal struct {
	Median float64
	Sigma  float64
	Min    float64
	Max    float64
}

func (d LogNormal) validate() error {
	switch {
	case !(d.Median > 0) || math.IsInf(d.Median, 0):
		return fmt.Errorf("median %g: must be > 0", d.Median)
	case !(d.Sigma >= 0) || d.Sigma > 10:
		return fmt.Errorf("sigma %g: must be in [0, 10]", d.Sigma)
	case d.Min < 0 || d.Max < 0:
		return fmt.Errorf("min/max must be >= 0")
	case d.Max > 0 && d.Max < d.Min:
		return fmt.Errorf("max %g below min %g", d.Max, d.Min)
	}
	return nil
}

// Sample draws one value.
func (d LogNormal) Sample(r *rand.Rand) float64 {
	return d.clamp(d.Median * math.Exp(d.Sigma*r.NormFloat64()))
}

// Quantile returns the p-quantile (0 < p < 1), clamped like Sample.
func (d LogNormal) Quantile(p float64) float64 {
	z := math.Sqrt2 * math.Erfinv(2*p-1)
	return d.clamp(d.Median * math.Exp(d.Sigma*z))
}

func (d LogNormal) clamp(v float64) float64 {
	if v < d.Min {
		v = d.Min
	}
	if d.Max > 0 && v > d.Max {
		v = d.Max
	}
	return v
}

// expSample draws an exponential variate with the given mean.
func expSample(r *rand.Rand, mean float64) float64 { return r.ExpFloat64() * mean }

// gammaSample draws Gamma(shape, scale) by Marsaglia and Tsang (2000).
func gammaSample(r *rand.Rand, shape, scale float64) float64 {
	if shape < 1 {
		// Gamma(a) = Gamma(a+1) * U^(1/a).
		u := r.Float64()
		for u == 0 {
			u = r.Float64()
		}
		return gammaSample(r, shape+1, scale) * math.Pow(u, 1/shape)
	}
	d := shape - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := r.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := r.Float64()
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v * scale
		}
	}
}

// interarrival draws session interarrival gaps: Poisson (cv = 1, or cv 0
// meaning 1) or gamma with the given coefficient of variation.
type interarrival struct {
	mean float64 // ns
	cv   float64
}

func (g interarrival) next(r *rand.Rand) float64 {
	if g.cv == 0 || g.cv == 1 {
		return expSample(r, g.mean)
	}
	shape := 1 / (g.cv * g.cv)
	return gammaSample(r, shape, g.mean/shape)
}

// discrete samples indices 0..n-1 with the given weights.
type discrete struct{ cum []float64 }

func newDiscrete(weights []float64) discrete {
	cum := make([]float64, len(weights))
	var s float64
	for i, w := range weights {
		s += w
		cum[i] = s
	}
	for i := range cum {
		cum[i] /= s
	}
	return discrete{cum: cum}
}

// zipfWeights returns 1/(i+1)^s for i < n (s = 0 is uniform).
func zipfWeights(n int, s float64) []float64 {
	w := make([]float64, n)
	for i := range w {
		w[i] = math.Pow(float64(i+1), -s)
	}
	return w
}

func (d discrete) sample(r *rand.Rand) int {
	u := r.Float64()
	i := sort.SearchFloat64s(d.cum, u)
	if i >= len(d.cum) {
		i = len(d.cum) - 1
	}
	return i
}
