package workload

import (
	"unicode"
	"unicode/utf8"
)

// This file is a hand-written equivalent of cl100k_base's pre-tokenizer, the
// split regexp
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// exactly as github.com/tiktoken-go/tokenizer v0.10.0 runs it: through the
// regexp2 engine generated for that pattern (codec/regexp.gen.go), which
// matches over the input's runes, tries the alternatives in order and
// backtracks. Reproducing that engine rather than the regexp's textbook
// meaning matters in two places, noted below. The differential and fuzz tests
// in bpe_test.go hold this code to the library's output.

// Rune classes. \s is unicode.IsSpace and \p{L}, \p{N} are Go's Unicode
// categories, as in the generated matcher.
const (
	clsL    uint8 = 1 << iota // \p{L}
	clsN                      // \p{N}
	clsS                      // \s
	clsNL                     // '\r' or '\n' (also clsS)
	clsNone                   // in no set: U+007F, see runeClass
)

var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for r := rune(0); r < utf8.RuneSelf; r++ {
		t[r] = runeClass(r)
	}
	return t
}()

func runeClass(r rune) uint8 {
	var c uint8
	switch {
	case r == 0x7F:
		// The generated matcher tests ASCII runes against bitmaps, and
		// those of [^\s\p{L}\p{N}] and [^\r\n\p{L}\p{N}] lack DEL: no
		// alternative matches it, so the regexp steps over it and DEL is
		// dropped from the tokens (it still separates pieces).
		c = clsNone
	case unicode.IsLetter(r):
		c = clsL
	case unicode.IsNumber(r):
		c = clsN
	case unicode.IsSpace(r):
		c = clsS
		if r == '\r' || r == '\n' {
			c |= clsNL
		}
	}
	return c
}

// classAt returns the class and byte length of the rune at s[i]; s is valid
// UTF-8 and i < len(s).
func classAt(s string, i int) (uint8, int) {
	if b := s[i]; b < utf8.RuneSelf {
		return asciiClass[b], 1
	}
	return classAtSlow(s, i)
}

func classAtSlow(s string, i int) (uint8, int) {
	r, n := utf8.DecodeRuneInString(s[i:])
	return runeClass(r), n
}

// runEnd returns the end of the run of runes of a class in mask from s[i].
func runEnd(s string, i int, mask uint8) int {
	for i < len(s) {
		if b := s[i]; b < utf8.RuneSelf {
			if asciiClass[b]&mask == 0 {
				break
			}
			i++
			continue
		}
		c, n := classAtSlow(s, i)
		if c&mask == 0 {
			break
		}
		i += n
	}
	return i
}

// punctEnd returns the end of the run of [^\s\p{L}\p{N}] from s[i].
func punctEnd(s string, i int) int {
	for i < len(s) {
		c, n := classAt(s, i)
		if c != 0 {
			break
		}
		i += n
	}
	return i
}

// newlineEnd returns the end of the run of [\r\n] from s[i].
func newlineEnd(s string, i int) int {
	for i < len(s) && (s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// pieceEnd returns the end of the piece that the cl100k split regexp matches
// at s[p], or p if it matches nothing there. s must be valid UTF-8 and
// p < len(s). Every rune but DEL is a letter, a number, white space or in
// [^\s\p{L}\p{N}], so some alternative matches at every other rune.
func pieceEnd(s string, p int) int {
	c0, n0 := classAt(s, p)
	if c0 == clsNone {
		return p
	}
	q := p + n0

	// (?i:'s|'t|'re|'ve|'m|'ll|'d). The generated matcher compares the rune
	// after the quote with the case-folded set: besides ASCII case, only
	// U+017F LATIN SMALL LETTER LONG S joins 's' (the Kelvin sign would join
	// 'k', which is not in the list).
	if s[p] == '\'' && q < len(s) {
		switch s[q] {
		case 'S', 'T', 's', 't', 'M', 'm', 'D', 'd':
			return q + 1
		case 'R', 'r', 'V', 'v':
			if q+1 < len(s) && s[q+1]|0x20 == 'e' {
				return q + 2
			}
		case 'L', 'l':
			if q+1 < len(s) && s[q+1]|0x20 == 'l' {
				return q + 2
			}
		case 0xC5: // U+017F is C5 BF
			if q+1 < len(s) && s[q+1] == 0xBF {
				return q + 2
			}
		}
	}

	// [^\r\n\p{L}\p{N}]?\p{L}+
	if c0&clsL != 0 {
		return runEnd(s, q, clsL)
	}
	if c0&(clsN|clsNL) == 0 && q < len(s) {
		if c1, n1 := classAt(s, q); c1&clsL != 0 {
			return runEnd(s, q+n1, clsL)
		}
	}

	// \p{N}{1,3}
	if c0&clsN != 0 {
		e := q
		for k := 1; k < 3 && e < len(s); k++ {
			c, n := classAt(s, e)
			if c&clsN == 0 {
				break
			}
			e += n
		}
		return e
	}

	// ' ?[^\s\p{L}\p{N}]+[\r\n]*'
	if c0 == 0 {
		return newlineEnd(s, punctEnd(s, q))
	}
	if s[p] == ' ' && q < len(s) {
		if c1, n1 := classAt(s, q); c1 == 0 {
			return newlineEnd(s, punctEnd(s, q+n1))
		}
	}

	// s[p] is white space: \s*[\r\n]+|\s+(?!\S)|\s+ over the run of white
	// space s[p:e].
	e, last, nl := q, p, -1
	if c0&clsNL != 0 {
		nl = p
	}
	for e < len(s) {
		c, n := classAt(s, e)
		if c&clsS == 0 {
			break
		}
		if nl < 0 && c&clsNL != 0 {
			nl = e
		}
		last = e
		e += n
	}
	if nl >= 0 {
		// \s*[\r\n]+: the generated matcher backtracks the greedy \s* to
		// the FIRST '\r' or '\n' of the run (helpers.IndexOfAny2, where
		// a backtracking regexp would take the last one), so the piece
		// ends after the first run of line breaks: "  \n  \n  x" splits
		// as "  \n", "  \n", " ", " x" rather than "  \n  \n", " ", " x".
		return newlineEnd(s, nl)
	}
	if e < len(s) && last > p {
		// \s+(?!\S) gives back the last white space character, which
		// then starts the next piece (" word" or " +").
		return last
	}
	// \s+(?!\S) at the end of the input, or \s+ for a lone white space
	// character before a non-space.
	return e
}
