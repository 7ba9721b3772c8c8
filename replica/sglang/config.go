package sglang

import (
	"fmt"
	"math"

	"github.com/eppsim/eppsim/arch"
	"github.com/eppsim/eppsim/replica"
)

// Schedule policies (--schedule-policy, sglang-engine.md A.9).
const (
	PolicyFCFS = "fcfs"
	PolicyLPM  = "lpm"
)

// Radix eviction policies (--radix-eviction-policy, A.6). lfu, slru and
// priority are not offered: the radix cache read never increments
// hit_count (E) and the simulator has no request priorities.
const (
	PolicyLRU  = "lru"
	PolicyFIFO = "fifo"
	PolicyFILO = "filo"
	PolicyMRU  = "mru"
)

// SGLang constants (sglang-engine.md C, environ.py and schedule_policy.py).
const (
	initNewTokenRatio        = 0.7  // SGLANG_INIT_NEW_TOKEN_RATIO
	minNewTokenRatioFactor   = 0.14 // SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR
	newTokenRatioDecaySteps  = 600  // SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS
	retractDecodeSteps       = 20   // SGLANG_RETRACT_DECODE_STEPS
	clipMaxNewTokens         = 4096 // SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION
	inBatchCheckThreshold    = 32   // IN_BATCH_PREFIX_CACHING_CHECK_THRESHOLD
	inBatchDeprioritizeLimit = 32   // IN_BATCH_PREFIX_CACHING_DEPRIORITIZE_THRESHOLD
	lpmFallbackWaiting       = 128  // lpm → fcfs above this many waiting (A.9)
	defaultMaxPrefillTokens  = 16384
	defaultDecodeLogInterval = 40
)

// Config is one SGLang engine's resolved configuration, in the terms of
// SGLang's server flags (sglang-engine.md C). NewEngine takes it as is:
// zero values are not defaulted here (ConfigFor does that), except where a
// field says so.
type Config struct {
	// MaxTotalNumTokens is max_total_num_tokens, the token pool's capacity
	// (A.1; --max-total-tokens caps it), a multiple of PageSize.
	MaxTotalNumTokens int `json:"max_total_num_tokens"`
	// PageSize is --page-size (default 1).
	PageSize int `json:"page_size"`
	// MaxRunningRequests is max_running_requests after A.1's clamp
	// (--max-running-requests, else min(max_total//2, MaxNumReqs)).
	MaxRunningRequests int `json:"max_running_requests"`
	// MaxNumReqs is the request-slot pool (req_to_token_pool.size, A.1);
	// 0 means MaxRunningRequests.
	MaxNumReqs int `json:"max_num_reqs"`
	// ChunkedPrefillSize is --chunked-prefill-size (C: by GPU memory, 8192
	// on H100); ≤ 0 disables chunking (SGLang's -1).
	ChunkedPrefillSize int `json:"chunked_prefill_size"`
	// MaxPrefillTokens is --max-prefill-tokens (16384).
	MaxPrefillTokens int `json:"max_prefill_tokens"`
	// SchedulePolicy is --schedule-policy: "fcfs" (default, "" too) or
	// "lpm" (A.9).
	SchedulePolicy string `json:"schedule_policy"`
	// EnableMixedChunk is --enable-mixed-chunk (false): running decodes
	// ride along a prefill batch as 1-token extends (A.7).
	EnableMixedChunk bool `json:"enable_mixed_chunk"`
	// DecodeLogInterval is --decode-log-interval (40): the decode-step
	// period of the metric and KV-event points (A.12, A.13). 0 means 40.
	DecodeLogInterval int `json:"decode_log_interval"`
	// ContextLen is the model's context length (--context-length, else
	// the model's max_position_embeddings); 0 means MaxTotalNumTokens.
	ContextLen int `json:"context_len"`
	// KVEvents is --kv-events-config set: KV events are published (A.13).
	KVEvents bool `json:"kv_events"`
	// InitNewTokenRatio, MinNewTokenRatio and NewTokenRatioDecay are the
	// new_token_ratio tracker's init, floor and per-decode-step decay
	// (A.8.1: 0.7, 0.098, (0.7−0.098)/600 at --schedule-conservativeness 1;
	// NewConfigRatios derives them for another conservativeness).
	InitNewTokenRatio  float64 `json:"init_new_token_ratio"`
	MinNewTokenRatio   float64 `json:"min_new_token_ratio"`
	NewTokenRatioDecay float64 `json:"new_token_ratio_decay"`
	// EvictionPolicy is --radix-eviction-policy: lru (default, "" too),
	// fifo, filo or mru (A.6).
	EvictionPolicy string `json:"radix_eviction_policy"`
	// Mid2025 selects the mid-2025 code's variants where the spec gives
	// two (A.6, A.8.1): eviction of the full allocation size instead of
	// the shortfall, and the retraction ratio without the "+1".
	Mid2025 bool `json:"mid_2025"`
	// CheckInvariants makes every step verify CheckInvariants and panic on
	// a violation (tests).
	CheckInvariants bool `json:"-"`
}

