// Package sglang models one SGLang engine — token pool, radix cache,
// scheduler — for the simulator, as ../../shared/spec/sglang-engine.md
// describes it; each rule cites its section there. The engine is driven
// like replica.Engine (Add, BeginStep, EndStep, Abort) and reuses its
// request, event, gauge and step-time types.
//
//   - A.1 token pool and capacity: pool.go (counts, not slot lists),
//     ConfigFor in config.go (max_total_num_tokens, max_running_requests,
//     max_req_len)
//   - A.2–A.6 radix tree (match with the N−1 rule and page floor, split,
//     insert after prefill / per chunk / at finish, dedup, lock_ref,
//     eviction of unlocked leaves, shortfall or mid-2025 amount): radix.go,
//     Engine.cacheUnfinished, Engine.release, Engine.evictFor
//   - A.7–A.11, A.14 scheduler (prefill-first loop, sticky batch_is_full,
//     PrefillAdder budgets, chunked prefill, new_token_ratio, fcfs/lpm,
//     retraction, arrival clamp): engine.go
//   - A.12 metrics: Engine.Gauges (refreshed at the metric points only),
//     Engine.Stats
//   - A.13 KV events (one per page, SHA-256 chain, published at the metric
//     points): events.go, tree.recordStore
//
// Step time: each step is a prefill batch or a decode batch (never mixed,
// unless EnableMixedChunk) whose entries go to the shared
// replica.StepModel. That model is calibrated on vLLM runs, not SGLang: it
// knows nothing of SGLang's CUDA-graph buckets or overlap gain (spec E).
//
// Overlap scheduling (SGLang's default) is not modelled: results are applied
// at the end of each step, as with --disable-overlap-schedule, the setting
// of the spec's conformance scenarios (D).
package sglang
