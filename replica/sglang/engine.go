package sglang

import (
	"fmt"
	"math"
	"slices"

	"github.com/eppsim/eppsim/replica"
)

type seqState uint8

const (
	stWaiting seqState = iota
	stRunning
	stChunked
	stDone
)

// seq is the engine's state of one request (SGLang's Req).
type seq struct {
	r *replica.Request
	// fill is fill_ids = origin_input_ids + output_ids; it aliases the
	// prompt until the first output token, then a copy sized for the whole
	// sequence. Positions are never rewritten (tree keys alias them).
	fill   []uint32
	maxNew int // max_new_tokens after the arrival clamp (A.11)
	out    int // output tokens sampled
	// computed is the tokens whose KV is written; prefix the leading,
	// page-aligned part of them the tree owns (cache_protected_len, locked
	// through last); owned the slots the request holds outside the tree.
	computed, prefix, owned int
	last                    *node
	root                    *node
	extend                  int // this step's extend (prefill) length
	state                   seqState
	aborted                 bool
	matched                 int // lpm: tree match
	deprio                  bool
}

// key is the match key: fill_ids minus its last token (A.3 step 1, the N−1
// rule); the tree floors it to the page.
func (s *seq) key() []uint32 { return s.fill[:len(s.fill)-1] }

func (s *seq) sample() {
	if s.out == 0 && len(s.fill) == len(s.r.Prompt) {
		f := make([]uint32, len(s.fill), len(s.r.Prompt)+s.maxNew)
		copy(f, s.fill)
		s.fill = f
	}
	s.fill = append(s.fill, s.r.OutputToken(s.out))
	s.out++
}

type stepKind uint8

const (
	stepNone stepKind = iota
	stepPrefill
	stepDecode
)

// Engine is one SGLang engine (scheduler, radix cache, token pool) driven by
// the simulator like replica.Engine: Add on arrival, BeginStep when idle to
// schedule a step and get its duration, EndStep once it has elapsed.
type Engine struct {
	cfg    Config
	model  replica.StepModel
	pool   tokenPool
	tree   *tree
	events replica.EventLog

	seqs    map[*replica.Request]*seq
	waiting []*seq
	// running is running_batch; finished requests stay in it (their KV
	// released) until the next update_running_batch filters them (A.7).
	running []*seq
	chunked *seq
	// reqSlots counts request-slot pool rows in use (running + chunked).
	reqSlots    int
	numReqs     int
	batchIsFull bool
	ratio       float64
	decodeCt    int64

	kind           stepKind
	batch          []*seq
	mixed          []*seq // running decodes riding along a prefill (EnableMixedChunk)
	entries        []replica.BatchEntry
	prefillRunning int // running_batch size when the prefill batch formed
	inStep         bool
	out            replica.StepOutput

	stats    replica.Stats
	gauges   replica.Gauges
	maxReqLn int
	// lastAdder is the last prefill attempt's budget state (tests).
	lastAdder adder
}

// NewEngine returns an idle engine; model gives step durations. Like
// SGLang's start-up reset it queues one AllBlocksCleared when KV events are
// on (A.2), delivered at the first metric point.
func NewEngine(cfg Config, model replica.StepModel) (*Engine, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("sglang config: %w", err)
	}
	if model == nil {
		return nil, fmt.Errorf("sglang config: no step-time model")
	}
	if cfg.DecodeLogInterval == 0 {
		cfg.DecodeLogInterval = defaultDecodeLogInterval
	}
	if cfg.ContextLen == 0 {
		cfg.ContextLen = cfg.MaxTotalNumTokens
	}
	e := &Engine{cfg: cfg, model: model, pool: newTokenPool(cfg.MaxTotalNumTokens, cfg.PageSize),
		seqs: map[*replica.Request]*seq{}, ratio: cfg.InitNewTokenRatio, numReqs: cfg.MaxNumReqs}
	if e.numReqs == 0 {
		e.numReqs = cfg.MaxRunningRequests
	}
	e.events.SetEnabled(cfg.KVEvents)
	e.events.Cleared()
	e.tree = newTree(cfg.PageSize, cfg.EvictionPolicy, &e.events)
	// A.1 (tp_worker): max_req_len = min(context_len − 1, max_total − 1).
	e.maxReqLn = min(cfg.ContextLen-1, cfg.MaxTotalNumTokens-1)
	return e, nil
}

