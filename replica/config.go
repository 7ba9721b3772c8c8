package replica

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/eppsim/eppsim/arch"
)

// Config is one engine's resolved vLLM configuration: what NewEngine runs
// and what a run's summary records. Users do not write it directly; they
// give EngineArgs (vLLM's arguments, with defaults) in a preset, and
// Preset.EngineConfig resolves them, KV capacity included. The JSON field
// names are vLLM's.
type Config struct {
	// BlockSize is the KV block size in tokens (A.1 default 16).
	BlockSize int `json:"block_size"`
	// NumGPUBlocks is vLLM's num_gpu_blocks, null block included: the count
	// vLLM computes from memory (KVCapacity) and logs, or
	// num_gpu_blocks_override.
	NumGPUBlocks int `json:"num_gpu_blocks"`
	// MaxNumBatchedTokens is the per-step token budget (A.5).
	MaxNumBatchedTokens int `json:"max_num_batched_tokens"`
	// MaxNumSeqs caps the running requests (A.5).
	MaxNumSeqs int `json:"max_num_seqs"`
	// LongPrefillTokenThreshold caps one request's tokens per step when > 0.
	LongPrefillTokenThreshold int `json:"long_prefill_token_threshold"`
	// MaxModelLen is the longest sequence (prompt + output) accepted; 0 means
	// the KV capacity.
	MaxModelLen int `json:"max_model_len"`
	// AsyncScheduling schedules each step while the previous one runs
	// (vLLM's --async-scheduling, on by default since late 2025): a
	// request that arrives during a step waits one more step (BeginStep).
	AsyncScheduling bool `json:"async_scheduling"`
	// DisablePrefixCaching turns the prefix cache off (vLLM enables it by
	// default, A.5). Its JSON form is vLLM's enable_prefix_caching.
	DisablePrefixCaching bool `json:"-"`
	// HashSeed seeds the block-hash chain (PYTHONHASHSEED). Replicas of one
	// fleet share it so equal prefixes hash alike everywhere.
	HashSeed uint64 `json:"hash_seed"`
	// KVEvents makes the engine publish KV events to its subscribers.
	KVEvents bool `json:"kv_events"`
	// CheckInvariants verifies pool and queue invariants after every step
	// (debug option; tests turn it on).
	CheckInvariants bool `json:"check_invariants"`
	// KVOffloadingSize is vLLM's --kv-offloading-size in GiB (0: off): a
	// CPU tier of that many bytes behind vLLM's native OffloadingConnector
	// (pd-offload.md B.1). Offload holds what it resolves to.
	KVOffloadingSize float64 `json:"kv_offloading_size,omitempty"`
	// Offload is the CPU tier's resolved configuration; nil when
	// offloading is off. The engine reads only this.
	Offload *OffloadConfig `json:"kv_offload,omitempty"`
	// KVTransfer, when set, lets the engine serve decode legs of P/D
	// requests (Request.Remote): the cost of reading their KV from the
	// prefill engine (pd-offload.md A.8). The simulator sets it when the
	// EPP disaggregates; presets never do.
	KVTransfer *KVTransferConfig `json:"kv_transfer,omitempty"`
}

// OffloadConfig is a replica's CPU KV tier (pd-offload.md B): its capacity
// and the cost of a copy between GPU and CPU memory. Chunks are one GPU
// block (B.1 default), eviction is LRU (B.5), only prompt blocks are
// stored (offload_prompt_only, B.1) and events are placeholders (B.8).
type OffloadConfig struct {
	// CPUBlocks is num_cpu_chunks of B.2: the blocks the CPU tier holds.
	CPUBlocks int `json:"num_cpu_blocks"`
	// BlockBytesPerRank is one block's KV on one GPU of the replica: each
	// tensor-parallel rank copies its own share over its own link, in
	// parallel (C.3).
	BlockBytesPerRank int64 `json:"block_bytes_per_rank"`
	// PCIeGBps is the host-device copy bandwidth per GPU in GB/s, each way
	// (estimate: pd-offload.md C.4 gives 45 for PCIe Gen5 x16 with pinned
	// memory, 22 for Gen4).
	PCIeGBps float64 `json:"pcie_gb_per_s"`
	// JobOverheadUs is the fixed cost of one transfer job in µs (estimate:
	// 20, C.4).
	JobOverheadUs float64 `json:"job_overhead_us"`
}

