package scorer

import (
	"encoding/json"
	"fmt"
	"math"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/eppsim/eppsim/epp"
)

// PrefixCacheParams are prefix-cache-scorer's parameters (spec §4, §5.9).
type PrefixCacheParams struct {
	// PrefixMatchInfoProducerName names the producer whose
	// PrefixCacheMatchInfo is read; empty means approx-prefix-cache-producer
	// (spec §1.3 step 6).
	PrefixMatchInfoProducerName string `json:"prefixMatchInfoProducerName"`
	// MatchLengthWeight w ∈ [0,1] (default 0) blends in the absolute match
	// length term.
	MatchLengthWeight float64 `json:"matchLengthWeight"`
	// MatchLengthScaleTokens S (default 8192) must be > 0 when w > 0.
	MatchLengthScaleTokens int `json:"matchLengthScaleTokens"`
}

// DefaultMatchLengthScaleTokens is prefix-cache-scorer's default S.
const DefaultMatchLengthScaleTokens = 8192

// PrefixCache is prefix-cache-scorer (spec §4, scorer/prefix/plugin.go):
// missing match info or totalBlocks == 0 → 0; else
// (1−w)·match/total + w·min(1, match·blockSize/S)², the length term only
// when w > 0 and blockSize > 0.
type PrefixCache struct {
	epp.TypedName
	key    epp.DataKey
	weight float64
	scale  float64
}

func prefixCacheFactory(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
	p := PrefixCacheParams{MatchLengthScaleTokens: DefaultMatchLengthScaleTokens}
	if err := epp.DecodeParams(PrefixCacheType, name, params, &p); err != nil {
		return nil, err
	}
	return NewPrefixCache(name, p)
}

// NewPrefixCache returns a prefix-cache-scorer, or the factory error of spec
// §1.5 for an invalid weight or scale.
func NewPrefixCache(name string, p PrefixCacheParams) (*PrefixCache, error) {
	if p.MatchLengthWeight < 0 || p.MatchLengthWeight > 1 || math.IsNaN(p.MatchLengthWeight) {
		return nil, fmt.Errorf("plugin %q (type %s): matchLengthWeight must be between 0.0 and 1.0, got %v", name, PrefixCacheType, p.MatchLengthWeight)
	}
	if p.MatchLengthWeight > 0 && p.MatchLengthScaleTokens <= 0 {
		return nil, fmt.Errorf("plugin %q (type %s): matchLengthScaleTokens must be greater than 0 when matchLengthWeight is greater than 0, got %d", name, PrefixCacheType, p.MatchLengthScaleTokens)
	}
	return &PrefixCache{
		TypedName: epp.TypedName{PluginType: PrefixCacheType, PluginName: name},
		key:       epp.KeyOf(epp.PrefixCacheMatchInfoType, p.PrefixMatchInfoProducerName, epp.ApproxPrefixProducer),
		weight:    p.MatchLengthWeight,
		scale:     float64(p.MatchLengthScaleTokens),
	}, nil
}

// Key returns the data key the scorer reads.
func (s *PrefixCache) Key() epp.DataKey { return s.key }

// Consumes implements epp.DataConsumer: PrefixCacheMatchInfo, required.
func (s *PrefixCache) Consumes() []epp.Dependency {
	return []epp.Dependency{{Key: s.key, Required: true}}
}

// Score implements epp.Scorer.
func (s *PrefixCache) Score(_ *epp.Cycle, _ *epp.Request, eps []*epp.Endpoint, scores []float64) {
	for i, e := range eps {
		info, ok := prefixInfo(e, s.key)
		if !ok || info.TotalBlocks == 0 {
			scores[i] = 0
			continue
		}
		ratio := float64(info.MatchBlocks) / float64(info.TotalBlocks)
		length := 0.0
		if s.weight > 0 && info.BlockSizeTokens > 0 {
			length = math.Min(1.0, float64(info.MatchBlocks)*float64(info.BlockSizeTokens)/s.scale)
			length *= length
		}
		scores[i] = s.weight*length + (1.0-s.weight)*ratio
	}
}

// DefaultLRUSize is no-hit-lru-scorer's default LRU capacity.
const DefaultLRUSize = 1024

// prefillProfile is the profile whose target no-hit-lru (and the approximate
// producer) also records (spec §9, hard-coded upstream).
const prefillProfile = "prefill"

// NoHitLRUParams are no-hit-lru-scorer's parameters (spec §4).
type NoHitLRUParams struct {
	// LRUSize is the LRU capacity (default 1024; ≤ 0 means the default).
	LRUSize int `json:"lruSize"`
	// PrefixMatchInfoProducerName names the producer whose match info
	// decides whether a request is cold; empty means the approximate one.
	PrefixMatchInfoProducerName string `json:"prefixMatchInfoProducerName"`
	// PrefixPluginType and PrefixPluginName were never used upstream and are
	// deprecated; accepted so old configs load.
	PrefixPluginType string `json:"prefixPluginType"`
	PrefixPluginName string `json:"prefixPluginName"`
}

