package replica

import (
	"fmt"
	"math"
)

// Defaults of the NIXL KV transfer between a prefill and a decode engine
// (../shared/spec/pd-offload.md A.8, C.4).
const (
	// DefaultPDTransferGBps is the per-rank transfer bandwidth, BLIS's
	// --pd-transfer-bandwidth default ("NIXL RDMA default"; an operator
	// default, not a measurement, D.1).
	DefaultPDTransferGBps = 25.0
	// DefaultPDTransferBaseUs is the fixed latency of one transfer, BLIS's
	// --pd-transfer-base-latency (0.05 ms).
	DefaultPDTransferBaseUs = 50.0
	// DefaultPDHandshakeMs is NIXL's first-contact handshake between a
	// decode engine and a prefill engine, once per pair: an estimate (C.4).
	DefaultPDHandshakeMs = 20.0
)

// KVTransferConfig is the cost of a decode engine's NIXL read of a
// prompt's KV blocks from a prefill engine (pd-offload.md A.8, C.3): one
// read per request, by each tensor-parallel rank pair in parallel,
// concurrent with other reads (no contention, the BLIS default).
type KVTransferConfig struct {
	// BandwidthGBps is the bandwidth of one rank pair, GB/s (= bytes/ns).
	BandwidthGBps float64 `json:"bandwidth_gb_per_s"`
	// BaseUs is the fixed latency of one read, µs.
	BaseUs float64 `json:"base_latency_us"`
	// HandshakeMs is paid once per (decode engine, prefill engine) pair, on
	// first contact; reads to that engine start when it completes.
	HandshakeMs float64 `json:"handshake_ms"`
	// BlockBytesPerRank is one block's KV on one rank (the model's KV
	// layout: 2·L·max(1, H_kv/TP)·d·s per token, MLA L·(r_kv + d_rope)·s).
	BlockBytesPerRank int64 `json:"block_bytes_per_rank"`
}

// TransferTime is the duration in ns of a read of n blocks once the
// handshake is done: t_base + n·block_bytes_per_rank / BW (A.8).
func (k *KVTransferConfig) TransferTime(n int) int64 {
	return transferNs(k.BaseUs, n, k.BlockBytesPerRank, k.BandwidthGBps)
}

func (k *KVTransferConfig) validate() error {
	switch {
	case !(k.BandwidthGBps > 0) || math.IsInf(k.BandwidthGBps, 0):
		return fmt.Errorf("kv_transfer: bandwidth_gb_per_s must be a positive number, got %g", k.BandwidthGBps)
	case !(k.BaseUs >= 0) || math.IsInf(k.BaseUs, 0):
		return fmt.Errorf("kv_transfer: base_latency_us must be a number ≥ 0, got %g", k.BaseUs)
	case !(k.HandshakeMs >= 0) || math.IsInf(k.HandshakeMs, 0):
		return fmt.Errorf("kv_transfer: handshake_ms must be a number ≥ 0, got %g", k.HandshakeMs)
	case k.BlockBytesPerRank <= 0:
		return fmt.Errorf("kv_transfer: block_bytes_per_rank must be positive, got %d", k.BlockBytesPerRank)
	}
	return nil
}

// RemotePrefill names the prefill engine holding a decode leg's prompt
// KV. Engine is any identifier the caller gives each prefill engine; the
// first read from it pays the handshake.
type RemotePrefill struct {
	Engine int
}

// nixl is the decode side of vLLM's NixlConnector (pull mode, A.4 steps
// 8–11): the reads in flight and the prefill engines already contacted.
type nixl struct {
	cfg KVTransferConfig
	// ready is when the handshake with each prefill engine completes.
	ready    map[int]int64
	inflight []*Request // reads not yet complete, in start order
	done     []*Request // complete, reported, not yet applied
	polled   []*Request // Poll's result, reused
}

func newNIXL(cfg KVTransferConfig) *nixl {
	return &nixl{cfg: cfg, ready: map[int]int64{}}
}

