package replica

import (
	"math/rand/v2"
	"testing"
)

// TestBlockIndexMatchesMap churns a small index (so probe runs wrap around
// the table) with random inserts, updates and deletes and checks every
// lookup against a Go map, including hashes that collide in their home slot.
func TestBlockIndexMatchesMap(t *testing.T) {
	for _, tc := range []struct {
		name      string
		numBlocks int
		keySpace  uint64 // hashes drawn from [0, keySpace) times a spread
		spread    uint64
	}{
		{"random hashes", 64, 1 << 62, 1},
		{"dense small hashes", 64, 200, 1},
		{"same home slot", 64, 200, 1 << 58}, // multiples of 2^58: few home slots
		{"tiny pool", 2, 10, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			x := newBlockIndex(tc.numBlocks)
			ref := map[uint64]int32{}
			for step := range 200000 {
				h := rng.Uint64N(tc.keySpace) * tc.spread
				switch op := rng.IntN(3); {
				case op == 0 && len(ref) < tc.numBlocks-1: // insert or update
					b := int32(1 + rng.IntN(tc.numBlocks-1))
					i, ok := x.find(h)
					if ok {
						x.slots[i].block = b
					} else {
						x.insertAt(i, h, b)
					}
					ref[h] = b
				case op == 1: // delete
					if i, ok := x.find(h); ok {
						x.deleteAt(i)
					}
					delete(ref, h)
				}
				if x.n != len(ref) {
					t.Fatalf("step %d: %d entries, want %d", step, x.n, len(ref))
				}
				got, ok := x.get(h)
				want, wok := ref[h]
				if ok != wok || got != want {
					t.Fatalf("step %d: get(%x) = %d, %v; want %d, %v", step, h, got, ok, want, wok)
				}
				if step%1000 == 0 {
					for k, v := range ref {
						if b, ok := x.get(k); !ok || b != v {
							t.Fatalf("step %d: get(%x) = %d, %v; want %d", step, k, b, ok, v)
						}
					}
					n := 0
					x.each(func(uint64, int32) bool { n++; return true })
					if n != len(ref) {
						t.Fatalf("step %d: each visits %d entries, want %d", step, n, len(ref))
					}
				}
			}
		})
	}
}