// Config returns the engine's configuration.
func (e *Engine) Config() Config { return e.cfg }

// Subscribe registers a KV event subscriber (Config.KVEvents must be on).
func (e *Engine) Subscribe(s replica.Subscriber) { e.events.Subscribe(s) }

// Stats returns the engine's counters: PrefixQueries and PrefixHits are
// realtime_tokens prefill_cache + prefill_compute and prefill_cache (A.12),
// counted for every admission and chunk, re-prefills after retraction
// included; Preemptions counts retractions (A.10).
func (e *Engine) Stats() replica.Stats { return e.stats }

// Evictions returns the pages evicted from the radix tree so far (whole
// nodes, A.6; tokens at the default page size 1): a page is SGLang's KV
// block, the unit vLLM's evictions count.
func (e *Engine) Evictions() int64 { return e.tree.evictedTokens / int64(e.cfg.PageSize) }

// Busy reports whether anything is waiting or running.
func (e *Engine) Busy() bool {
	if len(e.waiting) > 0 || e.chunked != nil {
		return true
	}
	for _, s := range e.running {
		if s.state == stRunning {
			return true
		}
	}
	return false
}

// Gauges returns the values a scrape of the pod reads, as of the last
// metric point (A.12: SGLang writes its gauges only after each prefill
// batch, every DecodeLogInterval decode steps and while idle):
//   - NumRequestsWaiting: sglang:num_queue_reqs, len(waiting_queue)
//     (retracted requests included, the in-flight chunked one not);
//   - NumRequestsRunning: sglang:num_running_reqs, the running batch when
//     the prefill batch formed (prefill log) or the decode batch (decode
//     log), 0 at the idle log;
//   - KVCacheUsagePerc: sglang:token_usage, (total − available −
//     evictable)/total rounded to 2 decimals;
//   - PrefixCacheQueries, PrefixCacheHits: the realtime_tokens counters
//     (prefill_cache + prefill_compute, prefill_cache), as of that point;
//   - BlockSize and NumGPUBlocks: 0, because SGLang exports no
//     cache_config_info (A.12 mismatch): the EPP's AutoTune then keeps
//     its configured block size and LRU capacity.
func (e *Engine) Gauges() replica.Gauges { return e.gauges }

// refresh is a metric point: the gauges are written and the queued KV
// events are published (A.12, A.13).
func (e *Engine) refresh(now int64, running int) {
	used := e.cfg.MaxTotalNumTokens - e.pool.available() - e.tree.evictable
	usage := math.Round(float64(used)/float64(e.cfg.MaxTotalNumTokens)*100) / 100
	e.gauges = replica.Gauges{
		NumRequestsWaiting: len(e.waiting),
		NumRequestsRunning: running,
		KVCacheUsagePerc:   usage,
		PrefixCacheQueries: e.stats.PrefixQueries,
		PrefixCacheHits:    e.stats.PrefixHits,
	}
	e.events.Publish(now)
}

// Add queues an arrived request at the tail of the waiting queue (A.9).
// Its max_new_tokens is OutputLen clamped per A.11 (the request finishes at
// the clamped length); a prompt longer than max_req_input_len =
// min(context_len − 1, max_total − 1) − 5 is rejected (a prompt of exactly
// that length is accepted: the boundary was not verified, A.11).
// replica.Request's Status and Aborted are vLLM engine state and are not
// updated by this engine.
func (e *Engine) Add(r *replica.Request, now int64) error {
	if len(r.Prompt) == 0 {
		return fmt.Errorf("request %d: empty prompt", r.ID)
	}
	if r.OutputLen < 1 {
		return fmt.Errorf("request %d: output length %d, want at least 1", r.ID, r.OutputLen)
	}
	if _, dup := e.seqs[r]; dup {
		return fmt.Errorf("request %d: added twice", r.ID)
	}
	n, P := len(r.Prompt), e.cfg.PageSize
	if limit := e.maxReqLn - 5; n > limit {
		return fmt.Errorf("request %d: %d prompt tokens exceed SGLang's max_req_input_len %d (context_len %d, max_total_num_tokens %d)", r.ID, n, limit, e.cfg.ContextLen, e.cfg.MaxTotalNumTokens)
	}
	maxNew := min(r.OutputLen, e.maxReqLn-n-1, e.cfg.MaxTotalNumTokens-e.pool.ceil(n)-P-1)
	if maxNew < 1 {
		return fmt.Errorf("request %d: %d prompt tokens leave no room for output in %d tokens of page %d", r.ID, n, e.cfg.MaxTotalNumTokens, P)
	}
	r.Arrived, r.FirstScheduled, r.FirstToken, r.Completed = now, -1, -1, -1
	r.NumCachedTokens = 0
	s := &seq{r: r, fill: r.Prompt[:n:n], maxNew: maxNew, root: e.tree.rootFor(r.CacheSalt, true)}
	e.seqs[r] = s
	e.waiting = append(e.waiting, s)
	return nil
}

