package replica

import (
	"fmt"
	"slices"
)

// Stats are the engine's counters (A.6 prefix-cache stats in tokens).
type Stats struct {
	// Prefix-cache queries and hits in tokens, counted once per admission of
	// a request that was not preempted before (vLLM's newer semantics).
	PrefixQueries int64
	PrefixHits    int64
	// The same for resumed (preempted) requests.
	PreemptedQueries int64
	PreemptedHits    int64
	Preemptions      int64
	Steps            int64
	Completed        int64
	// KernelCompiles counts the steps that compiled a fused-MoE kernel
	// class at first use (moejit.go).
	KernelCompiles int64
	// Tokens computed by the engine (prefill + recompute + decode).
	ComputedTokens int64

	// CPU tier (pd-offload.md B.6, B.9; zero without offloading).
	// ExternalQueries and ExternalHits are vllm:external_prefix_cache_*:
	// at each admission of a request that was not preempted, the tokens
	// beyond the GPU hit and those of them loaded from the CPU tier.
	ExternalQueries int64
	ExternalHits    int64
	// Transfer jobs, blocks, bytes per rank and copy time (ns) each way
	// (vllm:kv_offload_{store,load}_*), and chunks evicted from the tier.
	OffloadStores       int64
	OffloadStoredBlocks int64
	OffloadStoreBytes   int64
	OffloadStoreTime    int64
	OffloadLoads        int64
	OffloadLoadedBlocks int64
	OffloadLoadBytes    int64
	OffloadLoadTime     int64
	CPUEvictions        int64

	// P/D decode side (pd-offload.md A.10, vllm:nixl_*): reads from
	// prefill engines, the prompt tokens they covered (N − h_D each,
	// counted in ExternalQueries and ExternalHits too), the blocks and
	// bytes per rank they moved, and their time (ns, handshake included).
	Pulls        int64
	PulledTokens int64
	PulledBlocks int64
	PullBytes    int64
	PullTime     int64
}

// Gauges are the values a Prometheus scrape of the engine reads (A.8).
type Gauges struct {
	NumRequestsWaiting int     // vllm:num_requests_waiting (preempted included)
	NumRequestsRunning int     // vllm:num_requests_running
	KVCacheUsagePerc   float64 // vllm:kv_cache_usage_perc
	BlockSize          int     // vllm:cache_config_info{block_size}
	NumGPUBlocks       int     // vllm:cache_config_info{num_gpu_blocks}
	PrefixCacheQueries int64   // vllm:prefix_cache_queries_total
	PrefixCacheHits    int64   // vllm:prefix_cache_hits_total
	// With a CPU tier (pd-offload.md B.9):
	ExternalPrefixCacheQueries int64   // vllm:external_prefix_cache_queries_total
	ExternalPrefixCacheHits    int64   // vllm:external_prefix_cache_hits_total
	KVOffloadCPUUsagePerc      float64 // vllm:kv_offload_cpu_cache_usage_perc: pinned chunks, not residency
	// CPUCacheCapacityTokens is the CPU tier's capacity in tokens, the
	// gauge vLLM PR #51615 (open) proposes as
	// vllm:kv_offload_cpu_capacity_tokens; vLLM 2f41c894 exports no CPU
	// capacity (B.9). 0 without offloading.
	CPUCacheCapacityTokens int
}

// StepOutput reports what happened at the end of a step. The slices are
// reused by the next step.
type StepOutput struct {
	// FirstTokens are requests that produced their first token this step.
	FirstTokens []*Request
	// Finished are requests that completed this step (blocks released,
	// or held for the decode engine when the request is a prefill leg).
	Finished []*Request
	// Pulled are decode legs whose read from the prefill engine this
	// step's end reported complete (pd-offload.md A.4 step 11); the decode
	// side notifies the prefill engine then.
	Pulled []*Request
}

type scheduled struct {
	req   *Request
	entry BatchEntry
}

