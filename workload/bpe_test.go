package workload

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// The tests here hold Tokenizer.Encode (bpe.go, bpe_split.go) to the ids of
// the tiktoken-go cl100k_base codec it replaces.

// codecEncode is the reference: the library's own encoder.
func codecEncode(t *Tokenizer, s string) ([]uint32, error) {
	if s == "" {
		return nil, nil
	}
	ids, _, err := t.codec.Encode(s)
	if err != nil {
		return nil, err
	}
	out := make([]uint32, len(ids))
	for i, id := range ids {
		out[i] = uint32(id)
	}
	return out, nil
}

// checkEncode fails t if Encode and the codec disagree on s.
func checkEncode(t testing.TB, s string) {
	t.Helper()
	tok := testTokenizer()
	want, werr := codecEncode(tok, s)
	got, gerr := tok.Encode(s)
	if (werr != nil) != (gerr != nil) {
		t.Fatalf("Encode(%q): error %v, codec error %v", abbrev(s), gerr, werr)
	}
	if !slices.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("Encode(%q):\n got %v\nwant %v\nfirst difference at token %d: got %q, want %q",
			abbrev(s), abbrevIDs(got), abbrevIDs(want), i, decodeAround(tok, got, i), decodeAround(tok, want, i))
	}
}

func abbrev(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

func abbrevIDs(ids []uint32) []uint32 {
	if len(ids) > 40 {
		return ids[:40]
	}
	return ids
}

// decodeAround renders the tokens around position i, one string per token.
func decodeAround(tok *Tokenizer, ids []uint32, i int) []string {
	var out []string
	for j := max(0, i-3); j < min(len(ids), i+4); j++ {
		s, _ := tok.Decode(ids[j : j+1])
		out = append(out, s)
	}
	return out
}

// bpeCorpus is hand-written text covering each alternative of the split
// regexp and its edge cases.
var bpeCorpus = []string{
	"",
	"a",
	" ",
	"hello world",
	"The quick brown fox jumps over the lazy dog. It's 3:45pm; isn't it?",
	"I'm sure you'll agree we'd've done it, they're here & we've won.",
	"DON'T SHOUT, I'M HERE, YOU'RE LATE, WE'VE GOT IT, SHE'LL COME, HE'D GO, IT'S OK",
	"'s 't 're 've 'm 'll 'd 'S 'T 'RE 'Re 'rE 'VE 'vE 'M 'LL 'Ll 'lL 'D 'x 'k 'K 'ſ 'ſx 'ſt 'sx 'llama 'lle 'Red",
	"''s'''t'r'v'l'rex'vex'llx 'ss '1 '  ' '\n'\t'é'Ж'中",
	"\"quoted\" (parens) [brackets] {braces} <angle> a+b-c*d/e=f%g^h|i~j`k$l#m@n!o?p",
	"123 4567 89012345 1,234,567.89 -42 +3.14e-10 0x1F 2024-01-02T03:04:05Z",
	"١٢٣٤٥ ⅠⅡⅢ ½¼ ²³ 𝟘𝟙𝟚 ０１２３ 一二三",
	"line one\nline two\r\nline three\rline four\n\n\nafter blank\r\n\r\n",
	"  leading and trailing  ",
	"a  \n  \n  x",
	"a \r\n \n\t x",
	"tabs\there\t\tand\t \tthere\t",
	"trailing newline spaces   \n   ",
	"\n\n\n",
	"   ",
	"\t",
	"x\u00a0y \u00a0 z\u2003w\u3000v\u2028u\u2029t\u0085s\u180er\u200bq\ufeffp",
	"\x1c\x1d\x1e\x1f\x7f\x00\x01 x\x0by\x0cz",
	"Ünïcödé façade naïve résumé coöperate Zürich São Paulo",
	"Привет, мир! Как дела? Ελληνικά κείμενα. Հայերեն. ქართული.",
	"中文文本，没有空格。日本語のテキスト、ひらがなとカタカナ。한국어 텍스트입니다.",
	"עברית ללא ניקוד וְעִם נִקּוּד. العربية مع التشكيل: كَتَبَ. हिन्दी देवनागरी। தமிழ் ไทยภาษา",
	"combining: e\u0301 a\u0300\u0316 n\u0303 Z\u0335\u0321\u0322 \u0301alone",
	"emoji: 😀👍🏽👨‍👩‍👧‍👦🇺🇸 ❤️ ✨🔥 🤖!!",
	"math: ∀x∈ℝ, x²≥0 ⇒ √x² = |x|; ∑ᵢ aᵢ ≤ ∞",
	"func main() {\n\tfmt.Println(\"hi\")\n\tfor i := 0; i < 10; i++ {\n\t\tx += i\n\t}\n}\n",
	"def f(x):\n    return x ** 2  # square\n\nclass A:\n    pass\n",
	"<html><body><p class=\"x\">Hello&nbsp;world</p></body></html>",
	"SELECT * FROM users WHERE id = 42 AND name LIKE '%smith%';",
	"https://example.com/path/to/page?query=1&other=two#frag user@example.com",
	"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
	strings.Repeat("=", 200) + "\n" + strings.Repeat("-", 97) + strings.Repeat(" ", 300) + "x",
	strings.Repeat("Supercalifragilisticexpialidocious", 8),
	strings.Repeat("0123456789", 30),
	"VGhlIHF1aWNrIGJyb3duIGZveCBqdW1wcyBvdmVyIHRoZSBsYXp5IGRvZy4gVGhlIHF1aWNrIGJyb3duIGZveCBqdW1wcyBvdmVyIHRoZSBsYXp5IGRvZy4=",
	"invalid: \xff \xfe\xfd a\x80b \xc3 \xe2\x82 \xe2\x82\xac \xf0\x9f\x98 \xed\xa0\x80 \xc0\xaf end\xc3",
	"\xff",
	"'\xff 's\xff \xffs",
	"\ufffd replacement char and its bytes \xef\xbf\xbd",
	"<|endoftext|> <|eot_id|> <|start_header_id|>user<|end_header_id|>",
}

func TestEncodeMatchesCodecCorpus(t *testing.T) {
	for _, s := range bpeCorpus {
		checkEncode(t, s)
		// Each prefix and suffix puts the split points elsewhere.
		for i := 0; i <= len(s); i++ {
			checkEncode(t, s[:i])
			checkEncode(t, s[i:])
		}
	}
	// Every contraction in every case, before each kind of follower.
	for _, c := range []string{"s", "t", "re", "ve", "m", "ll", "d", "ſ", "k", "x"} {
		for mask := 0; mask < 1<<len(c); mask++ {
			b := []byte(c)
			for i := range b {
				if mask&(1<<i) != 0 && b[i] < utf8.RuneSelf {
					b[i] = byte(unicode.ToUpper(rune(b[i])))
				}
			}
			for _, next := range []string{"", " ", "a", "A", "1", "!", "\n", "'", "é", "ſ"} {
				for _, prev := range []string{"", " ", "a", "1", "!", "\n"} {
					checkEncode(t, prev+"'"+string(b)+next)
				}
			}
		}
	}
}

// TestEncodeMatchesCodecFiles compares on the repository's fixtures, traces
// and Go sources.
func TestEncodeMatchesCodecFiles(t *testing.T) {
	var files []string
	for _, pat := range []string{"testdata/*", "../traces/*", "../traces/*/*", "*.go", "../../shared/traces/*.json*"} {
		m, _ := filepath.Glob(pat)
		files = append(files, m...)
	}
	if len(files) < 10 {
		t.Fatalf("found only %d files", len(files))
	}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			continue // a directory
		}
		if len(data) > 1<<20 && testing.Short() {
			data = data[:1<<20]
		}
		s := string(data)
		checkEncode(t, s)
		for line := range strings.Lines(s) {
			checkEncode(t, line)
		}
	}
}