// CachedPrefixTokens is the hit a new request with this prompt and cache
// salt would get now: the match of prompt[:N−1] floored to the page (A.3),
// read only (no LRU refresh, no split). hashes (vLLM block hashes) are
// ignored.
func (e *Engine) CachedPrefixTokens(prompt []uint32, cacheSalt string, hashes []uint64) int {
	if len(prompt) < 2 {
		return 0
	}
	return e.tree.peek(e.tree.rootFor(cacheSalt, false), prompt[:len(prompt)-1])
}

// evictFor makes room for n slots before an allocation (A.6): the newest
// code evicts the shortfall n − available, the mid-2025 code evict(n)
// whenever available < n.
func (e *Engine) evictFor(n int) {
	a := e.pool.available()
	if n <= a {
		return
	}
	want := n - a
	if e.cfg.Mid2025 {
		want = n
	}
	e.pool.release(e.tree.evict(want))
}

func (e *Engine) alloc(s *seq, n int) {
	if !e.pool.alloc(n) {
		panic(fmt.Sprintf("sglang: request %d: %d slots wanted, %d available after eviction", s.r.ID, n, e.pool.available()))
	}
	s.owned += n
}

// cacheUnfinished is cache_unfinished_req (A.5): insert the page-aligned
// computed tokens, free the request's duplicates of what was already in the
// tree, and move its lock to the node the key ends at.
func (e *Engine) cacheUnfinished(s *seq) {
	aligned := e.pool.floor(s.computed)
	existing, n := e.tree.insert(s.root, s.fill[:aligned], s)
	dup := existing - s.prefix
	e.pool.release(dup)
	s.owned -= aligned - s.prefix
	e.tree.lock(n)
	if s.last != nil {
		e.tree.unlock(s.last)
	}
	s.last, s.prefix = n, aligned
}

// release is cache_finished_req (A.5): with insert, the page-aligned
// committed tokens (KV written: prompt + outputs but the last) enter the
// tree, duplicates and the unaligned tail are freed; without (retraction,
// abort) everything the request owns is freed. The lock is released and the
// request's slot row freed.
func (e *Engine) release(s *seq, insert bool) {
	if insert {
		aligned := e.pool.floor(s.computed)
		existing, _ := e.tree.insert(s.root, s.fill[:aligned], s)
		kept := aligned - existing // new tree slots, taken from the request
		e.pool.release(s.owned - kept)
	} else {
		e.pool.release(s.owned)
	}
	if s.last != nil {
		e.tree.unlock(s.last)
	}
	s.last, s.prefix, s.owned = nil, 0, 0
	e.reqSlots--
}

// BeginStep schedules one step at time now (get_next_batch_to_run, A.7,
// A.14) and returns its duration; ok is false when there is nothing to run.
// Overlap scheduling is not modelled: each step's results are applied at its
// EndStep, before the next step is scheduled (--disable-overlap-schedule,
// the spec's conformance setting, D).
func (e *Engine) BeginStep(now int64) (dur int64, ok bool) {
	if e.inStep {
		panic("sglang: BeginStep while a step is in flight")
	}
	// 1. The in-flight chunked request's finished chunks enter the tree
	// (stash_chunked_request, A.5). Step 2 (merging the last prefill
	// batch) happened at its EndStep.
	if c := e.chunked; c != nil && e.pool.floor(c.computed) > c.prefix {
		e.cacheUnfinished(c)
	}
	for attempt := 0; attempt < 2; attempt++ {
		// 3. Prefill has priority.
		if e.prefill(now) {
			return e.launch(), true
		}
		// 4. Otherwise decode the running batch.
		if e.updateRunningBatch(now) {
			e.decode()
			return e.launch(), true
		}
		// No batch: on_idle. The next loop iteration retries at once when
		// filtering the running batch cleared batch_is_full.
		if len(e.waiting) == 0 || e.batchIsFull {
			break
		}
	}
	e.checkInvariants()
	if !e.Busy() {
		// A.8.1: the fully idle loop resets the ratio; A.12: the idle
		// metric point. SGLang writes it every 30 s while idle; nothing it
		// reports changes while the engine stays idle, so one refresh when
		// the engine goes idle stands for all of them.
		e.ratio = e.cfg.InitNewTokenRatio
		e.refresh(now, 0)
	}
	return 0, false
}

