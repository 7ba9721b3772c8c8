package replica

import (
	"math"
	"slices"
	"testing"
)

// Llama-3.1-8B in BF16: 131 072 B/token, 2 MiB per 16-token block
// (pd-offload.md A.8's worked example).
const llamaBlockBytes = 2 << 20

func testTransfer(handshakeMs float64) *KVTransferConfig {
	return &KVTransferConfig{BandwidthGBps: 25, BaseUs: 50, HandshakeMs: handshakeMs, BlockBytesPerRank: llamaBlockBytes}
}

// newPDEngine is a 1 ms-per-step engine (16-token blocks, invariants
// checked, KV events recorded) that can serve P/D decode legs.
func newPDEngine(t *testing.T, blocks int, async bool, kv *KVTransferConfig) (*Engine, *timedRecorder) {
	return newTimedEngine(t, Config{NumGPUBlocks: blocks, MaxNumBatchedTokens: 4096, AsyncScheduling: async, KVTransfer: kv})
}

func prompt(n int, base uint32) []uint32 {
	p := make([]uint32, n)
	for i := range p {
		p[i] = base + uint32(i)
	}
	return p
}

// gpuStored returns the hashes of the GPU BlockStored events published at
// time at.
func (r *timedRecorder) gpuStored(at int64) []uint64 {
	var out []uint64
	for i, ev := range r.events {
		if ev.Kind == BlockStored && ev.Medium != MediumCPU && r.at[i] == at {
			out = append(out, ev.BlockHashes...)
		}
	}
	return out
}

// TestPDTransfer: a prefill leg on one engine, its decode leg on another,
// every time by hand (pd-offload.md A.4–A.8). A 100-token prompt has 7
// blocks (6 full, one partial). The decode engine holds none of them, so
// it reads all 7 (the partial last block included): 7 × 2 MiB =
// 14 680 064 B per rank, 50 µs + 14 680 064 / 25 ns = 637 202.56 ns →
// 637 203 ns, after the 20 ms first-contact handshake. A second read from
// the same prefill engine pays no handshake.
func TestPDTransfer(t *testing.T) {
	p, _ := newPDEngine(t, 100, false, nil)
	d, drec := newPDEngine(t, 100, false, testTransfer(20))
	c := &simClock{t: t, e: p}
	pre := c.add(&Request{ID: 1, Prompt: prompt(100, 1000), OutputLen: 1, HoldBlocks: true})
	c.settle()
	// One 1 ms step computes the prompt and samples the one token.
	if pre.Status() != Finished || pre.FirstToken != 1*ms || pre.NumCachedTokens != 0 {
		t.Fatalf("prefill leg: status %d first token %d cached %d", pre.Status(), pre.FirstToken, pre.NumCachedTokens)
	}
	// Its 7 blocks stay pinned (A.5): in the usage gauge, not running.
	if g := p.Gauges(); p.Held() != 1 || g.NumRequestsRunning != 0 || math.Abs(g.KVCacheUsagePerc-7.0/99) > 1e-12 {
		t.Fatalf("held %d, gauges %+v", p.Held(), g)
	}

	dc := &simClock{t: t, e: d, now: 1 * ms}
	dec := dc.add(&Request{ID: 1, Prompt: prompt(100, 1000), OutputLen: 3, Remote: &RemotePrefill{Engine: 7}})
	if _, ok := d.BeginStep(dc.now); ok {
		t.Fatal("a step ran while the read is in flight")
	}
	const xfer = 637203
	end := 1*ms + 20*ms + xfer
	if dec.PulledBlocks != 7 || dec.PullBytes != 7*llamaBlockBytes || dec.PullHitTokens != 0 || dec.PullStart != 1*ms || dec.PullEnd != end {
		t.Fatalf("read: %d blocks, %d B, hit %d, [%d, %d], want 7, %d, 0, [%d, %d]",
			dec.PulledBlocks, dec.PullBytes, dec.PullHitTokens, dec.PullStart, dec.PullEnd, 7*llamaBlockBytes, 1*ms, end)
	}
	// Waiting for the read counts in num_requests_waiting (A.10).
	if g := d.Gauges(); g.NumRequestsWaiting != 1 || g.NumRequestsRunning != 0 || math.Abs(g.KVCacheUsagePerc-7.0/99) > 1e-12 {
		t.Fatalf("decode gauges during the read %+v", g)
	}
	if at, ok := d.NextTransfer(); !ok || at != end {
		t.Fatalf("next transfer %d %v", at, ok)
	}
	// Idle: the read's completion is applied when it happens (C.5); the
	// request is promoted with N−1 tokens computed and its last prompt
	// token computed in a 1 ms step that samples the first token.
	dc.now = end
	if got := d.Poll(end); len(got) != 1 || got[0] != dec {
		t.Fatalf("poll %v", got)
	}
	dc.settle()
	if dec.FirstScheduled != end || dec.FirstToken != end+1*ms || dec.Completed != end+3*ms || dec.NumCachedTokens != 99 {
		t.Fatalf("decode leg: scheduled %d first %d done %d cached %d", dec.FirstScheduled, dec.FirstToken, dec.Completed, dec.NumCachedTokens)
	}
	// The 6 full blocks it lacked are announced when it is promoted.
	if got := drec.gpuStored(end); !slices.Equal(got, dec.hashes[:6]) {
		t.Fatalf("stored at promotion %x, want %x", got, dec.hashes[:6])
	}
	st := d.Stats()
	if st.Pulls != 1 || st.PulledTokens != 100 || st.PulledBlocks != 7 || st.PullBytes != 7*llamaBlockBytes || st.PullTime != 20*ms+xfer ||
		st.ExternalQueries != 100 || st.ExternalHits != 100 || st.PrefixQueries != 100 || st.PrefixHits != 0 {
		t.Fatalf("stats %+v", st)
	}

	// The same prefill engine again: no handshake. 32 tokens, 2 blocks:
	// 50 µs + 4 194 304 / 25 ns = 217 772.16 → 217 772 ns.
	dec2 := dc.add(&Request{ID: 2, Prompt: prompt(32, 5000), OutputLen: 1, Remote: &RemotePrefill{Engine: 7}})
	d.BeginStep(dc.now)
	if dec2.PulledBlocks != 2 || dec2.PullEnd-dec2.PullStart != 217772 {
		t.Fatalf("second read: %d blocks in %d ns", dec2.PulledBlocks, dec2.PullEnd-dec2.PullStart)
	}

	// The decode side's notification frees the prefill leg's blocks; they
	// stay cached.
	if !p.Release(pre) || p.Release(pre) || p.Held() != 0 || p.Gauges().KVCacheUsagePerc != 0 {
		t.Fatalf("release: held %d usage %g", p.Held(), p.Gauges().KVCacheUsagePerc)
	}
	if got := p.CachedPrefixTokens(make([]uint32, 100), "", pre.hashes); got != 96 {
		t.Fatalf("prefill engine caches %d tokens after release, want 96", got)
	}
}