// NoHitLRU is no-hit-lru-scorer (spec §4.1, scorer/nohitlru/no_hit_lru.go).
// A request is cold when no candidate has MatchBlocks > 0 (a missing
// attribute is no hit). Warm requests score 0.5 everywhere. Cold requests
// rank endpoints by when they last received a cold request: with N
// candidates, endpoints never in the LRU get 1 − i/(N−1) in input order,
// endpoints at LRU position p (0 = oldest) get max(0, 1 − (never+p)/(N−1)); a
// single candidate gets 1.0. PreRequest of a cold request moves the primary
// profile's target, and the "prefill" profile's target if any, to the most
// recent end of the LRU. LRU keys are endpoint names ("namespace/name").
//
// The cold flag travels from Score to PreRequest as a request attribute, as
// upstream's per-request plugin state does (last Score call wins when several
// profiles use the scorer).
type NoHitLRU struct {
	epp.TypedName
	key      epp.DataKey
	stateKey epp.DataKey
	cache    *lru.Cache[string, struct{}]
}

func noHitLRUFactory(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
	var p NoHitLRUParams
	if err := epp.DecodeParams(NoHitLRUType, name, params, &p); err != nil {
		return nil, err
	}
	return NewNoHitLRU(name, p)
}

// NewNoHitLRU returns a no-hit-lru-scorer.
func NewNoHitLRU(name string, p NoHitLRUParams) (*NoHitLRU, error) {
	size := p.LRUSize
	if size <= 0 {
		size = DefaultLRUSize
	}
	c, err := lru.New[string, struct{}](size)
	if err != nil {
		return nil, fmt.Errorf("plugin %q (type %s): %w", name, NoHitLRUType, err)
	}
	return &NoHitLRU{
		TypedName: epp.TypedName{PluginType: NoHitLRUType, PluginName: name},
		key:       epp.KeyOf(epp.PrefixCacheMatchInfoType, p.PrefixMatchInfoProducerName, epp.ApproxPrefixProducer),
		stateKey:  epp.DataKey{Type: "no-hit-lru.cold", Producer: name},
		cache:     c,
	}, nil
}

// Consumes implements epp.DataConsumer. The match info is optional upstream:
// the scorer treats missing data as a cold request, and configs without a
// prefix scorer (sim-epp-no-hit-lru.yaml uses the precise producer) must not
// get a second approximate producer auto-created for it.
func (s *NoHitLRU) Consumes() []epp.Dependency {
	return []epp.Dependency{{Key: s.key, Required: false}}
}

// LRUKeys returns the LRU contents, oldest first (for tests and explain).
func (s *NoHitLRU) LRUKeys() []string { return s.cache.Keys() }

func (s *NoHitLRU) cold(eps []*epp.Endpoint) bool {
	for _, e := range eps {
		if info, ok := prefixInfo(e, s.key); ok && info.MatchBlocks > 0 {
			return false
		}
	}
	return true
}

// Score implements epp.Scorer.
func (s *NoHitLRU) Score(_ *epp.Cycle, req *epp.Request, eps []*epp.Endpoint, scores []float64) {
	cold := s.cold(eps)
	if req != nil {
		req.Put(s.stateKey, cold)
	}
	if !cold {
		for i := range eps {
			scores[i] = 0.5
		}
		return
	}
	n := len(eps)
	if n == 1 {
		scores[0] = 1.0
		return
	}
	if n == 0 {
		return
	}
	keys := s.cache.Keys()
	pos := make(map[string]int, len(keys))
	for i, k := range keys {
		pos[k] = i
	}
	never := 0
	for _, e := range eps {
		if _, used := pos[e.Name]; !used {
			never++
		}
	}
	den := float64(n - 1)
	i := 0
	for j, e := range eps {
		p, used := pos[e.Name]
		if !used {
			scores[j] = 1.0 - float64(i)/den
			i++
			continue
		}
		scores[j] = max(0, 1.0-float64(never+p)/den)
	}
}

// PreRequest implements epp.PreRequestHook (spec §4.1).
func (s *NoHitLRU) PreRequest(_ *epp.Cycle, req *epp.Request, res *epp.Result) {
	if req == nil || res == nil || len(res.Profiles) == 0 {
		return
	}
	v, ok := req.Get(s.stateKey)
	if cold, isBool := v.(bool); !ok || !isBool || !cold {
		return
	}
	if t := profileTarget(res, res.PrimaryProfile); t != nil {
		s.cache.Add(t.Name, struct{}{})
	}
	if t := profileTarget(res, prefillProfile); t != nil {
		s.cache.Add(t.Name, struct{}{})
	}
}