// copyTime is the duration in ns of one transfer job of n blocks (C.3:
// t = t_job + n·block_bytes/BW per rank, the ranks in parallel). GB/s is
// bytes per ns.
func (o *OffloadConfig) copyTime(n int) int64 {
	return transferNs(o.JobOverheadUs, n, o.BlockBytesPerRank, o.PCIeGBps)
}

// transferNs is the duration in ns, at least 1, of moving n blocks of
// bytesPerRank bytes each over one link per rank, the ranks in parallel:
// a fixed cost of fixedUs µs plus n·bytesPerRank/gbps (GB/s is bytes per
// ns). Both of the engine's copies have this form: the CPU tier's
// (pd-offload.md C.3) and the P/D read (A.8).
func transferNs(fixedUs float64, n int, bytesPerRank int64, gbps float64) int64 {
	t := fixedUs*1e3 + float64(n)*float64(bytesPerRank)/gbps
	return max(int64(math.Round(t)), 1)
}

func (o *OffloadConfig) validate() error {
	switch {
	case o.CPUBlocks < 1:
		return fmt.Errorf("kv_offload: num_cpu_blocks must be at least 1, got %d", o.CPUBlocks)
	case o.BlockBytesPerRank <= 0:
		return fmt.Errorf("kv_offload: block_bytes_per_rank must be positive, got %d", o.BlockBytesPerRank)
	case !(o.PCIeGBps > 0) || math.IsInf(o.PCIeGBps, 0):
		return fmt.Errorf("kv_offload: pcie_gb_per_s must be a positive number, got %g", o.PCIeGBps)
	case !(o.JobOverheadUs >= 0) || math.IsInf(o.JobOverheadUs, 0):
		return fmt.Errorf("kv_offload: job_overhead_us must be a number ≥ 0, got %g", o.JobOverheadUs)
	}
	return nil
}

// configJSON is Config's JSON form: DisablePrefixCaching as vLLM's
// enable_prefix_caching.
type configJSON struct {
	plainConfig
	EnablePrefixCaching *bool `json:"enable_prefix_caching"`
}

type plainConfig Config

// MarshalJSON writes vLLM's field names.
func (c Config) MarshalJSON() ([]byte, error) {
	on := !c.DisablePrefixCaching
	return json.Marshal(configJSON{plainConfig(c), &on})
}

// UnmarshalJSON reads what MarshalJSON writes; enable_prefix_caching
// defaults to true.
func (c *Config) UnmarshalJSON(data []byte) error {
	var v configJSON
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*c = Config(v.plainConfig)
	c.DisablePrefixCaching = v.EnablePrefixCaching != nil && !*v.EnablePrefixCaching
	return nil
}

// LegacyConfigKeys maps the camelCase JSON names Config had before it took
// vLLM's names to the current ones (summaries written by older eppsim
// versions use them; report reads them through this table).
var LegacyConfigKeys = map[string]string{
	"blockSize":                 "block_size",
	"numGpuBlocks":              "num_gpu_blocks",
	"maxNumBatchedTokens":       "max_num_batched_tokens",
	"maxNumSeqs":                "max_num_seqs",
	"longPrefillTokenThreshold": "long_prefill_token_threshold",
	"maxModelLen":               "max_model_len",
	"disablePrefixCaching":      "enable_prefix_caching", // negated
	"hashSeed":                  "hash_seed",
	"kvEvents":                  "kv_events",
	"checkInvariants":           "check_invariants",
}

