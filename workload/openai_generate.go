package workload

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// generateAPI is the native generate API a request path names
// (EndpointVLLMGenerate, EndpointSGLangGenerate), APIDefault for any other.
func generateAPI(url string) API {
	switch url {
	case EndpointVLLMGenerate:
		return APIVLLMGenerate
	case EndpointSGLangGenerate:
		return APISGLangGenerate
	}
	return APIDefault
}

// generateFields are what a native generate body gives a request.
type generateFields struct {
	ids            []uint32
	idsField       string // token_ids or input_ids
	maxTokens      *int64 // the output cap, nil when none
	maxTokensField string // its field, from the body's top level
	maxTokensLo    int64  // the least cap the server accepts
	salt           string // SGLang's extra_key (vLLM's cache_salt is the OpenAI bodies' key)
}

// generateWire holds a generate body's members of either API, raw, so
// that each is judged on its own.
type generateWire struct {
	TokenIDs       json.RawMessage `json:"token_ids"`
	InputIDs       json.RawMessage `json:"input_ids"`
	ExtraKey       json.RawMessage `json:"extra_key"`
	SamplingParams json.RawMessage `json:"sampling_params"`
	Stream         json.RawMessage `json:"stream"`
}

// generateBody reads the prompt, output cap and cache salt of a native
// generate body (rawBody, whose fields are named after prefix):
//
//   - vllm-generate: token_ids (required, non-empty), sampling_params.max_tokens
//     (≥ 1 when given); its cache_salt is the OpenAI bodies' key, which
//     the caller decodes (a string);
//   - sglang-generate: input_ids (required, non-empty, one prompt),
//     sampling_params.max_new_tokens (≥ 0 when given), extra_key (the
//     cache salt, a string).
//
// Token ids are integers in [0, VocabSize), as in a completions prompt;
// stream, when given, is a boolean. These are what the EPP's
// vllmhttp-parser and sglanghttp-parser require of the body, so a line
// this accepts is parsed by them too.
func (r *openaiReader) generateBody(prefix string, rawBody []byte, api API) (*generateFields, error) {
	var w generateWire
	if err := json.Unmarshal(rawBody, &w); err != nil {
		return nil, r.jsonErr(prefix, err)
	}
	g := &generateFields{idsField: "token_ids", maxTokensField: "sampling_params.max_tokens", maxTokensLo: 1}
	ids, other, capKey := w.TokenIDs, w.InputIDs, "max_tokens"
	if api == APISGLangGenerate {
		g.idsField, g.maxTokensField, g.maxTokensLo = "input_ids", "sampling_params.max_new_tokens", 0
		ids, other, capKey = w.InputIDs, w.TokenIDs, "max_new_tokens"
	}
	if !jsonPresent(ids) {
		msg := "missing (the prompt of a " + string(api) + " body is its token ids)"
		if jsonPresent(other) {
			msg = fmt.Sprintf("missing (the body has %s, which %s takes instead: check the url)", otherIDsField(api), otherAPI(api))
		}
		return nil, r.bad(prefix+g.idsField, "%s", msg)
	}
	var err error
	if g.ids, err = r.tokenIDs(prefix+g.idsField, ids); err != nil {
		return nil, err
	}
	if jsonPresent(w.SamplingParams) {
		var sp map[string]json.RawMessage
		if err := json.Unmarshal(w.SamplingParams, &sp); err != nil {
			return nil, r.bad(prefix+"sampling_params", "expected an object")
		}
		if v, ok := sp[capKey]; ok && jsonPresent(v) {
			var n int64
			if err := json.Unmarshal(v, &n); err != nil {
				return nil, r.bad(prefix+g.maxTokensField, "expected an integer")
			}
			g.maxTokens = &n
		}
	}
	if jsonPresent(w.Stream) {
		var b bool
		if err := json.Unmarshal(w.Stream, &b); err != nil {
			return nil, r.bad(prefix+"stream", "expected a boolean")
		}
	}
	if api == APISGLangGenerate && jsonPresent(w.ExtraKey) {
		if err := json.Unmarshal(w.ExtraKey, &g.salt); err != nil {
			return nil, r.bad(prefix+"extra_key", "expected a string (the cache salt)")
		}
	}
	return g, nil
}

// tokenIDs decodes a non-empty array of token ids in [0, VocabSize).
func (r *openaiReader) tokenIDs(field string, raw json.RawMessage) ([]uint32, error) {
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, r.bad(field, "expected an array of token ids (one pre-tokenized prompt)")
	}
	if len(elems) == 0 {
		return nil, r.bad(field, "empty")
	}
	return r.decodeIDs(field, elems)
}

// decodeIDs decodes the elements of a token-id array, each in
// [0, VocabSize); errors name the element (field[i]).
func (r *openaiReader) decodeIDs(field string, elems []json.RawMessage) ([]uint32, error) {
	ids := make([]uint32, len(elems))
	for i, e := range elems {
		var v int64
		if err := json.Unmarshal(e, &v); err != nil || v < 0 || v >= VocabSize {
			return nil, r.bad(fmt.Sprintf("%s[%d]", field, i), "expected a token id in [0, %d)", VocabSize)
		}
		ids[i] = uint32(v)
	}
	return ids, nil
}

func otherIDsField(api API) string {
	if api == APISGLangGenerate {
		return "token_ids"
	}
	return "input_ids"
}

func otherAPI(api API) string {
	if api == APISGLangGenerate {
		return "vLLM's generate (" + EndpointVLLMGenerate + ")"
	}
	return "SGLang's generate (" + EndpointSGLangGenerate + ")"
}

// jsonPresent reports a raw member that is there and not null.
func jsonPresent(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && !bytes.Equal(t, []byte("null"))
}
