package flowcontrol

import (
	"slices"
	"strings"

	"github.com/eppsim/eppsim/epp"
)

// Item is one request inside flow control (§5, §16.1).
type Item struct {
	Req *epp.Request
	// Seq is the arrival sequence, the tie-break of equal ordering keys.
	Seq uint64
	// Received is when the request's headers arrived, Enqueued when
	// EnqueueAndWait started (the same instant in eppsim: parsing takes no
	// simulated time).
	Received, Enqueued int64
	// TTL is the effective TTL (0: none).
	TTL int64
	// Bytes is the raw body length.
	Bytes int64
	// Priority is the band's priority (0 when the request's band did not
	// exist), Flow its fairness ID.
	Priority int
	Flow     string
	slo      int64 // TTFT SLO in ms, -1 when none (slo-deadline ordering)
	queue    *Queue
	index    int // heap position, -1 when not queued
	done     bool
}

// Queue is one flow's queue: a binary min-heap under the band's ordering
// policy (§5). Upstream's heap is not stable; the ordering's sequence
// tie-break makes this one a total order.
type Queue struct {
	id    string
	band  *Band
	items []*Item
	// leases counts the items of the flow in EnqueueAndWait; idleSince is
	// when the last lease ended (flow GC, §5).
	leases    int
	idleSince int64
}

// FlowID is the queue's fairness ID.
func (q *Queue) FlowID() string { return q.id }

// Len is the number of queued items.
func (q *Queue) Len() int { return len(q.items) }

// Head is the item the queue would release next (nil when empty).
func (q *Queue) Head() *Item {
	if len(q.items) == 0 {
		return nil
	}
	return q.items[0]
}

func (q *Queue) less(i, j int) bool { return q.band.ordering.Less(q.items[i], q.items[j]) }

func (q *Queue) swap(i, j int) {
	q.items[i], q.items[j] = q.items[j], q.items[i]
	q.items[i].index, q.items[j].index = i, j
}

func (q *Queue) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !q.less(i, p) {
			return
		}
		q.swap(i, p)
		i = p
	}
}

func (q *Queue) down(i int) {
	n := len(q.items)
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if r := c + 1; r < n && q.less(r, c) {
			c = r
		}
		if !q.less(c, i) {
			return
		}
		q.swap(i, c)
		i = c
	}
}

func (q *Queue) push(it *Item) {
	it.queue, it.index = q, len(q.items)
	q.items = append(q.items, it)
	q.up(it.index)
}

// remove takes it out of the heap.
func (q *Queue) remove(it *Item) {
	i, last := it.index, len(q.items)-1
	if i != last {
		q.swap(i, last)
	}
	q.items[last] = nil
	q.items = q.items[:last]
	if i != last {
		q.down(i)
		q.up(i)
	}
	it.index = -1
}

// Band is one priority band (§5): caps, its fairness and ordering policies,
// the fairness state, its flows and the active (non-empty) queues, sorted
// by fairness ID.
type Band struct {
	Priority              int
	maxBytes, maxRequests int64
	fairness              FairnessPolicy
	ordering              OrderingPolicy
	state                 any
	flows                 map[string]*Queue
	active                []*Queue
	len, bytes            int64
}

// Active returns the band's non-empty queues, sorted by fairness ID.
func (b *Band) Active() []*Queue { return b.active }

// Less compares two items under the band's ordering policy.
func (b *Band) Less(x, y *Item) bool { return b.ordering.Less(x, y) }

// State is the band's fairness state (FairnessPolicy.NewState).
func (b *Band) State() any { return b.state }

// Len and Bytes are the band's queued count and bytes.
func (b *Band) Len() int64   { return b.len }
func (b *Band) Bytes() int64 { return b.bytes }

// flowGC is the flow GC timeout, equal to its scan period (§3.2, §5).
const flowGC = 5 * 60 * 1e9

// HasFlow reports whether the flow id exists at now: leased, or idle for
// less than the GC timeout at the last GC scan (grid k·5 min) up to now.
func (b *Band) HasFlow(id string, now int64) bool {
	q := b.flows[id]
	if q == nil {
		return false
	}
	if q.leases > 0 {
		return true
	}
	scan := now / flowGC * flowGC
	return scan < q.idleSince+flowGC
}

// flow returns the flow's queue, creating it on first use.
func (b *Band) flow(id string) *Queue {
	q := b.flows[id]
	if q == nil {
		q = &Queue{id: id, band: b}
		b.flows[id] = q
	}
	return q
}

func (b *Band) activate(q *Queue) {
	i, found := slices.BinarySearchFunc(b.active, q.id, func(x *Queue, id string) int { return strings.Compare(x.id, id) })
	if !found {
		b.active = slices.Insert(b.active, i, q)
	}
}

func (b *Band) deactivate(q *Queue) {
	i, found := slices.BinarySearchFunc(b.active, q.id, func(x *Queue, id string) int { return strings.Compare(x.id, id) })
	if found {
		b.active = slices.Delete(b.active, i, i+1)
	}
}
