package sim

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/workload"
)

// failingSource yields its requests, then err.
type failingSource struct {
	reqs []*workload.Request
	err  error
}

func (s *failingSource) Next() (*workload.Request, error) {
	if len(s.reqs) == 0 {
		return nil, s.err
	}
	r := s.reqs[0]
	s.reqs = s.reqs[1:]
	return r, nil
}

// withDeadline runs f and fails the test if it has not returned in two
// minutes: a guard against a run that never ends, not a timing check (the
// tests count events for that), so it is far above what a run takes on a
// loaded machine under the race detector; 10 s failed once there.
func withDeadline(t *testing.T, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the run did not end")
	}
}

// TestRunEndsOnSourceError: a source that fails — before its first request,
// or after some — ends the run with that error, whatever the scrape and
// sample timers are doing, and the error reaches the caller unwrapped.
func TestRunEndsOnSourceError(t *testing.T) {
	bad := errors.New("trace.jsonl:1: input_length: must be > 0, got 0")
	for _, n := range []int{0, 1, 3} {
		var reqs []*workload.Request
		for i := range n {
			reqs = append(reqs, req(int64(i), int64(i)*second/10, tokens(i*100, 300), 20))
		}
		for _, sample := range []int64{0, second / 100} {
			var err error
			withDeadline(t, func() {
				_, err = Run(&failingSource{reqs: reqs, err: bad}, testRouter(), testFleet(t, 2, 2000),
					Options{SampleInterval: sample, OnSample: func(*Sample) {}})
			})
			if err != bad {
				t.Errorf("%d requests, sampling %v: error %v, want %v", n, sample, err, bad)
			}
		}
	}
}

// TestRunCancelled: a cancelled context stops a run within a bounded
// number of events with an error that wraps the context's.
func TestRunCancelled(t *testing.T) {
	var reqs []*workload.Request
	for i := range 400 {
		reqs = append(reqs, req(int64(i), int64(i)*second/100, tokens(i*1000, 1000), 300))
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	var err error
	withDeadline(t, func() {
		_, err = RunContext(ctx, &sliceSource{reqs: reqs}, testRouter(), testFleet(t, 2, 4000), Options{OnRecord: func(*Record) {
			if n++; n == 5 {
				cancel()
			}
		}})
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	if n >= len(reqs) {
		t.Fatalf("%d records: the run went on to the end", n)
	}
}

// TestTimersNeedWork: the scrape and sample timers re-arm only while some
// event that can change the simulation is scheduled. Without one nothing
// can happen again, so the run ends — even with requests recorded as in
// flight (a replica holding work it can never schedule) or a source that
// was never exhausted — and reports them.
func TestTimersNeedWork(t *testing.T) {
	for _, c := range []struct {
		name string
		r    runner
		want bool
	}{
		{"in flight, no work", runner{slotByID: map[int64]int{7: 0}, srcDone: true}, false},
		{"source open, no work", runner{slotByID: map[int64]int{}}, false},
		{"failed", runner{slotByID: map[int64]int{7: 0}, work: 3, err: errors.New("x")}, false},
		{"in flight, work", runner{slotByID: map[int64]int{7: 0}, srcDone: true, work: 1}, true},
		{"source open, work", runner{slotByID: map[int64]int{}, work: 1}, true},
		{"done", runner{slotByID: map[int64]int{}, srcDone: true, work: 2}, false},
	} {
		if got := c.r.active(); got != c.want {
			t.Errorf("%s: active() = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestRunRejectsWhatCannotFit: a prompt larger than the whole KV cache is
// refused by the engine and the run ends.
func TestRunRejectsWhatCannotFit(t *testing.T) {
	fleet := testFleet(t, 1, 8) // 7 usable blocks: 112 tokens
	var recs []Record
	var res *Result
	var err error
	withDeadline(t, func() {
		res, err = Run(&sliceSource{reqs: []*workload.Request{req(0, 0, tokens(0, 500), 5)}}, testRouter(), fleet,
			Options{OnRecord: func(r *Record) { recs = append(recs, *r) }})
	})
	if err != nil || res.Rejected != 1 || res.InFlight != 0 || len(recs) != 1 || recs[0].Outcome != Rejected {
		t.Fatalf("err %v, result %+v, records %+v", err, res, recs)
	}
}

// TestIngestJitter: with a calibration whose ingest varies per request,
// every request's TTFT − (engine first token) is drawn around the mean
// ingest from the run's seed: the same seed gives the same draws, another
// seed other draws, and the mean of many draws is the configured mean.
func TestIngestJitter(t *testing.T) {
	fleet := testFleet(t, 1, 4000)
	c := replica.DefaultCalibration()
	c.Coefficients.IngestUs, c.Coefficients.IngestJitter = 10_000, 0.5
	fleet[0].Preset = fleet[0].Preset.WithCalibration(c, "test")
	fleet[0].Preset.StepModel = "calibrated"
	reqs := func() []*workload.Request {
		var out []*workload.Request
		for i := range 400 {
			out = append(out, req(int64(i), int64(i)*second/20, tokens(i*100, 64), 2))
		}
		return out
	}
	ingests := func(seed uint64) []int64 {
		recs, _ := run(t, reqs(), fleet, Options{Seed: seed})
		var out []int64
		for _, r := range recs {
			out = append(out, r.TTFT)
		}
		return out
	}
	a, b, other := ingests(1), ingests(1), ingests(2)
	if !slices.Equal(a, b) {
		t.Fatal("the same seed gave different ingest draws")
	}
	if slices.Equal(a, other) {
		t.Fatal("another seed gave the same draws")
	}
	// The mean ingest: TTFT with jitter minus TTFT without it averages 0.
	fleet0 := slices.Clone(fleet)
	c.Coefficients.IngestJitter = 0
	fleet0[0].Preset = fleet0[0].Preset.WithCalibration(c, "test0")
	with, _ := run(t, reqs(), fleet, Options{Seed: 1})
	without, _ := run(t, reqs(), fleet0, Options{Seed: 1})
	var diff, spread float64
	for i := range with {
		d := float64(with[i].TTFT - without[i].TTFT)
		diff += d
		spread += math.Abs(d)
	}
	diff /= float64(len(with))
	spread /= float64(len(with))
	if math.Abs(diff) > 1e6 || spread < 2e6 { // |mean| < 1 ms; mean |difference| at least 2 ms
		t.Fatalf("mean TTFT difference %.2f ms, mean |difference| %.2f ms", diff/1e6, spread/1e6)
	}
}
