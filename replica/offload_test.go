package replica

import (
	"slices"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/arch"
)

const us = int64(1000)

// timedRecorder keeps every KV event with the time its batch was published.
type timedRecorder struct {
	events []Event
	at     []int64
}

func (r *timedRecorder) KVEvents(now int64, batch []Event) {
	for _, ev := range batch {
		r.events = append(r.events, ev)
		r.at = append(r.at, now)
	}
}

// cpuEvents returns the CPU-medium events of one kind, with their times.
func (r *timedRecorder) cpuEvents(kind EventKind) (hashes []uint64, at []int64) {
	for i, ev := range r.events {
		if ev.Medium == MediumCPU && ev.Kind == kind {
			hashes = append(hashes, ev.BlockHashes...)
			at = append(at, r.at[i])
		}
	}
	return hashes, at
}

// testOffload is a CPU tier whose copies cost 1 µs per job plus perBlock
// per block (45 GB/s moves BlockBytesPerRank bytes in bytes/45 ns).
func testOffload(cpuBlocks int, perBlock int64) *OffloadConfig {
	return &OffloadConfig{CPUBlocks: cpuBlocks, BlockBytesPerRank: 45 * perBlock, PCIeGBps: 45, JobOverheadUs: 1}
}

// newOffloadEngine is newTestEngine (1 ms steps, 16-token blocks,
// invariants checked) with a CPU tier.
func newOffloadEngine(t *testing.T, gpuBlocks, budget int, async bool, off *OffloadConfig) (*Engine, *timedRecorder) {
	return newTimedEngine(t, Config{NumGPUBlocks: gpuBlocks, MaxNumBatchedTokens: budget, AsyncScheduling: async, Offload: off})
}

