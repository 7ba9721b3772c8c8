// Package blockmap is the hash map of the simulator's KV-block bookkeeping:
// 64-bit block hashes to 64-bit values, inline in one pointer-free slice,
// with stable entry positions and a touch operation for batched lookups.
// The replica's prefix cache (block hash -> block) and the EPP's
// approximate prefix index (block hash -> pods, and per pod hash -> LRU
// record) each do a few hundred lookups, inserts and deletes per routed
// request, which makes this table the hottest data structure of a long
// replay.
package blockmap

import (
	"math/bits"
	"unsafe"
)

// Map is a hash map from uint64 keys (block hashes) to uint64 values. The
// zero Map is empty and ready for Ref and Lookup; Find and Insert need an
// allocated one (New).
//
// It is an open-addressing table of seven-entry groups of one 128-byte
// block each (two cache lines that the processor fetches together). A
// control byte per entry — empty, or full with seven bits of the key's
// hash — lets a lookup test all the entries of a group at once, as in
// Abseil's "Swiss" tables. A key lives in the first group with an empty
// entry from its home group on, and each group counts the keys that
// passed it that way (its overflow), as in Folly's F14 tables: a lookup
// stops at the first group whose overflow is zero, and a deletion simply
// empties its entry and decrements the counts it incremented, so there
// are no tombstones to purge. At the load kept here nearly every key lives
// in its home group, so an operation costs one group's cache lines and
// few mispredicted branches. Entries never move until the table grows: a
// position (group*8 + lane) designates an entry until then.
//
// Compared with a Go map it keeps entries inline in one pointer-free slice
// (the garbage collector never scans it) and exposes positions and a
// Touch, which batched operations need. It answers exactly what
// a map would; its iteration order is never used for results.
type Map struct {
	groups []mapGroup
	shift  uint // 64 - log2(len(groups))
	n      int
}

// mapGroup holds the entries of lanes 0..6; byte 7 of the control word is
// unused (always empty, and masked out of every test).
type mapGroup struct {
	ctrl     uint64
	keys     [mapLanes]uint64
	vals     [mapLanes]uint64
	overflow uint64 // keys whose home group is before this one and that live after it
}

const (
	mapLanes  = 7
	posLanes  = 8    // position = group*posLanes + lane
	ctrlFull  = 0x80 // full control bytes are ctrlFull | seven hash bits; empty ones 0
	lanesLo   = 0x0101010101010101
	lanesHi   = 0x0080808080808080 // the high bits of lanes 0..6
	minGroups = 2
	// maxPerGroup is the average number of entries a group holds at
	// most (4/7 full); beyond, the table doubles.
	maxPerGroup = 4
)

// New returns an empty map of the given number of groups (a power
// of two).
func New(groups int) Map {
	return Map{groups: make([]mapGroup, groups), shift: uint(64 - bits.TrailingZeros(uint(groups)))}
}

// Bytes is the memory of a map of the given number of groups.
func Bytes(groups int) int64 { return int64(groups) * int64(unsafe.Sizeof(mapGroup{})) }

// GroupsFor is the number of groups a map of n entries gets.
func GroupsFor(n int) int {
	g := minGroups
	for n > maxPerGroup*g {
		g *= 2
	}
	return g
}

// Len is the number of entries.
func (m *Map) Len() int { return m.n }

// Positions is the number of entry positions, one more than the largest
// position the map can return before it grows: callers that keep data
// beside the entries index a slice of this length by position.
func (m *Map) Positions() int { return len(m.groups) * posLanes }

// hashBits returns key's home group and control byte. Fibonacci hashing:
// the top bits of the product pick the group, the next seven go in the
// control byte.
func (m *Map) hashBits(key uint64) (int, uint64) {
	p := key * 0x9e3779b97f4a7c15
	return int(p >> m.shift), ctrlFull | (p>>(m.shift-7))&0x7f
}

// Find returns the position of key's entry and true, or false. The map
// must be allocated.
func (m *Map) Find(key uint64) (pos int, found bool) {
	g, c := m.hashBits(key)
	// A key lives less than a whole table away from home: the bound only
	// matters if every group had an overflow.
	for range len(m.groups) {
		grp := &m.groups[g]
		if lane := grp.match(c, key); lane >= 0 {
			return g*posLanes + lane, true
		}
		if grp.overflow == 0 {
			break
		}
		g = (g + 1) & (len(m.groups) - 1)
	}
	return -1, false
}

// match returns the lane of the group holding key, whose control byte is
// c, or -1.
func (grp *mapGroup) match(c, key uint64) int {
	x := grp.ctrl ^ lanesLo*c
	// Lanes whose control byte is c: (x - 0x01…) &^ x has the high bit of
	// the lowest zero byte of x set, and of a higher one only if that is
	// zero or one; a false candidate fails the key comparison.
	for cand := (x - lanesLo) &^ x & lanesHi; cand != 0; cand &= cand - 1 {
		if lane := bits.TrailingZeros64(cand) / 8; grp.keys[lane] == key {
			return lane
		}
	}
	return -1
}

// Lookup is Find for a map that may be empty or unallocated.
func (m *Map) Lookup(key uint64) (int, bool) {
	if m.n == 0 {
		return -1, false
	}
	return m.Find(key)
}

