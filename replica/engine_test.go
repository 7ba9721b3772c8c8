package replica

import (
	"slices"
	"testing"
)

const ms = int64(1_000_000)

// recorder is a KV event subscriber that keeps every batch.
type recorder struct{ events []Event }

func (r *recorder) KVEvents(_ int64, batch []Event) { r.events = append(r.events, batch...) }

// newTestEngine returns an engine with numBlocks blocks (null included),
// 16-token blocks, a 1 ms step, invariants checked after every step and KV
// events recorded.
func newTestEngine(t *testing.T, numBlocks, budget, maxSeqs int) (*Engine, *recorder) {
	t.Helper()
	e, err := NewEngine(Config{
		BlockSize: 16, NumGPUBlocks: numBlocks, MaxNumBatchedTokens: budget, MaxNumSeqs: maxSeqs,
		KVEvents: true, CheckInvariants: true,
	}, &Linear{StepUs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	e.Subscribe(rec)
	return e, rec
}

// seq returns n consecutive token ids starting at start.
func seq(start, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(start + i)
	}
	return out
}

func cat(parts ...[]uint32) []uint32 { return slices.Concat(parts...) }

// clock drives an engine step by step at 1 ms per step.
type clock struct {
	t   *testing.T
	e   *Engine
	now int64
}

// step runs one engine step; it fails the test if nothing was scheduled.
func (c *clock) step() *StepOutput {
	c.t.Helper()
	d, ok := c.e.BeginStep(c.now)
	if !ok {
		c.t.Fatalf("t=%d: nothing scheduled", c.now)
	}
	c.now += d
	return c.e.EndStep(c.now)
}

// drain steps until the engine is idle.
func (c *clock) drain() {
	c.t.Helper()
	for i := 0; c.e.Busy(); i++ {
		if i > 100000 {
			c.t.Fatal("engine did not drain")
		}
		c.step()
	}
}

func (c *clock) add(r *Request) *Request {
	c.t.Helper()
	if err := c.e.Add(r, c.now); err != nil {
		c.t.Fatal(err)
	}
	return r
}

func TestCachedPrefixCappedAtNumTokensMinusOne(t *testing.T) {
	// A.2: a fully cached 64-token prompt reuses floor(63/16)*16 = 48 tokens;
	// the last block is recomputed.
	tests := []struct {
		name      string
		first     []uint32
		second    []uint32
		wantReuse int
	}{
		{"identical 64-token prompt", seq(0, 64), seq(0, 64), 48},
		{"identical 65-token prompt", seq(0, 65), seq(0, 65), 64},
		{"extends by one block", seq(0, 64), seq(0, 80), 64},
		{"diverges in block 2", seq(0, 64), cat(seq(0, 20), seq(500, 44)), 16},
		{"shorter than a block", seq(0, 15), seq(0, 15), 0},
		{"17 tokens, one full block cached", seq(0, 17), seq(0, 17), 16},
		{"16 tokens: cap leaves no full block", seq(0, 16), seq(0, 16), 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, _ := newTestEngine(t, 64, 8192, 16)
			c := &clock{t: t, e: e}
			c.add(&Request{ID: 1, Prompt: tc.first, OutputLen: 1})
			c.drain()
			r := c.add(&Request{ID: 2, Prompt: tc.second, OutputLen: 1})
			c.drain()
			if r.NumCachedTokens != tc.wantReuse {
				t.Fatalf("NumCachedTokens = %d, want %d", r.NumCachedTokens, tc.wantReuse)
			}
			if st := e.Stats(); st.PrefixHits != int64(tc.wantReuse) || st.PrefixQueries != int64(len(tc.first)+len(tc.second)) {
				t.Fatalf("stats hits %d queries %d", st.PrefixHits, st.PrefixQueries)
			}
		})
	}
}