// Ratios returns the A.8.1 new_token_ratio parameters for
// --schedule-conservativeness c (1 when c ≤ 0): init = min(0.7·c, 1),
// min = min(init·0.14, 1), decay = (init − min)/600.
func Ratios(c float64) (init, minRatio, decay float64) {
	if c <= 0 {
		c = 1
	}
	init = math.Min(initNewTokenRatio*c, 1)
	minRatio = math.Min(init*minNewTokenRatioFactor, 1)
	return init, minRatio, (init - minRatio) / newTokenRatioDecaySteps
}

func (c Config) validate() error {
	switch {
	case c.PageSize < 1:
		return fmt.Errorf("page_size must be at least 1, got %d", c.PageSize)
	case c.MaxTotalNumTokens < c.PageSize*2:
		return fmt.Errorf("max_total_num_tokens %d is less than two pages of %d (SGLang: not enough memory, increase --mem-fraction-static)", c.MaxTotalNumTokens, c.PageSize)
	case c.MaxTotalNumTokens%c.PageSize != 0:
		return fmt.Errorf("max_total_num_tokens %d is not a multiple of page_size %d", c.MaxTotalNumTokens, c.PageSize)
	case c.MaxRunningRequests < 1:
		return fmt.Errorf("max_running_requests must be at least 1, got %d", c.MaxRunningRequests)
	case c.MaxNumReqs != 0 && c.MaxNumReqs < c.MaxRunningRequests:
		return fmt.Errorf("the request-slot pool %d is smaller than max_running_requests %d", c.MaxNumReqs, c.MaxRunningRequests)
	case c.MaxPrefillTokens < 1:
		return fmt.Errorf("max_prefill_tokens must be at least 1, got %d", c.MaxPrefillTokens)
	case c.DecodeLogInterval < 0:
		return fmt.Errorf("decode_log_interval must not be negative, got %d", c.DecodeLogInterval)
	case c.ContextLen < 0:
		return fmt.Errorf("context_len must not be negative, got %d", c.ContextLen)
	case c.InitNewTokenRatio <= 0 || c.InitNewTokenRatio > 1 || c.MinNewTokenRatio < 0 || c.MinNewTokenRatio > c.InitNewTokenRatio || c.NewTokenRatioDecay < 0:
		return fmt.Errorf("new_token_ratio init %g, min %g, decay %g: want 0 < min ≤ init ≤ 1 and decay ≥ 0", c.InitNewTokenRatio, c.MinNewTokenRatio, c.NewTokenRatioDecay)
	}
	switch c.SchedulePolicy {
	case "", PolicyFCFS, PolicyLPM:
	default:
		return fmt.Errorf("schedule_policy %q: want fcfs or lpm", c.SchedulePolicy)
	}
	switch c.EvictionPolicy {
	case "", PolicyLRU, PolicyFIFO, PolicyFILO, PolicyMRU:
	default:
		return fmt.Errorf("radix_eviction_policy %q: want lru, fifo, filo or mru", c.EvictionPolicy)
	}
	return nil
}

// preLoadUsedBytes is the device memory already taken when SGLang measures
// total_gpu_memory, the free memory before the weights load (A.1: ≈ 79 GiB
// on an 80 GB H100 whose driver reports 79.65 GiB): the CUDA context and
// the communicators' buffers. (estimate)
const preLoadUsedBytes = 0.65 * (1 << 30)

