package workload

// A fast path for OpenAI request lines. The general path decodes a line with
// encoding/json four times over (the envelope, the body, the messages, each
// content) and compacts the body a fifth time, each pass validating the
// bytes again. openaiFast reads the line once with jsonCursor and yields
// what those passes yield, for a strict subset of JSON:
//   - the line is one object, and a "body", when present, is an object;
//   - the keys of the line, the body, the messages and the content parts are
//     printable ASCII without escapes and without '<', '>', '&'; a known key
//     is spelled exactly and appears at most once, and no other key equals
//     a known one ignoring case (encoding/json would match it);
//   - known fields have the types the general path accepts without an error:
//     strings (or null) for url, model, cache_salt, x_output_text and role;
//     integers of at most 18 digits (or null) for max_tokens,
//     max_completion_tokens, x_output_tokens, x_turn and x_stage; a string or number
//     (or null) for x_session_id; an array of objects (or null) for
//     messages; a string, null or an array of objects with a string "type"
//     and a string or null "text" for a content; any value for
//     x_arrival_ms, x_think_ms and prompt;
//   - nesting no deeper than maxFastDepth.
//
// Lines with the request identity fields (x_headers, x_objective,
// x_fairness_id) decline too. Anything else, including every line
// encoding/json rejects, declines, and
// the line goes through the general path unchanged, which then decides it
// and words every error exactly as before. The semantic checks after
// decoding are shared. FuzzOpenAIFast and TestOpenAIFastDifferential check
// the equivalence.

// openaiFastObj is what the general path decodes from one object: the
// fields of openaiBody and openaiX (and the envelope's url and body).
type openaiFastObj struct {
	seen, set  uint32 // known keys present, and those not null
	start, end int    // the object's bytes
	spaced     bool   // whitespace outside strings within the object
	hasX       bool   // a key starting with "x_"
	members    []fastMember

	url, model, cacheSalt, outText    string
	maxTokens, maxCompletion, outToks int64
	turn, stage                       int
	sid                               flexID
	arrival, think, prompt, messages  []byte // raw values
	body                              []byte // the envelope's raw body
	msgLo, msgHi                      int    // messages, in openaiFast.msgs
}

// fastMember is an object member: its bytes from the key's opening quote to
// the end of the value.
type fastMember struct {
	start, end int
	x          bool
}

type openaiFastMsg struct {
	role    string
	hasRole bool
	parts   []string // nil, or a slice of openaiFast.parts
}

type openaiFast struct {
	c         jsonCursor
	top, body openaiFastObj
	hasBody   bool
	msgs      []openaiFastMsg
	parts     []string
	partIdx   []int // msgs[i].parts = parts[partIdx[2i]:partIdx[2i+1]]
	lastModel string
}

// Known keys, as bits of a seen-set.
const (
	okURL = 1 << iota
	okBody
	okModel
	okMessages
	okPrompt
	okMaxTokens
	okMaxCompletion
	okCacheSalt
	okArrival
	okSession
	okTurn
	okOutTokens
	okOutText
	okThink
	okStage
)

// openaiKeyNames lists the known keys of the envelope and the body; a key
// equal to one of them ignoring case makes the line decline.
var openaiKeyNames = [...]string{"url", "body", "model", "messages", "prompt", "max_tokens",
	"max_completion_tokens", "cache_salt", "x_arrival_ms", "x_session_id", "x_turn",
	"x_output_tokens", "x_output_text", "x_think_ms", "x_stage"}

// decode reads line; false means the general path must decide it.
func (f *openaiFast) decode(line []byte) bool {
	c := &f.c
	c.reset(line)
	f.msgs, f.parts, f.partIdx = f.msgs[:0], f.parts[:0], f.partIdx[:0]
	f.hasBody = false
	if c.peek() != '{' || !f.object(&f.top, true) || !c.atEnd() {
		return false
	}
	// Message parts are sliced only now: f.parts may have moved as it grew.
	for i := range f.msgs {
		if lo, hi := f.partIdx[2*i], f.partIdx[2*i+1]; lo >= 0 {
			f.msgs[i].parts = f.parts[lo:hi:hi]
		}
	}
	return true
}

