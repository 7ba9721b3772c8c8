package replica

// Status is a request's state inside the engine.
type Status uint8

// Request states.
const (
	Waiting Status = iota
	Running
	Preempted
	Finished
	// WaitingForRemoteKVs is a request whose prefix is being copied from
	// the CPU tier (vLLM's WAITING_FOR_REMOTE_KVS, pd-offload.md B.6) or
	// read from a prefill engine (A.4). It holds blocks, counts as waiting
	// and is not running.
	WaitingForRemoteKVs
)

// Request is one request as the engine sees it, with its per-request record.
type Request struct {
	ID int64
	// Prompt holds the prompt token IDs.
	Prompt []uint32
	// OutputLen is the number of tokens to generate (at least 1).
	OutputLen int
	// Output optionally gives the generated token IDs (multi-turn text
	// traces, where the next turn's prompt contains this answer). Missing
	// ids are synthesized deterministically from (ID, position).
	Output []uint32
	// CacheSalt isolates this request's prefix (A.1 extra keys).
	CacheSalt string
	// PromptHashes optionally carries the prompt's full-block hash chain,
	// computed once by the caller with Engine.ChainHashes (the fleet shares a
	// hash seed), so the engine does not hash the prompt again.
	PromptHashes []uint64

	// Record (simulated ns; -1 = not yet).
	Arrived        int64
	FirstScheduled int64
	FirstToken     int64
	Completed      int64
	// NumCachedTokens is vLLM's num_cached_tokens: the prefix reused at
	// first scheduling — the true cache hit (A.6). With a CPU tier it
	// includes the tokens loaded from it (pd-offload.md B.6).
	NumCachedTokens int
	// NumCPUCachedTokens is the part of NumCachedTokens that came from the
	// CPU tier (0 without offloading); the rest came from the GPU prefix
	// cache.
	NumCPUCachedTokens int
	// Preemptions lists the times the request was preempted.
	Preemptions []int64

	// P/D disaggregation (pd-offload.md A.4–A.6, nixl.go). Remote makes the
	// request the decode leg of a disaggregated request: its prompt's KV is
	// read from the prefill engine Remote names instead of being computed.
	// HoldBlocks makes it a prefill leg: when it finishes, its blocks stay
	// allocated (delay_free_blocks, A.5) until Engine.Release.
	Remote     *RemotePrefill
	HoldBlocks bool
	// Decode-leg record: the tokens the engine's own prefix cache held at
	// admission (h_D), the blocks and bytes per rank read, and when the
	// read started (the admission) and ended (-1: no read).
	PullHitTokens      int
	PulledBlocks       int
	PullBytes          int64
	PullStart, PullEnd int64

	status          Status
	generated       []uint32 // output tokens so far
	hashes          []uint64 // chained hashes of full blocks of prompt+generated
	blocks          []int32  // block table
	numComputed     int
	numCachedBlocks int // blocks of the table registered in the prefix cache
	scheduledOnce   bool
	aborted         bool // Engine.Abort

	// CPU tier state (pd-offload.md B.4, B.6; offload.go).
	offStored   int  // next_stored_block_idx: blocks before it are offloaded or queued
	offInflight int  // store and load jobs of this request not yet complete
	loadTokens  int  // tokens being loaded from the CPU tier
	loadReady   bool // the load has completed (finished_recving seen)
}

// Status returns the request's current state.
func (r *Request) Status() Status { return r.status }

// NumTokens is the prompt plus the tokens generated so far.
func (r *Request) NumTokens() int { return len(r.Prompt) + len(r.generated) }

// Aborted reports whether Engine.Abort ended the request.
func (r *Request) Aborted() bool { return r.aborted }

// Generated returns the number of output tokens produced so far.
func (r *Request) Generated() int { return len(r.generated) }

// maxBlocks is the number of full blocks of the request's whole sequence
// (prompt plus every output token): the most its hash chain can hold.
func (r *Request) maxBlocks(bs int) int { return (len(r.Prompt) + r.OutputLen) / bs }

// token returns token i of prompt+generated.
func (r *Request) token(i int) uint32 {
	if i < len(r.Prompt) {
		return r.Prompt[i]
	}
	return r.generated[i-len(r.Prompt)]
}

// blockTokens returns the tokens of block i (full block), aliasing the
// prompt when the block lies inside it and copying into scratch otherwise.
func (r *Request) blockTokens(i, bs int, scratch *[]uint32) []uint32 {
	lo, hi := i*bs, (i+1)*bs
	if hi <= len(r.Prompt) {
		return r.Prompt[lo:hi]
	}
	s := (*scratch)[:0]
	for j := lo; j < hi; j++ {
		s = append(s, r.token(j))
	}
	*scratch = s
	return s
}

// OutputToken returns the id of output token k: Output[k] when the trace
// gives it, else the id synthesized deterministically from (ID, k). Other
// engines (replica/sglang) use it to generate the same answers as Engine.
func (r *Request) OutputToken(k int) uint32 { return r.nextOutputToken(k) }

// nextOutputToken returns the id of output token k.
func (r *Request) nextOutputToken(k int) uint32 {
	if k < len(r.Output) {
		return r.Output[k]
	}
	// splitmix64 of (ID, k), folded into the ordinary-token id range so
	// synthetic answers never collide with special tokens.
	z := uint64(r.ID)*0x9e3779b97f4a7c15 + uint64(k) + 0x632be59bd9b4e019
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return uint32(1000 + z%100000)
}