func TestFreeQueueTailFirstEviction(t *testing.T) {
	// 8 usable blocks. A (64 tokens = 4 blocks) takes 1..4 and, on
	// completion, frees them in reverse: the queue becomes [5 6 7 8 4 3 2 1].
	e, rec := newTestEngine(t, 9, 8192, 16)
	c := &clock{t: t, e: e}
	a := c.add(&Request{ID: 1, Prompt: seq(0, 64), OutputLen: 1})
	c.drain()
	if got, want := e.Pool().FreeOrder(), []int32{5, 6, 7, 8, 4, 3, 2, 1}; !slices.Equal(got, want) {
		t.Fatalf("free queue = %v, want %v", got, want)
	}
	// B (80 unrelated tokens = 5 blocks) pops 5 6 7 8 and then block 4: A's
	// tail block is the first cached block evicted.
	rec.events = nil
	c.add(&Request{ID: 2, Prompt: seq(1000, 80), OutputLen: 1})
	c.step()
	var removed []uint64
	for _, ev := range rec.events {
		if ev.Kind == BlockRemoved {
			removed = append(removed, ev.BlockHashes...)
		}
	}
	if len(removed) != 1 || removed[0] != a.hashes[3] {
		t.Fatalf("removed %v, want only A's 4th block hash %x", removed, a.hashes[3])
	}
	// A prompt extending A's by one block still reuses A's first 3 blocks.
	r := c.add(&Request{ID: 3, Prompt: seq(0, 80), OutputLen: 1})
	c.drain()
	if r.NumCachedTokens != 48 {
		t.Fatalf("reuse after tail eviction = %d, want 48", r.NumCachedTokens)
	}
}

func TestHitOnFreeBlockRefreshesIt(t *testing.T) {
	e, _ := newTestEngine(t, 9, 8192, 16)
	c := &clock{t: t, e: e}
	c.add(&Request{ID: 1, Prompt: seq(0, 32), OutputLen: 1}) // blocks 1,2
	c.drain()
	c.add(&Request{ID: 2, Prompt: seq(100, 32), OutputLen: 1}) // blocks 3,4
	c.drain()
	if got, want := e.Pool().FreeOrder(), []int32{5, 6, 7, 8, 2, 1, 4, 3}; !slices.Equal(got, want) {
		t.Fatalf("free queue = %v, want %v", got, want)
	}
	// A again: the cap allows one hit block (block 1), which leaves the free
	// queue; its second block is recomputed into a new block (5), which
	// duplicates block 2's hash (vLLM does not de-duplicate). On completion
	// 5 and then 1 go to the back: block 1 is now the most recent.
	r := c.add(&Request{ID: 3, Prompt: seq(0, 32), OutputLen: 1})
	c.drain()
	if r.NumCachedTokens != 16 {
		t.Fatalf("reuse = %d, want 16", r.NumCachedTokens)
	}
	if got, want := e.Pool().FreeOrder(), []int32{6, 7, 8, 2, 4, 3, 5, 1}; !slices.Equal(got, want) {
		t.Fatalf("free queue after hit = %v, want %v", got, want)
	}
	// Both 2 and 5 hold the same hash; the map returns the older one.
	if b, _ := e.Pool().Lookup(r.hashes[1]); b != 2 {
		t.Fatalf("lookup of duplicated hash = block %d, want 2", b)
	}
}

func TestSharedPrefixInSameStep(t *testing.T) {
	// Blocks are cached at scheduling time, so B, scheduled after A in the
	// same step, hits A's first three blocks.
	e, _ := newTestEngine(t, 64, 8192, 16)
	c := &clock{t: t, e: e}
	a := c.add(&Request{ID: 1, Prompt: seq(0, 64), OutputLen: 5})
	b := c.add(&Request{ID: 2, Prompt: cat(seq(0, 48), seq(900, 32)), OutputLen: 5})
	c.step()
	if b.NumCachedTokens != 48 || a.NumCachedTokens != 0 {
		t.Fatalf("cached tokens a=%d b=%d, want 0 and 48", a.NumCachedTokens, b.NumCachedTokens)
	}
	for i := range 3 {
		if a.blocks[i] != b.blocks[i] || e.Pool().RefCnt(a.blocks[i]) != 2 {
			t.Fatalf("block %d: a=%d b=%d refcnt=%d", i, a.blocks[i], b.blocks[i], e.Pool().RefCnt(a.blocks[i]))
		}
	}
	if got := e.Gauges(); got.NumRequestsRunning != 2 || got.KVCacheUsagePerc != float64(4+2)/63 {
		t.Fatalf("gauges %+v", got)
	}
}

