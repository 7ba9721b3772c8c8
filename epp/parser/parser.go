// Package parser implements the EPP's request parsers (requestHandler.parsers,
// spec §1.3 and §2.1 step 0, llm-d-router ebab687): the body of every
// request is decoded before anything else runs, and a body that does not
// decode into the typed request structs of its API is rejected with HTTP
// 400 — never admitted, scheduled, counted in flight or indexed.
//
// Each parser claims the APIs it decodes, as upstream parsers claim path
// suffixes; epp.Router.Parse gives a request to the configured parser that
// claims it by the longest suffix (epp.SuffixClaimer; upstream
// pkg/epp/handlers/parsers.go), else to the first fallback parser (one
// that claims no paths). The default list (openai-parser,
// anthropic-parser, vllmhttp-parser, passthrough-parser) therefore checks
// chat completions, completions, responses, conversations and embeddings
// bodies (openai), /v1/messages (anthropic) and /inference/v1/generate
// (vllmhttp), and passes anything else through unchecked.
//
//   - openai-parser: chat completions, completions, responses,
//     conversations, embeddings.
//   - anthropic-parser: /v1/messages.
//   - vllmhttp-parser: paths ending in inference/v1/generate
//     (vllmhttp/vllmhttp.go), whose token_ids must be non-empty, and
//     everything openai-parser claims.
//   - sglanghttp-parser: paths ending in "generate" as a plain suffix
//     (sglanghttp/sglanghttp.go; not a default); it rejects every path but
//     /generate and decodes SGLang's body (input_ids, extra_key,
//     sampling_params.max_new_tokens) with prefixhash.DecodeSGLangGenerate
//     into epp.Request.Generate, which the producers read instead of the
//     body.
//   - passthrough-parser: claims no paths (the fallback); accepts any body.
//
// What a parser rejects is prefixhash.CheckBody for the request's API. The
// API is the one the request path names; a request without a path (eppsim
// API callers only) is of the API its body names (prefixhash.KindOf), and
// completions when the body names none, as the openai-parser assumes
// /v1/completions without a path header.
package parser

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/eppsim/eppsim/epp"
	"github.com/eppsim/eppsim/epp/prefixhash"
	"github.com/eppsim/eppsim/internal/memo"
)

// Parser types (spec §1.4).
const (
	TypeOpenAI      = "openai-parser"
	TypeAnthropic   = "anthropic-parser"
	TypeVLLMHTTP    = "vllmhttp-parser"
	TypePassthrough = "passthrough-parser"
	TypeSGLangHTTP  = "sglanghttp-parser"
)

// Path suffixes of the native generate APIs, as upstream's parsers claim
// them (vllmhttp/vllmhttp.go, sglanghttp/sglanghttp.go, ebab687).
const (
	vllmGenerateSuffix   = prefixhash.VLLMGenerateSuffix
	sglangGenerateSuffix = "generate"
)

var openAIKinds = []prefixhash.Kind{prefixhash.KindChatCompletions, prefixhash.KindCompletions,
	prefixhash.KindResponses, prefixhash.KindConversations, prefixhash.KindEmbeddings}

// claims lists the APIs each parser type decodes by their path kind; nil
// means a fallback. The generate paths are claimed by suffix instead
// (generateSuffix).
var claims = map[string][]prefixhash.Kind{
	TypeOpenAI:      openAIKinds,
	TypeAnthropic:   {prefixhash.KindMessages},
	TypeVLLMHTTP:    openAIKinds,
	TypeSGLangHTTP:  {},
	TypePassthrough: nil,
}

// generateSuffix is the path suffix by which a parser type claims a native
// generate API. Upstream matches it as a plain string suffix of the path
// without its query and trailing slash (request.MatchPathSuffix), so
// sglanghttp-parser's "generate" also claims /inference/v1/generate and
// /v1/generate — and then rejects them (ParseRequest).
var generateSuffix = map[string]string{
	TypeVLLMHTTP:   vllmGenerateSuffix,
	TypeSGLangHTTP: sglangGenerateSuffix,
}

// kindSuffixLen is the length of the suffix upstream claims each API's
// paths by (openai/openai.go, anthropic/anthropic.go): what a claim by
// kind weighs against another parser's (epp.SuffixClaimer). No two
// parsers' claims of different kinds overlap, so only the generate
// suffixes' lengths decide anything.
var kindSuffixLen = map[prefixhash.Kind]int{
	prefixhash.KindChatCompletions: len("chat/completions"),
	prefixhash.KindCompletions:     len("completions"),
	prefixhash.KindEmbeddings:      len("embeddings"),
	prefixhash.KindResponses:       len("responses"),
	prefixhash.KindConversations:   len("conversations"),
	prefixhash.KindMessages:        len("messages"),
}

// Register adds the parser types to r.
func Register(r *epp.Registry) {
	for _, typ := range []string{TypeOpenAI, TypeAnthropic, TypeVLLMHTTP, TypeSGLangHTTP, TypePassthrough} {
		r.Register(typ, factory(typ))
	}
}

func factory(typ string) epp.Factory {
	return func(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
		// Upstream parsers take no parameters; an object is tolerated.
		if len(params) > 0 && string(params) != "null" {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(params, &m); err != nil {
				return nil, fmt.Errorf("plugin %q (type %s): parameters: want an object: %w", name, typ, err)
			}
		}
		return New(typ, name)
	}
}

