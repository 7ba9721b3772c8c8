package precise

import (
	"slices"
	"testing"

	"github.com/eppsim/eppsim/epp"
	"github.com/eppsim/eppsim/internal/memo"
)

// newTestIndexer is an indexer with a fresh unbounded index and these
// hasher settings.
func newTestIndexer(t *testing.T, bs int, seed, algo string) *Indexer {
	t.Helper()
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
	indexer := func(bs int, seed, algo string) *Indexer { return newTestIndexer(t, bs, seed, algo) }
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

// TestOriginKeys: a BlockStored whose tokens are a routed prompt's (Origin)
// gets the keys routing memoized, sliced from the memo's own array, and
// exactly those that hashing the event's tokens gives; every condition
// under which the two could differ, or the memo has nothing, sends the
// event to the hasher (nil).
func TestOriginKeys(t *testing.T) {
	prompt := make([]uint32, 150) // 9 full blocks of 16, 2 of 64
	for i := range prompt {
		prompt[i] = uint32(i*104729) % 128000
	}
	x16, x64 := newTestIndexer(t, 16, "", ""), newTestIndexer(t, 64, "", "")
	// Routing: one request without a salt, one with.
	var plain, salted, unrouted memo.Memo
	keys := x16.RequestKeysShared(&plain, "m", &epp.TokenizedRequest{Prompts: [][]uint32{prompt}})[0]
	keys64 := x64.RequestKeysShared(&plain, "m", &epp.TokenizedRequest{Prompts: [][]uint32{prompt}})[0]
	saltKeys := x16.RequestKeysShared(&salted, "m", &epp.TokenizedRequest{Prompts: [][]uint32{prompt}, CacheSalt: "s"})[0]
	copied := slices.Clone(prompt)

	type tc struct {
		name   string
		x      *Indexer
		toks   []uint32
		origin epp.TokenOrigin
		parent uint64
		model  string
		extra  [][]string
		from   []uint64 // the memoized keys the result must be sliced from; nil: not reused
		at     int      // index of the result's first key in from
	}
	org := func(m *memo.Memo, off int, salt string) epp.TokenOrigin {
		return epp.TokenOrigin{Memo: m, Prompt: prompt, Offset: off, CacheSalt: salt}
	}
	cases := []tc{
		{name: "first blocks", x: x16, toks: prompt[:48], origin: org(&plain, 0, ""), model: "m", from: keys, at: 0},
		{name: "later blocks", x: x16, toks: prompt[32:144], origin: org(&plain, 32, ""), parent: keys[1], model: "m", from: keys, at: 2},
		{name: "trailing partial block ignored", x: x16, toks: prompt[128:150], origin: org(&plain, 128, ""), parent: keys[7], model: "m", from: keys, at: 8},
		{name: "router blocks of 64", x: x64, toks: prompt[64:128], origin: org(&plain, 64, ""), parent: keys64[0], model: "m", from: keys64, at: 1},
		{name: "salted request past block 0", x: x16, toks: prompt[16:64], origin: org(&salted, 16, "s"), parent: saltKeys[0], model: "m", from: saltKeys, at: 1},
		{name: "another chain before", x: x16, toks: prompt[32:64], origin: org(&plain, 32, ""), parent: keys[0], model: "m"},
		{name: "no parent past block 0", x: x16, toks: prompt[32:64], origin: org(&plain, 32, ""), model: "m"},
		{name: "a parent at block 0", x: x16, toks: prompt[:32], origin: org(&plain, 0, ""), parent: keys[3], model: "m"},
		{name: "salted request at block 0", x: x16, toks: prompt[:32], origin: org(&salted, 0, "s"), model: "m"},
		{name: "salt the memo lacks", x: x16, toks: prompt[:32], origin: org(&plain, 0, "t"), model: "m"},
		{name: "off a router block boundary", x: x64, toks: prompt[16:144], origin: org(&plain, 16, ""), parent: keys[0], model: "m"},
		{name: "off a router block boundary past block 0", x: x64, toks: prompt[80:144], origin: org(&plain, 80, ""), parent: keys64[0], model: "m"},
		{name: "another model", x: x16, toks: prompt[:32], origin: org(&plain, 0, ""), model: "lora"},
		{name: "extra keys", x: x16, toks: prompt[:32], origin: org(&plain, 0, ""), model: "m", extra: [][]string{{"img"}}},
		{name: "tokens copied", x: x16, toks: copied[:32], origin: org(&plain, 0, ""), model: "m"},
		{name: "offset not the tokens'", x: x16, toks: prompt[16:48], origin: org(&plain, 0, ""), model: "m"},
		{name: "not routed yet", x: x16, toks: prompt[:32], origin: org(&unrouted, 0, ""), model: "m"},
		{name: "no origin", x: x16, toks: prompt[:32], model: "m"},
		{name: "fewer tokens than a block", x: x64, toks: prompt[:48], origin: org(&plain, 0, ""), model: "m"},
	}
	for _, c := range cases {
		ev := &epp.KVEvent{Kind: epp.BlockStored, TokenIDs: c.toks, BlockSize: 16, ExtraKeys: c.extra, Origin: c.origin}
		got := c.x.originKeys(ev, c.parent, c.model)
		if c.from == nil {
			if got != nil {
				t.Errorf("%s: reused %v, want nil", c.name, got)
			}
			continue
		}
		want := c.x.hasher.Keys(c.parent, c.toks, c.model, c.x.realign(ev))
		if !slices.Equal(got, want) {
			t.Errorf("%s: keys %v, want the hashed %v", c.name, got, want)
		} else if len(got) == 0 || &got[0] != &c.from[c.at] || cap(got) != len(got) {
			t.Errorf("%s: keys not sliced from the memo at %d with a closed capacity", c.name, c.at)
		}
	}
}
