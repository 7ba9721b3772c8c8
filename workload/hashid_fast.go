package workload

import "slices"

// A fast path for hash-id lines. encoding/json takes about 6 µs and 14
// allocations for a line of the shared Mooncake trace; the lines have one
// plain shape that the readers' JSON cursor (jsonscan.go) reads in a tenth
// of the time with one allocation (the hash_ids slice, which the Request
// keeps).
//
// parseHashIDFast accepts only a strict subset of JSON on which it decodes
// exactly what json.Unmarshal into a hashIDLine does:
//   - one object, JSON whitespace around tokens and nothing after it;
//   - keys as jsonCursor.key takes them, known keys spelled exactly and at
//     most once (encoding/json also matches keys case-insensitively and
//     lets a repeated key overwrite);
//   - integers for input_length, output_length, turn and the elements of a
//     non-empty hash_ids (no fraction or exponent, at most 18 digits, so
//     strconv.ParseInt cannot fail), a number for timestamp, and chat ids as
//     numbers or strings;
//   - any value for other keys, unless they fold to a known key.
//
// Anything else, including every invalid line, declines (false) and the
// caller falls back to encoding/json, which then decides and words every
// error exactly as before. FuzzHashIDFast checks the equivalence.

// hashIDFast backs the pointer fields of lines parsed by parseHashIDFast (no
// allocation per field); the next parse overwrites it.
type hashIDFast struct {
	cur          jsonCursor
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

// hashIDKeyNames are the keys of hashIDLine, in the order of their bits.
var hashIDKeyNames = [...]string{"timestamp", "input_length", "output_length", "hash_ids", "chat_id", "parent_chat_id", "turn"}

// parseHashIDFast returns what json.Unmarshal(line, &l) gives a zero l, or
// false if line is outside the subset described above.
func parseHashIDFast(line []byte, st *hashIDFast) (hashIDLine, bool) {
	c := &st.cur
	c.reset(line)
	var r hashIDLine
	if c.peek() != '{' {
		return r, false
	}
	seen := 0
	ok := c.members(func(key []byte, _ int) bool {
		k := keyBit(key, hashIDKeyNames[:])
		if k < 0 || seen&k != 0 {
			return false
		}
		seen |= k
		var ok bool
		switch k {
		case keyTimestamp:
			r.Timestamp, ok = c.number()
		case keyInputLength:
			st.in, ok = c.int64()
			r.InputLength = &st.in
		case keyOutputLength:
			st.out, ok = c.int64()
			r.OutputLength = &st.out
		case keyHashIDs:
			if st.ids, ok = c.int64Array(st.ids[:0]); ok {
				r.HashIDs = slices.Clone(st.ids) // exact size, kept by the Request
			}
		case keyChatID:
			st.chat, ok = c.flexID()
			r.ChatID = &st.chat
		case keyParentChatID:
			st.parent, ok = c.flexID()
			r.ParentChatID = &st.parent
		case keyTurn:
			var t int64
			t, ok = c.int64()
			st.turn = int(t)
			ok = ok && int64(st.turn) == t // a 32-bit int: let encoding/json reject it
			r.Turn = &st.turn
		default:
			ok = c.skipValue()
		}
		return ok
	})
	return r, ok && c.atEnd()
}

// int64Array consumes a non-empty array of integers (int64), appending them
// to ids.
func (c *jsonCursor) int64Array(ids []int64) ([]int64, bool) {
	if !c.eat('[') {
		return ids, false
	}
	for {
		c.ws()
		v, ok := c.int64()
		if !ok {
			return ids, false
		}
		ids = append(ids, v)
		if c.eat(',') {
			continue
		}
		return ids, c.eat(']')
	}
}

// flexID consumes a chat id: a number (its text) or a string (its decoding),
// as flexID.UnmarshalJSON reads them.
func (c *jsonCursor) flexID() (flexID, bool) {
	if c.i < len(c.b) && c.b[c.i] == '"' {
		str, ok := c.strBytes()
		return flexID(str), ok
	}
	num, ok := c.number()
	return flexID(num), ok
}
