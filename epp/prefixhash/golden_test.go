package prefixhash

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/epp"
)

const goldenPath = "../../testdata/shared/golden/epp-golden.json"

type goldenPseudo struct {
	Text      string   `json:"bytes_as_text_zero_padded"`
	NumTokens int      `json:"num_tokens"`
	NumPad    int      `json:"num_zero_pad_bytes"`
	TokenIDs  []uint32 `json:"token_ids_uint32"`
}

type goldenHashCase struct {
	ID            string         `json:"id"`
	Description   string         `json:"description"`
	Model         string         `json:"model"`
	CacheSalt     string         `json:"cache_salt"`
	PromptText    string         `json:"prompt_text"`
	Pseudo        []goldenPseudo `json:"pseudo_tokens"`
	TokenizedSalt *string        `json:"tokenized_cache_salt"`
	BS64Dec       [][]string     `json:"block_hashes_bs64_dec"`
	BS64Hex       [][]string     `json:"block_hashes_bs64_hex"`
	BS16Dec       [][]string     `json:"block_hashes_bs16_dec"`
	BS16Hex       [][]string     `json:"block_hashes_bs16_hex"`
}

func loadHashCases(t testing.TB) []goldenHashCase {
	t.Helper()
	raw, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatalf("read golden: %v", err)
	}
	var g struct {
		HashCases []goldenHashCase `json:"hash_cases"`
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatalf("decode golden: %v", err)
	}
	if len(g.HashCases) != 16 {
		t.Fatalf("golden has %d hash cases, want 16", len(g.HashCases))
	}
	return g.HashCases
}

// goldenBody rebuilds the request body each golden case describes.
func goldenBody(t testing.TB, c goldenHashCase, lorem string) (path string, body []byte) {
	t.Helper()
	m := map[string]any{"model": c.Model}
	if c.CacheSalt != "" {
		m["cache_salt"] = c.CacheSalt
	}
	chat := func(msgs ...any) { m["messages"] = msgs }
	msg := func(role string, content any) map[string]any { return map[string]any{"role": role, "content": content} }
	switch c.ID {
	case "empty":
		path, m["prompt"] = "/v1/completions", ""
	case "hello":
		path, m["prompt"] = "/v1/completions", "hello"
	case "a300":
		path, m["prompt"] = "/v1/completions", strings.Repeat("a", 300)
	case "lorem1000":
		path, m["prompt"] = "/v1/completions", c.PromptText
	case "completions_multi":
		path, m["prompt"] = "/v1/completions", []string{"abc", "defgh"}
	case "chat2turn":
		path = "/v1/chat/completions"
		chat(msg("user", "Hello, who are you?"), msg("assistant", "I am an AI assistant."), msg("user", "Tell me a joke."))
	case "chat2turn_structured":
		path = "/v1/chat/completions"
		chat(msg("user", "Hello, who are you?"), msg("assistant", "I am an AI assistant."),
			msg("user", []any{map[string]any{"type": "text", "text": "Tell me "}, map[string]any{"type": "text", "text": "a joke."}}))
	case "chat_long_system":
		path = "/v1/chat/completions"
		chat(msg("system", lorem), msg("user", "Summarize."))
	default:
		t.Fatalf("unknown golden case %q", c.ID)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return path, b
}

func decList(t testing.TB, hs [][]uint64) [][]string {
	t.Helper()
	if hs == nil {
		return nil
	}
	out := make([][]string, len(hs))
	for i, l := range hs {
		for _, h := range l {
			out[i] = append(out[i], strconv.FormatUint(h, 10))
		}
	}
	return out
}

func hexList(hs [][]uint64) [][]string {
	if hs == nil {
		return nil
	}
	out := make([][]string, len(hs))
	for i, l := range hs {
		for _, h := range l {
			out[i] = append(out[i], fmt.Sprintf("%016x", h))
		}
	}
	return out
}

func TestGoldenHashCases(t *testing.T) {
	cases := loadHashCases(t)
	var lorem string
	for _, c := range cases {
		if c.ID == "lorem1000" {
			lorem = c.PromptText
		}
	}
	if len(lorem) != 1000 {
		t.Fatalf("lorem text has %d bytes", len(lorem))
	}
	est, err := NewEstimator(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.ID+"/salt="+c.CacheSalt, func(t *testing.T) {
			for _, withPath := range []bool{true, false} {
				path, body := goldenBody(t, c, lorem)
				if !withPath {
					path = ""
				}
				tr, err := est.Tokenize(path, body)
				if err != nil {
					t.Fatalf("Tokenize: %v", err)
				}
				if c.Pseudo == nil {
					if tr != nil {
						t.Fatalf("want no tokens, got %+v", tr)
					}
				} else {
					if tr == nil || len(tr.Prompts) != len(c.Pseudo) {
						t.Fatalf("got %+v, want %d prompts", tr, len(c.Pseudo))
					}
					for i, p := range c.Pseudo {
						got := tr.Prompts[i]
						if len(got) != p.NumTokens || fmt.Sprint(got) != fmt.Sprint(p.TokenIDs) {
							t.Errorf("prompt %d tokens = %v, want %v", i, got, p.TokenIDs)
						}
						img := UnpackTokens(got)
						want := p.Text + strings.Repeat("\x00", p.NumPad)
						if string(img) != want {
							t.Errorf("prompt %d bytes = %q, want %q", i, img, want)
						}
					}
					if c.TokenizedSalt == nil || tr.CacheSalt != *c.TokenizedSalt {
						t.Errorf("salt = %q, want %v", tr.CacheSalt, c.TokenizedSalt)
					}
				}
				req := &epp.Request{TargetModel: c.Model, Tokenized: tr}
				for _, bs := range []struct {
					n        int
					dec, hex [][]string
				}{{64, c.BS64Dec, c.BS64Hex}, {16, c.BS16Dec, c.BS16Hex}} {
					hs := GetBlockHashes(req, bs.n, 131072/bs.n)
					if got := decList(t, hs); fmt.Sprint(got) != fmt.Sprint(bs.dec) || (got == nil) != (bs.dec == nil) {
						t.Errorf("bs%d hashes = %v, want %v", bs.n, got, bs.dec)
					}
					if got := hexList(hs); fmt.Sprint(got) != fmt.Sprint(bs.hex) {
						t.Errorf("bs%d hex = %v, want %v", bs.n, got, bs.hex)
					}
				}
			}
		})
	}
}

func TestSeedGolden(t *testing.T) {
	const model = "meta-llama/Llama-3.1-8B-Instruct"
	if got := Seed(model, ""); got != 0xa903820a10f81cff {
		t.Errorf("seed = %#x", got)
	}
	if got := Seed(model, "s1"); got != 0x0d257b1dafce885a {
		t.Errorf("salted seed = %#x", got)
	}
	if got := BlockID(PackString("hello")); got != 0x40f7b0efc8c5552f {
		t.Errorf("blockID(hello) = %#x", got)
	}
	if got := AppendHashes(nil, Seed(model, ""), PackString("hello"), 64, 2048); len(got) != 1 || got[0] != 0x179d2e3e1ccaec12 {
		t.Errorf("hash(hello) = %#x", got)
	}
}
