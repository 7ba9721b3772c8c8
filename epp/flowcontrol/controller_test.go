package flowcontrol

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/eppsim/eppsim/epp"
)

const (
	ms  = int64(time.Millisecond)
	sec = int64(time.Second)
)

// fixedDetector returns a settable saturation (1 for an empty pool).
type fixedDetector struct {
	epp.TypedName
	s float64
}

func (d *fixedDetector) Saturation(eps []*epp.Endpoint, _ int64) float64 {
	if len(eps) == 0 {
		return 1
	}
	return d.s
}

func newDetector(s float64) *fixedDetector {
	return &fixedDetector{TypedName: epp.TypedName{PluginType: "fixed", PluginName: "fixed"}, s: s}
}

func fcfs() OrderingPolicy {
	return &Ordering{epp.TypedName{PluginType: FCFSType, PluginName: FCFSType}}
}
func strict() FairnessPolicy {
	return &GlobalStrict{epp.TypedName{PluginType: GlobalStrictType, PluginName: GlobalStrictType}}
}

func band(p int) BandConfig {
	return BandConfig{Priority: p, Fairness: strict(), Ordering: fcfs()}
}

// harness drives a Controller the way the simulator does: every enqueue's
// own cycle, the grid cycles NextCycle asks for, the sweeps NextSweep asks
// for, and Observe before an input change.
type harness struct {
	t     *testing.T
	c     *Controller
	det   *fixedDetector
	pool  []*epp.Endpoint
	n     int
	left  map[string]int64 // request id → dispatch time
	order []string
	done  map[string]error
	now   int64
}

func newHarness(t *testing.T, cfg Config, s float64) *harness {
	t.Helper()
	det := newDetector(s)
	cfg.Detector = det
	if cfg.Template.Fairness == nil {
		cfg.Template = band(0)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, c: c, det: det, left: map[string]int64{}, done: map[string]error{}}
	h.pool = []*epp.Endpoint{{EndpointInfo: &epp.EndpointInfo{Name: "ns/a", Address: "10.0.0.1:8000"}}}
	c.SetPool(func(int64) []*epp.Endpoint { return h.pool })
	return h
}

func (h *harness) step(now int64, st epp.FlowStep) {
	if st.Dispatched != nil {
		h.left[st.Dispatched.ID] = now
		h.order = append(h.order, st.Dispatched.ID)
	}
}

// runUntil fires the controller's sweeps and grid cycles up to t
// inclusive; runBefore fires the sweeps up to t and the cycles before t,
// which is what precedes an arrival or a scrape at t (§16.4: sweep →
// scrapes, completions, arrivals → the 1 ms tick).
func (h *harness) runUntil(t int64)  { h.run(t, true) }
func (h *harness) runBefore(t int64) { h.run(t, false) }

func (h *harness) run(t int64, inclusive bool) {
	for {
		nc, ns := h.c.NextCycle(h.now), h.c.NextSweep()
		if ns > t {
			ns = -1
		}
		if nc > t || nc == t && !inclusive {
			nc = -1
		}
		next := int64(-1)
		for _, x := range []int64{nc, ns} {
			if x >= 0 && (next < 0 || x < next) {
				next = x
			}
		}
		if next < 0 {
			h.now = t
			return
		}
		h.now = next
		if ns == next {
			for _, d := range h.c.Sweep(next) {
				h.done[d.Req.ID] = d.Err
			}
			continue
		}
		h.step(next, h.c.Cycle(next))
	}
}

func (h *harness) arrive(at int64, prio int, fid string) string {
	h.runBefore(at)
	h.n++
	id := fmt.Sprint(h.n)
	r := &epp.Request{ID: id, Priority: prio, FairnessID: fid, Body: []byte("0123456789")}
	st := h.c.Enqueue(at, r)
	if st.Rejected != nil {
		h.done[id] = st.Rejected
	}
	h.step(at, st)
	return id
}

