package workload

import (
	"bytes"
	"encoding/binary"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// jsonCursor is a validating JSON scanner for the readers' fast paths (see
// openai_fast.go). Every method either consumes one well-formed token or
// value and reports true, or reports false, after which the cursor is
// unusable: the caller then falls back to encoding/json, which decides the
// line and words any error. It accepts exactly RFC 8259 JSON (what
// encoding/json's checkValid accepts), minus nesting deeper than
// maxFastDepth; strings decode exactly as encoding/json decodes them
// (invalid UTF-8 and unpaired surrogates become U+FFFD).
type jsonCursor struct {
	b      []byte
	i      int
	depth  int
	spaced bool   // whitespace was skipped since the flag was last cleared
	buf    []byte // scratch for unquoting
}

// maxFastDepth bounds the nesting the cursor follows (encoding/json allows
// 10000; deeper input is declined, not misread).
const maxFastDepth = 200

func (c *jsonCursor) reset(b []byte) {
	c.b, c.i, c.depth, c.spaced = b, 0, 0, false
}

// ws skips JSON whitespace.
func (c *jsonCursor) ws() {
	i := c.i
	for i < len(c.b) {
		switch c.b[i] {
		case ' ', '\t', '\n', '\r':
			i++
			continue
		}
		break
	}
	if i != c.i {
		c.spaced = true
		c.i = i
	}
}

// eat skips whitespace and then consumes ch if it is next.
func (c *jsonCursor) eat(ch byte) bool {
	if c.i < len(c.b) && c.b[c.i] == ch {
		c.i++
		return true
	}
	c.ws()
	if c.i < len(c.b) && c.b[c.i] == ch {
		c.i++
		return true
	}
	return false
}

// peek skips whitespace and returns the next byte (0 at the end).
func (c *jsonCursor) peek() byte {
	c.ws()
	if c.i < len(c.b) {
		return c.b[c.i]
	}
	return 0
}

// atEnd reports whether only whitespace is left.
func (c *jsonCursor) atEnd() bool {
	c.ws()
	return c.i == len(c.b)
}

// key reads an object key and the colon after it. Keys must be printable
// ASCII without escapes and without '<', '>', '&' (so that a key is its own
// decoding, and json.Marshal of it is the key quoted); other keys decline.
func (c *jsonCursor) key() ([]byte, bool) {
	c.ws()
	b := c.b
	if c.i >= len(b) || b[c.i] != '"' {
		return nil, false
	}
	for j := c.i + 1; j < len(b); j++ {
		ch := b[j]
		if ch == '"' {
			k := b[c.i+1 : j]
			c.i = j + 1
			return k, c.eat(':')
		}
		if ch < 0x20 || ch >= 0x7f || ch == '\\' || ch == '<' || ch == '>' || ch == '&' {
			return nil, false
		}
	}
	return nil, false
}

// members consumes the object at the cursor (at its '{') and calls f for
// each member with the key, where it starts (its quote) and the cursor at
// the value, whitespace skipped; f must consume the value. It reports
// false, as soon as it knows, for a malformed object, a key that key
// declines or f returning false.
func (c *jsonCursor) members(f func(key []byte, start int) bool) bool {
	c.i++
	if c.eat('}') {
		return true
	}
	for {
		c.ws()
		start := c.i
		k, ok := c.key()
		if !ok {
			return false
		}
		c.ws()
		if !f(k, start) {
			return false
		}
		if c.eat(',') {
			continue
		}
		return c.eat('}')
	}
}

// keyIndex looks up an object key among the names a fast path knows: its
// index in names, or -1 for another key. decline reports a key that equals
// a name only when ASCII case is ignored: encoding/json matches keys
// case-insensitively, so such a line must take the general path. (Keys
// reaching here are printable ASCII, see key, and against ASCII names that
// is all encoding/json's folding can match.)
func keyIndex(k []byte, names []string) (i int, decline bool) {
	for i, n := range names {
		if string(k) == n {
			return i, false
		}
	}
	for _, n := range names {
		if asciiEqualFold(k, n) {
			return -1, true
		}
	}
	return -1, false
}

// keyBit is keyIndex as a bit of a seen-set: 1<<i for names[i], 0 for
// another key, -1 for a key that must decline.
func keyBit(k []byte, names []string) int {
	i, decline := keyIndex(k, names)
	switch {
	case decline:
		return -1
	case i < 0:
		return 0
	}
	return 1 << i
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i, c := range b {
		if lower(c) != lower(s[i]) {
			return false
		}
	}
	return true
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

const (
	swarOnes = 0x0101010101010101
	swarHigh = 0x8080808080808080
)

// String contents flags, from stringEnd.
const (
	strEscaped = 1 << iota // holds an escape
	strHigh                // holds a byte >= 0x80
)

// stringEnd returns the index of the closing quote of the string whose
// contents start at b[i], and flags describing the contents. It fails on a
// control character, a malformed escape or a missing quote.
func stringEnd(b []byte, i int) (end, flags int, ok bool) {
	var high uint64
	for {
		// Eight bytes at a time while none is '"', '\\' or a control.
		for i+8 <= len(b) {
			x := binary.LittleEndian.Uint64(b[i:])
			q := x ^ ('"' * swarOnes)
			e := x ^ ('\\' * swarOnes)
			t := (q - swarOnes) &^ q
			t |= (e - swarOnes) &^ e
			t |= (x - 0x20*swarOnes) &^ x
			if t&swarHigh != 0 {
				break
			}
			high |= x
			i += 8
		}
		for ; i < len(b); i++ {
			ch := b[i]
			if ch == '"' || ch == '\\' || ch < 0x20 {
				break
			}
			high |= uint64(ch)
		}
		if high&swarHigh != 0 {
			flags |= strHigh
		}
		if i >= len(b) || b[i] < 0x20 {
			return 0, 0, false
		}
		if b[i] == '"' {
			return i, flags, true
		}
		// An escape.
		flags |= strEscaped
		if i+1 >= len(b) {
			return 0, 0, false
		}
		switch b[i+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i += 2
		case 'u':
			if hex4(b[i+2:]) < 0 {
				return 0, 0, false
			}
			i += 6
		default:
			return 0, 0, false
		}
	}
}

// hex4 decodes four hex digits at the start of b, or returns -1.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, ch := range b[:4] {
		switch {
		case '0' <= ch && ch <= '9':
			ch -= '0'
		case 'a' <= ch && ch <= 'f':
			ch = ch - 'a' + 10
		case 'A' <= ch && ch <= 'F':
			ch = ch - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(ch)
	}
	return r
}

// skipString consumes a string.
func (c *jsonCursor) skipString() bool {
	if c.i >= len(c.b) || c.b[c.i] != '"' {
		return false
	}
	end, _, ok := stringEnd(c.b, c.i+1)
	if ok {
		c.i = end + 1
	}
	return ok
}

// strBytes consumes a string and returns its decoding, which aliases either
// the input or the cursor's scratch buffer (valid until the next call).
func (c *jsonCursor) strBytes() ([]byte, bool) {
	if c.i >= len(c.b) || c.b[c.i] != '"' {
		return nil, false
	}
	start := c.i + 1
	end, flags, ok := stringEnd(c.b, start)
	if !ok {
		return nil, false
	}
	c.i = end + 1
	raw := c.b[start:end]
	if flags == 0 || (flags == strHigh && utf8.Valid(raw)) {
		return raw, true
	}
	c.buf = unquoteJSON(c.buf[:0], raw, flags&strHigh == 0)
	return c.buf, true
}

// str consumes a string and returns its decoding as a new string.
func (c *jsonCursor) str() (string, bool) {
	b, ok := c.strBytes()
	return string(b), ok
}

// unquoteJSON appends the decoding of the contents s of a well-formed JSON
// string (checked by stringEnd) to dst, as encoding/json decodes it; ascii
// says that s has no byte >= 0x80.
func unquoteJSON(dst, s []byte, ascii bool) []byte {
	for {
		j := bytes.IndexByte(s, '\\')
		if j < 0 {
			if ascii {
				return append(dst, s...)
			}
			return appendUTF8(dst, s)
		}
		if ascii {
			dst = append(dst, s[:j]...)
		} else {
			dst = appendUTF8(dst, s[:j])
		}
		s = s[j:]
		switch e := s[1]; e {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			rr := hex4(s[2:])
			s = s[6:]
			if utf16.IsSurrogate(rr) {
				rr1 := rune(-1)
				if len(s) > 1 && s[0] == '\\' && s[1] == 'u' {
					rr1 = hex4(s[2:])
				}
				if dec := utf16.DecodeRune(rr, rr1); dec != unicode.ReplacementChar {
					s = s[6:]
					dst = utf8.AppendRune(dst, dec)
					continue
				}
				rr = unicode.ReplacementChar
			}
			dst = utf8.AppendRune(dst, rr)
			continue
		default: // '"', '\\', '/'
			dst = append(dst, e)
		}
		s = s[2:]
	}
}

// appendUTF8 appends s with each byte of an invalid UTF-8 sequence replaced
// by U+FFFD, as encoding/json does.
func appendUTF8(dst, s []byte) []byte {
	if utf8.Valid(s) {
		return append(dst, s...)
	}
	for r := 0; r < len(s); {
		if c := s[r]; c < utf8.RuneSelf {
			dst = append(dst, c)
			r++
			continue
		}
		rr, size := utf8.DecodeRune(s[r:])
		r += size
		dst = utf8.AppendRune(dst, rr)
	}
	return dst
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// number consumes a number and returns its text.
func (c *jsonCursor) number() ([]byte, bool) {
	b, i := c.b, c.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		return nil, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			return nil, false
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return nil, false
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	num := b[c.i:i]
	c.i = i
	return num, true
}

// int64 consumes an integer of at most 18 digits (no fraction or exponent,
// so strconv.ParseInt, which encoding/json uses, takes it as is).
func (c *jsonCursor) int64() (int64, bool) {
	start := c.i
	num, ok := c.number()
	if !ok {
		return 0, false
	}
	neg := num[0] == '-'
	if neg {
		num = num[1:]
	}
	if len(num) > 18 {
		return 0, false
	}
	var v int64
	for _, ch := range num {
		if !isDigit(ch) {
			c.i = start
			return 0, false
		}
		v = v*10 + int64(ch-'0')
	}
	if neg {
		v = -v
	}
	return v, true
}

// null consumes null if it is next.
func (c *jsonCursor) null() bool {
	if c.i+4 <= len(c.b) && string(c.b[c.i:c.i+4]) == "null" {
		c.i += 4
		return true
	}
	return false
}

// skipValue consumes any value.
func (c *jsonCursor) skipValue() bool {
	switch c.peek() {
	case '"':
		return c.skipString()
	case '{':
		c.i++
		if c.depth++; c.depth > maxFastDepth {
			return false
		}
		if !c.eat('}') {
			for {
				c.ws()
				if !c.skipString() || !c.eat(':') || !c.skipValue() {
					return false
				}
				if c.eat(',') {
					continue
				}
				if c.eat('}') {
					break
				}
				return false
			}
		}
		c.depth--
		return true
	case '[':
		c.i++
		if c.depth++; c.depth > maxFastDepth {
			return false
		}
		if !c.eat(']') {
			for {
				if !c.skipValue() {
					return false
				}
				if c.eat(',') {
					continue
				}
				if c.eat(']') {
					break
				}
				return false
			}
		}
		c.depth--
		return true
	case 't':
		return c.literal("true")
	case 'f':
		return c.literal("false")
	case 'n':
		return c.null()
	}
	_, ok := c.number()
	return ok
}

func (c *jsonCursor) literal(lit string) bool {
	if c.i+len(lit) <= len(c.b) && string(c.b[c.i:c.i+len(lit)]) == lit {
		c.i += len(lit)
		return true
	}
	return false
}

// appendCompactJSON appends well-formed JSON src without the whitespace
// outside its strings, as json.Compact does.
func appendCompactJSON(dst, src []byte) []byte {
	start := 0
	for i := 0; i < len(src); i++ {
		switch src[i] {
		case ' ', '\t', '\n', '\r':
			dst = append(dst, src[start:i]...)
			start = i + 1
		case '"':
			end, _, _ := stringEnd(src, i+1)
			i = end
		}
	}
	return append(dst, src[start:]...)
}

// appendJSONString appends s as a JSON string, exactly as encoding/json
// encodes a string with HTML escaping off (json.Encoder.SetEscapeHTML(false)):
// '"', '\\' and control characters escaped, invalid UTF-8 as \ufffd, U+2028
// and U+2029 escaped, everything else as is.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start, i := 0, 0
	for i < len(s) {
		// Eight bytes at a time while none needs a look.
		for i+8 <= len(s) {
			x := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
				uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
			q := x ^ ('"' * swarOnes)
			e := x ^ ('\\' * swarOnes)
			t := (q - swarOnes) &^ q
			t |= (e - swarOnes) &^ e
			t |= (x - 0x20*swarOnes) &^ x
			if (t|x)&swarHigh != 0 {
				break
			}
			i += 8
		}
		if i >= len(s) {
			break
		}
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				const hex = "0123456789abcdef"
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', "0123456789abcdef"[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
