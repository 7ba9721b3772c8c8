package producer

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/eppsim/eppsim/epp"
	"github.com/eppsim/eppsim/epp/producer/precise"
)

// PrecisePrefixParams are the precise-prefix-cache-producer parameters
// (spec §6.1), decoded strictly. Transport and observability settings
// (kvEventsConfig, metrics) are accepted and have no effect in simulation:
// the simulator delivers each replica's KV events directly (after its
// configured lag). redisConfig and costAwareMemoryConfig are accepted and
// simulated with the in-memory index.
type PrecisePrefixParams struct {
	TokenProcessorConfig *TokenProcessorConfig `json:"tokenProcessorConfig"`
	IndexerConfig        *IndexerConfig        `json:"indexerConfig"`
	KVEventsConfig       *KVEventsConfig       `json:"kvEventsConfig"`
	SpeculativeIndexing  bool                  `json:"speculativeIndexing"`
	SpeculativeTTL       string                `json:"speculativeTTL"`
}

// TokenProcessorConfig is kvblock.TokenProcessorConfig.
type TokenProcessorConfig struct {
	BlockSize       int    `json:"blockSize,omitempty"` // deprecated alias of blockSizeTokens
	BlockSizeTokens int    `json:"blockSizeTokens"`
	HashSeed        string `json:"hashSeed"`
	HashAlgorithm   string `json:"hashAlgorithm"`
}

// IndexerConfig is kvcache.Config.
type IndexerConfig struct {
	KVBlockIndexConfig    *KVBlockIndexConfig     `json:"kvBlockIndexConfig"`
	KVCacheBackendConfigs []*KVCacheBackendConfig `json:"kvCacheBackendConfigs"`
	// KVCacheDefaultBackendWeight is the weight of tiers not listed in
	// kvCacheBackendConfigs. ebab687 weighs them 1.0; post-ebab687 PR #2809
	// adds this setting (and defaults it to 0).
	KVCacheDefaultBackendWeight *float64 `json:"kvCacheDefaultBackendWeight,omitempty"`
	// TokenizersPoolConfig is rejected: configure a token-producer instead.
	TokenizersPoolConfig json.RawMessage `json:"tokenizersPoolConfig,omitempty"`
}

// KVBlockIndexConfig is kvblock.IndexConfig.
type KVBlockIndexConfig struct {
	InMemoryConfig         *InMemoryIndexConfig `json:"inMemoryConfig"`
	RedisConfig            json.RawMessage      `json:"redisConfig"`
	CostAwareMemoryConfig  json.RawMessage      `json:"costAwareMemoryConfig"`
	EnableMetrics          bool                 `json:"enableMetrics"`
	MetricsLoggingInterval int64                `json:"metricsLoggingInterval"` // time.Duration in ns
}

// InMemoryIndexConfig is kvblock.InMemoryIndexConfig.
type InMemoryIndexConfig struct {
	Size         int `json:"size"`
	PodCacheSize int `json:"podCacheSize"`
}

// KVCacheBackendConfig is one device tier's scoring weight.
type KVCacheBackendConfig struct {
	Name   string  `json:"name"`
	Weight float64 `json:"weight"`
}

// KVEventsConfig is kvevents.Config.
type KVEventsConfig struct {
	ZMQEndpoint        string              `json:"zmqEndpoint,omitempty"`
	TopicFilter        string              `json:"topicFilter"`
	Concurrency        int                 `json:"concurrency"`
	EngineType         string              `json:"engineType,omitempty"`
	Tracing            bool                `json:"tracing,omitempty"`
	DiscoverPods       bool                `json:"discoverPods"`
	PodDiscoveryConfig *PodDiscoveryConfig `json:"podDiscoveryConfig,omitempty"`
}

// PodDiscoveryConfig is kvevents.PodDiscoveryConfig.
type PodDiscoveryConfig struct {
	PodLabelSelector string `json:"podLabelSelector"`
	PodNamespace     string `json:"podNamespace,omitempty"`
	SocketPort       int    `json:"socketPort"`
	ReplaySocketPort int    `json:"replaySocketPort,omitempty"`
}

// DefaultSpeculativeTTL is the speculative entries' default lifetime.
const DefaultSpeculativeTTL = 2 * time.Second

