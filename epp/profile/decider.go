package profile

import (
	"encoding/json"
	"fmt"

	"github.com/eppsim/eppsim/epp"
)

// Disaggregation decider types (spec §1.4, §9). They are referenced only by
// disagg-profile-handler's deciders parameter.
const (
	PrefixBasedPDDeciderType          = "prefix-based-pd-decider"
	AlwaysDisaggPDDeciderType         = "always-disagg-pd-decider"
	AlwaysDisaggMultimodalDeciderType = "always-disagg-multimodal-decider"
)

// RegisterDeciders adds the three disaggregation decider types to r as
// not-simulated plugins (their parameters are still validated). It is
// separate from Register so that the config layer decides which package owns
// these type strings; registering a type twice panics.
func RegisterDeciders(r *epp.Registry) {
	r.Register(PrefixBasedPDDeciderType, func(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
		var p PrefixBasedPDDeciderParams
		if err := epp.DecodeParams(PrefixBasedPDDeciderType, name, params, &p); err != nil {
			return nil, err
		}
		if p.NonCachedTokens < 0 {
			return nil, fmt.Errorf("plugin %q (type %s): nonCachedTokens parameter of prefix disaggregation decider cannot be negative", name, PrefixBasedPDDeciderType)
		}
		if p.PromptTokens < 0 {
			return nil, fmt.Errorf("plugin %q (type %s): promptTokens cannot be negative", name, PrefixBasedPDDeciderType)
		}
		return newDecider(PrefixBasedPDDeciderType, name), nil
	})
	for _, typ := range []string{AlwaysDisaggPDDeciderType, AlwaysDisaggMultimodalDeciderType} {
		r.Register(typ, func(name string, _ json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
			return newDecider(typ, name), nil
		})
	}
}

// PrefixBasedPDDeciderParams are prefix-based-pd-decider's parameters:
// disaggregate iff nonCachedTokens > 0, the prompt has at least promptTokens
// tokens (when set) and its uncached part is at least nonCachedTokens.
type PrefixBasedPDDeciderParams struct {
	NonCachedTokens             int    `json:"nonCachedTokens"`
	PromptTokens                int    `json:"promptTokens"`
	PrefixMatchInfoProducerName string `json:"prefixMatchInfoProducerName"`
}

// Decider is a disaggregation decider accepted in a configuration but never
// consulted: the disaggregation handlers fall back to decode-only routing.
type Decider struct {
	epp.TypedName
}

func newDecider(typ, name string) *Decider {
	return &Decider{epp.TypedName{PluginType: typ, PluginName: name}}
}

// NotSimulatedReason implements epp.NotSimulated.
func (d *Decider) NotSimulatedReason() string {
	return d.PluginType + " decides prefill/encode disaggregation for disagg-profile-handler, which the single-pool simulator does not model; it is never consulted"
}