// Engine is one vLLM v1 engine core: block pool, KV manager and scheduler.
// The simulator drives it: Add on arrival, BeginStep to schedule a step
// (returning its duration), EndStep when the step's time has elapsed.
type Engine struct {
	cfg    Config
	pool   *BlockPool
	hasher *BlockHasher
	model  StepModel
	events EventLog

	waiting deque
	// staged are requests added while a step was in flight with async
	// scheduling: the next step was already scheduled, so they join the
	// waiting queue only after it begins.
	staged []*Request
	// With a CPU tier (nil without): skipped is vLLM's skipped_waiting
	// (requests loading from the CPU tier, loaded ones not yet scheduled,
	// and those whose lookup must be retried), served before waiting
	// (pd-offload.md B.6); stepSkipped is this step's share of it.
	cpu *cpuTier
	// With P/D (nil without): the decode side's reads from prefill
	// engines, which also wait in skipped (A.4), and the finished prefill
	// legs whose blocks are held for a read (A.5).
	pd          *nixl
	held        map[*Request]struct{}
	skipped     deque
	stepSkipped []*Request
	running     []*Request
	batch       []scheduled
	entries     []BatchEntry
	inStep      bool
	out         StepOutput
	stats       Stats
	scratch     []uint32
	hits        []int32
	maxLen      int
	// maxLenWhy says which limit maxLen is, for the rejection message.
	maxLenWhy string
	// compiler is the model's first-use compiles (nil: it has none);
	// compiled has bit c set once the engine has compiled fused-MoE
	// kernel class c (moejit.go; classes are below 64).
	compiler kernelCompiler
	compiled uint64
}

// NewEngine returns an idle engine. model gives step durations.
func NewEngine(cfg Config, model StepModel) (*Engine, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("replica config: %w", err)
	}
	if model == nil {
		return nil, fmt.Errorf("replica config: no step-time model")
	}
	e := &Engine{cfg: cfg, model: model, hasher: NewBlockHasher(cfg.BlockSize, cfg.HashSeed)}
	if k, ok := model.(kernelCompiler); ok && k.compilesKernels() {
		e.compiler = k
	}
	e.events.enabled = cfg.KVEvents
	e.pool = NewBlockPool(cfg.NumGPUBlocks, &e.events)
	if cfg.Offload != nil {
		e.cpu = newCPUTier(*cfg.Offload, &e.events, &e.stats)
	}
	if cfg.KVTransfer != nil {
		e.pd = newNIXL(*cfg.KVTransfer)
	}
	// vLLM refuses to start when max_model_len exceeds the KV capacity; a
	// sequence longer than the capacity could never be scheduled.
	e.maxLen = (cfg.NumGPUBlocks - 1) * cfg.BlockSize
	e.maxLenWhy = fmt.Sprintf("the KV cache: num_gpu_blocks %d less vLLM's null block, of block_size %d tokens", cfg.NumGPUBlocks, cfg.BlockSize)
	if cfg.MaxModelLen > 0 && cfg.MaxModelLen < e.maxLen {
		e.maxLen, e.maxLenWhy = cfg.MaxModelLen, "max_model_len"
	}
	return e, nil
}

// Config returns the engine's configuration.
func (e *Engine) Config() Config { return e.cfg }

// Pool exposes the block pool (read-only use: tests, oracle lookups).
func (e *Engine) Pool() *BlockPool { return e.pool }

// Subscribe registers a KV event subscriber (cfg.KVEvents must be on).
func (e *Engine) Subscribe(s Subscriber) { e.events.Subscribe(s) }

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats { return e.stats }

// Gauges returns the current scrape values (A.8).
func (e *Engine) Gauges() Gauges {
	g := Gauges{
		// Requests loading from the CPU tier count as waiting
		// (len(waiting) + len(skipped_waiting), pd-offload.md A.10).
		NumRequestsWaiting: e.waiting.len() + len(e.staged) + e.skipped.len(),
		NumRequestsRunning: len(e.running),
		KVCacheUsagePerc:   e.pool.Usage(),
		BlockSize:          e.cfg.BlockSize,
		NumGPUBlocks:       e.cfg.NumGPUBlocks,
		PrefixCacheQueries: e.stats.PrefixQueries,
		PrefixCacheHits:    e.stats.PrefixHits,
	}
	if e.cpu != nil {
		g.ExternalPrefixCacheQueries, g.ExternalPrefixCacheHits = e.stats.ExternalQueries, e.stats.ExternalHits
		g.KVOffloadCPUUsagePerc = e.cpu.usage()
		g.CPUCacheCapacityTokens = e.cfg.Offload.CPUBlocks * e.cfg.BlockSize
	}
	return g
}

// Busy reports whether the engine has requests to run.
func (e *Engine) Busy() bool {
	return len(e.running) > 0 || e.waiting.len() > 0 || len(e.staged) > 0 || e.skipped.len() > 0
}

// InStep reports whether a step is in flight (BeginStep without EndStep).
func (e *Engine) InStep() bool { return e.inStep }

// MaxSequenceLen is the longest prompt+output the engine accepts.
func (e *Engine) MaxSequenceLen() int { return e.maxLen }

