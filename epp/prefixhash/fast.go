package prefixhash

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/eppsim/eppsim/epp"
)

// A single-pass reader for the common bodies — chat completions with string
// or text-block contents and no tools, completions with a string or an
// array of strings — that produces exactly what the encoding/json path
// (tokenize) produces, about an order of magnitude faster. It claims only
// inputs it fully understands and hands everything else (errors, tools,
// multimodal blocks, case-folded or duplicate keys, token-ID prompts,
// invalid UTF-8, deep nesting …) to the encoding/json path. A differential
// fuzz test (FuzzFastPathMatchesReference) keeps the two in agreement.

const fastMaxDepth = 512

type fscan struct {
	b []byte
	i int
	// The next '"' and '\\' at or after the position of the last search
	// for them (len(b) if none); see run.
	quote, backslash int
}

func newFscan(b []byte) *fscan { return &fscan{b: b, quote: -1, backslash: -1} }

func (s *fscan) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte (0 at end).
func (s *fscan) peek() byte {
	s.ws()
	if s.i >= len(s.b) {
		return 0
	}
	return s.b[s.i]
}

func (s *fscan) consume(c byte) bool {
	if s.peek() != c {
		return false
	}
	s.i++
	return true
}

func (s *fscan) literal(lit string) bool {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return false
	}
	s.i += len(lit)
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func hexVal(c byte) rune {
	switch {
	case c <= '9':
		return rune(c - '0')
	case c >= 'a':
		return rune(c-'a') + 10
	}
	return rune(c-'A') + 10
}

// getu4 decodes \uXXXX at b (b[0] == '\\'), or returns -1.
func getu4(b []byte) rune {
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range b[2:6] {
		if !isHex(c) {
			return -1
		}
		r = r<<4 | hexVal(c)
	}
	return r
}

// skipString validates a string whose opening quote is at s.i.
func (s *fscan) skipString() bool {
	s.i++
	for {
		s.i, _ = s.run(s.i)
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case '"':
			s.i++
			return true
		case '\\':
			if s.i+1 >= len(s.b) {
				return false
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if getu4(s.b[s.i:]) < 0 {
					return false
				}
				s.i += 6
			default:
				return false
			}
		default: // a control character
			return false
		}
	}
}

const (
	lo8 = 0x0101010101010101
	hi8 = 0x8080808080808080
)

// run returns the index of the first byte at or after i that ends a run of
// plain string bytes — '"', '\\' or a control character — or len(s.b), and
// whether the run has non-ASCII bytes (which then need UTF-8 validation).
//
// Prompts are long runs of plain text, so this is the tokenizer's inner
// loop. The quote and the backslash are found by bytes.IndexByte, which
// uses the processor's vector instructions; their positions are kept, as
// they stay the next ones until the scan passes them, so that every byte
// is searched at most once per character. Control characters and non-ASCII
// bytes are then tested 32 bytes a step up to the nearer of the two.
func (s *fscan) run(i int) (end int, nonASCII bool) {
	if s.quote < i {
		s.quote = indexByteFrom(s.b, i, '"')
	}
	if s.backslash < i {
		s.backslash = indexByteFrom(s.b, i, '\\')
	}
	return controlRun(s.b, i, min(s.quote, s.backslash))
}

// indexByteFrom is the index of the first c at or after i in b, or len(b).
func indexByteFrom(b []byte, i int, c byte) int {
	if j := bytes.IndexByte(b[i:], c); j >= 0 {
		return i + j
	}
	return len(b)
}

// controlRun returns the index of the first control character in b[i:end],
// or end, and whether a non-ASCII byte precedes it.
func controlRun(b []byte, i, end int) (int, bool) {
	var high uint64 // the high bits of the bytes tested so far
	// (v - 0x20…) &^ v has a high bit set in some byte exactly when v has
	// a byte below 0x20: a borrow only starts at such a byte, and cannot
	// set the bit of a byte ≥ 0x80.
	b = b[:end]
	for ; i <= len(b)-32; i += 32 {
		w := b[i : i+32]
		v0 := binary.LittleEndian.Uint64(w[0:8])
		v1 := binary.LittleEndian.Uint64(w[8:16])
		v2 := binary.LittleEndian.Uint64(w[16:24])
		v3 := binary.LittleEndian.Uint64(w[24:32])
		if ((v0-lo8*0x20)&^v0|(v1-lo8*0x20)&^v1|(v2-lo8*0x20)&^v2|(v3-lo8*0x20)&^v3)&hi8 != 0 {
			break
		}
		high |= v0 | v1 | v2 | v3
	}
	for ; i < end; i++ {
		c := b[i]
		if c < 0x20 {
			break
		}
		high |= uint64(c)
	}
	return i, high&hi8 != 0
}

