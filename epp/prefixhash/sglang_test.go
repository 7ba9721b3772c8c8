package prefixhash_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/eppsim/eppsim/epp"
	"github.com/eppsim/eppsim/epp/prefixhash"
)

func i64(v int64) *int64 { return &v }

// TestDecodeSGLangGenerate: upstream sglanghttp.go's parseGenerateRequest,
// case by case (expected values read off the bodies).
func TestDecodeSGLangGenerate(t *testing.T) {
	tests := []struct {
		name string
		body string
		want *epp.GenerateRequest
		err  error // a sentinel the error wraps; nil with want nil: any error
	}{
		{"full", `{"input_ids":[1,2,3],"extra_key":"tenant-a","sampling_params":{"max_new_tokens":7},"stream":true}`,
			&epp.GenerateRequest{TokenIDs: []uint32{1, 2, 3}, CacheSalt: "tenant-a", MaxOutputTokens: i64(7), Stream: true}, nil},
		{"ids only", `{"input_ids":[42]}`, &epp.GenerateRequest{TokenIDs: []uint32{42}}, nil},
		{"largest uint32", `{"input_ids":[0,4294967295]}`, &epp.GenerateRequest{TokenIDs: []uint32{0, 4294967295}}, nil},
		{"null element decodes as 0", `{"input_ids":[null,5]}`, &epp.GenerateRequest{TokenIDs: []uint32{0, 5}}, nil},
		{"keys case-insensitive", `{"Input_IDs":[9],"EXTRA_KEY":"k"}`, &epp.GenerateRequest{TokenIDs: []uint32{9}, CacheSalt: "k"}, nil},
		{"last key wins", `{"input_ids":[1],"input_ids":[2]}`, &epp.GenerateRequest{TokenIDs: []uint32{2}}, nil},
		{"unknown keys ignored", `{"input_ids":[1],"text":"hi","rid":5}`, &epp.GenerateRequest{TokenIDs: []uint32{1}}, nil},
		{"extra_key null", `{"input_ids":[1],"extra_key":null}`, &epp.GenerateRequest{TokenIDs: []uint32{1}}, nil},
		{"extra_key empty", `{"input_ids":[1],"extra_key":""}`, &epp.GenerateRequest{TokenIDs: []uint32{1}}, nil},
		{"max_new_tokens 0", `{"input_ids":[1],"sampling_params":{"max_new_tokens":0}}`,
			&epp.GenerateRequest{TokenIDs: []uint32{1}, MaxOutputTokens: i64(0)}, nil},
		{"negative max_new_tokens ignored", `{"input_ids":[1],"sampling_params":{"max_new_tokens":-1}}`,
			&epp.GenerateRequest{TokenIDs: []uint32{1}}, nil},
		{"string max_new_tokens ignored", `{"input_ids":[1],"sampling_params":{"max_new_tokens":"5"}}`,
			&epp.GenerateRequest{TokenIDs: []uint32{1}}, nil},
		{"fractional max_new_tokens ignored", `{"input_ids":[1],"sampling_params":{"max_new_tokens":2.5}}`,
			&epp.GenerateRequest{TokenIDs: []uint32{1}}, nil},
		{"non-object sampling_params ignored", `{"input_ids":[1],"sampling_params":[1]}`, &epp.GenerateRequest{TokenIDs: []uint32{1}}, nil},
		{"max_tokens is not SGLang's", `{"input_ids":[1],"sampling_params":{"max_tokens":5}}`, &epp.GenerateRequest{TokenIDs: []uint32{1}}, nil},

		{"missing input_ids", `{"text":"hello"}`, nil, prefixhash.ErrSGLangNoInputIDs},
		{"vLLM's token_ids", `{"token_ids":[1,2]}`, nil, prefixhash.ErrSGLangNoInputIDs},
		{"null input_ids", `{"input_ids":null}`, nil, prefixhash.ErrSGLangNoInputIDs},
		{"null body", `null`, nil, prefixhash.ErrSGLangNoInputIDs},
		{"empty input_ids", `{"input_ids":[]}`, nil, prefixhash.ErrSGLangEmptyInputIDs},
		{"string input_ids", `{"input_ids":"1 2"}`, nil, prefixhash.ErrSGLangInputIDs},
		{"batch of prompts", `{"input_ids":[[1,2],[3]]}`, nil, prefixhash.ErrSGLangInputIDs},
		{"fractional id", `{"input_ids":[1.5]}`, nil, prefixhash.ErrSGLangInputIDs},
		{"integral float id", `{"input_ids":[1.0]}`, nil, prefixhash.ErrSGLangInputIDs},
		{"negative id", `{"input_ids":[-1]}`, nil, prefixhash.ErrSGLangInputIDs},
		{"id beyond uint32", `{"input_ids":[4294967296]}`, nil, prefixhash.ErrSGLangInputIDs},
		{"string id", `{"input_ids":["1"]}`, nil, prefixhash.ErrSGLangInputIDs},
		{"number extra_key", `{"input_ids":[1],"extra_key":5}`, nil, prefixhash.ErrSGLangExtraKey},
		{"extra_key checked before input_ids' contents", `{"input_ids":[],"extra_key":{}}`, nil, prefixhash.ErrSGLangExtraKey},
		{"non-boolean stream", `{"input_ids":[1],"stream":"yes"}`, nil, nil},
		{"array body", `[1]`, nil, nil},
		{"invalid JSON", `{"input_ids":[1]`, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := prefixhash.DecodeSGLangGenerate([]byte(tt.body))
			if tt.want != nil {
				if err != nil || !reflect.DeepEqual(got, tt.want) {
					t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
				}
				return
			}
			if err == nil || got != nil {
				t.Fatalf("got %+v, nil error; want an error", got)
			}
			if tt.err != nil && !errors.Is(err, tt.err) {
				t.Fatalf("error %v; want one wrapping %v", err, tt.err)
			}
		})
	}
}

