package latency

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"

	"github.com/eppsim/eppsim/replica"
)

// placementOf is run e's placement on a calibration's extrapolation
// axes: its TP size and its GPU's catalogue name, as the protocols "tp"
// and "gpu" group runs.
func placementOf(e *Experiment) replica.Placement {
	return replica.Placement{TP: e.TP, GPU: gpuOf(e)}
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
				x.Intervals[m] = replica.Interval{Low: round(iv.Low, 4), High: round(iv.High, 4), Runs: iv.Runs}
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

// ExtrapolationNotes says, per run of rs beyond what c was fitted on,
// what its intervals rest on (replica.Calibration.IntervalsFor), as
// "id: note".
func ExtrapolationNotes(c replica.Calibration, rs []*Result) []string {
	var out []string
	for _, r := range rs {
		_, notes := c.IntervalsFor(placementOf(r.Experiment))
		for _, n := range notes {
			out = append(out, fmt.Sprintf("%s: %s", r.Experiment.ID, n))
		}
	}
	return out
}