// BatchDefaults returns vLLM's max_num_batched_tokens / max_num_seqs for the
// OpenAI API server on a GPU class (A.5, EngineArgs.get_batch_defaults):
// 8192/1024 for ≥70 GiB parts other than A100, else 2048/256.
func BatchDefaults(g *arch.GPU) (maxBatchedTokens, maxSeqs int) {
	if g.LargeBatch() {
		return 8192, 1024
	}
	return 2048, 256
}

func (c *Config) validate() error {
	switch {
	case c.BlockSize <= 0:
		return fmt.Errorf("block_size must be positive, got %d", c.BlockSize)
	case c.NumGPUBlocks < 2:
		return fmt.Errorf("num_gpu_blocks must be at least 2 (block 0 is the null block), got %d", c.NumGPUBlocks)
	case c.MaxNumBatchedTokens <= 0:
		return fmt.Errorf("max_num_batched_tokens must be positive, got %d", c.MaxNumBatchedTokens)
	case c.MaxNumSeqs <= 0:
		return fmt.Errorf("max_num_seqs must be positive, got %d", c.MaxNumSeqs)
	case c.LongPrefillTokenThreshold < 0:
		return fmt.Errorf("long_prefill_token_threshold must not be negative, got %d", c.LongPrefillTokenThreshold)
	case c.MaxModelLen < 0:
		return fmt.Errorf("max_model_len must not be negative, got %d", c.MaxModelLen)
	}
	if c.Offload != nil {
		if err := c.Offload.validate(); err != nil {
			return err
		}
	}
	if c.KVTransfer != nil {
		return c.KVTransfer.validate()
	}
	return nil
}

// EngineArgs are a replica's vLLM engine arguments, by vLLM's names (the
// `engine:` block of a preset or a fleet group's overrides). Zero values
// take vLLM's defaults when Preset.EngineConfig resolves them.
type EngineArgs struct {
	// BlockSize is the KV block size in tokens (default 16).
	BlockSize int `json:"block_size,omitempty"`
	// MaxNumBatchedTokens and MaxNumSeqs default by GPU class
	// (BatchDefaults).
	MaxNumBatchedTokens int `json:"max_num_batched_tokens,omitempty"`
	MaxNumSeqs          int `json:"max_num_seqs,omitempty"`
	// MaxModelLen defaults to the model's max_position_embeddings.
	MaxModelLen               int `json:"max_model_len,omitempty"`
	LongPrefillTokenThreshold int `json:"long_prefill_token_threshold,omitempty"`
	// EnablePrefixCaching defaults to true.
	EnablePrefixCaching *bool `json:"enable_prefix_caching,omitempty"`
	// AsyncScheduling is vLLM's async_scheduling (default true: vLLM
	// turned it on by default in late 2025, PR 27614).
	AsyncScheduling *bool `json:"async_scheduling,omitempty"`
	// DataParallelSize is vLLM's data_parallel_size: that many independent
	// engines (each its own GPUs, KV cache and scheduler), each exposed as
	// its own rank endpoint (sim.ExpandDataParallel). Default 1.
	DataParallelSize int `json:"data_parallel_size,omitempty"`
	// GPUMemoryUtilization is the fraction of device memory vLLM may use
	// (default 0.9).
	GPUMemoryUtilization float64 `json:"gpu_memory_utilization,omitempty"`
	// KVCacheDtype is auto (the model's dtype), bfloat16, or fp8 (and its
	// e4m3/e5m2 variants).
	KVCacheDtype string `json:"kv_cache_dtype,omitempty"`
	// NumGPUBlocksOverride, when > 0, replaces the computed KV capacity
	// (null block included, as vLLM's num_gpu_blocks).
	NumGPUBlocksOverride int `json:"num_gpu_blocks_override,omitempty"`
	// DisableHybridKVCacheManager is vLLM's
	// --disable-hybrid-kv-cache-manager: a model with full and
	// sliding-window layers then allocates every layer as full attention,
	// one block holding all layers' pages (arch.Model.KVBlockLayers), as
	// vLLM also does whenever KV events are on (vllm-engine.md A.7, which
	// sim applies to every engine that publishes them).
	DisableHybridKVCacheManager bool `json:"disable_hybrid_kv_cache_manager,omitempty"`
	// CheckInvariants verifies pool and queue invariants after every step
	// (debugging).
	CheckInvariants bool `json:"check_invariants,omitempty"`
	// KernelCacheWarm says the engine starts with a Triton cache that
	// already holds every fused-MoE kernel its steps need (a cache
	// directory kept from an earlier run of the pod): no step compiles
	// at first use (moejit.go). Default false, a fresh engine, as a new
	// pod or a benchmark's server starts. eppsim's, not vLLM's.
	KernelCacheWarm bool `json:"kernel_cache_warm,omitempty"`
	// KVOffloadingSize is vLLM's kv_offloading_size: GiB of CPU memory
	// (all tensor-parallel ranks together) for a CPU KV tier (pd-offload.md
	// B.1; default: none, offloading off).
	KVOffloadingSize float64 `json:"kv_offloading_size,omitempty"`
	// OffloadPCIeGBps is the host-device bandwidth per GPU in GB/s that CPU
	// tier copies run at (eppsim's, not vLLM's; default
	// DefaultOffloadPCIeGBps, an estimate).
	OffloadPCIeGBps float64 `json:"offload_pcie_gb_per_s,omitempty"`
	// OffloadJobOverheadUs is the fixed cost of one CPU tier transfer job
	// in µs (eppsim's; default DefaultOffloadJobOverheadUs, an estimate;
	// 0 is allowed).
	OffloadJobOverheadUs *float64 `json:"offload_job_overhead_us,omitempty"`
}