// Add queues a request that has arrived at the engine (FCFS waiting queue).
// A request whose prompt plus output exceeds MaxSequenceLen is rejected, as
// vLLM rejects it at input validation.
func (e *Engine) Add(r *Request, now int64) error {
	if len(r.Prompt) == 0 {
		return fmt.Errorf("request %d: empty prompt", r.ID)
	}
	if r.OutputLen < 1 {
		return fmt.Errorf("request %d: output length %d, want at least 1", r.ID, r.OutputLen)
	}
	if n := len(r.Prompt) + r.OutputLen; n > e.maxLen {
		return fmt.Errorf("request %d: %d prompt + %d output tokens exceed the engine's maximum sequence length %d (%s)", r.ID, len(r.Prompt), r.OutputLen, e.maxLen, e.maxLenWhy)
	}
	if r.Remote != nil && e.pd == nil {
		return fmt.Errorf("request %d: a P/D decode leg needs an engine with a KV transfer configuration", r.ID)
	}
	r.Arrived, r.FirstScheduled, r.FirstToken, r.Completed = now, -1, -1, -1
	r.PullStart, r.PullEnd = -1, -1
	r.status = Waiting
	// Alias the caller's chain; clipped so that extending it with output
	// blocks reallocates instead of writing into the caller's array.
	r.hashes = slices.Clip(r.PromptHashes)
	if e.cfg.AsyncScheduling && e.inStep {
		e.staged = append(e.staged, r)
		return nil
	}
	e.waiting.pushBack(r)
	return nil
}

// CachedPrefixTokens returns how many tokens of prompt this engine would
// reuse if the request were scheduled now: the longest cached block chain,
// capped at len(prompt)-1 (A.2), continued by the CPU tier if there is one
// (CachedPrefix). It does not change any state. hashes are the prompt's
// full-block chain from ChainHashes; only len(prompt) is read of prompt,
// and cacheSalt not at all, because the chain's first hash carries the
// salt (the form is the one every engine of a simulated fleet answers,
// sim's engine interface).
func (e *Engine) CachedPrefixTokens(prompt []uint32, cacheSalt string, hashes []uint64) int {
	gpu, cpu := e.CachedPrefix(hashes, len(prompt))
	return gpu + cpu
}

// Evictions counts the cached blocks the prefix cache dropped on reuse
// (BlockPool.Evictions).
func (e *Engine) Evictions() int64 { return e.pool.Evictions() }

// CachedPrefix splits CachedPrefixTokens by tier: the GPU prefix cache's
// hit (A.2), and the tokens beyond it the CPU tier holds (B.6: whole
// blocks up to the prompt's last full one; a whole-prompt hit still
// recomputes the last token). A chunk still being stored counts as held.
func (e *Engine) CachedPrefix(hashes []uint64, promptLen int) (gpu, cpu int) {
	bs := e.cfg.BlockSize
	if !e.cfg.DisablePrefixCaching {
		maxBlocks := min((promptLen-1)/bs, len(hashes))
		n := 0
		for n < maxBlocks {
			if _, ok := e.pool.Lookup(hashes[n]); !ok {
				break
			}
			n++
		}
		gpu = n * bs
	}
	if e.cpu == nil {
		return gpu, 0
	}
	full := min(promptLen/bs, len(hashes))
	if full*bs-gpu < bs {
		return gpu, 0
	}
	total := gpu + e.cpu.run(hashes[gpu/bs:full])*bs
	if total == promptLen {
		total--
	}
	return gpu, max(total-gpu, 0)
}

// ChainHashes returns the engine-block hash chain of a token sequence (full
// blocks only), as this engine computes it.
func (e *Engine) ChainHashes(tokens []uint32, cacheSalt string) []uint64 {
	return e.hasher.Chain(nil, e.hasher.Root(cacheSalt), tokens)
}

// ChainHashIDs is ChainHashes for a prompt synthesized from trace block ids
// (BlockHasher.ChainIDs): ids cover idBlockSize tokens each, a multiple of
// the engine block size. It returns ok false, and no hashes, when the
// prompt does not fit that contract; the caller then uses ChainHashes.
func (e *Engine) ChainHashIDs(tokens []uint32, ids []int64, idBlockSize int, cacheSalt string) (hashes []uint64, ok bool) {
	return e.hasher.PromptChainIDs(tokens, ids, idBlockSize, cacheSalt)
}

