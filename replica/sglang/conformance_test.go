package sglang

import (
	"crypto/sha256"
	"encoding/binary"
	"math"
	"slices"
	"testing"

	"github.com/eppsim/eppsim/replica"
)

// The scenarios of sglang-engine.md D. Expected values are the spec's,
// derived by hand there; comments give the arithmetic where a scenario is
// adapted to overlap-off accounting.

type eventLog struct{ evs []replica.Event }

func (l *eventLog) KVEvents(_ int64, b []replica.Event) { l.evs = append(l.evs, b...) }

// nodeAt returns the node reached by following key exactly from root (nil
// if the path does not end at a node boundary).
func nodeAt(t *tree, root *node, key []uint32) *node {
	n := root
	for len(key) > 0 {
		c := t.child(n, key)
		if c == nil || len(c.key) > len(key) || !equal(c.key, key[:len(c.key)]) {
			return nil
		}
		key = key[len(c.key):]
		n = c
	}
	return n
}

// inject puts r in the running batch as if it had prefilled its prompt
// (inserted and locked) and sampled outs tokens (outs−1 of them with KV),
// taking the slots from the pool.
func inject(t *testing.T, e *Engine, r *replica.Request, outs int) *seq {
	t.Helper()
	r.Arrived, r.FirstScheduled, r.FirstToken, r.Completed = 0, 0, 0, -1
	n := len(r.Prompt)
	s := &seq{r: r, fill: r.Prompt[:n:n], maxNew: r.OutputLen, root: e.tree.root}
	_, last := e.tree.insert(s.root, r.Prompt, s)
	if !e.pool.alloc(n + outs - 1) {
		t.Fatal("inject: pool too small")
	}
	e.tree.lock(last)
	for range outs {
		s.sample()
	}
	s.computed, s.prefix, s.last, s.owned, s.state = n+outs-1, n, last, outs-1, stRunning
	e.running = append(e.running, s)
	e.reqSlots++
	e.seqs[r] = s
	return s
}

