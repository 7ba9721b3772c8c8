package sim

import (
	"fmt"
	"maps"

	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/replica/sglang"
)

// engine is what a run needs of a replica's engine, whichever engine it is
// (docs/architecture.md, "The engine seam"). The run owns the interface;
// replica.Engine (vLLM) implements it, and so does the SGLang engine
// (replica/sglang). The run drives an engine as it drives a pod: Add on a
// request's arrival, Abort when its client goes away, BeginStep/EndStep
// around each forward, Busy to know whether it is idle, Gauges at every
// scrape, Stats and Evictions at the end, CachedPrefixTokens for the
// oracle's per-replica hit, Subscribe for its KV events.
type engine interface {
	// Add queues a request; an error is the engine refusing it (vLLM's
	// HTTP 400: longer than the engine accepts).
	Add(r *replica.Request, now int64) error
	// Abort drops a request wherever it is in the engine.
	Abort(r *replica.Request)
	// BeginStep schedules a step at now and returns its duration; ok false
	// when there is nothing to run.
	BeginStep(now int64) (dur int64, ok bool)
	// EndStep applies the step begun last, at now.
	EndStep(now int64) *replica.StepOutput
	// Busy reports whether the engine holds requests to run.
	Busy() bool
	// Gauges are the values a Prometheus scrape reads now.
	Gauges() replica.Gauges
	// Stats are the engine's counters.
	Stats() replica.Stats
	// Evictions counts cached KV the engine dropped to make room.
	Evictions() int64
	// CachedPrefixTokens is how many tokens of prompt the engine would
	// reuse were the request scheduled now, changing nothing. hashes is
	// the prompt's vLLM block chain at the fleet's block size and seed
	// (promptChain): an engine that matches tokens (SGLang's radix tree)
	// reads prompt and cacheSalt instead.
	CachedPrefixTokens(prompt []uint32, cacheSalt string, hashes []uint64) int
	// Subscribe registers the receiver of the engine's KV events.
	Subscribe(s replica.Subscriber)
}

// kvMover is the part of an engine only vLLM's has: KV blocks that move
// between pods (P/D disaggregation's NIXL reads: Release, Held) and between
// the GPU and a CPU tier (NextTransfer, Poll; pd-offload.md). The run finds
// it by type assertion (fleetReplica.mover); an engine without it is
// refused in a P/D fleet and with a CPU tier (newEngine), so the P/D and
// offload paths of the run only meet engines that have it.
type kvMover interface {
	// Release frees a finished prefill leg's blocks held for a read.
	Release(r *replica.Request) bool
	// Held counts the prefill legs whose blocks are held.
	Held() int
	// NextTransfer is when the earliest copy in flight completes.
	NextTransfer() (at int64, ok bool)
	// Poll applies the copies complete at now and returns the decode legs
	// whose reads completed.
	Poll(now int64) []*replica.Request
}

var (
	_ engine  = (*replica.Engine)(nil)
	_ kvMover = (*replica.Engine)(nil)
	_ engine  = (*sglang.Engine)(nil)
)

// EngineTypeLabel is the pod label llm-d reads a pod's engine from (the
// EPP's metric mapping; llm-d-router defaultEngineName "vllm" when it is
// absent; sglang-engine.md A.12). The run puts it on every SGLang
// replica's endpoint.
const EngineTypeLabel = "llm-d.ai/engine-type"

// engineEnv is what a run gives every engine it builds.
type engineEnv struct {
	// seed is the fleet's hash seed (vLLM's PYTHONHASHSEED).
	seed uint64
	// kvEvents: the EPP consumes KV events.
	kvEvents bool
	// disagg: the EPP can disaggregate (P/D), and pd is the NIXL read's
	// cost.
	disagg bool
	pd     PDOptions
}

// newEngine builds spec's engine, of the type its preset names. cfg is
// the vLLM engine's resolved configuration (nil for another engine): its
// block size and seed give the fleet's prompt chain. Errors name the
// replica; an engine type the binary has no engine for, and an SGLang
// replica in a P/D fleet or with a CPU tier, are refused.
func newEngine(spec ReplicaSpec, env engineEnv) (eng engine, cfg *replica.Config, err error) {
	switch t := spec.Preset.EngineTypeOf(); t {
	case replica.EngineVLLM:
		return newVLLMEngine(spec, env)
	case replica.EngineSGLang:
		if env.disagg {
			return nil, nil, &FleetError{fmt.Errorf("replica %s: engine sglang: P/D disaggregation is modelled for vLLM only (NIXL reads between vLLM engines; sglang-engine.md leaves SGLang's PD out of scope)", spec.Name)}
		}
		if spec.Preset.Engine.KVOffloadingSize > 0 {
			return nil, nil, &FleetError{fmt.Errorf("replica %s: engine sglang: kv_offloading_size is vLLM's CPU KV tier (OffloadingConnector); SGLang's HiCache is not modelled", spec.Name)}
		}
		e, err := newSGLangEngine(spec, env)
		if err != nil {
			return nil, nil, err
		}
		return e, nil, nil
	default:
		return nil, nil, &FleetError{fmt.Errorf("replica %s: engine_type: %w", spec.Name, replica.CheckEngineType(t))}
	}
}

