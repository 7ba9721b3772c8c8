package replica

import "math/bits"

// freeQueue is the order of vLLM's free block queue (A.4): front = next
// block to hand out, back = most recently freed.
//
// vLLM keeps a doubly linked list. Here the queue is a ring of block ids
// with tombstones: a push writes the next ring slot, a pop reads the front
// slot, and removing a block from the middle (a prefix-cache hit taking a
// free block back, A.3 step 3) overwrites its slot with a tombstone that
// pops skip. The live entries are in exactly the list's order. The point is
// memory access: a long prompt pops hundreds of blocks at once, and a
// linked list makes each pop wait for the previous block's next pointer (a
// cache miss per block once the pool is larger than the CPU cache), while
// the ring hands out the ids of a whole allocation from consecutive memory,
// so the blocks' own cache misses can overlap (BlockPool.GetNewBlocks).
//
// Positions are uint32 counters that wrap; the ring's length is a power of
// two, so a position masked by len(ring)-1 is its slot. block.qpos records
// a queued block's position.
type freeQueue struct {
	ring       []int32 // tombstone: nullBlock (never queued)
	mask       uint32
	head, tail uint32 // the window [head, tail) holds live entries and tombstones
	live       int
}

// newFreeQueue returns an empty queue for a pool of numBlocks blocks. The
// ring has at least twice as many slots as blocks, so a full window always
// holds at least as many tombstones as live entries and compaction frees
// half the ring or more.
func newFreeQueue(numBlocks int) freeQueue {
	size := freeRingSize(numBlocks)
	return freeQueue{ring: make([]int32, size), mask: uint32(size - 1)}
}

// freeRingSize is the ring length of a pool of numBlocks blocks.
func freeRingSize(numBlocks int) int { return 1 << max(bits.Len(uint(2*numBlocks-1)), 4) }

// full reports whether the window covers the whole ring.
func (q *freeQueue) full() bool { return int(q.tail-q.head) == len(q.ring) }

// pushBack appends b at the back.
func (q *freeQueue) pushBack(b int32, blocks []block) {
	if q.full() {
		q.compact(blocks)
	}
	blocks[b].qpos = q.tail
	q.ring[q.tail&q.mask] = b
	q.tail++
	q.live++
}

// pushFront puts b at the front.
func (q *freeQueue) pushFront(b int32, blocks []block) {
	if q.full() {
		q.compact(blocks)
	}
	q.head--
	blocks[b].qpos = q.head
	q.ring[q.head&q.mask] = b
	q.live++
}

// popFront removes and returns the front block; the queue must not be empty.
func (q *freeQueue) popFront() int32 {
	for {
		b := q.ring[q.head&q.mask]
		q.head++
		if b != nullBlock {
			q.live--
			return b
		}
	}
}

// remove takes the queued block b, at position pos, out of the queue.
func (q *freeQueue) remove(pos uint32) {
	q.ring[pos&q.mask] = nullBlock
	q.live--
	if pos == q.head {
		q.head++
	}
}

// compact moves the live entries to the front of the window, keeping their
// order, and updates their positions. Called only on a full window, which
// holds at least as many tombstones as live entries (see newFreeQueue), so
// it is amortized over at least len(ring)/2 removals.
func (q *freeQueue) compact(blocks []block) {
	w := q.head
	for r := q.head; r != q.tail; r++ {
		b := q.ring[r&q.mask]
		if b == nullBlock {
			continue
		}
		q.ring[w&q.mask] = b
		blocks[b].qpos = w
		w++
	}
	for r := w; r != q.tail; r++ {
		q.ring[r&q.mask] = nullBlock
	}
	q.tail = w
}

// each calls f for the live entries from front to back until f returns
// false.
func (q *freeQueue) each(f func(b int32) bool) {
	for r := q.head; r != q.tail; r++ {
		if b := q.ring[r&q.mask]; b != nullBlock && !f(b) {
			return
		}
	}
}
