package flowcontrol

import (
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/eppsim/eppsim/epp"
)

// Grids and constants of §3.2.
const (
	// DispatchTick is the processor's ticker: a dispatch cycle at every
	// k·1 ms.
	DispatchTick = int64(time.Millisecond)
	// SweepPeriod is the expiry sweep's period: k·1 s.
	SweepPeriod = int64(time.Second)
	// DefaultTTL is defaultRequestTTL's (and noEndpointRequestTTL's)
	// default.
	DefaultTTL = int64(60 * time.Second)
	// DefaultBandMaxBytes and DefaultBandMaxRequests are a band's caps
	// when unset or 0.
	DefaultBandMaxBytes    = int64(1_000_000_000)
	DefaultBandMaxRequests = int64(5000)
	// MaxRevocations bounds the victims of one reclamation (§12).
	MaxRevocations = 2
	// EvictionConfirmTimeout is how long after issue a revocation starts
	// cooling if its stream has not terminated (§12).
	EvictionConfirmTimeout = int64(10 * time.Second)
)

// BandConfig is one band's configuration after defaults.
type BandConfig struct {
	Priority              int
	MaxBytes, MaxRequests int64
	Fairness              FairnessPolicy
	Ordering              OrderingPolicy
}

// Config is the flow-control layer's configuration after defaults (§3):
// the static bands (band 0 included), the template of dynamic bands and
// of negative ones, global caps, TTLs, the detector, the usage-limit
// policy and eviction.
type Config struct {
	// MaxBytes and MaxRequests are the global caps (0: unlimited).
	MaxBytes, MaxRequests int64
	// DefaultTTL is the queue-wait budget while the pool has endpoints,
	// NoEndpointTTL while it is empty (0: no expiry).
	DefaultTTL, NoEndpointTTL int64
	// Bands are the static bands; Template the defaultPriorityBand copied
	// for dynamic bands (and band 0 when not listed), NegativeTemplate
	// defaultNegativePriorityBand (nil: Template).
	Bands            []BandConfig
	Template         BandConfig
	NegativeTemplate *BandConfig
	Detector         epp.SaturationDetector
	UsageLimit       UsageLimitPolicy
	// EnableEviction turns in-flight eviction on (§12); EvictionGrace is
	// the cooling time of a revocation (0: derived, §12).
	EnableEviction bool
	EvictionGrace  int64
}

// Outcome is how flow control finalized an item (§5, §6.6).
type Outcome int

// Outcomes.
const (
	Dispatched Outcome = iota + 1
	RejectedCapacity
	RejectedNoEndpoints
	RejectedOther
	EvictedTTL
	EvictedNoEndpoints
)

type regime struct {
	empty bool
	since int64
}

// Controller is the flow controller: the band registry, the processor's
// enqueue and dispatch cycle, the expiry sweep and the eviction gate. It
// implements epp.FlowControl.
type Controller struct {
	cfg      Config
	bands    []*Band // by priority, highest first (§3.3)
	byPrio   map[int]*Band
	prios    []int
	ceilings []float64
	len      int64
	bytes    int64
	pool     func(now int64) []*epp.Endpoint
	regime   regime
	seq      uint64
	fifo     []*Item // queued items in enqueue order (expiry order)
	items    map[*epp.Request]*Item
	// gridNext is the first dispatch grid point not yet run or accounted.
	gridNext int64
	// blocked: the last cycle dispatched nothing with requests queued.
	blocked bool
	stopAt  int // the band index the last blocked cycle stopped at
	memo    satMemo
	evict   *evictor
}

// satMemo caches the saturation between input changes.
type satMemo struct {
	ok    bool
	s     float64
	empty bool
	until int64 // -1: valid until the next input change
}

