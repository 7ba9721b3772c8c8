package replica

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/eppsim/eppsim/internal/suggest"
)

// Engine types a replica can run: a preset's engine_type, a fleet group's
// engine_type, eppsim's --engine. The empty string is vLLM.
const (
	EngineVLLM   = "vllm"
	EngineSGLang = "sglang"
)

// EngineTypes lists the engine types, the default first.
var EngineTypes = []string{EngineVLLM, EngineSGLang}

// CheckEngineType refuses an engine type that is not one of EngineTypes
// (the empty string is vLLM).
func CheckEngineType(t string) error {
	if t == "" || slices.Contains(EngineTypes, t) {
		return nil
	}
	msg := fmt.Sprintf("unknown engine %q (have %s)", t, strings.Join(EngineTypes, ", "))
	if c := suggest.Closest(t, EngineTypes, 3); c != "" {
		msg += fmt.Sprintf("; did you mean %q?", c)
	}
	return errors.New(msg)
}

// EngineTypeOf is a preset's engine type with the default filled in.
func (p *Preset) EngineTypeOf() string {
	if p.EngineType == "" {
		return EngineVLLM
	}
	return p.EngineType
}

// SGLangFlags are an SGLang replica's server arguments, by SGLang's flag
// names (--mem-fraction-static is mem_fraction_static; spec
// sglang-engine.md C), the block a preset or fleet group writes as
// `sglang:` and replica/sglang.ConfigFor resolves. A zero value is
// SGLang's default: the flag left out (page_size 1, chunked_prefill_size
// and mem_fraction_static by GPU memory, max_running_requests and
// max_total_tokens derived from the pool, schedule_policy fcfs, mixed
// chunks off, context_length the model's). chunked_prefill_size -1 turns
// chunking off, as in SGLang. A vLLM replica ignores the block. KV
// events are not a flag here: a replica publishes them when the EPP
// consumes them (a precise prefix producer), as if --kv-events-config
// were set.
type SGLangFlags struct {
	// MemFractionStatic is --mem-fraction-static; 0 takes SGLang's GPU
	// heuristic (C; 0.835 on one H100).
	MemFractionStatic float64 `json:"mem_fraction_static,omitempty"`
	// PageSize is --page-size (1).
	PageSize int `json:"page_size,omitempty"`
	// MaxRunningRequests is --max-running-requests (A.1 when 0).
	MaxRunningRequests int `json:"max_running_requests,omitempty"`
	// ChunkedPrefillSize is --chunked-prefill-size (by GPU memory, C);
	// -1 disables chunked prefill.
	ChunkedPrefillSize int `json:"chunked_prefill_size,omitempty"`
	// MaxPrefillTokens is --max-prefill-tokens (16384).
	MaxPrefillTokens int `json:"max_prefill_tokens,omitempty"`
	// MaxTotalTokens is --max-total-tokens (profiled when 0).
	MaxTotalTokens int `json:"max_total_tokens,omitempty"`
	// SchedulePolicy is --schedule-policy (fcfs; lpm).
	SchedulePolicy string `json:"schedule_policy,omitempty"`
	// ScheduleConservativeness is --schedule-conservativeness (1.0).
	ScheduleConservativeness float64 `json:"schedule_conservativeness,omitempty"`
	// EnableMixedChunk is --enable-mixed-chunk (false).
	EnableMixedChunk bool `json:"enable_mixed_chunk,omitempty"`
	// ContextLength is --context-length (the model's
	// max_position_embeddings).
	ContextLength int `json:"context_length,omitempty"`
	// RadixEvictionPolicy is --radix-eviction-policy (lru; fifo, filo,
	// mru).
	RadixEvictionPolicy string `json:"radix_eviction_policy,omitempty"`
	// DecodeLogInterval is --decode-log-interval (40): the decode-step
	// period of the gauges' and KV events' refresh.
	DecodeLogInterval int `json:"decode_log_interval,omitempty"`
	// KVCacheDtype is --kv-cache-dtype (auto: the model's dtype; fp8).
	KVCacheDtype string `json:"kv_cache_dtype,omitempty"`
}

