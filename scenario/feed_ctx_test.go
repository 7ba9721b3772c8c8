package scenario

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eppsim/eppsim/workload"
)

// stuckSource returns n requests of a built-in workload, then blocks in
// Next until unblock is closed (a FIFO whose writer went quiet).
type stuckSource struct {
	*workload.Stream
	n       int
	unblock chan struct{}
	closed  atomic.Bool
}

func (s *stuckSource) Next() (*workload.Request, error) {
	if s.n == 0 {
		<-s.unblock
		return nil, io.EOF
	}
	s.n--
	return s.Stream.Next()
}

func (s *stuckSource) Close() error {
	s.closed.Store(true)
	return s.Stream.Close()
}

// within fails the test unless f returns within limit.
func within(t *testing.T, limit time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(limit):
		t.Fatalf("%s: still waiting after %v", what, limit)
	}
}

// TestFeedContext: a run whose context ends stops waiting for the feed at
// once, whether the stream's open blocks (a FIFO without a writer) or a
// read does (its writer went quiet), with an error that wraps the
// context's; Close then does not wait for the stuck reader, which closes
// the stream once its open or read returns (issue #25 D9).
func TestFeedContext(t *testing.T) {
	for _, tc := range []struct {
		name      string
		openStuck bool
		before    int // requests read before the reader blocks
		gate      bool
	}{
		{"open blocks", true, 0, false},
		{"read blocks", false, 3, false},
		{"read blocks, gated", false, 3, true},
		{"first read blocks", false, 0, false},
		// The run stops on its context while simulating, not in Next,
		// with the feed's reader blocked in a read (issue 22's CI:
		// run on a FIFO gone quiet, two configs, under load).
		{"read blocks, run ends outside Next", false, 3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			unblock := make(chan struct{})
			var src *stuckSource
			opened := make(chan struct{})
			feed := newFeed(func() (feedSource, error) {
				if tc.openStuck {
					<-unblock
				}
				s, err := workload.Builtin("chat", 5)
				if err != nil {
					return nil, err
				}
				src = &stuckSource{Stream: s, n: tc.before, unblock: unblock}
				close(opened)
				return src, nil
			}, FeedOptions{})
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(100*time.Millisecond, cancel)
			var gate *Gate
			if tc.gate {
				gate = NewGate(1)
				gate.Enter()
			}
			var err error
			within(t, 2*time.Second, "JoinContext and Next", func() {
				var rd *FeedReader
				if rd, err = feed.JoinContext(ctx, gate); err != nil {
					return
				}
				defer rd.Close()
				if strings.HasSuffix(tc.name, "outside Next") {
					for range tc.before {
						if _, err = rd.Next(); err != nil {
							t.Errorf("Next before the block: %v", err)
							return
						}
					}
					<-ctx.Done() // the run simulates until its context ends
					err = ctx.Err()
					return
				}
				for n := 0; ; n++ {
					if _, err = rd.Next(); err != nil {
						if n != tc.before {
							t.Errorf("%d requests before the error, want %d", n, tc.before)
						}
						return
					}
				}
			})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("error %v, want one wrapping context.Canceled", err)
			}
			if tc.gate {
				gate.Leave() // the run holds its place again
			}
			within(t, time.Second, "Close", feed.Close)
			close(unblock)
			<-opened
			<-feed.done
			if !src.closed.Load() {
				t.Error("the stream was not closed once its read returned")
			}
		})
	}
}

// TestRunContextWhileOpening: a run, alone (RunContext, a Spec.Open that
// blocks) or through a pool (its feed's open blocks), gives way to its
// context while the workload opens, with the context's error, not an input
// error; the pool then closes without waiting for the open.
func TestRunContextWhileOpening(t *testing.T) {
	unblock := make(chan struct{})
	defer close(unblock)
	for _, pooled := range []bool{false, true} {
		spec := testSpec(t, 10)
		stuck := func() (*workload.Stream, error) {
			<-unblock
			return nil, io.EOF
		}
		pool := NewPool(0)
		run := func(ctx context.Context) error {
			_, err := RunContext(ctx, spec, EPP{Source: "default"}, Hooks{})
			return err
		}
		if pooled {
			// The pool opens the trace itself: make the feed it will use
			// one whose open blocks.
			pool.feeds[keyOf(spec)] = NewFeed(stuck, pool.opts)
			run = func(ctx context.Context) error {
				_, err := pool.Run(ctx, spec, EPP{Source: "default"}, Hooks{})
				return err
			}
		} else {
			spec.Open = stuck
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		var err error
		within(t, 2*time.Second, "the run", func() { err = run(ctx) })
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || IsInputError(err) {
			t.Fatalf("pooled %v: error %v, want one wrapping context.DeadlineExceeded, not an input error", pooled, err)
		}
		within(t, time.Second, "Pool.Close", pool.Close)
	}
}
