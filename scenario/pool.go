package scenario

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/eppsim/eppsim/report"
)

// A Pool shares workload feeds between the runs of one process that start
// at different times (sweep points, tuning evaluations): runs of the same
// workload (Spec.Trace and Spec.Workload, seed included) read one
// retaining Feed. A trace whose requests fit in the pool's retain budget is
// read once for the whole process; a larger one is read once per group of
// runs that join its feed before the feed first releases a request, that
// is, in practice, once per round of runs started together. Specs with
// their own Open function are read by each run.
//
// A Pool is safe for concurrent use. Close it when the runs are over.
type Pool struct {
	opts FeedOptions

	mu      sync.Mutex
	feeds   map[poolKey]*Feed
	joining map[*Feed]int // runs about to join each feed: not idle
	closed  bool
}

// poolKey identifies a workload: its trace and its options, by their
// printed values (the options hold a slice, priority classes, so they are
// not comparable; pointers, such as a shared tokenizer, print as their
// address, so they compare by identity as before).
type poolKey struct {
	trace string
	opts  string
}

func keyOf(spec *Spec) poolKey {
	return poolKey{spec.Trace, fmt.Sprintf("%#v", spec.Workload)}
}

// DefaultRetainBytes is the retain budget of a pool's feeds: a trace whose
// requests (RequestSize) total at most this much is kept in memory and
// read once per process.
const DefaultRetainBytes = 256 << 20

// NewPool returns a pool whose feeds retain up to retainBytes of requests
// each (0: DefaultRetainBytes; negative: none, every feed is windowed).
func NewPool(retainBytes int64) *Pool {
	if retainBytes == 0 {
		retainBytes = DefaultRetainBytes
	}
	return &Pool{opts: FeedOptions{RetainBytes: max(retainBytes, 0)}, feeds: map[poolKey]*Feed{}, joining: map[*Feed]int{}}
}

// errPoolClosed is the error of a run started on a closed pool.
var errPoolClosed = errors.New("scenario: the pool is closed")

// Run is RunContext reading spec's workload from the pool's feed for it.
func (p *Pool) Run(ctx context.Context, spec *Spec, e EPP, hooks Hooks) (*report.Summary, error) {
	if spec.Open != nil {
		return RunContext(ctx, spec, e, hooks)
	}
	return run(ctx, spec, e, hooks, func() (*FeedReader, error) { return p.join(ctx, spec, e) })
}

// join returns a reader of the feed of spec's workload, opening a new feed
// when there is none or the last one has released requests. Feeds that no
// run reads any more are closed then, so that a pool holds at most one
// idle feed. The join itself, which waits for the feed to open its stream,
// is made outside the pool's lock and gives way to ctx.
func (p *Pool) join(ctx context.Context, spec *Spec, e EPP) (*FeedReader, error) {
	key := keyOf(spec)
	for {
		f, err := p.feed(key, spec, e)
		if err != nil {
			return nil, err
		}
		rd, err := f.JoinContext(ctx, nil)
		p.joined(key, f, errors.Is(err, ErrFeedClosed))
		if !errors.Is(err, ErrFeedClosed) {
			return rd, err
		}
	}
}

// feed returns the pool's feed of key's workload, a new one when there is
// none, and counts a run about to join it.
func (p *Pool) feed(key poolKey, spec *Spec, e EPP) (*Feed, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errPoolClosed
	}
	f := p.feeds[key]
	if f == nil {
		for k, g := range p.feeds {
			if p.joining[g] == 0 && g.idle() {
				g.Close()
				delete(p.feeds, k)
			}
		}
		opts := p.opts
		// Prepared for the first run's config: sweep points mostly differ
		// in weights, which change nothing a request's memo holds.
		opts.Prepare = Preparer(spec, []EPP{e})
		f = NewFeed(SpecOpener(spec), opts)
		p.feeds[key] = f
	}
	p.joining[f]++
	return f, nil
}

// joined ends feed's count of a run joining it, and drops the feed when
// it refused the run (closed: it has released requests).
func (p *Pool) joined(key poolKey, f *Feed, refused bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.joining[f]--; p.joining[f] == 0 {
		delete(p.joining, f)
	}
	if refused && p.feeds[key] == f {
		delete(p.feeds, key)
	}
}

// Close stops every feed. Runs still reading get an error.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for k, f := range p.feeds {
		f.Close()
		delete(p.feeds, k)
	}
}

// idle reports whether no run reads the feed.
func (f *Feed) idle() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.readers) == 0
}
