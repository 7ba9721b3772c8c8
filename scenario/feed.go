package scenario

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/eppsim/eppsim/epp"
	"github.com/eppsim/eppsim/internal/memo"
	"github.com/eppsim/eppsim/sim"
	"github.com/eppsim/eppsim/workload"
)

// A Feed reads one workload once, on its own goroutine, for every run that
// joins it: the runs read the same *workload.Request values (a simulation
// treats them as read-only; TestSharedRequestsUnchanged checks it), so a
// trace is parsed and its prompts synthesized once however many configs or
// sweep points replay it. Parsing and synthesis depend on nothing a
// simulation does, so on a machine with a spare core they also leave the
// simulations' critical path.
//
// Memory is bounded by a window: the reader runs at most a window of
// requests (FeedOptions.WindowBytes, at least minWindow and at most
// maxWindow requests) ahead of the slowest joined run, and a request is
// released as soon as every joined run has read it. A run a window ahead
// of the slowest waits for it; with a Gate, it gives its place to another
// run meanwhile, so the slowest run always gets to simulate.
//
// A feed may instead retain its requests (FeedOptions.RetainBytes), so
// that runs can join later, each from the first request: it keeps every
// request it reads while they total at most RetainBytes. Once they exceed
// it, the feed becomes windowed over the runs joined so far, and Join
// refuses later runs (ErrFeedClosed), which then need a feed of their own.
// A windowed feed refuses them as soon as it has released a request.
//
// Every run sees exactly what reading the stream directly gives: the
// requests in order, the same terminal error (io.EOF at the end) after the
// same request, and the count of skipped invalid records as of each
// request it has consumed.
//
// The stream is opened and read on the reader goroutine only, so that a
// run whose context ends stops waiting for it even while an open or a
// read blocks (a FIFO without a writer, a pipe from a slow producer):
// JoinContext and the reader's Next return the context's error then, and
// Close no longer waits for a reader that may never return (it ends, and
// closes the stream, when its open or read does).
type Feed struct {
	open func() (feedSource, error)
	opts FeedOptions

	mu   sync.Mutex
	more sync.Cond // runs waiting for a request
	room sync.Cond // the reader waiting for the window to move

	started   bool // the reader goroutine has started (it opens the stream)
	opened    bool // the open has returned: src or openErr is set
	openErr   error
	src       feedSource
	done      chan struct{} // closed when the reader goroutine has ended
	abandoned bool          // a run stopped on its context (waiting or not): Close does not wait for the reader

	// items[k] is request base+k. After the last request read comes end,
	// the terminal error (nil while reading), with endSkipped.
	items      []feedItem
	base       int
	bytes      int64 // Size of the held items
	end        error
	endSkipped int

	readers  []*FeedReader // joined and not closed
	windowed bool          // requests are released behind the slowest run
	released bool          // a request has been released: no more joins
	stopped  bool          // the reader goroutine must end
	paused   bool          // the reader waits for room
	skipErrs []error       // the first errors of skipped records
}

// FeedOptions bound a feed's memory.
type FeedOptions struct {
	// WindowBytes is how much (RequestSize) a windowed feed may hold ahead
	// of its slowest run before the reader waits; 0: DefaultWindowBytes.
	WindowBytes int64
	// RetainBytes > 0 makes the feed keep every request while they total
	// at most this much, so that runs may join later (see Feed).
	RetainBytes int64
	// Prepare, when set, runs on the reader goroutine on each request
	// before any run sees it, to compute into its Memo what the runs
	// derive from it alone (Preparer).
	Prepare func(*workload.Request)
	// minItems and maxItems bound the window in requests (0: minWindow,
	// maxWindow); tests make them small.
	minItems, maxItems int
	// noMemo leaves requests without a Memo: every run computes everything
	// itself, the reference the memoized path is tested against.
	noMemo bool
}

type feedItem struct {
	req     *workload.Request
	skipped int // the stream's skip count after this request
	size    int64
}

// Window limits. A request of the shared Mooncake trace (12k-token prompt,
// its body and tokens) holds about 100 KB, so the default window is about
// 80 of them; the count limits keep tiny requests from making the window
// a long list, and a few requests always fit.
const (
	DefaultWindowBytes = 8 << 20
	minWindow          = 32
	maxWindow          = 1 << 14
	// wakeBatch: a run that caught up with the reader is woken after this
	// many new requests (or when the reader pauses or ends), not after
	// each one.
	wakeBatch = 16
)

// ErrFeedClosed is Join's error on a feed that has released requests.
var ErrFeedClosed = errors.New("scenario: the workload feed has released its first requests")

