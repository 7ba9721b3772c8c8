package workload

import (
	"encoding/binary"
	"errors"
	"io"
	"math"
	"slices"

	"github.com/cespare/xxhash/v2"
)

// Summary describes a trace: size, timing, lengths and prefix reuse.
type Summary struct {
	Source   string `json:"source"`
	Format   Format `json:"format"`
	Mode     string `json:"mode"`
	Requests int64  `json:"requests"`
	Skipped  int    `json:"skipped_invalid"`
	// Sessions counts requests that continue no earlier request; Continuations
	// the others (Sessions + Continuations = Requests).
	Sessions      int64   `json:"sessions"`
	Continuations int64   `json:"continuations"`
	MaxTurns      int     `json:"max_turns"`
	DurationSec   float64 `json:"duration_s"` // last arrival - first arrival
	RatePerSec    float64 `json:"rate_per_s"` // requests / duration
	Input         Lengths `json:"input_tokens"`
	Output        Lengths `json:"output_tokens"`

	// Trace blocks (hash-id traces only): the trace's own block ids.
	TraceBlockSize       int     `json:"trace_block_size,omitempty"`
	TraceBlocks          int64   `json:"trace_blocks,omitempty"`
	DistinctTraceBlocks  int64   `json:"distinct_trace_blocks,omitempty"`
	RepeatedTraceBlocks  float64 `json:"repeated_trace_block_share,omitempty"`
	BlockSize            int     `json:"block_size"`
	Blocks               int64   `json:"blocks"`               // full BlockSize-token prompt blocks
	RepeatedBlocks       float64 `json:"repeated_block_share"` // share of them already cached
	PromptTokens         int64   `json:"prompt_tokens"`        // Σ prompt tokens
	HitTokens            int64   `json:"hit_tokens"`           // Σ infinite-cache hits
	HitRatio             float64 `json:"infinite_cache_hit_ratio"`
	OutputBlocksInserted bool    `json:"output_blocks_cached"`
}

// Lengths summarizes a token-length distribution; percentiles are
// nearest-rank (the smallest value with at least p of the data at or below).
type Lengths struct {
	Mean float64 `json:"mean"`
	P50  int     `json:"p50"`
	P90  int     `json:"p90"`
	P99  int     `json:"p99"`
	Max  int     `json:"max"`
}

func lengthStats(v []int32) Lengths {
	if len(v) == 0 {
		return Lengths{}
	}
	slices.Sort(v)
	var sum float64
	for _, x := range v {
		sum += float64(x)
	}
	rank := func(p float64) int {
		i := int(math.Ceil(p*float64(len(v)))) - 1
		return int(v[max(i, 0)])
	}
	return Lengths{Mean: sum / float64(len(v)), P50: rank(0.5), P90: rank(0.9), P99: rank(0.99), Max: int(v[len(v)-1])}
}