func (e *Engine) launch() int64 {
	e.entries = e.entries[:0]
	for _, s := range e.batch {
		// Context is the tokens already in the KV cache before this step
		// (replica.BatchEntry): the prefix and earlier chunks.
		if e.kind == stepDecode {
			e.entries = append(e.entries, replica.BatchEntry{NewTokens: 1, Context: s.computed, Decode: true})
			continue
		}
		e.entries = append(e.entries, replica.BatchEntry{NewTokens: s.extend, Context: s.computed})
	}
	for _, s := range e.mixed {
		e.entries = append(e.entries, replica.BatchEntry{NewTokens: 1, Context: s.computed, Decode: true})
	}
	e.inStep = true
	e.stats.Steps++
	e.checkInvariants()
	return max(e.model.StepTime(e.entries), 1)
}

// adder is the PrefillAdder budget state (A.8).
type adder struct {
	totalOffset, currentOffset float64
	remInput, remChunk         int
	chunking                   bool
	logHit, logInput           int
}

type addResult uint8

const (
	addContinue addResult = iota
	addNoToken
	addOther
)

func (e *Engine) availEvict() float64 { return float64(e.pool.available() + e.tree.evictable) }

// state is budget_state (A.8).
func (e *Engine) state(a *adder) addResult {
	ae := e.availEvict()
	if ae-a.totalOffset <= 0 || ae-a.currentOffset <= 0 {
		return addNoToken
	}
	if a.remInput <= 0 || (a.chunking && a.remChunk <= 0) {
		return addOther
	}
	return addContinue
}

