package sweep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eppsim/eppsim/report"
	"github.com/eppsim/eppsim/scenario"
	"github.com/eppsim/eppsim/workload"
)

// Shard selects the points whose index ≡ I (mod N); N = 0 means all.
type Shard struct{ I, N int }

// ParseShard parses --shard I/N (0 ≤ I < N).
func ParseShard(s string) (Shard, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(strings.TrimSpace(a))
	n, err2 := strconv.Atoi(strings.TrimSpace(b))
	if !ok || err1 != nil || err2 != nil {
		return Shard{}, fmt.Errorf("--shard %q: want I/N, e.g. 0/4", s)
	}
	if n < 1 || i < 0 || i >= n {
		return Shard{}, fmt.Errorf("--shard %q: want 0 ≤ I < N", s)
	}
	return Shard{I: i, N: n}, nil
}

// Has reports whether point index belongs to the shard.
func (s Shard) Has(index int) bool { return s.N <= 1 || index%s.N == s.I }

// String is the I/N form ("" for no shard).
func (s Shard) String() string {
	if s.N <= 1 {
		return ""
	}
	return fmt.Sprintf("%d/%d", s.I, s.N)
}

// Options control Run.
type Options struct {
	// Out is the sweep directory (created if needed).
	Out string
	// Workers is the number of points simulated at once (0: GOMAXPROCS).
	Workers int
	Shard   Shard
	// Objectives (none: DefaultObjective) and Constraints evaluate the
	// points; they do not change what is simulated.
	Objectives  []Objective
	Constraints []Constraint
	// Progress receives a progress bar (nil: none).
	Progress io.Writer
	// DPI of the PNG plots (0: 150).
	DPI int
}

// RunStats says what one Run did.
type RunStats struct {
	// Selected is the number of points of this shard; Skipped those found
	// finished in points.jsonl; Ran those simulated now.
	Selected, Skipped, Ran int
	Wall                   time.Duration
}

// Run simulates the plan's points of opts.Shard that points.jsonl in
// opts.Out does not hold yet, appending each as it finishes, then writes
// the result files from the whole log. Cancelling ctx stops the sweep at
// once: no new point starts, the points in flight are abandoned within a
// few thousand simulated events and are not logged (a resumed sweep runs
// them again), and Run returns an error that wraps ErrInterrupted and
// says how to resume.
func Run(ctx context.Context, p *Plan, opts Options) (*Results, RunStats, error) {
	start := time.Now()
	var st RunStats
	if opts.Out == "" {
		return nil, st, errors.New("--out: a sweep needs an output directory")
	}
	if len(opts.Objectives) == 0 {
		o, err := ParseObjective(DefaultObjective)
		if err != nil {
			return nil, st, err
		}
		opts.Objectives = []Objective{o}
	}
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return nil, st, fmt.Errorf("--out: %w", err)
	}
	h := &logHeader{Format: logFormat, Hash: p.hash, Spec: p.doc}
	for _, o := range opts.Objectives {
		h.Objectives = append(h.Objectives, o.String())
	}
	for _, c := range opts.Constraints {
		h.Constraints = append(h.Constraints, c.String())
	}
	plog, done, err := openLog(opts.Out, h)
	if err != nil {
		return nil, st, err
	}
	defer plog.close()
	finished := make(map[int]bool, len(done))
	for _, r := range done {
		finished[r.Index] = true
	}
	var todo []int
	for i := range p.n {
		if !opts.Shard.Has(i) {
			continue
		}
		st.Selected++
		if finished[i] {
			st.Skipped++
			continue
		}
		todo = append(todo, i)
	}
	bar := newProgressBar(opts.Progress, len(todo), st.Skipped)
	// stop ends the dispatch early when the points file cannot be written.
	dispatch, stop := context.WithCancel(ctx)
	defer stop()
	jobs := make(chan int)
	results := make(chan Record)
	var traceErr atomic.Pointer[error]
	var wg sync.WaitGroup
	// The points read their trace through one pool: once for the sweep
	// when it fits the pool's retain budget, else once per round of points.
	pool := scenario.NewPool(0)
	defer pool.Close()
	for range min(workers, max(len(todo), 1)) {
		wg.Go(func() {
			for i := range jobs {
				rec, err := runPoint(ctx, pool, p, i)
				if ctx.Err() != nil && rec.Error != "" {
					continue // abandoned, not failed: a resumed sweep runs it
				}
				if err != nil {
					// A bad trace fails every point alike: stop, log
					// nothing, and report it as the sweep's input error.
					traceErr.CompareAndSwap(nil, &err)
					stop()
					continue
				}
				results <- rec
			}
		})
	}
	go func() {
		defer close(jobs)
		for _, i := range todo {
			select {
			case jobs <- i:
			case <-dispatch.Done():
				return
			}
		}
	}()
	go func() {
		wg.Wait()
		close(results)
	}()
	var werr error
	for rec := range results {
		if werr == nil {
			if werr = plog.write(&rec); werr != nil {
				stop()
			}
		}
		if werr == nil {
			st.Ran++
		}
		bar.step(rec.Error != "")
	}
	bar.finish()
	st.Wall = time.Since(start)
	if werr != nil {
		return nil, st, werr
	}
	if err := traceErr.Load(); err != nil {
		return nil, st, *err
	}
	if err := ctx.Err(); err != nil && st.Ran < len(todo) {
		return nil, st, fmt.Errorf("%w after %d of %d points (%d finished before); %s holds every finished point: "+
			"run the same command again to resume", ErrInterrupted, st.Ran, len(todo), st.Skipped, filepath.Join(opts.Out, LogFile))
	}
	if err := plog.close(); err != nil {
		return nil, st, fmt.Errorf("%s: %w", LogFile, err)
	}
	hdr, recs, _, err := readLog(plog.path)
	if err != nil {
		return nil, st, err
	}
	res, err := finalize(opts.Out, hdr, recs, opts.Objectives, opts.Constraints, opts.DPI)
	st.Wall = time.Since(start)
	return res, st, err
}