// Defaults of the CPU tier's copy cost, both marked "(estimate)" in
// pd-offload.md C.4 (no measured source): PCIe Gen5 x16 host-device copies
// with pinned memory at 45 GB/s per GPU (Gen4: 22), and 20 µs per transfer
// job.
const (
	DefaultOffloadPCIeGBps      = 45.0
	DefaultOffloadJobOverheadUs = 20.0
)

// offloadPageSize is the page size the CPU tier rounds a chunk up to (B.2).
const offloadPageSize = 4096

// DefaultGPUMemoryUtilization is vLLM's default gpu_memory_utilization
// (CacheConfig, A.5).
const DefaultGPUMemoryUtilization = 0.9

// DefaultBlockSize is vLLM's default block size on CUDA (A.1).
const DefaultBlockSize = 16

func (e *EngineArgs) validate() error {
	switch {
	case e.DataParallelSize < 0:
		return fmt.Errorf("data_parallel_size must be positive, got %d", e.DataParallelSize)
	case e.BlockSize < 0:
		return fmt.Errorf("block_size must be positive, got %d", e.BlockSize)
	case e.MaxNumBatchedTokens < 0:
		return fmt.Errorf("max_num_batched_tokens must be positive, got %d", e.MaxNumBatchedTokens)
	case e.MaxNumSeqs < 0:
		return fmt.Errorf("max_num_seqs must be positive, got %d", e.MaxNumSeqs)
	case e.MaxModelLen < 0:
		return fmt.Errorf("max_model_len must not be negative, got %d", e.MaxModelLen)
	case e.LongPrefillTokenThreshold < 0:
		return fmt.Errorf("long_prefill_token_threshold must not be negative, got %d", e.LongPrefillTokenThreshold)
	case e.GPUMemoryUtilization < 0 || e.GPUMemoryUtilization > 1:
		return fmt.Errorf("gpu_memory_utilization must be in (0, 1], got %g", e.GPUMemoryUtilization)
	case e.NumGPUBlocksOverride != 0 && e.NumGPUBlocksOverride < 2:
		return fmt.Errorf("num_gpu_blocks_override must be at least 2 (block 0 is the null block), got %d", e.NumGPUBlocksOverride)
	case !(e.KVOffloadingSize >= 0) || math.IsInf(e.KVOffloadingSize, 0):
		return fmt.Errorf("kv_offloading_size must be a number of GiB ≥ 0 (0: no CPU offloading), got %g", e.KVOffloadingSize)
	case !(e.OffloadPCIeGBps >= 0) || math.IsInf(e.OffloadPCIeGBps, 0):
		return fmt.Errorf("offload_pcie_gb_per_s must be a positive number of GB/s, got %g", e.OffloadPCIeGBps)
	case e.OffloadJobOverheadUs != nil && (!(*e.OffloadJobOverheadUs >= 0) || math.IsInf(*e.OffloadJobOverheadUs, 0)):
		return fmt.Errorf("offload_job_overhead_us must be a number of µs ≥ 0, got %g", *e.OffloadJobOverheadUs)
	}
	return nil
}