// FuzzDecodeSGLangGenerate: the decoder never panics; what it accepts is a
// JSON body with a non-empty prompt and a cap that is unset or ≥ 0; and
// the request it decodes, written back as an SGLang body, decodes to
// itself.
func FuzzDecodeSGLangGenerate(f *testing.F) {
	for _, s := range []string{
		`{"input_ids":[1,2,3],"extra_key":"s","sampling_params":{"max_new_tokens":7},"stream":true}`,
		`{"input_ids":[4294967295]}`, `{"input_ids":[]}`, `{"input_ids":[[1]]}`, `{"input_ids":[1],"extra_key":1}`,
		`{"INPUT_IDS":[1],"input_ids":[2]}`, `{"input_ids":[1],"sampling_params":{"max_new_tokens":-3}}`,
		`null`, `[]`, `{"input_ids":[1e2]}`, `{"input_ids":[1],"stream":null}`, `{"input_ids":[null]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		g, err := prefixhash.DecodeSGLangGenerate(body)
		if err != nil {
			if g != nil {
				t.Fatalf("error %v with a result", err)
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("accepted invalid JSON %q", body)
		}
		if len(g.TokenIDs) == 0 || (g.MaxOutputTokens != nil && *g.MaxOutputTokens < 0) {
			t.Fatalf("accepted %+v", g)
		}
		again := map[string]any{"input_ids": g.TokenIDs, "extra_key": g.CacheSalt, "stream": g.Stream}
		if g.MaxOutputTokens != nil {
			again["sampling_params"] = map[string]any{"max_new_tokens": *g.MaxOutputTokens}
		}
		b, err := json.Marshal(again)
		if err != nil {
			t.Fatal(err)
		}
		g2, err := prefixhash.DecodeSGLangGenerate(b)
		if err != nil || !reflect.DeepEqual(g, g2) {
			t.Fatalf("%s decodes to %+v, %v; want %+v", b, g2, err, g)
		}
	})
}