func TestAllocationFailureChangesNothing(t *testing.T) {
	// 4 usable blocks. A holds 3; B needs 3 and must stay waiting with the
	// pool untouched (head-of-line blocking).
	e, _ := newTestEngine(t, 5, 8192, 16)
	c := &clock{t: t, e: e}
	c.add(&Request{ID: 1, Prompt: seq(0, 48), OutputLen: 3})
	c.step()
	before := e.Pool().FreeOrder()
	b := c.add(&Request{ID: 2, Prompt: seq(500, 48), OutputLen: 1})
	c.step()
	if got := e.Pool().FreeOrder(); !slices.Equal(got, before) && len(got) != len(before)-1 {
		t.Fatalf("free queue changed from %v to %v", before, got)
	}
	if b.Status() != Waiting || len(b.blocks) != 0 || b.FirstScheduled != -1 {
		t.Fatalf("B status %d blocks %v scheduled %d", b.Status(), b.blocks, b.FirstScheduled)
	}
	if g := e.Gauges(); g.NumRequestsWaiting != 1 || g.NumRequestsRunning != 1 {
		t.Fatalf("gauges %+v", g)
	}

	// Direct check on allocateSlots: hits that are evictable count against
	// the free blocks, and a failed call leaves refcounts and tables alone.
	e2, _ := newTestEngine(t, 5, 8192, 16)
	c2 := &clock{t: t, e: e2}
	c2.add(&Request{ID: 1, Prompt: seq(0, 48), OutputLen: 1}) // caches 3 blocks, then frees them
	c2.drain()
	c2.add(&Request{ID: 2, Prompt: seq(700, 16), OutputLen: 20}) // pins one block
	c2.step()
	r := &Request{ID: 3, Prompt: seq(0, 63), OutputLen: 1}
	if err := e2.Add(r, c2.now); err != nil {
		t.Fatal(err)
	}
	hits := slices.Clone(e2.computedBlocks(r)) // 3 cached free blocks
	free, order := e2.Pool().NumFree(), e2.Pool().FreeOrder()
	if len(hits) != 3 || free != 3 {
		t.Fatalf("hits %v free %d", hits, free)
	}
	// 63 tokens = 4 blocks: 3 hits (all evictable) + 1 new = 4 > 3 free.
	if e2.allocateSlots(r, 15, hits) {
		t.Fatal("allocation succeeded with too few free blocks")
	}
	if !slices.Equal(e2.Pool().FreeOrder(), order) || len(r.blocks) != 0 {
		t.Fatalf("failed allocation changed state: free %v blocks %v", e2.Pool().FreeOrder(), r.blocks)
	}
	for _, h := range hits {
		if e2.Pool().RefCnt(h) != 0 {
			t.Fatalf("block %d refcnt %d after failed allocation", h, e2.Pool().RefCnt(h))
		}
	}
}

func TestPreemptionAndResumeHitsOwnBlocks(t *testing.T) {
	// 6 usable blocks, A and B of 32-token prompts decoding side by side; by
	// step 17 each holds 3 full, cached blocks (48 tokens). Step 18
	// (t=17ms): A needs its 4th block, none is free, so the last running
	// request (B) is preempted. Its blocks are freed tail first, so A's new
	// block is B's third (evicted: one BlockRemoved) and B's first two stay
	// cached.
	e, rec := newTestEngine(t, 7, 8192, 16)
	c := &clock{t: t, e: e}
	a := c.add(&Request{ID: 1, Prompt: seq(0, 32), OutputLen: 30})
	b := c.add(&Request{ID: 2, Prompt: seq(300, 32), OutputLen: 40})
	for range 17 {
		c.step()
	}
	if len(b.Preemptions) != 0 {
		t.Fatalf("B preempted too early at %v", b.Preemptions)
	}
	rec.events = nil
	c.step()
	if len(b.Preemptions) != 1 || b.Preemptions[0] != 17*ms || b.Status() != Preempted {
		t.Fatalf("B preemptions %v status %d", b.Preemptions, b.Status())
	}
	var removed []uint64
	for _, ev := range rec.events {
		if ev.Kind == BlockRemoved {
			removed = append(removed, ev.BlockHashes...)
		}
	}
	if !slices.Equal(removed, b.hashes[2:3]) {
		t.Fatalf("removed %x, want B's third block %x", removed, b.hashes[2])
	}
	if g := e.Gauges(); g.NumRequestsWaiting != 1 || g.NumRequestsRunning != 1 {
		t.Fatalf("gauges after preemption %+v", g)
	}
	if b.Generated() != 17 {
		t.Fatalf("B generated %d before preemption, want 17", b.Generated())
	}
	// B cannot come back while A holds 4 blocks (it needs 4 = 2 cached + 2).
	for a.Status() != Finished {
		c.step()
		if b.Status() == Running {
			t.Fatalf("B resumed at %d while A still runs", c.now)
		}
	}
	if a.Completed != 30*ms {
		t.Fatalf("A completed at %d, want 30ms", a.Completed)
	}
	c.step() // B resumes: of its 49 tokens, 32 hit its own 2 cached blocks.
	st := e.Stats()
	if st.PreemptedQueries != 49 || st.PreemptedHits != 32 || st.Preemptions != 1 {
		t.Fatalf("stats %+v", st)
	}
	if b.NumCachedTokens != 0 {
		t.Fatalf("NumCachedTokens is set at first scheduling only, got %d", b.NumCachedTokens)
	}
	c.drain()
	if b.Generated() != 40 || b.Status() != Finished {
		t.Fatalf("B generated %d status %d", b.Generated(), b.Status())
	}
}

