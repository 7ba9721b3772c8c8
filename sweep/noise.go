package sweep

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/eppsim/eppsim/report"
)

// Seed noise. A sweep point or a tuning evaluation is one simulation per
// seed; a different seed changes the workload's synthesized parts and
// the EPP's random tie-breaks, so part of any difference between two
// configurations is noise. Sweeps and tuning say how much of an
// improvement survives it: with several seeds, the improvement is taken
// per seed (paired: the same seed on both sides) and counts as verified
// when its mean exceeds the noise band 2·sd/√n of those per-seed
// differences (the band eppsim diff uses); with one seed it is reported
// as unverified.

// Noise is the seed-noise statement of a sweep's or tuning run's
// improvement (sweep.json "noise", tune.json "improvement").
type Noise struct {
	// Seeds is the number of seeds each compared configuration ran.
	Seeds int `json:"seeds"`
	// Against names what the best is compared with.
	Against string `json:"against,omitempty"`
	// PerSeed are the improvements (positive = better, in the objective's
	// unit), one per seed; Mean, Std (sample standard deviation), Min and
	// Max summarise them, Band is 2·Std/√Seeds.
	PerSeed []jsonFloat `json:"per_seed,omitempty"`
	Mean    jsonFloat   `json:"mean"`
	Std     jsonFloat   `json:"std"`
	Min     jsonFloat   `json:"min"`
	Max     jsonFloat   `json:"max"`
	Band    jsonFloat   `json:"noise_band"`
	// Verified is true when Seeds > 1 and Mean > Band.
	Verified bool `json:"verified"`
	// Note says it in words.
	Note string `json:"note"`
}

// pairedNoise summarises per-seed improvements d (positive = better, in
// unit); hint says how to measure the noise when there is one seed.
func pairedNoise(d []float64, against, unit, hint string) *Noise {
	n := &Noise{Seeds: len(d), Against: against}
	if len(d) == 0 {
		return nil
	}
	var sum float64
	mn, mx := math.Inf(1), math.Inf(-1)
	for _, v := range d {
		n.PerSeed = append(n.PerSeed, jsonFloat(v))
		sum += v
		mn, mx = math.Min(mn, v), math.Max(mx, v)
	}
	mean := sum / float64(len(d))
	var ss float64
	for _, v := range d {
		ss += (v - mean) * (v - mean)
	}
	std := math.NaN()
	if len(d) > 1 {
		std = math.Sqrt(ss / float64(len(d)-1))
	}
	n.Mean, n.Std, n.Min, n.Max = jsonFloat(mean), jsonFloat(std), jsonFloat(mn), jsonFloat(mx)
	n.Band = jsonFloat(math.NaN())
	if len(d) == 1 {
		n.Note = fmt.Sprintf("improvement over %s: %s %s on one seed; unverified against seed noise: %s",
			against, fmtShortNum(mean), unit, hint)
		return n
	}
	band := 2 * std / math.Sqrt(float64(len(d)))
	n.Band = jsonFloat(band)
	n.Verified = mean > band
	verdict := "beyond the seed noise band 2·sd/√n = " + fmtShortNum(band) + ": verified"
	if !n.Verified {
		verdict = "within the seed noise band 2·sd/√n = " + fmtShortNum(band) + ": not distinguishable from seed noise"
	}
	n.Note = fmt.Sprintf("improvement over %s, paired by seed over %d seeds: %s ± %s %s (sd; per seed %s to %s), %s",
		against, len(d), fmtShortNum(mean), fmtShortNum(std), unit, fmtShortNum(mn), fmtShortNum(mx), verdict)
	return n
}

// fmtShortNum formats with up to 4 significant digits.
func fmtShortNum(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }

// switchedOff lists the scorers that values (aligned with dims) set to
// weight 0: a best point that switches a scorer off says so.
func switchedOff(dims []DimDoc, values []string) []string {
	var out []string
	for i, d := range dims {
		if p, ok := strings.CutSuffix(d.Name, ".weight"); ok && i < len(values) {
			if v, err := parseNumber(values[i]); err == nil && v == 0 {
				out = append(out, p)
			}
		}
	}
	return out
}

// switchedOffNote is the sentence for switchedOff's list ("" for none).
func switchedOffNote(scorers []string) string {
	if len(scorers) == 0 {
		return ""
	}
	return "the best point switches off " + strings.Join(scorers, ", ") + " (weight 0): it routes without that scorer"
}

// tieNote says which feasible points share the best point's first
// objective exactly (a one-seed sweep): the best is then not better than
// they are, only first by the tie-break (the other objectives, then the
// lowest index).
func (r *Results) tieNote(unit string) string {
	o := r.Objectives[0]
	var tied []string
	for i := range r.Points {
		p := &r.Points[i]
		if p.Feasible && p.Index != r.Best.Index && o.signed(p.Objectives[0]) == o.signed(r.Best.Objectives[0]) {
			tied = append(tied, strconv.Itoa(p.Index))
		}
	}
	points, verb := "point ", "reaches"
	if len(tied) > 1 {
		points, verb = "points ", "reach"
	}
	breaker := "the lowest index"
	if len(r.Objectives) > 1 {
		breaker = "the other objectives, then the lowest index"
	}
	return fmt.Sprintf("no improvement: %s%s %s the same %s (%s %s) on one seed; the best is first among them by %s",
		points, strings.Join(tied, ", "), verb, o.Metric.Path, fmtShortNum(r.Best.Objectives[0]), unit, breaker)
}