// ensureHashes extends r's hash chain to cover n full blocks (A.1: only
// full blocks are hashed; generated tokens extend the chain as they come).
func (e *Engine) ensureHashes(r *Request, n int) {
	bs := e.cfg.BlockSize
	if n > cap(r.hashes) {
		// Grow once to the whole sequence's blocks rather than by doubling
		// as output blocks fill.
		r.hashes = slices.Grow(r.hashes, max(n, r.maxBlocks(bs))-len(r.hashes))
	}
	for i := len(r.hashes); i < n; i++ {
		var parent uint64
		if i > 0 {
			parent = r.hashes[i-1]
		} else {
			parent = e.hasher.Root(r.CacheSalt)
		}
		r.hashes = append(r.hashes, e.hasher.Next(parent, r.blockTokens(i, bs, &e.scratch)))
	}
}

// computedBlocks is get_computed_blocks (A.2): the longest run of cached
// blocks from the start of the request, stopping at the first miss and
// capped at num_tokens-1 tokens, block-aligned.
func (e *Engine) computedBlocks(r *Request) []int32 {
	e.hits = e.hits[:0]
	if e.cfg.DisablePrefixCaching {
		return e.hits
	}
	maxBlocks := (r.NumTokens() - 1) / e.cfg.BlockSize
	e.ensureHashes(r, maxBlocks)
	for i := range maxBlocks {
		b, ok := e.pool.Lookup(r.hashes[i])
		if !ok {
			break
		}
		e.hits = append(e.hits, b)
	}
	return e.hits
}

// allocateSlots is allocate_slots (A.3): room for numNew more tokens after
// the hit blocks. It fails, changing nothing, when the free queue cannot
// supply the new blocks plus the evictable hit blocks it must take.
func (e *Engine) allocateSlots(r *Request, numNew int, hits []int32) bool {
	return e.allocate(r, numNew, hits, true)
}

// allocate is allocateSlots; with cache false the new full blocks are not
// registered (delay_cache_blocks: blocks a CPU load will fill, B.6).
func (e *Engine) allocate(r *Request, numNew int, hits []int32, cache bool) bool {
	bs := e.cfg.BlockSize
	computed := r.numComputed + len(hits)*bs
	need := (computed+numNew+bs-1)/bs - len(r.blocks) - len(hits)
	need = max(need, 0)
	evictable := 0
	for _, b := range hits {
		if e.pool.RefCnt(b) == 0 {
			evictable++
		}
	}
	if need+evictable > e.pool.NumFree() {
		return false
	}
	if grow := len(hits) + need; len(r.blocks)+grow > cap(r.blocks) {
		// Size the block table for the whole sequence at once (at most one
		// block past its full blocks) rather than by doubling.
		r.blocks = slices.Grow(r.blocks, max(grow, r.maxBlocks(bs)+1-len(r.blocks)))
	}
	if len(hits) > 0 {
		e.pool.Touch(hits)
		r.blocks = append(r.blocks, hits...)
		r.numCachedBlocks = len(r.blocks)
	}
	if need > 0 {
		r.blocks = e.pool.GetNewBlocks(need, r.blocks)
	}
	if cache && !e.cfg.DisablePrefixCaching {
		e.cacheFullBlocks(r, min(computed+numNew, r.NumTokens()))
	}
	return true
}

// cacheFullBlocks registers the blocks that become full once numTokens
// tokens are computed, at scheduling time (A.3 step 5), and queues one
// BlockStored event for them (A.7).
func (e *Engine) cacheFullBlocks(r *Request, numTokens int) {
	bs := e.cfg.BlockSize
	full := numTokens / bs
	first := r.numCachedBlocks
	if full <= first {
		return
	}
	e.ensureHashes(r, full)
	e.pool.Prefetch(r.hashes[first:full])
	for i := first; i < full; i++ {
		e.pool.CacheBlock(r.blocks[i], r.hashes[i])
	}
	if e.events.enabled {
		var parent uint64
		if first > 0 {
			parent = r.hashes[first-1]
		}
		var toks []uint32
		var origin *Request
		if full*bs <= len(r.Prompt) {
			toks, origin = r.Prompt[first*bs:full*bs], r
		} else {
			toks = make([]uint32, 0, (full-first)*bs)
			for j := first * bs; j < full*bs; j++ {
				toks = append(toks, r.token(j))
			}
		}
		var extra [][]string
		if first == 0 && r.CacheSalt != "" {
			extra = make([][]string, full)
			extra[0] = []string{r.CacheSalt}
		}
		e.events.Stored(slices.Clone(r.hashes[first:full]), parent, first > 0, toks, bs, extra, origin, first*bs)
	}
	r.numCachedBlocks = full
}