// errFeedStopped ends the runs still reading a feed that was closed.
var errFeedStopped = errors.New("scenario: the workload feed was closed")

// feedSource is what a feed reads: a *workload.Stream.
type feedSource interface {
	workload.Source
	Mode() workload.Mode
	Skipped() int
	SkippedErrors() []error
	Close() error
}

// NewFeed returns a feed over the stream that open returns. Nothing is
// opened before the first Join.
func NewFeed(open func() (*workload.Stream, error), opts FeedOptions) *Feed {
	return newFeed(func() (feedSource, error) {
		s, err := open()
		if err != nil {
			return nil, err
		}
		return s, nil
	}, opts)
}

func newFeed(open func() (feedSource, error), opts FeedOptions) *Feed {
	if opts.WindowBytes <= 0 {
		opts.WindowBytes = DefaultWindowBytes
	}
	if opts.minItems <= 0 {
		opts.minItems = minWindow
	}
	if opts.maxItems <= 0 {
		opts.maxItems = maxWindow
	}
	f := &Feed{open: open, opts: opts, windowed: opts.RetainBytes <= 0, done: make(chan struct{})}
	f.more.L, f.room.L = &f.mu, &f.mu
	return f
}

// Join is JoinContext with a context that never ends.
func (f *Feed) Join(gate *Gate) (*FeedReader, error) {
	return f.JoinContext(context.Background(), gate)
}

// JoinContext adds a run that reads the feed from its first request. The
// first join starts the reader, which opens the stream; every join waits
// for the open (its error is every join's error), or for ctx to end (then
// ctx's error). The reader's Next, too, stops waiting for requests when
// ctx ends. gate, if not nil, is the Gate the run holds while it
// simulates: the run leaves it while it waits for requests. JoinContext
// fails with ErrFeedClosed once the feed has released a request or was
// closed.
func (f *Feed) JoinContext(ctx context.Context, gate *Gate) (*FeedReader, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.started && !f.stopped {
		f.started = true
		go f.read()
	}
	if err := f.waitFor(ctx, func() bool { return f.opened || f.stopped }); err != nil {
		return nil, err
	}
	if f.openErr != nil {
		return nil, f.openErr
	}
	if f.released || f.stopped {
		return nil, ErrFeedClosed
	}
	rd := &FeedReader{f: f, gate: gate, ctx: ctx}
	rd.unwatch = context.AfterFunc(ctx, f.wake)
	f.readers = append(f.readers, rd)
	if len(f.readers) == 1 {
		f.room.Signal() // the reader waits for its first run
	}
	return rd, nil
}

// waitFor waits until ready() or ctx ends (then its error, and the feed
// is abandoned); f.mu is held.
func (f *Feed) waitFor(ctx context.Context, ready func() bool) error {
	if ready() {
		return nil
	}
	unwatch := context.AfterFunc(ctx, f.wake)
	defer unwatch()
	for !ready() {
		if err := ctx.Err(); err != nil {
			f.abandoned = true
			return fmt.Errorf("scenario: waiting for the workload: %w", err)
		}
		f.more.Wait()
	}
	return nil
}

// wake wakes the runs waiting on the feed, for them to look at their
// contexts.
func (f *Feed) wake() {
	f.mu.Lock()
	f.more.Broadcast()
	f.mu.Unlock()
}

// Close stops the reader and waits for it to end (the stream is closed
// then), unless a run has stopped on its context (FeedReader.Close): the
// reader may then be blocked in an open or read that does not return, and
// ends when it does. Runs still reading get the requests read so far,
// then an error.
func (f *Feed) Close() {
	f.mu.Lock()
	if !f.started {
		f.started = true
		close(f.done)
	}
	f.stop()
	abandoned := f.abandoned
	f.mu.Unlock()
	if !abandoned {
		<-f.done
	}
}

// stop ends the reader goroutine and refuses joins; f.mu is held.
func (f *Feed) stop() {
	if f.stopped {
		return
	}
	f.stopped = true
	if f.end == nil {
		f.end = errFeedStopped
	}
	f.room.Broadcast()
	f.more.Broadcast()
}

// RequestSize estimates the memory a request holds (bytes).
func RequestSize(r *workload.Request) int64 {
	return 256 + int64(len(r.Body)+len(r.OutputText)+len(r.Session)+len(r.CacheSalt)) +
		4*int64(len(r.PromptTokens)+len(r.OutputTokenIDs)) + 8*int64(len(r.HashIDs))
}

// held is how many requests the feed holds; f.mu is held.
func (f *Feed) held() int { return len(f.items) }

