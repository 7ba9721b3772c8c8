package scenario

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/eppsim/eppsim/workload"
)

// skipTrace is a Mooncake trace whose lines 3 and 7 are invalid.
func skipTrace(t *testing.T) string {
	t.Helper()
	lines := []string{
		`{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}`,
		`{"timestamp": 10, "input_length": 600, "output_length": 5, "hash_ids": [0, 2]}`,
		`{"timestamp": 20, "input_length": 600}`,
		`{"timestamp": 30, "input_length": 900, "output_length": 5, "hash_ids": [0, 1]}`,
		`{"timestamp": 40, "input_length": 600, "output_length": 5, "hash_ids": [3, 4]}`,
		`{"timestamp": 50, "input_length": 100, "output_length": 5, "hash_ids": [5]}`,
		`not json`,
		`{"timestamp": 60, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}`,
	}
	path := filepath.Join(t.TempDir(), "skip.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// drainDirect reads a stream to its terminal error: the requests, the skip
// count after each, and the error with the skip count then.
type directRead struct {
	reqs    []*workload.Request
	skipped []int
	err     error
	endSkip int
}

func drainDirect(t *testing.T, open func() (feedSource, error)) directRead {
	t.Helper()
	s, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var d directRead
	for {
		r, err := s.Next()
		if err != nil {
			d.err, d.endSkip = err, s.Skipped()
			return d
		}
		d.reqs = append(d.reqs, r)
		d.skipped = append(d.skipped, s.Skipped())
	}
}

// sameRequest compares what a simulation reads of two requests.
func sameRequest(a, b *workload.Request) bool {
	return a.ID == b.ID && a.Arrival == b.Arrival && a.Line == b.Line && a.Prev == b.Prev &&
		a.PromptLen == b.PromptLen && a.OutputTokens == b.OutputTokens &&
		string(a.Body) == string(b.Body) && slices.Equal(a.PromptTokens, b.PromptTokens) &&
		slices.Equal(a.HashIDs, b.HashIDs)
}

// TestFeedMatchesDirectReading reads traces directly and through feeds of
// one to four runs, in several interleavings and with windows down to one
// request, and checks that every run gets the same requests (bodies and
// tokens included), the same terminal error and the same skip count after
// every request as direct reading.
func TestFeedMatchesDirectReading(t *testing.T) {
	skip := skipTrace(t)
	traces := []struct {
		name string
		open func() (feedSource, error)
	}{
		{"skip-invalid", func() (feedSource, error) {
			return workload.Open(skip, workload.Options{Seed: 5, SkipInvalid: true})
		}},
		{"fails-at-line-3", func() (feedSource, error) { return workload.Open(skip, workload.Options{Seed: 5}) }},
		{"builtin-chat", func() (feedSource, error) {
			s, err := workload.Builtin("chat", 2)
			return &limited{Stream: s, n: 200}, err
		}},
	}
	type order struct {
		name string
		// next picks the run that reads next, given how many each has read.
		next func(step int, read []int) int
	}
	orders := []order{
		{"round-robin", func(step int, _ []int) int { return step }},
		{"first-runs-ahead", func(step int, read []int) int { return 0 }},
		{"last-runs-ahead", func(step int, read []int) int { return len(read) - 1 }},
	}
	for _, tr := range traces {
		want := drainDirect(t, tr.open)
		for _, runs := range []int{1, 2, 4} {
			for _, items := range []int{1, 3, 1000} {
				for _, ord := range orders {
					t.Run(fmt.Sprintf("%s/%d-runs/window-%d/%s", tr.name, runs, items, ord.name), func(t *testing.T) {
						feed := newFeed(tr.open, FeedOptions{WindowBytes: 1, minItems: items, maxItems: items})
						defer feed.Close()
						readers := make([]*FeedReader, runs)
						for i := range readers {
							rd, err := feed.Join(nil)
							if err != nil {
								t.Fatal(err)
							}
							readers[i] = rd
						}
						checkFeedReads(t, readers, want, ord.next)
					})
				}
			}
		}
	}
}

// limited ends a stream after n requests.
type limited struct {
	*workload.Stream
	n int
}

func (l *limited) Next() (*workload.Request, error) {
	if l.n == 0 {
		return nil, io.EOF
	}
	l.n--
	return l.Stream.Next()
}

// checkFeedReads reads every reader to its end. A reader that would block
// (a window ahead of the slowest) is not picked: next's choice falls to
// the next reader that can read.
func checkFeedReads(t *testing.T, readers []*FeedReader, want directRead, next func(int, []int) int) {
	t.Helper()
	read := make([]int, len(readers))
	ended := make([]bool, len(readers))
	f := readers[0].f
	for step := 0; ; step++ {
		live := 0
		for _, e := range ended {
			if !e {
				live++
			}
		}
		if live == 0 {
			return
		}
		i := next(step, read) % len(readers)
		for k := 0; ended[i] || !canRead(f, readers[i]); k++ {
			if k > len(readers) {
				t.Fatalf("no run can read: read %v, ended %v", read, ended)
			}
			i = (i + 1) % len(readers)
		}
		rd := readers[i]
		got, err := rd.Next()
		n := read[i]
		if n < len(want.reqs) {
			if err != nil || !sameRequest(got, want.reqs[n]) {
				t.Fatalf("run %d, request %d: got %+v, %v; want %+v", i, n, got, err, want.reqs[n])
			}
			if rd.Skipped() != want.skipped[n] {
				t.Fatalf("run %d after request %d: skipped %d, want %d", i, n, rd.Skipped(), want.skipped[n])
			}
			read[i]++
			continue
		}
		if err == nil || err.Error() != want.err.Error() || rd.Skipped() != want.endSkip {
			t.Fatalf("run %d at the end: %v (skipped %d), want %v (skipped %d)", i, err, rd.Skipped(), want.err, want.endSkip)
		}
		if _, err2 := rd.Next(); err2 != err {
			t.Fatalf("run %d: Next after the end: %v, want %v again", i, err2, err)
		}
		if errs := rd.SkippedErrors(); len(errs) != min(rd.Skipped(), 20) {
			t.Fatalf("run %d: %d skipped errors, want %d", i, len(errs), rd.Skipped())
		}
		ended[i] = true
		rd.Close()
	}
}

// canRead reports whether rd's Next would return without waiting, waiting
// first for the feed's reader to get as far as it can.
func canRead(f *Feed, rd *FeedReader) bool {
	for {
		f.mu.Lock()
		ok := rd.pos < f.base+len(f.items) || f.end != nil
		settled := ok || f.paused && !f.resume()
		f.mu.Unlock()
		if settled {
			return ok
		}
		runtime.Gosched()
	}
}

// TestFeedSkipCountStopsAtLimit: a run limited to 3 requests consumes
// lines 1-4, so it reports the one invalid line among them even though the
// feed has read the whole file by then.
func TestFeedSkipCountStopsAtLimit(t *testing.T) {
	spec := testSpec(t, 3)
	spec.Trace = skipTrace(t)
	spec.Workload = workload.Options{Seed: 3, SkipInvalid: true}
	s, err := Run(spec, ForSource("round-robin"), Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	w := s.Config.Workload
	line3 := spec.Trace + ":3: "
	if w.SkippedInvalid != 1 || len(w.SkippedExamples) != 1 || !strings.HasPrefix(w.SkippedExamples[0], line3) || w.Injected != 3 {
		t.Fatalf("skipped %d %q, injected %d; want 1 naming %q, and 3", w.SkippedInvalid, w.SkippedExamples, w.Injected, line3)
	}
	spec.Env.MaxRequests = 0
	s, err = Run(spec, ForSource("round-robin"), Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	w = s.Config.Workload
	if w.SkippedInvalid != 2 || len(w.SkippedExamples) != 2 || !strings.HasPrefix(w.SkippedExamples[0], line3) ||
		!strings.HasPrefix(w.SkippedExamples[1], spec.Trace+":7: ") {
		t.Fatalf("whole trace: skipped %d %q, want 2 naming lines 3 and 7", w.SkippedInvalid, w.SkippedExamples)
	}
	if n := s.Config.NotSimulated; len(n) != 0 {
		t.Fatalf("round-robin has not-simulated notes %q", n)
	}
}

// TestFeedGate runs four readers of one feed at once through a gate of
// one place, with a window of two requests: every reader must get the
// whole stream (a run that waits for the others leaves the gate, so none
// waits forever), and at most one holds the gate at any time.
func TestFeedGate(t *testing.T) {
	open := func() (feedSource, error) {
		s, err := workload.Builtin("chat", 4)
		return &limited{Stream: s, n: 300}, err
	}
	want := drainDirect(t, open)
	feed := newFeed(open, FeedOptions{WindowBytes: 1, minItems: 2, maxItems: 2})
	defer feed.Close()
	gate := NewGate(1)
	var inside atomic.Int32
	var wg sync.WaitGroup
	readers := make([]*FeedReader, 4)
	for i := range readers {
		rd, err := feed.Join(gate)
		if err != nil {
			t.Fatal(err)
		}
		readers[i] = rd
	}
	for _, rd := range readers {
		wg.Go(func() {
			defer rd.Close()
			gate.Enter()
			defer gate.Leave()
			for n := 0; ; n++ {
				if inside.Add(1) > 1 {
					t.Error("two readers hold the gate")
				}
				inside.Add(-1)
				r, err := rd.Next()
				if n == len(want.reqs) {
					if err != io.EOF {
						t.Errorf("at the end: %v", err)
					}
					return
				}
				if err != nil || !sameRequest(r, want.reqs[n]) {
					t.Errorf("request %d: %+v, %v", n, r, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestFeedJoin: a retaining feed lets runs join after others have read it
// all, from the first request; a feed that has released requests (its
// retain budget exceeded, or windowed from the start) refuses them.
func TestFeedJoin(t *testing.T) {
	open := func() (feedSource, error) {
		s, err := workload.Builtin("chat", 5)
		return &limited{Stream: s, n: 100}, err
	}
	want := drainDirect(t, open)
	for _, tc := range []struct {
		name   string
		retain int64
		late   bool // a run can join after the first read everything
	}{
		{"retains-all", 1 << 40, true},
		{"over-budget", 4 << 10, false},
		{"windowed", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			feed := newFeed(open, FeedOptions{RetainBytes: tc.retain, minItems: 4, maxItems: 4, WindowBytes: 1})
			defer feed.Close()
			first, err := feed.Join(nil)
			if err != nil {
				t.Fatal(err)
			}
			checkFeedReads(t, []*FeedReader{first}, want, func(int, []int) int { return 0 })
			late, err := feed.Join(nil)
			if !tc.late {
				if !errors.Is(err, ErrFeedClosed) {
					t.Fatalf("late Join: %v, want ErrFeedClosed", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkFeedReads(t, []*FeedReader{late}, want, func(int, []int) int { return 0 })
		})
	}
	// An open error is every Join's error.
	feed := newFeed(func() (feedSource, error) { return nil, io.ErrUnexpectedEOF }, FeedOptions{})
	for range 2 {
		if _, err := feed.Join(nil); err != io.ErrUnexpectedEOF {
			t.Fatalf("Join: %v, want the open error", err)
		}
	}
	feed.Close()
}

// TestFeedWindowBounded: a run far ahead of another makes the reader wait
// with a window's worth held, and everything is released once both are
// done.
func TestFeedWindowBounded(t *testing.T) {
	open := func() (feedSource, error) {
		s, err := workload.Builtin("chat", 6)
		return &limited{Stream: s, n: 200}, err
	}
	feed := newFeed(open, FeedOptions{WindowBytes: 1, minItems: 8, maxItems: 8})
	defer feed.Close()
	fast, _ := feed.Join(nil)
	slow, _ := feed.Join(nil)
	n := 0
	for canRead(feed, fast) {
		if _, err := fast.Next(); err != nil {
			t.Fatal(err)
		}
		n++
	}
	feed.mu.Lock()
	held, paused := feed.held(), feed.paused
	feed.mu.Unlock()
	if n != 8 || held != 8 || !paused {
		t.Fatalf("the fast run read %d, the feed holds %d (paused %v); want 8, 8, true", n, held, paused)
	}
	var wg sync.WaitGroup
	for _, rd := range []*FeedReader{slow, fast} {
		wg.Go(func() {
			defer rd.Close()
			for {
				if _, err := rd.Next(); err == io.EOF {
					return
				} else if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	feed.mu.Lock()
	defer feed.mu.Unlock()
	if feed.held() != 0 || feed.bytes != 0 || !feed.stopped {
		t.Fatalf("after both runs: %d held (%d bytes), stopped %v", feed.held(), feed.bytes, feed.stopped)
	}
}
