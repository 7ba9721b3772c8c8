package precise

import (
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/cespare/xxhash/v2"

	"github.com/eppsim/eppsim/epp"
)

// Hash algorithms of the token processor (spec §6.1 hashAlgorithm).
const (
	AlgoCBORFNV = "cbor-fnv"
	AlgoXXH64   = "xxh64"
)

// DefaultBlockSize is the token processor's default block size (vLLM's).
const DefaultBlockSize = 16

const (
	fnvOffset64 = 0xcbf29ce484222325
	fnvPrime64  = 0x100000001b3
)

func fnv1a(b []byte) uint64 {
	h := uint64(fnvOffset64)
	for _, c := range b {
		h ^= uint64(c)
		h *= fnvPrime64
	}
	return h
}

// Hasher computes KV-block keys (spec §6.2). The request side and the
// event side share it so that the same tokens give the same keys. Only full
// blocks are keyed; the partial tail is dropped.
type Hasher struct {
	blockSize int
	xxh       bool
	init      uint64
}

// NewHasher returns a key hasher for the given block size (tokens), hash
// seed and algorithm ("" = cbor-fnv).
func NewHasher(blockSize int, hashSeed, algorithm string) (*Hasher, error) {
	if blockSize <= 0 {
		return nil, fmt.Errorf("blockSizeTokens must be greater than 0, got %d", blockSize)
	}
	h := &Hasher{blockSize: blockSize}
	switch algorithm {
	case "", AlgoCBORFNV:
		h.init = fnv1a([]byte(hashSeed))
	case AlgoXXH64:
		h.xxh = true
		h.init = xxhash.Sum64String(hashSeed)
	default:
		return nil, fmt.Errorf("unsupported hashAlgorithm %q: accepted values are %q and %q", algorithm, AlgoCBORFNV, AlgoXXH64)
	}
	return h, nil
}

// BlockSize is the number of tokens per key.
func (h *Hasher) BlockSize() int { return h.blockSize }

// ModelSeed is the chain start for a model: the parent of block 0 when a
// chain is not continued from an existing key.
func (h *Hasher) ModelSeed(model string) uint64 {
	var enc cborEncoder
	return h.hashBlock(&enc, h.init, nil, true, []string{model})
}

// hashBlock is one link of the chain. For cbor-fnv the payload is the
// canonical CBOR of [parent, tokens, extra]: tokens is null when nilTokens,
// extra is null when empty, a text string when it is the model seed (one
// string with nilTokens), else an array of {"Hash": s} maps.
func (h *Hasher) hashBlock(enc *cborEncoder, parent uint64, tokens []uint32, nilTokens bool, extras []string) uint64 {
	if h.xxh {
		var d xxhash.Digest
		d.Reset()
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], parent)
		_, _ = d.Write(b[:])
		var tb [256]byte
		for i := 0; i < len(tokens); {
			n := min(len(tokens)-i, len(tb)/4)
			for j := range n {
				binary.LittleEndian.PutUint32(tb[4*j:], tokens[i+j])
			}
			_, _ = d.Write(tb[:4*n])
			i += n
		}
		for _, s := range extras {
			binary.LittleEndian.PutUint64(b[:], uint64(len(s)))
			_, _ = d.Write(b[:])
			_, _ = d.WriteString(s)
		}
		return d.Sum64()
	}
	if !nilTokens && len(extras) == 0 {
		return fnvBlock(parent, tokens)
	}
	enc.reset()
	enc.arrayHeader(3)
	enc.uint(parent)
	if nilTokens {
		enc.null()
	} else {
		enc.arrayHeader(uint64(len(tokens)))
		for _, t := range tokens {
			enc.uint(uint64(t))
		}
	}
	switch {
	case nilTokens && len(extras) == 1:
		// The model seed: extra is the model name itself.
		enc.text(extras[0])
	case len(extras) == 0:
		enc.null()
	default:
		enc.arrayHeader(uint64(len(extras)))
		for _, s := range extras {
			enc.mapHeader(1)
			enc.text("Hash")
			enc.text(s)
		}
	}
	return fnv1a(enc.buf)
}

// fnvBlock is hashBlock for cbor-fnv and a block without extras — every
// block but the first of a prompt without multimodal items, and the first
// too without a cache salt — in one pass: the canonical CBOR of
// [parent, tokens, null] goes byte by byte into FNV-1a, as the encoder
// would write it, with no buffer in between, so that the encoding runs in
// the shadow of FNV's chain of dependent multiplications.
func fnvBlock(parent uint64, tokens []uint32) uint64 {
	h := fnvStep(fnvOffset64, 0x83) // array of 3
	h = fnvHead(h, 0, parent)
	h = fnvHead(h, 4, uint64(len(tokens)))
	for _, t := range tokens {
		switch {
		case t < 24:
			h = fnvStep(h, byte(t))
		case t <= 0xff:
			h = fnvStep(fnvStep(h, 24), byte(t))
		case t <= 0xffff:
			h = fnvStep(fnvStep(fnvStep(h, 25), byte(t>>8)), byte(t))
		default:
			h = fnvStep(fnvStep(fnvStep(fnvStep(fnvStep(h, 26), byte(t>>24)), byte(t>>16)), byte(t>>8)), byte(t))
		}
	}
	return fnvStep(h, 0xf6) // null
}

