package replica

import (
	"fmt"

	"github.com/eppsim/eppsim/internal/blockmap"
)

// cpuTier is vLLM's native CPU KV offloading (../shared/spec/pd-offload.md
// part B): the scheduler side of the OffloadingConnector with the
// CPUOffloadingManager and its LRU policy, plus the two copy lanes of the
// worker (C.1). The engine calls it at the points vLLM's scheduler calls
// the connector; it never advances time: copies finish at times it
// computes, and the engine applies them when the simulator reaches them.
//
// A chunk is one GPU block (blocks_per_chunk 1, the B.1 default), so an
// offload key is the block's hash (B.3) and the tier's capacity counts
// blocks.
type cpuTier struct {
	cfg    OffloadConfig
	slots  []cpuSlot
	free   []int32      // unused slots
	index  blockmap.Map // block hash -> slot
	head   int32        // evictable chunks, least recent first (B.5)
	tail   int32
	pinned int // chunks with a store pending or pinned by a load

	// The D2H and H2D lanes: each runs one job at a time, in submission
	// order (C.1, SingleDirectionOffloadingHandler); these are the times
	// they become free.
	d2hFree, h2dFree int64
	built            []xfer // store jobs of the step being scheduled (B.4)
	stores, loads    []xfer // submitted jobs, in completion order per lane
	done             []xfer // complete, not yet applied
	retry            []*Request

	stamp   uint32
	events  *EventLog
	stats   *Stats
	evicted []uint64 // scratch of prepareStore
	fresh   []uint64 // scratch of prepareStore
	found   []int32  // scratch of prepareStore: each key's slot, or noBlock
	victims []int32  // scratch of prepareStore
	// sink keeps the loads of touch's prefetch pass alive.
	sink uint64
}

// cpuSlot is one chunk of CPU memory. ref is the manager's BlockStatus
// ref_cnt: -1 while its store is in flight (not loadable, not evictable),
// 0 when ready and evictable, > 0 while loads pin it (B.4, B.6).
type cpuSlot struct {
	hash       uint64
	ref        int32
	prev, next int32  // evictable list links
	mark       uint32 // protected from eviction by the current store
	pos        int32  // the hash's entry in index (entries never move)
}

// xfer is one transfer job: the chunks a store writes or a load reads for
// one request, and when the copy completes.
type xfer struct {
	req   *Request
	slots []int32
	load  bool
	at    int64
}

func newCPUTier(cfg OffloadConfig, events *EventLog, stats *Stats) *cpuTier {
	c := &cpuTier{cfg: cfg, slots: make([]cpuSlot, cfg.CPUBlocks), free: make([]int32, cfg.CPUBlocks),
		index: blockmap.New(blockmap.GroupsFor(cfg.CPUBlocks)), head: noBlock, tail: noBlock, events: events, stats: stats}
	// Slots are handed out in index order (the free list is a stack).
	for i := range c.free {
		c.free[i] = int32(cfg.CPUBlocks - 1 - i)
	}
	return c
}

// unlink takes an evictable slot out of the LRU list.
func (c *cpuTier) unlink(s int32) {
	sl := &c.slots[s]
	if sl.prev != noBlock {
		c.slots[sl.prev].next = sl.next
	} else {
		c.head = sl.next
	}
	if sl.next != noBlock {
		c.slots[sl.next].prev = sl.prev
	} else {
		c.tail = sl.prev
	}
	sl.prev, sl.next = noBlock, noBlock
}

// appendMRU puts a slot at the most recent end of the LRU list.
func (c *cpuTier) appendMRU(s int32) {
	sl := &c.slots[s]
	sl.prev, sl.next = c.tail, noBlock
	if c.tail != noBlock {
		c.slots[c.tail].next = s
	} else {
		c.head = s
	}
	c.tail = s
}

// find returns the slot holding hash.
func (c *cpuTier) find(h uint64) (int32, bool) {
	pos, ok := c.index.Lookup(h)
	if !ok {
		return 0, false
	}
	return int32(*c.index.Val(pos)), true
}