// freeBlocks releases a request's blocks in reverse order so that its tail
// blocks are evicted first (A.4).
func (e *Engine) freeBlocks(r *Request) {
	slices.Reverse(r.blocks)
	e.pool.Free(r.blocks)
	r.blocks = r.blocks[:0]
	r.numCachedBlocks = 0
}

// preempt is recompute preemption (A.5): free all blocks (they stay cached
// as evictable), reset progress, and put the request at the front of the
// waiting queue.
func (e *Engine) preempt(r *Request, now int64) {
	e.freeBlocks(r)
	r.numComputed = 0
	r.status = Preempted
	r.Preemptions = append(r.Preemptions, now)
	e.stats.Preemptions++
	e.waiting.pushFront(r)
}

// BeginStep schedules one engine step at time now (Scheduler.schedule, A.5 /
// A.10) and returns its duration. ok is false when nothing could be
// scheduled; the engine then waits for an arrival or stays idle.
//
// With async scheduling (Config.AsyncScheduling) vLLM schedules each step
// while the previous one runs, so a request that arrived during step k was
// not there when step k+1 was scheduled: requests added during a step
// (staged) join the waiting queue only once the next step has begun, and
// run in the step after it. When that next step has nothing to run the
// engine is idle, and they are scheduled at once.
//
// With a CPU tier the same holds for the transfers the previous step saw
// complete (update_connector_output runs after the next schedule() with
// async scheduling, before it without): stores become loadable and loaded
// requests promotable only for the step after this one. Reads of P/D
// decode legs from their prefill engines likewise (pd-offload.md A.4 step
// 11).
func (e *Engine) BeginStep(now int64) (dur int64, ok bool) {
	late := false
	if !e.cfg.AsyncScheduling {
		e.applyTransfers()
	}
	dur, ok = e.beginStep(now)
	if e.cfg.AsyncScheduling && e.applyTransfers() {
		e.publish(now)
		late = true
	}
	if len(e.staged) == 0 && !late {
		return dur, ok
	}
	for _, r := range e.staged {
		e.waiting.pushBack(r)
	}
	clear(e.staged)
	e.staged = e.staged[:0]
	if ok {
		return dur, ok
	}
	return e.beginStep(now)
}