// Inspect reads src to the end and summarizes it. The infinite-cache hit
// ratio is Σhit / Σprompt tokens, where a request's hit is the longest
// prefix of its chain of blockSize-token blocks already seen (a block is
// identified by its tokens, everything before it and the cache salt),
// capped at floor((n-1)/blockSize)*blockSize tokens (vLLM recomputes at
// least the last prompt token). After each request its full prompt blocks
// are cached, and, when the output tokens are known, the full blocks of
// prompt + output (minus the last output token, whose KV is never computed),
// as vLLM caches decode blocks.
//
// Hash-id requests (Request.HashIDs) are handled per trace block without
// materializing tokens: synthesized tokens depend only on the hash-id prefix
// and the offset in the block, so a blockSize block is identified by its
// trace block's prefix chain and its index in it. This needs the trace block
// size to be a multiple of blockSize.
func Inspect(src Source, blockSize int) (*Summary, error) {
	if blockSize <= 0 {
		return nil, errors.New("inspect: block size must be > 0")
	}
	s := &Summary{BlockSize: blockSize}
	if st, ok := src.(*Stream); ok {
		s.Source, s.Format, s.Mode = st.Name(), st.Format(), st.Mode().String()
	}
	var ins, outs []int32
	var first, last int64
	seenIDs := map[int64]struct{}{}
	reuse := NewPrefixReuse(blockSize)
	var repeated int64
	for {
		r, err := src.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if s.Requests == 0 {
			first = r.Arrival
		}
		last = max(last, r.Arrival)
		s.Requests++
		if r.Prev < 0 {
			s.Sessions++
		} else {
			s.Continuations++
		}
		s.MaxTurns = max(s.MaxTurns, r.Turn+1)
		ins = append(ins, int32(r.PromptLen))
		outs = append(outs, int32(r.OutputTokens))
		s.PromptTokens += int64(r.PromptLen)
		if reuse.byTraceBlocks(r) {
			s.TraceBlockSize = r.HashBlockSize
			for _, id := range r.HashIDs {
				if _, ok := seenIDs[id]; !ok {
					seenIDs[id] = struct{}{}
				}
			}
			s.TraceBlocks += int64(len(r.HashIDs))
		} else if r.OutputTokenIDs != nil {
			s.OutputBlocksInserted = true
		}
		st, err := reuse.Add(r)
		if err != nil {
			return nil, err
		}
		s.HitTokens += st.Hit
		repeated += st.Repeated
		s.Blocks += st.Full
	}
	if st, ok := src.(*Stream); ok {
		s.Skipped = st.Skipped()
	}
	s.Input, s.Output = lengthStats(ins), lengthStats(outs)
	if s.Requests > 0 {
		s.DurationSec = float64(last-first) / 1e9
		if s.DurationSec > 0 {
			s.RatePerSec = float64(s.Requests) / s.DurationSec
		}
	}
	s.DistinctTraceBlocks = int64(len(seenIDs))
	if s.TraceBlocks > 0 {
		s.RepeatedTraceBlocks = float64(s.TraceBlocks-s.DistinctTraceBlocks) / float64(s.TraceBlocks)
	}
	if s.Blocks > 0 {
		s.RepeatedBlocks = float64(repeated) / float64(s.Blocks)
	}
	if s.PromptTokens > 0 {
		s.HitRatio = float64(s.HitTokens) / float64(s.PromptTokens)
	}
	return s, nil
}

// PrefixReuse is an infinite prefix cache shared by a whole request
// sequence: Add returns how many tokens of a request's prompt every
// earlier request together had already computed (the longest prefix of
// its chain of blockSize-token blocks seen before, capped at
// floor((n-1)/blockSize)*blockSize tokens, vLLM's num_tokens-1 rule), then
// caches the request's full prompt blocks and, when its output token ids
// are known, the full blocks of prompt + output minus the last output
// token (whose KV vLLM never computes). A block is identified by its
// tokens, every token before it and the cache salt, as in vLLM.
//
// Hash-id requests (Request.HashIDs, with HashBlockSize a multiple of
// blockSize) are handled per trace block without reading tokens:
// synthesized tokens depend only on the hash-id prefix and the offset in
// the block, so a blockSize block is identified by its trace block's
// prefix chain (and salt) and its index in it. Memory grows with the
// distinct trace blocks (hash-id traces) or distinct blockSize blocks
// (token traces) of the sequence.
//
// `eppsim trace inspect` reports its total over a trace as the
// infinite-cache hit ratio; the simulator computes it per routed request
// as the top rung of the hit-rate ladder.
type PrefixReuse struct {
	bs      int
	nodes   map[uint64]int32    // hash-id path: prefix chain -> tokens seen in that trace block
	chains  map[uint64]struct{} // token path: block chain hashes
	scratch []byte
	// g is the granularity of a hit (tokens, ≤ bs; bs for vLLM's whole
	// blocks). Below bs (an SGLang radix cache, pages of g tokens), a
	// prefix that hits whole blocks continues into the next block by its
	// longest common prefix with the block that followed the same chain in
	// an earlier sequence: tails holds those blocks' tokens (whole or a
	// sequence's partial last block), keyed by the chain before them and
	// their first token, and tailSeen the partial ones already kept. So the
	// work stays per block: one lookup where the whole blocks stop.
	g        int
	tails    map[uint64][][]uint32
	tailSeen map[uint64]struct{}
}