func TestD1InsertSplit(t *testing.T) {
	e, m := newTestEngine(t, testConfig(1000))
	r1 := &replica.Request{ID: 1, Prompt: seqTokens(1, 8), OutputLen: 2, Output: []uint32{100, 101}}
	if err := e.Add(r1, 0); err != nil {
		t.Fatal(err)
	}
	if _, ok := step(t, e, 0); !ok {
		t.Fatal("no prefill")
	}
	if got := m.batches[0]; !slices.Equal(got, []replica.BatchEntry{{NewTokens: 8, Context: 0}}) {
		t.Fatalf("prefill entries %v, want extend 8 after hit 0", got)
	}
	if e.tree.evictable != 0 || e.tree.protected != 8 {
		t.Fatalf("after prefill evictable %d protected %d, want 0 and 8", e.tree.evictable, e.tree.protected)
	}
	out, _ := step(t, e, 10)
	if len(out.Finished) != 1 || m.batches[1][0] != (replica.BatchEntry{NewTokens: 1, Context: 8, Decode: true}) {
		t.Fatalf("decode step: finished %v, entries %v", out.Finished, m.batches[1])
	}
	a := nodeAt(e.tree, e.tree.root, seqTokens(1, 8))
	b := nodeAt(e.tree, e.tree.root, cat(seqTokens(1, 8), []uint32{100}))
	if a == nil || b == nil || len(b.key) != 1 || e.tree.evictable != 9 || e.tree.protected != 0 {
		t.Fatalf("tree after finish: A %v B %v evictable %d protected %d, want A(8)→B(1), 9 and 0", a, b, e.tree.evictable, e.tree.protected)
	}
	r2 := &replica.Request{ID: 2, Prompt: []uint32{1, 2, 3, 4, 9, 9}, OutputLen: 2}
	_ = e.Add(r2, 20)
	if _, ok := e.BeginStep(20); !ok {
		t.Fatal("no prefill for R2")
	}
	a1 := nodeAt(e.tree, e.tree.root, seqTokens(1, 4))
	a2 := nodeAt(e.tree, e.tree.root, seqTokens(1, 8))
	if a1 == nil || a2 == nil || len(a1.key) != 4 || len(a2.key) != 4 || a2.parent != a1 || e.seqs[r2].last != a1 {
		t.Fatal("R2's match did not split A into A1=[1..4] → A2=[5..8] with last_node A1")
	}
	if r2.NumCachedTokens != 4 || e.seqs[r2].extend != 2 {
		t.Fatalf("R2 hit %d extend %d, want 4 and 2", r2.NumCachedTokens, e.seqs[r2].extend)
	}
	e.EndStep(21)
	if c := nodeAt(e.tree, e.tree.root, []uint32{1, 2, 3, 4, 9, 9}); c == nil || c.parent != a1 || len(c.key) != 2 {
		t.Fatal("no leaf C=[9,9] under A1 after R2's prefill")
	}
	drain(t, e, 30)

	// D2: the N−1 rule: R3 = [1..8] hits 7 (A2 splits at 3), extends 1.
	r3 := &replica.Request{ID: 3, Prompt: seqTokens(1, 8), OutputLen: 1}
	if got := e.CachedPrefixTokens(r3.Prompt, "", nil); got != 7 {
		t.Fatalf("D2 peek %d, want 7", got)
	}
	_ = e.Add(r3, 40)
	e.BeginStep(40)
	if r3.NumCachedTokens != 7 || e.seqs[r3].extend != 1 {
		t.Fatalf("D2 hit %d extend %d, want 7 and 1", r3.NumCachedTokens, e.seqs[r3].extend)
	}
	if n := nodeAt(e.tree, e.tree.root, seqTokens(1, 7)); n == nil || len(n.key) != 3 {
		t.Fatal("D2: A2 did not split at 3")
	}
	e.EndStep(41)
}

// pageHash is A.13's chain, computed independently: SHA-256(parent digest ‖
// tokens as 4-byte little-endian), value = first 8 bytes big-endian.
func pageHash(parent *[32]byte, toks []uint32) ([32]byte, uint64) {
	var b []byte
	if parent != nil {
		b = append(b, parent[:]...)
	}
	for _, v := range toks {
		b = binary.LittleEndian.AppendUint32(b, v)
	}
	d := sha256.Sum256(b)
	return d, binary.BigEndian.Uint64(d[:8])
}

func TestD3PageAlignment(t *testing.T) {
	cfg := testConfig(1024)
	cfg.PageSize, cfg.KVEvents = 16, true
	e, _ := newTestEngine(t, cfg)
	log := &eventLog{}
	e.Subscribe(log)
	prompt := seqTokens(1, 40)
	r := &replica.Request{ID: 1, Prompt: prompt, OutputLen: 10}
	_ = e.Add(r, 0)
	step(t, e, 0)
	if r.NumCachedTokens != 0 {
		t.Fatalf("hit %d, want 0 (key 39 floors to 32, tree empty)", r.NumCachedTokens)
	}
	s := e.seqs[r]
	// After prefill: 2 pages in the tree; the 8 tokens beyond stay the
	// request's (one page of 16 slots allocated).
	if e.tree.protected != 32 || s.prefix != 32 || s.owned != 16 {
		t.Fatalf("after prefill tree %d, prefix %d, owned %d; want 32, 32, 16", e.tree.protected, s.prefix, s.owned)
	}
	d1, h1 := pageHash(nil, prompt[:16])
	_, h2 := pageHash(&d1, prompt[16:32])
	want := []replica.Event{
		{Kind: replica.AllBlocksCleared},
		{Kind: replica.BlockStored, BlockHashes: []uint64{h1}, TokenIDs: prompt[:16], BlockSize: 16, Origin: r, PromptOffset: 0},
		{Kind: replica.BlockStored, BlockHashes: []uint64{h2}, ParentHash: h1, HasParent: true, TokenIDs: prompt[16:32], BlockSize: 16, Origin: r, PromptOffset: 16},
	}
	checkEvents(t, log.evs, want)
	drain(t, e, 10)
	// At finish: committed 49 → 48 tokens (3 pages) in the tree, the
	// unaligned slot freed: the pool holds the tree's 48 only.
	if e.tree.evictable != 48 || e.pool.available() != 1024-48 {
		t.Fatalf("after finish evictable %d available %d, want 48 and 976", e.tree.evictable, e.pool.available())
	}
	full := cat(prompt, s.fill[40:48])
	d2, _ := pageHash(&d1, prompt[16:32])
	_, h3 := pageHash(&d2, full[32:48])
	want = append(want, replica.Event{Kind: replica.BlockStored, BlockHashes: []uint64{h3}, ParentHash: h2, HasParent: true, TokenIDs: full[32:48], BlockSize: 16})
	checkEvents(t, log.evs, want)
	if got := e.CachedPrefixTokens(prompt, "", nil); got != 32 {
		t.Fatalf("a second request sharing the prompt hits %d, want 32", got)
	}
}