// appendString decodes the string at s.i (opening quote) onto dst, as
// encoding/json would. ok is false for invalid syntax or invalid UTF-8 (the
// latter is legal JSON, left to the reference path).
func (s *fscan) appendString(dst []byte) ([]byte, bool) {
	s.i++
	start := s.i      // of the text not yet appended
	nonASCII := false // in s.b[start:s.i]
	for {
		end, high := s.run(s.i)
		s.i, nonASCII = end, nonASCII || high
		if s.i >= len(s.b) || s.b[s.i] < 0x20 {
			return dst, false
		}
		// A quote or a backslash: the text before it is complete.
		if nonASCII && !utf8.Valid(s.b[start:s.i]) {
			return dst, false
		}
		dst = append(dst, s.b[start:s.i]...)
		if s.b[s.i] == '"' {
			s.i++
			return dst, true
		}
		if s.i+1 >= len(s.b) {
			return dst, false
		}
		switch e := s.b[s.i+1]; e {
		case '"', '\\', '/':
			dst = append(dst, e)
			s.i += 2
		case 'b':
			dst, s.i = append(dst, '\b'), s.i+2
		case 'f':
			dst, s.i = append(dst, '\f'), s.i+2
		case 'n':
			dst, s.i = append(dst, '\n'), s.i+2
		case 'r':
			dst, s.i = append(dst, '\r'), s.i+2
		case 't':
			dst, s.i = append(dst, '\t'), s.i+2
		case 'u':
			r := getu4(s.b[s.i:])
			if r < 0 {
				return dst, false
			}
			s.i += 6
			if utf16.IsSurrogate(r) {
				if r1 := getu4(s.b[s.i:]); r1 >= 0 {
					if d := utf16.DecodeRune(r, r1); d != unicode.ReplacementChar {
						s.i += 6
						dst = utf8.AppendRune(dst, d)
						break
					}
				}
				r = unicode.ReplacementChar
			}
			dst = utf8.AppendRune(dst, r)
		default:
			return dst, false
		}
		start, nonASCII = s.i, false
	}
}

// stringOrNull decodes the string or null at s.i (nil for null), as
// encoding/json decodes into a string field.
func (s *fscan) stringOrNull() ([]byte, bool) {
	switch s.peek() {
	case '"':
		return s.appendString(nil)
	case 'n':
		return nil, s.literal("null")
	}
	return nil, false
}

func (s *fscan) skipNumber() bool {
	b, i := s.b, s.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	s.i = i
	return true
}

// skipValue validates and skips any value.
func (s *fscan) skipValue(depth int) bool {
	if depth > fastMaxDepth {
		return false
	}
	switch s.peek() {
	case '"':
		return s.skipString()
	case '{':
		s.i++
		if s.consume('}') {
			return true
		}
		for {
			if s.peek() != '"' || !s.skipString() || !s.consume(':') || !s.skipValue(depth+1) {
				return false
			}
			if s.consume(',') {
				continue
			}
			return s.consume('}')
		}
	case '[':
		s.i++
		if s.consume(']') {
			return true
		}
		for {
			if !s.skipValue(depth + 1) {
				return false
			}
			if s.consume(',') {
				continue
			}
			return s.consume(']')
		}
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return s.skipNumber()
	}
	return false
}

// objectKeys iterates an object at s.i, calling fn with each raw key (still
// escaped) and leaving s.i at its value; fn must consume the value. ok is
// false on bad syntax or when fn returns false.
func (s *fscan) objectKeys(fn func(key []byte) bool) bool {
	if !s.consume('{') {
		return false
	}
	if s.consume('}') {
		return true
	}
	for {
		if s.peek() != '"' {
			return false
		}
		start := s.i + 1
		if !s.skipString() {
			return false
		}
		key := s.b[start : s.i-1]
		if !s.consume(':') {
			return false
		}
		s.ws()
		if !fn(key) {
			return false
		}
		if s.consume(',') {
			continue
		}
		return s.consume('}')
	}
}

