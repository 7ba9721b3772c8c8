package workload

import (
	"bytes"
	"math"
	"slices"
	"testing"
)

func testSynth(t *testing.T, seed int64, bpt float64) blockSynth {
	t.Helper()
	lx, err := testTokenizer().Lexicon(bpt)
	if err != nil {
		t.Fatal(err)
	}
	return blockSynth{seed: uint64(seed), lex: lx}
}

// promptText extracts the prompt text from a completions body built by hashPrompt.
func promptText(t *testing.T, body []byte) []byte {
	t.Helper()
	_, rest, ok := bytes.Cut(body, []byte(`"prompt":"`))
	if !ok {
		t.Fatalf("no prompt in %q", body)
	}
	i := bytes.LastIndex(rest, []byte(`","max_tokens":`))
	return rest[:i]
}

func TestHashIDPrefixProperty(t *testing.T) {
	s := testSynth(t, 7, 4)
	model := jsonString("m")
	tests := []struct {
		name       string
		a, b       []int64
		inA, inB   int
		bs         int
		wantCommon int // tokens of the shared hash-id prefix
	}{
		{"mooncake shared first block", []int64{0, 1, 2}, []int64{0, 5}, 1100, 700, 512, 512},
		{"mooncake shared two blocks", []int64{0, 1, 2}, []int64{0, 1, 9, 10}, 1500, 1600, 512, 1024},
		{"alibaba 16-token blocks", []int64{4, 8, 15, 16}, []int64{4, 8, 23}, 60, 40, 16, 32},
		{"nothing shared", []int64{1, 2}, []int64{3, 2}, 600, 600, 512, 0},
		{"partial last block is a prefix of the full one", []int64{0, 1}, []int64{0, 1, 2}, 700, 1100, 512, 700},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ta, ba := s.hashPrompt(tt.a, tt.bs, tt.inA, model, 1)
			tb, bb := s.hashPrompt(tt.b, tt.bs, tt.inB, model, 1)
			if len(ta) != tt.inA || len(tb) != tt.inB {
				t.Fatalf("lengths %d, %d; want %d, %d", len(ta), len(tb), tt.inA, tt.inB)
			}
			common := 0
			for common < min(len(ta), len(tb)) && ta[common] == tb[common] {
				common++
			}
			// The first differing block differs at once, except for a chance
			// match of a few tokens (the lexicon has 4096 words).
			if common < tt.wantCommon || common > tt.wantCommon+2 {
				t.Fatalf("token prefixes agree on %d tokens, want %d", common, tt.wantCommon)
			}
			// Byte-identical text for the shared tokens.
			xa, xb := promptText(t, ba), promptText(t, bb)
			wa := textOf(t, s, ta[:tt.wantCommon])
			if !bytes.HasPrefix(xa, wa) || !bytes.HasPrefix(xb, wa) {
				t.Fatal("shared hash-id prefix does not give a shared text prefix")
			}
		})
	}
}

// textOf renders tokens through the lexicon's id -> word map.
func textOf(t *testing.T, s blockSynth, toks []uint32) []byte {
	t.Helper()
	word := map[uint32]string{}
	for i := range lexSlots {
		w, id := s.lex.Word(uint64(i) << lexSlotShift)
		word[id] = w
	}
	var b []byte
	for _, id := range toks {
		b = append(b, word[id]...)
	}
	return b
}

func TestHashIDTextTokenizesBack(t *testing.T) {
	for _, bpt := range []float64{3, 4, 5.5} {
		s := testSynth(t, 1, bpt)
		toks, body := s.hashPrompt([]int64{0, 42, 99}, 512, 1300, jsonString("m"), 3)
		text := promptText(t, body)
		enc, err := testTokenizer().Encode(string(text))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(enc, toks) {
			t.Fatalf("bpt %g: re-tokenized text differs from the synthesized tokens", bpt)
		}
		got := float64(len(text)) / float64(len(toks))
		if math.Abs(got-bpt) > 0.25 {
			t.Errorf("bytes per token %.3f, want about %g (lexicon mean %.3f)", got, bpt, s.lex.BytesPerToken())
		}
		if math.Abs(s.lex.BytesPerToken()-bpt) > 0.01 {
			t.Errorf("lexicon mean %.4f, want %g", s.lex.BytesPerToken(), bpt)
		}
	}
}