func checkEvents(t *testing.T, got, want []replica.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Kind != w.Kind || !slices.Equal(g.BlockHashes, w.BlockHashes) || g.ParentHash != w.ParentHash || g.HasParent != w.HasParent ||
			!slices.Equal(g.TokenIDs, w.TokenIDs) || g.BlockSize != w.BlockSize || g.Origin != w.Origin || g.PromptOffset != w.PromptOffset || g.ExtraKeys != nil {
			t.Fatalf("event %d = %+v, want %+v", i, g, w)
		}
	}
}

// d4Tree sets up D4: pool 100, unlocked leaves X(30, t=1), Y(20, t=2),
// Z(10, t=3) under the root, available 40.
func d4Tree(t *testing.T, mid bool) (*Engine, [3][]uint32) {
	cfg := testConfig(100)
	cfg.Mid2025, cfg.CheckInvariants = mid, false
	e, _ := newTestEngine(t, cfg)
	keys := [3][]uint32{seqTokens(1000, 1029), seqTokens(2000, 2019), seqTokens(3000, 3009)}
	for _, k := range keys {
		e.tree.insert(e.tree.root, k, nil)
		e.pool.alloc(len(k))
	}
	return e, keys
}

func TestD4D5Eviction(t *testing.T) {
	cases := []struct {
		name               string
		mid, lookupX, lock bool
		avail, evictable   int
		survivors          [3]bool // X, Y, Z
	}{
		{"D4 newest: shortfall 10 takes X", false, false, false, 70, 30, [3]bool{false, true, true}},
		{"D4 mid-2025: evict(50) takes X then Y", true, false, false, 90, 10, [3]bool{false, false, true}},
		{"D4 lookup of X at t=4 makes Y first", false, true, false, 60, 40, [3]bool{true, false, true}},
		{"D5 newest: X locked, Y only", false, false, true, 60, 10, [3]bool{true, false, true}},
		{"D5 mid-2025: X locked, Y then Z", true, false, true, 70, 0, [3]bool{true, false, false}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, keys := d4Tree(t, tc.mid)
			if tc.lookupX {
				e.tree.match(e.tree.root, keys[0])
			}
			if tc.lock {
				e.tree.lock(nodeAt(e.tree, e.tree.root, keys[0]))
				if e.tree.evictable != 30 || e.tree.protected != 30 {
					t.Fatalf("D5 evictable %d protected %d, want 30 and 30", e.tree.evictable, e.tree.protected)
				}
			}
			e.evictFor(50) // the 50-slot allocation of a request with no hit
			if e.pool.available() != tc.avail || e.tree.evictable != tc.evictable {
				t.Fatalf("available %d evictable %d, want %d and %d", e.pool.available(), e.tree.evictable, tc.avail, tc.evictable)
			}
			for i, k := range keys {
				if got := nodeAt(e.tree, e.tree.root, k) != nil; got != tc.survivors[i] {
					t.Fatalf("node %d present %v, want %v", i, got, tc.survivors[i])
				}
			}
		})
	}
}

