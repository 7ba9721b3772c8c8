package workload

import (
	"encoding/json"
	"slices"
	"strconv"
)

// Limits of hash-id synthesis. Token k of block h is keyed by
// seed ^ h<<16 ^ k (traces.md C.7), which is injective in (h, k) for
// h < 2^47 and k < 2^16.
const (
	maxHashID    = 1<<47 - 1
	maxBlockSize = 1 << 16
	// Azure requests get virtual block ids above every real hash id.
	azureSystemBlock = 1 << 47
	azureUniqueBase  = 1<<47 + 1<<16
	azureBlock       = 512
	maxAzureRequests = 1<<34 - 1
)

// blockSynth synthesizes the tokens and text of hash-id blocks: token k of
// block h is Lexicon.Word(splitmix64(seed ^ h<<16 ^ k)). Equal ids at equal
// offsets give equal tokens and words, so equal hash-id prefixes give
// token-identical and byte-identical prompt prefixes; distinct ids give
// independent content. Nothing is cached: a token costs one splitmix64 and a
// table lookup (2-3 ns), cheaper than any cache lookup and free of memory.
type blockSynth struct {
	seed uint64
	lex  *Lexicon
	// text holds the words of up to synthChunk tokens before they are
	// appended to a prompt (see appendWords).
	text synthText
}

// synthChunk is how many tokens appendWords synthesizes at a time.
const synthChunk = 256

// synthText has room for synthChunk words of at most lexWordPad bytes, the
// last copied as a whole lexWordPad-byte table slot.
type synthText [synthChunk*lexWordPad + lexWordPad]byte

// appendBlock appends tokens [from, to) of block h and, if withText, their
// words to text.
func (s *blockSynth) appendBlock(toks []uint32, text []byte, withText bool, h uint64, from, to int) ([]uint32, []byte) {
	base := s.seed ^ h<<16
	n0 := len(toks)
	toks = slices.Grow(toks, to-from)[:n0+to-from]
	out := toks[n0:]
	if !withText {
		ids := &s.lex.ids
		for j := range out {
			out[j] = ids[lexSlot(base^uint64(from+j))]
		}
		return toks, text
	}
	// Chunks do not cross multiples of synthChunk (a power of two): token
	// a+r of the chunk at a (a multiple of it, r < synthChunk) has key
	// base^(a+r) == (base^a)^r.
	for k := from; k < to; {
		end := min(to, (k/synthChunk+1)*synthChunk)
		n := s.lex.appendWords(out[k-from:end-from], &s.text, base^uint64(k&^(synthChunk-1)), k&(synthChunk-1))
		text = append(text, s.text[:n]...)
		k = end
	}
	return toks, text
}

// appendWords sets out[j] to the token of key^(j0+j), writes their words to
// dst and returns the words' length (j0+len(out) <= synthChunk). It is the
// hot loop of prompt synthesis, kept small so that the compiler keeps its
// values in registers; the fixed-size dst and the masked offset let it drop
// every bounds check, and each word is written as its whole 16-byte table
// slot (one move) of which only the word's length is kept.
func (lx *Lexicon) appendWords(out []uint32, dst *synthText, key uint64, j0 int) int {
	ids, lens, words, d := lx.ids[:], lx.lens[:], lx.words[:], dst[:]
	l := 0
	for j := range out {
		i := lexSlot(key ^ uint64(j0+j))
		n := int(lens[i])
		out[j] = ids[i]
		// l < synthChunk*lexWordPad: at most synthChunk-1 words precede.
		x := l & (synthChunk*lexWordPad - 1)
		*(*[lexWordPad]byte)(d[x : x+lexWordPad]) = *(*[lexWordPad]byte)(words[i*lexWordPad:])
		l = x + n
	}
	return l
}

// hashPrompt materializes the prompt of a hash-id request (every id but the
// last gives blockSize tokens, the last the rest of inputLen) and, unless
// modelJSON is nil, its completions body
// {"model":M,"prompt":TEXT,"max_tokens":N}. The text is lexicon words
// (lowercase ASCII letters and spaces) and needs no JSON escaping.
func (s *blockSynth) hashPrompt(ids []int64, blockSize, inputLen int, modelJSON []byte, maxTokens int) ([]uint32, []byte) {
	toks := make([]uint32, 0, inputLen)
	var body []byte
	withText := modelJSON != nil
	if withText {
		body = s.bodyStart(modelJSON, inputLen)
	}
	for i, h := range ids {
		n := blockSize
		if i == len(ids)-1 {
			n = inputLen - blockSize*(len(ids)-1)
		}
		toks, body = s.appendBlock(toks, body, withText, uint64(h), 0, n)
	}
	if withText {
		body = bodyEnd(body, maxTokens)
	}
	return toks, body
}

// bodyStart allocates a completions body with room for about n tokens of text.
func (s *blockSynth) bodyStart(modelJSON []byte, n int) []byte {
	b := make([]byte, 0, int(float64(n)*(s.lex.bytesPerToken+0.25))+len(modelJSON)+64)
	b = append(b, `{"model":`...)
	b = append(b, modelJSON...)
	return append(b, `,"prompt":"`...)
}

func bodyEnd(b []byte, maxTokens int) []byte {
	b = append(b, `","max_tokens":`...)
	b = strconv.AppendInt(b, int64(maxTokens), 10)
	return append(b, '}')
}

func jsonString(s string) []byte {
	b, _ := json.Marshal(s) // a string always marshals
	return b
}

// SyntheticOutput returns n deterministic output token ids for request id
// under seed, for traces that carry only an output length. Ids are
// 1000 + splitmix64(...) mod 99000: ordinary cl100k tokens, never special.
func SyntheticOutput(seed, id int64, n int) []uint32 {
	if n <= 0 {
		return nil
	}
	out := make([]uint32, n)
	base := splitmix64(uint64(seed) ^ 0x6f75747075747321 ^ uint64(id)*0x9e3779b97f4a7c15)
	for k := range out {
		out[k] = 1000 + uint32(splitmix64(base+uint64(k))%99000)
	}
	return out
}