func TestHashIDSeedAndFormula(t *testing.T) {
	a := testSynth(t, 1, 4)
	b := testSynth(t, 2, 4)
	ta, _ := a.hashPrompt([]int64{5}, 512, 512, nil, 0)
	tb, _ := b.hashPrompt([]int64{5}, 512, 512, nil, 0)
	if slices.Equal(ta, tb) {
		t.Fatal("different seeds gave the same block")
	}
	// Token k of block h is the lexicon word at splitmix64(seed ^ h<<16 ^ k).
	for _, k := range []int{0, 1, 511} {
		_, id := a.lex.Word(splitmix64(1 ^ 5<<16 ^ uint64(k)))
		if ta[k] != id {
			t.Errorf("token %d = %d, want %d", k, ta[k], id)
		}
	}
}

// TestAppendBlockReference checks appendBlock against its rule written
// plainly: token k of block h is the Lexicon word and id at
// splitmix64(seed ^ h<<16 ^ k) (traces.md C.7).
func TestAppendBlockReference(t *testing.T) {
	blocks := []struct {
		h        uint64
		from, to int
	}{
		{0, 0, 0}, {0, 0, 1}, {7, 0, 512}, {7, 3, 300}, {maxHashID, 250, 260}, {maxHashID, 255, 257},
		{azureSystemBlock, 0, 2000}, {azureUniqueBase + 5<<12, 1, 513}, {9, 0, maxBlockSize}, {3, maxBlockSize - 10, maxBlockSize},
	}
	for _, bpt := range []float64{2.5, 4, 10} {
		s := testSynth(t, 0x5eed1234abcd, bpt)
		for _, b := range blocks {
			var wantToks []uint32
			var wantText []byte
			for k := b.from; k < b.to; k++ {
				w, id := s.lex.Word(splitmix64(s.seed ^ b.h<<16 ^ uint64(k)))
				wantToks = append(wantToks, id)
				wantText = append(wantText, w...)
			}
			for _, withText := range []bool{false, true} {
				// Append after earlier content, with and without spare capacity.
				for _, spare := range []int{0, 7, 1 << 20} {
					toks, text := s.appendBlock([]uint32{42}, append(make([]byte, 0, 3+spare), "xyz"...), withText, b.h, b.from, b.to)
					want := "xyz"
					if withText {
						want += string(wantText)
					}
					if !slices.Equal(toks, append([]uint32{42}, wantToks...)) || string(text) != want {
						t.Fatalf("bpt %g block %d [%d, %d) text %v spare %d: appendBlock differs from the reference", bpt, b.h, b.from, b.to, withText, spare)
					}
				}
			}
		}
	}
}

func TestLexSlot(t *testing.T) {
	for _, x := range []uint64{0, 1, 1 << 63, ^uint64(0)} {
		if got, want := lexSlot(x), splitmix64(x)>>lexSlotShift; got != want {
			t.Fatalf("lexSlot(%#x) = %d, want %d", x, got, want)
		}
	}
	x := uint64(1)
	for range 100000 {
		x = x*0x5851f42d4c957f2d + 0x14057b7ef767814f
		if got, want := lexSlot(x), splitmix64(x)>>lexSlotShift; got != want {
			t.Fatalf("lexSlot(%#x) = %d, want %d", x, got, want)
		}
	}
}

func TestSplitmix64(t *testing.T) {
	// Reference values of SplitMix64 seeded with 0: the first outputs are
	// splitmix64(0), splitmix64(0x9e3779b97f4a7c15), ...
	want := []uint64{0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f}
	var state uint64
	for i, w := range want {
		if got := splitmix64(state); got != w {
			t.Errorf("output %d = %#x, want %#x", i, got, w)
		}
		state += 0x9e3779b97f4a7c15
	}
}

func TestSyntheticOutput(t *testing.T) {
	a := SyntheticOutput(1, 7, 100)
	b := SyntheticOutput(1, 7, 100)
	c := SyntheticOutput(1, 8, 100)
	if !slices.Equal(a, b) || slices.Equal(a, c) || len(a) != 100 || SyntheticOutput(1, 1, 0) != nil {
		t.Fatal("SyntheticOutput is not deterministic per (seed, id)")
	}
	for _, id := range a {
		if id < 1000 || id >= 100000 {
			t.Fatalf("id %d outside [1000, 100000)", id)
		}
	}
}
