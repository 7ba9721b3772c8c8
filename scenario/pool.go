package scenario

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
// their own Open function are read by each run, unless they name it
// (Spec.OpenKey).
//
// A pool from NewPool holds at most one feed that no run reads: runs of
// one workload share it, and a run of another closes it. A pool from
// NewKeepingPool also keeps idle feeds while the requests they hold total
// at most its keep budget, for processes that come back to many workloads
// in turn (a calibration simulates every recorded run at each evaluation
// of its objective); which feeds it keeps changes no run's output, only
// how often a workload is read.
//
// A Pool is safe for concurrent use. Close it when the runs are over.
type Pool struct {
	opts FeedOptions
	// keepBytes bounds the requests held by kept feeds (NewKeepingPool);
	// 0: none is kept.
	keepBytes int64

	mu      sync.Mutex
	feeds   map[poolKey]*Feed
	joining map[*Feed]int // runs about to join each feed: not idle
	kept    []*Feed       // feeds not closed when idle, oldest first
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
	trace := spec.Trace
	if spec.Open != nil {
		// Never equal to a trace's key: a path does not start with a NUL.
		trace = "\x00open:" + spec.OpenKey
	}
	return poolKey{trace, fmt.Sprintf("%#v", spec.Workload)}
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

// NewKeepingPool is NewPool(retainBytes) that also keeps feeds no run reads
// while the requests its kept feeds hold total less than keepBytes: a feed
// opened while they do is kept until the pool closes or the feed releases
// requests (it outgrew retainBytes); one opened after is closed when the
// next new feed opens, as in a pool from NewPool. Keeping the first
// workloads rather than the latest suits runs that cycle through more
// workloads than fit: the kept ones are read once, the others once per
// cycle, where keeping the latest would read every one each cycle.
func NewKeepingPool(retainBytes, keepBytes int64) *Pool {
	p := NewPool(retainBytes)
	p.keepBytes = max(keepBytes, 0)
	return p
}

// errPoolClosed is the error of a run started on a closed pool.
var errPoolClosed = errors.New("scenario: the pool is closed")

// Run is RunContext reading spec's workload from the pool's feed for it.
func (p *Pool) Run(ctx context.Context, spec *Spec, e EPP, hooks Hooks) (*report.Summary, error) {
	if spec.Open != nil && spec.OpenKey == "" {
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
			if !slices.Contains(p.kept, g) && p.joining[g] == 0 && g.idle() {
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
		if p.keepBytes > 0 && p.keptBytes() < p.keepBytes {
			p.kept = append(p.kept, f)
		}
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
	if refused {
		p.kept = slices.DeleteFunc(p.kept, func(g *Feed) bool { return g == f })
	}
}

// keptBytes is the size (RequestSize) of the requests the kept feeds
// hold; p.mu is held.
func (p *Pool) keptBytes() int64 {
	var n int64
	for _, f := range p.kept {
		n += f.heldBytes()
	}
	return n
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
	p.kept = nil
}

// heldBytes is the size (RequestSize) of the requests the feed holds.
func (f *Feed) heldBytes() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bytes
}

// idle reports whether no run reads the feed.
func (f *Feed) idle() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.readers) == 0
}
