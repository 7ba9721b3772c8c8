package replica

import (
	"encoding/binary"
	"slices"

	"github.com/cespare/xxhash/v2"
)

// BlockHasher computes vLLM-style chained block hashes (A.1): the hash of
// block i covers (hash of block i-1, the block's tokens), so it identifies
// the whole prefix 0..i. vLLM's exact SHA-256 values are not needed — any
// deterministic chain gives identical hashes for identical token prefixes,
// like vLLM with a fixed PYTHONHASHSEED — so eppsim uses xxhash64 over
// little-endian (parent, token...) bytes, seeded per fleet.
type BlockHasher struct {
	blockSize int
	noneHash  uint64 // NONE_HASH: the parent of a request's first block
	buf       []byte
}

// NewBlockHasher returns a hasher for blockSize-token blocks whose chains
// start from a value derived from seed.
func NewBlockHasher(blockSize int, seed uint64) *BlockHasher {
	var s [8]byte
	binary.LittleEndian.PutUint64(s[:], seed)
	return &BlockHasher{
		blockSize: blockSize,
		noneHash:  xxhash.Sum64(s[:]),
		buf:       make([]byte, 8+4*blockSize),
	}
}

// Root returns the parent hash of a first block. A non-empty cache salt
// changes it: vLLM puts cache_salt in the first block's extra keys (A.1), so
// requests with different salts share no block.
func (h *BlockHasher) Root(cacheSalt string) uint64 {
	if cacheSalt == "" {
		return h.noneHash
	}
	d := xxhash.New()
	var p [8]byte
	binary.LittleEndian.PutUint64(p[:], h.noneHash)
	d.Write(p[:])
	d.WriteString(cacheSalt)
	return d.Sum64()
}

// Next returns the hash of a full block of tokens after parent.
func (h *BlockHasher) Next(parent uint64, tokens []uint32) uint64 {
	b := h.buf[:8+4*len(tokens)]
	binary.LittleEndian.PutUint64(b, parent)
	for i, t := range tokens {
		binary.LittleEndian.PutUint32(b[8+4*i:], t)
	}
	return xxhash.Sum64(b)
}

// Chain appends the hashes of every full block of tokens to dst, continuing
// the chain from parent.
func (h *BlockHasher) Chain(dst []uint64, parent uint64, tokens []uint32) []uint64 {
	bs := h.blockSize
	dst = slices.Grow(dst, len(tokens)/bs)
	for i := 0; i+bs <= len(tokens); i += bs {
		parent = h.Next(parent, tokens[i:i+bs])
		dst = append(dst, parent)
	}
	return dst
}

// PromptChainIDs is Engine.ChainHashIDs for engines with h's block size
// and seed: a whole prompt's chain from its trace block ids, or ok false
// when the ids do not fit the contract of ChainIDs.
func (h *BlockHasher) PromptChainIDs(tokens []uint32, ids []int64, idBlockSize int, cacheSalt string) (hashes []uint64, ok bool) {
	bs := h.blockSize
	if idBlockSize <= 0 || idBlockSize%bs != 0 || idBlockSize/bs > 1<<16 || len(ids)*idBlockSize < len(tokens) {
		return nil, false
	}
	return h.ChainIDs(nil, h.Root(cacheSalt), tokens, ids, idBlockSize), true
}

// ChainIDs is Chain for a prompt synthesized from trace block ids (Mooncake,
// Alibaba hash-id traces): tokens are the prompt, ids its trace block ids,
// each covering idBlockSize tokens (a multiple of the engine block size;
// the last id may cover fewer). It returns the same number of hashes as
// Chain, without hashing every token.
//
// It relies on the synthesis contract of such traces (workload/hashid.go):
// within one trace, token k of trace block id is a pure function of
// (id, k), so engine block j of trace block B holds exactly the tokens
// determined by (ids[B], j). The first engine block is hashed from its
// tokens as Chain does (so the chain root still carries the cache salt and
// the trace's synthesis seed); every later block's hash is a cheap mix of
// (parent, id, j). Two hash-id prompts of a trace then share a hash chain
// prefix exactly when they share a token prefix (up to collisions of the
// synthesis and of 64-bit hashes, negligible either way), which is all the
// engine and the KV-event consumers rely on: engine hashes are opaque keys
// (the precise producer recomputes its own keys from the events' tokens).
// Output blocks extend the chain from the last prompt hash with Next as
// usual.
func (h *BlockHasher) ChainIDs(dst []uint64, parent uint64, tokens []uint32, ids []int64, idBlockSize int) []uint64 {
	bs := h.blockSize
	n := len(tokens) / bs
	if n == 0 {
		return dst
	}
	per := idBlockSize / bs // engine blocks per trace block
	dst = slices.Grow(dst, n)
	parent = h.Next(parent, tokens[:bs])
	dst = append(dst, parent)
	for g := 1; g < n; g++ {
		parent = idStep(parent, ids[g/per], g%per)
		dst = append(dst, parent)
	}
	return dst
}

// idStep is ChainIDs's chain step: the hash of engine block j of trace block
// id after parent. The key id<<16|j is injective (ids < 2^47, j < 2^16,
// workload's limits) and mix64 is a bijection, so for a fixed parent
// distinct (id, j) never collide, and for a fixed key distinct parents
// never do.
func idStep(parent uint64, id int64, j int) uint64 {
	return mix64(parent ^ mix64((uint64(id)<<16|uint64(j))+0x9e3779b97f4a7c15))
}

// mix64 is the splitmix64 finalizer, a bijection on 64-bit values.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
