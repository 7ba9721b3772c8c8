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
// sglang-engine.md C). A zero value is SGLang's default: the flag left
// out (page_size 1, chunked_prefill_size and mem_fraction_static by GPU
// memory, max_running_requests and max_total_tokens derived from the
// pool, schedule_policy fcfs, mixed chunks off, context_length the
// model's). chunked_prefill_size -1 turns chunking off, as in SGLang.
// A vLLM replica ignores the block.
type SGLangFlags struct {
	MemFractionStatic  float64 `json:"mem_fraction_static,omitempty"`
	PageSize           int     `json:"page_size,omitempty"`
	MaxRunningRequests int     `json:"max_running_requests,omitempty"`
	ChunkedPrefillSize int     `json:"chunked_prefill_size,omitempty"`
	MaxTotalTokens     int     `json:"max_total_tokens,omitempty"`
	SchedulePolicy     string  `json:"schedule_policy,omitempty"`
	EnableMixedChunk   bool    `json:"enable_mixed_chunk,omitempty"`
	ContextLength      int     `json:"context_length,omitempty"`
}

// SGLangSchedulePolicies are the --schedule-policy values SGLang's
// SchedulePolicy knows (spec A.9; "priority", a CLI choice absent from the
// scheduler's enums, is not one).
var SGLangSchedulePolicies = []string{"fcfs", "lpm", "dfs-weight", "lof", "random", "routing-key"}

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
		return fmt.Errorf("sglang.schedule_policy: unknown policy %q (have %s)", f.SchedulePolicy, strings.Join(SGLangSchedulePolicies, ", "))
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