// full reports whether a windowed feed's reader must wait; f.mu is held.
func (f *Feed) full() bool {
	if !f.windowed {
		return false
	}
	n, o := f.held(), &f.opts
	return n >= o.maxItems || n >= o.minItems && f.bytes >= o.WindowBytes
}

// resume reports whether a paused reader may go on: a quarter of the
// window is free, so that it reads in batches; f.mu is held.
func (f *Feed) resume() bool {
	n, o := f.held(), &f.opts
	return n <= o.maxItems*3/4 && (n < o.minItems || f.bytes <= o.WindowBytes*3/4)
}

// read is the reader goroutine: it opens the stream, then reads it.
func (f *Feed) read() {
	defer close(f.done)
	src, err := f.open()
	f.mu.Lock()
	f.opened, f.src, f.openErr = true, src, err
	if err != nil {
		f.stopped = true
	}
	f.more.Broadcast() // the joins waiting for the open
	// Nothing is read before the first run has joined: a feed with no run
	// would release (and so close itself to) the run that started it.
	for err == nil && !f.stopped && len(f.readers) == 0 {
		f.room.Wait()
	}
	f.mu.Unlock()
	if err != nil {
		return
	}
	defer src.Close()
	for f.wait() {
		req, err := f.next()
		if !f.add(req, err) {
			return
		}
	}
}

// wait waits while the window is full and reports whether to read on.
func (f *Feed) wait() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.full() {
		f.paused = true
		f.more.Broadcast() // runs waiting for a batch take what there is
		for !f.stopped && !f.resume() {
			f.room.Wait()
		}
		f.paused = false
	}
	return !f.stopped
}

// next reads and prepares the next request; a panic becomes the feed's
// terminal error.
func (f *Feed) next() (req *workload.Request, err error) {
	defer func() {
		if r := recover(); r != nil {
			req, err = nil, fmt.Errorf("scenario: reading the workload: panic: %v", r)
		}
	}()
	req, err = f.src.Next()
	if err == nil {
		// Every run of the feed reads the request's memo.
		if req.Memo == nil && !f.opts.noMemo {
			req.Memo = new(memo.Memo)
		}
		if f.opts.Prepare != nil {
			f.opts.Prepare(req)
		}
	}
	return req, err
}

// add publishes a request read, or the terminal error, and reports
// whether to read on.
func (f *Feed) add(req *workload.Request, err error) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if errs := f.src.SkippedErrors(); len(errs) > len(f.skipErrs) {
		f.skipErrs = append(f.skipErrs, errs[len(f.skipErrs):]...)
	}
	if f.stopped {
		return false
	}
	if err != nil {
		f.end, f.endSkipped = err, f.src.Skipped()
		f.more.Broadcast()
		return false
	}
	it := feedItem{req: req, skipped: f.src.Skipped(), size: RequestSize(req)}
	f.items = append(f.items, it)
	f.bytes += it.size
	if !f.windowed && f.bytes > f.opts.RetainBytes {
		f.windowed = true
		f.release()
	}
	if (f.base+len(f.items))%wakeBatch == 0 {
		f.more.Broadcast()
	}
	return true
}

// release drops the requests every joined run has read, and stops a
// windowed feed that no run reads any more; f.mu is held.
func (f *Feed) release() {
	if !f.windowed {
		return
	}
	if len(f.readers) == 0 {
		clear(f.items)
		f.items, f.bytes = nil, 0
		f.released = true
		f.stop()
		return
	}
	low := f.readers[0].pos
	for _, r := range f.readers[1:] {
		low = min(low, r.pos)
	}
	n := low - f.base
	if n <= 0 {
		return
	}
	for _, it := range f.items[:n] {
		f.bytes -= it.size
	}
	clear(f.items[:n])
	f.items = f.items[n:]
	f.base = low
	f.released = true
	if f.paused && f.resume() {
		f.room.Signal()
	}
}

// A FeedReader is one run's reading of a Feed (a workload.Source). It is
// not safe for concurrent use; Close it when the run ends.
type FeedReader struct {
	f       *Feed
	gate    *Gate
	ctx     context.Context // the run's: Next stops waiting when it ends
	unwatch func() bool     // ends the wake-up on ctx's end
	pos     int             // the next request's index
	skipped int
	err     error // the terminal error, once consumed
	closed  bool
}

