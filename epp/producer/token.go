package producer

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/eppsim/eppsim/epp"
	"github.com/eppsim/eppsim/epp/prefixhash"
)

// Plugin type strings registered by this package (spec §1.4).
const (
	TokenProducerType       = epp.TokenProducer
	LegacyTokenizerType     = "tokenizer"
	ApproxPrefixType        = epp.ApproxPrefixProducer
	PrecisePrefixType       = epp.PrecisePrefixProducer
	PrecisePrefixScorerType = "precise-prefix-cache-scorer"
	InFlightLoadType        = epp.InFlightLoadProducer
	SessionIDType           = epp.SessionIDProducer
	BurstPrefixType         = "burst-prefix-cache-producer"

	// prefillProfile is the profile name upstream hard-codes for the P/D
	// prefill target (experimentalDefaultPrefillProfile).
	prefillProfile = "prefill"
)

// pickedTargets returns the first target of res's primary profile and of
// its "prefill" profile (prefill nil where that profile or its target is
// missing): the endpoints a producer records a routed prompt on after the
// cycle. ok is false when the primary profile has no target.
func pickedTargets(res *epp.Result) (primary, prefill *epp.Endpoint, ok bool) {
	if res == nil {
		return nil, nil, false
	}
	pr := res.Profiles[res.PrimaryProfile]
	if pr == nil || len(pr.Targets) == 0 {
		return nil, nil, false
	}
	if pf := res.Profiles[prefillProfile]; pf != nil && len(pf.Targets) > 0 {
		prefill = pf.Targets[0]
	}
	return pr.Targets[0], prefill, true
}

// scoreMatchInfo writes matched/total blocks of each endpoint's
// PrefixCacheMatchInfo under key into scores (0 without the attribute or
// with total 0): the score of the prefix scorers that own their producer,
// which runs first (produce) when the cycle has not produced key yet.
func scoreMatchInfo(c *epp.Cycle, req *epp.Request, eps []*epp.Endpoint, key epp.DataKey, scores []float64,
	produce func(*epp.Cycle, *epp.Request, []*epp.Endpoint) error) {
	if len(eps) == 0 {
		return
	}
	if _, done := eps[0].Get(key); !done {
		_ = produce(c, req, eps)
	}
	for i, e := range eps {
		info, ok := epp.Attr[epp.PrefixCacheMatchInfo](e, key)
		if !ok || info.TotalBlocks == 0 {
			continue
		}
		scores[i] = float64(info.MatchBlocks) / float64(info.TotalBlocks)
	}
}

// TokenizedPromptKey is the data key every prefix producer consumes: the
// default token producer's output (spec §1.3 step 6).
var TokenizedPromptKey = epp.DataKey{Type: epp.TokenizedPromptType, Producer: epp.TokenProducer}

// Token-producer backends.
const (
	BackendEstimate = "estimate"
	BackendVLLM     = "vllm"
	BackendUDS      = "uds"
)

// TokenProducerParams are the token-producer parameters (spec §5.1). The
// `vllm` and `udsTokenizerConfig` blocks configure transports that do not
// exist in simulation; they must be JSON objects and are otherwise not
// interpreted.
type TokenProducerParams struct {
	Estimate           *prefixhash.EstimateConfig `json:"estimate,omitempty"`
	VLLM               map[string]json.RawMessage `json:"vllm,omitempty"`
	ModelName          string                     `json:"modelName,omitempty"`
	UDSTokenizerConfig map[string]json.RawMessage `json:"udsTokenizerConfig,omitempty"`
}

// TokenProducer is the token-producer data producer (spec §5.1–5.2).
type TokenProducer struct {
	epp.TypedName
	backend   string
	modelName string
	est       *prefixhash.Estimator
	key       epp.DataKey
}

