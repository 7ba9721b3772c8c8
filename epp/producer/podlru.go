package producer

import (
	"math/bits"

	"github.com/eppsim/eppsim/internal/blockmap"
)

// podLRU is one pod's LRU of block hashes in the approximate index: a set
// of at most capacity hashes with the semantics of hashicorp golang-lru's
// simplelru.LRU[uint64, struct{}] as upstream uses it (pinned by
// TestPodLRUMatchesSimpleLRU):
//
//   - Add of a present hash makes it the most recent;
//   - Add of a new hash makes it the most recent and, when that exceeds
//     the capacity, evicts the least recent one, which Add returns (upstream
//     reports it through the eviction callback);
//   - Remove drops a hash (upstream's callback fires for it too).
//
// It exists because the index is the hottest structure of the router in a
// long-prompt replay, where every request inserts a few hundred hashes into
// a full LRU and so evicts as many. Two choices keep the cache misses and
// mispredicted branches per operation low:
//
//   - The recency order is a log rather than a linked list: ring holds the
//     entries in the order they were last added, and moving an entry to
//     the front appends it anew and marks its old record dead. The least
//     recent entry is then the first live record at the tail, found by a
//     sequential scan, instead of a chain of dependent misses through list
//     neighbours. When the ring fills up, compact drops the dead records;
//     the ring is at least four times larger than the live records (sized
//     so up front), so that this costs at most a third of a record move
//     per push.
//   - The hash → record index is a blockmap.Map, whose entries never move
//     until it grows, so a ring record holds its entry's position: an
//     eviction needs no lookup.
//
// Everything lives in pointer-free slices: no allocation per entry and
// nothing for the garbage collector to scan.
type podLRU struct {
	capacity int

	// The records of sequences [tail, head) are in ring (the record of
	// sequence s at ring[s&ringMask]), the least recent first; the live
	// ones are the LRU's content. A record is the position of its hash's
	// index entry, so that evicting it needs no lookup.
	ring       []uint32
	dead       []uint64 // one bit per ring slot: its record was superseded or removed
	ringMask   uint64
	tail, head uint64

	index blockmap.Map // hash -> ring slot of its live record
}

// ringGrowth is the factor between a compacted ring's size and the live
// records it holds (see podLRU).
const ringGrowth = 4

// presizeLimit bounds the entries a new podLRU allocates room for up front:
// enough for the capacities that vLLM's KV caches give, without reserving
// much memory for a huge configured capacity that may never fill.
const presizeLimit = 1 << 16

// newPodLRU returns an empty LRU with room for capacity hashes (up to
// presizeLimit; beyond, it grows), so that filling it up rebuilds nothing.
func newPodLRU(capacity int) *podLRU {
	n := min(capacity, presizeLimit)
	size := max(64, 1<<bits.Len(uint(ringGrowth*(n+1)-1)))
	return &podLRU{
		capacity: capacity,
		ring:     make([]uint32, size),
		dead:     make([]uint64, size/64),
		ringMask: uint64(size - 1),
		index:    blockmap.New(blockmap.GroupsFor(n)),
	}
}

// Len is the number of hashes held.
func (l *podLRU) Len() int { return l.index.Len() }

// Add inserts h as the most recent hash and reports whether h was held
// already. When that evicts the least recent hash, Add returns it and true.
func (l *podLRU) Add(h uint64) (held bool, evicted uint64, ok bool) {
	if pos, found := l.index.Find(h); found {
		rec := l.index.Val(pos)
		if *rec == (l.head-1)&l.ringMask {
			return true, 0, false // already the most recent
		}
		l.markDead(*rec)
		// pushHead may compact, which rewrites index values but never
		// moves index entries.
		slot := l.pushHead(pos)
		*rec = slot
		return true, 0, false
	}
	if l.index.Len() >= l.capacity {
		// golang-lru pushes the new entry before it evicts the oldest; the
		// end state is the same, as the evicted hash is never h.
		pos := int(l.popTail())
		evicted, ok = l.index.Key(pos), true
		l.index.DeleteAt(pos)
	}
	if !l.index.Room() {
		l.rebuild()
	}
	pos := l.index.Insert(h, 0)
	slot := l.pushHead(pos) // a compaction leaves h's entry, not yet in the ring, alone
	*l.index.Val(pos) = slot
	return false, evicted, ok
}