// touch is LRUCachePolicy.touch (B.5): it walks keys in reverse and moves
// every evictable one to the most recent end, so the first block of a
// request ends up the most recent and its tail is evicted first.
func (c *cpuTier) touch(keys []uint64) {
	// Load every key's table group first, so that the cache misses of a
	// long prompt overlap instead of coming one by one.
	var sink uint64
	for _, h := range keys {
		sink ^= c.index.Touch(h)
	}
	c.sink = sink
	for i := len(keys) - 1; i >= 0; i-- {
		s, ok := c.find(keys[i])
		if !ok || c.slots[s].ref != 0 || s == c.tail {
			continue
		}
		c.unlink(s)
		c.appendMRU(s)
	}
}

// lookup is the connector's get_num_new_matched_tokens for a request with
// hGPU tokens hit in the GPU prefix cache (B.6). keys are the hashes of
// the request's full blocks (the cap is num_tokens, not num_tokens−1).
// It returns the tokens to load beyond hGPU, or ok false (vLLM's None)
// when a hit is still being stored, is being loaded for another request,
// or the request has jobs in flight: the request is then skipped this
// step and looked up again at the next.
func (c *cpuTier) lookup(r *Request, keys []uint64, hGPU, bs int) (k int, ok bool) {
	c.touch(keys)
	if len(keys)*bs-hGPU < bs {
		return 0, true // less than one chunk beyond the GPU hit
	}
	start := hGPU / bs
	hits := 0
	for _, h := range keys[start:] {
		s, found := c.find(h)
		if !found {
			break
		}
		if c.slots[s].ref != 0 {
			// ref −1: HIT_PENDING; ref > 0: being loaded (B.6).
			return 0, false
		}
		hits++
	}
	if r.offInflight > 0 {
		return 0, false
	}
	return hits * bs, true
}

// startLoad pins the chunks a request loads (prepare_load) and submits
// the CPU→GPU copy at now, the start of the step's forward pass, behind
// the earlier loads (B.6). keys are the loaded blocks' hashes, all ready
// (lookup checked).
func (c *cpuTier) startLoad(r *Request, keys []uint64, now int64) {
	slots := make([]int32, len(keys))
	for i, h := range keys {
		s, _ := c.find(h)
		sl := &c.slots[s]
		if sl.ref == 0 {
			c.unlink(s)
			c.pinned++
		}
		sl.ref++
		slots[i] = s
	}
	d := c.cfg.copyTime(len(keys))
	c.h2dFree = max(now, c.h2dFree) + d
	c.loads = append(c.loads, xfer{req: r, slots: slots, load: true, at: c.h2dFree})
	r.offInflight++
	c.stats.OffloadLoads++
	c.stats.OffloadLoadedBlocks += int64(len(keys))
	c.stats.OffloadLoadBytes += int64(len(keys)) * c.cfg.BlockBytesPerRank
	c.stats.OffloadLoadTime += d
}

// prepareStore is CPUOffloadingManager.prepare_store (B.4, B.5): it skips
// the keys already held (ready or pending), evicts least recent ready
// chunks that are not among keys to make room for the rest, and inserts
// those as pending. It fails, changing nothing, when eviction cannot free
// enough; the caller retries at the next step.
func (c *cpuTier) prepareStore(keys []uint64) (slots []int32, ok bool) {
	c.stamp++
	var sink uint64
	for _, h := range keys {
		sink ^= c.index.Touch(h)
	}
	c.sink = sink
	fresh, held := c.fresh[:0], c.found[:0]
	for _, h := range keys {
		s, found := c.find(h)
		if found {
			c.slots[s].mark = c.stamp // protected
		} else {
			s = noBlock
			fresh = append(fresh, h)
		}
		held = append(held, s)
	}
	c.fresh, c.found = fresh, held
	if len(fresh) == 0 {
		return nil, true
	}
	need := len(fresh) - len(c.free)
	if need > 0 {
		// The least recent unprotected chunks; if there are not enough,
		// nothing is evicted.
		victims := c.victims[:0]
		for s := c.head; s != noBlock && len(victims) < need; s = c.slots[s].next {
			if c.slots[s].mark != c.stamp {
				victims = append(victims, s)
			}
		}
		c.victims = victims
		if len(victims) < need {
			return nil, false
		}
		ev := c.evicted[:0]
		for _, s := range victims {
			sl := &c.slots[s]
			c.unlink(s)
			c.index.DeleteAt(int(sl.pos))
			ev = append(ev, sl.hash)
			*sl = cpuSlot{prev: noBlock, next: noBlock}
			c.free = append(c.free, s)
		}
		c.stats.CPUEvictions += int64(len(ev))
		if c.events != nil && c.events.enabled {
			c.events.cpuRemoved(append([]uint64(nil), ev...))
		}
		c.evicted = ev
	}
	slots = make([]int32, 0, len(fresh))
	for _, h := range fresh {
		s := c.free[len(c.free)-1]
		c.free = c.free[:len(c.free)-1]
		c.slots[s] = cpuSlot{hash: h, ref: -1, prev: noBlock, next: noBlock, pos: int32(c.index.Insert(h, uint64(s)))}
		c.pinned++
		slots = append(slots, s)
	}
	return slots, true
}