// field classifies a raw key against the names a struct decodes: it
// returns the index of an exact match, -1 for an unrelated key, and
// ok=false when the key would match case-insensitively or is escaped (both
// left to encoding/json).
func field(key []byte, names ...string) (int, bool) {
	if bytes.IndexByte(key, '\\') >= 0 {
		return -1, false
	}
	for i, n := range names {
		if string(key) == n {
			return i, true
		}
		if bytes.EqualFold(key, []byte(n)) {
			return -1, false
		}
	}
	return -1, true
}

// tokenBuf returns a zeroed token slice able to hold n bytes of text plus
// padding, and (on little-endian hosts) an empty byte slice aliasing its
// memory, so that text decoded into the byte slice is already packed.
func tokenBuf(n int) ([]uint32, []byte) {
	toks := make([]uint32, n/BytesPerToken+1)
	if !littleEndian {
		return toks, make([]byte, 0, n)
	}
	return toks, unsafe.Slice((*byte)(unsafe.Pointer(&toks[0])), BytesPerToken*len(toks))[:0]
}

// packed returns the pseudo-tokens of text decoded into the byte view of
// toks (see tokenBuf); if the text outgrew the view it is packed anew.
func packed(toks []uint32, text []byte) []uint32 {
	if len(text) == 0 {
		return nil
	}
	n := (len(text) + BytesPerToken - 1) / BytesPerToken
	if littleEndian && n <= len(toks) && unsafe.Pointer(&text[0]) == unsafe.Pointer(&toks[0]) {
		return toks[:n:n]
	}
	return PackBytes(text)
}

// packOwned is PackBytes for text that the caller gives up. A prompt
// string without escapes is decoded by a single append onto nil, which
// allocates without zeroing (unlike make); when that array is 4-byte
// aligned and has room for the padding (allocations of 8 bytes and more
// are 8-byte aligned, and their size is rounded up to a multiple of 8),
// the tokens reuse it, zero-padded in place, rather than a zeroed copy.
func packOwned(text []byte) []uint32 {
	n := (len(text) + BytesPerToken - 1) / BytesPerToken
	if n == 0 {
		return nil
	}
	if !littleEndian || cap(text) < BytesPerToken*n || uintptr(unsafe.Pointer(&text[0]))%4 != 0 {
		return PackBytes(text)
	}
	padded := text[:BytesPerToken*n]
	clear(padded[len(text):])
	return unsafe.Slice((*uint32)(unsafe.Pointer(&padded[0])), n)
}

