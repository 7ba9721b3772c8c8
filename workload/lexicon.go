package workload

import (
	"fmt"
	"math"
)

// lexClass holds the single-token words of one byte length (leading space
// included), ordered by token id.
type lexClass struct {
	length int
	words  []string
	ids    []uint32
}

// Lexicon maps 64-bit random values to words that are single cl100k tokens:
// " " followed by 1-15 lowercase ASCII letters. Because the BPE pre-tokenizer
// splits text at every " word" boundary and each such piece is one vocabulary
// entry, a concatenation of lexicon words tokenizes back to exactly the ids
// it was built from; text and tokens of synthesized prompts agree.
//
// The lexicon is a table of 4096 words indexed by the top 12 bits of the
// random value (one lookup per token; the table stays in cache). Word byte
// lengths follow the maximum-entropy distribution over the available lengths
// whose mean is the requested bytes per token (p(L) ∝ exp(λL)): length L
// gets round(4096·p(L)) slots, filled with words of that length spread
// evenly over the vocabulary's words of that length.
type Lexicon struct {
	bytesPerToken float64 // mean word length over the table
	ids           [lexSlots]uint32
	lens          [lexSlots]uint8
	words         [lexSlots * lexWordPad]byte // word i at [i*16, i*16+lens[i])
}

const (
	lexSlots     = 4096
	lexSlotShift = 64 - 12
	lexWordPad   = 16 // bytes per table word; longer words are not used

	// DefaultBytesPerToken is the text density of synthesized prompts, about
	// that of English text under BPE tokenizers.
	DefaultBytesPerToken = 4.0
	minBytesPerToken     = 2.5
	maxBytesPerToken     = 10.0
)

func (t *Tokenizer) wordClasses() ([]lexClass, error) {
	t.wordsOnce.Do(func() {
		byLen := map[int]*lexClass{}
		maxLen := 0
		for id := uint(0); id < 100256; id++ {
			s, err := t.codec.Decode([]uint{id})
			if err != nil || len(s) < 2 || len(s) > lexWordPad || s[0] != ' ' {
				continue
			}
			ok := true
			for i := 1; i < len(s); i++ {
				if s[i] < 'a' || s[i] > 'z' {
					ok = false
					break
				}
			}
			if !ok {
				continue
			}
			c := byLen[len(s)]
			if c == nil {
				c = &lexClass{length: len(s)}
				byLen[len(s)] = c
			}
			c.words = append(c.words, s)
			c.ids = append(c.ids, uint32(id))
			maxLen = max(maxLen, len(s))
		}
		for l := 2; l <= maxLen; l++ {
			if c := byLen[l]; c != nil {
				t.words = append(t.words, *c)
			}
		}
		if len(t.words) < 3 {
			t.wordsErr = fmt.Errorf("workload: cl100k vocabulary has too few single-token words")
		}
	})
	return t.words, t.wordsErr
}

// Lexicon returns a word lexicon whose mean bytes per token is bytesPerToken
// (0 means DefaultBytesPerToken; valid range 2.5-10).
func (t *Tokenizer) Lexicon(bytesPerToken float64) (*Lexicon, error) {
	if bytesPerToken == 0 {
		bytesPerToken = DefaultBytesPerToken
	}
	if !(bytesPerToken >= minBytesPerToken && bytesPerToken <= maxBytesPerToken) {
		return nil, fmt.Errorf("workload: bytes per token %g outside [%g, %g]", bytesPerToken, minBytesPerToken, maxBytesPerToken)
	}
	classes, err := t.wordClasses()
	if err != nil {
		return nil, err
	}
	probs := func(lambda float64) ([]float64, float64) {
		p := make([]float64, len(classes))
		var sum, mean float64
		for i, c := range classes {
			p[i] = math.Exp(lambda * float64(c.length-classes[0].length))
			sum += p[i]
		}
		for i, c := range classes {
			p[i] /= sum
			mean += p[i] * float64(c.length)
		}
		return p, mean
	}
	lo, hi := -30.0, 30.0
	for range 200 {
		mid := (lo + hi) / 2
		if _, m := probs(mid); m < bytesPerToken {
			lo = mid
		} else {
			hi = mid
		}
	}
	p, _ := probs((lo + hi) / 2)
	lx := &Lexicon{}
	cum, slot := 0.0, 0
	var total int
	for i, c := range classes {
		cum += p[i]
		end := int(math.Round(cum * lexSlots))
		if i == len(classes)-1 {
			end = lexSlots
		}
		m := end - slot
		for j := 0; slot < end; j, slot = j+1, slot+1 {
			w := j * len(c.words) / m
			lx.ids[slot] = c.ids[w]
			lx.lens[slot] = uint8(c.length)
			copy(lx.words[slot*lexWordPad:], c.words[w])
			total += c.length
		}
	}
	lx.bytesPerToken = float64(total) / lexSlots
	return lx, nil
}

// BytesPerToken is the mean byte length of the lexicon's words.
func (lx *Lexicon) BytesPerToken() float64 { return lx.bytesPerToken }

// Word maps a random value to a word and its token id (its top 12 bits
// select the table slot).
func (lx *Lexicon) Word(x uint64) (string, uint32) {
	i := x >> lexSlotShift
	return string(lx.words[i*lexWordPad : i*lexWordPad+uint64(lx.lens[i])]), lx.ids[i]
}

// lexSlot is the table slot of random value splitmix64(x), i.e.
// splitmix64(x) >> lexSlotShift, computed without splitmix64's final
// z ^ z>>31: that step leaves the top 31 bits, so the top 12, unchanged.
func lexSlot(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x >> lexSlotShift
}

// splitmix64 is the output function of Vigna's SplitMix64 generator: a
// bijective, well-mixed 64-bit hash.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