// sweepNoise states the seed noise of a sweep's best point. Without a
// seed dimension every point ran one seed: the best point's margin over
// the next best feasible point is unverified. With one, points are
// grouped into settings (the values of the other dimensions); the best
// setting is the one with the best mean first objective over the seeds
// (feasible on every seed), compared seed by seed with the next best
// setting.
func (r *Results) sweepNoise() *Noise {
	if r.Best == nil || len(r.Objectives) == 0 {
		return nil
	}
	o := r.Objectives[0]
	unit := report.MetricUnit(o.Metric.Path)
	seedDim := slices.IndexFunc(r.Spec.Dims, func(d DimDoc) bool { return d.Name == "seed" })
	if seedDim < 0 {
		var next *PointResult
		for i := range r.Points {
			p := &r.Points[i]
			if p.Feasible && p.Index != r.Best.Index && (next == nil || r.better(p, next)) {
				next = p
			}
		}
		if next == nil {
			return &Noise{Seeds: 1, Mean: jsonFloat(math.NaN()), Std: jsonFloat(math.NaN()), Min: jsonFloat(math.NaN()),
				Max: jsonFloat(math.NaN()), Band: jsonFloat(math.NaN()),
				Note: "one feasible point: nothing to compare; every point ran one seed"}
		}
		d := o.signed(next.Objectives[0]) - o.signed(r.Best.Objectives[0])
		n := pairedNoise([]float64{d}, "the next best point ("+strconv.Itoa(next.Index)+")", unit,
			"every point ran one seed; add --vary seed=1,2,3 to measure it")
		if d == 0 {
			n.Note = r.tieNote(unit)
		}
		return n
	}
	// Group by setting: the values without the seed.
	type setting struct {
		key    string
		values []string
		bySeed map[string]float64 // seed -> signed objective
		ok     bool               // feasible on every seed
	}
	var order []*setting
	byKey := map[string]*setting{}
	for i := range r.Points {
		p := &r.Points[i]
		vals := slices.Delete(slices.Clone(p.Values), seedDim, seedDim+1)
		key := strings.Join(vals, "\x00")
		s := byKey[key]
		if s == nil {
			s = &setting{key: key, values: vals, bySeed: map[string]float64{}, ok: true}
			byKey[key] = s
			order = append(order, s)
		}
		if !p.Feasible {
			s.ok = false
			continue
		}
		s.bySeed[p.Values[seedDim]] = o.signed(p.Objectives[0])
	}
	seeds := r.Spec.Dims[seedDim].Values
	mean := func(s *setting) float64 {
		var sum float64
		for _, v := range s.bySeed {
			sum += v
		}
		return sum / float64(len(s.bySeed))
	}
	var best, next *setting
	for _, s := range order {
		if !s.ok || len(s.bySeed) != len(seeds) {
			continue
		}
		switch {
		case best == nil || mean(s) < mean(best):
			best, next = s, best
		case next == nil || mean(s) < mean(next):
			next = s
		}
	}
	if best == nil || next == nil {
		return &Noise{Seeds: len(seeds), Mean: jsonFloat(math.NaN()), Std: jsonFloat(math.NaN()), Min: jsonFloat(math.NaN()),
			Max: jsonFloat(math.NaN()), Band: jsonFloat(math.NaN()),
			Note: "fewer than two settings are feasible on every seed: nothing to compare"}
	}
	var d []float64
	for _, sd := range seeds {
		d = append(d, next.bySeed[sd]-best.bySeed[sd])
	}
	dims := slices.Delete(slices.Clone(r.Spec.Dims), seedDim, seedDim+1)
	describe := func(vals []string) string {
		var parts []string
		for i, dd := range dims {
			parts = append(parts, dd.Name+"="+vals[i])
		}
		return strings.Join(parts, " ")
	}
	n := pairedNoise(d, "the next best setting ("+describe(next.values)+")", unit, "")
	n.Note = "best setting over " + strconv.Itoa(len(seeds)) + " seeds: " + describe(best.values) + "; " + n.Note
	return n
}

// tuneNoise states the seed noise of a tuning run's improvement: per seed,
// the start's objective minus the best's (sign-adjusted: positive =
// better).
func (r *TuneResult) tuneNoise() *Noise {
	if r.Best == nil || r.Start == nil || !r.Start.Feasible || len(r.Start.Values) != len(r.Best.Values) {
		return nil
	}
	var d []float64
	for k := range r.Best.Values {
		d = append(d, r.Objective.signed(float64(r.Start.Values[k]))-r.Objective.signed(float64(r.Best.Values[k])))
	}
	return pairedNoise(d, "the start (base config weights)", report.MetricUnit(r.Objective.Metric.Path),
		"every evaluation ran one seed (--seeds 1); rerun with --seeds 3 or more to measure it")
}

// tuneSwitchedOff lists the scorers the best weights set to 0.
func (r *TuneResult) tuneSwitchedOff() []string {
	if r.Best == nil {
		return nil
	}
	var dims []DimDoc
	var vals []string
	for i, p := range r.Params {
		dims = append(dims, DimDoc{Name: p.Name})
		vals = append(vals, formatNum(r.Best.Weights[i]))
	}
	return switchedOff(dims, vals)
}
