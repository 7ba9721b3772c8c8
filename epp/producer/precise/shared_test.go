package precise

import (
	"slices"
	"testing"

	"github.com/eppsim/eppsim/epp"
	"github.com/eppsim/eppsim/internal/memo"
)

// TestRequestKeysShared: the memoized keys are RequestKeys' exactly, are
// computed once per request and token processor settings (another indexer
// with the same settings finds them), and differ with the settings, the
// model or the salt; requests RequestKeysShared does not memoize (several
// prompts) still get RequestKeys' answer.
func TestRequestKeysShared(t *testing.T) {
	tokens := make([]uint32, 100)
	for i := range tokens {
		tokens[i] = uint32(i*7919) % 128000
	}
	indexer := func(bs int, seed, algo string) *Indexer {
		h, err := NewHasher(bs, seed, algo)
		if err != nil {
			t.Fatal(err)
		}
		ix, err := NewIndex(0, 0)
		if err != nil {
			t.Fatal(err)
		}
		return NewIndexer(h, ix, nil, 1)
	}
	var m memo.Memo
	tr := &epp.TokenizedRequest{Prompts: [][]uint32{tokens}, CacheSalt: "s"}
	a, b := indexer(16, "", ""), indexer(16, "", "")
	want := a.RequestKeys("m", tr)
	got := a.RequestKeysShared(&m, "m", tr)
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("shared keys %v, want %v", got, want)
	}
	// A copy of the request's tokenization (same prompt array), another
	// router with the same settings: the memoized slice itself.
	tr2 := &epp.TokenizedRequest{Prompts: [][]uint32{tokens}, CacheSalt: "s"}
	if again := b.RequestKeysShared(&m, "m", tr2); &again[0][0] != &got[0][0] {
		t.Fatal("second computation with the same settings")
	}
	if m.Len() != 1 {
		t.Fatalf("memo holds %d values, want 1", m.Len())
	}
	for _, c := range []struct {
		x     *Indexer
		model string
		salt  string
	}{
		{indexer(64, "", ""), "m", "s"},
		{indexer(16, "seed", ""), "m", "s"},
		{indexer(16, "", AlgoXXH64), "m", "s"},
		{a, "other", "s"},
		{a, "m", ""},
	} {
		tr := &epp.TokenizedRequest{Prompts: [][]uint32{tokens}, CacheSalt: c.salt}
		want := c.x.RequestKeys(c.model, tr)
		if got := c.x.RequestKeysShared(&m, c.model, tr); !slices.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("%+v: shared keys %v, want %v", c, got, want)
		}
	}
	if m.Len() != 6 {
		t.Fatalf("memo holds %d values, want 6", m.Len())
	}
	multi := &epp.TokenizedRequest{Prompts: [][]uint32{tokens, tokens[:40]}}
	if got, want := a.RequestKeysShared(&m, "m", multi), a.RequestKeys("m", multi); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("several prompts: %v, want %v", got, want)
	}
	if m.Len() != 6 {
		t.Fatal("several prompts were memoized")
	}
}
