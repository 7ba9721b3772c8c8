package workload

// A fast path for ShareGPT conversations: sgFast decodes a conversation
// (already framed and validated by the reader's json.Decoder) into what
// json.Unmarshal into an sgConversation yields, for a strict subset:
//   - the value is an object; its keys and its messages' keys are printable
//     ASCII without escapes (and without '<', '>', '&'), a known key is
//     spelled exactly and appears at most once, and no other key equals a
//     known one ignoring case;
//   - "id" is a string, a number or null; "conversations", "conversation"
//     and "messages" are arrays of objects or null; "from", "value",
//     "role" and "content" are strings or null;
//   - nesting no deeper than maxFastDepth.
//
// Anything else declines and encoding/json decides, as before.
// FuzzShareGPTFast checks the equivalence.

type sgFast struct {
	c     jsonCursor
	id    flexID
	lists [3][]sgMessage
	vals  []sgFastMsg // the strings the messages point to
}

// sgFastMsg holds a message's strings; bit k of has says field k is set.
type sgFastMsg struct {
	s   [4]string // from, value, role, content
	has uint8
}

var sgKeyNames = [...]string{"id", "conversations", "conversation", "messages"}
var sgMessageKeyNames = [...]string{"from", "value", "role", "content"}

// decode fills c from raw, or returns false. The pointers it sets are valid
// until the next call.
func (f *sgFast) decode(raw []byte, c *sgConversation) bool {
	cur := &f.c
	cur.reset(raw)
	f.vals = f.vals[:0]
	if cur.peek() != '{' {
		return false
	}
	// Message ranges in f.vals per list; pointers are taken at the end,
	// when f.vals no longer moves.
	var lo, hi [3]int
	var set [3]bool
	seen := 0
	ok := cur.members(func(k []byte, _ int) bool {
		bit, decline := keyIndex(k, sgKeyNames[:])
		if decline {
			return false
		}
		if bit >= 0 {
			if seen&(1<<bit) != 0 {
				return false
			}
			seen |= 1 << bit
		}
		switch {
		case bit < 0:
			return cur.skipValue()
		case cur.peek() == 'n':
			return cur.null()
		case bit == 0:
			var ok bool
			f.id, ok = cur.flexID()
			c.ID = &f.id
			return ok
		}
		set[bit-1] = true
		lo[bit-1] = len(f.vals)
		ok := f.messages()
		hi[bit-1] = len(f.vals)
		return ok
	})
	if !ok || !cur.atEnd() {
		return false
	}
	for j, ptr := range [3]**[]sgMessage{&c.Conversations, &c.Conversation, &c.Messages} {
		if !set[j] {
			continue
		}
		list := f.lists[j][:0]
		if list == nil {
			list = []sgMessage{} // as encoding/json leaves an empty array
		}
		for k := lo[j]; k < hi[j]; k++ {
			v := &f.vals[k]
			var m sgMessage
			for b, p := range [4]**string{&m.From, &m.Value, &m.Role, &m.Content} {
				if v.has&(1<<b) != 0 {
					*p = &v.s[b]
				}
			}
			list = append(list, m)
		}
		f.lists[j] = list
		*ptr = &f.lists[j]
	}
	return true
}

// messages reads an array of message objects into f.vals.
func (f *sgFast) messages() bool {
	cur := &f.c
	if cur.peek() != '[' {
		return false
	}
	cur.i++
	if cur.eat(']') {
		return true
	}
	for {
		if cur.peek() != '{' {
			return false
		}
		var m sgFastMsg
		seen := 0
		ok := cur.members(func(k []byte, _ int) bool {
			bit, decline := keyIndex(k, sgMessageKeyNames[:])
			switch {
			case decline:
				return false
			case bit < 0:
				return cur.skipValue()
			case seen&(1<<bit) != 0:
				return false
			}
			seen |= 1 << bit
			if cur.peek() == 'n' {
				return cur.null()
			}
			var ok bool
			m.s[bit], ok = cur.str()
			m.has |= 1 << bit
			return ok
		})
		if !ok {
			return false
		}
		f.vals = append(f.vals, m)
		if cur.eat(',') {
			continue
		}
		return cur.eat(']')
	}
}
