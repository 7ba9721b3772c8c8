package prefixhash

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/eppsim/eppsim/epp"
	"github.com/eppsim/eppsim/internal/memo"
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

// TestSharedTokensAndHashes: TokenizeShared gives what Tokenize gives, one
// shared value per memo whatever the estimator instance (equal configs),
// and GetBlockHashes memoizes exactly BlockHashes' hashes of shared tokens
// only.
func TestSharedTokensAndHashes(t *testing.T) {
	for _, tc := range []struct{ path, body string }{
		{"/v1/completions", `{"model":"m","prompt":"` + strings.Repeat("abcdefgh ", 100) + `","cache_salt":"s"}`},
		{"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("xyz ", 300) + `"}]}`},
		{"/v1/completions", `{"prompt":""}`},
		{"/v1/completions", `{"prompt":`},
	} {
		e1, _ := NewEstimator(nil)
		e2, _ := NewEstimator(nil)
		want, werr := e1.Tokenize(tc.path, []byte(tc.body))
		m := new(memo.Memo)
		got, gerr := e1.TokenizeShared(m, tc.path, []byte(tc.body))
		again, _ := e2.TokenizeShared(m, tc.path, []byte(tc.body))
		if fmt.Sprint(got, gerr) != fmt.Sprint(want, werr) || again != got {
			t.Fatalf("%s: shared %+v %v (again %p), want %+v %v", tc.body[:20], got, gerr, again, want, werr)
		}
		if got == nil {
			continue
		}
		req := &epp.Request{TargetModel: "m", Tokenized: got, Memo: m}
		h := GetBlockHashes(req, 64, 100)
		if !slices.EqualFunc(h, BlockHashes("m", got.CacheSalt, got.Prompts, 64, 100), slices.Equal) ||
			&GetBlockHashes(req, 64, 100)[0][0] != &h[0][0] {
			t.Fatalf("%s: hashes not memoized as computed", tc.body[:20])
		}
		// A request's own tokens are not memoized.
		own := *got
		req.Tokenized = &own
		if n := m.Len(); &GetBlockHashes(req, 64, 100)[0][0] == &h[0][0] || m.Len() != n {
			t.Fatal("hashes of unshared tokens memoized")
		}
	}
}