// setSaturation is an input change at t (a scrape).
func (h *harness) setSaturation(t int64, s float64) {
	h.runBefore(t)
	h.c.Observe(t)
	h.det.s = s
}

// TestConformanceSimultaneousArrivals is §16.6 check 1: with s < 1, ten
// arrivals at one instant all leave at that instant, each released by its
// own enqueue cycle.
func TestConformanceSimultaneousArrivals(t *testing.T) {
	h := newHarness(t, Config{DefaultTTL: DefaultTTL}, 0.5)
	at := 1234567 * int64(time.Microsecond)
	for range 10 {
		h.arrive(at, 0, "default-flow")
	}
	if len(h.left) != 10 {
		t.Fatalf("%d dispatched, want 10", len(h.left))
	}
	for id, d := range h.left {
		if d != at {
			t.Errorf("request %s left at %v, want %v", id, time.Duration(d), time.Duration(at))
		}
	}
	if h.c.Queued() != 0 || h.c.NextCycle(at) != -1 {
		t.Errorf("queued %d, next cycle %d", h.c.Queued(), h.c.NextCycle(at))
	}
}

// TestConformanceOnePerTick is §16.6 check 2: ten requests queued at s ≥ 1;
// a scrape at T = 2.0004 s drops s below 1; one request leaves per grid
// tick at the first ten ticks ≥ T (2.001 … 2.010 s), in FCFS order.
func TestConformanceOnePerTick(t *testing.T) {
	h := newHarness(t, Config{DefaultTTL: DefaultTTL}, 1.0)
	var ids []string
	for i := range 10 {
		ids = append(ids, h.arrive(int64(i)*7*ms+3, 0, "default-flow"))
	}
	if len(h.left) != 0 || h.c.Queued() != 10 {
		t.Fatalf("dispatched %v, queued %d", h.left, h.c.Queued())
	}
	// Gated with constant inputs: no cycle is due.
	if nc := h.c.NextCycle(h.now); nc != -1 {
		t.Fatalf("blocked controller asks for a cycle at %d", nc)
	}
	T := 2*sec + 400*int64(time.Microsecond)
	h.setSaturation(T, 0.9)
	h.runUntil(3 * sec)
	for i, id := range ids {
		want := 2*sec + int64(i+1)*ms
		if h.left[id] != want {
			t.Errorf("request %s left at %v, want %v", id, time.Duration(h.left[id]), time.Duration(want))
		}
	}
	if !slices.Equal(h.order, ids) {
		t.Errorf("order %v, want %v", h.order, ids)
	}
}

// TestConformanceStrictPriority is §16.6 check 3: bands {1, 0} with a
// static threshold of 0.8. At s = 0.85 every band is gated, so band-0
// requests stay although band 1 is empty; at s = 0.5 band 1 drains
// completely before band 0 is served.
func TestConformanceStrictPriority(t *testing.T) {
	cfg := Config{DefaultTTL: DefaultTTL, Bands: []BandConfig{band(1), band(0)},
		UsageLimit: NewStatic("static", 0.8)}
	h := newHarness(t, cfg, 0.85)
	low := []string{h.arrive(0, 0, "a"), h.arrive(1*ms, 0, "a")}
	high := []string{h.arrive(2*ms, 1, "b"), h.arrive(3*ms, 1, "b"), h.arrive(4*ms, 1, "c")}
	h.runUntil(100 * ms)
	if len(h.left) != 0 {
		t.Fatalf("dispatched at s = 0.85: %v", h.left)
	}
	h.setSaturation(100*ms+1, 0.5)
	h.runUntil(200 * ms)
	want := append(slices.Clone(high), low...)
	if !slices.Equal(h.order, want) {
		t.Errorf("dispatch order %v, want %v (band 1 first)", h.order, want)
	}
	for i, id := range want {
		if at := 101*ms + int64(i)*ms; h.left[id] != at {
			t.Errorf("request %s left at %v, want %v", id, time.Duration(h.left[id]), time.Duration(at))
		}
	}
}