// NewTokenProducer builds a token producer of type typ (token-producer or
// the legacy tokenizer) from its parameters.
func NewTokenProducer(typ, name string, p TokenProducerParams) (*TokenProducer, error) {
	vllmBlock := p.VLLM != nil
	uds := len(p.UDSTokenizerConfig) > 0 // upstream: enabled once configured
	est := p.Estimate != nil
	if (est && (uds || vllmBlock || p.ModelName != "")) || (uds && vllmBlock) {
		return nil, errors.New("only one of 'estimate', 'vllm' or 'udsTokenizerConfig' may be set ('modelName' selects 'vllm')")
	}
	tp := &TokenProducer{
		TypedName: epp.TypedName{PluginType: typ, PluginName: name},
		modelName: p.ModelName,
		key:       epp.DataKey{Type: epp.TokenizedPromptType, Producer: name},
	}
	switch {
	case uds:
		if p.ModelName == "" {
			return nil, errors.New("'modelName' must be specified with 'udsTokenizerConfig'")
		}
		tp.backend = BackendUDS
	case vllmBlock || p.ModelName != "":
		if p.ModelName == "" {
			return nil, errors.New("'modelName' must be specified with 'vllm'")
		}
		tp.backend = BackendVLLM
	default:
		e, err := prefixhash.NewEstimator(p.Estimate)
		if err != nil {
			return nil, err
		}
		tp.backend, tp.est = BackendEstimate, e
	}
	return tp, nil
}

func tokenFactory(typ string) epp.Factory {
	return func(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
		var p TokenProducerParams
		if err := epp.DecodeParams(typ, name, params, &p); err != nil {
			return nil, err
		}
		tp, err := NewTokenProducer(typ, name, p)
		if err != nil {
			return nil, fmt.Errorf("plugin %q (type %s): %w", name, typ, err)
		}
		return tp, nil
	}
}

// Backend is "estimate", "vllm" or "uds".
func (t *TokenProducer) Backend() string { return t.backend }

// Produces is TokenizedPrompt/<name>.
func (t *TokenProducer) Produces() []epp.DataKey { return []epp.DataKey{t.key} }

// Produce tokenizes the request into req.Tokenized (spec §5.1). A request
// that already carries tokens only gets its cache salt filled in. The
// estimate backend packs the body (prefixhash.Estimator); the vllm/uds
// backends return req.ServerPromptTokens as one prompt. A result with no
// tokens leaves req.Tokenized nil.
func (t *TokenProducer) Produce(_ *epp.Cycle, req *epp.Request, _ []*epp.Endpoint) error {
	return t.produce(req)
}

// Prepare implements epp.Preparer: the estimate backend's tokens, into
// req.Memo and req.Tokenized, as Produce computes them.
func (t *TokenProducer) Prepare(req *epp.Request) {
	_ = t.produce(req)
}

func (t *TokenProducer) produce(req *epp.Request) error {
	if req.Tokenized != nil {
		if req.Tokenized.CacheSalt == "" {
			// Tokenized may be shared (epp.Request.Tokenized): replace it.
			tr := *req.Tokenized
			tr.CacheSalt = cacheSalt(req)
			req.Tokenized = &tr
		}
		return nil
	}
	var tr *epp.TokenizedRequest
	switch {
	case req.Generate != nil:
		// Every backend passes a parser's pre-tokenized prompt through
		// (upstream tokenizer/estimate.go and backend.go, Generate).
		tr = prefixhash.GeneratedTokens(req.Memo, req.Generate)
	case t.backend == BackendEstimate:
		var err error
		tr, err = t.est.TokenizeShared(req.Memo, req.Path, req.Body)
		if err != nil {
			return fmt.Errorf("%s %q: request %s: %w", t.Type(), t.Name(), req.ID, err)
		}
	default:
		if len(req.ServerPromptTokens) == 0 {
			return nil
		}
		tr = &epp.TokenizedRequest{
			Prompts:    [][]uint32{req.ServerPromptTokens},
			CacheSalt:  cacheSalt(req),
			FromServer: true,
		}
	}
	if tr.TokenCount() == 0 {
		return nil
	}
	req.Tokenized = tr
	return nil
}

// cacheSalt is the request's cache salt as upstream's CacheSaltFromBody
// reads it (dataproducer/tokenizer/backend.go): the parser's decoded
// generate request's when there is one (sglanghttp-parser: extra_key),
// else the body's cache_salt.
func cacheSalt(req *epp.Request) string {
	if req.Generate != nil {
		return req.Generate.CacheSalt
	}
	return prefixhash.CacheSalt(req.Body)
}
