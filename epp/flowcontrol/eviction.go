package flowcontrol

import (
	"container/heap"
	"math"
	"time"

	"github.com/eppsim/eppsim/epp"
)

// evictor is in-flight eviction (§12): the tracker of routed requests, the
// victim heap (sheddable-eviction-filter: priority < 0 only;
// priority-then-time-eviction-order-policy: lowest priority first, then the
// newest dispatch, then the highest sequence), and the reclamation gate
// with its pacing.
type evictor struct {
	grace       int64
	seq         uint64
	tracked     map[*epp.Request]*victim
	victims     victimHeap
	pending     float64
	revocations map[*epp.Request]*revocation
}

type victim struct {
	req        *epp.Request
	priority   int
	dispatched int64
	seq        uint64
	index      int // in the heap; -1 when not sheddable
}

// revocation is an eviction that keeps the gate closed: outstanding until
// its stream terminates (or EvictionConfirmTimeout after issue), then
// cooling for the grace.
type revocation struct {
	credit     float64
	issued     int64
	terminated int64 // -1 until the stream ends
}

func newEvictor(grace int64) *evictor {
	if grace == 0 {
		grace = deriveGrace(nil, 0)
	}
	return &evictor{grace: grace, tracked: map[*epp.Request]*victim{}, revocations: map[*epp.Request]*revocation{}}
}

// Upstream's --metrics-staleness-threshold default and the grace's margin
// (§12).
const (
	metricsStalenessThreshold = int64(2 * time.Second)
	graceMargin               = int64(250 * time.Millisecond)
	concurrencyGrace          = int64(10 * time.Millisecond)
	defaultRefresh            = int64(50 * time.Millisecond)
)

// deriveGrace is the eviction confirmation grace (§12): 10 ms with the
// concurrency detector (its inputs are live), else --refresh-metrics-
// interval + --metrics-staleness-threshold + 250 ms (2.3 s by default).
func deriveGrace(d epp.SaturationDetector, refresh int64) int64 {
	if d != nil && d.Type() == "concurrency-detector" {
		return concurrencyGrace
	}
	if refresh <= 0 {
		refresh = defaultRefresh
	}
	return refresh + metricsStalenessThreshold + graceMargin
}

type victimHeap []*victim

func (h victimHeap) Len() int { return len(h) }
func (h victimHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	if a.priority != b.priority {
		return a.priority < b.priority
	}
	if a.dispatched != b.dispatched {
		return a.dispatched > b.dispatched
	}
	return a.seq > b.seq
}
func (h victimHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *victimHeap) Push(x any) {
	v := x.(*victim)
	v.index = len(*h)
	*h = append(*h, v)
}
func (h *victimHeap) Pop() any {
	old := *h
	v := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	v.index = -1
	return v
}

func (e *evictor) track(now int64, req *epp.Request, _ *epp.Result) {
	e.seq++
	v := &victim{req: req, priority: req.Priority, dispatched: now, seq: e.seq, index: -1}
	e.tracked[req] = v
	if v.priority < 0 {
		heap.Push(&e.victims, v)
	}
}

// untrack ends a request's tracking at its end of stream; a revoked
// request's termination starts its cooling. It reports whether the
// request was tracked.
func (e *evictor) untrack(now int64, req *epp.Request) bool {
	if r := e.revocations[req]; r != nil && r.terminated < 0 {
		r.terminated = now
	}
	v := e.tracked[req]
	if v == nil {
		return false
	}
	delete(e.tracked, req)
	if v.index >= 0 {
		heap.Remove(&e.victims, v.index)
	}
	return true
}

// coolEnd is when a revocation stops holding the gate.
func (e *evictor) coolEnd(r *revocation) int64 {
	start := r.issued + EvictionConfirmTimeout
	if r.terminated >= 0 && r.terminated < start {
		start = r.terminated
	}
	return start + e.grace
}

// expire drops the revocations whose cooling has ended by now: each leaves
// pending (clamped at 0).
func (e *evictor) expire(now int64) {
	for req, r := range e.revocations {
		if e.coolEnd(r) <= now {
			e.pending = max(0, e.pending-r.credit)
			delete(e.revocations, req)
		}
	}
}

// nextOpen is when the gate reopens (-1: it is open).
func (e *evictor) nextOpen(now int64) int64 {
	e.expire(now)
	t := int64(-1)
	for _, r := range e.revocations {
		t = max(t, e.coolEnd(r))
	}
	return t
}

// maybeReclaim is the trigger of a cycle stopped at band k (§12): with the
// gate open and a victim v, the bands from k down are scanned until one of
// priority ≤ v's; the first with a ceiling c_j > 0, s ≥ c_j and a queued
// item reclaims.
func (e *evictor) maybeReclaim(now int64, s float64, k int, c *Controller) []*epp.Request {
	e.expire(now)
	if len(e.revocations) > 0 || len(e.victims) == 0 {
		return nil
	}
	v := e.victims[0].priority
	for j := k; j < len(c.bands); j++ {
		if c.prios[j] <= v {
			return nil
		}
		cj := c.ceilings[j]
		if cj <= 0 || s < cj || c.bands[j].len == 0 {
			continue
		}
		return e.reclaim(now, s, cj, c.prios[j])
	}
	return nil
}

// reclaim sizes and issues revocations (§12 Reclaim): credit = s/inFlight;
// net = (s − c_j) − pending; n = min(max(1, ⌈net/credit⌉), 2, evictable);
// a victim whose priority is ≥ the demand band's stops the loop and stays
// tracked.
func (e *evictor) reclaim(now int64, s, cj float64, demand int) []*epp.Request {
	inFlight := len(e.tracked)
	if inFlight == 0 {
		return nil
	}
	credit := s / float64(inFlight)
	net := (s - cj) - e.pending
	if net < 0 || (net == 0 && e.pending > 0) {
		return nil
	}
	n := min(max(1, int(math.Ceil(net/credit))), MaxRevocations, len(e.victims))
	var out []*epp.Request
	for range n {
		v := e.victims[0]
		if v.priority >= demand {
			break
		}
		heap.Pop(&e.victims)
		delete(e.tracked, v.req)
		out = append(out, v.req)
		e.revocations[v.req] = &revocation{credit: credit, issued: now, terminated: -1}
		e.pending += credit
	}
	return out
}