// TestConformanceCapacity is §16.6 check 4: a band with maxRequests 2 at s
// ≥ 1 takes two arrivals; the third is rejected with HTTP 429
// rejected-saturated, or 503 rejected-no-endpoints with an empty pool.
func TestConformanceCapacity(t *testing.T) {
	for _, tc := range []struct {
		name    string
		empty   bool
		status  int
		dropped string
	}{
		{"pool", false, http.StatusTooManyRequests, "rejected-saturated"},
		{"empty pool", true, http.StatusServiceUnavailable, "rejected-no-endpoints"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := band(0)
			b.MaxRequests = 2
			h := newHarness(t, Config{DefaultTTL: DefaultTTL, Bands: []BandConfig{b}}, 1.0)
			if tc.empty {
				h.pool = nil
			}
			a, bb, c := h.arrive(0, 0, "f"), h.arrive(ms, 0, "f"), h.arrive(2*ms, 0, "g")
			if h.done[a] != nil || h.done[bb] != nil {
				t.Fatalf("first two rejected: %v %v", h.done[a], h.done[bb])
			}
			var re *epp.RequestError
			if !errors.As(h.done[c], &re) || re.Status != tc.status || re.DroppedReason != tc.dropped {
				t.Fatalf("third: %v, want HTTP %d %s", h.done[c], tc.status, tc.dropped)
			}
			if h.c.Queued() != 2 {
				t.Errorf("queued %d, want 2", h.c.Queued())
			}
		})
	}
}

// TestCapacityCheckOrder: the global byte cap is tested before the band's
// request cap, and a rejected request leaves nothing queued (§6.2).
func TestCapacityCheckOrder(t *testing.T) {
	h := newHarness(t, Config{DefaultTTL: DefaultTTL, MaxBytes: 25, MaxRequests: 10}, 1.0)
	a, b, c := h.arrive(0, 0, "f"), h.arrive(0, 0, "f"), h.arrive(0, 0, "f") // 10 bytes each
	if h.done[a] != nil || h.done[b] != nil || h.done[c] == nil {
		t.Fatalf("outcomes %v %v %v, want the third over 25 bytes", h.done[a], h.done[b], h.done[c])
	}
	if h.c.bytes != 20 || h.c.Queued() != 2 {
		t.Errorf("bytes %d queued %d", h.c.bytes, h.c.Queued())
	}
}

// TestTimelineA is §15 Timeline A: enqueued at 12.345 s and gated, the
// request is evicted by the sweep at 73 s (the first grid point ≥
// 72.345 s) with HTTP 429 rejected-ttl-expired.
func TestTimelineA(t *testing.T) {
	h := newHarness(t, Config{DefaultTTL: DefaultTTL, NoEndpointTTL: DefaultTTL}, 1.0)
	id := h.arrive(12345*ms, 0, "default-flow")
	if ns := h.c.NextSweep(); ns != 73*sec {
		t.Fatalf("next sweep %v, want 73s", time.Duration(ns))
	}
	h.runUntil(72*sec + 999*ms)
	if h.done[id] != nil {
		t.Fatalf("expired before 73 s: %v", h.done[id])
	}
	h.runUntil(73 * sec)
	var re *epp.RequestError
	if !errors.As(h.done[id], &re) || re.Status != 429 || re.DroppedReason != "rejected-ttl-expired" || re.Cause != epp.CauseFCTTL {
		t.Fatalf("outcome %v, want 429 rejected-ttl-expired", h.done[id])
	}
	if h.c.Queued() != 0 || h.c.NextSweep() != -1 {
		t.Errorf("queued %d next sweep %d", h.c.Queued(), h.c.NextSweep())
	}
}

