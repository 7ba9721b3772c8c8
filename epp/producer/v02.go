package producer

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/eppsim/eppsim/epp"
	"github.com/eppsim/eppsim/epp/prefixhash"
)

// V02PrefixCacheScorerType is eppsim's model of prefix-cache-scorer as
// llm-d-inference-scheduler v0.2.0/v0.2.1 registered it
// (pkg/plugins/scorer/prefix_cache.go @ v0.2.1): one scorer with two modes.
// It is the type `--epp-release llm-d-v0.2` gives an old configuration's
// prefix-cache-scorer; its parameters are the old ones, unchanged.
//
//   - "estimate" (the default): gateway-api-inference-extension v0.5.1's
//     character-hashing estimator
//     (pkg/epp/scheduling/framework/plugins/multi/prefix/{plugin,indexer}.go
//     @ v0.5.1). hashBlockSize characters per block (default 64),
//     maxPrefixBlocksToMatch (default 256), one LRU of lruCapacityPerServer
//     hashes per pod (default 31250, also when ≤ 0; never sized from
//     metrics). Hashes are prefixhash.V02BlockHashes; the score is
//     matched/total blocks, the model's own block counted in both. The pick
//     is recorded for the first target in PostCycle, at the end of the
//     scheduling cycle (eppsim: at dispatch, the same instant). The index
//     is today's (approxIndex): the same per-pod LRU, head-first
//     insertion, global longest-prefix walk and stale entries.
//   - "cache_tracking": the kv-cache-manager v0.2.0 indexer fed by KV
//     events (pkg/plugins/scorer/prefix_cache_tracking.go @ v0.2.1). eppsim
//     runs today's precise index on the engines' tokens with every tier
//     weighing 1 (v0.2.0's kvevents pool recorded every block as "gpu"),
//     and scores as v0.2.1's indexedScoresToNormalizedScoredPods did:
//     min-max over the candidates with a hit (all equal → 1), 0 without
//     one. What is not modelled is listed in docs/epp.md "Older configs and
//     releases".
const V02PrefixCacheScorerType = "llm-d-v0.2-prefix-cache-scorer"

// v0.2.x estimate-mode defaults (GIE v0.5.1 prefix/plugin.go).
const (
	V02DefaultHashBlockSize        = 64
	V02DefaultMaxPrefixBlocks      = 256
	V02DefaultLRUCapacityPerServer = 31250
)

// V02 modes.
const (
	V02ModeEstimate      = "estimate"
	V02ModeCacheTracking = "cache_tracking"
)

// V02PrefixParams are the v0.2.x prefix-cache-scorer parameters. Upstream
// decoded them leniently (unknown fields ignored); eppsim decodes them
// strictly and refuses the parameters of the other mode.
type V02PrefixParams struct {
	Mode                   string          `json:"mode,omitempty"`
	HashBlockSize          *int            `json:"hashBlockSize,omitempty"`
	MaxPrefixBlocksToMatch *int            `json:"maxPrefixBlocksToMatch,omitempty"`
	LRUCapacityPerServer   *int            `json:"lruCapacityPerServer,omitempty"`
	IndexerConfig          *V02IndexerConf `json:"indexerConfig,omitempty"`
	KVEventsConfig         *KVEventsConfig `json:"kvEventsConfig,omitempty"`
}

// V02IndexerConf is kv-cache-manager v0.2.0's kvcache.Config
// (pkg/kvcache/indexer.go @ v0.2.0).
type V02IndexerConf struct {
	PrefixStoreConfig    json.RawMessage     `json:"prefixStoreConfig,omitempty"`
	TokenProcessorConfig *V02TokenProcessor  `json:"tokenProcessorConfig,omitempty"`
	KVBlockIndexConfig   *KVBlockIndexConfig `json:"kvBlockIndexConfig,omitempty"`
	TokenizersPoolConfig json.RawMessage     `json:"tokenizersPoolConfig,omitempty"`
}