// DefaultPrecisePrefixParams are the upstream defaults.
func DefaultPrecisePrefixParams() PrecisePrefixParams {
	return PrecisePrefixParams{
		IndexerConfig: &IndexerConfig{
			KVBlockIndexConfig: &KVBlockIndexConfig{
				InMemoryConfig: &InMemoryIndexConfig{Size: precise.DefaultIndexSize, PodCacheSize: precise.DefaultPodCacheSize},
			},
			KVCacheBackendConfigs: []*KVCacheBackendConfig{{Name: "gpu", Weight: 1.0}, {Name: "cpu", Weight: 0.8}},
		},
		KVEventsConfig: &KVEventsConfig{
			TopicFilter:  "kv@",
			Concurrency:  4,
			DiscoverPods: true,
			PodDiscoveryConfig: &PodDiscoveryConfig{
				PodLabelSelector: "llm-d.ai/inference-serving=true",
				SocketPort:       5557,
			},
		},
	}
}

// PrecisePrefix is the precise-prefix-cache-producer (spec §6): a KV-block
// index fed by the replicas' KV events; Produce writes the tier-weighted
// longest-prefix match of the request's block keys on every candidate.
// Pods are keyed by Endpoint.Address ("ip:port").
//
// The event side needs the model each engine serves (upstream: from the ZMQ
// topic kv@<pod>@<model>, or the event's LoRA name). The simulator sets it
// with SetEventModel per address or SetDefaultEventModel; when neither was
// set for an address, the TargetModel of the most recent request this
// producer saw is used (exact in single-model simulations, where a replica
// only emits events after serving a routed request).
type PrecisePrefix struct {
	epp.TypedName
	ix             *precise.Indexer
	blockSize      int
	speculative    bool
	speculativeTTL int64
	key            epp.DataKey
	stateKey       epp.DataKey

	eventModels  map[string]string
	defaultModel string
	lastModel    string

	addrs   []string
	matches []precise.Match
}

// NewPrecisePrefix validates p and builds a producer of plugin type typ
// whose match info goes under PrefixCacheMatchInfo/<name>.
func NewPrecisePrefix(typ, name string, p PrecisePrefixParams) (*PrecisePrefix, error) {
	if p.IndexerConfig == nil {
		return nil, errors.New("indexerConfig is required")
	}
	if len(p.IndexerConfig.TokenizersPoolConfig) > 0 && string(p.IndexerConfig.TokenizersPoolConfig) != "null" {
		return nil, errors.New("tokenizersPoolConfig is not supported; configure a token-producer plugin instead")
	}
	tpc := TokenProcessorConfig{BlockSizeTokens: precise.DefaultBlockSize}
	if p.TokenProcessorConfig != nil {
		tpc = *p.TokenProcessorConfig
	}
	bs := tpc.BlockSizeTokens
	if bs == 0 {
		bs = tpc.BlockSize // deprecated alias, then the default
		if bs == 0 {
			bs = precise.DefaultBlockSize
		}
	}
	if bs <= 0 {
		return nil, fmt.Errorf("tokenProcessorConfig: blockSizeTokens must be greater than 0, got %d", bs)
	}
	h, err := precise.NewHasher(bs, tpc.HashSeed, tpc.HashAlgorithm)
	if err != nil {
		return nil, fmt.Errorf("tokenProcessorConfig: %w", err)
	}
	size, podCache := precise.DefaultIndexSize, precise.DefaultPodCacheSize
	if ic := p.IndexerConfig.KVBlockIndexConfig; ic != nil {
		switch {
		case len(ic.CostAwareMemoryConfig) > 0 && string(ic.CostAwareMemoryConfig) != "null",
			len(ic.RedisConfig) > 0 && string(ic.RedisConfig) != "null":
			// Simulated with the in-memory index at default sizes.
		case ic.InMemoryConfig != nil:
			size, podCache = ic.InMemoryConfig.Size, ic.InMemoryConfig.PodCacheSize
		default:
			return nil, errors.New("indexerConfig.kvBlockIndexConfig: no valid index configuration provided")
		}
	}
	if size <= 0 {
		return nil, fmt.Errorf("indexerConfig.kvBlockIndexConfig.inMemoryConfig.size must be > 0, got %d", size)
	}
	index, err := precise.NewIndex(size, podCache)
	if err != nil {
		return nil, err
	}
	weights := map[string]float64{}
	for _, b := range p.IndexerConfig.KVCacheBackendConfigs {
		if b != nil {
			weights[b.Name] = b.Weight
		}
	}
	defWeight := 1.0
	if w := p.IndexerConfig.KVCacheDefaultBackendWeight; w != nil {
		defWeight = *w
	}
	if ev := p.KVEventsConfig; ev != nil {
		// Upstream picks the event adapter by engine type; both decode to
		// the events HandleKVEvents reads, so sglang is read as vllm is
		// (an SGLang pod's one-hash pages chain and are re-keyed the same
		// way; docs/replicas.md, "Choosing the engine").
		switch ev.EngineType {
		case "", "vllm", "sglang":
		default:
			return nil, fmt.Errorf("kvEventsConfig.engineType: unsupported engine type %q", ev.EngineType)
		}
	}
	ttl := DefaultSpeculativeTTL
	if p.SpeculativeIndexing && p.SpeculativeTTL != "" {
		d, err := time.ParseDuration(p.SpeculativeTTL)
		if err != nil {
			return nil, fmt.Errorf("invalid speculativeTTL %q: %w", p.SpeculativeTTL, err)
		}
		if d > 0 {
			ttl = d
		}
	}
	return &PrecisePrefix{
		TypedName:      epp.TypedName{PluginType: typ, PluginName: name},
		ix:             precise.NewIndexer(h, index, weights, defWeight),
		blockSize:      bs,
		speculative:    p.SpeculativeIndexing,
		speculativeTTL: int64(ttl),
		key:            epp.DataKey{Type: epp.PrefixCacheMatchInfoType, Producer: name},
		stateKey:       epp.DataKey{Type: "PrecisePrefixState", Producer: name},
		eventModels:    map[string]string{},
	}, nil
}

