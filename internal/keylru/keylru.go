// Package keylru is an exact LRU cache of 64-bit keys (block hashes) with a
// small value per key, in pointer-free slices. It has the semantics of
// hashicorp golang-lru's simplelru.LRU as upstream llm-d uses it for its
// block indexes (pinned by TestLRUMatchesSimpleLRU):
//
//   - Add of a present key makes it the most recent and keeps its value;
//   - Add of a new key makes it the most recent with a zero value and,
//     when that exceeds the capacity, evicts the least recent key, which
//     Add returns (upstream reports it through the eviction callback);
//   - Get makes a present key the most recent, Peek does not;
//   - Remove drops a key.
//
// The EPP's approximate index (one LRU of block hashes per pod) and its
// precise index (request keys → pod entries, engine keys → request keys)
// are the hottest structures of the router in a long-prompt replay, where
// every request inserts, refreshes and evicts a few hundred keys. Two
// choices keep the cache misses and mispredicted branches per operation low:
//
//   - The recency order is a log rather than a linked list: the ring holds
//     the entries in the order they were last refreshed, and refreshing an
//     entry appends it anew and marks its old record dead. The least recent
//     entry is then the first live record at the tail, found by a
//     sequential scan, instead of a chain of dependent misses through list
//     neighbours. When the ring fills up, compact drops the dead records;
//     the ring is at least four times larger than the live records (sized
//     so up front), so that this costs at most a third of a record move per
//     push.
//   - The key → record index is a blockmap.Map, whose entries never move
//     until it grows, so a ring record holds its entry's position (an
//     eviction needs no lookup) and the values live in a slice indexed by
//     that position.
//
// Nothing is allocated per entry and, for a pointer-free V, nothing is left
// for the garbage collector to scan.
package keylru

import (
	"math/bits"

	"github.com/eppsim/eppsim/internal/blockmap"
)

// LRU is an LRU of at most a fixed number of uint64 keys, each with a V.
// It is not safe for concurrent use.
type LRU[V any] struct {
	capacity int

	// The records of sequences [tail, head) are in ring (the record of
	// sequence s at ring[s&ringMask]), the least recent first; the live
	// ones are the LRU's content. A record is the position of its key's
	// index entry, so that evicting it needs no lookup.
	ring       []uint32
	dead       []uint64 // one bit per ring slot: its record was superseded or removed
	ringMask   uint64
	tail, head uint64

	index blockmap.Map // key -> ring slot of its live record
	vals  []V          // by index position
}

// ringGrowth is the factor between a compacted ring's size and the live
// records it holds (see the package comment).
const ringGrowth = 4

// presizeLimit bounds the entries a new LRU allocates room for up front:
// enough for the capacities that vLLM's KV caches give, without reserving
// much memory for a huge configured capacity that may never fill.
const presizeLimit = 1 << 16

// New returns an empty LRU with room for capacity keys (up to presizeLimit;
// beyond, it grows), so that filling it up rebuilds nothing. capacity must
// be positive.
func New[V any](capacity int) *LRU[V] {
	n := min(capacity, presizeLimit)
	size := max(64, 1<<bits.Len(uint(ringGrowth*(n+1)-1)))
	index := blockmap.New(blockmap.GroupsFor(n))
	return &LRU[V]{
		capacity: capacity,
		ring:     make([]uint32, size),
		dead:     make([]uint64, size/64),
		ringMask: uint64(size - 1),
		index:    index,
		vals:     make([]V, index.Positions()),
	}
}

// Len is the number of keys held.
func (l *LRU[V]) Len() int { return l.index.Len() }

// Capacity is the number of keys the LRU holds at most.
func (l *LRU[V]) Capacity() int { return l.capacity }

// Add makes key the most recent key, inserting it with a zero value if it
// is absent, and returns its value; held reports whether key was present.
// When inserting evicts the least recent key, Add returns it and true.
// The value pointer is valid until the next Add or Remove.
func (l *LRU[V]) Add(key uint64) (val *V, held bool, evicted uint64, ok bool) {
	if l.index.Len() < l.capacity && l.index.Room() {
		// Nothing to evict and room to insert: one probe finds or inserts.
		pos, found := l.index.FindOrInsert(key, 0)
		if found {
			l.refresh(pos)
			return &l.vals[pos], true, 0, false
		}
		*l.index.Val(pos) = l.pushHead(pos)
		var zero V
		l.vals[pos] = zero
		return &l.vals[pos], false, 0, false
	}
	if pos, found := l.index.Find(key); found {
		l.refresh(pos)
		return &l.vals[pos], true, 0, false
	}
	if l.index.Len() >= l.capacity {
		// golang-lru pushes the new entry before it evicts the oldest; the
		// end state is the same, as the evicted key is never key.
		pos := int(l.popTail())
		evicted, ok = l.index.Key(pos), true
		l.index.DeleteAt(pos)
	}
	if !l.index.Room() {
		l.rebuild()
	}
	pos := l.index.Insert(key, 0)
	slot := l.pushHead(pos) // a compaction leaves key's entry, not yet in the ring, alone
	*l.index.Val(pos) = slot
	var zero V
	l.vals[pos] = zero
	return &l.vals[pos], false, evicted, ok
}

