package replica

import "math/bits"

// blockIndex is the prefix cache's hash map (vLLM's cached_block_hash_to_block):
// block hash -> the oldest block holding it (same-hash blocks chain through
// block.dupNext).
//
// It replaces a Go map on the hottest path of a long-prompt replay: every
// newly allocated block evicts a cached one (lookup + delete) and every
// block that fills is registered (lookup + insert), so a full cache sees a
// constant churn of inserts and deletes. The table is open addressing with
// linear probing, sized once for the pool (it never holds more entries than
// the pool has blocks, so it never grows and its load stays at most 1/2),
// and deletion shifts later entries back instead of leaving tombstones, so
// probe sequences stay short however long the churn lasts. Lookups give the
// same answers as a map; nothing iterates it in an order that reaches
// results.
type blockIndex struct {
	slots []indexSlot
	shift uint // 64 - log2(len(slots))
	mask  int
	n     int
}

// indexSlot is one table entry. block 0 marks an empty slot: the null block
// is never cached, so no entry ever maps to it.
type indexSlot struct {
	hash  uint64
	block int32
}

// newBlockIndex returns an empty index for a pool of numBlocks blocks.
func newBlockIndex(numBlocks int) blockIndex {
	// At least twice as many slots as blocks, a power of two.
	logSize := max(bits.Len(uint(2*numBlocks-1)), 4)
	return blockIndex{
		slots: make([]indexSlot, 1<<logSize),
		shift: uint(64 - logSize),
		mask:  1<<logSize - 1,
	}
}

// home is the slot a hash probes first (Fibonacci hashing: block hashes are
// already well mixed, the multiply keeps the table robust if they were not).
func (x *blockIndex) home(h uint64) int {
	return int((h * 0x9e3779b97f4a7c15) >> x.shift)
}

// find returns the slot holding h and true, or the empty slot where h would
// be inserted and false.
func (x *blockIndex) find(h uint64) (int, bool) {
	i := x.home(h)
	for {
		s := &x.slots[i]
		if s.block == 0 {
			return i, false
		}
		if s.hash == h {
			return i, true
		}
		i = (i + 1) & x.mask
	}
}

// touch loads the slot h probes first and the one after it (a delete
// inspects it) and returns a value derived from them, which callers keep so
// that the loads are not optimized away. It is a software prefetch.
func (x *blockIndex) touch(h uint64) int32 {
	i := x.home(h)
	return x.slots[i].block + x.slots[(i+1)&x.mask].block
}

// get returns the block mapped to h.
func (x *blockIndex) get(h uint64) (int32, bool) {
	i, ok := x.find(h)
	return x.slots[i].block, ok
}

// insertAt stores h -> b in the empty slot i that find returned for h.
func (x *blockIndex) insertAt(i int, h uint64, b int32) {
	x.slots[i] = indexSlot{hash: h, block: b}
	x.n++
}

// deleteAt empties slot i and moves later entries of its probe run back so
// that every remaining entry stays reachable from its home slot (backward
// shift deletion, Knuth 6.4 Algorithm R).
func (x *blockIndex) deleteAt(i int) {
	j := i
	for {
		j = (j + 1) & x.mask
		if x.slots[j].block == 0 {
			break
		}
		// The entry at j may move to the hole at i unless its home slot
		// lies cyclically in (i, j], i.e. after the hole.
		k := x.home(x.slots[j].hash)
		var after bool
		if i <= j {
			after = i < k && k <= j
		} else {
			after = i < k || k <= j
		}
		if !after {
			x.slots[i] = x.slots[j]
			i = j
		}
	}
	x.slots[i] = indexSlot{}
	x.n--
}

// clear empties the index.
func (x *blockIndex) clear() {
	clear(x.slots)
	x.n = 0
}

// each calls f for every entry (checks and tests only).
func (x *blockIndex) each(f func(h uint64, b int32) bool) {
	for _, s := range x.slots {
		if s.block != 0 && !f(s.hash, s.block) {
			return
		}
	}
}
