package scenario

import (
	"math"

	"github.com/eppsim/eppsim/workload"
)

// scaledSource replays a feed's requests with every arrival and think time
// multiplied by scale, as workload.Options.TimeScale does while reading
// (the same rounding), so that runs at different rates of one trace
// (Spec.ArrivalScale) read one Feed. Each request is a shallow copy: the
// feed's request, shared with other runs, is never written.
type scaledSource struct {
	rd    *FeedReader
	scale float64
}

func (s scaledSource) Next() (*workload.Request, error) {
	r, err := s.rd.Next()
	if err != nil {
		return nil, err
	}
	c := *r
	c.Arrival = int64(math.Floor(float64(r.Arrival) * s.scale))
	c.ThinkTime = int64(math.Ceil(float64(r.ThinkTime) * s.scale))
	return &c, nil
}

// Mode is the feed's replay mode (sim reads it to tell open-loop replay).
func (s scaledSource) Mode() workload.Mode { return s.rd.Mode() }

// source is the workload source a run of spec reads from rd, and its
// declared load stages, both after Spec.ArrivalScale.
func source(spec *Spec, rd *FeedReader) (workload.Source, []workload.StagePlan) {
	plans := rd.Stages()
	k := spec.ArrivalScale
	if k == 0 || k == 1 {
		return rd, plans
	}
	for i := range plans {
		plans[i].Rate /= k
		plans[i].Duration *= k
	}
	return scaledSource{rd, k}, plans
}