// ErrInterrupted is wrapped by the error of a sweep or tuning run stopped by
// its context.
var ErrInterrupted = errors.New("interrupted")

// runPoint simulates point i; a failure (or a panic) becomes the record's
// error. Cancelling ctx abandons the simulation. An invalid trace is not
// the point's failure but the sweep's: it is returned as the error (a
// scenario.InputError) instead.
func runPoint(ctx context.Context, pool *scenario.Pool, p *Plan, i int) (rec Record, traceErr error) {
	rec = Record{Index: i, Values: p.Values(i)}
	defer func() {
		if r := recover(); r != nil {
			rec.Summary, rec.Error = nil, fmt.Sprintf("panic: %v", r)
		}
	}()
	spec, e, err := p.Point(i)
	if err != nil {
		rec.Error = err.Error()
		return rec, nil
	}
	s, err := pool.Run(ctx, spec, e, scenario.Hooks{})
	if err != nil {
		if scenario.IsInputError(err) && workload.IsInputError(err) {
			return rec, err
		}
		rec.Error = err.Error()
		return rec, nil
	}
	raw, err := summaryJSON(s)
	if err != nil {
		rec.Error = err.Error()
		return rec, nil
	}
	rec.Summary = raw
	return rec, nil
}

// summaryJSON encodes a summary without its config and wall-clock fields
// (the only parts that are not a function of the point).
func summaryJSON(s *report.Summary) (json.RawMessage, error) {
	c := *s
	c.Config = nil
	c.Sim.WallSeconds, c.Sim.RequestsPerWallS = 0, 0
	b, err := json.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("encoding the summary: %w", err)
	}
	return b, nil
}

// progressBar draws "[####----] 12/36 points · ETA 1m20s" on a terminal,
// at most every 200 ms.
type progressBar struct {
	w                   io.Writer
	total, done, failed int
	skipped             int
	drawn               int // done when last drawn
	start, last         time.Time
}

func newProgressBar(w io.Writer, total, skipped int) *progressBar {
	b := &progressBar{w: w, total: total, skipped: skipped, start: time.Now()}
	b.draw(true)
	return b
}

func (b *progressBar) step(failed bool) {
	b.done++
	if failed {
		b.failed++
	}
	b.draw(false)
}

func (b *progressBar) draw(force bool) {
	if b.w == nil {
		return
	}
	now := time.Now()
	if !force && now.Sub(b.last) < 200*time.Millisecond && b.done < b.total {
		return
	}
	b.last, b.drawn = now, b.done
	fmt.Fprint(b.w, "\r"+b.line(now))
}

// line renders the bar at time now.
func (b *progressBar) line(now time.Time) string {
	const width = 30
	filled := width
	if b.total > 0 {
		filled = width * b.done / b.total
	}
	s := fmt.Sprintf("sweep [%s%s] %d/%d points", strings.Repeat("#", filled), strings.Repeat("-", width-filled), b.done, b.total)
	if b.skipped > 0 {
		s += fmt.Sprintf(" (+%d done before)", b.skipped)
	}
	if b.failed > 0 {
		s += fmt.Sprintf(" · %d failed", b.failed)
	}
	el := now.Sub(b.start)
	if b.done > 0 && b.done < b.total {
		eta := time.Duration(float64(el) / float64(b.done) * float64(b.total-b.done))
		s += " · ETA " + eta.Round(time.Second).String()
	} else if b.done == b.total {
		s += " · " + el.Round(100*time.Millisecond).String()
	}
	return s + "   "
}

func (b *progressBar) finish() {
	if b.w == nil {
		return
	}
	if b.drawn != b.done {
		b.draw(true)
	}
	fmt.Fprintln(b.w)
}