// prefill is _get_new_batch_prefill_raw (A.7, A.8): it forms the step's
// prefill batch, allocates its KV and reports whether there is one.
func (e *Engine) prefill(now int64) bool {
	if (e.batchIsFull || len(e.waiting) == 0) && e.chunked == nil {
		return false
	}
	runningBS := len(e.running)
	numAlloc := min(e.cfg.MaxRunningRequests-runningBS, e.numReqs-e.reqSlots)
	if numAlloc <= 0 && e.chunked == nil {
		e.batchIsFull = true
		return false
	}
	e.calcPriority()
	P := e.cfg.PageSize
	a := adder{remInput: e.cfg.MaxPrefillTokens, remChunk: e.cfg.ChunkedPrefillSize, chunking: e.cfg.ChunkedPrefillSize > 0}
	e.mixed = e.mixed[:0]
	for _, s := range e.running {
		if s.state == stRunning {
			a.totalOffset += float64(min(max(s.maxNew-s.out, 0), clipMaxNewTokens)) * e.ratio
			if e.cfg.EnableMixedChunk {
				e.mixed = append(e.mixed, s)
			}
		}
	}
	// Mixed chunk (A.7): the running decodes count against the budgets
	// (num_mixed_decode_tokens = running_bs).
	mixedTokens := len(e.mixed)
	a.totalOffset += float64(mixedTokens)
	a.currentOffset += float64(mixedTokens)
	a.remInput -= mixedTokens
	a.remChunk -= mixedTokens
	e.batch = e.batch[:0]
	if c := e.chunked; c != nil {
		// add_chunked_req: budget = min(rem_chunk, remaining_total), or
		// rem_chunk when that is ≤ 0; the future decode is reserved on the
		// last chunk only.
		budget := min(a.remChunk, int(math.Floor(e.availEvict()-a.totalOffset)))
		if budget <= 0 {
			budget = a.remChunk
		}
		rem := len(c.fill) - c.computed
		ext := min(rem, budget)
		// Where SGLang would run out of memory (a chunk larger than the
		// free and evictable slots: admission reserved the whole prompt
		// once, later rounds do not), the chunk shrinks to what is there;
		// with nothing there the request is retracted (simulator rule).
		ext = min(ext, e.pool.available()+e.tree.evictable)
		if ext < rem {
			ext = e.pool.floor(ext)
		}
		if ext <= 0 {
			e.chunked = nil
			e.requeue(c, now)
		} else {
			maxNew := 0
			if ext == rem {
				maxNew = min(max(c.maxNew-c.out, 0), clipMaxNewTokens)
				e.chunked = nil
				c.state = stRunning
			}
			in := e.pool.ceil(ext)
			a.totalOffset += float64(in + maxNew)
			a.currentOffset += float64(in)
			a.remInput -= in
			a.remChunk -= in
			a.logInput += ext
			c.extend = ext
			e.batch = append(e.batch, c)
		}
	}
	admitted := 0
	for _, s := range e.waiting {
		if len(e.batch) >= numAlloc {
			e.batchIsFull = true
			break
		}
		hit, last := e.tree.match(s.root, s.key())
		took, res := e.addOneReq(&a, s, hit, last)
		if took {
			admitted++
			e.batch = append(e.batch, s)
			s.r.NumCachedTokens += hit // cached_tokens: prefix_len − already_computed (A.12)
			if s.r.FirstScheduled < 0 {
				s.r.FirstScheduled = now
			}
		}
		if res != addContinue {
			if res == addNoToken {
				e.batchIsFull = true
			}
			break
		}
	}
	e.waiting = e.waiting[admitted:]
	e.lastAdder = a
	if len(e.batch) == 0 {
		e.mixed = e.mixed[:0]
		return false
	}
	// prepare_for_extend: evict for the extend tokens (paged: + bs·P),
	// then allocate each request's new pages.
	need := 0
	for _, s := range e.batch {
		need += s.extend
	}
	if P > 1 {
		need += len(e.batch) * P
	}
	e.evictFor(need)
	for _, s := range e.batch {
		e.alloc(s, e.pool.ceil(s.computed+s.extend)-e.pool.ceil(s.computed))
		e.stats.ComputedTokens += int64(s.extend)
	}
	if len(e.mixed) > 0 {
		// mix_with_running: prepare_for_decode for the running batch. The
		// admission reserved their tokens; should the slots still be
		// short, they sit this step out (simulator rule).
		if e.checkDecodeMem(e.mixed) {
			for _, s := range e.mixed {
				if e.cfg.PageSize == 1 || s.computed%e.cfg.PageSize == 0 {
					e.alloc(s, e.cfg.PageSize)
				}
			}
			e.stats.ComputedTokens += int64(len(e.mixed))
		} else {
			e.mixed = e.mixed[:0]
		}
	}
	e.stats.PrefixHits += int64(a.logHit)
	e.stats.PrefixQueries += int64(a.logHit + a.logInput)
	e.prefillRunning = runningBS
	e.kind = stepPrefill
	return true
}

// addOneReq is PrefillAdder.add_one_req (A.8) for s after its match (hit
// tokens ending at last). took reports whether s joined the batch.
func (e *Engine) addOneReq(a *adder, s *seq, hit int, last *node) (took bool, res addResult) {
	P := e.cfg.PageSize
	maxNew := min(max(s.maxNew-s.out, 0), clipMaxNewTokens)
	extend := len(s.fill) - hit
	input := e.pool.ceil(extend)
	total := extend + maxNew + P
	e.tree.lock(last) // the matched prefix leaves the evictable pool
	if float64(total) >= e.availEvict()-a.totalOffset {
		e.tree.unlock(last)
		return false, addNoToken
	}
	if !a.chunking && len(e.batch) > 0 && input >= a.remInput {
		e.tree.unlock(last)
		return false, addOther
	}
	chunk := false
	if a.chunking && input > a.remChunk {
		extend = e.pool.floor(a.remChunk)
		if extend <= 0 {
			e.tree.unlock(last)
			return false, addOther
		}
		maxNew, chunk = 0, true
	}
	// Commit: keep the lock.
	s.last, s.prefix, s.computed, s.extend = last, hit, hit, extend
	if last.isRoot {
		s.last = nil // nothing matched: no node to hold
	}
	e.reqSlots++
	s.state = stRunning
	if chunk {
		s.state = stChunked
		e.chunked = s
	}
	in := e.pool.ceil(extend)
	a.totalOffset += float64(in + P + maxNew)
	a.currentOffset += float64(in + P)
	a.remInput -= in
	a.remChunk -= in
	a.logHit += hit
	a.logInput += extend
	return true, e.state(a)
}