// V02TokenProcessor is kv-cache-manager v0.2.0's TokenProcessorConfig
// (pkg/kvcache/kvblock/token_processor.go @ v0.2.0): blockSize (default 16)
// and hashSeed, which had to equal the engines' block size and
// PYTHONHASHSEED because v0.2.0 looked the engines' own block hashes up.
type V02TokenProcessor struct {
	BlockSize int    `json:"blockSize,omitempty"`
	HashSeed  string `json:"hashSeed"`
}

// V02Estimate is the estimate mode: a scorer that is its own data
// producer, as upstream's plugin computed its hashes inside Score.
type V02Estimate struct {
	epp.TypedName
	blockChars, maxBlocks, capacity int
	key, stateKey                   epp.DataKey
	idx                             approxIndex
	counts                          []int
}

// V02Tracking is the cache_tracking mode: today's precise producer behind
// v0.2.1's min-max score.
type V02Tracking struct {
	*PrecisePrefixScorer
}

func v02Factory(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
	var p V02PrefixParams
	if err := epp.DecodeParams(V02PrefixCacheScorerType, name, params, &p); err != nil {
		return nil, err
	}
	pl, err := NewV02Prefix(name, p)
	if err != nil {
		return nil, fmt.Errorf("plugin %q (type %s): %w", name, V02PrefixCacheScorerType, err)
	}
	return pl, nil
}

// NewV02Prefix builds the plugin of p's mode.
func NewV02Prefix(name string, p V02PrefixParams) (epp.Plugin, error) {
	switch p.Mode {
	case "", V02ModeEstimate:
		if p.IndexerConfig != nil || p.KVEventsConfig != nil {
			return nil, errors.New("indexerConfig and kvEventsConfig belong to mode cache_tracking (estimate mode ignored them)")
		}
		return NewV02Estimate(name, p)
	case V02ModeCacheTracking:
		if p.HashBlockSize != nil || p.MaxPrefixBlocksToMatch != nil || p.LRUCapacityPerServer != nil {
			return nil, errors.New("hashBlockSize, maxPrefixBlocksToMatch and lruCapacityPerServer belong to mode estimate (cache_tracking mode ignored them)")
		}
		pp, err := NewPrecisePrefix(V02PrefixCacheScorerType, name, V02PreciseParams(p))
		if err != nil {
			return nil, err
		}
		return &V02Tracking{&PrecisePrefixScorer{PrecisePrefix: pp}}, nil
	}
	return nil, fmt.Errorf("unknown mode %q (estimate or cache_tracking)", p.Mode)
}

// NewV02Estimate validates the estimate-mode sizes (defaults for the
// unset ones; an LRU capacity ≤ 0 is the default, as upstream's New).
// A block size or block limit ≤ 0 is refused: upstream looped forever on
// the one and matched only the model's block on the other.
func NewV02Estimate(name string, p V02PrefixParams) (*V02Estimate, error) {
	bs, maxBlocks, capacity := V02DefaultHashBlockSize, V02DefaultMaxPrefixBlocks, V02DefaultLRUCapacityPerServer
	if p.HashBlockSize != nil {
		bs = *p.HashBlockSize
	}
	if p.MaxPrefixBlocksToMatch != nil {
		maxBlocks = *p.MaxPrefixBlocksToMatch
	}
	if p.LRUCapacityPerServer != nil && *p.LRUCapacityPerServer > 0 {
		capacity = *p.LRUCapacityPerServer
	}
	if bs <= 0 {
		return nil, fmt.Errorf("hashBlockSize must be > 0, got %d", bs)
	}
	if maxBlocks <= 0 {
		return nil, fmt.Errorf("maxPrefixBlocksToMatch must be > 0, got %d", maxBlocks)
	}
	return &V02Estimate{
		TypedName:  epp.TypedName{PluginType: V02PrefixCacheScorerType, PluginName: name},
		blockChars: bs, maxBlocks: maxBlocks, capacity: capacity,
		key:      epp.DataKey{Type: epp.PrefixCacheMatchInfoType, Producer: name},
		stateKey: epp.DataKey{Type: "V02EstimateState", Producer: name},
		idx:      newApproxIndex(),
	}, nil
}