// Parser is one request parser.
type Parser struct {
	epp.TypedName
	kinds    []prefixhash.Kind // nil: fallback
	generate string            // the generate path suffix it claims, or ""
}

// New returns a parser of the given type.
func New(typ, name string) (*Parser, error) {
	kinds, ok := claims[typ]
	if !ok {
		return nil, fmt.Errorf("parser: unknown type %q", typ)
	}
	return &Parser{TypedName: epp.TypedName{PluginType: typ, PluginName: name}, kinds: kinds, generate: generateSuffix[typ]}, nil
}

// RequestParser marks a parser for the configuration loader (config.Parser).
func (*Parser) RequestParser() {}

// Claim implements epp.RequestParser.
func (p *Parser) Claim(req *epp.Request) epp.Claim {
	if p.kinds == nil {
		return epp.ClaimFallback
	}
	if p.ClaimedSuffixLen(req) > 0 {
		return epp.ClaimPath
	}
	return epp.ClaimNone
}

// ClaimedSuffixLen implements epp.SuffixClaimer: the length of the suffix
// by which p claims req, 0 when it does not.
func (p *Parser) ClaimedSuffixLen(req *epp.Request) int {
	if p.generate != "" && strings.HasSuffix(claimPath(req), p.generate) {
		return len(p.generate)
	}
	if k := Kind(req); k != prefixhash.KindGenerate && slices.Contains(p.kinds, k) {
		return kindSuffixLen[k]
	}
	return 0
}

// claimPath is the path a parser claims req by: its trimmed path, or for a
// request without one (eppsim API callers only) whose body is vLLM's
// generate, vLLM's generate path.
func claimPath(req *epp.Request) string {
	if req.Path == "" && Kind(req) == prefixhash.KindGenerate {
		return "/" + vllmGenerateSuffix
	}
	return trimPath(req.Path)
}

// trimPath is a request path as upstream's parsers compare it: without the
// query, surrounding spaces and a trailing slash.
func trimPath(path string) string {
	path, _, _ = strings.Cut(path, "?")
	return strings.TrimSuffix(strings.TrimSpace(path), "/")
}

// ParseRequest implements epp.RequestParser: the body must decode as the
// typed request of its API (spec §2.1 step 0). The passthrough parser
// accepts any body. sglanghttp-parser decodes only /generate itself and
// records the prompt in req.Generate for the producers.
func (p *Parser) ParseRequest(req *epp.Request) error {
	if p.kinds == nil {
		return nil
	}
	if p.PluginType == TypeSGLangHTTP {
		return p.parseSGLang(req)
	}
	kind := Kind(req)
	return memo.Get(req.Memo, checkKey{kind}, func() error { return check(kind, req.Body) })
}

// check is CheckBody, and for vLLM's generate also upstream's
// "non-empty token_ids" (vllmhttp/vllmhttp.go, parseGenerateRequest): a
// /inference/v1/generate body without token_ids — e.g. SGLang's, with
// input_ids — is rejected, not routed with an empty prompt.
func check(kind prefixhash.Kind, body []byte) error {
	if err := prefixhash.CheckBody(kind, body); err != nil {
		return err
	}
	if kind != prefixhash.KindGenerate {
		return nil
	}
	ids, err := prefixhash.GenerateTokenIDs(body)
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		return errEmptyTokenIDs
	}
	return nil
}

var errEmptyTokenIDs = errors.New("token_ids: missing or empty (vLLM's generate takes a non-empty token_ids)")

// parseSGLang is sglanghttp-parser's ParseRequest (upstream
// sglanghttp.go): a path other than /generate is an error, whatever suffix
// claimed it; the body is decoded by prefixhash.DecodeSGLangGenerate.
func (p *Parser) parseSGLang(req *epp.Request) error {
	if path := claimPath(req); path != "/"+sglangGenerateSuffix && path != sglangGenerateSuffix {
		return fmt.Errorf("sglanghttp-parser: path %q: unsupported (only /generate)", path)
	}
	d := memo.Get(req.Memo, sglangKey{}, func() sglangDecoded {
		g, err := prefixhash.DecodeSGLangGenerate(req.Body)
		return sglangDecoded{g, err}
	})
	if d.err != nil {
		return fmt.Errorf("sglanghttp-parser: generate request: %w", d.err)
	}
	req.Generate = d.g
	return nil
}

// checkKey memoizes CheckBody's verdict on a request body (epp.Request.Memo).
type checkKey struct{ kind prefixhash.Kind }

// sglangKey memoizes DecodeSGLangGenerate of a request body.
type sglangKey struct{}

type sglangDecoded struct {
	g   *epp.GenerateRequest
	err error
}

// Kind is the API a request is parsed as: the one its path names; without
// a path, the one its body names, else completions.
func Kind(req *epp.Request) prefixhash.Kind {
	if req.Path != "" {
		return prefixhash.KindOfPath(req.Path)
	}
	if k := prefixhash.KindOf("", req.Body); k != prefixhash.KindUnknown {
		return k
	}
	return prefixhash.KindCompletions
}
