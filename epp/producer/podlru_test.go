package producer

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// TestPodLRUMatchesSimpleLRU drives podLRU and upstream's golang-lru
// simplelru with the same random adds and removes and checks that both
// evict the same hashes in the same order and hold the same keys in the
// same recency order.
func TestPodLRUMatchesSimpleLRU(t *testing.T) {
	for _, capacity := range []int{1, 2, 3, 17, 100} {
		rng := rand.New(rand.NewPCG(uint64(capacity), 3))
		var got, want []uint64
		l := newPodLRU(capacity, func(h uint64) { got = append(got, h) })
		ref, err := simplelru.NewLRU[uint64, struct{}](capacity, func(h uint64, _ struct{}) { want = append(want, h) })
		if err != nil {
			t.Fatal(err)
		}
		keySpace := uint64(3 * capacity)
		for step := range 20000 {
			h := rng.Uint64N(keySpace) * 0x9e3779b97f4a7c15 // spread over the table
			if rng.IntN(10) == 0 {
				l.Remove(h)
				ref.Remove(h)
			} else {
				l.Add(h)
				ref.Add(h, struct{}{})
			}
			if !slices.Equal(got, want) {
				t.Fatalf("capacity %d step %d: evicted %v, want %v", capacity, step, got, want)
			}
			got, want = got[:0], want[:0]
			if l.Len() != ref.Len() || l.Contains(h) != ref.Contains(h) {
				t.Fatalf("capacity %d step %d: len %d contains %v, want %d %v", capacity, step, l.Len(), l.Contains(h), ref.Len(), ref.Contains(h))
			}
			if step%500 == 0 && !slices.Equal(l.Keys(), ref.Keys()) {
				t.Fatalf("capacity %d step %d: keys %v, want %v", capacity, step, l.Keys(), ref.Keys())
			}
		}
	}
}

// TestU64MapMatchesMap churns a u64Map against a Go map, with keys that
// share home slots so that deletions shift entries across the table's end.
func TestU64MapMatchesMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var m u64Map[uint64]
	ref := map[uint64]uint64{}
	for step := range 100000 {
		k := rng.Uint64N(300) << 57 // few distinct high bits: many collisions
		if step%3 == 0 {
			k = rng.Uint64N(1000)
		}
		switch rng.IntN(3) {
		case 0:
			m.Put(k, uint64(step)+1) // values are never zero
			ref[k] = uint64(step) + 1
		case 1:
			m.Delete(k)
			delete(ref, k)
		}
		if got := m.Get(k); got != ref[k] || m.Len() != len(ref) {
			t.Fatalf("step %d: Get(%x) = %d (len %d); want %d (len %d)", step, k, got, m.Len(), ref[k], len(ref))
		}
		if step%5000 == 0 {
			for k, w := range ref {
				if v := m.Get(k); v != w {
					t.Fatalf("step %d: Get(%x) = %d; want %d", step, k, v, w)
				}
			}
		}
	}
}