// calcPriority orders the waiting queue (A.9): fcfs keeps list order; lpm
// sorts by the tree match, longest first, requests deprioritized by the
// in-batch check last, stably, and falls back to fcfs above 128 waiting.
func (e *Engine) calcPriority() {
	if e.cfg.SchedulePolicy != PolicyLPM || len(e.waiting) > lpmFallbackWaiting {
		return
	}
	var scratch *tree
	for _, s := range e.waiting {
		s.matched, _ = e.tree.match(s.root, s.key())
		s.deprio = false
		if s.matched > inBatchCheckThreshold {
			continue
		}
		if scratch == nil {
			scratch = newTree(e.cfg.PageSize, PolicyLRU, nil)
		}
		root := scratch.rootFor(s.r.CacheSalt, true)
		if scratch.peek(root, s.key()) >= inBatchDeprioritizeLimit {
			s.deprio = true
			continue
		}
		scratch.insert(root, s.key(), nil)
	}
	slices.SortStableFunc(e.waiting, func(x, y *seq) int {
		if x.deprio != y.deprio {
			if x.deprio {
				return 1
			}
			return -1
		}
		return y.matched - x.matched
	})
}

// decodeNeed is the slots the next decode step of reqs needs (A.10
// check_decode_mem): one per request at page 1, else P per request whose
// next token starts a page.
func (e *Engine) decodeNeed(reqs []*seq) int {
	P := e.cfg.PageSize
	if P == 1 {
		return len(reqs)
	}
	n := 0
	for _, s := range reqs {
		if s.computed%P == 0 {
			n += P
		}
	}
	return n
}

func (e *Engine) checkDecodeMem(reqs []*seq) bool {
	need := e.decodeNeed(reqs)
	e.evictFor(need)
	return e.pool.available() >= need
}

// updateRunningBatch is update_running_batch (A.10): drop finished
// requests, check decode memory, retract on failure, else decay the ratio.
// It reports whether a decode batch remains.
func (e *Engine) updateRunningBatch(now int64) bool {
	n := len(e.running)
	e.running = slices.DeleteFunc(e.running, func(s *seq) bool { return s.state != stRunning })
	if len(e.running) < n {
		e.batchIsFull = false
	}
	if len(e.running) == 0 {
		return false
	}
	if !e.checkDecodeMem(e.running) {
		e.retract(now)
		e.batchIsFull = false
	} else {
		e.ratio = max(e.ratio-e.cfg.NewTokenRatioDecay, e.cfg.MinNewTokenRatio)
	}
	return true
}

// retract is retract_decode with --retraction-policy length (A.10).
// Victims are taken from the end of the running batch sorted by (outputs,
// −prompt) descending (stable: among equal keys the later-admitted goes
// first); one unconditionally, more while the survivors' decode does not
// fit, never the last one.
func (e *Engine) retract(now int64) {
	order := slices.Clone(e.running)
	slices.SortStableFunc(order, func(x, y *seq) int {
		if x.out != y.out {
			return y.out - x.out
		}
		return len(x.r.Prompt) - len(y.r.Prompt)
	})
	first := true
	for first || !e.checkDecodeMem(order) {
		if len(order) == 1 {
			break
		}
		first = false
		v := order[len(order)-1]
		order = order[:len(order)-1]
		e.requeue(v, now)
		// release_req: evict up to survivors × 20 tokens if short.
		e.evictFor(len(order) * retractDecodeSteps)
	}
	if !e.checkDecodeMem(order) {
		// Unreachable: A.11's arrival clamp (max_new ≤ max_total −
		// ceil_P(input) − P − 1) leaves a lone request room for every token
		// it may decode once the tree's unlocked nodes are evicted, so the
		// newer code's OOM abort of the last request (A.10 step 2) never
		// has a case here. A panic is a broken invariant, not an input.
		panic(fmt.Sprintf("sglang: a lone running request %d does not fit its next decode token", order[0].r.ID))
	}
	e.running = slices.DeleteFunc(e.running, func(s *seq) bool { return s.state != stRunning })
	// New ratio over the survivors (A.8.1).
	outs, maxNew := 0, 0
	for _, s := range e.running {
		outs += s.out
		maxNew += s.maxNew
	}
	den := float64(maxNew + 1)
	if e.cfg.Mid2025 {
		den = float64(maxNew)
	}
	e.ratio = math.Min(1, float64(outs+retractDecodeSteps*len(e.running))/den)
}

