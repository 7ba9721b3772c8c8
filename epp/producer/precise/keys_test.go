package precise

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
)

const goldenPath = "../../../testdata/shared/golden/epp-golden.json"

func TestGoldenPreciseKeys(t *testing.T) {
	raw, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Precise []struct {
			BlockSize int      `json:"blockSizeTokens"`
			Algo      string   `json:"hashAlgorithm"`
			Seed      string   `json:"hashSeed"`
			Keys      []string `json:"keys_dec"`
			SaltKeys  []string `json:"keys_with_cache_salt_s1_dec"`
			Model     string   `json:"model"`
		} `json:"precise_block_keys"`
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Precise) != 4 {
		t.Fatalf("%d precise cases", len(g.Precise))
	}
	tokens := make([]uint32, 40)
	for i := range tokens {
		tokens[i] = uint32(i + 1)
	}
	for _, c := range g.Precise {
		algo := AlgoCBORFNV
		if c.Algo == "xxh64" {
			algo = AlgoXXH64
		}
		h, err := NewHasher(c.BlockSize, c.Seed, algo)
		if err != nil {
			t.Fatal(err)
		}
		for _, salted := range []bool{false, true} {
			want := c.Keys
			salt := ""
			if salted {
				want, salt = c.SaltKeys, "s1"
			}
			keys := h.Keys(0, tokens, c.Model, RequestExtras(len(tokens), c.BlockSize, nil, salt))
			if len(keys) != len(want) {
				t.Fatalf("%s seed %q salt %q: %d keys, want %d", c.Algo, c.Seed, salt, len(keys), len(want))
			}
			for i, k := range keys {
				if strconv.FormatUint(k, 10) != want[i] {
					t.Errorf("%s seed %q salt %q key %d = %d, want %s", c.Algo, c.Seed, salt, i, k, want[i])
				}
			}
		}
	}
}

// TestFNVBlockMatchesEncoder: the fused cbor-fnv hash of a block without
// extras is FNV-1a of the encoder's bytes, for parents and tokens of every
// CBOR size class and block lengths on both sides of the 1-byte and 2-byte
// array-header limits.
func TestFNVBlockMatchesEncoder(t *testing.T) {
	values := []uint64{0, 1, 23, 24, 255, 256, 65535, 65536, 1<<32 - 1, 1 << 32, 1<<64 - 1}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, 16, 23, 24, 64, 255, 256, 300} {
		for _, parent := range values {
			tokens := make([]uint32, n)
			for i := range tokens {
				v := values[rng.IntN(len(values))]
				if v > 1<<32-1 {
					v = uint64(rng.Uint32())
				}
				tokens[i] = uint32(v)
			}
			var enc cborEncoder
			enc.reset()
			enc.arrayHeader(3)
			enc.uint(parent)
			enc.arrayHeader(uint64(n))
			for _, tok := range tokens {
				enc.uint(uint64(tok))
			}
			enc.null()
			if got, want := fnvBlock(parent, tokens), fnv1a(enc.buf); got != want {
				t.Fatalf("n %d parent %d: %x, want %x", n, parent, got, want)
			}
		}
	}
}
