package prefixhash

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/eppsim/eppsim/epp"
	"github.com/eppsim/eppsim/internal/memo"
)

// Errors of DecodeSGLangGenerate, each naming the field at fault.
var (
	ErrSGLangNoInputIDs    = errors.New("input_ids: missing (only pre-tokenized prompts are supported)")
	ErrSGLangInputIDs      = errors.New("input_ids: want an array of uint32 token IDs")
	ErrSGLangEmptyInputIDs = errors.New("input_ids: empty")
	ErrSGLangExtraKey      = errors.New("extra_key: want a string")
)

// sglangWire holds the fields of SGLang's native /generate body that the
// sglanghttp-parser reads, as raw JSON so that each is judged on its own.
// Stream is typed: a non-boolean stream fails the whole decode, as it does
// upstream.
type sglangWire struct {
	InputIDs       json.RawMessage `json:"input_ids"`
	ExtraKey       json.RawMessage `json:"extra_key"`
	SamplingParams json.RawMessage `json:"sampling_params"`
	Stream         bool            `json:"stream"`
}

// DecodeSGLangGenerate decodes SGLang's native /generate body as
// llm-d-router's sglanghttp-parser does
// (pkg/epp/framework/plugins/requesthandling/parsers/sglanghttp/sglanghttp.go,
// parseGenerateRequest, ebab687), through encoding/json as upstream so that
// key matching (case-insensitive, last key wins) and number handling agree:
//
//   - the body must decode as a JSON object (null decodes to nothing and
//     then lacks input_ids);
//   - input_ids is required (absent or null is an error) and must decode as
//     a non-empty []uint32 — a batch of prompts ([[...], ...]), a string
//     prompt "text" or a fractional, negative or too large ID is an error;
//   - extra_key, when present and not null, must be a string: the cache
//     salt (checked before input_ids' contents, as upstream);
//   - sampling_params.max_new_tokens is the output cap when it decodes as
//     an int64 ≥ 0; anything else in sampling_params (a non-object, a
//     non-integer or negative cap) leaves the cap unset and is no error.
//
// The result is what the producers see (epp.Request.Generate).
func DecodeSGLangGenerate(body []byte) (*epp.GenerateRequest, error) {
	var w sglangWire
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("sglang generate body: %w", err)
	}
	if !present(w.InputIDs) {
		return nil, ErrSGLangNoInputIDs
	}
	g := &epp.GenerateRequest{Stream: w.Stream}
	if present(w.ExtraKey) {
		if err := json.Unmarshal(w.ExtraKey, &g.CacheSalt); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrSGLangExtraKey, err)
		}
	}
	if err := json.Unmarshal(w.InputIDs, &g.TokenIDs); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSGLangInputIDs, err)
	}
	if len(g.TokenIDs) == 0 {
		return nil, ErrSGLangEmptyInputIDs
	}
	if present(w.SamplingParams) {
		var sp struct {
			MaxNewTokens *int64 `json:"max_new_tokens"`
		}
		if json.Unmarshal(w.SamplingParams, &sp) == nil && sp.MaxNewTokens != nil && *sp.MaxNewTokens >= 0 {
			g.MaxOutputTokens = sp.MaxNewTokens
		}
	}
	return g, nil
}

// present is upstream's hasJSONValue: a raw value that is there and not
// null.
func present(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && !bytes.Equal(t, []byte("null"))
}

// generatedKey memoizes GeneratedTokens of a request's decoded prompt.
type generatedKey struct{ g *epp.GenerateRequest }

// GeneratedTokens is the token producer's output for a prompt a parser
// decoded into typed fields (epp.Request.Generate): its token IDs as one
// prompt, and its cache salt, as upstream's estimate and render backends
// pass Generate.TokenIDs through
// (dataproducer/tokenizer/estimate.go, backend.go). Memoized in m (nil:
// not memoized) like TokenizeShared, so the result is shared and its block
// hashes are memoized too; callers must not change it.
func GeneratedTokens(m *memo.Memo, g *epp.GenerateRequest) *epp.TokenizedRequest {
	build := func() *epp.TokenizedRequest {
		return &epp.TokenizedRequest{Prompts: [][]uint32{g.TokenIDs}, CacheSalt: g.CacheSalt}
	}
	if m == nil {
		return build()
	}
	return memo.Get(m, generatedKey{g}, func() *epp.TokenizedRequest {
		tr := build()
		m.Do(sharedTokens{tr}, func() any { return true })
		return tr
	})
}

// GenerateTokenIDs decodes the token_ids of vLLM's /generate body as
// upstream's GenerateRequest does (see generateBody); vllmhttp-parser
// rejects a body without any (vllmhttp/vllmhttp.go, parseGenerateRequest).
func GenerateTokenIDs(body []byte) ([]uint32, error) {
	var b generateBody
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, fmt.Errorf("generate body: %w", err)
	}
	return b.TokenIDs, nil
}

// VLLMGenerateSuffix is the path suffix vllmhttp-parser claims (vLLM's
// native generate API, llm-d-router ebab687 parsers/vllmhttp/vllmhttp.go).
const VLLMGenerateSuffix = "inference/v1/generate"

// IsVLLMGeneratePath reports whether path (a query string and a trailing
// slash ignored) ends in VLLMGenerateSuffix.
func IsVLLMGeneratePath(path string) bool {
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	return strings.HasSuffix(strings.TrimSuffix(path, "/"), VLLMGenerateSuffix)
}

// GenerateMaxTokens is the client's output cap of a vLLM /inference/v1/generate
// body, as vllmhttp-parser reads it (llm-d-router ebab687
// parsers/vllmhttp/vllmhttp.go, parseGenerateRequest, with
// MaxOutputTokensFromPayload): sampling_params.max_tokens when it is a
// non-negative whole number, 0 included; ok false when the body sets none
// (absent, null, negative, fractional or not a number).
func GenerateMaxTokens(body []byte) (int64, bool) {
	var wire struct {
		SamplingParams map[string]any `json:"sampling_params"`
	}
	if json.Unmarshal(body, &wire) != nil || wire.SamplingParams == nil {
		return 0, false
	}
	f, ok := wire.SamplingParams["max_tokens"].(float64)
	if !ok || f < 0 || f != math.Trunc(f) {
		return 0, false
	}
	return int64(f), true
}
