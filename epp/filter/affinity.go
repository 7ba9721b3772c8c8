package filter

import (
	"encoding/json"
	"math"
	"math/rand/v2"

	"github.com/eppsim/eppsim/epp"
)

// TTFT sources of prefix-cache-affinity-filter.
const (
	TTFTSourcePrefillThroughput = "prefillThroughput"
	TTFTSourceLatencyPredictor  = "latencyPredictor"
)

// PrefixCacheAffinityParams are prefix-cache-affinity-filter's parameters
// (spec §9).
type PrefixCacheAffinityParams struct {
	// AffinityThreshold: endpoints with match/total ≥ this are sticky
	// (default 0.80, must be in [0,1]).
	AffinityThreshold float64 `json:"affinityThreshold"`
	// ExplorationProbability: chance of keeping all endpoints (default 0,
	// must be in [0,1]).
	ExplorationProbability float64 `json:"explorationProbability"`
	// MaxTTFTPenaltyMs: stickiness breaks when the best sticky TTFT exceeds
	// the best non-sticky TTFT by more (default 18000; 0 = always stick).
	MaxTTFTPenaltyMs float64 `json:"maxTTFTPenaltyMs"`
	// TTFTSource: prefillThroughput (default) or latencyPredictor.
	TTFTSource string `json:"ttftSource"`
	// PeakPrefillThroughput in tokens/s (default 15928) converts in-flight
	// tokens to TTFT for prefillThroughput.
	PeakPrefillThroughput float64 `json:"peakPrefillThroughput"`

	PrefixMatchInfoProducerName       string `json:"prefixMatchInfoProducerName"`
	LatencyPredictionInfoProducerName string `json:"latencyPredictionInfoProducerName"`
	InFlightLoadProducerName          string `json:"inFlightLoadProducerName"`
}

// DefaultPrefixCacheAffinityParams are the defaults of spec §9.
func DefaultPrefixCacheAffinityParams() PrefixCacheAffinityParams {
	return PrefixCacheAffinityParams{
		AffinityThreshold:      0.80,
		ExplorationProbability: 0,
		MaxTTFTPenaltyMs:       18000,
		TTFTSource:             TTFTSourcePrefillThroughput,
		PeakPrefillThroughput:  15928,
	}
}

// PrefixCacheAffinity is prefix-cache-affinity-filter (spec §9,
// filter/prefixcacheaffinity/plugin.go). With at most one candidate or a
// threshold ≤ 0 it passes everything. Otherwise it draws u from its seeded
// stream and keeps all when u < explorationProbability; splits candidates
// into sticky (match/total ≥ threshold) and the rest; keeps all when none is
// sticky; with a positive penalty and some non-sticky endpoints, keeps all
// when min TTFT(sticky) − min TTFT(non-sticky) > maxTTFTPenaltyMs; else keeps
// the sticky ones.
//
// TTFT with prefillThroughput is in-flight tokens (InFlightLoad.Tokens, spec
// §8; missing = 0) / peakPrefillThroughput · 1000 ms. With latencyPredictor
// it is the predicted TTFT, which eppsim never has (no predictor sidecar): a
// missing prediction counts as +Inf-like MaxFloat64 as upstream, so the gap
// is 0 and stickiness is never broken.
type PrefixCacheAffinity struct {
	epp.TypedName
	p         PrefixCacheAffinityParams
	prefixKey epp.DataKey
	loadKey   epp.DataKey
	latKey    epp.DataKey
	rng       *rand.Rand
}

func prefixCacheAffinityFactory(name string, params json.RawMessage, h *epp.Handle) (epp.Plugin, error) {
	p := DefaultPrefixCacheAffinityParams()
	if err := epp.DecodeParams(PrefixCacheAffinityType, name, params, &p); err != nil {
		return nil, err
	}
	return NewPrefixCacheAffinity(name, p, h.Rand(name))
}