// Get returns key's value, or 0 if key is absent.
func (m *Map) Get(key uint64) uint64 {
	pos, found := m.Lookup(key)
	if !found {
		return 0
	}
	return *m.Val(pos)
}

func (m *Map) Key(pos int) uint64  { return m.groups[pos/posLanes].keys[pos%posLanes] }
func (m *Map) Val(pos int) *uint64 { return &m.groups[pos/posLanes].vals[pos%posLanes] }

// Room reports whether one more entry fits without growing the table.
func (m *Map) Room() bool { return m.n+1 <= maxPerGroup*len(m.groups) }

// Insert stores key, which the map does not hold, with value v, and
// returns its position. There must be room.
func (m *Map) Insert(key, v uint64) int {
	home, c := m.hashBits(key)
	return m.place(home, m.firstWithRoom(home), c, key, v)
}

// FindOrInsert returns the position of key's entry and true if the map
// holds key; otherwise it stores key with value v (there must be room) and
// returns the new entry's position and false. It probes once where Find
// followed by Insert would probe twice.
func (m *Map) FindOrInsert(key, v uint64) (pos int, found bool) {
	home, c := m.hashBits(key)
	room := -1 // the first group on key's probe sequence with an empty lane
	g := home
	for range len(m.groups) {
		grp := &m.groups[g]
		if lane := grp.match(c, key); lane >= 0 {
			return g*posLanes + lane, true
		}
		if room < 0 && grp.ctrl&lanesHi != lanesHi {
			room = g
		}
		if grp.overflow == 0 {
			break
		}
		g = (g + 1) & (len(m.groups) - 1)
	}
	if room < 0 {
		room = m.firstWithRoom(g)
	}
	return m.place(home, room, c, key, v), false
}

// firstWithRoom returns the first group from g on with an empty lane.
func (m *Map) firstWithRoom(g int) int {
	for m.groups[g].ctrl&lanesHi == lanesHi {
		g = (g + 1) & (len(m.groups) - 1)
	}
	return g
}

// place stores key (control byte c, home group home) with value v in an
// empty lane of group g, the first with one from home on, and counts the
// entry in the overflow of the groups it passed.
func (m *Map) place(home, g int, c, key, v uint64) int {
	mask := len(m.groups) - 1
	for o := home; o != g; o = (o + 1) & mask {
		m.groups[o].overflow++
	}
	grp := &m.groups[g]
	lane := bits.TrailingZeros64(^grp.ctrl&lanesHi) / 8
	grp.ctrl |= c << (8 * uint(lane))
	grp.keys[lane] = key
	grp.vals[lane] = v
	m.n++
	return g*posLanes + lane
}

// DeleteAt removes the entry at pos. No other entry moves.
func (m *Map) DeleteAt(pos int) {
	g, lane := pos/posLanes, pos%posLanes
	grp := &m.groups[g]
	home, _ := m.hashBits(grp.keys[lane])
	mask := len(m.groups) - 1
	for o := home; o != g; o = (o + 1) & mask {
		m.groups[o].overflow--
	}
	grp.ctrl &^= 0xff << (8 * uint(lane))
	m.n--
}

// Ref returns a pointer to key's value, inserting key with value 0 first if
// it is absent (growing the table if it has no room, which moves entries:
// positions found before do not survive the call).
func (m *Map) Ref(key uint64) *uint64 {
	if m.groups == nil || !m.Room() {
		if pos, found := m.Lookup(key); found {
			return m.Val(pos)
		}
		m.grow()
	}
	pos, _ := m.FindOrInsert(key, 0)
	return m.Val(pos)
}

// grow re-inserts the entries into a table of twice as many groups (or,
// when unallocated, allocates the smallest).
func (m *Map) grow() {
	old := m.groups
	*m = New(max(minGroups, 2*len(old)))
	for i := range old {
		grp := &old[i]
		for full := grp.ctrl & lanesHi; full != 0; full &= full - 1 {
			lane := bits.TrailingZeros64(full) / 8
			m.Insert(grp.keys[lane], grp.vals[lane])
		}
	}
}

// Touch loads both cache lines of key's home group and returns a word of
// them. Batch operations touch all their keys first, without branching on
// what they load, so that the processor overlaps the cache misses that the
// dependent probe sequences would otherwise take one at a time; callers
// fold the result into a sink so that the loads are not optimised away.
func (m *Map) Touch(key uint64) uint64 {
	if len(m.groups) == 0 {
		return 0
	}
	g, _ := m.hashBits(key)
	return m.touchGroup(g)
}

// TouchAt is Touch for the group of an entry's position.
func (m *Map) TouchAt(pos int) uint64 { return m.touchGroup(pos / posLanes) }

func (m *Map) touchGroup(g int) uint64 {
	grp := &m.groups[g]
	return grp.ctrl ^ grp.overflow
}

// Clear removes every entry, keeping the table's size.
func (m *Map) Clear() {
	clear(m.groups)
	m.n = 0
}

// Each calls f for every entry, in table order, until f returns false. The
// order depends on the hashing; it is for checks and tests, not results.
func (m *Map) Each(f func(key, val uint64) bool) {
	for g := range m.groups {
		grp := &m.groups[g]
		for full := grp.ctrl & lanesHi; full != 0; full &= full - 1 {
			lane := bits.TrailingZeros64(full) / 8
			if !f(grp.keys[lane], grp.vals[lane]) {
				return
			}
		}
	}
}
