package precise

import (
	"encoding/json"
	"os"
	"strconv"
	"testing"
)

const goldenPath = "../../../../shared/golden/epp-golden.json"

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