// fastTokenize is the fast path of Estimator.Tokenize for path-selected
// (or body-selected) chat completions and completions. ok=false means "use
// the reference path".
func fastTokenize(path string, body []byte) (tr *epp.TokenizedRequest, ok bool) {
	kind := KindOfPath(path)
	switch kind {
	case KindChatCompletions, KindCompletions, KindUnknown:
	default:
		return nil, false
	}
	s := newFscan(body)
	var (
		toks       []uint32 // messages decode into out, a view of toks (see tokenBuf)
		out        []byte
		prompt     []byte // a string prompt
		salt       []byte
		strs       [][]byte
		seen       [5]bool
		promptKind byte // 's' string, 'a' array of strings, 0 none
		chatOK     bool // messages decoded into out
		// A chat-template field of the wrong JSON type: chat bodies then
		// go to the reference path (which rejects them); completions
		// bodies do not declare these fields.
		chatBad bool
	)
	// First pass over the top level: find the fields, validate the rest.
	okTop := s.objectKeys(func(key []byte) bool {
		f, ok := field(key, "messages", "prompt", "cache_salt", "tools", "token_ids",
			"documents", "chat_template", "return_assistant_tokens_mask", "continue_final_message",
			"add_generation_prompt", "chat_template_kwargs")
		if !ok {
			return false
		}
		if f >= 0 && f < len(seen) {
			if seen[f] {
				return false // duplicate: "last wins" nuances left to encoding/json
			}
			seen[f] = true
		}
		if f >= len(seen) {
			// The chat-template fields of ChatCompletionsRequest: only their
			// JSON type matters (spec §2.1 step 0).
			want := [...]byte{'[', '"', 't', 't', 't', '{'}[f-len(seen)]
			switch c := s.peek(); {
			case c == 'n', c == want, want == 't' && c == 'f':
			default:
				chatBad = true
			}
			return s.skipValue(1)
		}
		switch f {
		case 0: // messages
			if kind == KindCompletions {
				return s.skipValue(1)
			}
			if toks == nil {
				toks, out = tokenBuf(len(body))
			}
			var ok bool
			out, ok = s.appendMessages(out)
			chatOK = ok
			return ok
		case 1: // prompt (decoded below once the kind is known)
			switch s.peek() {
			case '"':
				promptKind = 's'
				if kind == KindChatCompletions || (kind == KindUnknown && seen[0]) {
					return s.skipString()
				}
				var ok bool
				prompt, ok = s.appendString(nil)
				return ok
			case '[':
				promptKind = 'a'
				s.i++
				if s.consume(']') {
					return true
				}
				for {
					if s.peek() != '"' {
						return false
					}
					str, ok := s.appendString(nil)
					if !ok {
						return false
					}
					strs = append(strs, str)
					if s.consume(',') {
						continue
					}
					return s.consume(']')
				}
			default:
				return false
			}
		case 2: // cache_salt
			var ok bool
			salt, ok = s.stringOrNull()
			return ok
		case 3: // tools: only absent, null or empty is fast
			switch s.peek() {
			case 'n':
				return s.literal("null")
			case '[':
				s.i++
				return s.consume(']')
			}
			return false
		default:
			return s.skipValue(1)
		}
	})
	if !okTop {
		return nil, false
	}
	s.ws()
	if s.i != len(s.b) {
		return nil, false
	}
	if kind == KindUnknown {
		switch {
		case seen[0]:
			kind = KindChatCompletions
		case seen[1]:
			kind = KindCompletions
		default:
			return nil, false
		}
	}
	if kind == KindChatCompletions && chatBad {
		return nil, false
	}
	tr = &epp.TokenizedRequest{CacheSalt: string(salt)}
	switch kind {
	case KindCompletions:
		switch {
		case promptKind == 0:
			return nil, false // "prompt" absent: the reference path decides
		case promptKind == 'a' && len(strs) > 1:
			tr.Prompts = make([][]uint32, len(strs))
			for i, str := range strs {
				tr.Prompts[i] = PackBytes(str)
			}
		case promptKind == 'a' && len(strs) == 1:
			tr.Prompts = [][]uint32{PackBytes(strs[0])}
		case promptKind == 'a':
			tr.Prompts = [][]uint32{nil}
		default:
			tr.Prompts = [][]uint32{packOwned(prompt)}
		}
		return tr, true
	case KindChatCompletions:
		if !chatOK {
			out = out[:0] // "messages" absent: no text
		}
		tr.Prompts = [][]uint32{packed(toks, out)}
		return tr, true
	}
	return nil, false
}

// appendMessages flattens the messages array at s.i onto out: per message
// the role, then the content (a string, null, or text-only blocks).
func (s *fscan) appendMessages(out []byte) ([]byte, bool) {
	out = out[:0]
	if s.peek() == 'n' {
		return out, s.literal("null")
	}
	if !s.consume('[') {
		return out, false
	}
	if s.consume(']') {
		return out, true
	}
	var role []byte
	for {
		switch s.peek() {
		case 'n':
			if !s.literal("null") {
				return out, false
			}
		case '{':
			var roleSeen, contentSeen bool
			contentAt := -1 // where content was decoded before its role
			role = role[:0]
			ok := s.objectKeys(func(key []byte) bool {
				f, ok := field(key, "role", "content", "tool_calls")
				if !ok {
					return false
				}
				switch f {
				case 2:
					// tool_calls ([]any): an array or null, else left to
					// the reference path (which rejects it).
					if c := s.peek(); c != '[' && c != 'n' {
						return false
					}
					return s.skipValue(3)
				case 0:
					if roleSeen || s.peek() != '"' {
						return false
					}
					roleSeen = true
					var ok bool
					role, ok = s.appendString(role)
					return ok
				case 1:
					if contentSeen {
						return false
					}
					contentSeen = true
					if roleSeen {
						out = append(out, role...)
					} else {
						contentAt = len(out)
					}
					var ok bool
					out, ok = s.appendContent(out)
					return ok
				}
				return s.skipValue(3)
			})
			if !ok {
				return out, false
			}
			switch {
			case contentAt >= 0:
				// Content came first: shift it right and put the role before it.
				n := len(out)
				out = append(out, role...)
				copy(out[contentAt+len(role):], out[contentAt:n])
				copy(out[contentAt:], role)
			case !contentSeen:
				out = append(out, role...)
			}
		default:
			return out, false
		}
		if s.consume(',') {
			continue
		}
		return out, s.consume(']')
	}
}

