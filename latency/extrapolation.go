package latency

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"

	"github.com/eppsim/eppsim/replica"
)

// placementOf is run e's placement as a calibration's intervals see it:
// its model, its TP size and its GPU's catalogue name, as the protocols
// "model", "tp" and "gpu" group runs.
func placementOf(e *Experiment) replica.Placement {
	if p, err := e.enginePreset(); err == nil {
		return replica.PlacementOf(&p)
	}
	return replica.Placement{Model: e.Model, TP: e.TP, GPU: gpuOf(e)}
}

// Extrapolations records a calibration's reach (replica.Extrapolation):
// along each axis, the values the fitted runs take and, when heldOut has
// the rows of that axis's protocol (by protocol name), the interval
// factors of its held-out errors.
func Extrapolations(fitted []*Experiment, heldOut map[string][]Row) map[string]replica.Extrapolation {
	if len(fitted) == 0 {
		return nil
	}
	out := map[string]replica.Extrapolation{}
	for _, ax := range replica.ExtrapolationAxes {
		var seen []string
		for _, e := range fitted {
			if v := placementOf(e).AxisValue(ax.Key); !slices.Contains(seen, v) {
				seen = append(seen, v)
			}
		}
		slices.SortFunc(seen, numberFirst)
		x := replica.Extrapolation{Seen: seen}
		if rows, ok := heldOut[ax.Key]; ok {
			for m, iv := range Factors(rows, nil) {
				if x.Intervals == nil {
					x.Intervals = map[string]replica.Interval{}
				}
				x.Intervals[m] = roundInterval(iv)
			}
		}
		out[ax.Key] = x
	}
	return out
}

// numberFirst orders decimal numbers by value, before other strings,
// which sort as strings.
func numberFirst(a, b string) int {
	x, errA := strconv.Atoi(a)
	y, errB := strconv.Atoi(b)
	switch {
	case errA == nil && errB == nil:
		return cmp.Compare(x, y)
	case errA == nil:
		return -1
	case errB == nil:
		return 1
	}
	return cmp.Compare(a, b)
}

// ExtrapolationsOf is Extrapolations with the held-out rows of the
// protocols oos predicted (OutOfSample: a calibration file's folds).
func ExtrapolationsOf(fitted []*Experiment, oos []ProtocolRows) map[string]replica.Extrapolation {
	heldOut := map[string][]Row{}
	for _, pr := range oos {
		heldOut[pr.Protocol.Name] = pr.Rows
	}
	return Extrapolations(fitted, heldOut)
}

// SeenModelsOf is a calibration's fitted models and the interval factors
// of another load of a fitted deployment (replica.SeenModels): the
// held-out rows of the leave-the-highest-load-out protocol among oos
// (Factors; none when oos has no such rows). All of them, though one of
// the shipped file's eight (Mistral-Nemo at TP 1) had no fold offset: the
// seven that had one cannot carry 5% and 95% quantiles, and the one
// without makes the factors wider, not narrower (docs/latency.md,
// "Intervals").
func SeenModelsOf(fitted []*Experiment, oos []ProtocolRows) *replica.SeenModels {
	for _, pr := range oos {
		if pr.Protocol.Name == "load" {
			return seenModels(fitted, pr.Rows)
		}
	}
	return seenModels(fitted, nil)
}

// offsetRuns are the ids of pr's held-out runs whose fold had a step
// offset for their deployment (ProtocolRows.Offsets).
func offsetRuns(pr ProtocolRows) map[string]bool {
	out := map[string]bool{}
	for i, r := range pr.Results {
		if i < len(pr.Offsets) && len(pr.Offsets[i]) > 0 {
			if d, err := deploymentOf(r.Experiment); err == nil && replica.HasOffset(pr.Offsets[i], d) {
				out[r.Experiment.ID] = true
			}
		}
	}
	return out
}

// seenModels is SeenModelsOf of the load protocol's rows; nil without
// fitted runs.
func seenModels(fitted []*Experiment, loadRows []Row) *replica.SeenModels {
	if len(fitted) == 0 {
		return nil
	}
	s := &replica.SeenModels{}
	for _, e := range fitted {
		if !slices.Contains(s.Models, e.Model) {
			s.Models = append(s.Models, e.Model)
		}
	}
	slices.Sort(s.Models)
	for m, iv := range Factors(loadRows, nil) {
		if s.Intervals == nil {
			s.Intervals = map[string]replica.Interval{}
		}
		s.Intervals[m] = roundInterval(iv)
	}
	return s
}

// IntervalsOf is a calibration's own intervals (replica.Calibration.Intervals)
// from the held-out rows of the leave-one-model-out protocol among oos,
// the fitted runs naming each run's model (Factors); nil when
// oos has no such rows or they give no factors (calibrate --continue
// then keeps the file's).
func IntervalsOf(fitted []*Experiment, oos []ProtocolRows) map[string]replica.Interval {
	for _, pr := range oos {
		if pr.Protocol.Name == "model" {
			return modelOutIntervals(pr.Rows, fitted)
		}
	}
	return nil
}

// modelOutIntervals is IntervalsOf of the leave-one-model-out rows; nil
// when they give no factors (fewer than 5 runs).
func modelOutIntervals(rows []Row, fitted []*Experiment) map[string]replica.Interval {
	var out map[string]replica.Interval
	for m, iv := range Factors(rows, nil) {
		if out == nil {
			out = map[string]replica.Interval{}
		}
		out[m] = roundInterval(iv)
	}
	return out
}

// ExtrapolationNotes says, per run of rs beyond what c was fitted on,
// what its intervals rest on (replica.Calibration.IntervalsFor), as
// "id: note".
func ExtrapolationNotes(c replica.Calibration, rs []*Result) []string {
	var out []string
	for _, r := range rs {
		_, _, notes := c.IntervalsFor(placementOf(r.Experiment))
		for _, n := range notes {
			out = append(out, fmt.Sprintf("%s: %s", r.Experiment.ID, n))
		}
	}
	return out
}