func fnvStep(h uint64, c byte) uint64 { return (h ^ uint64(c)) * fnvPrime64 }

// fnvHead feeds the CBOR head of major type major and argument v (shortest
// form, as cborEncoder.head writes it).
func fnvHead(h uint64, major byte, v uint64) uint64 {
	m := major << 5
	switch {
	case v < 24:
		return fnvStep(h, m|byte(v))
	case v <= 0xff:
		return fnvStep(fnvStep(h, m|24), byte(v))
	case v <= 0xffff:
		return fnvStep(fnvStep(fnvStep(h, m|25), byte(v>>8)), byte(v))
	case v <= 0xffffffff:
		h = fnvStep(h, m|26)
		for s := 24; s >= 0; s -= 8 {
			h = fnvStep(h, byte(v>>s))
		}
		return h
	}
	h = fnvStep(h, m|27)
	for s := 56; s >= 0; s -= 8 {
		h = fnvStep(h, byte(v>>s))
	}
	return h
}

// Keys returns the keys of the full blocks of tokens, chained from parent
// (0 = start from the model seed, as upstream's EmptyBlockHash). extras, when
// non-nil, gives the extra keys of each full block (len must be ≥ the number
// of full blocks; missing entries count as none).
func (h *Hasher) Keys(parent uint64, tokens []uint32, model string, extras [][]string) []uint64 {
	n := len(tokens) / h.blockSize
	if n == 0 {
		return nil
	}
	return h.AppendKeys(make([]uint64, 0, n), parent, tokens, model, extras)
}

// AppendKeys is Keys appending to dst.
func (h *Hasher) AppendKeys(dst []uint64, parent uint64, tokens []uint32, model string, extras [][]string) []uint64 {
	n := len(tokens) / h.blockSize
	if n == 0 {
		return dst
	}
	var enc cborEncoder
	prev := parent
	if prev == 0 {
		prev = h.hashBlock(&enc, h.init, nil, true, []string{model})
	}
	for b := range n {
		var ex []string
		if b < len(extras) {
			ex = extras[b]
		}
		prev = h.hashBlock(&enc, prev, tokens[b*h.blockSize:(b+1)*h.blockSize], false, ex)
		dst = append(dst, prev)
	}
	return dst
}

// RequestExtras builds the per-block extra keys of one prompt (spec §6.2):
// the hashes of multimodal items overlapping each full block, in placeholder
// order, then, on block 0, the cache salt. It returns nil when there are
// none.
func RequestExtras(numTokens, blockSize int, mm []epp.MultiModalFeature, salt string) [][]string {
	n := numTokens / blockSize
	if n == 0 || (len(mm) == 0 && salt == "") {
		return nil
	}
	extras := make([][]string, n)
	if len(mm) > 0 {
		feats := append([]epp.MultiModalFeature(nil), mm...)
		sort.SliceStable(feats, func(i, j int) bool { return feats[i].Offset < feats[j].Offset })
		for b := range n {
			lo, hi := b*blockSize, (b+1)*blockSize
			for _, f := range feats {
				if f.Count > 0 && f.Offset < hi && f.Offset+f.Count > lo {
					extras[b] = append(extras[b], f.Hash)
				}
			}
		}
	}
	if salt != "" {
		extras[0] = append(extras[0], salt)
	}
	return extras
}

// cborEncoder writes the canonical CBOR subset the token processor needs:
// unsigned integers, null, text strings, arrays and maps (RFC 8949 §4.2.1:
// shortest argument encoding, definite lengths).
type cborEncoder struct {
	buf []byte
	arr [512]byte
}

func (e *cborEncoder) reset() {
	if e.buf == nil {
		e.buf = e.arr[:0]
	}
	e.buf = e.buf[:0]
}

func (e *cborEncoder) head(major byte, v uint64) {
	m := major << 5
	switch {
	case v < 24:
		e.buf = append(e.buf, m|byte(v))
	case v <= 0xff:
		e.buf = append(e.buf, m|24, byte(v))
	case v <= 0xffff:
		e.buf = append(e.buf, m|25, byte(v>>8), byte(v))
	case v <= 0xffffffff:
		e.buf = append(e.buf, m|26, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	default:
		e.buf = append(e.buf, m|27)
		e.buf = binary.BigEndian.AppendUint64(e.buf, v)
	}
}

func (e *cborEncoder) uint(v uint64)        { e.head(0, v) }
func (e *cborEncoder) text(s string)        { e.head(3, uint64(len(s))); e.buf = append(e.buf, s...) }
func (e *cborEncoder) arrayHeader(n uint64) { e.head(4, n) }
func (e *cborEncoder) mapHeader(n uint64)   { e.head(5, n) }
func (e *cborEncoder) null()                { e.buf = append(e.buf, 0xf6) }
