package workload

import (
	"fmt"
	"math"
	"sync"
	"unicode/utf8"

	"github.com/tiktoken-go/tokenizer"
)

// This file is a fast cl100k_base byte-pair encoder that gives exactly the
// ids of github.com/tiktoken-go/tokenizer v0.10.0 (whose regexp2-based
// pre-tokenizer and map-based merging cost about 40% of trace replay). The
// vocabulary is read out of the library once; bpe_split.go replaces the
// split regexp.

const (
	// cl100kRanks is the number of cl100k_base mergeable ranks: ids
	// 0..100255, where a token's id is also its merge rank. The special
	// tokens (100257 and up) are not part of the byte-level vocabulary.
	cl100kRanks = 100256
	// maxTokenLen bounds the byte length of every cl100k_base token; longer
	// pieces skip the whole-piece lookup.
	maxTokenLen = 128
	// noRank marks a pair of parts whose concatenation is not a token.
	noRank = math.MaxUint32
	// scanMaxLen is the longest piece merged by the quadratic scan; longer
	// ones (rare: long words, digit-free symbol runs) use the heap.
	scanMaxLen = 64
)

// bpeVocab is cl100k_base's byte-level vocabulary in an open-addressing hash
// table keyed by token bytes. It is immutable once built.
type bpeVocab struct {
	text   string   // every token's bytes, concatenated in id order
	off    []uint32 // token id's bytes are text[off[id]:off[id+1]]
	slots  []vocabSlot
	shift  uint     // slot index = hash >> shift
	pair   []uint32 // rank of the two-byte token b0 b1 at [b0<<8|b1], else noRank
	byteID [256]uint32
}

// vocabSlot holds a token's first (up to) eight bytes, so that most lookups
// compare one word and touch one cache line; n == 0 marks an empty slot.
type vocabSlot struct {
	prefix uint64 // little-endian, zero-padded
	id     uint32
	n      uint32 // byte length
}

// newBPEVocab reads the vocabulary out of c by decoding each rank.
func newBPEVocab(c tokenizer.Codec) (*bpeVocab, error) {
	v := &bpeVocab{off: make([]uint32, cl100kRanks+1)}
	buf := make([]byte, 0, 1<<20)
	for id := range uint(cl100kRanks) {
		s, err := c.Decode([]uint{id})
		if err != nil || s == "" || len(s) > maxTokenLen {
			return nil, fmt.Errorf("workload: cl100k_base token %d: %q, %v", id, s, err)
		}
		buf = append(buf, s...)
		v.off[id+1] = uint32(len(buf))
	}
	v.text = string(buf)

	const bits = 18 // 262,144 slots: load factor 0.38
	v.slots = make([]vocabSlot, 1<<bits)
	v.shift = 64 - bits
	mask := uint64(len(v.slots) - 1)
	for id := range uint32(cl100kRanks) {
		p, e := int(v.off[id]), int(v.off[id+1])
		if _, dup := v.lookup(v.text, p, e); dup {
			return nil, fmt.Errorf("workload: cl100k_base token %d: %q repeats", id, v.token(id))
		}
		prefix, h := vocabKey(v.text, p, e)
		i := h >> v.shift
		for v.slots[i].n != 0 {
			i = (i + 1) & mask
		}
		v.slots[i] = vocabSlot{prefix: prefix, id: id, n: uint32(e - p)}
	}

	v.pair = make([]uint32, 1<<16)
	for i := range v.pair {
		two := string([]byte{byte(i >> 8), byte(i)})
		v.pair[i] = v.rank(two, 0, 2)
	}
	for b := range 256 {
		// Every byte is a token: byte-level BPE can encode any input.
		id, ok := v.lookup(string([]byte{byte(b)}), 0, 1)
		if !ok {
			return nil, fmt.Errorf("workload: cl100k_base has no token for byte %#x", b)
		}
		v.byteID[b] = id
	}
	return v, nil
}

func (v *bpeVocab) token(id uint32) string {
	return v.text[v.off[id]:v.off[id+1]]
}

