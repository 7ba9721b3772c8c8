package replica

import (
	"container/list"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestFreeQueueMatchesLinkedList drives the ring free queue and a
// container/list (vLLM's own representation, A.4) with the same random
// pushes at both ends, pops and removals from the middle, and checks the
// whole order after every operation. Small pools make the window fill and
// compact often; starting positions just below 2^32 make them wrap.
func TestFreeQueueMatchesLinkedList(t *testing.T) {
	for _, tc := range []struct {
		name      string
		numBlocks int
		start     uint32
	}{
		{"small pool", 9, 0},
		{"wrapping positions", 9, 1<<32 - 5},
		{"larger pool wrapping", 100, 1<<32 - 1000},
		{"two blocks", 2, 1<<32 - 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, uint64(tc.numBlocks)))
			blocks := make([]block, tc.numBlocks)
			q := newFreeQueue(tc.numBlocks)
			q.head, q.tail = tc.start, tc.start
			ref := list.New()
			elems := map[int32]*list.Element{}
			var held []int32
			compactions := 0
			for i := 1; i < tc.numBlocks; i++ {
				held = append(held, int32(i))
			}
			for step := range 50000 {
				switch op := rng.IntN(4); {
				case op <= 1 && len(held) > 0: // free a held block, back or front
					k := rng.IntN(len(held))
					b := held[k]
					held = slices.Delete(held, k, k+1)
					if q.full() {
						compactions++
					}
					if op == 0 {
						q.pushBack(b, blocks)
						elems[b] = ref.PushBack(b)
					} else {
						q.pushFront(b, blocks)
						elems[b] = ref.PushFront(b)
					}
				case op == 2 && ref.Len() > 0: // pop the front
					want := ref.Remove(ref.Front()).(int32)
					delete(elems, want)
					if got := q.popFront(); got != want {
						t.Fatalf("step %d: popFront = %d, want %d", step, got, want)
					}
					held = append(held, want)
				case op == 3 && ref.Len() > 0: // a hit takes a queued block back
					e := ref.Front()
					for range rng.IntN(ref.Len()) {
						e = e.Next()
					}
					b := ref.Remove(e).(int32)
					delete(elems, b)
					q.remove(blocks[b].qpos)
					held = append(held, b)
				}
				var got, want []int32
				q.each(func(b int32) bool { got = append(got, b); return true })
				for e := ref.Front(); e != nil; e = e.Next() {
					want = append(want, e.Value.(int32))
				}
				if !slices.Equal(got, want) || q.live != len(want) {
					t.Fatalf("step %d: queue %v (live %d), want %v", step, got, q.live, want)
				}
				if int(q.tail-q.head) > len(q.ring) {
					t.Fatalf("step %d: window %d exceeds ring %d", step, q.tail-q.head, len(q.ring))
				}
				for _, b := range want {
					if q.ring[blocks[b].qpos&q.mask] != b {
						t.Fatalf("step %d: block %d records position %d holding %d", step, b, blocks[b].qpos, q.ring[blocks[b].qpos&q.mask])
					}
				}
			}
			if compactions == 0 && tc.numBlocks > 2 { // one block never leaves a tombstone behind
				t.Error("the window never filled: compaction untested")
			}
		})
	}
}