// object reads an object (the cursor is at its '{') into o: the envelope's
// fields if top, the body's otherwise.
func (f *openaiFast) object(o *openaiFastObj, top bool) bool {
	c := &f.c
	spaced := c.spaced
	c.spaced = false
	o.seen, o.set, o.hasX = 0, 0, false
	o.members = o.members[:0]
	o.start = c.i
	ok := c.members(func(k []byte, kstart int) bool {
		bit := keyBit(k, openaiKeyNames[:])
		if bit < 0 || o.seen&uint32(bit) != 0 {
			return false
		}
		if bit == 0 && identityKey(k) {
			return false // request identity fields: the general path reads them
		}
		if !top && (bit == okURL || bit == okBody) {
			bit = 0 // the body struct has no such fields
		}
		o.seen |= uint32(bit)
		if c.peek() == 'n' && bit != 0 && bit&(okArrival|okThink|okPrompt|okMessages|okBody) == 0 {
			// null leaves a pointer field nil.
			if !c.null() {
				return false
			}
		} else {
			o.set |= uint32(bit)
			if !f.value(o, bit) {
				return false
			}
		}
		x := len(k) >= 2 && k[0] == 'x' && k[1] == '_'
		o.hasX = o.hasX || x
		o.members = append(o.members, fastMember{kstart, c.i, x})
		return true
	})
	if !ok {
		return false
	}
	o.end = c.i
	o.spaced = c.spaced
	c.spaced = c.spaced || spaced
	return true
}

// value reads the value of known key bit (0 for another key) into o.
func (f *openaiFast) value(o *openaiFastObj, bit int) bool {
	c := &f.c
	var ok bool
	switch bit {
	case okURL:
		o.url, ok = c.str()
	case okModel:
		var b []byte
		if b, ok = c.strBytes(); ok {
			if string(b) != f.lastModel {
				f.lastModel = string(b)
			}
			o.model = f.lastModel
		}
	case okCacheSalt:
		o.cacheSalt, ok = c.str()
	case okOutText:
		o.outText, ok = c.str()
	case okMaxTokens:
		o.maxTokens, ok = c.int64()
	case okMaxCompletion:
		o.maxCompletion, ok = c.int64()
	case okOutTokens:
		o.outToks, ok = c.int64()
	case okTurn, okStage:
		var v int64
		v, ok = c.int64()
		dst := &o.turn
		if bit == okStage {
			dst = &o.stage
		}
		*dst = int(v)
		ok = ok && int64(*dst) == v
	case okSession:
		o.sid, ok = c.flexID()
	case okBody:
		if c.peek() != '{' {
			return false
		}
		f.hasBody = true
		if ok = f.object(&f.body, false); ok {
			o.body = c.b[f.body.start:f.body.end]
		}
	case okMessages:
		start := c.i
		if ok = f.messages(o); ok {
			o.messages = c.b[start:c.i]
		}
	case okArrival, okThink, okPrompt:
		start := c.i
		if ok = c.skipValue(); !ok {
			return false
		}
		raw := c.b[start:c.i]
		switch bit {
		case okArrival:
			o.arrival = raw
		case okThink:
			o.think = raw
		default:
			o.prompt = raw
		}
	default:
		ok = c.skipValue()
	}
	return ok
}

// messages reads a messages array (or null) into f.msgs.
func (f *openaiFast) messages(o *openaiFastObj) bool {
	c := &f.c
	o.msgLo, o.msgHi = len(f.msgs), len(f.msgs)
	if c.null() {
		return true
	}
	if c.peek() != '[' {
		return false
	}
	c.i++
	if c.eat(']') {
		return true
	}
	for {
		if c.peek() != '{' || !f.message() {
			return false
		}
		if c.eat(',') {
			continue
		}
		if !c.eat(']') {
			return false
		}
		o.msgHi = len(f.msgs)
		return true
	}
}

const (
	okRole = 1 << iota
	okContent
)

var messageKeyNames = [...]string{"role", "content"}

// message reads one message object (the cursor is at its '{').
func (f *openaiFast) message() bool {
	c := &f.c
	var m openaiFastMsg
	lo, hi := -1, -1
	seen := 0
	ok := c.members(func(k []byte, _ int) bool {
		bit := keyBit(k, messageKeyNames[:])
		if bit < 0 || seen&bit != 0 {
			return false
		}
		seen |= bit
		var ok bool
		switch bit {
		case okRole:
			if c.peek() == 'n' {
				return c.null()
			}
			m.role, ok = f.role()
			m.hasRole = true
		case okContent:
			lo, hi, ok = f.content()
		default:
			ok = c.skipValue()
		}
		return ok
	})
	if !ok {
		return false
	}
	f.msgs = append(f.msgs, m)
	f.partIdx = append(f.partIdx, lo, hi)
	return true
}

// role reads a role string, without allocating for the usual roles.
func (f *openaiFast) role() (string, bool) {
	b, ok := f.c.strBytes()
	if !ok {
		return "", false
	}
	switch string(b) {
	case "system":
		return "system", true
	case "user":
		return "user", true
	case "assistant":
		return "assistant", true
	case "tool":
		return "tool", true
	case "developer":
		return "developer", true
	}
	return string(b), true
}

const (
	okType = 1 << iota
	okText
)

