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