// NewPrefixCacheAffinity validates p and returns the filter.
func NewPrefixCacheAffinity(name string, p PrefixCacheAffinityParams, rng *rand.Rand) (*PrefixCacheAffinity, error) {
	bad := func(format string, a ...any) error { return pluginErr(PrefixCacheAffinityType, name, format, a...) }
	switch {
	case !(p.AffinityThreshold >= 0 && p.AffinityThreshold <= 1):
		return nil, bad("affinityThreshold must be in [0, 1], got %v", p.AffinityThreshold)
	case !(p.ExplorationProbability >= 0 && p.ExplorationProbability <= 1):
		return nil, bad("explorationProbability must be in [0, 1], got %v", p.ExplorationProbability)
	case !(p.MaxTTFTPenaltyMs >= 0):
		return nil, bad("maxTTFTPenaltyMs must be >= 0, got %v", p.MaxTTFTPenaltyMs)
	case !(p.PeakPrefillThroughput >= 0):
		return nil, bad("peakPrefillThroughput must be >= 0, got %v", p.PeakPrefillThroughput)
	}
	switch p.TTFTSource {
	case TTFTSourcePrefillThroughput, TTFTSourceLatencyPredictor:
	default:
		return nil, bad("ttftSource must be %q or %q, got %q", TTFTSourceLatencyPredictor, TTFTSourcePrefillThroughput, p.TTFTSource)
	}
	if p.TTFTSource == TTFTSourcePrefillThroughput && p.MaxTTFTPenaltyMs > 0 && p.PeakPrefillThroughput == 0 {
		return nil, bad("peakPrefillThroughput must be > 0 when ttftSource is prefillThroughput")
	}
	if rng == nil {
		rng = (*epp.Handle)(nil).Rand(name)
	}
	return &PrefixCacheAffinity{
		TypedName: epp.TypedName{PluginType: PrefixCacheAffinityType, PluginName: name},
		p:         p,
		prefixKey: epp.KeyOf(epp.PrefixCacheMatchInfoType, p.PrefixMatchInfoProducerName, epp.ApproxPrefixProducer),
		loadKey:   epp.KeyOf(epp.InFlightLoadType, p.InFlightLoadProducerName, epp.InFlightLoadProducer),
		latKey:    epp.KeyOf(epp.LatencyPredictionType, p.LatencyPredictionInfoProducerName, epp.LatencyProducer),
		rng:       rng,
	}, nil
}

// Consumes implements epp.DataConsumer: prefix match info, and the TTFT
// source when the load gate is on, all required.
func (f *PrefixCacheAffinity) Consumes() []epp.Dependency {
	deps := []epp.Dependency{{Key: f.prefixKey, Required: true}}
	if f.p.MaxTTFTPenaltyMs > 0 {
		if f.p.TTFTSource == TTFTSourceLatencyPredictor {
			deps = append(deps, epp.Dependency{Key: f.latKey, Required: true})
		} else {
			deps = append(deps, epp.Dependency{Key: f.loadKey, Required: true})
		}
	}
	return deps
}

func (f *PrefixCacheAffinity) matchRatio(e *epp.Endpoint) float64 {
	info, ok := epp.Attr[epp.PrefixCacheMatchInfo](e, f.prefixKey)
	if !ok || info.TotalBlocks <= 0 {
		return 0
	}
	return float64(info.MatchBlocks) / float64(info.TotalBlocks)
}

// ttft returns the endpoint's TTFT estimate in ms.
func (f *PrefixCacheAffinity) ttft(e *epp.Endpoint) float64 {
	if f.p.TTFTSource == TTFTSourceLatencyPredictor {
		// No predictor in the simulator: every prediction is missing.
		return math.MaxFloat64
	}
	return float64(inFlight(e, f.loadKey).Tokens) / f.p.PeakPrefillThroughput * 1000
}

func (f *PrefixCacheAffinity) bestTTFT(eps []*epp.Endpoint, sticky []bool, want bool) float64 {
	best := math.MaxFloat64
	for i, e := range eps {
		if sticky[i] == want {
			best = math.Min(best, f.ttft(e))
		}
	}
	return best
}