// TestTimelineB is §15 Timeline B (scale from zero; TTLs 10 s and 300 s):
// the request enqueued at 5 s on an empty pool has a 300 s budget; an
// endpoint added at 30.0005 s is seen by the cycle at 30.001 s, which
// restarts the 10 s budget; the request, still gated (the new endpoint is
// unscraped), is evicted by the sweep at 41 s with HTTP 429.
func TestTimelineB(t *testing.T) {
	h := newHarness(t, Config{DefaultTTL: 10 * sec, NoEndpointTTL: 300 * sec}, 1.0)
	h.pool = nil
	id := h.arrive(5*sec, 0, "default-flow")
	if h.c.regime != (regime{empty: true, since: 5 * sec}) {
		t.Fatalf("regime %+v", h.c.regime)
	}
	if ns := h.c.NextSweep(); ns != 305*sec {
		t.Fatalf("next sweep %v, want 305s", time.Duration(ns))
	}
	h.runUntil(30*sec + 500*int64(time.Microsecond))
	h.c.Observe(h.now)
	h.pool = []*epp.Endpoint{{EndpointInfo: &epp.EndpointInfo{Name: "ns/new", Address: "10.0.0.9:8000"}}}
	h.runUntil(30*sec + 2*ms)
	if h.c.regime != (regime{empty: false, since: 30*sec + ms}) {
		t.Fatalf("regime %+v, want since 30.001s", h.c.regime)
	}
	h.runUntil(40*sec + 999*ms)
	if h.done[id] != nil {
		t.Fatalf("expired early: %v", h.done[id])
	}
	h.runUntil(41 * sec)
	var re *epp.RequestError
	if !errors.As(h.done[id], &re) || re.Status != 429 || re.DroppedReason != "rejected-ttl-expired" {
		t.Fatalf("outcome %v, want 429 rejected-ttl-expired", h.done[id])
	}
}

// TestTwoBandsStrictFairnessWaits is a hand-computed scenario: bands {10,
// 0}, global-strict fairness, FCFS, a saturated pool (s = 1) that a scrape
// at 0.5004 s frees (s = 0.6) and one at 0.5022 s saturates again; a
// scrape at exactly 0.8 s frees it for good. Arrivals: low A (0.1 s), high
// B (0.2 s), low C (0.25 s), high D (0.3 s), low E (0.35 s). One request
// leaves per grid tick, the high band first and FCFS within a band: B at
// 0.501 s (waited 301 ms), D at 0.502 s (202 ms); the pool is saturated
// again before the tick at 0.503 s. The tick at 0.8 s runs after that
// instant's scrape (§16.4), so A leaves at 0.800 s (700 ms), C at 0.801 s
// (551 ms), E at 0.802 s (452 ms).
func TestTwoBandsStrictFairnessWaits(t *testing.T) {
	h := newHarness(t, Config{DefaultTTL: DefaultTTL, Bands: []BandConfig{band(10), band(0)}}, 1.0)
	arr := map[string]int64{}
	at := func(t int64, p int, f string) string { id := h.arrive(t, p, f); arr[id] = t; return id }
	a := at(100*ms, 0, "x")
	b := at(200*ms, 10, "y")
	c := at(250*ms, 0, "z")
	d := at(300*ms, 10, "y")
	e := at(350*ms, 0, "x")
	us := int64(time.Microsecond)
	h.setSaturation(500*ms+400*us, 0.6)
	h.setSaturation(502*ms+200*us, 1.0)
	h.setSaturation(800*ms, 0.6)
	h.runUntil(sec)
	wait := map[string]int64{b: 301 * ms, d: 202 * ms, a: 700 * ms, c: 551 * ms, e: 452 * ms}
	for id, w := range wait {
		if got := h.left[id] - arr[id]; got != w {
			t.Errorf("request %s waited %v, want %v", id, time.Duration(got), time.Duration(w))
		}
	}
	if !slices.Equal(h.order, []string{b, d, a, c, e}) {
		t.Errorf("order %v", h.order)
	}
}