func decodePrecise(typ, name string, params json.RawMessage) (*PrecisePrefix, error) {
	p := DefaultPrecisePrefixParams()
	if err := epp.DecodeParams(typ, name, params, &p); err != nil {
		return nil, err
	}
	pp, err := NewPrecisePrefix(typ, name, p)
	if err != nil {
		return nil, fmt.Errorf("plugin %q (type %s): %w", name, typ, err)
	}
	return pp, nil
}

func preciseFactory(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
	return decodePrecise(PrecisePrefixType, name, params)
}

// Indexer exposes the KV-block index state (for tests and reporting).
func (p *PrecisePrefix) Indexer() *precise.Indexer { return p.ix }

// BlockSize is the token processor's block size.
func (p *PrecisePrefix) BlockSize() int { return p.blockSize }

// Speculative reports whether speculative indexing is on.
func (p *PrecisePrefix) Speculative() bool { return p.speculative }

// SetEventModel records the model the engine at address serves.
func (p *PrecisePrefix) SetEventModel(address, model string) { p.eventModels[address] = model }

// SetDefaultEventModel sets the model of engines without SetEventModel.
func (p *PrecisePrefix) SetDefaultEventModel(model string) { p.defaultModel = model }

func (p *PrecisePrefix) eventModel(address string) string {
	if m, ok := p.eventModels[address]; ok {
		return m
	}
	if p.defaultModel != "" {
		return p.defaultModel
	}
	return p.lastModel
}

// Produces is PrefixCacheMatchInfo/<name>.
func (p *PrecisePrefix) Produces() []epp.DataKey { return []epp.DataKey{p.key} }

// Consumes is TokenizedPrompt/token-producer, required.
func (p *PrecisePrefix) Consumes() []epp.Dependency {
	return []epp.Dependency{{Key: TokenizedPromptKey, Required: true}}
}

// HandleKVEvents implements epp.KVEventConsumer.
func (p *PrecisePrefix) HandleKVEvents(c *epp.Cycle, address string, batch []epp.KVEvent) {
	p.ix.Expire(now(c))
	p.ix.HandleEvents(address, p.eventModel(address), batch)
}

// RemoveEndpoint clears a pod's entries (endpoint deleted).
func (p *PrecisePrefix) RemoveEndpoint(address string) { p.ix.ClearPod(address) }

// Produce writes each candidate's precise PrefixCacheMatchInfo (spec §6.4).
// A request with less than one full block gets nothing.
func (p *PrecisePrefix) Produce(c *epp.Cycle, req *epp.Request, eps []*epp.Endpoint) error {
	return p.produce(c, req, req.Tokenized, eps)
}

