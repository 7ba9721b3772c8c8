// Package scorer implements the EPP scorers of spec §4 (llm-d-router
// ebab687, pkg/epp/framework/plugins/scheduling/scorer) that need no outside
// service, together with the filter variants that share their logic
// (context-length-aware in filter mode, session-affinity-filter,
// endpoint-attribute-filter).
//
// Scorers write one raw value per candidate; the profile clamps each to [0,1]
// and multiplies it by the scorer's weight (spec §2.3), so values outside
// [0,1] are returned unclamped here, as upstream does.
//
// Produced data is read where epp/types.go documents it: PrefixCacheMatchInfo,
// InFlightLoad and UncachedRequestTokens as per-endpoint attributes under
// DataKey{<type>, <producer name>}, the token count from Request.Tokenized,
// session ids as request attributes. Attribute values may be stored by value
// or by pointer; both are accepted. Plugins that read produced data implement
// epp.DataConsumer with the exact keys, so the config layer can order
// producers and auto-create missing ones (spec §1.3 steps 6–7).
//
// Scorers without upstream parameters ignore any parameters given, as the
// upstream factories do (they never decode them).
package scorer

import (
	"encoding/json"

	"github.com/eppsim/eppsim/epp"
)

// Registered type strings (spec §1.4).
const (
	QueueType                 = "queue-scorer"
	RunningRequestsType       = "running-requests-size-scorer"
	KVCacheUtilizationType    = "kv-cache-utilization-scorer"
	LoadAwareType             = "load-aware-scorer"
	ActiveRequestType         = "active-request-scorer"
	TokenLoadType             = "token-load-scorer"
	PrefixCacheType           = "prefix-cache-scorer"
	NoHitLRUType              = "no-hit-lru-scorer"
	LoraAffinityType          = "lora-affinity-scorer"
	ContextLengthAwareType    = "context-length-aware"
	SessionAffinityType       = "session-affinity-scorer"
	SessionAffinityFilterType = "session-affinity-filter"
	EndpointAttributeType     = "endpoint-attribute-scorer"
	EndpointAttrFilterType    = "endpoint-attribute-filter"
	HeaderLabelAffinityType   = "header-label-affinity-scorer"
	LatencyType               = "latency-scorer"
	MMEmbeddingsCacheType     = "mm-embeddings-cache-scorer"
)

// Register adds every scorer type of this package (and the filter variants
// that live with their scorer) to r.
func Register(r *epp.Registry) {
	r.Register(QueueType, noParams(func(name string) epp.Plugin { return NewQueue(name) }))
	r.Register(RunningRequestsType, noParams(func(name string) epp.Plugin { return NewRunningRequests(name) }))
	r.Register(KVCacheUtilizationType, noParams(func(name string) epp.Plugin { return NewKVCacheUtilization(name) }))
	r.Register(LoraAffinityType, noParams(func(name string) epp.Plugin { return NewLoraAffinity(name) }))
	r.Register(MMEmbeddingsCacheType, mmEmbeddingsCacheFactory)
	r.Register(TopologyAffinityType, topologyAffinityFactory)
	r.Register(LoadAwareType, loadAwareFactory)
	r.Register(ActiveRequestType, activeRequestFactory)
	r.Register(TokenLoadType, tokenLoadFactory)
	r.Register(PrefixCacheType, prefixCacheFactory)
	r.Register(NoHitLRUType, noHitLRUFactory)
	r.Register(ContextLengthAwareType, contextLengthAwareFactory)
	r.Register(SessionAffinityType, sessionAffinityFactory(SessionAffinityType))
	r.Register(SessionAffinityFilterType, sessionAffinityFactory(SessionAffinityFilterType))
	r.Register(EndpointAttributeType, endpointAttributeScorerFactory)
	r.Register(EndpointAttrFilterType, endpointAttributeFilterFactory)
	r.Register(HeaderLabelAffinityType, headerLabelAffinityFactory)
	r.Register(LatencyType, latencyFactory)
}

// noParams wraps a constructor for a plugin that has no upstream parameters.
func noParams(mk func(name string) epp.Plugin) epp.Factory {
	return func(name string, _ json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
		return mk(name), nil
	}
}

// prefixInfo reads the PrefixCacheMatchInfo under key.
func prefixInfo(e *epp.Endpoint, key epp.DataKey) (epp.PrefixCacheMatchInfo, bool) {
	return epp.Attr[epp.PrefixCacheMatchInfo](e, key)
}

// inFlight reads the InFlightLoad under key; missing is zero load.
func inFlight(e *epp.Endpoint, key epp.DataKey) epp.InFlightLoad {
	l, _ := epp.Attr[epp.InFlightLoad](e, key)
	return l
}

// profileTarget returns the first target of the named profile, or of the
// primary profile when profile is empty.
func profileTarget(res *epp.Result, profile string) *epp.Endpoint {
	if res == nil {
		return nil
	}
	if profile == "" {
		profile = res.PrimaryProfile
	}
	pr := res.Profiles[profile]
	if pr == nil || len(pr.Targets) == 0 {
		return nil
	}
	return pr.Targets[0]
}