// le64 returns s[p:p+8] as a little-endian word (one load).
func le64(s string, p int) uint64 {
	b := s[p : p+8]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// prefix64 returns the first min(8, e-p) bytes of s[p:e] as a little-endian
// word, zero-padded; e > p.
func prefix64(s string, p, e int) uint64 {
	if n := e - p; p+8 <= len(s) {
		return le64(s, p) & (^uint64(0) >> (64 - 8*uint(min(n, 8))))
	}
	var x uint64
	for i := min(e, p+8) - 1; i >= p; i-- {
		x = x<<8 | uint64(s[i])
	}
	return x
}

// vocabKey returns the slot prefix and the hash of s[p:e]. The hash only
// needs to spread a fixed, non-adversarial key set.
func vocabKey(s string, p, e int) (prefix, h uint64) {
	n := e - p
	if n <= 8 && p+8 <= len(s) {
		prefix = le64(s, p) & (^uint64(0) >> (64 - 8*uint(n)))
		h = prefix + uint64(n)
	} else {
		prefix, h = vocabKeySlow(s, p, e)
	}
	h ^= h >> 31
	h *= 0x9e3779b97f4a7c15
	return prefix, h
}

// vocabKeySlow is vocabKey, before the final mix, for keys that are long or
// end the string.
func vocabKeySlow(s string, p, e int) (prefix, h uint64) {
	prefix = prefix64(s, p, e)
	h = prefix + uint64(e-p)
	for i := p + 8; i < e; i += 8 {
		h = (h^h>>29)*0xbf58476d1ce4e5b9 + prefix64(s, i, e)
	}
	return prefix, h
}

// lookup returns the id (= rank) of the token whose bytes are s[p:e].
func (v *bpeVocab) lookup(s string, p, e int) (uint32, bool) {
	n := e - p
	if n > maxTokenLen {
		return 0, false
	}
	prefix, h := vocabKey(s, p, e)
	mask := uint64(len(v.slots) - 1)
	for i := h >> v.shift; ; i = (i + 1) & mask {
		sl := &v.slots[i]
		if sl.n == 0 {
			return 0, false
		}
		if sl.prefix == prefix && sl.n == uint32(n) &&
			(n <= 8 || v.text[v.off[sl.id]+8:v.off[sl.id+1]] == s[p+8:e]) {
			return sl.id, true
		}
	}
}

// rank returns the rank of the token s[p:e], or noRank.
func (v *bpeVocab) rank(s string, p, e int) uint32 {
	if id, ok := v.lookup(s, p, e); ok {
		return id
	}
	return noRank
}

var encodeBufs = sync.Pool{New: func() any { return new([]uint32) }}

// encode tokenizes s as tiktoken-go's cl100k_base codec does (error mode
// "none"): regexp2 matches over []rune(s), which turns each byte of an
// invalid UTF-8 sequence into U+FFFD, and the pieces it returns are
// re-encoded from those runes, so the replaced text is what gets tokenized.
func (v *bpeVocab) encode(s string) []uint32 {
	if !utf8.ValidString(s) {
		s = string([]rune(s))
	}
	bp := encodeBufs.Get().(*[]uint32)
	out := (*bp)[:0]
	for p := 0; p < len(s); {
		e := pieceEnd(s, p)
		if e == p {
			// No piece starts here; the regexp tries the next rune.
			_, n := utf8.DecodeRuneInString(s[p:])
			p += n
			continue
		}
		if id, ok := v.lookup(s, p, e); ok {
			out = append(out, id)
		} else {
			out = v.appendMerged(out, s, p, e)
		}
		p = e
	}
	ids := make([]uint32, len(out))
	copy(ids, out)
	if cap(out) <= 1<<16 {
		*bp = out
		encodeBufs.Put(bp)
	}
	return ids
}

// appendMerged appends the tokens of a piece s[p:e] that is not itself a
// token (so e-p >= 2): starting from single bytes, repeatedly merge the
// adjacent pair of parts whose concatenation has the lowest rank, the
// leftmost such pair on ties, until no adjacent pair forms a token. This is
// tiktoken's merge order (codec.mergePairsScan / mergePairsHeap).
func (v *bpeVocab) appendMerged(dst []uint32, s string, p, e int) []uint32 {
	if e-p > scanMaxLen {
		return v.appendMergedHeap(dst, s, p, e)
	}
	piece := s[p:e]
	var (
		start [scanMaxLen + 1]int32 // part i is piece[start[i]:start[i+1]]
		id    [scanMaxLen]uint32    // token of part i
		rank  [scanMaxLen]uint32    // rank of part i merged with part i+1
	)
	m := len(piece) // number of parts
	for i := range m {
		start[i] = int32(i)
		id[i] = v.byteID[piece[i]]
	}
	start[m] = int32(m)
	for i := range m - 1 {
		rank[i] = v.pair[uint16(piece[i])<<8|uint16(piece[i+1])]
	}
	for m > 1 {
		best, bi := uint32(noRank), -1
		for i, r := range rank[:m-1] {
			if r < best {
				best, bi = r, i
			}
		}
		if bi < 0 {
			break
		}
		// Part bi absorbs part bi+1.
		id[bi] = best
		copy(start[bi+1:m], start[bi+2:m+1])
		copy(id[bi+1:m-1], id[bi+2:m])
		if bi+2 < m-1 {
			copy(rank[bi+1:m-2], rank[bi+2:m-1])
		}
		m--
		rank[bi] = noRank
		if bi+2 <= m {
			rank[bi] = v.rank(s, p+int(start[bi]), p+int(start[bi+2]))
		}
		if bi > 0 {
			rank[bi-1] = v.rank(s, p+int(start[bi-1]), p+int(start[bi+1]))
		}
	}
	return append(dst, id[:m]...)
}

// mergeNode is a part in appendMergedHeap's doubly linked list of parts,
// indexed by the part's start offset.
type mergeNode struct {
	prev, next int32  // neighbouring parts' starts; -1 at the ends
	rank       uint32 // rank of this part merged with the next, or noRank
	id         uint32 // token of this part
}

// appendMergedHeap merges like appendMerged in O(n log n) for long pieces:
// candidate pairs sit in a min-heap ordered by (rank, start), so that among
// equal ranks the leftmost pair merges first; entries made stale by a merge
// are skipped when popped.
func (v *bpeVocab) appendMergedHeap(dst []uint32, s string, p, e int) []uint32 {
	piece := s[p:e]
	n := int32(len(piece))
	nodes := make([]mergeNode, n+1)
	for i := range nodes {
		nodes[i] = mergeNode{prev: int32(i) - 1, next: int32(i) + 1, rank: noRank}
		if i < len(piece) {
			nodes[i].id = v.byteID[piece[i]]
		}
	}
	nodes[n].next = -1

	rankOf := func(i int32) uint32 {
		j := nodes[i].next
		if j < 0 || j == n {
			return noRank
		}
		return v.rank(s, p+int(i), p+int(nodes[j].next))
	}

	heap := make(pairHeap, 0, n)
	for i := int32(0); i+1 < n; i++ {
		if r := v.pair[uint16(piece[i])<<8|uint16(piece[i+1])]; r != noRank {
			nodes[i].rank = r
			heap = append(heap, pairCandidate{r, i})
		}
	}
	heap.init()

	for len(heap) > 0 {
		top := heap.pop()
		i := top.start
		if nodes[i].rank != top.rank {
			continue // stale: part i changed since this entry was pushed
		}
		j := nodes[i].next
		k := nodes[j].next
		nodes[i].id = top.rank
		nodes[j].rank = noRank
		nodes[i].next = k
		nodes[k].prev = i
		for _, b := range [2]int32{i, nodes[i].prev} {
			if b < 0 {
				continue
			}
			nodes[b].rank = rankOf(b)
			if nodes[b].rank != noRank {
				heap.push(pairCandidate{nodes[b].rank, b})
			}
		}
	}
	for i := int32(0); i < n; i = nodes[i].next {
		dst = append(dst, nodes[i].id)
	}
	return dst
}

type pairCandidate struct {
	rank  uint32
	start int32
}

// pairHeap is a binary min-heap of merge candidates by (rank, start).
type pairHeap []pairCandidate

func (h pairHeap) less(a, b int) bool {
	if h[a].rank != h[b].rank {
		return h[a].rank < h[b].rank
	}
	return h[a].start < h[b].start
}

func (h pairHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *pairHeap) push(c pairCandidate) {
	*h = append(*h, c)
	h.up(len(*h) - 1)
}

func (h *pairHeap) pop() pairCandidate {
	old := *h
	top := old[0]
	last := len(old) - 1
	old[0] = old[last]
	*h = old[:last]
	h.down(0)
	return top
}

func (h pairHeap) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !h.less(i, parent) {
			return
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
}

func (h pairHeap) down(i int) {
	for {
		child := 2*i + 1
		if child >= len(h) {
			return
		}
		if right := child + 1; right < len(h) && h.less(right, child) {
			child = right
		}
		if !h.less(child, i) {
			return
		}
		h[i], h[child] = h[child], h[i]
		i = child
	}
}
