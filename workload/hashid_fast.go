package workload

import "slices"

// A fast path for hash-id lines. encoding/json takes about 6 µs and 14
// allocations for a line of the shared Mooncake trace; the lines have one
// plain shape that a hand-written scanner reads in a tenth of the time with
// one allocation (the hash_ids slice, which the Request keeps).
//
// parseHashIDFast accepts only a strict subset of JSON on which it decodes
// exactly what json.Unmarshal into a hashIDLine does:
//   - one object, JSON whitespace around tokens and nothing after it;
//   - known keys spelled exactly and at most once (encoding/json also
//     matches keys case-insensitively and lets a repeated key overwrite);
//   - integers for input_length, output_length, turn and the elements of a
//     non-empty hash_ids (no fraction or exponent, at most 18 digits, so
//     strconv.ParseInt cannot fail), a number for timestamp, and chat ids as
//     numbers or plain strings (printable ASCII, no escapes);
//   - other keys as plain strings with scalar values (strings without
//     escapes, numbers, true, false, null), unless they fold to a known key.
//
// Anything else, including every invalid line, declines (false) and the
// caller falls back to encoding/json, which then decides and words every
// error exactly as before. FuzzHashIDFast checks the equivalence.

// hashIDFast backs the pointer fields of lines parsed by parseHashIDFast (no
// allocation per field); the next parse overwrites it.
type hashIDFast struct {
	in, out      int64
	turn         int
	chat, parent flexID
	ids          []int64 // scratch for hash_ids
}

// Known keys of hashIDLine, as bits of a seen-set.
const (
	keyTimestamp = 1 << iota
	keyInputLength
	keyOutputLength
	keyHashIDs
	keyChatID
	keyParentChatID
	keyTurn
)

const (
	keyUnknown = 0  // another key: skip its value
	keyDecline = -1 // a key encoding/json might match case-insensitively
)

func hashIDKey(key []byte) int {
	switch string(key) {
	case "timestamp":
		return keyTimestamp
	case "input_length":
		return keyInputLength
	case "output_length":
		return keyOutputLength
	case "hash_ids":
		return keyHashIDs
	case "chat_id":
		return keyChatID
	case "parent_chat_id":
		return keyParentChatID
	case "turn":
		return keyTurn
	}
	// encoding/json falls back to Unicode case folding (where "ſ" matches
	// "s"); the ASCII keys of plainString can only match ignoring ASCII case.
	for _, k := range [...]string{"timestamp", "input_length", "output_length", "hash_ids", "chat_id", "parent_chat_id", "turn"} {
		if asciiEqualFold(key, k) {
			return keyDecline
		}
	}
	return keyUnknown
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

// parseHashIDFast returns what json.Unmarshal(line, &l) gives a zero l, or
// false if line is outside the subset described above.
func parseHashIDFast(line []byte, st *hashIDFast) (hashIDLine, bool) {
	s := jsonScan{b: line}
	var r hashIDLine
	if !s.skip('{') {
		return r, false
	}
	if !s.skip('}') {
		seen := 0
		for {
			s.space()
			key, ok := s.plainString()
			if !ok || !s.skip(':') {
				return r, false
			}
			s.space()
			k := hashIDKey(key)
			if k == keyDecline || seen&k != 0 {
				return r, false
			}
			seen |= k
			switch k {
			case keyTimestamp:
				r.Timestamp, ok = s.number()
			case keyInputLength:
				st.in, ok = s.int()
				r.InputLength = &st.in
			case keyOutputLength:
				st.out, ok = s.int()
				r.OutputLength = &st.out
			case keyHashIDs:
				if st.ids, ok = s.intArray(st.ids[:0]); ok {
					r.HashIDs = slices.Clone(st.ids) // exact size, kept by the Request
				}
			case keyChatID:
				st.chat, ok = s.flexID()
				r.ChatID = &st.chat
			case keyParentChatID:
				st.parent, ok = s.flexID()
				r.ParentChatID = &st.parent
			case keyTurn:
				var t int64
				t, ok = s.int()
				st.turn = int(t)
				ok = ok && int64(st.turn) == t // a 32-bit int: let encoding/json reject it
				r.Turn = &st.turn
			default:
				ok = s.scalar()
			}
			if !ok {
				return r, false
			}
			if s.skip(',') {
				continue
			}
			if s.skip('}') {
				break
			}
			return r, false
		}
	}
	s.space()
	return r, s.i == len(s.b)
}

// jsonScan reads JSON tokens from b[i:].
type jsonScan struct {
	b []byte
	i int
}

func (s *jsonScan) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// skip consumes whitespace and then c, if c is next.
func (s *jsonScan) skip(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// plainString reads a string of printable ASCII without escapes and returns
// its contents.
func (s *jsonScan) plainString() ([]byte, bool) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return nil, false
	}
	for j := s.i + 1; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			str := s.b[s.i+1 : j]
			s.i = j + 1
			return str, true
		case c < 0x20 || c == '\\' || c >= 0x7f:
			return nil, false
		}
	}
	return nil, false
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// number reads a number (RFC 8259 grammar) and returns its text.
func (s *jsonScan) number() ([]byte, bool) {
	b, i := s.b, s.i
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
	num := b[s.i:i]
	s.i = i
	return num, true
}

// int reads an integer of at most 18 digits (which fits an int64).
func (s *jsonScan) int() (int64, bool) {
	b, i := s.b, s.i
	neg := i < len(b) && b[i] == '-'
	if neg {
		i++
	}
	start := i
	var v int64
	for i < len(b) && isDigit(b[i]) {
		v = v*10 + int64(b[i]-'0') // wraps past 18 digits, rejected below
		i++
	}
	n := i - start
	if n == 0 || n > 18 || (n > 1 && b[start] == '0') {
		return 0, false
	}
	if i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E') {
		return 0, false
	}
	if neg {
		v = -v
	}
	s.i = i
	return v, true
}

// intArray reads a non-empty array of integers, appending them to ids.
func (s *jsonScan) intArray(ids []int64) ([]int64, bool) {
	if !s.skip('[') {
		return ids, false
	}
	for {
		s.space()
		v, ok := s.int()
		if !ok {
			return ids, false
		}
		ids = append(ids, v)
		if s.skip(',') {
			continue
		}
		return ids, s.skip(']')
	}
}

// flexID reads a chat id: a number (its text) or a plain string.
func (s *jsonScan) flexID() (flexID, bool) {
	if s.i < len(s.b) && s.b[s.i] == '"' {
		str, ok := s.plainString()
		return flexID(str), ok
	}
	num, ok := s.number()
	return flexID(num), ok
}

// scalar skips a string without escapes (any bytes but controls), a number,
// true, false or null.
func (s *jsonScan) scalar() bool {
	b := s.b[s.i:]
	if len(b) == 0 {
		return false
	}
	switch b[0] {
	case '"':
		for j := 1; j < len(b); j++ {
			switch c := b[j]; {
			case c == '"':
				s.i += j + 1
				return true
			case c < 0x20 || c == '\\':
				return false
			}
		}
		return false
	case 't', 'f', 'n':
		for _, lit := range [...]string{"true", "false", "null"} {
			if len(b) >= len(lit) && string(b[:len(lit)]) == lit {
				s.i += len(lit)
				return true
			}
		}
		return false
	}
	_, ok := s.number()
	return ok
}