// SGLangSchedulePolicies are the --schedule-policy values the SGLang
// engine models (spec A.9). SGLang also has dfs-weight, lof, random and
// routing-key, which are refused here rather than run as another policy.
var SGLangSchedulePolicies = []string{"fcfs", "lpm"}

// SGLangEvictionPolicies are the --radix-eviction-policy values the SGLang
// engine models (A.6; lfu, slru and priority are not: spec E).
var SGLangEvictionPolicies = []string{"lru", "fifo", "filo", "mru"}

// Validate checks the flags' ranges; errors name the flag as a preset
// writes it (sglang.page_size).
func (f *SGLangFlags) Validate() error {
	switch {
	case f.MemFractionStatic != 0 && (!(f.MemFractionStatic > 0 && f.MemFractionStatic < 1) || math.IsInf(f.MemFractionStatic, 0)):
		return fmt.Errorf("sglang.mem_fraction_static: must be in (0, 1) (the share of GPU memory for weights and the KV pool), got %g", f.MemFractionStatic)
	case f.PageSize < 0:
		return fmt.Errorf("sglang.page_size: must be at least 1 (leave it out for SGLang's 1), got %d", f.PageSize)
	case f.MaxRunningRequests < 0:
		return fmt.Errorf("sglang.max_running_requests: must be at least 1 (leave it out for the derived limit), got %d", f.MaxRunningRequests)
	case f.ChunkedPrefillSize < -1:
		return fmt.Errorf("sglang.chunked_prefill_size: must be a number of tokens, or -1 to turn chunking off, got %d", f.ChunkedPrefillSize)
	case f.MaxTotalTokens < 0:
		return fmt.Errorf("sglang.max_total_tokens: must be at least 1 (leave it out for the profiled pool), got %d", f.MaxTotalTokens)
	case f.ContextLength < 0:
		return fmt.Errorf("sglang.context_length: must be at least 1 (leave it out for the model's), got %d", f.ContextLength)
	case f.SchedulePolicy != "" && !slices.Contains(SGLangSchedulePolicies, f.SchedulePolicy):
		return fmt.Errorf("sglang.schedule_policy: %q is not modelled (have %s)", f.SchedulePolicy, strings.Join(SGLangSchedulePolicies, ", "))
	case f.RadixEvictionPolicy != "" && !slices.Contains(SGLangEvictionPolicies, f.RadixEvictionPolicy):
		return fmt.Errorf("sglang.radix_eviction_policy: %q is not modelled (have %s)", f.RadixEvictionPolicy, strings.Join(SGLangEvictionPolicies, ", "))
	case f.MaxPrefillTokens < 0:
		return fmt.Errorf("sglang.max_prefill_tokens: must be at least 1 (leave it out for 16384), got %d", f.MaxPrefillTokens)
	case f.DecodeLogInterval < 0:
		return fmt.Errorf("sglang.decode_log_interval: must be at least 1 (leave it out for 40), got %d", f.DecodeLogInterval)
	case f.ScheduleConservativeness < 0 || math.IsNaN(f.ScheduleConservativeness) || math.IsInf(f.ScheduleConservativeness, 0):
		return fmt.Errorf("sglang.schedule_conservativeness: must be a positive number (leave it out for 1), got %g", f.ScheduleConservativeness)
	case f.KVCacheDtype != "" && f.KVCacheDtype != "auto" && !strings.HasPrefix(f.KVCacheDtype, "fp8"):
		return fmt.Errorf("sglang.kv_cache_dtype: %q: want auto or an fp8 type", f.KVCacheDtype)
	}
	return nil
}

// checkEngine validates the engine type and the SGLang flags of p.
func (p *Preset) checkEngine() error {
	if err := CheckEngineType(p.EngineType); err != nil {
		return fmt.Errorf("engine_type: %w", err)
	}
	if p.SGLang != nil {
		if err := p.SGLang.Validate(); err != nil {
			return err
		}
	}
	return nil
}