// Filter implements epp.Filter.
func (f *PrefixCacheAffinity) Filter(_ *epp.Cycle, _ *epp.Request, eps []*epp.Endpoint) []*epp.Endpoint {
	if len(eps) <= 1 || f.p.AffinityThreshold <= 0 {
		return eps
	}
	if f.rng.Float64() < f.p.ExplorationProbability {
		return eps
	}
	sticky := make([]bool, len(eps))
	nSticky := 0
	for i, e := range eps {
		if f.matchRatio(e) >= f.p.AffinityThreshold {
			sticky[i] = true
			nSticky++
		}
	}
	if nSticky == 0 {
		return eps
	}
	if f.p.MaxTTFTPenaltyMs > 0 && nSticky < len(eps) {
		if f.bestTTFT(eps, sticky, true)-f.bestTTFT(eps, sticky, false) > f.p.MaxTTFTPenaltyMs {
			return eps
		}
	}
	out := make([]*epp.Endpoint, 0, nSticky)
	for i, e := range eps {
		if sticky[i] {
			out = append(out, e)
		}
	}
	return out
}

// SLOHeadroomTierParams are slo-headroom-tier-filter's parameters.
type SLOHeadroomTierParams struct {
	// EpsilonExploreNeg: probability of keeping the negative tier when both
	// tiers exist (default 0.01, must be in [0,1]).
	EpsilonExploreNeg                 float64 `json:"epsilonExploreNeg"`
	LatencyPredictionInfoProducerName string  `json:"latencyPredictionInfoProducerName"`
}

// HeadroomPrediction is what slo-headroom-tier-filter needs from a latency
// prediction attribute: SLO − predicted for TTFT and TPOT.
type HeadroomPrediction interface {
	TTFTHeadroom() float64
	TPOTHeadroom() float64
}

// SLOHeadroomTier is slo-headroom-tier-filter (spec §9,
// filter/sloheadroomtier): endpoints whose prediction has both headrooms ≥ 0
// form the positive tier, the others (including those without a prediction)
// the negative tier; with both tiers present it keeps the positive one with
// probability 1 − epsilonExploreNeg (drawn from its seeded stream). With no
// prediction on any endpoint it keeps all — always the case in eppsim, which
// has no latency predictor. Tiers keep input order.
type SLOHeadroomTier struct {
	epp.TypedName
	eps float64
	key epp.DataKey
	rng *rand.Rand
}

func sloHeadroomTierFactory(name string, params json.RawMessage, h *epp.Handle) (epp.Plugin, error) {
	p := SLOHeadroomTierParams{EpsilonExploreNeg: 0.01}
	if err := epp.DecodeParams(SLOHeadroomTierType, name, params, &p); err != nil {
		return nil, err
	}
	if !(p.EpsilonExploreNeg >= 0 && p.EpsilonExploreNeg <= 1) {
		return nil, pluginErr(SLOHeadroomTierType, name, "epsilonExploreNeg must be in [0, 1], got %v", p.EpsilonExploreNeg)
	}
	return &SLOHeadroomTier{
		TypedName: epp.TypedName{PluginType: SLOHeadroomTierType, PluginName: name},
		eps:       p.EpsilonExploreNeg,
		key:       epp.KeyOf(epp.LatencyPredictionType, p.LatencyPredictionInfoProducerName, epp.LatencyProducer),
		rng:       h.Rand(name),
	}, nil
}

// Consumes implements epp.DataConsumer: latency predictions, required as
// upstream (the predictor is reported as not simulated by the config layer).
func (f *SLOHeadroomTier) Consumes() []epp.Dependency {
	return []epp.Dependency{{Key: f.key, Required: true}}
}

// Filter implements epp.Filter.
func (f *SLOHeadroomTier) Filter(_ *epp.Cycle, _ *epp.Request, eps []*epp.Endpoint) []*epp.Endpoint {
	if len(eps) <= 1 {
		return eps
	}
	positive := make([]bool, len(eps))
	nPos, nPred := 0, 0
	for i, e := range eps {
		v, ok := e.Get(f.key)
		if !ok {
			continue
		}
		hp, ok := v.(HeadroomPrediction)
		if !ok {
			continue
		}
		nPred++
		if hp.TTFTHeadroom() >= 0 && hp.TPOTHeadroom() >= 0 {
			positive[i] = true
			nPos++
		}
	}
	if nPred == 0 {
		return eps
	}
	keepPositive := nPos > 0
	if nPos > 0 && nPos < len(eps) && f.rng.Float64() < f.eps {
		keepPositive = false
	}
	out := make([]*epp.Endpoint, 0, len(eps))
	for i, e := range eps {
		if positive[i] == keepPositive {
			out = append(out, e)
		}
	}
	return out
}
