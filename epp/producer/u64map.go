package producer

import "math/bits"

// u64Map is a hash map from uint64 keys (block hashes) to non-zero values,
// for the approximate prefix index's hot path: every routed request inserts
// a few hundred hashes and evicts as many. The zero value of V means
// "absent": Get returns it for a missing key, and callers never store it
// (Delete removes a key). That keeps a slot at key plus value, with no
// occupancy flag.
//
// Compared with a Go map it keeps entries inline in one pointer-free slice
// (the garbage collector never scans it), uses linear probing at a load of
// at most 1/2, and deletes by shifting later entries back rather than
// leaving tombstones, so probe sequences stay short under the constant
// insert/delete churn of a full LRU. It answers exactly what a map would;
// its iteration order is never used for results.
type u64Map[V comparable] struct {
	slots []u64Slot[V]
	shift uint // 64 - log2(len(slots))
	n     int
}

type u64Slot[V comparable] struct {
	key uint64
	val V // zero: empty slot
}

const u64MapMinLog = 4

func (m *u64Map[V]) init(logSize int) {
	m.slots = make([]u64Slot[V], 1<<logSize)
	m.shift = uint(64 - logSize)
	m.n = 0
}

// home is the first slot key probes (Fibonacci hashing).
func (m *u64Map[V]) home(key uint64) int {
	return int((key * 0x9e3779b97f4a7c15) >> m.shift)
}

// find returns the slot holding key and true, or the free slot where key
// would go and false. The map must be initialised.
func (m *u64Map[V]) find(key uint64) (int, bool) {
	var zero V
	mask := len(m.slots) - 1
	for i := m.home(key); ; i = (i + 1) & mask {
		s := &m.slots[i]
		if s.val == zero {
			return i, false
		}
		if s.key == key {
			return i, true
		}
	}
}

// Len is the number of entries.
func (m *u64Map[V]) Len() int { return m.n }

// Get returns key's value, or the zero value if key is absent.
func (m *u64Map[V]) Get(key uint64) V {
	if m.n == 0 {
		var zero V
		return zero
	}
	i, _ := m.find(key)
	return m.slots[i].val
}

// Put sets key's value; v must not be the zero value.
func (m *u64Map[V]) Put(key uint64, v V) {
	if v == *new(V) {
		panic("producer: u64Map.Put of the zero value")
	}
	if m.slots == nil {
		m.init(u64MapMinLog)
	}
	i, ok := m.find(key)
	if !ok {
		if 2*(m.n+1) > len(m.slots) {
			m.grow()
			i, _ = m.find(key)
		}
		m.slots[i].key = key
		m.n++
	}
	m.slots[i].val = v
}

// Delete removes key if present.
func (m *u64Map[V]) Delete(key uint64) {
	if m.n == 0 {
		return
	}
	if i, ok := m.find(key); ok {
		m.deleteAt(i)
	}
}

// deleteAt empties slot i and moves later entries of its probe run back so
// that every remaining entry stays reachable from its home slot (backward
// shift deletion, Knuth 6.4 Algorithm R).
func (m *u64Map[V]) deleteAt(i int) {
	var zero V
	mask := len(m.slots) - 1
	j := i
	for {
		j = (j + 1) & mask
		if m.slots[j].val == zero {
			break
		}
		// The entry at j may fill the hole at i unless its home slot lies
		// cyclically in (i, j], after the hole.
		k := m.home(m.slots[j].key)
		var after bool
		if i <= j {
			after = i < k && k <= j
		} else {
			after = i < k || k <= j
		}
		if !after {
			m.slots[i] = m.slots[j]
			i = j
		}
	}
	m.slots[i] = u64Slot[V]{}
	m.n--
}

// grow doubles the table.
func (m *u64Map[V]) grow() {
	var zero V
	old := m.slots
	m.init(bits.Len(uint(len(old))))
	for _, s := range old {
		if s.val != zero {
			i, _ := m.find(s.key)
			m.slots[i] = s
			m.n++
		}
	}
}