// TestEncodeMatchesCodecAllRunes puts every rune in contexts that exercise
// each alternative, so a rune classified differently from the library's
// \s, \p{L} and \p{N} changes the output.
func TestEncodeMatchesCodecAllRunes(t *testing.T) {
	var b strings.Builder
	flush := func() {
		checkEncode(t, b.String())
		b.Reset()
	}
	for r := rune(0); r <= unicode.MaxRune; r++ {
		// Planes 4-13 are unassigned and 15-16 private use: sample them.
		// -short samples everywhere.
		if (testing.Short() || r >= 0x40000 && r < 0xE0000 || r >= 0xF0000) && r%61 != 0 ||
			r >= 0xD800 && r <= 0xDFFF {
			continue
		}
		c := string(r)
		fmt.Fprintf(&b, "a%s %s%sb '%s\n%s 1%s  %s!", c, c, c, c, c, c, c)
		if b.Len() > 4096 {
			flush()
		}
	}
	flush()
}

// randomText builds strings from fragments chosen to collide at the split
// regexp's boundaries.
func randomText(rng *rand.Rand, n int) string {
	frags := []string{
		" ", " ", "  ", "\t", "\n", "\r", "\r\n", "\n\n", "\u00a0", "\u3000", "\u2028", "\u0085", "\v", "\f",
		"a", "the", " the", "The", "ing", "tion", "é", "ſ", "Ж", "中文", "ー", "ひ", "\u0301", "ß", "İ",
		"'", "'s", "'S", "'t", "'re", "'Ve", "'LL", "'l", "'d", "'m", "'ſ", "'K",
		"0", "1", "12", "345", "٣", "½", "Ⅻ",
		".", ",", "!", "?", "...", "--", "==", "(", ")", "{", "}", "/", "\\", "\"", "`", "#", "$", "😀", "👍🏽", "\u200d", "\ufffd",
		"\xff", "\xc3", "\xe2\x82", "\x80", "\xed\xa0\x80",
	}
	var b strings.Builder
	for b.Len() < n {
		f := frags[rng.IntN(len(frags))]
		reps := 1
		if rng.IntN(20) == 0 {
			reps = 1 + rng.IntN(150) // long runs reach the heap merger
		}
		for range reps {
			b.WriteString(f)
		}
	}
	return b.String()
}

func TestEncodeMatchesCodecRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	n := 20000
	if testing.Short() {
		n = 2000
	}
	for range n {
		checkEncode(t, randomText(rng, 1+rng.IntN(200)))
	}
}

// TestMergeScanMatchesHeap checks that the two merge loops agree on pieces
// short enough for either (Encode uses the heap only above scanMaxLen).
func TestMergeScanMatchesHeap(t *testing.T) {
	tok := testTokenizer()
	if _, err := tok.Encode("x"); err != nil {
		t.Fatal(err)
	}
	v := tok.bpe
	rng := rand.New(rand.NewPCG(3, 4))
	var pieces []string
	for _, s := range bpeCorpus {
		for i := 0; i+2 <= len(s); i++ {
			pieces = append(pieces, s[i:min(len(s), i+2+rng.IntN(scanMaxLen-1))])
		}
	}
	for range 5000 {
		pieces = append(pieces, randomText(rng, 2+rng.IntN(scanMaxLen-1)))
	}
	for _, piece := range pieces {
		piece = piece[:min(len(piece), scanMaxLen)]
		if len(piece) < 2 {
			continue
		}
		scan := v.appendMerged(nil, piece, 0, len(piece))
		heap := v.appendMergedHeap(nil, piece, 0, len(piece))
		if !slices.Equal(scan, heap) {
			t.Fatalf("merge %q: scan %v, heap %v", piece, scan, heap)
		}
	}
}

func FuzzEncodeMatchesCodec(f *testing.F) {
	for _, s := range bpeCorpus {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkEncode(t, s)
	})
}

const benchChat = `Sure! Here's a quick overview of how transformers work, and why they've become the default architecture for language models.

1. Tokenization: the input text is split into tokens (roughly 4 characters each in English), and each token is mapped to an embedding vector.
2. Attention: every layer lets each token look at every earlier token and decide which ones matter. That's what lets the model resolve "it" in "The trophy didn't fit in the suitcase because it was too big."
3. Feed-forward layers: after attention, each position passes through a small MLP, which is where much of the model's factual knowledge seems to live.

A few practical notes:
- Context length is limited by memory: the KV cache grows linearly with the number of tokens, so a 128K-token prompt needs a lot of GPU memory.
- Prefix caching helps when many requests share a system prompt; the server can reuse the cached keys and values instead of recomputing them.
- Batching improves throughput, but long prompts can delay short ones (head-of-line blocking), so schedulers often split prefill into chunks.

Let me know if you'd like me to go deeper on any of these, e.g. rotary position embeddings, grouped-query attention, or speculative decoding. I'm happy to include code examples in Python or Go!
`

const benchCode = `package main

import (
	"fmt"
	"sort"
	"strings"
)

// wordCount returns the n most frequent words of text.
func wordCount(text string, n int) []string {
	counts := map[string]int{}
	for _, w := range strings.Fields(strings.ToLower(text)) {
		w = strings.Trim(w, ".,;:!?\"'()[]{}")
		if w != "" {
			counts[w]++
		}
	}
	words := make([]string, 0, len(counts))
	for w := range counts {
		words = append(words, w)
	}
	sort.Slice(words, func(i, j int) bool {
		if counts[words[i]] != counts[words[j]] {
			return counts[words[i]] > counts[words[j]]
		}
		return words[i] < words[j]
	})
	if len(words) > n {
		words = words[:n]
	}
	return words
}

func main() {
	for i, w := range wordCount("the cat and the hat; THE END", 3) {
		fmt.Printf("%2d: %-10s|\n", i+1, w)
	}
}
`

// BenchmarkEncode compares the library's encoder (codec) with Encode (bpe)
// on about 4 KB of chat-like English and of Go code.
func BenchmarkEncode(b *testing.B) {
	tok := testTokenizer()
	if _, err := tok.Encode("warm up"); err != nil {
		b.Fatal(err)
	}
	for _, in := range []struct{ name, text string }{
		{"chat", strings.Repeat(benchChat, 4096/len(benchChat)+1)[:4096]},
		{"code", strings.Repeat(benchCode, 4096/len(benchCode)+1)[:4096]},
	} {
		b.Run(in.name+"/codec", func(b *testing.B) {
			b.SetBytes(int64(len(in.text)))
			for b.Loop() {
				if _, err := codecEncode(tok, in.text); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(in.name+"/bpe", func(b *testing.B) {
			b.SetBytes(int64(len(in.text)))
			for b.Loop() {
				if _, err := tok.Encode(in.text); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