func (e *Engine) beginStep(now int64) (dur int64, ok bool) {
	if e.inStep {
		panic("replica: BeginStep while a step is in flight")
	}
	bs := e.cfg.BlockSize
	budget := e.cfg.MaxNumBatchedTokens
	thr := e.cfg.LongPrefillTokenThreshold
	e.batch = e.batch[:0]
	preempted := false

	// 1. Running requests first, in admission order.
	for i := 0; i < len(e.running) && budget > 0; {
		r := e.running[i]
		n := r.NumTokens() - r.numComputed
		if thr > 0 {
			n = min(n, thr)
		}
		n = min(n, budget, e.maxLen-1-r.numComputed)
		if n <= 0 {
			i++
			continue
		}
		scheduledSelf := true
		for !e.allocateSlots(r, n, nil) {
			// Preempt the last running request (FCFS policy) and retry.
			v := e.running[len(e.running)-1]
			e.running = e.running[:len(e.running)-1]
			e.preempt(v, now)
			preempted = true
			if v == r {
				scheduledSelf = false
				break
			}
		}
		if !scheduledSelf {
			break
		}
		e.batch = append(e.batch, scheduled{r, BatchEntry{NewTokens: n, Context: r.numComputed, Decode: r.decoding(n)}})
		budget -= n
		i++
	}

	// 2. Waiting requests, FCFS, only if nothing was preempted this step.
	// With a CPU tier, skipped_waiting comes first (pd-offload.md B.6):
	// requests whose load has completed are promoted and scheduled like
	// the others; those still loading, and those whose CPU lookup must
	// wait, are skipped without blocking the queue.
	if !preempted {
		e.stepSkipped = e.stepSkipped[:0]
		for (e.waiting.len() > 0 || e.skipped.len() > 0) && budget > 0 && len(e.running) < e.cfg.MaxNumSeqs {
			q := &e.waiting
			if e.skipped.len() > 0 {
				q = &e.skipped
			}
			r := q.front()
			if r.status == WaitingForRemoteKVs {
				if !r.loadReady {
					e.stepSkipped = append(e.stepSkipped, q.popFront())
					continue
				}
				if r.aborted {
					// Aborted while its KV arrived: the blocks are free now.
					q.popFront()
					r.status = Finished
					e.freeBlocks(r)
					continue
				}
				e.promote(r)
			}
			// A request with computed tokens was promoted from a load: no
			// lookup, and its admission was recorded then.
			lookup := r.numComputed == 0
			var hits []int32
			numHit := r.numComputed
			if lookup {
				hits = e.computedBlocks(r)
				numHit = len(hits) * bs
				if r.Remote != nil && r.PullStart < 0 {
					// A P/D decode leg: the NIXL connector claims
					// everything beyond the local hit (A.4 steps 8–9),
					// before any CPU tier (B.7).
					if !e.startPull(r, hits, now) {
						break // head-of-line blocking
					}
					q.popFront()
					e.stepSkipped = append(e.stepSkipped, r)
					continue
				}
				if e.cpu != nil {
					k, ok := e.offloadLookup(r, numHit)
					if !ok {
						e.stepSkipped = append(e.stepSkipped, q.popFront())
						continue
					}
					if k > 0 {
						// An asynchronous load: blocks for the loaded
						// tokens, none scheduled, not running (B.6).
						if !e.allocate(r, k, hits, false) {
							break // head-of-line blocking
						}
						q.popFront()
						e.recordAdmission(r, numHit, k)
						e.offloadLoad(r, numHit, k, now)
						e.stepSkipped = append(e.stepSkipped, r)
						continue
					}
				}
			}
			n := r.NumTokens() - numHit
			if thr > 0 {
				n = min(n, thr)
			}
			n = min(n, budget)
			if !e.allocateSlots(r, n, hits) {
				break // head-of-line blocking
			}
			q.popFront()
			r.numComputed = numHit
			if !r.scheduledOnce {
				r.scheduledOnce = true
				r.FirstScheduled = now
				r.NumCachedTokens = numHit
				r.NumCPUCachedTokens = r.loadTokens
			}
			r.loadTokens = 0
			if lookup {
				e.recordAdmission(r, numHit, 0)
			}
			r.status = Running
			e.running = append(e.running, r)
			e.batch = append(e.batch, scheduled{r, BatchEntry{NewTokens: n, Context: numHit}})
			budget -= n
		}
		if len(e.stepSkipped) > 0 {
			// Back at the head of skipped_waiting, in the order met.
			for i := len(e.stepSkipped) - 1; i >= 0; i-- {
				e.skipped.pushFront(e.stepSkipped[i])
			}
			clear(e.stepSkipped)
		}
	}
	if e.cpu != nil {
		e.offloadStores()
	}

	// Events queued during scheduling (evictions, stores) form this step's
	// batch, published now: vLLM takes them after schedule().
	e.publish(now)
	if len(e.batch) == 0 {
		if e.cpu != nil {
			// No step runs: the jobs start now (C.5, idle steps folded).
			e.cpu.submit(now)
		}
		e.checkInvariants()
		return 0, false
	}
	// _update_after_schedule: progress advances at scheduling time.
	e.entries = e.entries[:0]
	tokens := 0
	for i := range e.batch {
		s := &e.batch[i]
		s.req.numComputed += s.entry.NewTokens
		tokens += s.entry.NewTokens
		e.entries = append(e.entries, s.entry)
	}
	e.stats.ComputedTokens += int64(tokens)
	e.inStep = true
	e.stats.Steps++
	dur = max(e.model.StepTime(e.entries), 1)
	if e.compiler != nil {
		dur += e.compileFirstUse(tokens)
	}
	return dur, true
}

// compileFirstUse returns the host time the fused-MoE kernel class of a
// step of tokens tokens costs to compile when this engine has not run
// that class before (moejit.go), and counts the compile.
func (e *Engine) compileFirstUse(tokens int) int64 {
	c, stall, ok := e.compiler.compileClass(tokens)
	if !ok || e.compiled&(1<<c) != 0 {
		return 0
	}
	e.compiled |= 1 << c
	e.stats.KernelCompiles++
	return stall
}

// decoding reports whether scheduling n tokens is a generation step.
func (r *Request) decoding(n int) bool {
	return n == 1 && len(r.generated) > 0 && r.numComputed == r.NumTokens()-1
}

