package replica

import (
	"encoding/json"
	"fmt"

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
	// CheckInvariants verifies pool and queue invariants after every step
	// (debugging).
	CheckInvariants bool `json:"check_invariants,omitempty"`
}

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
	}
	return nil
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
