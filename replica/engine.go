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
	// Tokens computed by the engine (prefill + recompute + decode).
	ComputedTokens int64
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
}

// StepOutput reports what happened at the end of a step. The slices are
// reused by the next step.
type StepOutput struct {
	// FirstTokens are requests that produced their first token this step.
	FirstTokens []*Request
	// Finished are requests that completed this step (blocks released).
	Finished []*Request
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
	events eventLog
	subs   []Subscriber

	waiting deque
	// staged are requests added while a step was in flight with async
	// scheduling: the next step was already scheduled, so they join the
	// waiting queue only after it begins.
	staged  []*Request
	running []*Request
	batch   []scheduled
	entries []BatchEntry
	inStep  bool
	out     StepOutput
	stats   Stats
	scratch []uint32
	hits    []int32
	maxLen  int
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
	e.events.enabled = cfg.KVEvents
	e.pool = NewBlockPool(cfg.NumGPUBlocks, &e.events)
	// vLLM refuses to start when max_model_len exceeds the KV capacity; a
	// sequence longer than the capacity could never be scheduled.
	e.maxLen = (cfg.NumGPUBlocks - 1) * cfg.BlockSize
	if cfg.MaxModelLen > 0 && cfg.MaxModelLen < e.maxLen {
		e.maxLen = cfg.MaxModelLen
	}
	return e, nil
}

// Config returns the engine's configuration.
func (e *Engine) Config() Config { return e.cfg }

// Pool exposes the block pool (read-only use: tests, oracle lookups).
func (e *Engine) Pool() *BlockPool { return e.pool }

// Subscribe registers a KV event subscriber (cfg.KVEvents must be on).
func (e *Engine) Subscribe(s Subscriber) { e.subs = append(e.subs, s) }

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats { return e.stats }

// Gauges returns the current scrape values (A.8).
func (e *Engine) Gauges() Gauges {
	return Gauges{
		NumRequestsWaiting: e.waiting.len() + len(e.staged),
		NumRequestsRunning: len(e.running),
		KVCacheUsagePerc:   e.pool.Usage(),
		BlockSize:          e.cfg.BlockSize,
		NumGPUBlocks:       e.cfg.NumGPUBlocks,
		PrefixCacheQueries: e.stats.PrefixQueries,
		PrefixCacheHits:    e.stats.PrefixHits,
	}
}

// Busy reports whether the engine has requests to run.
func (e *Engine) Busy() bool { return len(e.running) > 0 || e.waiting.len() > 0 || len(e.staged) > 0 }

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
		return fmt.Errorf("request %d: %d prompt + %d output tokens exceed the engine's maximum sequence length %d", r.ID, len(r.Prompt), r.OutputLen, e.maxLen)
	}
	r.Arrived, r.FirstScheduled, r.FirstToken, r.Completed = now, -1, -1, -1
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
// capped at len(prompt)-1 (A.2). It does not change any state. hashes are
// the prompt's full-block chain from ChainHashes.
func (e *Engine) CachedPrefixTokens(hashes []uint64, promptLen int) int {
	if e.cfg.DisablePrefixCaching {
		return 0
	}
	maxBlocks := min((promptLen-1)/e.cfg.BlockSize, len(hashes))
	n := 0
	for n < maxBlocks {
		if _, ok := e.pool.Lookup(hashes[n]); !ok {
			break
		}
		n++
	}
	return n * e.cfg.BlockSize
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
	if !e.cfg.DisablePrefixCaching {
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
		if full*bs <= len(r.Prompt) {
			toks = r.Prompt[first*bs : full*bs]
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
		e.events.stored(slices.Clone(r.hashes[first:full]), parent, first > 0, toks, bs, extra)
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
func (e *Engine) BeginStep(now int64) (dur int64, ok bool) {
	dur, ok = e.beginStep(now)
	if len(e.staged) == 0 {
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
	if !preempted {
		for e.waiting.len() > 0 && budget > 0 && len(e.running) < e.cfg.MaxNumSeqs {
			r := e.waiting.front()
			hits := e.computedBlocks(r)
			numHit := len(hits) * bs
			n := r.NumTokens() - numHit
			if thr > 0 {
				n = min(n, thr)
			}
			n = min(n, budget)
			if !e.allocateSlots(r, n, hits) {
				break // head-of-line blocking
			}
			e.waiting.popFront()
			r.numComputed = numHit
			if !r.scheduledOnce {
				r.scheduledOnce = true
				r.FirstScheduled = now
				r.NumCachedTokens = numHit
			}
			// A.6: one record per admission; resumed requests separately.
			if r.status == Preempted {
				e.stats.PreemptedQueries += int64(r.NumTokens())
				e.stats.PreemptedHits += int64(numHit)
			} else {
				e.stats.PrefixQueries += int64(r.NumTokens())
				e.stats.PrefixHits += int64(numHit)
			}
			r.status = Running
			e.running = append(e.running, r)
			e.batch = append(e.batch, scheduled{r, BatchEntry{NewTokens: n, Context: numHit}})
			budget -= n
		}
	}

	// Events queued during scheduling (evictions, stores) form this step's
	// batch, published now: vLLM takes them after schedule().
	if evs := e.events.take(); len(evs) > 0 {
		for _, s := range e.subs {
			s.KVEvents(now, evs)
		}
	}
	if len(e.batch) == 0 {
		e.checkInvariants()
		return 0, false
	}
	// _update_after_schedule: progress advances at scheduling time.
	e.entries = e.entries[:0]
	for i := range e.batch {
		s := &e.batch[i]
		s.req.numComputed += s.entry.NewTokens
		e.stats.ComputedTokens += int64(s.entry.NewTokens)
		e.entries = append(e.entries, s.entry)
	}
	e.inStep = true
	e.stats.Steps++
	dur = max(e.model.StepTime(e.entries), 1)
	return dur, true
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
	e.out.FirstTokens = e.out.FirstTokens[:0]
	e.out.Finished = e.out.Finished[:0]
	finished := false
	for i := range e.batch {
		r := e.batch[i].req
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
	if finished {
		e.running = slices.DeleteFunc(e.running, func(r *Request) bool { return r.status == Finished })
		for _, r := range e.out.Finished {
			e.freeBlocks(r)
			e.stats.Completed++
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
	if evs := e.events.take(); len(evs) > 0 {
		for _, s := range e.subs {
			s.KVEvents(now, evs)
		}
	}
	return true
}

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