func TestD6AdmissionStickyFull(t *testing.T) {
	cfg := testConfig(10000)
	cfg.NewTokenRatioDecay = 0 // the scenario's ratio 0.7 at the snapshot
	e, _ := newTestEngine(t, cfg)
	// Two running requests holding 1100 slots each with 100 outputs and
	// max_new 1000: overlap off, 100 sampled tokens have 99 KV slots, so
	// 1001-token prompts give the scenario's 2 × 1100 (available 7800)
	// and min(1000 − 100, 4096) = 900 each.
	for i := range 2 {
		inject(t, e, &replica.Request{ID: int64(i), Prompt: seqTokens(uint32(10000*(i+1)), uint32(10000*(i+1)+1000)), OutputLen: 1000}, 100)
	}
	if e.pool.available() != 7800 || e.tree.evictable != 0 {
		t.Fatalf("available %d evictable %d, want 7800 and 0", e.pool.available(), e.tree.evictable)
	}
	w1 := &replica.Request{ID: 10, Prompt: seqTokens(50000, 54999), OutputLen: 1000}
	w2 := &replica.Request{ID: 11, Prompt: seqTokens(60000, 60999), OutputLen: 1000}
	_ = e.Add(w1, 0)
	_ = e.Add(w2, 0)
	if _, ok := e.BeginStep(0); !ok {
		t.Fatal("no prefill")
	}
	a := e.lastAdder
	// total_offset 1260 + 5000 + 1 + 1000 = 7261; current 5001;
	// rem_chunk 8192 − 5000; rem_input 16384 − 5000.
	if math.Abs(a.totalOffset-7261) > 1e-9 || a.currentOffset != 5001 || a.remChunk != 3192 || a.remInput != 11384 {
		t.Fatalf("budget %+v, want total 7261 current 5001 chunk 3192 input 11384", a)
	}
	if e.seqs[w1].extend != 5000 || e.chunked != nil || w2.FirstScheduled != -1 || !e.batchIsFull {
		t.Fatalf("W1 extend %d chunked %v, W2 scheduled %d, batch_is_full %v; want 5000, none, -1, true", e.seqs[w1].extend, e.chunked, w2.FirstScheduled, e.batchIsFull)
	}
	e.EndStep(1)
	// W2 waits until a running request finishes (batch_is_full is sticky).
	t0 := int64(10)
	firstDone := int64(-1)
	for w2.FirstScheduled < 0 {
		out, ok := step(t, e, t0)
		if !ok {
			t.Fatal("engine idle with W2 waiting")
		}
		if len(out.Finished) > 0 && firstDone < 0 {
			firstDone = t0
		}
		t0 += 10
	}
	if firstDone < 0 || w2.FirstScheduled <= firstDone {
		t.Fatalf("W2 scheduled at %d, first finish at %d: want after", w2.FirstScheduled, firstDone)
	}
}