// ChunkedPrefillDefault is --chunked-prefill-size's default for a GPU of
// gpuMiB MiB (sglang-engine.md C, _handle_gpu_memory_settings): < 20 and
// < 35 GiB 2048, < 60 4096, < 90 and < 160 8192, else 16384; unknown
// (0) 4096.
func ChunkedPrefillDefault(gpuMiB float64) int {
	gib := gpuMiB / 1024
	switch {
	case gpuMiB <= 0:
		return 4096
	case gib < 35:
		return 2048
	case gib < 60:
		return 4096
	case gib < 160:
		return 8192
	}
	return 16384
}

// cudaGraphMaxBS is --cuda-graph-max-bs's default by the same GPU classes
// (C): 8 / 24 (80 at TP ≥ 4) / 32 (160) / 256 (512) / 256 (512) / 512.
func cudaGraphMaxBS(gpuMiB float64, tp int) int {
	gib := gpuMiB / 1024
	big := tp >= 4
	pick := func(a, b int) int {
		if big {
			return b
		}
		return a
	}
	switch {
	case gib < 20:
		return 8
	case gib < 35:
		return pick(24, 80)
	case gib < 60:
		return pick(32, 160)
	case gib < 160:
		return pick(256, 512)
	}
	return 512
}

// MemFractionStaticDefault is --mem-fraction-static's default (C):
// round((gpu − reserved)/gpu, 3) with reserved MiB = 512 + 1.5·max(chunk,
// 2048) + 2·cuda_graph_max_bs + 1024·tp/8 (pp 1, no DP attention,
// piecewise CUDA graphs or speculative decoding), at least 10240 MiB on a
// GPU over 60 GiB; 0.88 when the GPU memory is unknown.
func MemFractionStaticDefault(gpuMiB float64, tp, chunk int) float64 {
	if gpuMiB <= 0 {
		return 0.88
	}
	reserved := 512 + 1.5*float64(max(chunk, 2048)) + 2*float64(cudaGraphMaxBS(gpuMiB, tp)) + 1024*float64(tp)/8
	if gpuMiB > 60*1024 {
		reserved = max(reserved, 10240)
	}
	return math.Round((gpuMiB-reserved)/gpuMiB*1000) / 1000
}

// ConfigFor derives an SGLang engine's configuration from a replica preset
// (its model, GPU and TP; the vLLM engine arguments are ignored) and the
// SGLang flags (the preset's sglang block), per sglang-engine.md A.1 and
// C; KVEvents is left off for the caller to set:
//
//	total        = device memory − preLoadUsedBytes (free before loading)
//	rest         = (total − weights per GPU) − total·(1 − mem_fraction_static)
//	max_total    = ⌊rest / cell_size⌋, min --max-total-tokens, floored to the page
//	max_num_reqs = --max-running-requests or min(max(⌊max_total/context_len·512⌋, 2048), 4096)
//	max_running  = min(--max-running-requests or max_total//2, max_num_reqs)
//
// with cell_size the KV bytes per token on one rank (arch.Model.KVBytesPerToken,
// MHA or MLA) and the weights arch.Model.WeightBytesWithExperts.
func ConfigFor(p replica.Preset, f replica.SGLangFlags) (Config, error) {
	m := p.Arch
	if m == nil {
		return Config{}, fmt.Errorf("sglang config: preset %s: model and GPU not resolved", p.Name)
	}
	tp := max(p.TensorParallelSize, 1)
	if err := m.CheckTP(tp); err != nil {
		return Config{}, fmt.Errorf("sglang config: preset %s: %w", p.Name, err)
	}
	cfg, err := flagConfig(f, &p.GPU)
	if err != nil {
		return Config{}, fmt.Errorf("sglang config: preset %s: %w", p.Name, err)
	}
	elem, err := m.KVElementBytes(f.KVCacheDtype)
	if err != nil {
		return Config{}, fmt.Errorf("sglang config: preset %s: %w", p.Name, err)
	}
	mfs := f.MemFractionStatic
	if mfs == 0 {
		mfs = MemFractionStaticDefault(p.GPU.DeviceMemoryBytes()/(1<<20), tp, cfg.ChunkedPrefillSize)
	}
	if mfs <= 0 || mfs > 1 {
		return Config{}, fmt.Errorf("sglang config: preset %s: mem_fraction_static %g, want (0, 1]", p.Name, mfs)
	}
	total := p.GPU.DeviceMemoryBytes() - preLoadUsedBytes
	weights := float64(m.WeightBytesWithExperts(tp, max(p.ExpertShards, 1)))
	rest := (total - weights) - total*(1-mfs)
	cell := m.KVBytesPerToken(elem, tp)
	maxTotal := 0
	if rest > 0 {
		maxTotal = int(rest) / int(cell)
	}
	if f.MaxTotalTokens > 0 {
		maxTotal = min(maxTotal, f.MaxTotalTokens)
	}
	maxTotal = maxTotal / cfg.PageSize * cfg.PageSize
	if maxTotal <= 0 {
		return Config{}, fmt.Errorf("sglang config: preset %s: not enough memory for the KV pool (%.2f GiB left of %.2f GiB after %.2f GiB of weights at mem_fraction_static %g); increase mem_fraction_static",
			p.Name, rest/(1<<30), total/(1<<30), weights/(1<<30), mfs)
	}
	cfg.MaxTotalNumTokens = maxTotal
	cfg.ContextLen = f.ContextLength
	if cfg.ContextLen == 0 {
		cfg.ContextLen = m.MaxPositionEmbeddings
	}
	if cfg.ContextLen == 0 {
		cfg.ContextLen = maxTotal
	}
	cfg.MaxNumReqs = f.MaxRunningRequests
	if cfg.MaxNumReqs == 0 {
		cfg.MaxNumReqs = min(max(int(float64(maxTotal)/float64(cfg.ContextLen)*512), 2048), 4096)
	}
	cfg.MaxRunningRequests = f.MaxRunningRequests
	if cfg.MaxRunningRequests == 0 {
		cfg.MaxRunningRequests = maxTotal / 2
	}
	cfg.MaxRunningRequests = max(min(cfg.MaxRunningRequests, cfg.MaxNumReqs), 1)
	if err := cfg.validate(); err != nil {
		return Config{}, fmt.Errorf("sglang config: preset %s: %w", p.Name, err)
	}
	return cfg, nil
}