// ReuseStats is one request's part of a PrefixReuse: Hit tokens found in
// the infinite cache, Repeated full prompt blocks already cached (in any
// position), Full prompt blocks.
type ReuseStats struct {
	Hit, Repeated, Full int64
}

// NewPrefixReuse returns an empty infinite cache of blockSize-token blocks
// (blockSize > 0).
func NewPrefixReuse(blockSize int) *PrefixReuse {
	return NewPrefixReuseGranular(blockSize, blockSize)
}

// NewPrefixReuseGranular is NewPrefixReuse whose hits count in units of
// granularity tokens (1 ≤ granularity ≤ blockSize) rather than whole
// blocks: a prefix cache that reuses any prefix up to the prompt's last
// token but one, floored to granularity (SGLang's radix cache with pages of
// that size, sglang-engine.md A.3). Repeated and Full still count whole
// blocks.
func NewPrefixReuseGranular(blockSize, granularity int) *PrefixReuse {
	bs := max(blockSize, 1)
	p := &PrefixReuse{bs: bs, g: min(max(granularity, 1), bs), nodes: map[uint64]int32{}, chains: map[uint64]struct{}{}}
	if p.g < bs {
		p.tails, p.tailSeen = map[uint64][][]uint32{}, map[uint64]struct{}{}
	}
	return p
}

// tailKey keys the tails that follow chain prev and start with token t.
func tailKey(prev uint64, t uint32) uint64 { return splitmix64(prev ^ uint64(t)*0x9e3779b97f4a7c15) }

// addTail keeps toks (a whole block after chain prev, new to the cache,
// or a partial last block not seen before under hash h) for extensions.
func (p *PrefixReuse) addTail(prev uint64, toks []uint32, partial bool, h uint64) {
	if p.tails == nil || len(toks) == 0 {
		return
	}
	if partial {
		if _, seen := p.tailSeen[h]; seen {
			return
		}
		p.tailSeen[h] = struct{}{}
	}
	k := tailKey(prev, toks[0])
	p.tails[k] = append(p.tails[k], slices.Clone(toks))
}

// extension is the longest common prefix of rem (the tokens after chain
// prev) with a tail kept after prev.
func (p *PrefixReuse) extension(prev uint64, rem []uint32) int {
	if p.tails == nil || len(rem) == 0 {
		return 0
	}
	best := 0
	for _, t := range p.tails[tailKey(prev, rem[0])] {
		m := 0
		for m < len(t) && m < len(rem) && t[m] == rem[m] {
			m++
		}
		best = max(best, m)
	}
	return best
}

// byTraceBlocks reports whether r is handled per trace block.
func (p *PrefixReuse) byTraceBlocks(r *Request) bool {
	return r.HashIDs != nil && r.HashBlockSize > 0 && r.HashBlockSize%p.bs == 0
}

// Add returns r's reuse from every request added before it, then adds r.
// It fails only for a request whose tokens are not materialized and that
// has no usable hash ids.
func (p *PrefixReuse) Add(r *Request) (ReuseStats, error) {
	if p.byTraceBlocks(r) {
		return p.hashIDHits(r), nil
	}
	if r.PromptTokens == nil && r.PromptLen > 0 {
		return ReuseStats{}, errors.New("inspect: request without prompt tokens (NoTokens on a text trace?)")
	}
	return p.tokenHits(r), nil
}