func TestUsageGaugeIgnoresCachedFreeBlocks(t *testing.T) {
	e, _ := newTestEngine(t, 11, 8192, 16) // 10 usable
	c := &clock{t: t, e: e}
	c.add(&Request{ID: 1, Prompt: seq(0, 64), OutputLen: 2})
	c.step()
	if got := e.Gauges().KVCacheUsagePerc; got != 0.4 { // 4 of 10 blocks held
		t.Fatalf("usage while running = %v, want 0.4", got)
	}
	c.drain()
	if got := e.Gauges().KVCacheUsagePerc; got != 0 {
		t.Fatalf("usage with only cached free blocks = %v, want 0", got)
	}
	r := c.add(&Request{ID: 2, Prompt: seq(0, 80), OutputLen: 1})
	c.drain()
	if r.NumCachedTokens != 64 {
		t.Fatalf("cache was lost: reuse %d", r.NumCachedTokens)
	}
}

func TestKVEventSequence(t *testing.T) {
	// 4 usable blocks. A: 40-token prompt, 1 output token. B: 48 unrelated
	// tokens forces evictions.
	e, rec := newTestEngine(t, 5, 8192, 16)
	c := &clock{t: t, e: e}
	a := c.add(&Request{ID: 1, Prompt: seq(0, 40), OutputLen: 1})
	c.drain()
	b := c.add(&Request{ID: 2, Prompt: seq(100, 48), OutputLen: 1})
	c.drain()
	// A: blocks 1,2,3; 1 and 2 full -> one BlockStored with both hashes.
	// Free after A: [4, 3(unhashed, front)...]: 3 is prepended -> [3 4 2 1].
	// B needs 3 blocks: pops 3, 4, then 2 (A's 2nd block): BlockRemoved.
	// B stores its 3 full blocks in one event.
	want := []Event{
		{Kind: BlockStored, BlockHashes: a.hashes[:2], TokenIDs: seq(0, 32), BlockSize: 16, Origin: a},
		{Kind: BlockRemoved, BlockHashes: []uint64{a.hashes[1]}},
		{Kind: BlockStored, BlockHashes: b.hashes[:3], TokenIDs: seq(100, 48), BlockSize: 16, Origin: b},
	}
	if len(rec.events) != len(want) {
		t.Fatalf("got %d events: %+v", len(rec.events), rec.events)
	}
	for i, w := range want {
		g := rec.events[i]
		if g.Kind != w.Kind || !slices.Equal(g.BlockHashes, w.BlockHashes) || !slices.Equal(g.TokenIDs, w.TokenIDs) ||
			g.HasParent != w.HasParent || g.BlockSize != w.BlockSize || g.Origin != w.Origin || g.PromptOffset != w.PromptOffset {
			t.Fatalf("event %d = %+v, want %+v", i, g, w)
		}
		checkOrigin(t, g)
	}
	// Decode tokens fill and cache blocks too, with the parent set.
	rec.events = nil
	e2, rec2 := newTestEngine(t, 16, 8192, 16)
	c2 := &clock{t: t, e: e2}
	d := c2.add(&Request{ID: 3, Prompt: seq(0, 20), OutputLen: 14})
	c2.drain()
	// 20 + 13 KV-computed tokens = 33 -> 2 full blocks: block 0 at the
	// prefill, block 1 when the decode reaches token 32.
	// Only the first event's tokens are the prompt's.
	if len(rec2.events) != 2 || !rec2.events[1].HasParent || rec2.events[1].ParentHash != d.hashes[0] ||
		!slices.Equal(rec2.events[1].TokenIDs, cat(seq(16, 4), d.generated[:12])) ||
		rec2.events[0].Origin != d || rec2.events[1].Origin != nil {
		t.Fatalf("decode events %+v", rec2.events)
	}
	checkOrigin(t, rec2.events[0])
	// A prompt prefilled in chunks of 16 tokens: one event per chunk, each
	// at its offset in the prompt.
	e3, rec3 := newTestEngine(t, 16, 16, 16)
	c3 := &clock{t: t, e: e3}
	p := c3.add(&Request{ID: 4, Prompt: seq(0, 40), OutputLen: 1})
	c3.drain()
	if len(rec3.events) != 2 {
		t.Fatalf("chunked prefill events %+v", rec3.events)
	}
	for i, ev := range rec3.events {
		if ev.Origin != p || ev.PromptOffset != 16*i || !slices.Equal(ev.TokenIDs, seq(16*i, 16)) {
			t.Fatalf("chunked prefill event %d = %+v", i, ev)
		}
		checkOrigin(t, ev)
	}
}

