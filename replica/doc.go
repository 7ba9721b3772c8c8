// Package replica models one vLLM v1 engine: its KV block pool and prefix
// cache, its scheduler, its step time, the gauges a metrics scraper reads and
// the KV events it publishes. It knows nothing of routing (it never imports
// epp) and never advances time itself: the simulator calls BeginStep and
// EndStep and owns the clock.
//
// Each rule cites the section of ../shared/spec/vllm-engine.md it implements:
//
//   - A.1 block size and chained block hashes: hash.go (BlockHasher)
//   - A.2 longest cached prefix, capped at num_tokens-1: Engine.computedBlocks
//   - A.3 allocation, ref counts, caching at scheduling time: Engine.allocateSlots,
//     BlockPool.Touch/GetNewBlocks/CacheFullBlocks
//   - A.4 free queue, LRU by time freed, tail-first, lazy eviction, usage gauge:
//     blockpool.go
//   - A.5 scheduler step (running first, waiting FCFS, token budget, chunked
//     prefill, long_prefill_token_threshold, head-of-line blocking, recompute
//     preemption, GPU-class defaults): engine.go, config.go
//   - A.6 prefix-cache hit metrics, once per admission: Stats
//   - A.7 KV events (BlockStored per request per step, BlockRemoved on
//     eviction, AllBlocksCleared): events.go
//   - A.8 scraped gauges: Engine.Gauges
//   - B.1/B.3 step-time model (the roofline, bound to an arch.Model on an
//     arch.GPU): steptime.go
//   - CPU KV offloading (../shared/spec/pd-offload.md part B; kv_offloading_size,
//     off by default): capacity (B.2) in config.go (EngineArgs.CPUOffload), the
//     tier, its LRU and copy lanes in offload.go, the scheduler's lookup, load
//     and promotion (B.4–B.6) in Engine.beginStep, CPU-medium events (B.8) in
//     events.go, counters and gauges (B.9) in Stats and Gauges;
//     docs/pd-offload.md
//   - P/D disaggregation (../shared/spec/pd-offload.md part A): a prefill
//     leg (Request.HoldBlocks) keeps its blocks after its one token until
//     Engine.Release (A.5); a decode leg (Request.Remote) is admitted after
//     its local hit with the rest allocated and read over NIXL (A.4 steps
//     8–11, A.6, A.8), waits in WAITING_FOR_REMOTE_KVS like a CPU load and
//     is promoted with N−1 tokens computed: nixl.go, Engine.beginStep;
//     docs/pd-offload.md
//   - KV capacity as vLLM sizes it from GPU memory (num_gpu_blocks):
//     capacity.go, docs/latency.md "KV capacity"
//   - presets (YAML files naming a model, a GPU, the tensor-parallel degree
//     and vLLM's engine arguments) and their resolution into a Config:
//     preset.go, presets/*.yaml
package replica