// V02PreciseParams maps cache_tracking parameters onto today's precise
// producer: the token processor's block size (v0.2.0 default 16) and seed,
// the in-memory index sizes and metrics flags, every tier weighing 1.
func V02PreciseParams(p V02PrefixParams) PrecisePrefixParams {
	out := DefaultPrecisePrefixParams()
	out.TokenProcessorConfig = &TokenProcessorConfig{BlockSizeTokens: 16}
	if ic := p.IndexerConfig; ic != nil {
		if tp := ic.TokenProcessorConfig; tp != nil {
			if tp.BlockSize != 0 {
				out.TokenProcessorConfig.BlockSizeTokens = tp.BlockSize
			}
			out.TokenProcessorConfig.HashSeed = tp.HashSeed
		}
		if kb := ic.KVBlockIndexConfig; kb != nil {
			kbc := *kb
			if kbc.InMemoryConfig == nil && len(kbc.RedisConfig) == 0 {
				kbc.InMemoryConfig = out.IndexerConfig.KVBlockIndexConfig.InMemoryConfig
			}
			out.IndexerConfig.KVBlockIndexConfig = &kbc
		}
	}
	out.IndexerConfig.KVCacheBackendConfigs = []*KVCacheBackendConfig{{Name: "gpu", Weight: 1}, {Name: "cpu", Weight: 1}}
	if p.KVEventsConfig != nil {
		out.KVEventsConfig = p.KVEventsConfig
	}
	return out
}

// Params are the effective estimate sizes: characters per block, block
// limit, per-pod LRU capacity.
func (v *V02Estimate) Params() (blockChars, maxBlocks, capacity int) {
	return v.blockChars, v.maxBlocks, v.capacity
}

// PrefixPrediction implements epp.PrefixPrediction: the match info is an
// approximate (history-based) prediction.
func (v *V02Estimate) PrefixPrediction() string { return epp.PredictionApprox }

// Produces is PrefixCacheMatchInfo/<name>.
func (v *V02Estimate) Produces() []epp.DataKey { return []epp.DataKey{v.key} }

// Consumes nothing: v0.2.x read the prompt string itself.
func (v *V02Estimate) Consumes() []epp.Dependency { return nil }

// v02State is what Produce leaves for PreRequest.
type v02State struct{ hashes []uint64 }

// Hashes returns the request's v0.2 block hashes (model block first).
func (v *V02Estimate) Hashes(req *epp.Request) []uint64 {
	prompt, err := prefixhash.V02Prompt(req.Body)
	if err != nil {
		return nil // upstream answered 400; eppsim routes without a prefix signal
	}
	return prefixhash.V02BlockHashes(req.TargetModel, prompt, v.blockChars, v.maxBlocks)
}

// Produce writes (matched, total, 0) on every candidate. The block size is
// left 0: the blocks are characters, not tokens.
func (v *V02Estimate) Produce(_ *epp.Cycle, req *epp.Request, eps []*epp.Endpoint) error {
	hashes := v.Hashes(req)
	counts := v.counts[:0]
	for range v.idx.pods {
		counts = append(counts, 0)
	}
	v.counts = counts
	v.idx.matchLongestPrefix(hashes, counts)
	for _, e := range eps {
		m := 0
		if id, ok := v.idx.ids[e.Name]; ok {
			m = counts[id]
		}
		e.Put(v.key, epp.PrefixCacheMatchInfo{MatchBlocks: m, TotalBlocks: len(hashes), CachedBlockCount: m})
	}
	req.Put(v.stateKey, &v02State{hashes: hashes})
	return nil
}

