package scenario

import (
	"encoding/json"
	"testing"

	"github.com/eppsim/eppsim/sim"
)

// summaryBytes is a summary's JSON without its wall-clock fields.
func summaryBytes(t *testing.T, s any) []byte {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	simm := m["sim"].(map[string]any)
	delete(simm, "wall_s")
	delete(simm, "requests_per_wall_s")
	delete(m, "config")
	b, _ = json.Marshal(m)
	return b
}

// TestArrivalScaleMatchesTimeScale: scaling arrivals after the reading
// (Spec.ArrivalScale, which lets runs at many rates share one Feed) gives
// the run that scaling them while reading (workload TimeScale) gives,
// byte for byte.
func TestArrivalScaleMatchesTimeScale(t *testing.T) {
	for _, k := range []float64{0.25, 3} {
		read := testSpec(t, 60)
		read.Workload.TimeScale = k
		after := testSpec(t, 60)
		after.ArrivalScale = k
		a, err := Run(read, ForSource("default"), Hooks{})
		if err != nil {
			t.Fatal(err)
		}
		b, err := Run(after, ForSource("default"), Hooks{})
		if err != nil {
			t.Fatal(err)
		}
		if x, y := summaryBytes(t, a), summaryBytes(t, b); string(x) != string(y) {
			t.Errorf("scale %g: TimeScale and ArrivalScale differ:\n%s\n%s", k, x, y)
		}
	}
}

// TestStopEndsRunEarly: a Stop hook that answers on the 10th final record
// ends the run there; the summary says so and counts those 10 records.
func TestStopEndsRunEarly(t *testing.T) {
	spec := testSpec(t, 60)
	n := 0
	s, err := Run(spec, ForSource("default"), Hooks{Stop: func(r *sim.Record) string {
		if n++; n == 10 {
			return "enough"
		}
		return ""
	}})
	if err != nil {
		t.Fatal(err)
	}
	st := s.StoppedEarly
	if st == nil || st.Reason != "enough" || st.FinalRequests != 10 || s.Requests.Complete+s.Requests.Rejected != 10 || !(st.AtS > 0) {
		t.Fatalf("stopped %+v, requests %+v", st, s.Requests)
	}
	full, err := Run(spec, ForSource("default"), Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	if full.StoppedEarly != nil || full.Requests.Complete+full.Requests.Rejected != 60 {
		t.Fatalf("a run without Stop: %+v, %+v", full.StoppedEarly, full.Requests)
	}
}
