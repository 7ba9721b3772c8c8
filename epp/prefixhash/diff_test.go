package prefixhash

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// genJSON builds random request-like JSON: the keys the fast path knows
// (and case/escape variants), strings with escapes, surrogates and invalid
// bytes, nulls, numbers and nesting.
type genJSON struct {
	r *rand.Rand
	b strings.Builder
	// keys and numbers replace genKeys and the default number literals
	// when set.
	keys, numbers []string
}

var genKeys = []string{"messages", "prompt", "cache_salt", "tools", "token_ids", "role", "content", "type", "text",
	"image_url", "video_url", "input_audio", "audio_url", "model", "name", "Messages", "PROMPT", "rol\\u0065", "cache_Salt", "x"}

var genStrs = []string{"", "user", "assistant", "text", "image_url", "hello", "a\\u00e9", "\\ud83d\\ude00", "\\ud800", "\\ud800\\u0041",
	"q\\\"x", "tab\\t", "\\/", "\xff", "héllo", "\\u0000", "s1"}

func (g *genJSON) str() {
	g.b.WriteByte('"')
	for n := g.r.IntN(3); n >= 0; n-- {
		g.b.WriteString(genStrs[g.r.IntN(len(genStrs))])
	}
	g.b.WriteByte('"')
}

func (g *genJSON) value(depth int) {
	k := g.r.IntN(10)
	if depth > 4 {
		k = g.r.IntN(4)
	}
	switch k {
	case 0, 1:
		g.str()
	case 2:
		if g.numbers != nil && g.r.IntN(2) == 0 {
			g.b.WriteString(g.numbers[g.r.IntN(len(g.numbers))])
			break
		}
		g.b.WriteString([]string{"null", "true", "1", "-2.5e3", "0", "7"}[g.r.IntN(6)])
	case 3:
		g.str()
	case 4, 5, 6:
		g.object(depth + 1)
	default:
		g.b.WriteByte('[')
		for i := g.r.IntN(4); i > 0; i-- {
			g.value(depth + 1)
			if i > 1 {
				g.b.WriteByte(',')
			}
		}
		g.b.WriteByte(']')
	}
}

func (g *genJSON) object(depth int) {
	g.b.WriteByte('{')
	n := g.r.IntN(5)
	for i := 0; i < n; i++ {
		if i > 0 {
			g.b.WriteByte(',')
		}
		keys := genKeys
		if g.keys != nil {
			keys = g.keys
		}
		g.b.WriteString(`"` + keys[g.r.IntN(len(keys))] + `":`)
		g.value(depth)
	}
	g.b.WriteByte('}')
}

// chatish generates bodies close to real chat/completions requests so the
// fast path claims many of them.
func (g *genJSON) chatish() string {
	g.b.Reset()
	if g.r.IntN(3) == 0 {
		g.object(0)
		return g.b.String()
	}
	g.b.WriteString(`{"model":"m"`)
	if g.r.IntN(2) == 0 {
		g.b.WriteString(`,"cache_salt":`)
		g.str()
	}
	if g.r.IntN(2) == 0 {
		g.b.WriteString(`,"prompt":`)
		if g.r.IntN(2) == 0 {
			g.str()
		} else {
			g.b.WriteString("[")
			for i := g.r.IntN(3); i > 0; i-- {
				g.str()
				if i > 1 {
					g.b.WriteByte(',')
				}
			}
			g.b.WriteString("]")
		}
	} else {
		g.b.WriteString(`,"messages":[`)
		for i := g.r.IntN(4); i > 0; i-- {
			g.b.WriteString(`{"role":`)
			g.str()
			g.b.WriteString(`,"content":`)
			if g.r.IntN(2) == 0 {
				g.str()
			} else {
				g.b.WriteString(`[{"type":"text","text":`)
				g.str()
				g.b.WriteString(`},`)
				g.object(2)
				g.b.WriteString(`]`)
			}
			if g.r.IntN(3) == 0 {
				g.b.WriteString(`,"name":`)
				g.value(2)
			}
			g.b.WriteString(`}`)
			if i > 1 {
				g.b.WriteByte(',')
			}
		}
		g.b.WriteString(`]`)
	}
	if g.r.IntN(4) == 0 {
		g.b.WriteString(`,"extra":`)
		g.value(1)
	}
	g.b.WriteString(`}`)
	return g.b.String()
}