// Score is matched/total (0 without hashes), upstream's Score.
func (v *V02Estimate) Score(c *epp.Cycle, req *epp.Request, eps []*epp.Endpoint, scores []float64) {
	scoreMatchInfo(c, req, eps, v.key, scores, v.Produce)
}

// PreRequest adds the request's hashes to the primary target's LRU (and
// the "prefill" profile's target, where upstream's PostCycle ran in that
// profile too).
func (v *V02Estimate) PreRequest(_ *epp.Cycle, req *epp.Request, res *epp.Result) {
	val, ok := req.Get(v.stateKey)
	if !ok {
		return
	}
	st, _ := val.(*v02State)
	req.Put(v.stateKey, (*v02State)(nil))
	if st == nil || len(st.hashes) == 0 {
		return
	}
	primary, prefill, ok := pickedTargets(res)
	if !ok {
		return
	}
	for _, t := range []*epp.Endpoint{primary, prefill} {
		if t != nil {
			v.idx.add(st.hashes, t.Name, v.capacity, false)
		}
	}
}

// MatchBlocks is the blocks of hashes the endpoint holds within the
// globally matched prefix (what Produce writes), without changing the
// index.
func (v *V02Estimate) MatchBlocks(hashes []uint64, endpointName string) int {
	return v.idx.matchBlocks(hashes, endpointName)
}

// PrefixPrediction implements epp.PrefixPrediction: KV-event based.
func (t *V02Tracking) PrefixPrediction() string { return epp.PredictionPrecise }

// Score is v0.2.1's normalisation of the longest-prefix block counts: over
// the candidates with at least one matched block, (n − min)/(max − min),
// 1 when all are equal; 0 for the others.
func (t *V02Tracking) Score(c *epp.Cycle, req *epp.Request, eps []*epp.Endpoint, scores []float64) {
	if len(eps) == 0 {
		return
	}
	if _, done := eps[0].Get(t.key); !done {
		_ = t.Produce(c, req, eps)
	}
	lo, hi, any := 0, 0, false
	for _, e := range eps {
		info, ok := epp.Attr[epp.PrefixCacheMatchInfo](e, t.key)
		if !ok || info.MatchBlocks <= 0 {
			continue
		}
		if !any || info.MatchBlocks < lo {
			lo = info.MatchBlocks
		}
		if !any || info.MatchBlocks > hi {
			hi = info.MatchBlocks
		}
		any = true
	}
	for i, e := range eps {
		info, ok := epp.Attr[epp.PrefixCacheMatchInfo](e, t.key)
		if !ok || info.MatchBlocks <= 0 {
			continue
		}
		if hi == lo {
			scores[i] = 1
		} else {
			scores[i] = float64(info.MatchBlocks-lo) / float64(hi-lo)
		}
	}
}

// HandleKVEvents feeds the index as kv-cache-manager v0.2.0's kvevents
// pool did (pkg/kvcache/kvevents/pool.go @ v0.2.0): every block is
// recorded under the one tier "gpu", whatever its medium; AllBlocksCleared
// is ignored; and since v0.2.0 indexed the engine's own block hashes, a
// block stored at another block size than tokenProcessorConfig.blockSize
// never matches a request (eppsim drops it). Equal block sizes are
// assumed to come with an equal hash seed and algorithm, which v0.2.0
// also required (hashSeed = the engines' PYTHONHASHSEED, vLLM's
// sha256_cbor_64bit).
func (t *V02Tracking) HandleKVEvents(c *epp.Cycle, address string, batch []epp.KVEvent) {
	kept := make([]epp.KVEvent, 0, len(batch))
	for _, ev := range batch {
		switch {
		case ev.Kind == epp.AllBlocksCleared:
			continue
		case ev.Kind == epp.BlockStored && ev.BlockSize > 0 && ev.BlockSize != t.BlockSize():
			continue
		}
		ev.Medium = ""
		kept = append(kept, ev)
	}
	if len(kept) > 0 {
		t.PrecisePrefixScorer.HandleKVEvents(c, address, kept)
	}
}