// checkOrigin: an event with an Origin has tokens that are that request's
// prompt at PromptOffset, the same array.
func checkOrigin(t *testing.T, ev Event) {
	t.Helper()
	if o := ev.Origin; o != nil && (len(ev.TokenIDs) == 0 || ev.PromptOffset+len(ev.TokenIDs) > len(o.Prompt) ||
		&o.Prompt[ev.PromptOffset] != &ev.TokenIDs[0]) {
		t.Fatalf("event %+v: tokens are not the origin's prompt at offset %d", ev, ev.PromptOffset)
	}
}

func TestChunkedPrefillAndThreshold(t *testing.T) {
	tests := []struct {
		name       string
		budget     int
		threshold  int
		prompt     int
		wantSteps  int // steps until the first token
		wantChunks []int
	}{
		{"fits in one step", 8192, 0, 100, 1, []int{100}},
		{"budget splits", 64, 0, 150, 3, []int{64, 64, 22}},
		{"threshold splits", 8192, 50, 120, 3, []int{50, 50, 20}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := NewEngine(Config{BlockSize: 16, NumGPUBlocks: 64, MaxNumBatchedTokens: tc.budget, MaxNumSeqs: 4,
				LongPrefillTokenThreshold: tc.threshold, CheckInvariants: true}, &Linear{StepUs: 1000})
			if err != nil {
				t.Fatal(err)
			}
			c := &clock{t: t, e: e}
			r := c.add(&Request{ID: 1, Prompt: seq(0, tc.prompt), OutputLen: 2})
			var chunks []int
			for r.FirstToken < 0 {
				d, _ := e.BeginStep(c.now)
				chunks = append(chunks, e.batch[0].entry.NewTokens)
				c.now += d
				e.EndStep(c.now)
			}
			if !slices.Equal(chunks, tc.wantChunks) || r.FirstToken != int64(tc.wantSteps)*ms {
				t.Fatalf("chunks %v first token %d", chunks, r.FirstToken)
			}
		})
	}
}

func TestMaxNumSeqsAndFCFS(t *testing.T) {
	e, _ := newTestEngine(t, 64, 8192, 2)
	c := &clock{t: t, e: e}
	r1 := c.add(&Request{ID: 1, Prompt: seq(0, 20), OutputLen: 3})
	r2 := c.add(&Request{ID: 2, Prompt: seq(100, 20), OutputLen: 3})
	r3 := c.add(&Request{ID: 3, Prompt: seq(200, 20), OutputLen: 3})
	c.step()
	if r1.Status() != Running || r2.Status() != Running || r3.Status() != Waiting {
		t.Fatalf("statuses %d %d %d", r1.Status(), r2.Status(), r3.Status())
	}
	c.drain()
	if r3.FirstScheduled != 3*ms {
		t.Fatalf("r3 first scheduled at %d, want after r1/r2 finish (3ms)", r3.FirstScheduled)
	}
}