// CPUOffload sizes the CPU tier of model m at tensor-parallel degree tp
// with KV elements of elem bytes and blocks of blockSize tokens
// (pd-offload.md B.2, CPUOffloadingSpec):
//
//	num_cpu_blocks = ⌊kv_offloading_size·2^30 / roundup(block_bytes_all_ranks, 4096)⌋
//
// block_bytes_all_ranks is one block's KV on every rank together (the
// per-GPU bytes × TP), or a single rank's when the layout is replicated
// (MLA at TP > 1: one copy is kept). It returns nil when offloading is off.
func (e *EngineArgs) CPUOffload(m *arch.Model, tp, elem, blockSize int) (*OffloadConfig, error) {
	if e.KVOffloadingSize == 0 {
		return nil, nil
	}
	rank := m.KVBytesPerToken(elem, tp) * int64(blockSize)
	all := rank * int64(tp)
	if m.MLA != nil {
		all = rank
	}
	chunk := (all + offloadPageSize - 1) / offloadPageSize * offloadPageSize
	o := &OffloadConfig{
		CPUBlocks:         int(math.Floor(e.KVOffloadingSize * (1 << 30) / float64(chunk))),
		BlockBytesPerRank: rank,
		PCIeGBps:          DefaultOffloadPCIeGBps,
		JobOverheadUs:     DefaultOffloadJobOverheadUs,
	}
	if e.OffloadPCIeGBps > 0 {
		o.PCIeGBps = e.OffloadPCIeGBps
	}
	if e.OffloadJobOverheadUs != nil {
		o.JobOverheadUs = *e.OffloadJobOverheadUs
	}
	if o.CPUBlocks < 1 {
		return nil, fmt.Errorf("kv_offloading_size %g GiB holds no block of %d bytes (%d-token blocks of %s at TP%d)", e.KVOffloadingSize, chunk, blockSize, m.Name, tp)
	}
	return o, nil
}

// withDefaults fills the zero fields with vLLM's defaults for model m on
// GPU g.
func (e EngineArgs) withDefaults(m *arch.Model, g *arch.GPU) EngineArgs {
	if e.BlockSize == 0 {
		e.BlockSize = DefaultBlockSize
	}
	tok, seqs := BatchDefaults(g)
	if e.MaxNumBatchedTokens == 0 {
		e.MaxNumBatchedTokens = tok
	}
	if e.MaxNumSeqs == 0 {
		e.MaxNumSeqs = seqs
	}
	if e.MaxModelLen == 0 {
		e.MaxModelLen = m.MaxPositionEmbeddings
	}
	if e.GPUMemoryUtilization == 0 {
		e.GPUMemoryUtilization = DefaultGPUMemoryUtilization
	}
	if e.KVCacheDtype == "" {
		e.KVCacheDtype = "auto"
	}
	return e
}