// startPull admits the decode leg r of a disaggregated request (A.4 step
// 9, A.6): after its local prefix hit (hits, h_D tokens, block-aligned and
// at most N−1 as A.2), the rest of the prompt, N − h_D tokens, is external:
// blocks for it are allocated without caching them (delay_cache_blocks),
// and the read of the ⌈N/b⌉ − h_D/b blocks D lacks, partial last block
// included, starts now. The request waits for it in WAITING_FOR_REMOTE_KVS
// (in skipped_waiting: counted as waiting, not running). It fails,
// changing nothing, when the blocks do not fit (the request then stays at
// the head of the queue).
func (e *Engine) startPull(r *Request, hits []int32, now int64) bool {
	bs := e.cfg.BlockSize
	h := len(hits) * bs
	n := len(r.Prompt)
	if !e.allocate(r, n-h, hits, false) {
		return false
	}
	// Admission stats (A.10): local hits as usual; the pulled tokens are
	// external queries and hits.
	e.stats.PrefixQueries += int64(n)
	e.stats.PrefixHits += int64(h)
	e.stats.ExternalQueries += int64(n - h)
	e.stats.ExternalHits += int64(n - h)
	r.status = WaitingForRemoteKVs
	r.loadReady = false
	r.PullHitTokens = h
	r.PulledBlocks = len(r.blocks) - len(hits)
	r.PullBytes = int64(r.PulledBlocks) * e.pd.cfg.BlockBytesPerRank
	start, ok := e.pd.ready[r.Remote.Engine]
	if !ok {
		// First contact with this prefill engine: the handshake runs in
		// the background, and reads to it start when it completes.
		start = now + int64(math.Round(e.pd.cfg.HandshakeMs*1e6))
		e.pd.ready[r.Remote.Engine] = start
	}
	r.PullStart = now
	r.PullEnd = max(now, start) + e.pd.cfg.TransferTime(r.PulledBlocks)
	e.pd.inflight = append(e.pd.inflight, r)
	e.stats.Pulls++
	e.stats.PulledTokens += int64(n - h)
	e.stats.PulledBlocks += int64(r.PulledBlocks)
	e.stats.PullBytes += r.PullBytes
	e.stats.PullTime += r.PullEnd - r.PullStart
	return true
}

// collect moves the reads complete at now to done and appends them to out:
// what the worker's get_finished reports (finished_recving) at the end of
// a step, and when the sidecar's notification to the prefill engine goes
// out (A.4 steps 10–11).
func (x *nixl) collect(now int64, out []*Request) []*Request {
	k := 0
	for _, r := range x.inflight {
		if r.PullEnd <= now {
			x.done = append(x.done, r)
			out = append(out, r)
			continue
		}
		x.inflight[k] = r
		k++
	}
	clear(x.inflight[k:])
	x.inflight = x.inflight[:k]
	return out
}

// apply marks the collected reads' requests ready for promotion (A.4 step
// 11: the next schedule() promotes them); it reports whether there were
// any.
func (x *nixl) apply() bool {
	if len(x.done) == 0 {
		return false
	}
	for _, r := range x.done {
		r.loadReady = true
	}
	clear(x.done)
	x.done = x.done[:0]
	return true
}

// next returns the end of the earliest read in flight.
func (x *nixl) next() (int64, bool) {
	if len(x.inflight) == 0 {
		return 0, false
	}
	t := x.inflight[0].PullEnd
	for _, r := range x.inflight[1:] {
		t = min(t, r.PullEnd)
	}
	return t, true
}

// Release frees the blocks a finished prefill leg (HoldBlocks) kept for
// the decode engine's read (A.5: finished_sending, on the decode side's
// notification or the lease's expiry). They return to the free queue and
// stay cached. It reports whether r held blocks.
func (e *Engine) Release(r *Request) bool {
	if _, ok := e.held[r]; !ok {
		return false
	}
	delete(e.held, r)
	e.freeBlocks(r)
	e.checkInvariants()
	return true
}

// Held returns how many finished prefill legs still hold their blocks.
func (e *Engine) Held() int { return len(e.held) }
