package scenario

import "github.com/eppsim/eppsim/workload"

// readaheadDepth is how many requests the reader may run ahead of the
// simulation. A request of a long-prompt trace holds its synthesized body
// and tokens (about 100 KB at 12k tokens), so the buffer stays small.
const readaheadDepth = 32

// readahead reads a trace on its own goroutine, ahead of the simulation
// that consumes it. Parsing and prompt synthesis depend on nothing the
// simulation does, so on a machine with a spare core they leave the
// simulation's critical path; the requests, their order and every error
// are exactly those of reading the stream directly.
//
// The stream's skip counter is snapshotted with each request, so Skipped
// reports the records skipped up to the last request consumed — what a
// direct reader would report — however far the goroutine got ahead.
type readahead struct {
	src     *workload.Stream
	items   chan readItem
	stop    chan struct{}
	done    chan struct{}
	stopped bool
	skipped int
	err     error // the terminal error (io.EOF included), once consumed
}

type readItem struct {
	req     *workload.Request
	err     error
	skipped int
}

func startReadahead(src *workload.Stream) *readahead {
	ra := &readahead{
		src:   src,
		items: make(chan readItem, readaheadDepth),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	go func() {
		defer close(ra.done)
		for {
			req, err := src.Next()
			select {
			case ra.items <- readItem{req, err, src.Skipped()}:
			case <-ra.stop:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return ra
}

// Next returns the next request of the stream, or its terminal error.
func (ra *readahead) Next() (*workload.Request, error) {
	if ra.err != nil {
		return nil, ra.err
	}
	it := <-ra.items
	ra.skipped = it.skipped
	if it.err != nil {
		ra.err = it.err
	}
	return it.req, it.err
}

// Skipped is the stream's count of skipped invalid records as of the last
// request returned.
func (ra *readahead) Skipped() int { return ra.skipped }

// SkippedErrors returns the errors of the first skipped records, up to
// Skipped of them. It stops the reader first (the stream is not safe to
// read from two goroutines), so it is called once the simulation ends.
func (ra *readahead) SkippedErrors() []error {
	ra.Stop()
	errs := ra.src.SkippedErrors()
	return errs[:min(len(errs), ra.skipped)]
}

// Stop ends the reading goroutine and waits for it, after which the stream
// may be closed. Calling it again does nothing.
func (ra *readahead) Stop() {
	if ra.stopped {
		return
	}
	ra.stopped = true
	close(ra.stop)
	<-ra.done
}