// requeue retracts s (A.10): its KV is freed without inserting, its lock
// released, its progress reset (reset_for_retract: re-prefilled from prompt
// + outputs so far), and it goes to the tail of the waiting queue.
func (e *Engine) requeue(s *seq, now int64) {
	e.release(s, false)
	s.computed, s.extend, s.state = 0, 0, stWaiting
	s.r.Preemptions = append(s.r.Preemptions, now)
	e.stats.Preemptions++
	e.waiting = append(e.waiting, s)
}

// decode is prepare_for_decode: one slot per request (a page when its next
// token starts one).
func (e *Engine) decode() {
	e.batch = append(e.batch[:0], e.running...)
	for _, s := range e.batch {
		s.extend = 0
		if e.cfg.PageSize == 1 || s.computed%e.cfg.PageSize == 0 {
			e.alloc(s, e.cfg.PageSize)
		}
	}
	e.stats.ComputedTokens += int64(len(e.batch))
	e.kind = stepDecode
}

// EndStep applies the step's results at time now (overlap off): sampled
// tokens, first tokens, finishes and tree inserts; after a prefill step, and
// after every DecodeLogInterval-th decode step, the gauges are refreshed and
// the KV events published.
func (e *Engine) EndStep(now int64) *replica.StepOutput {
	if !e.inStep {
		panic("sglang: EndStep without BeginStep")
	}
	e.inStep = false
	e.out.FirstTokens = e.out.FirstTokens[:0]
	e.out.Finished = e.out.Finished[:0]
	e.out.Pulled = e.out.Pulled[:0]
	switch e.kind {
	case stepPrefill:
		shrunk := false
		for _, s := range e.batch {
			if s.aborted {
				e.dropAborted(s)
				shrunk = true
				continue
			}
			s.computed += s.extend
			s.extend = 0
			if s.state == stChunked {
				shrunk = true // the chunked request leaves the merged batch
				continue
			}
			e.emit(s, now)
			if s.state == stDone {
				shrunk = true
				continue
			}
			e.cacheUnfinished(s)
			e.running = append(e.running, s)
		}
		// Mixed decodes get their token; no tree insert for them (A.5).
		// The merged batch drops those that finished.
		for _, s := range e.mixed {
			if s.aborted {
				e.dropAborted(s)
				continue
			}
			s.computed++
			e.emit(s, now)
			if s.state == stDone {
				shrunk = true
			}
		}
		if len(e.mixed) > 0 {
			e.running = slices.DeleteFunc(e.running, func(s *seq) bool { return s.state == stDone })
			e.mixed = e.mixed[:0]
		}
		if shrunk {
			e.batchIsFull = false
		}
		e.refresh(now, e.prefillRunning)
	case stepDecode:
		for _, s := range e.batch {
			if s.aborted {
				e.dropAborted(s)
				continue
			}
			s.computed++
			e.emit(s, now)
		}
		e.decodeCt++
		if e.decodeCt%int64(e.cfg.DecodeLogInterval) == 0 {
			e.refresh(now, len(e.batch))
		}
	}
	e.kind = stepNone
	e.checkInvariants()
	return &e.out
}

// emit samples s's next token and finishes it at its max_new_tokens.
func (e *Engine) emit(s *seq, now int64) {
	s.sample()
	if s.r.FirstToken < 0 {
		s.r.FirstToken = now
		e.out.FirstTokens = append(e.out.FirstTokens, s.r)
	}
	if s.out < s.maxNew {
		return
	}
	e.release(s, true)
	s.state = stDone
	s.r.Completed = now
	e.stats.Completed++
	delete(e.seqs, s.r)
	e.out.Finished = append(e.out.Finished, s.r)
}

// dropAborted releases a request aborted while its step ran.
func (e *Engine) dropAborted(s *seq) {
	if e.chunked == s {
		e.chunked = nil
	}
	e.release(s, false)
	s.state = stDone
	e.running = slices.DeleteFunc(e.running, func(x *seq) bool { return x == s })
	e.batchIsFull = false
}

// Abort ends a request its client abandoned: a waiting one leaves the
// queue; a running or chunked one is released without inserting
// (cache_finished_req is_insert=False, A.5), now, or at the end of the step
// it is part of. It produces no further output.
func (e *Engine) Abort(r *replica.Request) {
	s := e.seqs[r]
	if s == nil || s.aborted || s.state == stDone {
		return
	}
	s.aborted = true
	delete(e.seqs, r)
	switch {
	case s.state == stWaiting:
		e.waiting = slices.DeleteFunc(e.waiting, func(x *seq) bool { return x == s })
		s.state = stDone
	case e.inStep && (slices.Contains(e.batch, s) || slices.Contains(e.mixed, s)):
		// EndStep drops it.
	default:
		e.dropAborted(s)
	}
	e.checkInvariants()
}