func TestD7ChunkedPrefill(t *testing.T) {
	e, m := newTestEngine(t, testConfig(100000))
	d1 := &replica.Request{ID: 1, Prompt: seqTokens(1, 10), OutputLen: 50}
	d2 := &replica.Request{ID: 2, Prompt: seqTokens(101, 110), OutputLen: 50}
	_ = e.Add(d1, 0)
	_ = e.Add(d2, 0)
	step(t, e, 0) // prefill
	step(t, e, 1) // one decode
	big := &replica.Request{ID: 3, Prompt: seqTokens(100000, 119999), OutputLen: 5}
	_ = e.Add(big, 2)
	outs := func() [2]int { return [2]int{e.seqs[d1].out, e.seqs[d2].out} }
	before := outs()
	runningOff := func() float64 {
		o := 0.0
		for _, s := range e.running {
			o += float64(min(s.maxNew-s.out, 4096)) * e.ratio
		}
		return o
	}
	wantExt := []int{8192, 8192, 3616}
	wantTree := []int{0, 8192, 16384}
	w := &replica.Request{ID: 4, Prompt: seqTokens(200000, 200099), OutputLen: 3}
	for i := range 3 {
		if i == 2 {
			_ = e.Add(w, 10)
		}
		n := len(m.batches)
		if _, ok := e.BeginStep(int64(10 + i)); !ok {
			t.Fatal("no step")
		}
		if got := e.tree.evictable + e.tree.protected - 20; got != wantTree[i] {
			t.Fatalf("step %d: %d of the big prompt in the tree, want %d", i+1, got, wantTree[i])
		}
		b := m.batches[n]
		if b[0].Decode || b[0].NewTokens != wantExt[i] || b[0].Context != 8192*i {
			t.Fatalf("step %d entries %v, want a prefill of %d after %d", i+1, b, wantExt[i], 8192*i)
		}
		res := e.lastAdder.totalOffset - e.lastAdder.currentOffset - runningOff()
		wantRes := 0.0 // only step 3 reserves the big request's max_new
		if i == 2 {
			if len(b) != 2 || b[1].NewTokens != 100 {
				t.Fatalf("step 3 did not admit the 100-token request into the remaining 4576: %v", b)
			}
			wantRes = 5 + 3
		}
		if math.Abs(res-wantRes) > 1e-9 {
			t.Fatalf("step %d reserves %g decode tokens, want %g", i+1, res, wantRes)
		}
		e.EndStep(int64(11 + i))
		if outs() != before {
			t.Fatalf("step %d: decodes progressed", i+1)
		}
	}
	drain(t, e, 20)
	if big.NumCachedTokens != 0 {
		t.Fatalf("cached_tokens %d, want 0", big.NumCachedTokens)
	}
}

func TestD8LPM(t *testing.T) {
	p := seqTokens(1, 100)
	novel := seqTokens(5000, 5099)
	mk := func() []*replica.Request {
		return []*replica.Request{
			{ID: 'a', Prompt: seqTokens(1000, 1043), OutputLen: 1},
			{ID: 'b', Prompt: cat(p[:60], seqTokens(2000, 2009)), OutputLen: 1},
			{ID: 'c', Prompt: cat(p, seqTokens(3000, 3019)), OutputLen: 1},
			{ID: 'd', Prompt: cat(novel, []uint32{7}), OutputLen: 1},
			{ID: 'e', Prompt: cat(novel, []uint32{8}), OutputLen: 1},
		}
	}
	cases := []struct {
		policy string
		extra  int
		want   string
	}{
		{PolicyLPM, 0, "cbade"},
		{PolicyFCFS, 0, "abcde"},
		{PolicyLPM, 124, "abcde"}, // 129 waiting: fcfs, no matching
	}
	for _, tc := range cases {
		cfg := testConfig(100000)
		cfg.SchedulePolicy = tc.policy
		e, _ := newTestEngine(t, cfg)
		e.tree.insert(e.tree.root, p, nil)
		e.pool.alloc(len(p))
		for _, r := range mk() {
			_ = e.Add(r, 0)
		}
		for i := range tc.extra {
			_ = e.Add(&replica.Request{ID: int64(1000 + i), Prompt: []uint32{9, 9}, OutputLen: 1}, 0)
		}
		clock := e.tree.clock
		e.calcPriority()
		var got []byte
		for _, s := range e.waiting[:5] {
			got = append(got, byte(s.r.ID))
		}
		if string(got) != tc.want {
			t.Fatalf("%s with %d waiting: order %s, want %s", tc.policy, len(e.waiting), got, tc.want)
		}
		if tc.extra > 0 && e.tree.clock != clock {
			t.Fatal("lpm above 128 waiting matched the tree")
		}
		if tc.policy == PolicyLPM && tc.extra == 0 {
			m := map[byte]int{}
			for _, s := range e.waiting {
				m[byte(s.r.ID)] = s.matched
			}
			if m['a'] != 0 || m['b'] != 60 || m['c'] != 100 || m['d'] != 0 || m['e'] != 0 || !e.waiting[4].deprio || e.waiting[3].deprio {
				t.Fatalf("matches %v, want a0 b60 c100 d0 e0 with e deprioritized", m)
			}
		}
	}
}