// New builds a controller. Band 0 always exists; a static band list with
// two bands of one priority is an error.
func New(cfg Config) (*Controller, error) {
	if cfg.Detector == nil {
		return nil, fmt.Errorf("flow control: no saturation detector")
	}
	if cfg.UsageLimit == nil {
		cfg.UsageLimit = NewStatic(StaticLimitType, 1.0)
	}
	c := &Controller{cfg: cfg, byPrio: map[int]*Band{}, items: map[*epp.Request]*Item{}}
	for i, b := range cfg.Bands {
		if _, dup := c.byPrio[b.Priority]; dup {
			return nil, fmt.Errorf("flow control: priorityBands[%d]: duplicate priority %d", i, b.Priority)
		}
		c.addBand(b)
	}
	if c.byPrio[0] == nil {
		t := cfg.Template
		t.Priority = 0
		c.addBand(t)
	}
	if cfg.EnableEviction {
		c.evict = newEvictor(cfg.EvictionGrace)
	}
	return c, nil
}

func (c *Controller) addBand(bc BandConfig) {
	if bc.MaxBytes <= 0 {
		bc.MaxBytes = DefaultBandMaxBytes
	}
	if bc.MaxRequests <= 0 {
		bc.MaxRequests = DefaultBandMaxRequests
	}
	b := &Band{Priority: bc.Priority, maxBytes: bc.MaxBytes, maxRequests: bc.MaxRequests, fairness: bc.Fairness,
		ordering: bc.Ordering, flows: map[string]*Queue{}}
	b.state = b.fairness.NewState()
	c.byPrio[b.Priority] = b
	i, _ := slices.BinarySearchFunc(c.bands, b.Priority, func(x *Band, p int) int { return p - x.Priority })
	c.bands = slices.Insert(c.bands, i, b)
	c.prios = slices.Insert(c.prios, i, b.Priority)
	c.ceilings = append(c.ceilings, 1)
}

// SetDesiredPriorities implements epp.FlowControl: each priority without a
// band gets one, copied from defaultNegativePriorityBand (priority < 0,
// when set) or defaultPriorityBand (§3.3). Bands are never removed: the
// set of InferenceObjectives is fixed for a run.
func (c *Controller) SetDesiredPriorities(prios []int) {
	for _, p := range prios {
		if c.byPrio[p] != nil {
			continue
		}
		t := c.cfg.Template
		if p < 0 && c.cfg.NegativeTemplate != nil {
			t = *c.cfg.NegativeTemplate
		}
		t.Priority = p
		c.addBand(t)
	}
}

// SetPool implements epp.FlowControl.
func (c *Controller) SetPool(pool func(now int64) []*epp.Endpoint) {
	c.pool = pool
	c.memo.ok = false
}

// Priorities lists the bands' priorities, highest first.
func (c *Controller) Priorities() []int { return slices.Clone(c.prios) }

// Queued implements epp.FlowControl.
func (c *Controller) Queued() int { return int(c.len) }

// Band returns the band of priority p (nil when none).
func (c *Controller) Band(p int) *Band { return c.byPrio[p] }

func ceilGrid(t, step int64) int64 {
	if t <= 0 {
		return 0
	}
	return (t + step - 1) / step * step
}

func (c *Controller) endpoints(now int64) []*epp.Endpoint {
	if c.pool == nil {
		return nil
	}
	return c.pool(now)
}