// TestSoftReflectiveSequences checks §10's measured sequences for N = 3.
func TestSoftReflectiveSequences(t *testing.T) {
	prios := []int{10, 0, -1}
	seq := func(s float64, n int) []string {
		p := &SoftReflective{}
		var out []string
		for range n {
			c := []float64{1, 1, 1}
			p.ComputeLimit(s, prios, c)
			out = append(out, fmt.Sprint(c))
		}
		return out
	}
	open, closed := "[1 1 1]", "[1 0 0]"
	for _, tc := range []struct {
		s    float64
		want []string
	}{
		{0.3, []string{open, open, open}},
		{0.6, []string{open, open, open}},
		{0.7, []string{closed, open, closed, open}},
		{0.75, []string{closed, closed, open, closed, closed, open}},
		{0.9, append(slices.Repeat([]string{closed}, 8), open, closed)},
		{1.0, []string{closed, closed}},
		{1.3, []string{closed}},
	} {
		if got := seq(tc.s, len(tc.want)); !slices.Equal(got, tc.want) {
			t.Errorf("s = %v: %v, want %v", tc.s, got, tc.want)
		}
	}
	// N = 1 is always [1].
	p := &SoftReflective{}
	c := []float64{1}
	p.ComputeLimit(0.8, []int{0}, c)
	if c[0] != 1 || p.tick != 0 {
		t.Errorf("N = 1: %v tick %d", c, p.tick)
	}
}

// TestSoftReflectiveGridSkipping: at s = 0.75 with bands {10, 0, −1}, a
// band-0 request queued at 1 ms waits for the third call of the
// alternating regime. Calls: the enqueue cycle at 1 ms (tick 1), the grid
// cycles at 1 ms (2) and 2 ms (3: open). The controller asks for the
// cycle at 2 ms without running the closed one in between as a dispatch,
// and the skipped grid cycles of an idle stretch still advance the tick.
func TestSoftReflectiveGridSkipping(t *testing.T) {
	sr := &SoftReflective{TypedName: epp.TypedName{PluginType: SoftReflectiveType, PluginName: SoftReflectiveType}}
	cfg := Config{DefaultTTL: DefaultTTL, Bands: []BandConfig{band(10), band(0), band(-1)}, UsageLimit: sr}
	h := newHarness(t, cfg, 0.75)
	// Idle from 0: the grid cycles at 0 … 9 ms are skipped and accounted
	// at the arrival at 9.5 ms: tick 10; the enqueue cycle makes it 11.
	id := h.arrive(9*ms+500*int64(time.Microsecond), 0, "f")
	if sr.tick != 11 {
		t.Fatalf("tick %d after the arrival, want 11", sr.tick)
	}
	if len(h.left) != 0 {
		t.Fatalf("dispatched on a closed call: %v", h.left)
	}
	// Next open call: tick 12 (12 % 3 == 0), the grid cycle at 10 ms.
	if nc := h.c.NextCycle(h.now); nc != 10*ms {
		t.Fatalf("next cycle %v, want 10ms", time.Duration(nc))
	}
	h.runUntil(20 * ms)
	if h.left[id] != 10*ms || sr.tick != 12 {
		t.Fatalf("left at %v tick %d, want 10ms and 12", time.Duration(h.left[id]), sr.tick)
	}
}