// store builds the store job of one scheduled request whose first tokens
// tokens will be computed after this step (B.4, _build_store_jobs): the
// prompt blocks (offload_prompt_only) from its next_stored_block_idx to
// the last full one. keys are the request's block hashes up to there.
// A job whose preparation fails stores nothing and is retried at the next
// step; a successful one touches all of the request's keys.
func (c *cpuTier) store(r *Request, keys []uint64) {
	if len(keys) <= r.offStored {
		return
	}
	slots, ok := c.prepareStore(keys[r.offStored:])
	if !ok {
		return
	}
	start := r.offStored
	r.offStored = len(keys)
	// touch(keys), in its reverse order: the keys just prepared by the
	// slots prepareStore found (new ones are pending: not evictable),
	// then the earlier ones.
	for i := len(c.found) - 1; i >= 0; i-- {
		if s := c.found[i]; s != noBlock && c.slots[s].ref == 0 && s != c.tail {
			c.unlink(s)
			c.appendMRU(s)
		}
	}
	c.touch(keys[:start])
	if len(slots) > 0 {
		c.built = append(c.built, xfer{req: r, slots: slots})
		r.offInflight++
	}
}

// submit starts the store jobs built in the step that ends at now: the
// worker submits them at the start of the next step, behind the earlier
// GPU→CPU copies (B.4).
func (c *cpuTier) submit(now int64) {
	for _, j := range c.built {
		d := c.cfg.copyTime(len(j.slots))
		c.d2hFree = max(now, c.d2hFree) + d
		j.at = c.d2hFree
		c.stores = append(c.stores, j)
		c.stats.OffloadStores++
		c.stats.OffloadStoredBlocks += int64(len(j.slots))
		c.stats.OffloadStoreBytes += int64(len(j.slots)) * c.cfg.BlockBytesPerRank
		c.stats.OffloadStoreTime += d
	}
	clear(c.built)
	c.built = c.built[:0]
}

// collect moves the jobs complete at now to done: what the worker's
// get_finished reports at the end of a step (B.4, B.6). Stores complete
// before loads of the same instant.
func (c *cpuTier) collect(now int64) {
	n := 0
	for n < len(c.stores) && c.stores[n].at <= now {
		n++
	}
	c.done = append(c.done, c.stores[:n]...)
	c.stores = c.stores[:copy(c.stores, c.stores[n:])]
	n = 0
	for n < len(c.loads) && c.loads[n].at <= now {
		n++
	}
	c.done = append(c.done, c.loads[:n]...)
	c.loads = c.loads[:copy(c.loads, c.loads[n:])]
}

// apply is update_connector_output for the collected jobs: a completed
// store makes its chunks ready, evictable and most recent, and emits one
// CPU BlockStored per chunk (complete_store, B.4, B.8); a completed load
// unpins its chunks, which re-enter the LRU list as most recent
// (complete_load), and marks its request ready for promotion (B.6). Chunks
// of one job enter the list in block order (B.5 allows any order). It
// reports whether it applied anything.
func (c *cpuTier) apply() bool {
	if len(c.done) == 0 {
		return false
	}
	for i := range c.done {
		j := &c.done[i]
		for _, s := range j.slots {
			sl := &c.slots[s]
			if j.load {
				if sl.ref--; sl.ref == 0 {
					c.appendMRU(s)
					c.pinned--
				}
				continue
			}
			sl.ref = 0
			c.appendMRU(s)
			c.pinned--
			c.events.cpuStored(sl.hash)
		}
		j.req.offInflight--
		if j.load {
			j.req.loadReady = true
		}
	}
	clear(c.done)
	c.done = c.done[:0]
	return true
}