// EndStep applies the step's outputs at time now: every request that has
// caught up with its tokens samples one; a request that has generated its
// output length finishes and releases its blocks.
func (e *Engine) EndStep(now int64) *StepOutput {
	if !e.inStep {
		panic("replica: EndStep without BeginStep")
	}
	e.inStep = false
	if e.cpu != nil {
		// get_finished at the end of the step, then the stores built when
		// it was scheduled start (B.4).
		e.cpu.collect(now)
		e.cpu.submit(now)
	}
	e.out.FirstTokens = e.out.FirstTokens[:0]
	e.out.Finished = e.out.Finished[:0]
	e.out.Pulled = e.out.Pulled[:0]
	if e.pd != nil {
		e.out.Pulled = e.pd.collect(now, e.out.Pulled)
	}
	finished, aborted := false, false
	for i := range e.batch {
		r := e.batch[i].req
		if r.aborted {
			aborted = true
			continue
		}
		if r.numComputed < r.NumTokens() {
			continue // a prefill chunk: no token yet
		}
		if r.generated == nil {
			r.generated = make([]uint32, 0, r.OutputLen)
		}
		r.generated = append(r.generated, r.nextOutputToken(len(r.generated)))
		if r.FirstToken < 0 {
			r.FirstToken = now
			e.out.FirstTokens = append(e.out.FirstTokens, r)
		}
		if len(r.generated) >= r.OutputLen {
			r.status = Finished
			r.Completed = now
			finished = true
			e.out.Finished = append(e.out.Finished, r)
		}
	}
	if aborted {
		// Requests aborted during the step leave it without output.
		e.running = slices.DeleteFunc(e.running, func(r *Request) bool {
			if !r.aborted {
				return false
			}
			r.status = Finished
			e.freeBlocks(r)
			return true
		})
	}
	if finished {
		e.running = slices.DeleteFunc(e.running, func(r *Request) bool { return r.status == Finished })
		for _, r := range e.out.Finished {
			if r.HoldBlocks {
				// A prefill leg: its blocks stay pinned for the decode
				// engine's read (delay_free_blocks, A.5) until Release.
				if e.held == nil {
					e.held = map[*Request]struct{}{}
				}
				e.held[r] = struct{}{}
			} else {
				e.freeBlocks(r)
			}
			e.stats.Completed++
			if e.cpu != nil && min(r.numComputed, len(r.Prompt))/e.cfg.BlockSize > r.offStored {
				e.cpu.retry = append(e.cpu.retry, r) // one last try (B.4)
			}
		}
	}
	e.checkInvariants()
	return &e.out
}

// ResetPrefixCache clears the prefix cache when no block is in use
// (reset_prefix_cache, A.4) and reports whether it did.
func (e *Engine) ResetPrefixCache(now int64) bool {
	if !e.pool.Reset() {
		return false
	}
	e.publish(now)
	return true
}

// publish delivers the queued KV events as one batch.
func (e *Engine) publish(now int64) { e.events.Publish(now) }

func (e *Engine) checkInvariants() {
	if !e.cfg.CheckInvariants {
		return
	}
	if err := e.CheckInvariants(); err != nil {
		panic(err)
	}
}

// CheckInvariants verifies block conservation, ref counts, the hash map, and
// that every request is in exactly one place (A.10 invariants).
func (e *Engine) CheckInvariants() error {
	if err := e.pool.checkInvariants(); err != nil {
		return fmt.Errorf("replica invariant: %w", err)
	}
	seen := map[*Request]bool{}
	held := map[int32]int32{}
	for _, r := range e.running {
		if seen[r] {
			return fmt.Errorf("replica invariant: request %d listed twice", r.ID)
		}
		seen[r] = true
		if r.status != Running {
			return fmt.Errorf("replica invariant: running request %d has status %d", r.ID, r.status)
		}
		for _, b := range r.blocks {
			held[b]++
		}
		if need := (r.numComputed + e.cfg.BlockSize - 1) / e.cfg.BlockSize; len(r.blocks) < need {
			return fmt.Errorf("replica invariant: request %d computed %d tokens in %d blocks", r.ID, r.numComputed, len(r.blocks))
		}
	}
	for _, r := range e.staged {
		if seen[r] {
			return fmt.Errorf("replica invariant: request %d staged twice or also running", r.ID)
		}
		seen[r] = true
		if r.status != Waiting || len(r.blocks) > 0 {
			return fmt.Errorf("replica invariant: staged request %d has status %d and %d blocks", r.ID, r.status, len(r.blocks))
		}
	}
	for i := range e.waiting.len() {
		r := e.waiting.at(i)
		if seen[r] {
			return fmt.Errorf("replica invariant: request %d both running and waiting", r.ID)
		}
		seen[r] = true
		if len(r.blocks) != 0 || r.numComputed != 0 {
			return fmt.Errorf("replica invariant: waiting request %d holds %d blocks", r.ID, len(r.blocks))
		}
	}
	for i := range e.skipped.len() {
		r := e.skipped.at(i)
		if seen[r] {
			return fmt.Errorf("replica invariant: request %d skipped twice or also elsewhere", r.ID)
		}
		seen[r] = true
		switch {
		case r.status == WaitingForRemoteKVs && r.numComputed == 0 && len(r.blocks) > 0:
		case r.status == Waiting || r.status == Preempted:
			if need := (r.numComputed + e.cfg.BlockSize - 1) / e.cfg.BlockSize; len(r.blocks) < need || (r.numComputed == 0 && len(r.blocks) > 0) {
				return fmt.Errorf("replica invariant: skipped request %d computed %d tokens in %d blocks", r.ID, r.numComputed, len(r.blocks))
			}
		default:
			return fmt.Errorf("replica invariant: skipped request %d has status %d, %d computed tokens and %d blocks", r.ID, r.status, r.numComputed, len(r.blocks))
		}
		for _, b := range r.blocks {
			held[b]++
		}
	}
	for r := range e.held {
		if seen[r] {
			return fmt.Errorf("replica invariant: held request %d also queued or running", r.ID)
		}
		seen[r] = true
		if r.status != Finished || !r.HoldBlocks {
			return fmt.Errorf("replica invariant: held request %d has status %d", r.ID, r.status)
		}
		for _, b := range r.blocks {
			held[b]++
		}
	}
	if e.cpu != nil {
		if err := e.cpu.check(); err != nil {
			return fmt.Errorf("replica invariant: cpu tier: %w", err)
		}
	}
	for b, n := range held {
		if got := e.pool.RefCnt(b); got != n {
			return fmt.Errorf("replica invariant: block %d has refCnt %d, held by %d requests", b, got, n)
		}
	}
	return nil
}