// TestHoldbackCeilings: bands {10, 0, −1} with minCeiling 0.5 give [1,
// 0.75, 0.5] by rank and [1, 0.5455, 0.5] by value (§10).
func TestHoldbackCeilings(t *testing.T) {
	for _, tc := range []struct {
		domain string
		want   []float64
	}{{"rank", []float64{1, 0.75, 0.5}}, {"value", []float64{1, 6.0 / 11, 0.5}}} {
		p, err := holdbackFactory("h", []byte(`{"minCeiling":0.5,"domain":"`+tc.domain+`"}`), nil)
		if err != nil {
			t.Fatal(err)
		}
		c := []float64{1, 1, 1}
		p.(*Holdback).ComputeLimit(0.9, []int{10, 0, -1}, c)
		for i := range c {
			if math.Abs(c[i]-tc.want[i]) > 1e-12 {
				t.Errorf("%s: %v, want %v", tc.domain, c, tc.want)
				break
			}
		}
	}
	for _, bad := range []string{`{}`, `{"minCeiling":1}`, `{"minCeiling":0.5,"maxCeiling":0.4}`, `{"minCeiling":0.2,"shape":"step"}`, `{"minCeiling":0.2,"domain":"x"}`} {
		if _, err := holdbackFactory("h", []byte(bad), nil); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

// TestOrderingPolicies: FCFS by enqueue time; EDF by enqueue + TTL (TTL 0
// last); SLO-deadline by received + x-llm-d-slo-ttft-ms, a missing or
// invalid header last; equal keys by sequence.
func TestOrderingPolicies(t *testing.T) {
	item := func(seq uint64, enq, ttl int64, slo string) *Item {
		r := &epp.Request{Headers: map[string]string{}}
		if slo != "" {
			r.Headers[epp.SLOTTFTHeader] = slo
		}
		return &Item{Req: r, Seq: seq, Enqueued: enq, Received: enq, TTL: ttl, slo: parseSLO(r)}
	}
	pol := func(typ string) OrderingPolicy { return &Ordering{epp.TypedName{PluginType: typ, PluginName: typ}} }
	for _, tc := range []struct {
		typ     string
		a, b    *Item
		aBefore bool
	}{
		{FCFSType, item(2, 10, 0, ""), item(1, 11, 0, ""), true},
		{FCFSType, item(2, 10, 0, ""), item(1, 10, 0, ""), false},
		{EDFType, item(1, 10, 0, ""), item(2, 11, 5, ""), false},
		{EDFType, item(1, 10, 9, ""), item(2, 11, 5, ""), false},
		{SLODeadlineType, item(1, 0, 0, " 500 "), item(2, 1e6, 0, "100"), false},
		{SLODeadlineType, item(1, 0, 0, "x"), item(2, 1e9, 0, "1"), false},
		{SLODeadlineType, item(1, 0, 0, "-1"), item(2, 5, 0, ""), true},
	} {
		if got := pol(tc.typ).Less(tc.a, tc.b); got != tc.aBefore {
			t.Errorf("%s: Less(%+v, %+v) = %v", tc.typ, *tc.a, *tc.b, got)
		}
	}
}

// TestRoundRobinFairness: flows a, b, c in one band are served in turn,
// from just after the cursor; a cursor whose flow was collected (idle for
// a GC scan at k·5 min) restarts at the first ID.
func TestRoundRobinFairness(t *testing.T) {
	rr := &RoundRobin{epp.TypedName{PluginType: RoundRobinType, PluginName: RoundRobinType}}
	b := BandConfig{Priority: 0, Fairness: rr, Ordering: fcfs()}
	h := newHarness(t, Config{DefaultTTL: 0, Bands: []BandConfig{b}}, 1.0)
	var want []string
	for _, f := range []string{"c", "a", "b", "a", "c", "a"} {
		h.arrive(0, 0, f)
	}
	// ids: 1 c, 2 a, 3 b, 4 a, 5 c, 6 a. From no cursor: a(2), b(3), c(1), a(4), c(5), a(6).
	want = []string{"2", "3", "1", "4", "5", "6"}
	h.setSaturation(ms, 0.1)
	h.runUntil(sec)
	if !slices.Equal(h.order, want) {
		t.Errorf("round-robin order %v, want %v", h.order, want)
	}
	band0 := h.c.Band(0)
	if !band0.HasFlow("a", 4*60*sec) || band0.HasFlow("a", 10*60*sec) {
		t.Errorf("flow GC: idle since %v", time.Duration(band0.flows["a"].idleSince))
	}
}

// TestProgramAwareFairness: two programs in one band; p1 has used 1000
// tokens of service, p2 none, both heads enqueued at 0. At 10 ms the LAS
// score prefers p2 (0.8·1 + 0.2·0.5 against 0 + 0.2·0.5); equal service
// and equal waits tie, and the lower fairness ID wins.
func TestProgramAwareFairness(t *testing.T) {
	pa, err := NewProgramAware("pa", ProgramAwareParams{})
	if err != nil {
		t.Fatal(err)
	}
	b := &Band{ordering: fcfs(), flows: map[string]*Queue{}}
	for i, id := range []string{"p1", "p2"} {
		q := b.flow(id)
		q.push(&Item{Req: &epp.Request{ID: id, FairnessID: id}, Seq: uint64(i), index: -1})
		b.activate(q)
	}
	if q := pa.Pick(10*ms, b); q.id != "p1" {
		t.Fatalf("tie picked %s, want p1", q.id)
	}
	r := &epp.Request{FairnessID: "p1", Usage: &epp.Usage{PromptTokens: 600, CompletionTokens: 200}}
	pa.PreRequest(&epp.Cycle{Now: 10 * ms}, r, nil)
	pa.ResponseComplete(&epp.Cycle{Now: 10 * ms}, r, nil)
	if s := pa.Service("p1", 10*ms); s != 1000 {
		t.Fatalf("service %v, want 1000", s)
	}
	if q := pa.Pick(10*ms, b); q.id != "p2" {
		t.Fatalf("picked %s, want p2 (less service)", q.id)
	}
	// Decay: one half-life (60 s) later p1's service is 500.
	if s := pa.Service("p1", 60*sec+10*ms); math.Abs(s-500) > 1e-9 {
		t.Errorf("decayed service %v, want 500", s)
	}
	// The idle sweep at 3900 s deletes p1 (nothing in flight, last
	// completion 3600 s + before).
	if s := pa.Service("p1", 3900*sec); s != 0 {
		t.Errorf("service after the idle sweep %v, want 0", s)
	}
}

// TestEvictionReclaim: bands {0, −1}; two sheddable requests in flight
// (dispatched at 1 ms and 2 ms) and one priority-0 request queued behind a
// saturated pool (s = 1.2). credit = 1.2/3 = 0.4, net = 0.2, n =
// max(1, ⌈0.5⌉) = 1: the newest sheddable dispatch is revoked, and the
// gate stays closed until its cooling (grace 2.3 s) ends.
func TestEvictionReclaim(t *testing.T) {
	cfg := Config{DefaultTTL: DefaultTTL, Bands: []BandConfig{band(0), band(-1)}, EnableEviction: true}
	h := newHarness(t, cfg, 0.5)
	var flight []*epp.Request
	for i, p := range []int{-1, -1, 0} {
		r := &epp.Request{ID: fmt.Sprint("f", i), Priority: p}
		h.c.Track(int64(i+1)*ms, r, nil)
		flight = append(flight, r)
	}
	h.det.s = 1.2
	st := h.c.Enqueue(10*ms, &epp.Request{ID: "q", Priority: 0, FairnessID: "f"})
	if len(st.Evicted) != 1 || st.Evicted[0] != flight[1] {
		t.Fatalf("evicted %v, want the newest sheddable dispatch", st.Evicted)
	}
	h.c.Untrack(10*ms, flight[1])
	if got, want := h.c.evict.nextOpen(10*ms), 10*ms+2300*ms; got != want {
		t.Errorf("gate reopens at %v, want %v", time.Duration(got), time.Duration(want))
	}
	if st := h.c.Cycle(11 * ms); len(st.Evicted) != 0 {
		t.Errorf("second eviction while the gate is closed: %v", st.Evicted)
	}
	// After the grace the gate reopens; pending is back to 0 and the
	// remaining sheddable request is revoked.
	if st := h.c.Cycle(2311 * ms); len(st.Evicted) != 1 || st.Evicted[0] != flight[0] {
		t.Errorf("after the grace: %v", st.Evicted)
	}
}