// CheckEngine resolves spec's engine configuration as newEngine will, so
// that a configuration the engine would refuse (too little memory, a bad
// argument) is found before a run: vLLM's (Preset.EngineConfig) or
// SGLang's (SGLangConfig).
func CheckEngine(spec ReplicaSpec) error {
	if spec.Preset.EngineTypeOf() == replica.EngineSGLang {
		_, err := SGLangConfig(spec)
		return err
	}
	_, err := spec.Preset.EngineConfig()
	return err
}

// SustainableRate is spec's engine's knee for mix (docs/latency.md "The
// knee"): replica.SustainableRate for a vLLM replica,
// sglang.SustainableRate for an SGLang one.
func SustainableRate(spec ReplicaSpec, mix replica.Mix) (replica.Knee, error) {
	m, err := spec.Preset.Model()
	if err != nil {
		return replica.Knee{}, fmt.Errorf("replica %s: %w", spec.Name, err)
	}
	if spec.Preset.EngineTypeOf() == replica.EngineSGLang {
		cfg, err := SGLangConfig(spec)
		if err != nil {
			return replica.Knee{}, err
		}
		return sglang.SustainableRate(cfg, m, mix)
	}
	cfg, err := spec.Preset.EngineConfig()
	if err != nil {
		return replica.Knee{}, fmt.Errorf("replica %s: %w", spec.Name, err)
	}
	return replica.SustainableRate(cfg, m, mix)
}

// KneeKey identifies what SustainableRate reads of spec: replicas with
// equal keys have equal knees for every mix (a uniform fleet, a group's
// replicas), so one estimate serves them all.
func KneeKey(spec ReplicaSpec) (string, error) {
	p := spec.Preset
	model := fmt.Sprintf("%p|%+v|%s|%+v|%+v|%d|%d", p.Arch, p.GPU, p.StepModelID(), p.Roofline, p.Linear, p.TensorParallelSize, p.ExpertShards)
	if p.EngineTypeOf() == replica.EngineSGLang {
		cfg, err := SGLangConfig(spec)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("sglang|%s|%d|%d|%d|%d|%d", model, cfg.MaxRunningRequests, cfg.MaxTotalNumTokens, cfg.PageSize, cfg.ChunkedPrefillSize, cfg.MaxPrefillTokens), nil
	}
	cfg, err := p.EngineConfig()
	if err != nil {
		return "", fmt.Errorf("replica %s: %w", spec.Name, err)
	}
	return fmt.Sprintf("vllm|%s|%d|%d|%d|%d", model, cfg.MaxNumSeqs, cfg.MaxNumBatchedTokens, cfg.NumGPUBlocks, cfg.BlockSize), nil
}

// SGLangConfig resolves spec's SGLang engine configuration: its preset's
// model, GPU and TP with its sglang block (sglang.ConfigFor). Errors name
// the replica.
func SGLangConfig(spec ReplicaSpec) (sglang.Config, error) {
	var flags replica.SGLangFlags
	if spec.Preset.SGLang != nil {
		flags = *spec.Preset.SGLang
	}
	cfg, err := sglang.ConfigFor(spec.Preset, flags)
	if err != nil {
		return sglang.Config{}, fmt.Errorf("replica %s: %w", spec.Name, err)
	}
	return cfg, nil
}

// newSGLangEngine builds an SGLang engine for spec. It publishes KV events
// when the EPP consumes them (as a deployment that runs a precise prefix
// producer sets --kv-events-config); the step time is the preset's model,
// the one vLLM engines use (replica/sglang's doc: calibrated on vLLM runs).
func newSGLangEngine(spec ReplicaSpec, env engineEnv) (*sglang.Engine, error) {
	cfg, err := SGLangConfig(spec)
	if err != nil {
		return nil, &FleetError{err}
	}
	cfg.KVEvents = env.kvEvents
	model, err := spec.Preset.Model()
	if err != nil {
		return nil, &FleetError{fmt.Errorf("replica %s: %w", spec.Name, err)}
	}
	eng, err := sglang.NewEngine(cfg, model)
	if err != nil {
		return nil, &FleetError{fmt.Errorf("replica %s: %w", spec.Name, err)}
	}
	return eng, nil
}