func TestD9Retraction(t *testing.T) {
	for _, mid := range []bool{false, true} {
		cfg := testConfig(661) // 109 + 51 + 501: available 0, evictable 0
		cfg.Mid2025 = mid
		e, m := newTestEngine(t, cfg)
		a := inject(t, e, &replica.Request{ID: 'A', Prompt: seqTokens(1, 100), OutputLen: 100}, 10)
		b := inject(t, e, &replica.Request{ID: 'B', Prompt: seqTokens(1001, 1050), OutputLen: 100}, 2)
		c := inject(t, e, &replica.Request{ID: 'C', Prompt: seqTokens(2001, 2500), OutputLen: 100}, 2)
		if e.pool.available() != 0 || e.tree.evictable != 0 {
			t.Fatal("setup: pool not full")
		}
		if _, ok := e.BeginStep(5); !ok {
			t.Fatal("no decode step")
		}
		// C is the victim; its prompt node is evicted (whole node) for
		// release_req's 2 × 20: available 501, minus 2 decode slots.
		if c.state != stWaiting || len(e.waiting) != 1 || e.waiting[0] != c || a.state != stRunning || b.state != stRunning ||
			!slices.Equal(c.r.Preemptions, []int64{5}) || e.Stats().Preemptions != 1 {
			t.Fatal("C was not the only victim, re-queued at the tail")
		}
		if e.pool.available() != 501-2 || nodeAt(e.tree, e.tree.root, c.r.Prompt) != nil || len(m.batches[0]) != 2 {
			t.Fatalf("available %d, want 499; C's prompt evicted, 2 decodes", e.pool.available())
		}
		want := 52.0 / 201 // (10 + 2 + 20·2)/(200 + 1)
		if mid {
			want = 52.0 / 200
		}
		if math.Abs(e.ratio-want) > 1e-12 {
			t.Fatalf("mid %v: ratio %g, want %g", mid, e.ratio, want)
		}
		e.EndStep(6)
	}
}

func TestD10RatioDecay(t *testing.T) {
	init, mn, dec := Ratios(2)
	if init != 1 || math.Abs(mn-0.14) > 1e-12 || math.Abs(dec-0.86/600) > 1e-12 {
		t.Fatalf("conservativeness 2: %g %g %g, want 1, 0.14, 0.001433", init, mn, dec)
	}
	e, _ := newTestEngine(t, testConfig(10000))
	r := &replica.Request{ID: 1, Prompt: seqTokens(1, 10), OutputLen: 700}
	_ = e.Add(r, 0)
	step(t, e, 0) // prefill: no decay
	for i := 1; i <= 650; i++ {
		step(t, e, int64(i))
		if i == 599 && e.ratio <= 0.098+1e-9 {
			t.Fatalf("ratio %g reached the floor before 600 steps", e.ratio)
		}
		if i >= 600 && math.Abs(e.ratio-0.098) > 1e-9 {
			t.Fatalf("after %d decode steps ratio %g, want 0.098", i, e.ratio)
		}
	}
	drain(t, e, 1000)
	if e.ratio != 0.7 {
		t.Fatalf("idle ratio %g, want the init 0.7", e.ratio)
	}
}

