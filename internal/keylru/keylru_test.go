package keylru

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// TestLRUMatchesSimpleLRU drives LRU and upstream's golang-lru simplelru
// with the same random adds (setting a value), gets, peeks and removes and
// checks that both evict the same keys in the same order, return the same
// values and hold the same keys in the same recency order. Capacities
// above presizeLimit make the index grow (rebuild moves the values).
func TestLRUMatchesSimpleLRU(t *testing.T) {
	for _, capacity := range []int{1, 2, 3, 17, 100, 1000, presizeLimit + 3000} {
		steps := 20000
		if capacity > presizeLimit {
			steps = 4 * capacity
		}
		// Mostly new keys (evictions), then mostly held ones (refreshes,
		// which fill the ring with dead records until it compacts).
		for _, universe := range []int{3 * capacity, capacity + capacity/8 + 1} {
			testLRUMatchesSimpleLRU(t, capacity, steps, universe, false)
			if capacity <= 1000 {
				// Colliding keys crowd a few groups: probes are linear in them.
				testLRUMatchesSimpleLRU(t, capacity, steps, universe, true)
			}
		}
	}
}

func testLRUMatchesSimpleLRU(t *testing.T, capacity, steps, universe int, colliding bool) {
	rng := rand.New(rand.NewPCG(uint64(capacity), 3))
	var got, want []uint64
	l := New[int](capacity)
	ref, err := simplelru.NewLRU[uint64, int](capacity, func(k uint64, _ int) { want = append(want, k) })
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]uint64, universe)
	for i := range keys {
		keys[i] = uint64(i) * 0x9e3779b97f4a7c15 // spread over the table
		if colliding {
			keys[i] = collidingKey(rng)
		}
	}
	for step := range steps {
		k := keys[rng.IntN(len(keys))]
		switch op := rng.IntN(20); {
		case op < 2:
			removed := false
			if op == 0 {
				removed = l.Remove(k)
			} else if pos, ok := l.Find(k); ok {
				l.RemoveAt(pos) // Remove by position
				removed = true
			}
			if removed {
				got = append(got, k)
			}
			ref.Remove(k)
		case op < 5:
			var v *int
			var ok bool
			if op < 4 {
				v, ok = l.Get(k)
			} else if pos, found := l.Find(k); found {
				v, ok = l.ValAt(pos), true // Get by position
				l.RefreshAt(pos)
			}
			rv, rok := ref.Get(k)
			if ok != rok || ok && *v != rv {
				t.Fatalf("capacity %d step %d: Get(%x) = %v %v, want %d %v", capacity, step, k, deref(v), ok, rv, rok)
			}
		case op < 6:
			v, ok := l.Peek(k)
			rv, rok := ref.Peek(k)
			if ok != rok || ok && *v != rv {
				t.Fatalf("capacity %d step %d: Peek(%x) = %v %v, want %d %v", capacity, step, k, deref(v), ok, rv, rok)
			}
		default:
			v, held, old, ok := l.Add(k)
			if ok {
				got = append(got, old)
			}
			if rv, rok := ref.Peek(k); held != rok || held && *v != rv || !held && *v != 0 {
				t.Fatalf("capacity %d step %d: Add(%x) found %d %v, want %d %v", capacity, step, k, *v, held, rv, rok)
			}
			*v = step
			ref.Add(k, step)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("capacity %d step %d: evicted %v, want %v", capacity, step, got, want)
		}
		got, want = got[:0], want[:0]
		if l.Len() != ref.Len() || l.Contains(k) != ref.Contains(k) {
			t.Fatalf("capacity %d step %d: len %d contains %v, want %d %v", capacity, step, l.Len(), l.Contains(k), ref.Len(), ref.Contains(k))
		}
		if step%max(500, capacity/2) == 0 && !slices.Equal(l.Keys(), ref.Keys()) {
			t.Fatalf("capacity %d step %d: keys differ", capacity, step)
		}
	}
}

func deref(v *int) any {
	if v == nil {
		return nil
	}
	return *v
}

// TestTouchOldest: touching changes nothing, and touches the next evictions
// (checked by counting them on a fresh LRU with a known order).
func TestTouchOldest(t *testing.T) {
	l := New[struct{}](4)
	for k := range uint64(4) {
		l.Add(k + 1)
	}
	l.Get(1) // order now 2 3 4 1
	_ = l.TouchOldest(10)
	_ = l.Touch(7)
	if want := []uint64{2, 3, 4, 1}; !slices.Equal(l.Keys(), want) {
		t.Fatalf("keys %v, want %v", l.Keys(), want)
	}
	if _, _, old, ok := l.Add(9); !ok || old != 2 {
		t.Fatalf("evicted %d %v, want 2", old, ok)
	}
}

// collidingKey returns a key whose hash product (blockmap's Fibonacci hashing) has one
// of three top-bit patterns, so that keys crowd a few home groups (the last
// ones among them, so that probe sequences wrap around) and share control
// bytes.
func collidingKey(rng *rand.Rand) uint64 {
	const inverse = 0xf1de83e19937733d // of 0x9e3779b97f4a7c15 modulo 2^64 (inverse*0x9e3779b97f4a7c15 == 1)
	top := []uint64{0, 6, 7}[rng.IntN(3)]
	return (top<<61 | rng.Uint64N(1<<4)<<53 | rng.Uint64N(1<<20)) * inverse
}
