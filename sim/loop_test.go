package sim

import (
	"fmt"
	"slices"
	"testing"
)

type recorder struct {
	got []uint64
	at  []int64
}

func (r *recorder) Fire(now int64, arg uint64) {
	r.got = append(r.got, arg)
	r.at = append(r.at, now)
}

func TestLoopOrdersByTimeThenInsertion(t *testing.T) {
	tests := []struct {
		name    string
		times   []int64 // event i is scheduled with arg i at times[i]
		wantArg []uint64
	}{
		{"increasing", []int64{1, 2, 3}, []uint64{0, 1, 2}},
		{"decreasing", []int64{3, 2, 1}, []uint64{2, 1, 0}},
		{"ties keep insertion order", []int64{5, 5, 5, 5}, []uint64{0, 1, 2, 3}},
		{"mixed", []int64{10, 0, 10, 5, 0}, []uint64{1, 4, 3, 0, 2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var l Loop
			r := &recorder{}
			for i, at := range tc.times {
				l.At(at, r, uint64(i))
			}
			l.Run(-1)
			if !slices.Equal(r.got, tc.wantArg) {
				t.Fatalf("order = %v, want %v", r.got, tc.wantArg)
			}
			if l.Fired() != uint64(len(tc.times)) || l.Pending() != 0 {
				t.Fatalf("fired %d pending %d", l.Fired(), l.Pending())
			}
		})
	}
}

func TestLoopEventsScheduledDuringRun(t *testing.T) {
	var l Loop
	var order []int64
	var h HandlerFunc
	h = func(now int64, arg uint64) {
		order = append(order, now)
		if arg > 0 {
			l.After(10, h, arg-1)
			l.After(0, HandlerFunc(func(now int64, _ uint64) { order = append(order, -now) }), 0)
		}
	}
	l.At(0, h, 2)
	l.Run(-1)
	want := []int64{0, 0, 10, -10, 20}
	// The zero-delay event scheduled at t fires after the event that
	// scheduled it, before later times; the t=0 one is recorded as -0 == 0.
	if !slices.Equal(order, want) {
		t.Fatalf("got %v, want %v", order, want)
	}
	if l.Now() != 20 {
		t.Fatalf("now = %d, want 20", l.Now())
	}
}

func TestLoopRunUntilAndHalt(t *testing.T) {
	var l Loop
	r := &recorder{}
	for i := int64(0); i < 10; i++ {
		l.At(i*100, r, uint64(i))
	}
	l.Run(450)
	if len(r.got) != 5 || l.Now() != 450 || l.Pending() != 5 {
		t.Fatalf("after Run(450): fired %v, now %d, pending %d", r.got, l.Now(), l.Pending())
	}
	l.At(460, HandlerFunc(func(int64, uint64) { l.Halt() }), 0)
	l.Run(-1)
	if l.Now() != 460 || l.Pending() != 5 {
		t.Fatalf("after halt: now %d pending %d", l.Now(), l.Pending())
	}
}

func TestLoopRejectsPast(t *testing.T) {
	var l Loop
	l.At(10, &recorder{}, 0)
	l.Run(-1)
	defer func() {
		if recover() == nil {
			t.Fatal("scheduling in the past did not panic")
		}
	}()
	l.At(5, &recorder{}, 0)
}

func TestStreamsIndependent(t *testing.T) {
	s := NewStreams(42)
	a1 := s.Stream("replica-0")
	var seqA []uint64
	for range 5 {
		seqA = append(seqA, a1.Uint64())
	}
	// Another component drawing heavily must not change replica-0's draws.
	b := s.Stream("workload")
	for range 1000 {
		b.Uint64()
	}
	a2 := s.Stream("replica-0")
	for i := range 5 {
		if v := a2.Uint64(); v != seqA[i] {
			t.Fatalf("draw %d = %d, want %d", i, v, seqA[i])
		}
	}
	if NewStreams(43).Stream("replica-0").Uint64() == seqA[0] {
		t.Fatal("different seeds gave the same first draw")
	}
	if s.Stream("replica-1").Uint64() == seqA[0] {
		t.Fatal("different names gave the same first draw")
	}
}

type nop struct{}

func (nop) Fire(int64, uint64) {}

// BenchmarkScheduleFire measures one schedule plus one fire on a queue that
// holds `depth` pending events, the steady state of a fleet simulation.
func BenchmarkScheduleFire(b *testing.B) {
	for _, depth := range []int{16, 1024, 65536} {
		b.Run(fmt.Sprintf("depth=%d", depth), func(b *testing.B) {
			var l Loop
			h := nop{}
			for i := range depth {
				l.At(int64(i*7919%depth), h, 0)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				l.At(l.Now()+int64(i*104729%depth)+1, h, 0)
				l.Step()
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