// newTimedEngine is an engine of cfg with 1 ms steps, 16-token blocks, at
// most 16 sequences, invariants checked and its KV events recorded with
// their times.
func newTimedEngine(t *testing.T, cfg Config) (*Engine, *timedRecorder) {
	t.Helper()
	cfg.BlockSize, cfg.MaxNumSeqs, cfg.KVEvents, cfg.CheckInvariants = 16, 16, true, true
	e, err := NewEngine(cfg, &Linear{StepUs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	rec := &timedRecorder{}
	e.Subscribe(rec)
	return e, rec
}

// simClock drives an engine as the simulator does: steps back to back
// while there is work; an idle engine with copies in flight is polled when
// the first completes.
type simClock struct {
	t   *testing.T
	e   *Engine
	now int64
}

func (c *simClock) add(r *Request) *Request {
	c.t.Helper()
	if err := c.e.Add(r, c.now); err != nil {
		c.t.Fatal(err)
	}
	return r
}

// runUntil advances until the engine is idle with nothing in flight, or
// until time limit (a step in flight at limit finishes first).
func (c *simClock) runUntil(limit int64) {
	c.t.Helper()
	for i := 0; c.now < limit; i++ {
		if i > 100000 {
			c.t.Fatal("engine did not settle")
		}
		if d, ok := c.e.BeginStep(c.now); ok {
			c.now += d
			c.e.EndStep(c.now)
			continue
		}
		at, ok := c.e.NextTransfer()
		if !ok {
			if c.e.Busy() {
				c.t.Fatalf("t=%d: engine holds requests it cannot schedule, with nothing in flight", c.now)
			}
			return
		}
		if at > limit {
			return
		}
		c.now = at
		c.e.Poll(c.now)
	}
}

func (c *simClock) settle() { c.runUntil(1 << 62) }

func TestCPUCapacityFormula(t *testing.T) {
	// pd-offload.md B.2: ⌊bytes / roundup(block bytes of all ranks, 4096)⌋.
	model := func(name string) *arch.Model {
		m, err := arch.ResolveModel(name, "")
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	for _, c := range []struct {
		name           string
		model          string
		tp, elem       int
		gib            float64
		wantBlocks     int
		wantRankBlockB int64
	}{
		// The spec's example: 131 072 B/token × 16 = 2 MiB blocks; 64 GiB
		// holds 32 768 of them (524 288 tokens).
		{"Llama-3.1-8B TP1 64 GiB", "meta-llama/Llama-3.1-8B-Instruct", 1, 2, 64, 32768, 2 << 20},
		{"Llama-3.1-8B fp8 KV", "meta-llama/Llama-3.1-8B-Instruct", 1, 1, 64, 65536, 1 << 20},
		{"Llama-3.1-8B 0.5 GiB", "meta-llama/Llama-3.1-8B-Instruct", 1, 2, 0.5, 256, 2 << 20},
		// 70B at TP4: 2·80·2·128·2 = 81 920 B/token per rank, 1.25 MiB
		// blocks per rank, 5 MiB over the four: 64 GiB / 5 MiB = 13 107.2.
		{"Llama-3.1-70B TP4", "meta-llama/Llama-3.1-70B-Instruct", 4, 2, 64, 13107, 1310720},
		// MLA keeps one copy at any TP: 61·(512+64)·2 = 70 272 B/token,
		// 1 124 352 B blocks rounded up to 275 pages = 1 126 400 B;
		// 64 GiB / 1 126 400 = 61 008.06.
		{"DeepSeek-V3 MLA TP8", "../arch/testdata/DeepSeek-V3.json", 8, 2, 64, 61008, 1124352},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := EngineArgs{KVOffloadingSize: c.gib}
			o, err := e.CPUOffload(model(c.model), c.tp, c.elem, 16)
			if err != nil {
				t.Fatal(err)
			}
			if o.CPUBlocks != c.wantBlocks || o.BlockBytesPerRank != c.wantRankBlockB {
				t.Fatalf("%d blocks of %d B per rank, want %d of %d", o.CPUBlocks, o.BlockBytesPerRank, c.wantBlocks, c.wantRankBlockB)
			}
			if o.PCIeGBps != DefaultOffloadPCIeGBps || o.JobOverheadUs != DefaultOffloadJobOverheadUs {
				t.Fatalf("copy cost %v GB/s, %v µs; want the estimates", o.PCIeGBps, o.JobOverheadUs)
			}
		})
	}
	// Off, too small, and the copy time (C.3): one 2 MiB block at 45 GB/s
	// after 20 µs is 20 000 + 2 097 152/45 = 66 603.4 ns.
	m := model("meta-llama/Llama-3.1-8B-Instruct")
	if o, err := (&EngineArgs{}).CPUOffload(m, 1, 2, 16); o != nil || err != nil {
		t.Fatalf("no size: %v, %v", o, err)
	}
	if _, err := (&EngineArgs{KVOffloadingSize: 0.001}).CPUOffload(m, 1, 2, 16); err == nil || !strings.Contains(err.Error(), "holds no block") {
		t.Fatalf("1 MiB for 2 MiB blocks: %v", err)
	}
	o, _ := (&EngineArgs{KVOffloadingSize: 64}).CPUOffload(m, 1, 2, 16)
	if got := o.copyTime(1); got != 66603 {
		t.Fatalf("copy time of one block %d ns, want 66603", got)
	}
	zero := 0.0
	o, _ = (&EngineArgs{KVOffloadingSize: 64, OffloadPCIeGBps: 22, OffloadJobOverheadUs: &zero}).CPUOffload(m, 1, 2, 16)
	if got := o.copyTime(10); got != 953251 { // 20 971 520 / 22 = 953 250.9
		t.Fatalf("copy time of ten blocks at 22 GB/s %d ns, want 953251", got)
	}
}

func TestPresetResolvesOffload(t *testing.T) {
	p, err := LookupPreset("llama-3.1-8b-h100")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := p.EngineConfig()
	if err != nil || cfg.Offload != nil || cfg.KVOffloadingSize != 0 {
		t.Fatalf("default preset offloads: %+v, %v", cfg.Offload, err)
	}
	if p, err = p.WithOverrides([]byte(`engine: {kv_offloading_size: 64, offload_pcie_gb_per_s: 22, offload_job_overhead_us: 0}`)); err != nil {
		t.Fatal(err)
	}
	cfg, err = p.EngineConfig()
	if err != nil {
		t.Fatal(err)
	}
	want := OffloadConfig{CPUBlocks: 32768, BlockBytesPerRank: 2 << 20, PCIeGBps: 22, JobOverheadUs: 0}
	if cfg.KVOffloadingSize != 64 || cfg.Offload == nil || *cfg.Offload != want {
		t.Fatalf("offload %v %+v, want 64 %+v", cfg.KVOffloadingSize, cfg.Offload, want)
	}
	for _, bad := range []string{`engine: {kv_offloading_size: -1}`, `engine: {offload_pcie_gb_per_s: -3}`, `engine: {offload_job_overhead_us: -1}`} {
		if _, err := p.WithOverrides([]byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestCPUTierServesGPUEvictedBlock(t *testing.T) {
	// 8 usable GPU blocks, 16 CPU blocks, copies of n blocks take 1 + n µs.
	// A (64 tokens) is computed in [0, 1 ms]; its 4 prompt blocks are
	// stored when the step ends, done at 1.005 ms. B (112 tokens, [1.005,
	// 2.005 ms]) takes 7 of the 8 GPU blocks: the free queue gives up A's
	// tail blocks 3, 2, 1 and keeps its first (A.4). C repeats A's prefix
	// at 3 ms: block 0 from the GPU, the rest loaded from the CPU tier.
	a := seq(0, 64)
	for _, c := range []struct {
		name       string
		prompt     []uint32
		wantCPU    int // CPU tokens of num_cached_tokens (GPU: 16)
		wantLoaded int // blocks loaded
		wantNew    int // tokens computed after the load
	}{
		// Blocks 1-3 load in 4 µs; block 4 is computed.
		{"prefix plus a block", cat(a, seq(2000, 16)), 48, 3, 16},
		// The whole prompt is cached: blocks 1-3 load, and the last
		// token is recomputed (B.6): 16 + 47 cached.
		{"whole prompt", a, 47, 3, 1},
		// Diverges inside block 3: blocks 1-2 load.
		{"diverges in block 3", cat(seq(0, 50), seq(3000, 30)), 32, 2, 32},
	} {
		for _, async := range []bool{false, true} {
			name := c.name
			if async {
				name += " async"
			}
			t.Run(name, func(t *testing.T) {
				e, rec := newOffloadEngine(t, 9, 8192, async, testOffload(16, us))
				clk := &simClock{t: t, e: e}
				ra := clk.add(&Request{ID: 1, Prompt: a, OutputLen: 1})
				clk.settle()
				if clk.now != 1*ms+5*us || ra.Completed != 1*ms {
					t.Fatalf("A done at %d, stores applied at %d", ra.Completed, clk.now)
				}
				stored, at := rec.cpuEvents(BlockStored)
				if !slices.Equal(stored, ra.hashes[:4]) || at[0] != 1*ms+5*us {
					t.Fatalf("CPU stores %x at %v, want A's 4 blocks at 1.005 ms", stored, at)
				}
				clk.add(&Request{ID: 2, Prompt: seq(1000, 112), OutputLen: 1})
				clk.settle()
				if _, ok := e.Pool().Lookup(ra.hashes[1]); ok {
					t.Fatal("A's second block still on the GPU")
				}
				clk.now = 3 * ms
				rc := clk.add(&Request{ID: 3, Prompt: c.prompt, OutputLen: 1})
				if _, ok := e.BeginStep(clk.now); ok {
					t.Fatal("C scheduled while its blocks load")
				}
				load := 1*us + int64(c.wantLoaded)*us
				if at, ok := e.NextTransfer(); !ok || at != 3*ms+load {
					t.Fatalf("load completes at %d (%v), want %d", at, ok, 3*ms+load)
				}
				g := e.Gauges()
				if g.NumRequestsWaiting != 1 || g.NumRequestsRunning != 0 || g.KVCacheUsagePerc != float64(1+c.wantLoaded)/8 ||
					g.KVOffloadCPUUsagePerc != float64(c.wantLoaded)/16 {
					t.Fatalf("gauges while loading %+v", g)
				}
				clk.settle()
				if rc.FirstScheduled != 3*ms+load || rc.FirstToken != 4*ms+load {
					t.Fatalf("C scheduled at %d, first token %d; want %d, %d", rc.FirstScheduled, rc.FirstToken, 3*ms+load, 4*ms+load)
				}
				if rc.NumCachedTokens != 16+c.wantCPU || rc.NumCPUCachedTokens != c.wantCPU {
					t.Fatalf("cached %d (CPU %d), want 16 + %d", rc.NumCachedTokens, rc.NumCPUCachedTokens, c.wantCPU)
				}
				// vLLM's counters: GPU hits 16; the CPU tier is asked for
				// the tokens beyond them (A 64, B 112, C len−16).
				st := e.Stats()
				if st.ExternalHits != int64(c.wantLoaded*16) || st.ExternalQueries != int64(64+112+len(c.prompt)-16) || st.PrefixHits != 16 ||
					st.OffloadLoads != 1 || st.OffloadLoadedBlocks != int64(c.wantLoaded) || st.ComputedTokens != int64(64+112+c.wantNew) {
					t.Fatalf("stats %+v", st)
				}
				// The loaded blocks are cached on the GPU at promotion.
				if _, ok := e.Pool().Lookup(ra.hashes[1]); !ok {
					t.Fatal("loaded block not cached on the GPU")
				}
			})
		}
	}
}

func TestCPULoadWhileBusy(t *testing.T) {
	// D decodes in back-to-back 1 ms steps from 3 ms while C's 4 blocks
	// load (D, admitted first, took the GPU block A kept; done at 3.005
	// ms). The step ending at 4 ms reports the load;
	// without async scheduling C is promoted in the step scheduled then,
	// with it one step later (that step was scheduled before the report).
	for _, c := range []struct {
		async     bool
		wantSched int64
	}{{false, 4 * ms}, {true, 5 * ms}} {
		e, _ := newOffloadEngine(t, 9, 8192, c.async, testOffload(16, us))
		clk := &simClock{t: t, e: e}
		a := seq(0, 64)
		clk.add(&Request{ID: 1, Prompt: a, OutputLen: 1})
		clk.settle()
		clk.add(&Request{ID: 2, Prompt: seq(1000, 112), OutputLen: 1})
		clk.settle()
		clk.now = 3 * ms
		clk.add(&Request{ID: 4, Prompt: seq(5000, 20), OutputLen: 10})
		rc := clk.add(&Request{ID: 3, Prompt: cat(a, seq(2000, 16)), OutputLen: 1})
		clk.settle()
		if rc.FirstScheduled != c.wantSched || rc.NumCachedTokens != 64 || rc.NumCPUCachedTokens != 64 {
			t.Errorf("async %v: C scheduled at %d with %d cached (%d CPU), want %d, 64", c.async, rc.FirstScheduled, rc.NumCachedTokens, rc.NumCPUCachedTokens, c.wantSched)
		}
	}
}

func TestCPUStoresPromptOnlyOnCompute(t *testing.T) {
	// Budget 32: the 64-token prompt is computed in two steps, each
	// building a store of the 2 blocks it fills, submitted when the step
	// ends (done 3 µs later). The 40 output tokens fill blocks 4 and 5,
	// which are never stored (offload_prompt_only).
	for _, async := range []bool{false, true} {
		e, rec := newOffloadEngine(t, 20, 32, async, testOffload(16, us))
		clk := &simClock{t: t, e: e}
		r := clk.add(&Request{ID: 1, Prompt: seq(0, 64), OutputLen: 40})
		clk.settle()
		if len(r.hashes) < 6 {
			t.Fatalf("only %d blocks hashed", len(r.hashes))
		}
		stored, at := rec.cpuEvents(BlockStored)
		// Each is reported at the end of the step it completes in (2 ms,
		// 3 ms) and published then, with or without async scheduling.
		if !slices.Equal(stored, r.hashes[:4]) || !slices.Equal(at, []int64{2 * ms, 2 * ms, 3 * ms, 3 * ms}) {
			t.Errorf("async %v: CPU stores %x at %v, want blocks 0-3 at 2 ms, 3 ms", async, stored, at)
		}
		for i, h := range r.hashes[:6] {
			if _, ok := e.cpu.find(h); ok != (i < 4) {
				t.Errorf("block %d on CPU: %v", i, ok)
			}
		}
		if st := e.Stats(); st.OffloadStores != 2 || st.OffloadStoredBlocks != 4 || st.OffloadStoreBytes != 4*45*us {
			t.Errorf("stats %+v", st)
		}
		// CPU events are placeholders (B.8).
		for _, ev := range rec.events {
			if ev.Medium == MediumCPU && (len(ev.BlockHashes) != 1 || ev.TokenIDs != nil || ev.BlockSize != 0 || ev.HasParent) {
				t.Errorf("CPU event %+v", ev)
			}
		}
	}
}

// lru lists the tier's evictable chunks, least recent first, by name.
func lru(c *cpuTier, names map[uint64]string) []string {
	var out []string
	for s := c.head; s != noBlock; s = c.slots[s].next {
		out = append(out, names[c.slots[s].hash])
	}
	return out
}

func TestCPUTierLRUOrder(t *testing.T) {
	// B.5 by hand on a 4-chunk tier. Keys are 1..9 ("a".."i").
	names := map[uint64]string{}
	for i, n := range "abcdefghi" {
		names[uint64(i+1)] = string(n)
	}
	k := func(s string) []uint64 {
		var out []uint64
		for _, c := range s {
			out = append(out, uint64(c-'a'+1))
		}
		return out
	}
	var stats Stats
	ev := &EventLog{enabled: true}
	c := newCPUTier(OffloadConfig{CPUBlocks: 4, BlockBytesPerRank: 45, PCIeGBps: 45}, ev, &stats)
	store := func(keys string) bool {
		slots, ok := c.prepareStore(k(keys))
		if ok && len(slots) > 0 {
			c.built = append(c.built, xfer{req: &Request{}, slots: slots})
			c.submit(0)
			c.collect(1 << 40)
			c.apply()
		}
		return ok
	}
	removed := func() []string {
		var out []string
		for _, e := range ev.take() {
			if e.Kind == BlockRemoved {
				for _, h := range e.BlockHashes {
					out = append(out, names[h])
				}
			}
		}
		return out
	}
	steps := []struct {
		do          func() bool
		ok          bool
		wantLRU     string
		wantRemoved string
	}{
		// Completed stores append in block order.
		{func() bool { return store("ab") }, true, "ab", ""},
		{func() bool { return store("cd") }, true, "abcd", ""},
		// touch walks in reverse: b, then a, become most recent.
		{func() bool { c.touch(k("ab")); return true }, true, "cdba", ""},
		// A new key evicts the least recent.
		{func() bool { return store("e") }, true, "dbae", "c"},
		// d is among the keys stored: protected, so b goes instead.
		{func() bool { return store("df") }, true, "daef", "b"},
		// Three new keys, four evictable but one (f) protected: only
		// three can go, enough.
		{func() bool { return store("fghi") }, true, "fghi", "dae"},
		// touch(ghi) leaves f, i, h, g; storing g and b needs one slot and
		// g is protected: f, the least recent, goes.
		{func() bool { c.touch(k("ghi")); return store("gb") }, true, "ihgb", "f"},
	}
	for i, s := range steps {
		if ok := s.do(); ok != s.ok {
			t.Fatalf("step %d: ok %v", i, ok)
		}
		if got := strings.Join(lru(c, names), ""); got != s.wantLRU {
			t.Fatalf("step %d: LRU %q, want %q", i, got, s.wantLRU)
		}
		if got := strings.Join(removed(), ""); got != s.wantRemoved {
			t.Fatalf("step %d: removed %q, want %q", i, got, s.wantRemoved)
		}
		if err := c.check(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	// Pinned or pending chunks are not evictable: with b pinned by a load
	// and the rest pending, nothing can make room.
	c.startLoad(&Request{}, k("b"), 0)
	slots, ok := c.prepareStore(k("a"))
	if !ok || len(slots) != 1 {
		t.Fatalf("room for a: %v %v", slots, ok)
	}
	c.stamp++
	if _, ok := c.prepareStore(k("cde")); ok {
		t.Fatal("stored over pinned and pending chunks")
	}
	if err := c.check(); err != nil {
		t.Fatal(err)
	}
}

func TestCPULookupWaitsForPendingStore(t *testing.T) {
	// Copies of 1 ms per block: A's 4-block store runs [1 ms, 5.001 ms].
	// B evicts A's blocks 1-3 from the GPU meanwhile; C arrives at 2 ms,
	// finds them still being stored (HIT_PENDING: skipped, not blocking),
	// and loads them once the store is done: [5.001, 8.002 ms].
	e, _ := newOffloadEngine(t, 9, 8192, true, testOffload(16, ms))
	clk := &simClock{t: t, e: e}
	a := seq(0, 64)
	clk.add(&Request{ID: 1, Prompt: a, OutputLen: 1})
	clk.runUntil(1 * ms)
	clk.add(&Request{ID: 2, Prompt: seq(1000, 112), OutputLen: 1})
	clk.runUntil(2 * ms)
	if clk.now != 2*ms {
		t.Fatalf("at %d, want 2 ms", clk.now)
	}
	rc := clk.add(&Request{ID: 3, Prompt: cat(a, seq(2000, 16)), OutputLen: 1})
	if _, ok := e.BeginStep(clk.now); ok {
		t.Fatal("C scheduled")
	}
	if rc.Status() != Waiting || e.Gauges().NumRequestsWaiting != 1 || e.Stats().OffloadLoads != 0 {
		t.Fatalf("C %d, gauges %+v", rc.Status(), e.Gauges())
	}
	clk.settle()
	if rc.FirstScheduled != 8*ms+2*us || rc.NumCPUCachedTokens != 48 {
		t.Fatalf("C scheduled at %d with %d CPU tokens, want 8.002 ms, 48", rc.FirstScheduled, rc.NumCPUCachedTokens)
	}
}

func TestCachedPrefixSplitsTiers(t *testing.T) {
	e, _ := newOffloadEngine(t, 9, 8192, false, testOffload(16, us))
	clk := &simClock{t: t, e: e}
	a := seq(0, 64)
	ra := clk.add(&Request{ID: 1, Prompt: a, OutputLen: 1})
	clk.settle()
	// On both tiers: the GPU gives 48 (N−1 cap), the CPU its last block
	// minus the recomputed token.
	if g, c := e.CachedPrefix(ra.hashes[:4], 64); g != 48 || c != 15 {
		t.Fatalf("both tiers: %d + %d", g, c)
	}
	clk.add(&Request{ID: 2, Prompt: seq(1000, 112), OutputLen: 1})
	clk.settle()
	if g, c := e.CachedPrefix(ra.hashes[:4], 80); g != 16 || c != 48 {
		t.Fatalf("block 0 on GPU, 1-3 on CPU: %d + %d", g, c)
	}
	if n := e.CachedPrefixTokens(make([]uint32, 64), "", ra.hashes[:4]); n != 63 {
		t.Fatalf("whole prompt %d, want 63", n)
	}
}
