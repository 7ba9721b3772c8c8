package profile

import (
	"encoding/json"
	"fmt"

	"github.com/eppsim/eppsim/epp"
)

// Disaggregation decider types (spec §1.4, §9; pd-offload.md A.3). They are
// referenced by name from disagg-profile-handler's deciders parameter (and
// pd-profile-handler's deciderPluginName).
const (
	PrefixBasedPDDeciderType          = "prefix-based-pd-decider"
	AlwaysDisaggPDDeciderType         = "always-disagg-pd-decider"
	AlwaysDisaggMultimodalDeciderType = "always-disagg-multimodal-decider"
)

// Decider decides, for the endpoint the decode profile picked, whether a
// stage (prefill, or encode) runs on a pod of its own (upstream's
// deciderPlugin.disaggregate). The PDDecision it returns carries its reason
// and what it read; the handler completes it.
type Decider interface {
	epp.Plugin
	Decide(c *epp.Cycle, req *epp.Request, decode *epp.Endpoint) (bool, epp.PDDecision)
}

func registerDeciders(r *epp.Registry) {
	r.Register(PrefixBasedPDDeciderType, func(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
		var p PrefixBasedPDDeciderParams
		if err := epp.DecodeParams(PrefixBasedPDDeciderType, name, params, &p); err != nil {
			return nil, err
		}
		return NewPrefixBasedPDDecider(name, p)
	})
	r.Register(AlwaysDisaggPDDeciderType, func(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
		if err := epp.DecodeParams(AlwaysDisaggPDDeciderType, name, params, &struct{}{}); err != nil {
			return nil, err
		}
		return &AlwaysDisaggPD{epp.TypedName{PluginType: AlwaysDisaggPDDeciderType, PluginName: name}}, nil
	})
	r.Register(AlwaysDisaggMultimodalDeciderType, func(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
		if err := epp.DecodeParams(AlwaysDisaggMultimodalDeciderType, name, params, &struct{}{}); err != nil {
			return nil, err
		}
		return &MultimodalDecider{epp.TypedName{PluginType: AlwaysDisaggMultimodalDeciderType, PluginName: name}}, nil
	})
}

// PrefixBasedPDDeciderParams are prefix-based-pd-decider's parameters
// (pd-offload.md A.3): nonCachedTokens (0 disables the decider) and
// promptTokens (0: no gate). Upstream at ebab687 has no producer-name
// parameter: the decider always reads the approximate producer.
type PrefixBasedPDDeciderParams struct {
	NonCachedTokens int `json:"nonCachedTokens"`
	PromptTokens    int `json:"promptTokens"`
}

// PrefixBasedPD is prefix-based-pd-decider (pd-offload.md A.3,
// PrefixBasedPDDecider.disaggregate): disaggregate when the prompt's part
// the decode pick does not hold, by the approximate producer's belief, is
// at least nonCachedTokens.
type PrefixBasedPD struct {
	epp.TypedName
	nonCached, prompt int
	key               epp.DataKey
}

// NewPrefixBasedPDDecider validates p as upstream does (negative values are
// errors) and returns the decider.
func NewPrefixBasedPDDecider(name string, p PrefixBasedPDDeciderParams) (*PrefixBasedPD, error) {
	if p.NonCachedTokens < 0 {
		return nil, fmt.Errorf("plugin %q (type %s): nonCachedTokens parameter of prefix disaggregation decider cannot be negative", name, PrefixBasedPDDeciderType)
	}
	if p.PromptTokens < 0 {
		return nil, fmt.Errorf("plugin %q (type %s): promptTokens cannot be negative", name, PrefixBasedPDDeciderType)
	}
	return &PrefixBasedPD{
		TypedName: epp.TypedName{PluginType: PrefixBasedPDDeciderType, PluginName: name},
		nonCached: p.NonCachedTokens, prompt: p.PromptTokens,
		// The default key, whatever producer feeds the scorers (A.3: the
		// decider has no producer-name parameter; a precise producer
		// publishes under its own name).
		key: epp.DataKey{Type: epp.PrefixCacheMatchInfoType, Producer: epp.ApproxPrefixProducer},
	}, nil
}

// Decide implements Decider with the conditions of pd-offload.md A.3, in
// their order: disabled, no decode endpoint, prompt below promptTokens,
// prompt below nonCachedTokens, no match info, and finally T −
// cachedBlockCount·blockSizeTokens < nonCachedTokens. T counts the
// tokenized prompt (estimate pseudo-tokens or real ones) and the match is
// unweighted; the router hashes the partial last block too, so a fully
// indexed prompt has cached ≥ T and stays decode-only.
func (d *PrefixBasedPD) Decide(_ *epp.Cycle, req *epp.Request, decode *epp.Endpoint) (bool, epp.PDDecision) {
	dec := epp.PDDecision{Decider: d.Name(), Reason: epp.PDReasonDisabled}
	if d.nonCached == 0 || decode == nil {
		return false, dec
	}
	if req != nil {
		dec.PromptTokens = req.Tokenized.TokenCount()
	}
	t := dec.PromptTokens
	if (d.prompt > 0 && t < d.prompt) || t < d.nonCached {
		dec.Reason = epp.PDReasonShortPrompt
		return false, dec
	}
	m, ok := epp.Attr[epp.PrefixCacheMatchInfo](decode, d.key)
	if !ok {
		dec.Reason = epp.PDReasonNoMatchInfo
		return false, dec
	}
	dec.CachedTokens = m.CachedBlockCount * m.BlockSizeTokens
	if t-dec.CachedTokens < d.nonCached {
		dec.Reason = epp.PDReasonCached
		return false, dec
	}
	dec.Reason = epp.PDReasonDisaggregated
	return true, dec
}

// AlwaysDisaggPD is always-disagg-pd-decider: every request is
// disaggregated (A.3).
type AlwaysDisaggPD struct{ epp.TypedName }

// Decide implements Decider.
func (d *AlwaysDisaggPD) Decide(_ *epp.Cycle, req *epp.Request, _ *epp.Endpoint) (bool, epp.PDDecision) {
	dec := epp.PDDecision{Decider: d.Name(), Reason: epp.PDReasonDisaggregated}
	if req != nil {
		dec.PromptTokens = req.Tokenized.TokenCount()
	}
	return true, dec
}

// MultimodalDecider is always-disagg-multimodal-decider, the encode stage's
// decider. eppsim does not simulate the encode stage, so it never
// approves.
type MultimodalDecider struct{ epp.TypedName }

// Decide implements Decider: never.
func (d *MultimodalDecider) Decide(*epp.Cycle, *epp.Request, *epp.Endpoint) (bool, epp.PDDecision) {
	return false, epp.PDDecision{Decider: d.Name(), Reason: epp.PDReasonDisabled}
}

// NotSimulatedReason implements epp.NotSimulated.
func (d *MultimodalDecider) NotSimulatedReason() string {
	return "not simulated: the multimodal encode stage (E/PD, E/P/D: encoder pods reached through x-encoder-hosts-ports) " +
		"is not modelled, as the simulated replicas have no vision or audio encoder; fallback: the decider never approves, " +
		"so the encode profile never runs and a multimodal prompt is prefilled by its prefill or decode pod like any other"
}

var (
	_ Decider          = (*PrefixBasedPD)(nil)
	_ Decider          = (*AlwaysDisaggPD)(nil)
	_ Decider          = (*MultimodalDecider)(nil)
	_ epp.NotSimulated = (*MultimodalDecider)(nil)
)