// next returns the completion time of the earliest job in flight.
func (c *cpuTier) next() (int64, bool) {
	switch {
	case len(c.stores) > 0 && len(c.loads) > 0:
		return min(c.stores[0].at, c.loads[0].at), true
	case len(c.stores) > 0:
		return c.stores[0].at, true
	case len(c.loads) > 0:
		return c.loads[0].at, true
	}
	return 0, false
}

// usage is vllm:kv_offload_cpu_cache_usage_perc: the fraction of chunks
// pinned by a pending store or a load, not residency (B.9).
func (c *cpuTier) usage() float64 { return float64(c.pinned) / float64(len(c.slots)) }

// run counts the consecutive keys the tier holds (ready, being stored or
// being loaded), without touching anything.
func (c *cpuTier) run(keys []uint64) int {
	n := 0
	for _, h := range keys {
		if _, ok := c.find(h); !ok {
			break
		}
		n++
	}
	return n
}

// check verifies the tier's bookkeeping: every slot is free or indexed
// exactly once, the LRU list holds exactly the ready unpinned chunks, and
// the pinned count matches.
func (c *cpuTier) check() error {
	inList := make([]bool, len(c.slots))
	prev := int32(noBlock)
	for s := c.head; s != noBlock; s = c.slots[s].next {
		if inList[s] {
			return fmt.Errorf("slot %d is listed twice", s)
		}
		if c.slots[s].prev != prev {
			return fmt.Errorf("slot %d links back to %d, not %d", s, c.slots[s].prev, prev)
		}
		inList[s] = true
		prev = s
	}
	if prev != c.tail {
		return fmt.Errorf("list ends at %d, tail is %d", prev, c.tail)
	}
	isFree := make([]bool, len(c.slots))
	for _, s := range c.free {
		if isFree[s] || inList[s] {
			return fmt.Errorf("free slot %d is listed or free twice", s)
		}
		isFree[s] = true
	}
	pinned, used := 0, 0
	for i := range c.slots {
		sl := &c.slots[i]
		if isFree[i] {
			continue
		}
		used++
		if s, ok := c.find(sl.hash); !ok || s != int32(i) {
			return fmt.Errorf("slot %d holds %x but the index maps it to %d (%v)", i, sl.hash, s, ok)
		}
		if pos, _ := c.index.Find(sl.hash); pos != int(sl.pos) {
			return fmt.Errorf("slot %d records entry %d, the index has %d", i, sl.pos, pos)
		}
		if sl.ref != 0 {
			pinned++
		}
		if (sl.ref == 0) != inList[i] {
			return fmt.Errorf("slot %d with ref %d is listed: %v", i, sl.ref, inList[i])
		}
	}
	if used != c.index.Len() || used+len(c.free) != len(c.slots) {
		return fmt.Errorf("%d slots used, %d free, %d indexed, capacity %d", used, len(c.free), c.index.Len(), len(c.slots))
	}
	if pinned != c.pinned {
		return fmt.Errorf("%d slots pinned, counter %d", pinned, c.pinned)
	}
	return nil
}

// offloadLookup asks the CPU tier for the tokens beyond a GPU hit of hGPU
// tokens (B.6).
func (e *Engine) offloadLookup(r *Request, hGPU int) (int, bool) {
	n := r.NumTokens() / e.cfg.BlockSize
	e.ensureHashes(r, n)
	return e.cpu.lookup(r, r.hashes[:n], hGPU, e.cfg.BlockSize)
}

// offloadLoad starts loading k tokens after the GPU hit of hGPU tokens
// into the blocks just allocated, and parks the request in
// WAITING_FOR_REMOTE_KVS (B.6). Its stores resume after the loaded blocks
// (B.4, next_stored_block_idx).
func (e *Engine) offloadLoad(r *Request, hGPU, k int, now int64) {
	bs := e.cfg.BlockSize
	r.status = WaitingForRemoteKVs
	r.loadTokens, r.loadReady = k, false
	r.offStored = (hGPU + k) / bs
	e.cpu.startLoad(r, r.hashes[hGPU/bs:(hGPU+k)/bs], now)
}