// saturation is §6.3 steps 1–3 at now: the pool is partitioned by
// llm-d.ai/role into prefill and decode groups, s is the largest group
// saturation, or the pool's when both groups are empty. It is memoized
// until the next input change or the detector's horizon.
func (c *Controller) saturation(now int64) (float64, bool) {
	m := &c.memo
	if m.ok && (m.until < 0 || now < m.until) {
		return m.s, m.empty
	}
	pool := c.endpoints(now)
	var prefill, decode []*epp.Endpoint
	for _, e := range pool {
		role, has := "", false
		if e.EndpointInfo != nil && e.Labels != nil {
			role, has = e.Labels[roleLabel]
		}
		switch {
		case !has || role == "" || role == "decode":
			decode = append(decode, e)
		case role == "prefill" || role == "encode-prefill":
			prefill = append(prefill, e)
		case role == "prefill-decode" || role == "both" || role == "encode-prefill-decode":
			prefill = append(prefill, e)
			decode = append(decode, e)
		}
	}
	d := c.cfg.Detector
	h, _ := d.(epp.SaturationHorizon)
	until := int64(-1)
	horizon := func(eps []*epp.Endpoint) {
		if h == nil {
			return
		}
		if t := h.NextChange(eps, now); t >= 0 && (until < 0 || t < until) {
			until = t
		}
	}
	s := 0.0
	if len(prefill) == 0 && len(decode) == 0 {
		s = d.Saturation(pool, now)
		horizon(pool)
	} else {
		for _, g := range [][]*epp.Endpoint{prefill, decode} {
			if len(g) > 0 {
				s = max(s, d.Saturation(g, now))
				horizon(g)
			}
		}
	}
	*m = satMemo{ok: true, s: s, empty: len(pool) == 0, until: until}
	return s, m.empty
}

const roleLabel = "llm-d.ai/role"

// account runs the bookkeeping of the grid cycles in [gridNext, now) that
// the simulator skipped because they could not dispatch: the usage-limit
// policy's call counter advances as those calls would have moved it, with
// the saturation that held during them (the inputs have not changed since
// the last cycle or Observe).
func (c *Controller) account(now int64) {
	if c.gridNext >= now {
		return
	}
	cc, ok := c.cfg.UsageLimit.(CycleCounter)
	if !ok {
		c.gridNext = ceilGrid(now, DispatchTick)
		return
	}
	for c.gridNext < now {
		s, _ := c.saturation(c.gridNext)
		end := now
		if u := c.memo.until; u >= 0 && u < end {
			end = u
		}
		n := max(1, (end-c.gridNext+DispatchTick-1)/DispatchTick)
		cc.Skip(s, c.prios, n)
		c.gridNext += n * DispatchTick
	}
}

// Observe implements epp.FlowControl.
func (c *Controller) Observe(now int64) {
	c.account(now)
	c.memo.ok = false
	c.blocked = false
}

// Enqueue implements epp.FlowControl (§6.1, §6.2): the item's band is its
// priority's, or band 0 when that band does not exist; the capacity checks
// run in §6.2's order; a hit rejects with RejectedCapacity (429), or
// RejectedNoEndpoints (503) in the empty regime. One dispatch cycle
// follows, whatever the outcome.
func (c *Controller) Enqueue(now int64, req *epp.Request) epp.FlowStep {
	c.account(now)
	c.seq++
	it := &Item{Req: req, Seq: c.seq, Received: now, Enqueued: now, TTL: c.cfg.DefaultTTL, Bytes: int64(len(req.Body)),
		Priority: req.Priority, Flow: req.FairnessID, slo: parseSLO(req), index: -1}
	b := c.byPrio[req.Priority]
	if b == nil {
		b = c.byPrio[0]
		it.Priority = 0
	}
	q := b.flow(it.Flow)
	q.leases++
	var rejected error
	if c.cfg.MaxBytes > 0 && c.bytes+it.Bytes > c.cfg.MaxBytes ||
		c.cfg.MaxRequests > 0 && c.len+1 > c.cfg.MaxRequests ||
		b.bytes+it.Bytes > b.maxBytes || b.len+1 > b.maxRequests {
		out := RejectedCapacity
		if c.regime.empty {
			out = RejectedNoEndpoints
		}
		c.release(q, now)
		rejected = c.outcomeError(out, now)
	} else {
		c.push(b, q, it)
	}
	step := c.cycle(now)
	step.Rejected = rejected
	return step
}

func (c *Controller) push(b *Band, q *Queue, it *Item) {
	if len(q.items) == 0 {
		b.activate(q)
	}
	q.push(it)
	b.len++
	b.bytes += it.Bytes
	c.len++
	c.bytes += it.Bytes
	c.fifo = append(c.fifo, it)
	c.items[it.Req] = it
}