// newVLLMEngine builds a vLLM engine for spec.
func newVLLMEngine(spec ReplicaSpec, env engineEnv) (*replica.Engine, *replica.Config, error) {
	p := spec.Preset
	if env.kvEvents {
		// vLLM turns its hybrid KV cache manager off when KV events are on
		// (vllm-engine.md A.7): a sliding-window model's capacity is then
		// every layer's.
		p.Engine.DisableHybridKVCacheManager = true
	}
	cfg, err := p.EngineConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("sim: replica %s: %w", spec.Name, err)
	}
	cfg.HashSeed = env.seed // one PYTHONHASHSEED for the fleet
	cfg.KVEvents = env.kvEvents
	if env.disagg {
		// With a profile handler that can disaggregate, every engine can
		// serve decode legs: it gets the NIXL read's cost, for its own KV
		// layout (pd-offload.md A.8).
		bytes, err := spec.Preset.KVBlockBytesPerRank()
		if err != nil {
			return nil, nil, &FleetError{fmt.Errorf("replica %s: %w", spec.Name, err)}
		}
		cfg.KVTransfer = &replica.KVTransferConfig{BandwidthGBps: env.pd.TransferGBps, BaseUs: env.pd.TransferBaseUs,
			HandshakeMs: env.pd.HandshakeMs, BlockBytesPerRank: bytes}
	}
	model, err := spec.Preset.Model()
	if err != nil {
		return nil, nil, &FleetError{fmt.Errorf("replica %s: %w", spec.Name, err)}
	}
	eng, err := replica.NewEngine(cfg, model)
	if err != nil {
		return nil, nil, &FleetError{fmt.Errorf("replica %s: %w", spec.Name, err)}
	}
	return eng, &cfg, nil
}

// DefaultChainBlockSize is the block size of a fleet's prompt chain when
// no replica runs vLLM: vLLM's default (16 tokens), hashed with the
// fleet's seed. The chain is vLLM's block hashing; only vLLM engines read
// it (CachedPrefixTokens), so in a fleet without one it feeds nothing but
// the router-side measures keyed on it (the memoized chain the oracle
// lookup is handed, which SGLang engines ignore).
const DefaultChainBlockSize = replica.DefaultBlockSize

// chainSize collects the block size of a fleet's prompt chain as its
// engines are built: the vLLM replicas', which must agree (the oracle
// hands every engine one chain); other engines do not count. It also
// keeps the finest reuse granularity of the fleet's engines (an SGLang
// page, or the vLLM block) for the infinite-cache bound.
type chainSize struct{ bs, page int }

// addPage takes an SGLang replica's page size (tokens).
func (c *chainSize) addPage(p int) {
	if c.page == 0 || p < c.page {
		c.page = p
	}
}

// reuseGranularity is the block size of the run's infinite-cache bound:
// the finest unit any engine of the fleet reuses (an SGLang page, 1 token
// by default; the vLLM block), so that no replica's true hit can exceed
// the bound (an SGLang replica reuses up to N − 1 tokens of a prompt where
// vLLM reuses whole blocks).
func (c *chainSize) reuseGranularity() int {
	if c.page > 0 && (c.bs == 0 || c.page < c.bs) {
		return c.page
	}
	return c.size()
}

// add takes a replica's vLLM configuration (nil: another engine).
func (c *chainSize) add(name string, cfg *replica.Config) error {
	switch {
	case cfg == nil:
	case c.bs == 0:
		c.bs = cfg.BlockSize
	case cfg.BlockSize != c.bs:
		return fmt.Errorf("replica %s: block size %d differs from the fleet's %d", name, cfg.BlockSize, c.bs)
	}
	return nil
}

// size is the chain's block size: the vLLM replicas', or
// DefaultChainBlockSize without one.
func (c *chainSize) size() int {
	if c.bs == 0 {
		return DefaultChainBlockSize
	}
	return c.bs
}

// chainBlockSize is the block size of fleet's prompt chain: that of its
// first vLLM replica (every vLLM replica must share it: the oracle hands
// every engine one chain), or DefaultChainBlockSize.
func chainBlockSize(fleet []ReplicaSpec) (int, error) {
	for _, r := range fleet {
		if r.Preset.EngineTypeOf() != replica.EngineVLLM {
			continue
		}
		cfg, err := r.Preset.EngineConfig()
		if err != nil {
			return 0, fmt.Errorf("sim: replica %s: %w", r.Name, err)
		}
		return cfg.BlockSize, nil
	}
	return DefaultChainBlockSize, nil
}

// EngineLabels are the labels of spec's endpoint: its own, with
// EngineTypeLabel added for an SGLang replica. A label that names another
// engine than the replica runs is refused (the EPP would read the pod's
// metrics by the wrong engine's names).
func EngineLabels(spec ReplicaSpec) (map[string]string, error) {
	t := spec.Preset.EngineTypeOf()
	have, ok := spec.Labels[EngineTypeLabel]
	switch {
	case ok && have != t:
		return nil, fmt.Errorf("replica %s: label %s %q, but the replica's engine is %s", spec.Name, EngineTypeLabel, have, t)
	case ok || t == replica.EngineVLLM:
		// Unlabelled pods are vLLM's to llm-d.
		return spec.Labels, nil
	}
	l := maps.Clone(spec.Labels)
	if l == nil {
		l = map[string]string{}
	}
	l[EngineTypeLabel] = t
	return l, nil
}

// LabelEngines puts EngineTypeLabel on fleet's SGLang replicas, as the run
// does on their endpoints (for reports of the fleet), and refuses a label
// that contradicts a replica's engine.
func LabelEngines(fleet []ReplicaSpec) error {
	for i := range fleet {
		l, err := EngineLabels(fleet[i])
		if err != nil {
			return err
		}
		fleet[i].Labels = l
	}
	return nil
}