// TestPDPartialPrefix: a decode engine that already holds part of the
// prefix reads only the rest (A.6): with 64 of 100 tokens cached it reads
// ⌈100/16⌉ − 64/16 = 3 blocks in 50 µs + 6 291 456 / 25 ns = 301 658 ns,
// and announces only blocks 4 and 5 at promotion. Holding the whole
// prompt, the hit stops at N−1 block-aligned (96) and one block is read.
func TestPDPartialPrefix(t *testing.T) {
	for _, c := range []struct {
		name     string
		shared   int // tokens of an earlier request's prompt that the decode engine computed
		hit      int
		blocks   int
		xfer     int64
		promoted []int // block indexes announced at promotion
	}{
		{"64 of 100 held", 70, 64, 3, 301658, []int{4, 5}},
		{"the whole prompt held", 100, 96, 1, 50000 + 83886, nil},
		{"nothing held", 0, 0, 7, 637203, []int{0, 1, 2, 3, 4, 5}},
	} {
		d, rec := newPDEngine(t, 100, false, testTransfer(0))
		dc := &simClock{t: t, e: d}
		full := prompt(100, 1000)
		if c.shared > 0 {
			dc.add(&Request{ID: 9, Prompt: full[:c.shared], OutputLen: 1})
			dc.settle()
		}
		dec := dc.add(&Request{ID: 1, Prompt: full, OutputLen: 1, Remote: &RemotePrefill{Engine: 1}})
		start := dc.now
		d.BeginStep(start)
		if dec.PullHitTokens != c.hit || dec.PulledBlocks != c.blocks || dec.PullBytes != int64(c.blocks)*llamaBlockBytes || dec.PullEnd-start != c.xfer {
			t.Errorf("%s: hit %d, %d blocks, %d B in %d ns", c.name, dec.PullHitTokens, dec.PulledBlocks, dec.PullBytes, dec.PullEnd-start)
			continue
		}
		dc.settle()
		var want []uint64
		for _, i := range c.promoted {
			want = append(want, dec.hashes[i])
		}
		if got := rec.gpuStored(dec.PullEnd); !slices.Equal(got, want) {
			t.Errorf("%s: stored at promotion %x, want %x", c.name, got, want)
		}
		if dec.FirstToken != dec.PullEnd+1*ms {
			t.Errorf("%s: first token %d, read ended %d", c.name, dec.FirstToken, dec.PullEnd)
		}
	}
}