// Next returns the next request, or the terminal error (io.EOF at the end),
// or, when the run's context ends while it waits for the reader, an error
// that wraps the context's.
func (r *FeedReader) Next() (*workload.Request, error) {
	if r.err != nil {
		return nil, r.err
	}
	f := r.f
	f.mu.Lock()
	left := false
	var (
		req *workload.Request
		err error
	)
	for r.pos >= f.base+len(f.items) && f.end == nil {
		if cerr := r.ctx.Err(); cerr != nil {
			err = fmt.Errorf("scenario: waiting for the workload: %w", cerr)
			break
		}
		if r.gate != nil && !left {
			r.gate.Leave()
			left = true
		}
		f.more.Wait()
	}
	switch {
	case err != nil:
		f.abandoned = true
		r.err = err
	case r.pos < f.base+len(f.items):
		it := &f.items[r.pos-f.base]
		req, r.skipped = it.req, it.skipped
		r.pos++
		if r.pos-1 == f.base {
			f.release() // r may have been the slowest run
		}
	default:
		err, r.skipped = f.end, f.endSkipped
		r.err = err
	}
	f.mu.Unlock()
	if left {
		r.gate.Enter()
	}
	return req, err
}

// Skipped is the stream's count of skipped invalid records as of the last
// request (or terminal error) returned.
func (r *FeedReader) Skipped() int { return r.skipped }

// Mode is the stream's effective replay mode (workload.Stream.Mode).
func (r *FeedReader) Mode() workload.Mode { return r.f.src.Mode() }

// Stages are the load stages the stream declares
// (workload.Stream.Stages; nil when it declares none).
func (r *FeedReader) Stages() []workload.StagePlan {
	if st, ok := r.f.src.(interface{ Stages() []workload.StagePlan }); ok {
		return st.Stages()
	}
	return nil
}

// Client is the load generator's client model of the stream
// (workload.Stream.Client; nil when it has none).
func (r *FeedReader) Client() *workload.ClientPlan {
	if c, ok := r.f.src.(interface{ Client() *workload.ClientPlan }); ok {
		return c.Client()
	}
	return nil
}

// SkippedErrors returns the errors of the first skipped records, up to
// Skipped of them.
func (r *FeedReader) SkippedErrors() []error {
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	return slices.Clone(r.f.skipErrs[:min(len(r.f.skipErrs), r.skipped)])
}

// Close leaves the feed: the run reads no more, and holds back no
// request. Calling it again does nothing. A run that leaves after its
// context ended abandons the feed, as one that stopped waiting in Next
// does: it may have stopped while simulating, with the feed's reader
// blocked in a read that never returns (a FIFO whose writer went quiet),
// and Feed.Close must not wait for that read.
func (r *FeedReader) Close() {
	if r.closed {
		return
	}
	r.closed = true
	r.unwatch()
	f := r.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.ctx.Err() != nil {
		f.abandoned = true
	}
	if i := slices.Index(f.readers, r); i >= 0 {
		f.readers = slices.Delete(f.readers, i, i+1)
	}
	f.release()
}

// A Gate bounds how many runs simulate at once. A run enters it before
// simulating and leaves it after; a run that waits on a Feed (for the
// reader, or for slower runs to free the window) leaves it while it
// waits, so another run simulates meanwhile.
type Gate struct{ slots chan struct{} }

// NewGate returns a gate for n runs at once (at least one).
func NewGate(n int) *Gate { return &Gate{slots: make(chan struct{}, max(n, 1))} }

// Enter waits for a place.
func (g *Gate) Enter() { g.slots <- struct{}{} }

// Leave gives the place back.
func (g *Gate) Leave() { <-g.slots }

// Preparer returns a feed's Prepare function for the runs of spec behind
// epps: on each request, it computes into the request's Memo what those
// runs derive from the request alone — the engines' block-hash chain of
// its prompt, and each configuration's body check, estimate tokens and
// approximate prefix hashes (epp.Router.Prepare, on routers of its own) —
// so that the runs, which read the same memo, find them there instead of
// computing them, each, on their own goroutine. A configuration or fleet
// that does not load is left out (its runs report the error).
func Preparer(spec *Spec, epps []EPP) func(*workload.Request) {
	chain, err := sim.NewPreparer(spec.Fleet, spec.Env.Seed)
	if err != nil {
		chain = func(*workload.Request) {}
	}
	var routers []*epp.Router
	for _, e := range epps {
		if e.Release == "" {
			e.Release = spec.Release
		}
		l, err := e.Load(spec.Env.Seed)
		if err != nil {
			continue
		}
		if r, err := l.router(); err == nil {
			routers = append(routers, r)
		}
	}
	return func(wr *workload.Request) {
		chain(wr)
		for _, r := range routers {
			r.Prepare(sim.EPPRequest(wr))
		}
	}
}