// Contains reports whether h is held, without touching its recency.
func (l *podLRU) Contains(h uint64) bool {
	_, found := l.index.Lookup(h)
	return found
}

// Remove drops h and reports whether it was held.
func (l *podLRU) Remove(h uint64) bool {
	pos, found := l.index.Lookup(h)
	if !found {
		return false
	}
	l.markDead(*l.index.Val(pos))
	l.index.DeleteAt(pos)
	return true
}

// Keys returns the hashes from the least to the most recent, as
// simplelru.Keys does.
func (l *podLRU) Keys() []uint64 {
	out := make([]uint64, 0, l.Len())
	for s := l.tail; s != l.head; s++ {
		if slot := s & l.ringMask; !l.isDead(slot) {
			out = append(out, l.index.Key(int(l.ring[slot])))
		}
	}
	return out
}

// appendEvictionCandidates appends to dst the index positions of the hashes
// that the next n evictions would take if nothing else changed before them:
// the first n live records from the tail. It changes nothing (see
// approxIndex.add).
func (l *podLRU) appendEvictionCandidates(dst []uint32, n int) []uint32 {
	for s := l.tail; n > 0 && s != l.head; s++ {
		if slot := s & l.ringMask; !l.isDead(slot) {
			dst = append(dst, l.ring[slot])
			n--
		}
	}
	return dst
}

func (l *podLRU) isDead(slot uint64) bool { return l.dead[slot/64]&(1<<(slot%64)) != 0 }

func (l *podLRU) markDead(slot uint64) { l.dead[slot/64] |= 1 << (slot % 64) }

// popTail removes the least recent live record and returns it (its index
// entry is the caller's). The LRU must not be empty.
func (l *podLRU) popTail() uint32 {
	for {
		slot := l.tail & l.ringMask
		l.tail++
		if !l.isDead(slot) {
			return l.ring[slot]
		}
	}
}

// pushHead adds a live record of the hash whose index entry is at pos at the
// head and returns its ring slot.
func (l *podLRU) pushHead(pos int) uint64 {
	if l.head-l.tail == uint64(len(l.ring)) {
		l.compact()
	}
	slot := l.head & l.ringMask
	l.ring[slot] = uint32(pos)
	l.dead[slot/64] &^= 1 << (slot % 64)
	l.head++
	return slot
}

// compact makes room in a full ring: it moves the live records, in order,
// to the front of a ring at least ringGrowth times larger than their number
// (the same one unless the LRU outgrew the ring it was created with), and
// points their index entries at their new slots.
func (l *podLRU) compact() {
	live := 0
	for s := l.tail; s != l.head; s++ {
		if !l.isDead(s & l.ringMask) {
			live++
		}
	}
	size := len(l.ring)
	if want := ringGrowth * (live + 1); size < want {
		size = max(64, 1<<bits.Len(uint(want-1)))
	}
	ring, dead, w := l.ring, l.dead, l.tail
	if size != len(l.ring) {
		// A new ring starts empty; in place, the write position never
		// passes the read position, so no record is overwritten unread.
		ring, dead, w = make([]uint32, size), make([]uint64, size/64), 0
	}
	mask := uint64(size - 1)
	start := w
	for s := l.tail; s != l.head; s++ {
		from := s & l.ringMask
		if l.isDead(from) {
			continue
		}
		to := w & mask
		pos := l.ring[from]
		ring[to] = pos
		dead[to/64] &^= 1 << (to % 64)
		*l.index.Val(int(pos)) = to
		w++
	}
	l.ring, l.dead, l.ringMask = ring, dead, mask
	l.tail, l.head = start, w
}

// rebuild re-inserts the held hashes, in recency order, into an index with
// room for more, and points their records at their new positions.
func (l *podLRU) rebuild() {
	fresh := blockmap.New(blockmap.GroupsFor(l.index.Len() + 1))
	for s := l.tail; s != l.head; s++ {
		slot := s & l.ringMask
		if !l.isDead(slot) {
			l.ring[slot] = uint32(fresh.Insert(l.index.Key(int(l.ring[slot])), slot))
		}
	}
	l.index = fresh
}
