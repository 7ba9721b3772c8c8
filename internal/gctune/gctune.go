// Package gctune keeps a simulation's heap near its live data once that
// data is large. Go's default (GOGC=100) lets the heap grow to twice the
// live data before collecting; a long replay keeps a few hundred MB live
// (the fleet's caches and the EPP's indexes, the infinite-cache bound and
// the latency samples of every request) while streaming bodies and tokens
// through, so its RSS would approach twice that. Start lowers GOGC, after
// each collection, to what keeps the heap under a soft limit, never below
// MinPercent: small runs keep the default, and big ones trade a few
// percent of CPU for memory instead of stalling at a hard limit.
package gctune

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// MinPercent is the lowest GOGC Start sets.
const MinPercent = 50

// DefaultLimit is eppsim's soft heap limit: a one-million-request replay
// on 64 replicas keeps about 450 MB live, which GOGC=100 would let grow to
// about 1 GB of RSS.
const DefaultLimit = 768 << 20

var once sync.Once

// Start adapts GOGC for the rest of the process, unless the user set GOGC
// or GOMEMLIMIT (then the runtime's settings stand). After every
// collection, GOGC becomes 100 if the heap that allows (twice the live
// data) fits in limit, else what fits it, at least MinPercent.
func Start(limit uint64) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	once.Do(func() {
		t := &tuner{limit: limit, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}, percent: 100}
		t.arm()
	})
}

type tuner struct {
	limit   uint64
	sample  []metrics.Sample
	percent int
}

// arm sets a finalizer on a fresh object: it runs after the next
// collection, retunes, and arms again.
func (t *tuner) arm() {
	s := new(sentinel)
	runtime.SetFinalizer(s, func(*sentinel) {
		t.tune()
		t.arm()
	})
}

type sentinel struct{ _ [16]byte } // not a tiny allocation, so that it is finalized alone

func (t *tuner) tune() {
	metrics.Read(t.sample)
	if t.sample[0].Value.Kind() != metrics.KindUint64 {
		return
	}
	p := Percent(t.sample[0].Value.Uint64(), t.limit)
	if p != t.percent {
		t.percent = p
		debug.SetGCPercent(p)
	}
}

// Percent is the GOGC that keeps a heap of live bytes under limit: 100
// when twice live fits, else (limit-live)/live, at least MinPercent.
func Percent(live, limit uint64) int {
	if live == 0 || 2*live <= limit {
		return 100
	}
	if live >= limit {
		return MinPercent
	}
	return max(MinPercent, int((limit-live)*100/live))
}
