package prefixhash

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// TestChainHashMatchesXXHash pins the inlined 16-byte XXH64 of chainHash to
// the library's xxh64 of the same bytes.
func TestChainHashMatchesXXHash(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	cases := [][2]uint64{{0, 0}, {math.MaxUint64, math.MaxUint64}, {1, 0}, {0, 1}}
	for range 100000 {
		cases = append(cases, [2]uint64{rng.Uint64(), rng.Uint64()})
	}
	for _, c := range cases {
		var b [16]byte
		binary.LittleEndian.PutUint64(b[:8], c[0])
		binary.LittleEndian.PutUint64(b[8:], c[1])
		if got, want := chainHash(c[0], c[1]), xxhash.Sum64(b[:]); got != want {
			t.Fatalf("chainHash(%#x, %#x) = %#x, want %#x", c[0], c[1], got, want)
		}
	}
}