func TestD11ConcurrencyCap(t *testing.T) {
	cfg := testConfig(100000)
	cfg.MaxRunningRequests = 4
	e, _ := newTestEngine(t, cfg)
	var rs []*replica.Request
	for i := range 7 {
		out := 20
		if i == 0 {
			out = 5
		}
		r := &replica.Request{ID: int64(i), Prompt: seqTokens(uint32(100*i+1), uint32(100*i+10)), OutputLen: out}
		rs = append(rs, r)
		_ = e.Add(r, 0)
	}
	scheduled := func() int {
		n := 0
		for _, r := range rs {
			if r.FirstScheduled >= 0 {
				n++
			}
		}
		return n
	}
	step(t, e, 0)
	if scheduled() != 4 || !e.batchIsFull {
		t.Fatalf("%d admitted, batch_is_full %v; want 4, true", scheduled(), e.batchIsFull)
	}
	for now := int64(1); rs[0].Completed < 0; now++ {
		step(t, e, now)
		if scheduled() != 4 {
			t.Fatal("admitted while 4 run")
		}
	}
	for now := int64(100); now < 103; now++ {
		step(t, e, now)
	}
	if scheduled() != 5 {
		t.Fatalf("%d admitted after one finish, want 5", scheduled())
	}
}

func TestD12ArrivalClamp(t *testing.T) {
	cfg := testConfig(1000)
	cfg.ContextLen = 4096
	cases := []struct {
		prompt, out, wantMaxNew int
		reject                  bool
	}{
		{900, 500, 98, false}, // min(500, 999−900−1, 1000−900−1−1)
		{994, 10, 4, false},   // max_req_input_len 994 accepted (boundary unverified)
		{995, 10, 0, true},
	}
	for _, tc := range cases {
		e, _ := newTestEngine(t, cfg)
		r := &replica.Request{ID: 1, Prompt: make([]uint32, tc.prompt), OutputLen: tc.out}
		err := e.Add(r, 0)
		if (err != nil) != tc.reject {
			t.Fatalf("prompt %d: err %v, want reject %v", tc.prompt, err, tc.reject)
		}
		if !tc.reject && e.seqs[r].maxNew != tc.wantMaxNew {
			t.Fatalf("prompt %d: max_new %d, want %d", tc.prompt, e.seqs[r].maxNew, tc.wantMaxNew)
		}
	}
}

func TestD13Metrics(t *testing.T) {
	e, _ := newTestEngine(t, testConfig(1000))
	// 200 locked + 50 held by a running request, 350 evictable: available 400.
	inject(t, e, &replica.Request{ID: 1, Prompt: seqTokens(1, 200), OutputLen: 100}, 51)
	e.tree.insert(e.tree.root, seqTokens(1000, 1349), nil)
	e.pool.alloc(350)
	if e.pool.available() != 400 {
		t.Fatalf("available %d", e.pool.available())
	}
	_ = e.Add(&replica.Request{ID: 2, Prompt: seqTokens(5000, 5004), OutputLen: 1}, 0)
	if g := e.Gauges(); g.NumRequestsWaiting != 0 {
		t.Fatal("num_queue_reqs changed between metric points")
	}
	e.refresh(0, 1)
	if g := e.Gauges(); g.KVCacheUsagePerc != 0.25 || g.NumRequestsWaiting != 1 || g.BlockSize != 0 || g.NumGPUBlocks != 0 {
		t.Fatalf("gauges %+v, want usage 0.25, 1 waiting, no cache_config_info", g)
	}

	// A prefill batch with 300 hit and 100 computed tokens.
	e2, _ := newTestEngine(t, testConfig(1000))
	e2.tree.insert(e2.tree.root, seqTokens(1, 300), nil)
	e2.pool.alloc(300)
	_ = e2.Add(&replica.Request{ID: 1, Prompt: cat(seqTokens(1, 300), seqTokens(2000, 2099)), OutputLen: 3}, 0)
	step(t, e2, 0)
	if g := e2.Gauges(); g.PrefixCacheHits != 300 || g.PrefixCacheQueries != 400 || g.NumRequestsRunning != 0 {
		t.Fatalf("gauges %+v, want 300 hit of 400 and running 0 at the prefill log", g)
	}
}