var partKeyNames = [...]string{"type", "text"}

// content reads a message content and appends its text segments to
// f.parts, returning their range (-1, -1 for none), as contentParts does.
func (f *openaiFast) content() (lo, hi int, ok bool) {
	c := &f.c
	switch c.peek() {
	case 'n':
		return -1, -1, c.null()
	case '"':
		s, ok := c.str()
		f.parts = append(f.parts, s)
		return len(f.parts) - 1, len(f.parts), ok
	case '[':
	default:
		return 0, 0, false
	}
	c.i++
	lo = len(f.parts)
	if c.eat(']') {
		return -1, -1, true
	}
	for {
		if c.peek() != '{' {
			return 0, 0, false
		}
		var text string
		isText, textNull := false, false
		seen := 0
		ok := c.members(func(k []byte, _ int) bool {
			bit := keyBit(k, partKeyNames[:])
			if bit < 0 || seen&bit != 0 {
				return false
			}
			seen |= bit
			switch bit {
			case okType:
				if c.peek() != '"' {
					return false
				}
				typ, ok := c.strBytes()
				isText = string(typ) == "text" || string(typ) == "input_text"
				return ok
			case okText:
				if c.peek() == 'n' {
					textNull = true
					return c.null()
				}
				var ok bool
				text, ok = c.str()
				return ok
			}
			return c.skipValue()
		})
		if !ok {
			return 0, 0, false
		}
		if isText && seen&okText != 0 && !textNull {
			f.parts = append(f.parts, text)
		}
		if c.eat(',') {
			continue
		}
		if !c.eat(']') {
			return 0, 0, false
		}
		if len(f.parts) == lo {
			return -1, -1, true
		}
		return lo, len(f.parts), true
	}
}

// fill sets env and body to what the general path decodes from the line.
func (f *openaiFast) fill(env *openaiEnvelope, body *openaiBody) {
	t := &f.top
	if t.set&okURL != 0 {
		env.URL = &t.url
	}
	if f.hasBody {
		env.Body = t.body
	}
	t.fillX(&env.openaiX)
	b := t
	if f.hasBody {
		b = &f.body
	}
	if b.set&okModel != 0 {
		body.Model = &b.model
	}
	if b.seen&okMessages != 0 {
		body.Messages = b.messages
	}
	if b.seen&okPrompt != 0 {
		body.Prompt = b.prompt
	}
	if b.set&okMaxTokens != 0 {
		body.MaxTokens = &b.maxTokens
	}
	if b.set&okMaxCompletion != 0 {
		body.MaxCompletionTokens = &b.maxCompletion
	}
	if b.set&okCacheSalt != 0 {
		body.CacheSalt = &b.cacheSalt
	}
	b.fillX(&body.openaiX)
}

func (o *openaiFastObj) fillX(x *openaiX) {
	if o.seen&okArrival != 0 {
		x.ArrivalMs = o.arrival
	}
	if o.set&okSession != 0 {
		x.SessionID = &o.sid
	}
	if o.set&okTurn != 0 {
		x.Turn = &o.turn
	}
	if o.set&okOutTokens != 0 {
		x.OutputTokens = &o.outToks
	}
	if o.set&okOutText != 0 {
		x.OutputText = &o.outText
	}
	if o.seen&okThink != 0 {
		x.ThinkMs = o.think
	}
	if o.set&okStage != 0 {
		x.Stage = &o.stage
	}
}

// bodyMessages returns the body's messages.
func (f *openaiFast) bodyMessages() []openaiFastMsg {
	b := &f.top
	if f.hasBody {
		b = &f.body
	}
	return f.msgs[b.msgLo:b.msgHi]
}

// cleanBody returns what stripXFields returns for the body: a copy of it,
// compacted, without its x_* members.
func (f *openaiFast) cleanBody() []byte {
	b := &f.top
	if f.hasBody {
		b = &f.body
	}
	line := f.c.b
	if !b.spaced && !b.hasX {
		return append([]byte(nil), line[b.start:b.end]...)
	}
	out := make([]byte, 0, b.end-b.start)
	out = append(out, '{')
	first := true
	for _, m := range b.members {
		if m.x {
			continue
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		if b.spaced {
			out = appendCompactJSON(out, line[m.start:m.end])
		} else {
			out = append(out, line[m.start:m.end]...)
		}
	}
	return append(out, '}')
}

// identityKey reports whether k is one of the request identity fields
// (x_headers, x_objective, x_fairness_id), ignoring case as encoding/json
// matches them.
func identityKey(k []byte) bool {
	return asciiEqualFold(k, "x_headers") || asciiEqualFold(k, "x_objective") || asciiEqualFold(k, "x_fairness_id")
}