func (p *PrecisePrefix) produce(c *epp.Cycle, req *epp.Request, tr *epp.TokenizedRequest, eps []*epp.Endpoint) error {
	p.ix.Expire(now(c))
	if req.TargetModel != "" {
		p.lastModel = req.TargetModel
	}
	keys := p.ix.RequestKeysShared(req.Memo, req.TargetModel, tr)
	if len(keys) == 0 {
		return nil
	}
	p.addrs = p.addrs[:0]
	for _, e := range eps {
		p.addrs = append(p.addrs, e.Address)
	}
	if cap(p.matches) < len(eps) {
		p.matches = make([]precise.Match, len(eps))
	}
	m := p.matches[:len(eps)]
	p.ix.Match(keys, p.addrs, m)
	total := 0
	for _, k := range keys {
		total += len(k)
	}
	for i, e := range eps {
		e.Put(p.key, epp.PrefixCacheMatchInfo{
			MatchBlocks:      int(m[i].Score),
			TotalBlocks:      total,
			BlockSizeTokens:  p.blockSize,
			CachedBlockCount: m[i].Cached,
			CachedByTier:     m[i].ByTier,
		})
	}
	if p.speculative {
		req.Put(p.stateKey, keys)
	}
	return nil
}

// Prepare implements epp.Preparer: the request's block keys, into
// req.Memo, as Produce computes them (from the token producer's tokens,
// which Router.Prepare computed before, or the server's prompt tokens for
// the deprecated scorer).
func (p *PrecisePrefix) Prepare(req *epp.Request) {
	tr := req.Tokenized
	if tr == nil {
		return
	}
	p.ix.RequestKeysShared(req.Memo, req.TargetModel, tr)
}

// PreRequest adds speculative entries for the primary target and the
// "prefill" target when speculative indexing is on (spec §6.4); they expire
// speculativeTTL of simulated time later.
func (p *PrecisePrefix) PreRequest(c *epp.Cycle, req *epp.Request, res *epp.Result) {
	if !p.speculative {
		return
	}
	v, ok := req.Get(p.stateKey)
	if !ok {
		return
	}
	keys, _ := v.([][]uint64)
	req.Put(p.stateKey, [][]uint64(nil))
	if len(keys) == 0 {
		return
	}
	primary, prefill, ok := pickedTargets(res)
	if !ok || primary == nil || primary.EndpointInfo == nil {
		return
	}
	pods := []string{primary.Address}
	if prefill != nil && prefill.EndpointInfo != nil {
		pods = append(pods, prefill.Address)
	}
	p.ix.AddSpeculative(now(c), p.speculativeTTL, keys, pods)
}

// PrecisePrefixScorer is the deprecated precise-prefix-cache-scorer: a
// scorer owning a precise producer. It scores match/total like
// prefix-cache-scorer over its own match info (written under
// PrefixCacheMatchInfo/<name>). Tokens come from the request's
// TokenizedRequest when a token producer set one, otherwise from the model
// server's prompt tokens (upstream tokenizes internally).
type PrecisePrefixScorer struct {
	*PrecisePrefix
}

func preciseScorerFactory(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
	p, err := decodePrecise(PrecisePrefixScorerType, name, params)
	if err != nil {
		return nil, err
	}
	return &PrecisePrefixScorer{PrecisePrefix: p}, nil
}

// Consumes is TokenizedPrompt/token-producer, optional (the scorer falls
// back to the server's tokens, so no estimate producer is auto-created).
func (s *PrecisePrefixScorer) Consumes() []epp.Dependency {
	return []epp.Dependency{{Key: TokenizedPromptKey, Required: false}}
}

// Produce computes the match info (also done lazily by Score).
func (s *PrecisePrefixScorer) Produce(c *epp.Cycle, req *epp.Request, eps []*epp.Endpoint) error {
	tr := req.Tokenized
	if tr == nil && len(req.ServerPromptTokens) > 0 {
		tr = &epp.TokenizedRequest{Prompts: [][]uint32{req.ServerPromptTokens}, CacheSalt: cacheSalt(req)}
	}
	return s.produce(c, req, tr, eps)
}

// Score implements epp.Scorer: match/total per candidate, 0 without match
// info or with total 0.
func (s *PrecisePrefixScorer) Score(c *epp.Cycle, req *epp.Request, eps []*epp.Endpoint, scores []float64) {
	scoreMatchInfo(c, req, eps, s.key, scores, s.Produce)
}

// Prepare implements epp.Preparer for the scorer: its Produce's keys, into
// req.Memo (from the server's prompt tokens without a token producer).
func (s *PrecisePrefixScorer) Prepare(req *epp.Request) {
	tr := req.Tokenized
	if tr == nil {
		if len(req.ServerPromptTokens) == 0 {
			return
		}
		tr = &epp.TokenizedRequest{Prompts: [][]uint32{req.ServerPromptTokens}, CacheSalt: cacheSalt(req)}
	}
	s.ix.RequestKeysShared(req.Memo, req.TargetModel, tr)
}