func TestFastPathDifferential(t *testing.T) {
	g := &genJSON{r: rand.New(rand.NewPCG(diffSeed, 1))}
	e := &Estimator{}
	claimed, n := 0, 10000
	if testing.Short() {
		n = 1000
	}
	for i := 0; i < n; i++ {
		body := []byte(g.chatish())
		for _, path := range fuzzPaths[:3] {
			fast, ok := fastTokenize(path, body)
			if !ok {
				continue
			}
			claimed++
			if fast.TokenCount() == 0 {
				fast = nil
			}
			ref, err := e.tokenizeReference(path, body)
			if err != nil || !sameTokenized(fast, ref) {
				t.Fatalf("path %q body %s:\nfast %+v\nref %+v err %v", path, body, fast, ref, err)
			}
			salt, ok := fastCacheSalt(body)
			if ok && ref != nil && ref.CacheSalt != salt {
				t.Fatalf("salt %q vs %q in %s", salt, ref.CacheSalt, body)
			}
		}
	}
	t.Logf("fast path claimed %d of %d (body, path) pairs", claimed, 3*n)
	if claimed < n/2 {
		t.Errorf("fast path claimed %d of %d bodies", claimed, 3*n)
	}
}

const diffSeed = 42

// longString builds a JSON string body of about n bytes: runs of plain
// lowercase text of random lengths (so that everything else lands at every
// offset of the scanner's 32-byte steps) between rare escapes, raw
// non-ASCII runes, and — when bad — invalid UTF-8 or a control character.
func longString(r *rand.Rand, n int, bad bool) string {
	pieces := []string{`\n`, `\"`, `\\`, `\/`, `\t`, `\u00e9`, `\ud83d\ude00`, `\ud800`, "é", "😀", "ü"}
	if bad {
		pieces = append(pieces, "\xff", "\x01", "\xc3")
	}
	var b strings.Builder
	b.WriteByte('"')
	for b.Len() < n {
		for range r.IntN(80) {
			b.WriteByte(byte('a' + r.IntN(26)))
			if r.IntN(6) == 0 {
				b.WriteByte(' ')
			}
		}
		if r.IntN(3) == 0 {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
	}
	b.WriteByte('"')
	return b.String()
}

// TestFastPathLongStrings compares the fast path with the reference on
// long prompts and message contents, where the scanner's word-at-a-time
// loops do the work.
func TestFastPathLongStrings(t *testing.T) {
	r := rand.New(rand.NewPCG(diffSeed, 2))
	e := &Estimator{}
	n := 2000
	if testing.Short() {
		n = 200
	}
	claimed := 0
	for i := range n {
		bad := i%4 == 0
		var body string
		if i%2 == 0 {
			body = `{"model":"m","prompt":` + longString(r, r.IntN(3000), bad) + `,"max_tokens":7}`
		} else {
			body = `{"model":"m","messages":[{"role":"user","content":` + longString(r, r.IntN(3000), bad) +
				`},{"role":"assistant","content":` + longString(r, r.IntN(300), bad) + `}]}`
		}
		for _, path := range fuzzPaths[:3] {
			fast, ok := fastTokenize(path, []byte(body))
			if !ok {
				continue
			}
			claimed++
			if fast.TokenCount() == 0 {
				fast = nil
			}
			ref, err := e.tokenizeReference(path, []byte(body))
			if err != nil || !sameTokenized(fast, ref) {
				t.Fatalf("path %q body %q:\nfast %+v\nref %+v err %v", path, body, fast, ref, err)
			}
		}
	}
	if claimed < n {
		t.Errorf("fast path claimed only %d of %d (body, path) pairs", claimed, 3*n)
	}
}