// Get returns key's value and makes key the most recent, or returns false.
// The value pointer is valid until the next Add or Remove.
func (l *LRU[V]) Get(key uint64) (*V, bool) {
	pos, found := l.index.Lookup(key)
	if !found {
		return nil, false
	}
	l.refresh(pos)
	return &l.vals[pos], true
}

// Peek returns key's value without touching its recency, or false.
func (l *LRU[V]) Peek(key uint64) (*V, bool) {
	pos, found := l.index.Lookup(key)
	if !found {
		return nil, false
	}
	return &l.vals[pos], true
}

// Find returns the position of key's entry, without touching its
// recency, or false. A position designates the entry until the next Add
// (which may rebuild the index) or its removal; ValAt, RefreshAt and
// RemoveAt act on it, so that an operation that decides after looking at
// a value whether to refresh or drop its key looks the key up once.
func (l *LRU[V]) Find(key uint64) (pos int, found bool) { return l.index.Lookup(key) }

// ValAt returns the value of the entry at pos (from Find).
func (l *LRU[V]) ValAt(pos int) *V { return &l.vals[pos] }

// RefreshAt makes the entry at pos the most recent: Get's effect.
func (l *LRU[V]) RefreshAt(pos int) { l.refresh(pos) }

// RemoveAt drops the entry at pos: Remove's effect.
func (l *LRU[V]) RemoveAt(pos int) {
	l.markDead(*l.index.Val(pos))
	l.index.DeleteAt(pos)
}

// Contains reports whether key is held, without touching its recency.
func (l *LRU[V]) Contains(key uint64) bool {
	_, found := l.index.Lookup(key)
	return found
}

// Remove drops key and reports whether it was held.
func (l *LRU[V]) Remove(key uint64) bool {
	pos, found := l.index.Lookup(key)
	if !found {
		return false
	}
	l.RemoveAt(pos)
	return true
}

// Keys returns the keys from the least to the most recent, as
// simplelru.Keys does.
func (l *LRU[V]) Keys() []uint64 {
	out := make([]uint64, 0, l.Len())
	for s := l.tail; s != l.head; s++ {
		if slot := s & l.ringMask; !l.isDead(slot) {
			out = append(out, l.index.Key(int(l.ring[slot])))
		}
	}
	return out
}

// Touch loads the index group that an operation on key probes first and
// returns a word of it (see blockmap.Map.Touch): a batch of operations
// touches all its keys first so that their cache misses overlap.
func (l *LRU[V]) Touch(key uint64) uint64 { return l.index.Touch(key) }

// TouchOldest touches the index entries of the n least recent keys, those
// that the next n evictions would take if nothing else changed before them.
// It changes nothing.
func (l *LRU[V]) TouchOldest(n int) uint64 {
	var sink uint64
	for s := l.tail; n > 0 && s != l.head; s++ {
		if slot := s & l.ringMask; !l.isDead(slot) {
			sink ^= l.index.TouchAt(int(l.ring[slot]))
			n--
		}
	}
	return sink
}

// refresh makes the entry at pos the most recent.
func (l *LRU[V]) refresh(pos int) {
	rec := l.index.Val(pos)
	if *rec == (l.head-1)&l.ringMask {
		return // already the most recent
	}
	l.markDead(*rec)
	// pushHead may compact, which rewrites index values but never moves
	// index entries.
	*rec = l.pushHead(pos)
}

func (l *LRU[V]) isDead(slot uint64) bool { return l.dead[slot/64]&(1<<(slot%64)) != 0 }

func (l *LRU[V]) markDead(slot uint64) { l.dead[slot/64] |= 1 << (slot % 64) }

// popTail removes the least recent live record and returns it (its index
// entry is the caller's). The LRU must not be empty.
func (l *LRU[V]) popTail() uint32 {
	for {
		slot := l.tail & l.ringMask
		l.tail++
		if !l.isDead(slot) {
			return l.ring[slot]
		}
	}
}

// pushHead adds a live record of the key whose index entry is at pos at the
// head and returns its ring slot.
func (l *LRU[V]) pushHead(pos int) uint64 {
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
func (l *LRU[V]) compact() {
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

// rebuild re-inserts the held keys, in recency order, into an index with
// room for more, moves their values along and points their records at
// their new positions.
func (l *LRU[V]) rebuild() {
	fresh := blockmap.New(blockmap.GroupsFor(l.index.Len() + 1))
	vals := make([]V, fresh.Positions())
	for s := l.tail; s != l.head; s++ {
		slot := s & l.ringMask
		if l.isDead(slot) {
			continue
		}
		old := int(l.ring[slot])
		pos := fresh.Insert(l.index.Key(old), slot)
		vals[pos] = l.vals[old]
		l.ring[slot] = uint32(pos)
	}
	l.index, l.vals = fresh, vals
}
