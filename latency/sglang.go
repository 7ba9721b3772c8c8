package latency

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/eppsim/eppsim/internal/suggest"
	"github.com/eppsim/eppsim/replica"
)

// SGLang runs (docs/latency.md, "Your own runs"): a run served by SGLang
// says engine_type sglang and gives SGLang's server flags (an sglang block
// of replica.SGLangFlags, SGLang's names) instead of vLLM's engine
// arguments. vLLM's arguments are refused for it, not converted: none
// means the same thing in SGLang (blocks are not tokens, vLLM's memory
// share is not --mem-fraction-static), so each refusal names the SGLang
// flag to give instead.

// vllmOnly says, for each vLLM argument of an engine file or an
// experiment's engine object (vLLM's names), what an SGLang run gives
// instead.
var vllmOnly = map[string]string{
	"max_num_seqs":            "give sglang.max_running_requests (--max-running-requests)",
	"max_num_batched_tokens":  "give sglang.chunked_prefill_size (--chunked-prefill-size, SGLang's prefill tokens per step; its decodes are not charged to it)",
	"max_model_len":           "give sglang.context_length (--context-length)",
	"block_size":              "give sglang.page_size (--page-size, tokens)",
	"gpu_memory_utilization":  "give sglang.mem_fraction_static (--mem-fraction-static: the share for the weights and the KV pool, not vLLM's whole-budget share, so it is not converted)",
	"enable_chunked_prefill":  "give sglang.chunked_prefill_size (-1 turns chunked prefill off)",
	"enable_prefix_caching":   "SGLang's radix cache is always on here (--disable-radix-cache is not modelled)",
	"num_gpu_blocks_override": "give sglang.max_total_tokens (--max-total-tokens: the token pool in tokens, the max_total_num_tokens SGLang logs, not blocks)",
	"total_gpu_kv_blocks":     "give sglang.max_total_tokens (--max-total-tokens: the token pool in tokens, the max_total_num_tokens SGLang logs, not blocks)",
	"cpu_kv_offload":          "vLLM's CPU KV tier; SGLang's HiCache is not modelled",
	"cpu_kv_blocks":           "vLLM's CPU KV tier; SGLang's HiCache is not modelled",
	"dp_lb_engine_counts":     "vLLM's data-parallel load balancer; an SGLang run is one engine",
	"kernel_cache_warm":       "vLLM's fused-MoE kernel compiles; SGLang replicas do not model them",
	"data_parallel_size":      "SGLang's --dp-size, behind its own router, is not simulated: an SGLang run is one engine",
}

// vllmOnlyError is the refusal of vLLM argument key (vLLM's name, "_")
// in an SGLang run; field is how the input writes it.
func vllmOnlyError(key, field string) error {
	why, ok := vllmOnly[key]
	if !ok {
		why = "not an SGLang flag; SGLang's go in the sglang block"
	}
	return fmt.Errorf("%s: a vLLM engine argument, but engine_type is sglang: %s", field, why)
}

// sglangNonZero are the numeric SGLang flags whose 0 SGLangFlags reads as
// SGLang's default: given as 0 (SGLang itself would refuse it, or read it
// otherwise) they are errors, as vLLM's arguments are.
var sglangNonZero = []struct {
	key string
	val func(*replica.SGLangFlags) float64
}{
	{"mem_fraction_static", func(f *replica.SGLangFlags) float64 { return f.MemFractionStatic }},
	{"page_size", func(f *replica.SGLangFlags) float64 { return float64(f.PageSize) }},
	{"max_running_requests", func(f *replica.SGLangFlags) float64 { return float64(f.MaxRunningRequests) }},
	{"chunked_prefill_size", func(f *replica.SGLangFlags) float64 { return float64(f.ChunkedPrefillSize) }},
	{"max_prefill_tokens", func(f *replica.SGLangFlags) float64 { return float64(f.MaxPrefillTokens) }},
	{"max_total_tokens", func(f *replica.SGLangFlags) float64 { return float64(f.MaxTotalTokens) }},
	{"schedule_conservativeness", func(f *replica.SGLangFlags) float64 { return f.ScheduleConservativeness }},
	{"context_length", func(f *replica.SGLangFlags) float64 { return float64(f.ContextLength) }},
	{"decode_log_interval", func(f *replica.SGLangFlags) float64 { return float64(f.DecodeLogInterval) }},
}

// sglangStrings are the string flags, which must not be given empty.
var sglangStrings = []struct {
	key string
	val func(*replica.SGLangFlags) string
}{
	{"schedule_policy", func(f *replica.SGLangFlags) string { return f.SchedulePolicy }},
	{"radix_eviction_policy", func(f *replica.SGLangFlags) string { return f.RadixEvictionPolicy }},
	{"kv_cache_dtype", func(f *replica.SGLangFlags) string { return f.KVCacheDtype }},
}

// checkSGLang checks an experiment's engine type and SGLang flags: the
// type is one eppsim has; an SGLang run gives no vLLM argument (engine,
// the keys given and not null) and its sglang block decodes strictly
// (unknown keys are errors), with no 0 or empty value given and every
// value in SGLang's range; a vLLM run has no sglang block.
func (e *Experiment) checkSGLang(engine map[string]json.RawMessage, block json.RawMessage) error {
	if err := replica.CheckEngineType(e.EngineType); err != nil {
		return fmt.Errorf("engine_type: %w", err)
	}
	given := len(block) > 0 && string(bytes.TrimSpace(block)) != "null"
	if !e.IsSGLang() {
		if given {
			return fmt.Errorf("sglang: SGLang's server flags, but the run's engine_type is %s (set engine_type: sglang for an SGLang run)", e.EngineTypeOf())
		}
		return nil
	}
	keys := make([]string, 0, len(engine))
	for k, v := range engine {
		if string(bytes.TrimSpace(v)) != "null" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	if len(keys) > 0 {
		return vllmOnlyError(keys[0], "engine."+keys[0])
	}
	if !given {
		e.SGLang = nil
		return nil
	}
	var f replica.SGLangFlags
	dec := json.NewDecoder(bytes.NewReader(block))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return fmt.Errorf("sglang: %w", suggest.UnknownField(err, f, nil))
	}
	var present map[string]json.RawMessage
	if err := json.Unmarshal(block, &present); err != nil {
		return fmt.Errorf("sglang: %w", err)
	}
	has := func(k string) bool {
		v, ok := present[k]
		return ok && string(bytes.TrimSpace(v)) != "null"
	}
	for _, n := range sglangNonZero {
		if has(n.key) && n.val(&f) == 0 {
			return fmt.Errorf("sglang.%s: 0 is not SGLang's default (leave it out or null for that)", n.key)
		}
	}
	for _, s := range sglangStrings {
		if has(s.key) && strings.TrimSpace(s.val(&f)) == "" {
			return fmt.Errorf("sglang.%s: empty (leave it out or null for SGLang's default)", s.key)
		}
	}
	if err := f.Validate(); err != nil {
		return err
	}
	e.SGLang = &f
	return nil
}
