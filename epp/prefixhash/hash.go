package prefixhash

import (
	"encoding/binary"
	"math/bits"
	"unsafe"

	"github.com/cespare/xxhash/v2"

	"github.com/eppsim/eppsim/epp"
	"github.com/eppsim/eppsim/internal/memo"
)

// BytesPerToken is the number of text bytes the estimate backend packs into
// one pseudo-token (spec §5.2, upstream bytesPerToken).
const BytesPerToken = 4

// Seed returns the chain seed of one prompt: xxh64 of the model name followed
// by the cache salt, plain concatenation (spec §5.3).
func Seed(model, salt string) uint64 {
	var d xxhash.Digest
	d.Reset()
	_, _ = d.WriteString(model)
	_, _ = d.WriteString(salt)
	return d.Sum64()
}

// chainHash is the outer hash of one block: xxh64(LE64(blockID) ++ LE64(prev)).
//
// It is XXH64 with seed 0 written out for this one 16-byte input (two
// stripe-less rounds and the avalanche), which the compiler inlines,
// instead of a call through xxhash.Sum64's general loop per block;
// TestChainHashMatchesXXHash pins it to the library.
func chainHash(blockID, prev uint64) uint64 {
	const (
		prime1 = 11400714785074694791
		prime2 = 14029467366897019727
		prime3 = 1609587929392839161
		prime4 = 9650029242287828579
		prime5 = 2870177450012600261
	)
	h := uint64(prime5 + 16)
	for _, lane := range [2]uint64{blockID, prev} {
		k := bits.RotateLeft64(lane*prime2, 31) * prime1
		h = bits.RotateLeft64(h^k, 27)*prime1 + prime4
	}
	h ^= h >> 33
	h *= prime2
	h ^= h >> 29
	h *= prime3
	h ^= h >> 32
	return h
}

// littleEndian reports whether the host stores uint32 little-endian, in which
// case token slices can be hashed in place.
var littleEndian = func() bool {
	x := uint32(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// tokenBytes returns the little-endian byte image of tokens. On little-endian
// hosts it aliases the token memory (no copy); otherwise it encodes into buf,
// which must hold 4·len(tokens) bytes.
func tokenBytes(tokens []uint32, buf []byte) []byte {
	if len(tokens) == 0 {
		return nil
	}
	if littleEndian {
		return unsafe.Slice((*byte)(unsafe.Pointer(&tokens[0])), len(tokens)*4)
	}
	b := buf[:len(tokens)*4]
	for i, t := range tokens {
		binary.LittleEndian.PutUint32(b[4*i:], t)
	}
	return b
}

// BlockID is the inner hash of one block: xxh64 of its tokens as
// little-endian uint32 bytes.
func BlockID(tokens []uint32) uint64 {
	var stack [256]byte
	var buf []byte
	if !littleEndian {
		if len(tokens)*4 <= len(stack) {
			buf = stack[:]
		} else {
			buf = make([]byte, len(tokens)*4)
		}
	}
	return xxhash.Sum64(tokenBytes(tokens, buf))
}

// numBlocks is how many hashes one prompt of n tokens yields at block size bs
// with cap maxBlocks: every started block, the partial tail included.
func numBlocks(n, bs, maxBlocks int) int {
	if n <= 0 || bs <= 0 || maxBlocks <= 0 {
		return 0
	}
	nb := (n + bs - 1) / bs
	return min(nb, maxBlocks)
}

// AppendHashes appends the chained block hashes of one prompt to dst (spec
// §5.3): blocks of bs tokens, the last one possibly partial, at most
// maxBlocks of them. A non-positive bs or maxBlocks yields no hashes.
func AppendHashes(dst []uint64, seed uint64, tokens []uint32, bs, maxBlocks int) []uint64 {
	nb := numBlocks(len(tokens), bs, maxBlocks)
	if nb == 0 {
		return dst
	}
	var buf []byte
	if !littleEndian {
		buf = make([]byte, min(bs, len(tokens))*4)
	}
	prev := seed
	for i := range nb {
		lo := i * bs
		hi := min(lo+bs, len(tokens))
		id := xxhash.Sum64(tokenBytes(tokens[lo:hi], buf))
		prev = chainHash(id, prev)
		dst = append(dst, prev)
	}
	return dst
}

// BlockHashes returns one hash list per non-empty prompt (spec §5.3,
// upstream prefixhash.GetBlockHashes): prompts that yield no hash are
// skipped, and the result is nil when no prompt yields one. All lists share
// one backing array.
func BlockHashes(model, salt string, prompts [][]uint32, bs, maxBlocks int) [][]uint64 {
	total, lists := 0, 0
	for _, p := range prompts {
		if n := numBlocks(len(p), bs, maxBlocks); n > 0 {
			total += n
			lists++
		}
	}
	if total == 0 {
		return nil
	}
	seed := Seed(model, salt)
	backing := make([]uint64, 0, total)
	out := make([][]uint64, 0, lists)
	for _, p := range prompts {
		start := len(backing)
		backing = AppendHashes(backing, seed, p, bs, maxBlocks)
		if len(backing) > start {
			out = append(out, backing[start:len(backing):len(backing)])
		}
	}
	return out
}

// GetBlockHashes is BlockHashes for a request: the model is the request's
// TargetModel, the prompts and cache salt come from its TokenizedRequest.
// It returns nil when the request has no tokens.
//
// When the request's tokens are shared through its Memo (TokenizeShared),
// the hashes are memoized there too: callers must not change them.
func GetBlockHashes(req *epp.Request, bs, maxBlocks int) [][]uint64 {
	if req == nil || req.Tokenized == nil || req.Tokenized.TokenCount() == 0 {
		return nil
	}
	tr := req.Tokenized
	compute := func() [][]uint64 { return BlockHashes(req.TargetModel, tr.CacheSalt, tr.Prompts, bs, maxBlocks) }
	if !req.Memo.Has(sharedTokens{tr}) {
		return compute()
	}
	return memo.Get(req.Memo, hashesKey{tr, req.TargetModel, bs, maxBlocks}, compute)
}

// hashesKey memoizes the block hashes of shared tokens.
type hashesKey struct {
	tr            *epp.TokenizedRequest
	model         string
	bs, maxBlocks int
}