// deque is the waiting queue: FCFS with push-front for preempted requests.
type deque struct {
	buf        []*Request
	head, size int
}

func (d *deque) len() int { return d.size }

func (d *deque) grow() {
	n := max(2*len(d.buf), 16)
	nb := make([]*Request, n)
	for i := range d.size {
		nb[i] = d.buf[(d.head+i)%len(d.buf)]
	}
	d.buf, d.head = nb, 0
}

func (d *deque) pushBack(r *Request) {
	if d.size == len(d.buf) {
		d.grow()
	}
	d.buf[(d.head+d.size)%len(d.buf)] = r
	d.size++
}

func (d *deque) pushFront(r *Request) {
	if d.size == len(d.buf) {
		d.grow()
	}
	d.head = (d.head - 1 + len(d.buf)) % len(d.buf)
	d.buf[d.head] = r
	d.size++
}

func (d *deque) front() *Request { return d.buf[d.head] }

func (d *deque) at(i int) *Request { return d.buf[(d.head+i)%len(d.buf)] }

func (d *deque) popFront() *Request {
	r := d.buf[d.head]
	d.buf[d.head] = nil
	d.head = (d.head + 1) % len(d.buf)
	d.size--
	return r
}

// remove takes r out of the deque, keeping the others' order, and reports
// whether it was there.
func (d *deque) remove(r *Request) bool {
	for i := range d.size {
		if d.at(i) != r {
			continue
		}
		for j := i; j < d.size-1; j++ {
			d.buf[(d.head+j)%len(d.buf)] = d.buf[(d.head+j+1)%len(d.buf)]
		}
		d.buf[(d.head+d.size-1)%len(d.buf)] = nil
		d.size--
		return true
	}
	return false
}

// Abort ends a request its client abandoned (vLLM's abort_request; the
// EPP's in-flight eviction resets the request's connection,
// flow-control.md §12). A waiting or preempted request leaves its queue; a
// running one frees its blocks now, or at the end of the step in flight,
// since vLLM applies aborts between steps; one whose KV is still arriving
// (a CPU tier load or a P/D read, WAITING_FOR_REMOTE_KVS) frees its blocks
// once the transfer has completed, as vLLM defers freeing blocks a
// transfer writes into. The request produces no further output; a
// finished one is left alone (a held prefill leg is freed by Release).
func (e *Engine) Abort(r *Request) {
	if r.status == Finished || r.aborted {
		return
	}
	r.aborted = true
	switch r.status {
	case Waiting, Preempted:
		if e.waiting.remove(r) || e.skipped.remove(r) {
			r.status = Finished
			e.freeBlocks(r)
			return
		}
		if i := slices.Index(e.staged, r); i >= 0 {
			e.staged = slices.Delete(e.staged, i, i+1)
			r.status = Finished
		}
	case Running:
		if e.inStep {
			return // EndStep drops it
		}
		e.running = slices.DeleteFunc(e.running, func(x *Request) bool { return x == r })
		r.status = Finished
		e.freeBlocks(r)
	}
	e.checkInvariants()
}
