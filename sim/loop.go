// Package sim is eppsim's discrete-event core: the simulated clock, the event
// queue, per-component random streams and (later) the fleet wiring of a run.
// It is the only package in which simulated time advances; the EPP, the
// replicas and the workload are state machines that sim drives.
//
// Time is int64 nanoseconds of simulated time. Events fire in (time,
// insertion sequence) order, so two events scheduled for the same instant
// fire in the order they were scheduled, and a run is a pure function of its
// inputs and seed.
package sim

import (
	"fmt"
	"time"
)

// Handler receives events. Long-lived components (a replica, the arrival
// driver, the metrics scraper) implement it once and tell their events apart
// by arg, so scheduling an event allocates nothing.
type Handler interface {
	Fire(now int64, arg uint64)
}

// HandlerFunc adapts a function to Handler (convenient in tests; each
// closure passed to Loop.At is one allocation).
type HandlerFunc func(now int64, arg uint64)

// Fire calls f.
func (f HandlerFunc) Fire(now int64, arg uint64) { f(now, arg) }

type event struct {
	at  int64
	seq uint64
	h   Handler
	arg uint64
}

func (a *event) before(b *event) bool {
	if a.at != b.at {
		return a.at < b.at
	}
	return a.seq < b.seq
}

// Loop is the event queue and clock. The zero value is ready to use, at
// time 0.
type Loop struct {
	now    int64
	seq    uint64
	heap   []event
	fired  uint64
	halted bool
}

// Now returns the current simulated time in ns.
func (l *Loop) Now() int64 { return l.now }

// Fired returns the number of events processed so far.
func (l *Loop) Fired() uint64 { return l.fired }

// Pending returns the number of scheduled events not yet fired.
func (l *Loop) Pending() int { return len(l.heap) }

// Phase orders events of one instant: every Early event fires before every
// Normal one, and every Normal one before every Late one; within a phase,
// in scheduling order.
type Phase uint64

// Phases. At schedules Normal events.
const (
	Early Phase = iota
	Normal
	Late
)

// phaseShift puts the phase above any insertion count.
const phaseShift = 62

// At schedules h.Fire(at, arg). Scheduling in the past is a programming
// error: it would make time run backwards.
func (l *Loop) At(at int64, h Handler, arg uint64) { l.AtPhase(at, Normal, h, arg) }

// AtPhase schedules h.Fire(at, arg) in the given phase of its instant.
func (l *Loop) AtPhase(at int64, p Phase, h Handler, arg uint64) {
	if at < l.now {
		panic(fmt.Sprintf("sim: event at %v scheduled in the past (now %v)", time.Duration(at), time.Duration(l.now)))
	}
	l.seq++
	l.heap = append(l.heap, event{at: at, seq: uint64(p)<<phaseShift | l.seq, h: h, arg: arg})
	l.up(len(l.heap) - 1)
}

// After schedules h.Fire(now+d, arg).
func (l *Loop) After(d int64, h Handler, arg uint64) { l.At(l.now+d, h, arg) }

// Halt stops Run after the event being processed.
func (l *Loop) Halt() { l.halted = true }

// Step fires the earliest event. It returns false when the queue is empty.
func (l *Loop) Step() bool {
	if len(l.heap) == 0 {
		return false
	}
	ev := l.heap[0]
	last := len(l.heap) - 1
	l.heap[0] = l.heap[last]
	l.heap[last] = event{}
	l.heap = l.heap[:last]
	if last > 0 {
		l.down(0)
	}
	l.now = ev.at
	l.fired++
	ev.h.Fire(ev.at, ev.arg)
	return true
}

// Run fires events until the queue is empty, Halt is called, or the next
// event lies after until (until < 0 means no limit). The clock is left at
// the last fired event (or at until, if the run stopped there).
func (l *Loop) Run(until int64) {
	l.halted = false
	for len(l.heap) > 0 && !l.halted {
		if until >= 0 && l.heap[0].at > until {
			l.now = until
			return
		}
		l.Step()
	}
}

// The queue is a binary min-heap on (at, seq), written out rather than
// through container/heap to avoid interface calls on the hot path.
func (l *Loop) up(i int) {
	h := l.heap
	for i > 0 {
		p := (i - 1) / 2
		if !h[i].before(&h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (l *Loop) down(i int) {
	h := l.heap
	n := len(h)
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if r := c + 1; r < n && h[r].before(&h[c]) {
			c = r
		}
		if !h[c].before(&h[i]) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}
