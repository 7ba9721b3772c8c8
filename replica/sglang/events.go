package sglang

import "github.com/eppsim/eppsim/replica"

// eventQueue holds KV events until the next metric point (sglang-engine.md
// A.13 cadence: after each prefill batch, every DecodeLogInterval-th decode
// step, and when the engine goes idle).
type eventQueue struct {
	buf []replica.Event
	// removed backs the one-hash BlockHashes of BlockRemoved and
	// BlockStored events: slices of append-only arrays (subscribers may keep
	// them), a new array once one is full.
	hashes []uint64
}

const hashChunk = 1024

func (q *eventQueue) one(h uint64) []uint64 {
	if len(q.hashes) == cap(q.hashes) {
		q.hashes = make([]uint64, 0, hashChunk)
	}
	q.hashes = append(q.hashes, h)
	n := len(q.hashes)
	return q.hashes[n-1 : n : n]
}

// stored queues one page's BlockStored (A.13: one hash per event, the
// page's tokens, block_size = len(tokens), parent = the previous page's
// hash, none under a root). start is where the page begins in s's token
// sequence; when the page lies inside s's prompt the event aliases the
// prompt and names s's request as its Origin.
func (q *eventQueue) stored(h, parent uint64, hasParent bool, toks []uint32, s *seq, start int) {
	ev := replica.Event{Kind: replica.BlockStored, BlockHashes: q.one(h), ParentHash: parent, HasParent: hasParent,
		TokenIDs: toks, BlockSize: len(toks)}
	if s != nil && start+len(toks) <= len(s.r.Prompt) {
		ev.TokenIDs = s.r.Prompt[start : start+len(toks) : start+len(toks)]
		ev.Origin, ev.PromptOffset = s.r, start
	}
	q.buf = append(q.buf, ev)
}

// removed queues one page's BlockRemoved (A.6, A.13).
func (q *eventQueue) removed(h uint64) {
	q.buf = append(q.buf, replica.Event{Kind: replica.BlockRemoved, BlockHashes: q.one(h)})
}

// cleared queues AllBlocksCleared (A.2 reset).
func (q *eventQueue) cleared() {
	q.buf = append(q.buf, replica.Event{Kind: replica.AllBlocksCleared})
}

// take returns the queued events and empties the queue; the slice is valid
// until the next event is queued.
func (q *eventQueue) take() []replica.Event {
	if q == nil || len(q.buf) == 0 {
		return nil
	}
	out := q.buf
	q.buf = out[:0]
	return out[:len(out):len(out)]
}
