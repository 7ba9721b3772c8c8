package blockmap

import (
	"math/bits"
	"math/rand/v2"
	"testing"
)

// collidingKey returns a key whose hash product (Map.hashBits) has one
// of three top-bit patterns, so that keys crowd a few home groups (the last
// ones among them, so that probe sequences wrap around) and share control
// bytes.
func collidingKey(rng *rand.Rand) uint64 {
	const inverse = 0xf1de83e19937733d // of 0x9e3779b97f4a7c15 modulo 2^64 (inverse*0x9e3779b97f4a7c15 == 1)
	top := []uint64{0, 6, 7}[rng.IntN(3)]
	return (top<<61 | rng.Uint64N(1<<4)<<53 | rng.Uint64N(1<<20)) * inverse
}

// TestMapMatchesGoMap churns a Map against a Go map, with colliding
// keys, so that groups fill up, deletions leave tombstones, probe sequences
// wrap around and the map rebuilds.
func TestMapMatchesGoMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var m Map
	ref := map[uint64]uint64{}
	var keys []uint64
	for range 400 {
		keys = append(keys, collidingKey(rng))
	}
	for range 100 {
		keys = append(keys, rng.Uint64N(1000))
	}
	for step := range 200000 {
		k := keys[rng.IntN(len(keys))]
		switch rng.IntN(4) {
		case 0:
			*m.Ref(k) = uint64(step)
			ref[k] = uint64(step)
		case 3:
			if m.groups == nil || !m.Room() {
				break
			}
			pos, found := m.FindOrInsert(k, uint64(step))
			want, held := ref[k]
			if !held {
				want = uint64(step) // inserted
			}
			if found != held || *m.Val(pos) != want {
				t.Fatalf("step %d: FindOrInsert(%x) = %d, %v; held %v", step, k, *m.Val(pos), found, held)
			}
			if !found {
				ref[k] = uint64(step)
			}
		case 1:
			if pos, ok := m.Lookup(k); ok {
				m.DeleteAt(pos)
			}
			delete(ref, k)
		}
		want, held := ref[k]
		if pos, ok := m.Lookup(k); ok != held || (ok && *m.Val(pos) != want) || m.Len() != len(ref) {
			t.Fatalf("step %d: lookup(%x) = %v (len %d); want %d %v (len %d)", step, k, ok, m.Len(), want, held, len(ref))
		}
		if step%5000 == 0 {
			for k, w := range ref {
				if v := m.Get(k); v != w {
					t.Fatalf("step %d: Get(%x) = %d; want %d", step, k, v, w)
				}
			}
			checkOverflow(t, &m)
		}
	}
}

// checkOverflow recounts every group's overflow: the entries living after
// the group whose home group is at or before it on their probe sequence.
func checkOverflow(t *testing.T, m *Map) {
	t.Helper()
	want := make([]uint64, len(m.groups))
	mask := len(m.groups) - 1
	for g := range m.groups {
		for full := m.groups[g].ctrl & lanesHi; full != 0; full &= full - 1 {
			home, _ := m.hashBits(m.groups[g].keys[bits.TrailingZeros64(full)/8])
			for o := home; o != g; o = (o + 1) & mask {
				want[o]++
			}
		}
	}
	for g := range m.groups {
		if m.groups[g].overflow != want[g] {
			t.Fatalf("group %d: overflow %d, want %d", g, m.groups[g].overflow, want[g])
		}
	}
}