func (e *Engine) checkInvariants() {
	if !e.cfg.CheckInvariants {
		return
	}
	if err := e.CheckInvariants(); err != nil {
		panic(err)
	}
}

// CheckInvariants verifies the pool accounting (A.4: total = available +
// evictable + protected + held), every node's lock_ref against the requests
// holding it, the tree's size counters and each request's place.
func (e *Engine) CheckInvariants() error {
	if err := e.tree.check(); err != nil {
		return fmt.Errorf("sglang invariant: %w", err)
	}
	held, slots := 0, 0
	locks := map[*node]int32{}
	live := func(s *seq) error {
		held += s.owned
		slots++
		want := e.pool.ceil(s.computed) - s.prefix
		if e.inStep && s.extend > 0 {
			want = e.pool.ceil(s.computed+s.extend) - s.prefix
		} else if e.inStep && (e.kind == stepDecode || slices.Contains(e.mixed, s)) {
			want = e.pool.ceil(s.computed+1) - s.prefix
		}
		if s.owned != want {
			return fmt.Errorf("request %d owns %d slots, want %d (computed %d, prefix %d)", s.r.ID, s.owned, want, s.computed, s.prefix)
		}
		if s.prefix%e.cfg.PageSize != 0 {
			return fmt.Errorf("request %d prefix %d not page-aligned", s.r.ID, s.prefix)
		}
		for x := s.last; x != nil && !x.isRoot; x = x.parent {
			locks[x]++
		}
		return nil
	}
	seen := map[*seq]bool{}
	for _, s := range e.running {
		if seen[s] {
			return fmt.Errorf("sglang invariant: request %d listed twice", s.r.ID)
		}
		seen[s] = true
		if s.state == stDone {
			if s.owned != 0 || s.last != nil {
				return fmt.Errorf("sglang invariant: finished request %d still holds %d slots", s.r.ID, s.owned)
			}
			continue
		}
		if s.state != stRunning {
			return fmt.Errorf("sglang invariant: running request %d in state %d", s.r.ID, s.state)
		}
		if err := live(s); err != nil {
			return fmt.Errorf("sglang invariant: %w", err)
		}
	}
	if c := e.chunked; c != nil {
		if seen[c] || c.state != stChunked {
			return fmt.Errorf("sglang invariant: chunked request %d also running or in state %d", c.r.ID, c.state)
		}
		seen[c] = true
		if err := live(c); err != nil {
			return fmt.Errorf("sglang invariant: %w", err)
		}
	}
	if e.inStep && e.kind == stepPrefill {
		for _, s := range e.batch {
			if !seen[s] && s.state != stDone {
				seen[s] = true
				if err := live(s); err != nil {
					return fmt.Errorf("sglang invariant: %w", err)
				}
			}
		}
	}
	for _, s := range e.waiting {
		if seen[s] {
			return fmt.Errorf("sglang invariant: request %d both waiting and running", s.r.ID)
		}
		seen[s] = true
		if s.state != stWaiting || s.owned != 0 || s.last != nil || s.computed != 0 {
			return fmt.Errorf("sglang invariant: waiting request %d in state %d holds %d slots", s.r.ID, s.state, s.owned)
		}
	}
	if slots != e.reqSlots {
		return fmt.Errorf("sglang invariant: %d requests hold slots, counter says %d", slots, e.reqSlots)
	}
	if sum := e.pool.available() + e.tree.evictable + e.tree.protected + held; sum != e.cfg.MaxTotalNumTokens || e.pool.available() < 0 {
		return fmt.Errorf("sglang invariant: available %d + evictable %d + protected %d + held %d = %d, pool %d",
			e.pool.available(), e.tree.evictable, e.tree.protected, held, sum, e.cfg.MaxTotalNumTokens)
	}
	var err error
	e.tree.walk(func(n *node) {
		if err == nil && n.lockRef != locks[n] {
			err = fmt.Errorf("sglang invariant: node %d has lock_ref %d, held by %d requests", n.id, n.lockRef, locks[n])
		}
	})
	return err
}