// TestPDPromotionLag: on a busy decode engine the read is reported at the
// end of the step during which it completes and promoted at the next
// schedule(); with async scheduling that schedule already happened, so
// the promotion comes one step later (A.4 step 11, as for CPU loads).
// Steps take 1 ms; a request decodes on the engine throughout; the decode
// leg arrives at 1 ms and its read (0.637 ms) completes during the step
// [1, 2) ms.
func TestPDPromotionLag(t *testing.T) {
	for _, c := range []struct {
		async bool
		first int64
	}{{false, 3 * ms}, {true, 4 * ms}} {
		d, _ := newPDEngine(t, 100, c.async, testTransfer(0))
		if err := d.Add(&Request{ID: 9, Prompt: prompt(16, 1), OutputLen: 100}, 0); err != nil {
			t.Fatal(err)
		}
		now := int64(0)
		dur, _ := d.BeginStep(now)
		now += dur
		d.EndStep(now)
		dec := &Request{ID: 1, Prompt: prompt(100, 1000), OutputLen: 1, Remote: &RemotePrefill{Engine: 1}}
		if err := d.Add(dec, now); err != nil {
			t.Fatal(err)
		}
		var pulledAt int64 = -1
		for now < 10*ms && dec.FirstToken < 0 {
			dur, ok := d.BeginStep(now)
			if !ok {
				t.Fatal("idle")
			}
			now += dur
			if out := d.EndStep(now); len(out.Pulled) > 0 {
				pulledAt = now
			}
		}
		if pulledAt != 2*ms || dec.PullEnd != 1*ms+637203 || dec.FirstToken != c.first {
			t.Errorf("async %v: reported at %d, read ended %d, first token %d, want 2 ms, %d, %d", c.async, pulledAt, dec.PullEnd, dec.FirstToken, 1*ms+637203, c.first)
		}
	}
}

// TestPDHeadOfLine: a decode leg whose blocks do not fit waits at the
// head of the queue (A.4 step 9) and is admitted once blocks are free.
func TestPDHeadOfLine(t *testing.T) {
	// 10 blocks (9 usable): a running request holds 5, the decode leg
	// needs 7.
	d, _ := newPDEngine(t, 10, false, testTransfer(0))
	dc := &simClock{t: t, e: d}
	busy := dc.add(&Request{ID: 9, Prompt: prompt(70, 1), OutputLen: 3})
	dec := dc.add(&Request{ID: 1, Prompt: prompt(100, 1000), OutputLen: 1, Remote: &RemotePrefill{Engine: 1}})
	dc.settle()
	// busy: prefill at [0,1), decodes at [1,2), [2,3): done at 3 ms,
	// freeing its blocks; the read starts at 3 ms.
	if busy.Completed != 3*ms || dec.PullStart != 3*ms || dec.FirstToken != 3*ms+637203+1*ms {
		t.Fatalf("busy done %d, read started %d, first token %d", busy.Completed, dec.PullStart, dec.FirstToken)
	}
	// Without a KV transfer configuration a decode leg is refused.
	e, _ := newPDEngine(t, 10, false, nil)
	if err := e.Add(&Request{ID: 2, Prompt: prompt(10, 1), OutputLen: 1, Remote: &RemotePrefill{}}, 0); err == nil {
		t.Fatal("decode leg accepted without a transfer configuration")
	}
}

// TestKVBlockBytesPerRank: the bytes a P/D read moves per block and rank
// (A.8): Llama-3.1-8B in BF16 2 MiB; Llama-3.1-70B at TP4 81 920 B/token
// per rank, 1.25 MiB per block; fp8 KV halves it.
func TestKVBlockBytesPerRank(t *testing.T) {
	for _, c := range []struct {
		preset, overrides string
		want              int64
	}{
		{"llama-3.1-8b-h100", ``, 2 << 20},
		{"llama-3.1-8b-h100", `{"engine":{"kv_cache_dtype":"fp8"}}`, 1 << 20},
		{"llama-3.1-70b-h100-tp4", ``, 1310720},
	} {
		p, err := LookupPreset(c.preset)
		if err != nil {
			t.Fatal(err)
		}
		if c.overrides != "" {
			if p, err = p.WithOverrides([]byte(c.overrides)); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := p.KVBlockBytesPerRank(); err != nil || got != c.want {
			t.Errorf("%s %s: %d %v, want %d", c.preset, c.overrides, got, err, c.want)
		}
	}
}
