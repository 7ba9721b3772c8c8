package producer

// podLRU is one pod's LRU of block hashes in the approximate index: a set
// of at most capacity hashes with the semantics of hashicorp golang-lru's
// simplelru.LRU[uint64, struct{}] as upstream uses it (pinned by
// TestPodLRUMatchesSimpleLRU):
//
//   - Add of a present hash makes it the most recent;
//   - Add of a new hash makes it the most recent and, when that exceeds
//     the capacity, evicts the least recent one, reporting it through the
//     eviction callback;
//   - Remove reports the removed hash through the callback too.
//
// It exists because the index is the hottest structure of the router in a
// long-prompt replay: nodes live in one pointer-free slice (no allocation
// per entry, nothing for the garbage collector to scan) and the hash lookup
// is a u64Map.
type podLRU struct {
	capacity   int
	nodes      []lruNode
	head, tail int32 // most and least recent node, noNode when empty
	free       []int32
	index      u64Map[int32] // hash -> node+1 (0 is the map's "absent")
	onEvict    func(uint64)
}

type lruNode struct {
	key        uint64
	prev, next int32 // towards the head (more recent) / the tail
}

const noNode = -1

func newPodLRU(capacity int, onEvict func(uint64)) *podLRU {
	return &podLRU{capacity: capacity, head: noNode, tail: noNode, onEvict: onEvict}
}

// Len is the number of hashes held.
func (l *podLRU) Len() int { return l.index.Len() }

// Add inserts h as the most recent hash (see the type comment).
func (l *podLRU) Add(h uint64) {
	if n := l.index.Get(h) - 1; n != noNode {
		l.unlink(n)
		l.pushFront(n)
		return
	}
	var n int32
	switch {
	case len(l.free) > 0:
		n = l.free[len(l.free)-1]
		l.free = l.free[:len(l.free)-1]
	case len(l.nodes) < l.capacity:
		n = int32(len(l.nodes))
		l.nodes = append(l.nodes, lruNode{})
	default:
		// Full: reuse the least recent node. golang-lru pushes the new
		// entry first and then evicts the oldest; the end state and the
		// callback are the same, because the evicted hash is never h.
		n = l.tail
		old := l.nodes[n].key
		l.unlink(n)
		l.index.Delete(old)
		l.nodes[n].key = h
		l.pushFront(n)
		l.index.Put(h, n+1)
		l.onEvict(old)
		return
	}
	l.nodes[n].key = h
	l.pushFront(n)
	l.index.Put(h, n+1)
}

// Contains reports whether h is held, without touching its recency.
func (l *podLRU) Contains(h uint64) bool { return l.index.Get(h) != 0 }

// Remove drops h if held and reports it through the callback.
func (l *podLRU) Remove(h uint64) {
	n := l.index.Get(h) - 1
	if n == noNode {
		return
	}
	l.unlink(n)
	l.index.Delete(h)
	l.free = append(l.free, n)
	l.onEvict(h)
}

// Keys returns the hashes from the least to the most recent, as
// simplelru.Keys does.
func (l *podLRU) Keys() []uint64 {
	out := make([]uint64, 0, l.Len())
	for n := l.tail; n != noNode; n = l.nodes[n].prev {
		out = append(out, l.nodes[n].key)
	}
	return out
}

func (l *podLRU) pushFront(n int32) {
	nd := &l.nodes[n]
	nd.prev, nd.next = noNode, l.head
	if l.head == noNode {
		l.tail = n
	} else {
		l.nodes[l.head].prev = n
	}
	l.head = n
}

func (l *podLRU) unlink(n int32) {
	nd := &l.nodes[n]
	if nd.prev == noNode {
		l.head = nd.next
	} else {
		l.nodes[nd.prev].next = nd.next
	}
	if nd.next == noNode {
		l.tail = nd.prev
	} else {
		l.nodes[nd.next].prev = nd.prev
	}
	nd.prev, nd.next = noNode, noNode
}
