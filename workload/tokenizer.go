package workload

import (
	"container/list"
	"fmt"
	"sync"

	"github.com/tiktoken-go/tokenizer"
)

// Special token ids of the chat template. tiktoken-go does not handle special
// tokens, so the template's tokens are mapped to the ids that Llama-3 gives
// them; they lie above cl100k_base's 100,277 ids and never collide with BPE
// output. Text that merely contains "<|eot_id|>" is tokenized as plain text.
const (
	TokBeginOfText uint32 = 128000 // <|begin_of_text|>
	TokEndOfText   uint32 = 128001 // <|end_of_text|>
	TokStartHeader uint32 = 128006 // <|start_header_id|>
	TokEndHeader   uint32 = 128007 // <|end_header_id|>
	TokEOT         uint32 = 128009 // <|eot_id|>
	// VocabSize bounds every token id produced by this package (Llama-3's).
	VocabSize = 128256
)

// Tokenizer is cl100k_base BPE (github.com/tiktoken-go/tokenizer, vocabulary
// compiled in) plus the chat template's special tokens. It is safe for
// concurrent use and may be shared between sources via Options.Tokenizer.
//
// Encode does not run the library's encoder, whose regexp2 pre-tokenizer
// dominated trace replay: it uses bpeVocab (bpe.go, bpe_split.go), built
// lazily from the codec's vocabulary, which gives the same ids several times
// faster. The codec remains the decoder and, in tests, the reference.
type Tokenizer struct {
	codec tokenizer.Codec

	bpeOnce sync.Once
	bpe     *bpeVocab
	bpeErr  error

	wordsOnce sync.Once
	words     []lexClass // single-token " word" pieces by byte length
	wordsErr  error
}

// NewTokenizer returns a cl100k_base tokenizer.
func NewTokenizer() (*Tokenizer, error) {
	c, err := tokenizer.Get(tokenizer.Cl100kBase)
	if err != nil {
		return nil, fmt.Errorf("workload: cl100k_base tokenizer: %w", err)
	}
	return &Tokenizer{codec: c}, nil
}

// sharedTokenizer is the tokenizer of every source that is not given one
// (Options.Tokenizer). A Tokenizer is safe for concurrent use and its lazily
// built tables never change once built, so one per process serves every
// run and sweep point, instead of each source rebuilding the BPE table
// (tens of milliseconds, more under the race detector).
var sharedTokenizer = sync.OnceValues(NewTokenizer)

// Encode tokenizes s as plain text (no special tokens, no BOS).
func (t *Tokenizer) Encode(s string) ([]uint32, error) {
	if s == "" {
		return nil, nil
	}
	t.bpeOnce.Do(func() { t.bpe, t.bpeErr = newBPEVocab(t.codec) })
	if t.bpeErr != nil {
		return nil, fmt.Errorf("workload: tokenize: %w", t.bpeErr)
	}
	// The codec (error mode "none") never fails to encode: its generated
	// matcher has no backtracking stack to exhaust and no match timeout.
	return t.bpe.encode(s), nil
}

// Decode turns BPE ids back into text; special ids are rendered by name.
func (t *Tokenizer) Decode(ids []uint32) (string, error) {
	var out []byte
	run := make([]uint, 0, len(ids))
	flush := func() error {
		if len(run) == 0 {
			return nil
		}
		s, err := t.codec.Decode(run)
		if err != nil {
			return fmt.Errorf("workload: decode: %w", err)
		}
		out = append(out, s...)
		run = run[:0]
		return nil
	}
	for _, id := range ids {
		if name := specialName(id); name != "" {
			if err := flush(); err != nil {
				return "", err
			}
			out = append(out, name...)
			continue
		}
		run = append(run, uint(id))
	}
	if err := flush(); err != nil {
		return "", err
	}
	return string(out), nil
}

// specialName returns the text form of a template special token, or "".
func specialName(id uint32) string {
	switch id {
	case TokBeginOfText:
		return "<|begin_of_text|>"
	case TokEndOfText:
		return "<|end_of_text|>"
	case TokStartHeader:
		return "<|start_header_id|>"
	case TokEndHeader:
		return "<|end_header_id|>"
	case TokEOT:
		return "<|eot_id|>"
	}
	return ""
}

// segCache memoizes the tokenization of message segments (system prompts,
// shared documents and conversation history recur across requests). It is an
// LRU bounded by the total bytes of cached text plus 4 bytes per cached
// token. Not safe for concurrent use; each source owns one.
type segCache struct {
	tok    *Tokenizer
	budget int
	used   int
	ll     *list.List
	m      map[string]*list.Element
}

type segEntry struct {
	text string
	ids  []uint32
}

const (
	defaultSegCacheBytes = 64 << 20
	minCachedSegment     = 32 // shorter segments are cheaper to re-tokenize than to cache
)

func newSegCache(tok *Tokenizer, budget int) *segCache {
	return &segCache{tok: tok, budget: budget, ll: list.New(), m: make(map[string]*list.Element)}
}

// encode returns the tokens of s; the result is shared and must not be modified.
func (c *segCache) encode(s string) ([]uint32, error) {
	if len(s) < minCachedSegment {
		return c.tok.Encode(s)
	}
	if el, ok := c.m[s]; ok {
		c.ll.MoveToFront(el)
		return el.Value.(*segEntry).ids, nil
	}
	ids, err := c.tok.Encode(s)
	if err != nil {
		return nil, err
	}
	cost := len(s) + 4*len(ids)
	if cost > c.budget/4 {
		return ids, nil
	}
	c.m[s] = c.ll.PushFront(&segEntry{text: s, ids: ids})
	c.used += cost
	for c.used > c.budget {
		el := c.ll.Back()
		e := el.Value.(*segEntry)
		c.ll.Remove(el)
		delete(c.m, e.text)
		c.used -= len(e.text) + 4*len(e.ids)
	}
	return ids, nil
}
