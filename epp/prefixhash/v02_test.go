package prefixhash

import (
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// le is the 8-byte little-endian form of h, as GIE v0.5.1's toBytes.
func le(h uint64) string {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], h)
	return string(b[:])
}

func x(s string) uint64 { return xxhash.Sum64String(s) }

// TestV02BlockHashesByHand checks V02BlockHashes against hashes written out
// from GIE v0.5.1's hashPrompt step by step: the model hash first, then
// xxh64(block ++ LE64(prev)) per full block, where every block after the
// first has had its first 8 bytes replaced by the hash two links back (the
// in-place append).
func TestV02BlockHashesByHand(t *testing.T) {
	a, b, c := strings.Repeat("a", 16), strings.Repeat("b", 16), strings.Repeat("c", 16)
	h0 := x("m")
	h1 := x(a + le(h0))
	h2 := x(le(h0) + b[8:] + le(h1))
	h3 := x(le(h1) + c[8:] + le(h2))
	cases := []struct {
		name, prompt string
		bs, max      int
		want         []uint64
	}{
		{"shorter than a block: nothing", "abc", 16, 256, nil},
		{"empty", "", 16, 256, nil},
		{"exactly one block", a, 16, 256, []uint64{h0, h1}},
		{"partial tail dropped", a + "xyz", 16, 256, []uint64{h0, h1}},
		{"three blocks and a tail", a + b + c + "ddddd", 16, 256, []uint64{h0, h1, h2, h3}},
		{"cut to maxPrefixBlocksToMatch blocks", a + b + c + "ddddd", 16, 2, []uint64{h0, h1, h2}},
		{"one block allowed", a + b, 16, 1, []uint64{h0, h1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := V02BlockHashes("m", tc.prompt, tc.bs, tc.max)
			if !slices.Equal(got, tc.want) {
				t.Errorf("V02BlockHashes(%q, bs %d, max %d) = %x, want %x", tc.prompt, tc.bs, tc.max, got, tc.want)
			}
		})
	}
	// The model seeds the chain: another model changes every hash.
	if o := V02BlockHashes("n", a+b, 16, 256); o[0] != x("n") || o[1] == h1 {
		t.Errorf("model n: %x", o)
	}
}

// TestV02BlockHashesAliasing: the first 8 characters of every block after
// the first do not count upstream, so prompts that differ only there share
// every hash; a difference in the first block or past byte 8 of a block
// does not.
func TestV02BlockHashesAliasing(t *testing.T) {
	base := strings.Repeat("a", 16) + "XXXXXXXX" + strings.Repeat("b", 8) + strings.Repeat("c", 16)
	same := strings.Repeat("a", 16) + "YYYYYYYY" + strings.Repeat("b", 8) + strings.Repeat("c", 16)
	diff := strings.Repeat("a", 16) + "XXXXXXXX" + "Z" + strings.Repeat("b", 7) + strings.Repeat("c", 16)
	hb, hs, hd := V02BlockHashes("m", base, 16, 256), V02BlockHashes("m", same, 16, 256), V02BlockHashes("m", diff, 16, 256)
	if !slices.Equal(hb, hs) {
		t.Errorf("prompts differing only in block 1's first 8 bytes: %x vs %x, want equal", hb, hs)
	}
	if hb[2] == hd[2] || hb[1] != hd[1] {
		t.Errorf("a difference at byte 24: %x vs %x", hb, hd)
	}
	// With 8-character blocks every block after the first is replaced
	// whole: only the first block's text counts.
	p1 := V02BlockHashes("m", "abcdefgh"+"11111111"+"22222222", 8, 256)
	p2 := V02BlockHashes("m", "abcdefgh"+"33333333"+"44444444", 8, 256)
	if !slices.Equal(p1, p2) || len(p1) != 4 {
		t.Errorf("8-byte blocks: %x vs %x", p1, p2)
	}
}

func TestV02Prompt(t *testing.T) {
	cases := []struct {
		name, body, want string
		err              bool
	}{
		{"completions", `{"model":"m","prompt":"Hello\nworld"}`, "Hello\nworld", false},
		{"chat, template per message", `{"model":"m","messages":[{"role":"system","content":"S"},{"role":"user","content":"Q?"}]}`,
			"<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ?<|im_end|>\n", false},
		{"chat: content blocks and roleless messages skipped", `{"messages":[{"role":"user","content":[{"type":"text","text":"x"}]},{"content":"no role"},7,{"role":"assistant","content":"A"}]}`,
			"<|im_start|>assistant\nA<|im_end|>\n", false},
		{"messages wins over prompt", `{"prompt":"p","messages":[{"role":"user","content":"m"}]}`, "<|im_start|>user\nm<|im_end|>\n", false},
		{"chat: nothing usable is an empty prompt", `{"messages":[{"role":"user","content":null}]}`, "", false},
		{"empty messages", `{"messages":[]}`, "", true},
		{"messages not a list", `{"messages":{"role":"user"}}`, "", true},
		{"messages null", `{"messages":null}`, "", true},
		{"prompt array", `{"prompt":["a","b"]}`, "", true},
		{"no prompt", `{"model":"m"}`, "", true},
		{"not JSON", `{`, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := V02Prompt([]byte(tc.body))
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want error %v", err, tc.err)
			}
			if err != nil && !errors.Is(err, ErrV02Prompt) {
				t.Errorf("err %v does not wrap ErrV02Prompt", err)
			}
			if got != tc.want {
				t.Errorf("prompt = %q, want %q", got, tc.want)
			}
		})
	}
}