// flagConfig applies the flags' defaults that do not depend on the pool.
func flagConfig(f replica.SGLangFlags, g *arch.GPU) (Config, error) {
	c := Config{
		PageSize:          max(f.PageSize, 1),
		MaxPrefillTokens:  f.MaxPrefillTokens,
		SchedulePolicy:    f.SchedulePolicy,
		EnableMixedChunk:  f.EnableMixedChunk,
		DecodeLogInterval: f.DecodeLogInterval,
		EvictionPolicy:    f.RadixEvictionPolicy,
	}
	if f.PageSize < 0 {
		return Config{}, fmt.Errorf("page_size must not be negative, got %d", f.PageSize)
	}
	if c.MaxPrefillTokens == 0 {
		c.MaxPrefillTokens = defaultMaxPrefillTokens
	}
	if c.DecodeLogInterval == 0 {
		c.DecodeLogInterval = defaultDecodeLogInterval
	}
	switch {
	case f.ChunkedPrefillSize == 0:
		c.ChunkedPrefillSize = ChunkedPrefillDefault(g.DeviceMemoryBytes() / (1 << 20))
	case f.ChunkedPrefillSize < 0:
		c.ChunkedPrefillSize = -1
	default:
		c.ChunkedPrefillSize = f.ChunkedPrefillSize
	}
	c.InitNewTokenRatio, c.MinNewTokenRatio, c.NewTokenRatioDecay = Ratios(f.ScheduleConservativeness)
	return c, nil
}

// Memory estimate of an engine's state once its cache is full (the
// simulator's fleet bound, sim.FleetMemory; the counterpart of
// replica.Config.MemoryBytes). An estimate, not a bound: the radix tree's
// size depends on the traffic.
const (
	// nodeBytes is one tree node with its children map and eviction-heap
	// entries.
	nodeBytes = 400
	// tokensPerNode is the cached tokens a node holds on average, taken as
	// a conversation turn's share of a prompt (64); a tree of one-token
	// branches holds more nodes.
	tokensPerNode = 64
)

// MemoryBytes estimates the engine's memory with a full pool: its nodes,
// the request token arrays their keys keep alive (4 bytes a cached token),
// the KV-event digests (32 bytes a page, with events) and the engine's
// fixed overhead (replica.EngineOverheadBytes, as vLLM's).
func (c Config) MemoryBytes() int64 {
	tokens := int64(c.MaxTotalNumTokens)
	b := tokens/tokensPerNode*nodeBytes + 4*tokens
	if c.KVEvents {
		b += 32 * tokens / int64(max(c.PageSize, 1))
	}
	return b + replica.EngineOverheadBytes
}