// appendContent appends a message content: a string, null, or an array of
// {"type":"text","text":…} blocks (other blocks bail).
func (s *fscan) appendContent(out []byte) ([]byte, bool) {
	switch s.peek() {
	case '"':
		return s.appendString(out)
	case 'n':
		return out, s.literal("null")
	case '[':
	default:
		return out, false
	}
	s.i++
	if s.consume(']') {
		return out, true
	}
	var typ, text []byte
	for {
		if s.peek() != '{' {
			return out, false
		}
		var typSeen, textSeen bool
		typ, text = typ[:0], text[:0]
		ok := s.objectKeys(func(key []byte) bool {
			// No audio_url: upstream's ContentBlock has no such field, so
			// the key is skipped like any unknown one (spec §5.2.1).
			f, ok := field(key, "type", "text", "image_url", "input_audio", "video_url")
			switch {
			case !ok || f >= 2:
				return false
			case f < 0:
				return s.skipValue(4)
			case s.peek() != '"':
				return false
			case f == 0:
				if typSeen {
					return false
				}
				typSeen = true
				var ok bool
				typ, ok = s.appendString(typ[:0])
				return ok
			default:
				if textSeen {
					return false
				}
				textSeen = true
				var ok bool
				text, ok = s.appendString(text[:0])
				return ok
			}
		})
		if !ok {
			return out, false
		}
		switch string(typ) {
		case "text":
			out = append(out, text...)
		case "image_url", "video_url", "audio_url", "input_audio":
			return out, false
		}
		if s.consume(',') {
			continue
		}
		return out, s.consume(']')
	}
}

// fastCacheSalt reads the top-level cache_salt with the fast scanner;
// ok=false defers to encoding/json.
func fastCacheSalt(body []byte) (string, bool) {
	s := newFscan(body)
	var salt []byte
	seen := false
	ok := s.objectKeys(func(key []byte) bool {
		f, ok := field(key, "cache_salt")
		switch {
		case !ok:
			return false
		case f < 0:
			return s.skipValue(1)
		case seen:
			return false
		}
		seen = true
		salt, ok = s.stringOrNull()
		return ok
	})
	if !ok {
		return "", false
	}
	s.ws()
	if s.i != len(s.b) {
		return "", false
	}
	return string(salt), true
}

// outputCapFields are the body fields a client caps its output with, in
// precedence order.
var outputCapFields = [3]string{"max_completion_tokens", "max_tokens", "max_output_tokens"}

// fastMaxOutputTokens is MaxOutputTokens with the fast scanner.
func fastMaxOutputTokens(body []byte) (int64, bool) {
	s := newFscan(body)
	var vals [3]*int64
	var seen [3]bool
	ok := s.objectKeys(func(key []byte) bool {
		f, ok := field(key, outputCapFields[:]...)
		switch {
		case !ok:
			return false
		case f < 0:
			return s.skipValue(1)
		case seen[f]:
			return false
		}
		seen[f] = true
		if s.peek() == 'n' {
			return s.literal("null")
		}
		start := s.i
		if !s.skipNumber() {
			return false
		}
		v, err := strconv.ParseInt(string(s.b[start:s.i]), 10, 64)
		if err != nil {
			return false
		}
		vals[f] = &v
		return true
	})
	if !ok {
		return 0, false
	}
	s.ws()
	if s.i != len(s.b) {
		return 0, false
	}
	for _, v := range vals {
		if v != nil {
			return *v, true
		}
	}
	return 0, true
}
