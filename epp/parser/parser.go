// Package parser implements the EPP's request parsers (requestHandler.parsers,
// spec §1.3 and §2.1 step 0, llm-d-router ebab687): the body of every
// request is decoded before anything else runs, and a body that does not
// decode into the typed request structs of its API is rejected with HTTP
// 400 — never admitted, scheduled, counted in flight or indexed.
//
// Each parser claims the APIs it decodes, as upstream parsers claim path
// suffixes; epp.Router.Parse gives a request to the first configured parser
// that claims it, else to the first fallback parser (one that claims no
// paths). The default list (openai-parser, anthropic-parser,
// vllmhttp-parser, passthrough-parser) therefore checks chat completions,
// completions, responses, conversations and embeddings bodies (openai),
// /v1/messages (anthropic) and /generate (vllmhttp), and passes anything
// else through unchecked.
//
//   - openai-parser: chat completions, completions, responses,
//     conversations, embeddings.
//   - anthropic-parser: /v1/messages.
//   - vllmhttp-parser: /generate, and everything openai-parser claims (it
//     delegates those to an embedded openai-parser upstream).
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
	"fmt"
	"slices"

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
)

var openAIKinds = []prefixhash.Kind{prefixhash.KindChatCompletions, prefixhash.KindCompletions,
	prefixhash.KindResponses, prefixhash.KindConversations, prefixhash.KindEmbeddings}

// claims lists the APIs each parser type decodes; nil means a fallback.
var claims = map[string][]prefixhash.Kind{
	TypeOpenAI:      openAIKinds,
	TypeAnthropic:   {prefixhash.KindMessages},
	TypeVLLMHTTP:    append([]prefixhash.Kind{prefixhash.KindGenerate}, openAIKinds...),
	TypePassthrough: nil,
}

// Register adds the parser types to r.
func Register(r *epp.Registry) {
	for _, typ := range []string{TypeOpenAI, TypeAnthropic, TypeVLLMHTTP, TypePassthrough} {
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
	kinds []prefixhash.Kind // nil: fallback
}

// New returns a parser of the given type.
func New(typ, name string) (*Parser, error) {
	kinds, ok := claims[typ]
	if !ok {
		return nil, fmt.Errorf("parser: unknown type %q", typ)
	}
	return &Parser{TypedName: epp.TypedName{PluginType: typ, PluginName: name}, kinds: kinds}, nil
}

// RequestParser marks a parser for the configuration loader (config.Parser).
func (*Parser) RequestParser() {}

// Claim implements epp.RequestParser.
func (p *Parser) Claim(req *epp.Request) epp.Claim {
	if p.kinds == nil {
		return epp.ClaimFallback
	}
	if slices.Contains(p.kinds, Kind(req)) {
		return epp.ClaimPath
	}
	return epp.ClaimNone
}

// ParseRequest implements epp.RequestParser: the body must decode as the
// typed request of its API (spec §2.1 step 0). The passthrough parser
// accepts any body.
func (p *Parser) ParseRequest(req *epp.Request) error {
	if p.kinds == nil {
		return nil
	}
	kind := Kind(req)
	return memo.Get(req.Memo, checkKey{kind}, func() error { return prefixhash.CheckBody(kind, req.Body) })
}

// checkKey memoizes CheckBody's verdict on a request body (epp.Request.Memo).
type checkKey struct{ kind prefixhash.Kind }

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