func TestD14DuplicateBurst(t *testing.T) {
	e, m := newTestEngine(t, testConfig(5000))
	p := seqTokens(1, 1000)
	r1 := &replica.Request{ID: 1, Prompt: p, OutputLen: 3}
	r2 := &replica.Request{ID: 2, Prompt: p, OutputLen: 3}
	_ = e.Add(r1, 0)
	_ = e.Add(r2, 0)
	step(t, e, 0)
	if b := m.batches[0]; len(b) != 2 || b[0].NewTokens != 1000 || b[1].NewTokens != 1000 {
		t.Fatalf("batch %v, want both computing 1000", b)
	}
	if e.pool.available() != 4000 || e.tree.protected != 1000 || nodeAt(e.tree, e.tree.root, p).lockRef != 2 {
		t.Fatalf("available %d protected %d: the second copy was not freed", e.pool.available(), e.tree.protected)
	}
}

func TestD15EventsPerPage(t *testing.T) {
	cases := []struct{ page, tokens, events int }{{1, 5, 5}, {16, 48, 3}}
	for _, tc := range cases {
		cfg := testConfig(1024)
		cfg.PageSize, cfg.KVEvents = tc.page, true
		e, _ := newTestEngine(t, cfg)
		log := &eventLog{}
		e.Subscribe(log)
		// The prompt's extra token keeps the node at tc.tokens (page-aligned).
		r := &replica.Request{ID: 1, Prompt: seqTokens(1, uint32(tc.tokens)), OutputLen: 2}
		_ = e.Add(r, 0)
		e.BeginStep(0)
		if len(log.evs) != 0 {
			t.Fatal("events published before the prefill log")
		}
		e.EndStep(1)
		stored := log.evs[1:]
		if len(stored) != tc.events || log.evs[0].Kind != replica.AllBlocksCleared {
			t.Fatalf("page %d: %d events after the cleared one, want %d", tc.page, len(stored), tc.events)
		}
		for i, ev := range stored {
			if ev.Kind != replica.BlockStored || ev.BlockSize != tc.page || len(ev.TokenIDs) != tc.page || len(ev.BlockHashes) != 1 ||
				ev.HasParent != (i > 0) || (i > 0 && ev.ParentHash != stored[i-1].BlockHashes[0]) {
				t.Fatalf("page %d event %d: %+v", tc.page, i, ev)
			}
		}
	}
}

// TestMixedChunk: with --enable-mixed-chunk the running decodes ride along
// a prefill step as 1-token extends charged to the chunk budget (A.7).
func TestMixedChunk(t *testing.T) {
	cfg := testConfig(100000)
	cfg.EnableMixedChunk = true
	e, m := newTestEngine(t, cfg)
	d := &replica.Request{ID: 1, Prompt: seqTokens(1, 10), OutputLen: 50}
	_ = e.Add(d, 0)
	step(t, e, 0)
	big := &replica.Request{ID: 2, Prompt: seqTokens(1000, 10999), OutputLen: 2}
	_ = e.Add(big, 1)
	n := len(m.batches)
	step(t, e, 1)
	// rem_chunk = 8192 − 1 mixed decode token.
	want := []replica.BatchEntry{{NewTokens: 8191, Context: 0}, {NewTokens: 1, Context: 10, Decode: true}}
	if !slices.Equal(m.batches[n], want) || e.seqs[d].out != 2 {
		t.Fatalf("mixed step %v (decode out %d), want %v and 2 outputs", m.batches[n], e.seqs[d].out, want)
	}
}