// take removes a queued item and finalizes it.
func (c *Controller) take(it *Item, now int64) {
	q := it.queue
	b := q.band
	q.remove(it)
	if len(q.items) == 0 {
		b.deactivate(q)
	}
	b.len--
	b.bytes -= it.Bytes
	c.len--
	c.bytes -= it.Bytes
	it.done = true
	delete(c.items, it.Req)
	c.release(q, now)
}

func (c *Controller) release(q *Queue, now int64) {
	q.leases--
	if q.leases == 0 {
		q.idleSince = now
	}
}

// Cycle implements epp.FlowControl: the dispatch cycle of grid point now
// (a point already run is a no-op).
func (c *Controller) Cycle(now int64) epp.FlowStep {
	if now < c.gridNext || now%DispatchTick != 0 {
		return epp.FlowStep{}
	}
	c.account(now)
	step := c.cycle(now)
	c.gridNext = now + DispatchTick
	return step
}

// cycle is one dispatch cycle (§6.3): at most one item leaves. Bands are
// visited from the highest priority down; the first gated band (s ≥ its
// ceiling) stops the cycle even when empty (head-of-line blocking), after
// the eviction trigger when enabled; otherwise the band's fairness policy
// picks a queue whose head is dispatched.
func (c *Controller) cycle(now int64) epp.FlowStep {
	s, empty := c.saturation(now)
	if empty != c.regime.empty {
		c.regime = regime{empty: empty, since: now}
	}
	for i := range c.ceilings {
		c.ceilings[i] = 1.0
	}
	c.cfg.UsageLimit.ComputeLimit(s, c.prios, c.ceilings)
	c.blocked = false
	for i, b := range c.bands {
		if s >= c.ceilings[i] {
			var step epp.FlowStep
			if c.evict != nil {
				step.Evicted = c.evict.maybeReclaim(now, s, i, c)
				if len(step.Evicted) > 0 {
					c.memo.ok = false
				}
			}
			c.blocked = c.len > 0
			c.stopAt = i
			return step
		}
		q := b.fairness.Pick(now, b)
		if q == nil || len(q.items) == 0 {
			continue
		}
		it := q.Head()
		c.take(it, now)
		// The dispatched request's PreRequest changes the detector's
		// inputs (in-flight counters).
		c.memo.ok = false
		return epp.FlowStep{Dispatched: it.Req}
	}
	return epp.FlowStep{}
}

// NextCycle implements epp.FlowControl.
func (c *Controller) NextCycle(now int64) int64 {
	if c.len == 0 {
		return -1
	}
	g := max(c.gridNext, ceilGrid(now, DispatchTick))
	if !c.blocked {
		return g
	}
	best := int64(-1)
	pick := func(t int64) {
		t = max(g, ceilGrid(t, DispatchTick))
		if best < 0 || t < best {
			best = t
		}
	}
	if c.memo.ok && c.memo.until >= 0 {
		pick(c.memo.until)
	}
	if cc, ok := c.cfg.UsageLimit.(CycleCounter); ok && c.memo.ok {
		if m, ok := cc.CallsToOpen(c.memo.s, c.prios, c.stopAt); ok {
			pick(c.gridNext + (m-1)*DispatchTick)
		}
	}
	if c.evict != nil {
		if t := c.evict.nextOpen(now); t >= 0 {
			pick(t)
		}
	}
	return best
}