// promote is _update_waiting_for_remote_kv (B.6, A.4 step 11): the loaded
// or read blocks are cached (GPU BlockStored) and count as computed, all
// but the last token when they covered the whole request (always for a
// P/D read).
func (e *Engine) promote(r *Request) {
	n := min(len(r.blocks)*e.cfg.BlockSize, r.NumTokens())
	if n == r.NumTokens() {
		n--
	}
	if !e.cfg.DisablePrefixCaching {
		e.cacheFullBlocks(r, n)
	}
	if r.Remote != nil {
		// A P/D read (A.4 step 11): nothing came from the CPU tier.
		r.loadTokens = 0
	} else {
		// The CPU tier's part of what now counts as computed.
		r.loadTokens = n - (len(r.blocks)*e.cfg.BlockSize - r.loadTokens)
	}
	r.numComputed = n
	r.status = Waiting
	r.loadReady = false
}

// recordAdmission counts an admission's prefix-cache hits (A.6): hGPU
// tokens from the GPU cache, and with a CPU tier k of the tokens beyond
// them from it (B.6). Resumed requests count separately.
func (e *Engine) recordAdmission(r *Request, hGPU, k int) {
	if r.status == Preempted {
		e.stats.PreemptedQueries += int64(r.NumTokens())
		e.stats.PreemptedHits += int64(hGPU)
		return
	}
	e.stats.PrefixQueries += int64(r.NumTokens())
	e.stats.PrefixHits += int64(hGPU)
	if e.cpu != nil {
		e.stats.ExternalQueries += int64(r.NumTokens() - hGPU)
		e.stats.ExternalHits += int64(k)
	}
}

// offloadStores builds the step's store jobs (B.4): for every scheduled
// request, its prompt blocks full once the step's tokens are computed
// (offload_prompt_only), then one last try for requests that finished
// with blocks left to store.
func (e *Engine) offloadStores() {
	for i := range e.batch {
		s := &e.batch[i]
		e.offloadStore(s.req, s.req.numComputed+s.entry.NewTokens)
	}
	for _, r := range e.cpu.retry {
		e.offloadStore(r, r.numComputed)
	}
	clear(e.cpu.retry)
	e.cpu.retry = e.cpu.retry[:0]
}

func (e *Engine) offloadStore(r *Request, tokens int) {
	n := min(tokens, len(r.Prompt)) / e.cfg.BlockSize
	if n <= r.offStored {
		return
	}
	e.ensureHashes(r, n)
	e.cpu.store(r, r.hashes[:n])
}

// NextTransfer returns when the earliest CPU tier copy or P/D read in
// flight completes; ok is false when none is. While a step is in flight
// its end reports the transfers complete by then; an idle engine needs
// Poll at that time.
func (e *Engine) NextTransfer() (at int64, ok bool) {
	if e.cpu != nil {
		at, ok = e.cpu.next()
	}
	if e.pd != nil {
		if t, pending := e.pd.next(); pending && (!ok || t < at) {
			at, ok = t, true
		}
	}
	return at, ok
}

// applyTransfers applies the transfers collected at the end of the last
// step or by Poll: CPU tier stores and loads, P/D reads. It reports
// whether there were any.
func (e *Engine) applyTransfers() bool {
	applied := false
	if e.cpu != nil {
		applied = e.cpu.apply()
	}
	if e.pd != nil {
		applied = e.pd.apply() || applied
	}
	return applied
}

// Poll applies the CPU tier copies and P/D reads complete at now while
// no step is in flight, and publishes their KV events. vLLM would notice
// them in an idle polling step; that step is folded away (pd-offload.md
// C.5), so a load or read that completes while the engine is idle makes
// its request schedulable at once. It returns the decode legs whose read
// completed (as StepOutput.Pulled; valid until the next Poll). The
// simulator calls BeginStep next.
func (e *Engine) Poll(now int64) []*Request {
	if e.inStep {
		return nil
	}
	if e.cpu != nil {
		e.cpu.collect(now)
		if e.cpu.apply() {
			e.publish(now)
		}
	}
	if e.pd == nil {
		return nil
	}
	e.pd.polled = e.pd.collect(now, e.pd.polled[:0])
	e.pd.apply()
	return e.pd.polled
}