// hashIDHits computes a hash-id request's reuse, then caches its blocks.
// p.nodes maps the chain of trace-block ids up to block B (and the salt)
// to how many tokens of block B any earlier request had.
func (p *PrefixReuse) hashIDHits(r *Request) ReuseStats {
	nodes, bs, g := p.nodes, p.bs, p.g
	var hit, repeated, full int64
	n := r.PromptLen
	tb := r.HashBlockSize
	var acc uint64 = 0x68617368696473
	if r.CacheSalt != "" {
		// A salted prompt shares no block with an unsalted or differently
		// salted one (vLLM's extra keys of the first block).
		acc ^= xxhash.Sum64String(r.CacheSalt)
	}
	hitting := true
	for B, id := range r.HashIDs {
		acc = splitmix64(acc*0x9e3779b97f4a7c15 ^ uint64(id))
		l := tb
		if B == len(r.HashIDs)-1 {
			l = n - tb*(len(r.HashIDs)-1)
		}
		seen, ok := nodes[acc]
		common := 0
		if ok {
			common = min(int(seen), l) / g * g
		}
		repeated += int64(common / bs)
		full += int64(l / bs)
		if hitting {
			hit += int64(common)
			if common < l {
				hitting = false
			}
		}
		if !ok || int32(l) > seen {
			nodes[acc] = int32(l)
		}
	}
	return ReuseStats{Hit: max(min(hit, int64((n-1)/g*g)), 0), Repeated: repeated, Full: full}
}

// tokenHits is hashIDHits over materialized tokens.
func (p *PrefixReuse) tokenHits(r *Request) ReuseStats {
	chains, bs, scratch := p.chains, p.bs, p.scratch
	var hit, repeated, full int64
	var d xxhash.Digest
	seed := xxhash.Sum64String(r.CacheSalt)
	prev := seed
	n := len(r.PromptTokens)
	hitting := true
	if cap(scratch) < 8+4*bs {
		scratch = make([]byte, 8+4*bs)
	}
	scratch = scratch[:8+4*bs]
	hashBlock := func(toks []uint32) uint64 {
		binary.LittleEndian.PutUint64(scratch, prev)
		for i, t := range toks {
			binary.LittleEndian.PutUint32(scratch[8+4*i:], t)
		}
		d.Reset()
		d.Write(scratch[:8+4*len(toks)])
		return d.Sum64()
	}
	for b := 0; (b+1)*bs <= n; b++ {
		blk := r.PromptTokens[b*bs : (b+1)*bs]
		h := hashBlock(blk)
		_, ok := chains[h]
		full++
		if ok {
			repeated++
			if hitting {
				hit += int64(bs)
			}
		} else {
			if hitting {
				// The whole blocks stop here; a finer cache goes on.
				hit += int64(p.extension(prev, blk))
			}
			hitting = false
			chains[h] = struct{}{}
			p.addTail(prev, blk, false, 0)
		}
		prev = h
	}
	if rest := r.PromptTokens[n/bs*bs:]; len(rest) > 0 && p.tails != nil {
		if hitting {
			hit += int64(p.extension(prev, rest))
		}
		p.addTail(prev, rest, true, hashBlock(rest)^uint64(len(rest)))
	}
	hit = max(min(hit, int64(n-1)), 0) / int64(p.g) * int64(p.g)
	// Cache decode blocks: prompt + output minus the last output token.
	if len(r.OutputTokenIDs) > 1 {
		out := r.OutputTokenIDs[:len(r.OutputTokenIDs)-1]
		total := n + len(out)
		blk := make([]uint32, bs)
		for b := n / bs; (b+1)*bs <= total; b++ {
			for i := range bs {
				pos := b*bs + i
				if pos < n {
					blk[i] = r.PromptTokens[pos]
				} else {
					blk[i] = out[pos-n]
				}
			}
			h := hashBlock(blk)
			if _, ok := chains[h]; !ok {
				chains[h] = struct{}{}
				p.addTail(prev, blk, false, 0)
			}
			prev = h
		}
		if p.tails != nil {
			if k := total % bs; k > 0 {
				rest := make([]uint32, k)
				for i := range rest {
					pos := total - k + i
					if pos < n {
						rest[i] = r.PromptTokens[pos]
					} else {
						rest[i] = out[pos-n]
					}
				}
				p.addTail(prev, rest, true, hashBlock(rest)^uint64(k))
			}
		}
	}
	p.scratch = scratch
	return ReuseStats{Hit: hit, Repeated: repeated, Full: full}
}