func TestAddRejectsTooLong(t *testing.T) {
	e, _ := newTestEngine(t, 5, 8192, 4) // capacity 64 tokens
	if err := e.Add(&Request{ID: 1, Prompt: seq(0, 60), OutputLen: 5}, 0); err == nil {
		t.Fatal("65-token sequence accepted by a 64-token engine")
	}
	if err := e.Add(&Request{ID: 2, Prompt: nil, OutputLen: 5}, 0); err == nil {
		t.Fatal("empty prompt accepted")
	}
}

func TestFreeKeepsUnfilledBlocksInOrder(t *testing.T) {
	// Without prefix caching no block is hashed: a finished request's blocks
	// [1 2 3 4], freed in reverse, are prepended as one group (prepend_n),
	// so the queue front reads 4 3 2 1 followed by the untouched 5..8.
	e, err := NewEngine(Config{BlockSize: 16, NumGPUBlocks: 9, MaxNumBatchedTokens: 8192, MaxNumSeqs: 4,
		DisablePrefixCaching: true, CheckInvariants: true}, &Linear{StepUs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{t: t, e: e}
	c.add(&Request{ID: 1, Prompt: seq(0, 64), OutputLen: 1})
	c.drain()
	if got, want := e.Pool().FreeOrder(), []int32{4, 3, 2, 1, 5, 6, 7, 8}; !slices.Equal(got, want) {
		t.Fatalf("free queue = %v, want %v", got, want)
	}
}

func TestKVEventCarriesCacheSalt(t *testing.T) {
	// vLLM puts cache_salt in the first block's extra keys (A.1); the
	// BlockStored event carries it there, and salted prefixes are not shared.
	e, rec := newTestEngine(t, 64, 8192, 4)
	c := &clock{t: t, e: e}
	c.add(&Request{ID: 1, Prompt: seq(0, 40), OutputLen: 1, CacheSalt: "s1"})
	c.drain()
	r := c.add(&Request{ID: 2, Prompt: seq(0, 40), OutputLen: 1})
	c.drain()
	ev := rec.events[0]
	if len(ev.ExtraKeys) != 2 || !slices.Equal(ev.ExtraKeys[0], []string{"s1"}) || ev.ExtraKeys[1] != nil {
		t.Fatalf("extra keys %q", ev.ExtraKeys)
	}
	if rec.events[1].ExtraKeys != nil || r.NumCachedTokens != 0 {
		t.Fatalf("unsalted request: extra keys %q, reuse %d", rec.events[1].ExtraKeys, r.NumCachedTokens)
	}
}

// TestAddTooLongSaysWhichLimit: a request longer than the engine's maximum
// sequence is refused with the limit that binds, so that a run whose every
// request is refused can say why: with 2 blocks of 16 tokens one is vLLM's
// null block, so the KV cache holds 16 tokens; with max_model_len 10 below
// that capacity, 10.
func TestAddTooLongSaysWhichLimit(t *testing.T) {
	for _, tc := range []struct {
		name        string
		blocks, mml int
		want        string
	}{
		{"kv cache", 2, 0, "request 7: 20 prompt + 1 output tokens exceed the engine's maximum sequence length 16 (the KV cache: num_gpu_blocks 2 less vLLM's null block, of block_size 16 tokens)"},
		{"max_model_len", 100, 10, "request 7: 20 prompt + 1 output tokens exceed the engine's maximum sequence length 10 (max_model_len)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := NewEngine(Config{BlockSize: 16, NumGPUBlocks: tc.blocks, MaxNumBatchedTokens: 64, MaxNumSeqs: 4, MaxModelLen: tc.mml}, &Linear{StepUs: 1000})
			if err != nil {
				t.Fatal(err)
			}
			err = e.Add(&Request{ID: 7, Prompt: seq(0, 20), OutputLen: 1}, 0)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("Add: %v, want %q", err, tc.want)
			}
		})
	}
}