// Sweep implements epp.FlowControl (§6.4): every queued item whose budget
// has run out — now ≥ max(enqueue, regime since) + budget, the budget
// being the effective TTL while the pool has endpoints (EvictedTTL) and
// noEndpointRequestTTL while it is empty (EvictedNoEndpoints) — is removed.
func (c *Controller) Sweep(now int64) []epp.FlowDone {
	var out []epp.FlowDone
	reg := c.regime
	for len(c.fifo) > 0 {
		it := c.fifo[0]
		if it.done {
			c.fifo[0] = nil
			c.fifo = c.fifo[1:]
			continue
		}
		budget, outcome := it.TTL, EvictedTTL
		if reg.empty {
			budget, outcome = c.cfg.NoEndpointTTL, EvictedNoEndpoints
		}
		if budget <= 0 || now < max(it.Enqueued, reg.since)+budget {
			break
		}
		c.fifo[0] = nil
		c.fifo = c.fifo[1:]
		c.take(it, now)
		out = append(out, epp.FlowDone{Req: it.Req, Err: c.outcomeError(outcome, now)})
	}
	return out
}

// NextSweep implements epp.FlowControl: the first sweep grid point at which
// the oldest queued item has run out of budget. Every item has the same
// budget, so items expire in enqueue order.
func (c *Controller) NextSweep() int64 {
	for _, it := range c.fifo {
		if it.done {
			continue
		}
		budget := it.TTL
		if c.regime.empty {
			budget = c.cfg.NoEndpointTTL
		}
		if budget <= 0 {
			return -1
		}
		return ceilGrid(max(it.Enqueued, c.regime.since)+budget, SweepPeriod)
	}
	return -1
}

// WaitOf returns how long req has been queued at now and whether it is.
func (c *Controller) WaitOf(req *epp.Request, now int64) (int64, bool) {
	it := c.items[req]
	if it == nil {
		return 0, false
	}
	return now - it.Enqueued, true
}

// outcomeError translates an outcome into the director's answer (§7). A
// TTL outcome probes the pool afresh: EvictedTTL is 503 when it is empty.
func (c *Controller) outcomeError(o Outcome, now int64) error {
	switch o {
	case RejectedCapacity:
		return &epp.RequestError{Status: http.StatusTooManyRequests, DroppedReason: "rejected-saturated", Cause: epp.CauseFCCapacity,
			Msg: "request rejected pre-queue: queue at capacity"}
	case RejectedNoEndpoints:
		return &epp.RequestError{Status: http.StatusServiceUnavailable, DroppedReason: "rejected-no-endpoints", Cause: epp.CauseFCNoEndpoints,
			Msg: "no endpoints available"}
	case EvictedTTL:
		if len(c.endpoints(now)) > 0 {
			return &epp.RequestError{Status: http.StatusTooManyRequests, DroppedReason: "rejected-ttl-expired", Cause: epp.CauseFCTTL,
				Msg: "request timed out in queue"}
		}
		fallthrough
	case EvictedNoEndpoints:
		return &epp.RequestError{Status: http.StatusServiceUnavailable, DroppedReason: "rejected-no-endpoints", Cause: epp.CauseFCNoEndpoints,
			Msg: "request timed out in queue and no endpoints are available"}
	}
	return &epp.RequestError{Status: http.StatusInternalServerError, Cause: epp.CauseFCOther, Msg: "internal flow control error"}
}

// Track implements epp.FlowControl: after PreRequest every routed request
// is tracked for eviction until its end of stream (§12).
func (c *Controller) Track(now int64, req *epp.Request, res *epp.Result) {
	if c.evict != nil {
		c.evict.track(now, req, res)
	}
}

// Untrack implements epp.FlowControl.
func (c *Controller) Untrack(now int64, req *epp.Request) {
	if c.evict != nil && c.evict.untrack(now, req) {
		c.memo.ok = false
	}
}

// SetMetricsRefresh derives the eviction grace from the EPP's metrics
// refresh interval when the configuration does not set it (§12).
func (c *Controller) SetMetricsRefresh(d int64) {
	if c.evict != nil && c.cfg.EvictionGrace == 0 {
		c.evict.grace = deriveGrace(c.cfg.Detector, d)
	}
}

var _ epp.FlowControl = (*Controller)(nil)
