package workload

import (
	"fmt"
	"strconv"
	"strings"
)

// API is the request API a client sends a workload's requests through
// (Options.API): the endpoint a request targets and the shape of its body.
type API string

// Request APIs. APIDefault keeps each format's own: completions for
// hash-id traces (Mooncake, Alibaba) and Azure traces, chat completions
// for ShareGPT dumps and the synthesizer, the line's url or body for
// OpenAI JSONL, api.type for inference-perf configs.
const (
	APIDefault     API = ""
	APIChat        API = "chat"        // /v1/chat/completions
	APICompletions API = "completions" // /v1/completions
	// APIVLLMGenerate is vLLM's tokens-in generate
	// (/inference/v1/generate): {"model", "token_ids",
	// "sampling_params": {"max_tokens"}, "cache_salt"}.
	APIVLLMGenerate API = "vllm-generate"
	// APISGLangGenerate is SGLang's native generate (/generate):
	// {"input_ids", "sampling_params": {"max_new_tokens"}, "stream": true,
	// "extra_key"}.
	APISGLangGenerate API = "sglang-generate"
)

// Endpoints of the native generate APIs.
const (
	EndpointVLLMGenerate   = "/inference/v1/generate"
	EndpointSGLangGenerate = "/generate"
)

// APINames lists the values ParseAPI accepts besides "" and "default".
var APINames = []string{string(APIChat), string(APICompletions), string(APIVLLMGenerate), string(APISGLangGenerate)}

// ParseAPI accepts an API name; "" and "default" are APIDefault.
func ParseAPI(s string) (API, error) {
	switch v := strings.ToLower(strings.TrimSpace(s)); v {
	case "", "default":
		return APIDefault, nil
	case string(APIChat), string(APICompletions), string(APIVLLMGenerate), string(APISGLangGenerate):
		return API(v), nil
	}
	return "", fmt.Errorf("unknown request API %q (want default, %s)", s, strings.Join(APINames, ", "))
}

// Endpoint is the request path of the API ("" for APIDefault).
func (a API) Endpoint() string {
	switch a {
	case APIChat:
		return EndpointChat
	case APICompletions:
		return EndpointCompletions
	case APIVLLMGenerate:
		return EndpointVLLMGenerate
	case APISGLangGenerate:
		return EndpointSGLangGenerate
	}
	return ""
}

// formatAPI is the API format f's requests are built for, or APIDefault
// when the trace names its own (OpenAI JSONL, inference-perf).
func formatAPI(f Format) API {
	switch f {
	case FormatMooncake, FormatAlibaba, FormatAzure:
		return APICompletions
	case FormatShareGPT, FormatSynth:
		return APIChat
	}
	return APIDefault
}

// rewriteAPI is the API Stream.Next rebuilds format f's requests for, or
// APIDefault when they stay as the reader builds them; an error when f
// cannot be sent through api.
func rewriteAPI(f Format, api API) (API, error) {
	own := formatAPI(f)
	switch {
	case api == APIDefault || api == own:
		return APIDefault, nil
	case own == APIDefault:
		return "", fmt.Errorf("request API %s: %s traces name the API of each request themselves", api, f)
	case api == APIChat:
		return "", fmt.Errorf("request API chat: %s prompts are tokens, not messages (use completions, vllm-generate or sglang-generate)", f)
	}
	return api, nil
}

// applyAPI rebuilds r's endpoint and body for api from r's prompt tokens,
// output length and cache salt: the prompt is sent pre-tokenized, so the
// tokens the model server computes stay r.PromptTokens. A request without
// a body (Options.NoTokens) keeps none.
func applyAPI(r *Request, api API) {
	r.Endpoint = api.Endpoint()
	if r.Body == nil {
		return
	}
	r.Body = apiBody(api, r.Model, r.PromptTokens, r.OutputTokens, r.CacheSalt)
}

// apiBody is the body of a pre-tokenized request through api (completions,
// vllm-generate or sglang-generate):
//
//	completions      {"model":M,"prompt":[IDS],"max_tokens":N,"cache_salt":S}
//	vllm-generate    {"model":M,"token_ids":[IDS],"sampling_params":{"max_tokens":N},"cache_salt":S}
//	sglang-generate  {"input_ids":[IDS],"sampling_params":{"max_new_tokens":N},"stream":true,"extra_key":S}
//
// where the salt member is left out when salt is "".
func apiBody(api API, model string, ids []uint32, maxTokens int, salt string) []byte {
	b := make([]byte, 0, len(ids)*7+len(model)+len(salt)+96)
	b = append(b, '{')
	if api != APISGLangGenerate {
		b = append(b, `"model":`...)
		b = appendJSONString(b, model)
		b = append(b, ',')
	}
	switch api {
	case APICompletions:
		b = append(b, `"prompt":`...)
	case APIVLLMGenerate:
		b = append(b, `"token_ids":`...)
	default:
		b = append(b, `"input_ids":`...)
	}
	b = append(b, '[')
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, uint64(id), 10)
	}
	b = append(b, ']')
	saltKey := `,"cache_salt":`
	switch api {
	case APICompletions:
		b = append(b, `,"max_tokens":`...)
		b = strconv.AppendInt(b, int64(maxTokens), 10)
	case APIVLLMGenerate:
		b = append(b, `,"sampling_params":{"max_tokens":`...)
		b = strconv.AppendInt(b, int64(maxTokens), 10)
		b = append(b, '}')
	default:
		b = append(b, `,"sampling_params":{"max_new_tokens":`...)
		b = strconv.AppendInt(b, int64(maxTokens), 10)
		b = append(b, `},"stream":true`...)
		saltKey = `,"extra_key":`
	}
	if salt != "" {
		b = append(b, saltKey...)
		b = appendJSONString(b, salt)
	}
	return append(b, '}')
}
