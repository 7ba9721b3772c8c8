package workload

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// sharegptReader reads ShareGPT dumps: a JSON array (or JSONL) of
// {"id", "conversations": [{"from", "value"}]} ("conversation"/"messages"
// with {"role", "content"} are accepted too). Each conversation is a session
// whose sessions start as a Poisson process (Options.Rate sessions/s,
// default 1; the first at 0). Each human message that is followed by an
// answer (or ends the conversation) is a turn: its prompt is the whole
// conversation up to it, its output the answer (tokens enc(answer)
// <|eot_id|>, or Options.DefaultOutputTokens when there is none). Turn k > 0
// comes a think time (Options.ThinkTime) after turn k-1: closed-loop by
// default, at nominal times in open-loop.
type sharegptReader struct {
	name    string
	br      *bufio.Reader
	lc      *lineCounter
	dec     *json.Decoder
	decBase int64 // offset in the input of the decoder's first byte
	opt     *Options
	enc     *chatEncoder
	closed  bool
	rng     *rand.Rand
	gapMean float64

	array     bool
	started   bool
	eof       bool
	convIndex int64
	nextStart int64
	nextID    int64
	seq       int64
	pending   minHeap[*sgSession]
	empty     int
	fast      sgFast
	slow      bool // decode every conversation with encoding/json (tests)
}

type sgTurn struct {
	add    []Message // messages to append before this turn's prompt
	answer *string
	think  int64
}

type sgSession struct {
	id     string
	seq    int64
	line   int
	next   int64 // nominal arrival of the next turn
	k      int
	prevID int64
	turns  []sgTurn
	msgs   []Message
	conv   conv
}

func newShareGPTReader(r io.Reader, name string, o *Options) (*sharegptReader, error) {
	enc, err := newChatEncoder(o.Tokenizer, defaultSegCacheBytes)
	if err != nil {
		return nil, err
	}
	rate := o.sessionRate()
	lc := &lineCounter{boundedReader: boundedReader{r: r, limit: int64(o.MaxLineBytes), tooLong: errValueTooLong}}
	br := bufio.NewReader(lc)
	s := &sharegptReader{
		name: name, br: br, lc: lc, opt: o, enc: enc,
		closed:  o.Mode.closed(ModeClosedLoop),
		rng:     rand.New(rand.NewPCG(uint64(o.Seed), 0x7368617265677074)),
		gapMean: 1e9 / rate,
	}
	s.pending.less = func(a, b *sgSession) bool {
		if a.next != b.next {
			return a.next < b.next
		}
		return a.seq < b.seq
	}
	return s, nil
}

// lineCounter is the ShareGPT reader's input. It maps byte offsets (as
// json.Decoder reports them) to line numbers, with a bitmap of the newlines
// read since the last query (one bit per byte, so a conversation of many
// short lines costs an eighth of its size, not eight bytes a line); queries
// must come in increasing offset order. It also bounds how much one
// conversation can make the decoder buffer: a read that would take the
// input more than limit bytes past mark (the end of the last complete JSON
// value) fails with errValueTooLong. encoding/json's Decoder otherwise
// buffers a value, and even whitespace before one, however long it is.
type lineCounter struct {
	boundedReader
	base  int64    // offset of bit 0 of nl, a multiple of 64
	nl    []uint64 // bit i set: a newline at offset base+i
	q     int64    // offset of the last query
	lines int      // newlines before q
}

var errValueTooLong = errors.New("JSON value too long")

func (c *lineCounter) Read(p []byte) (int, error) {
	start := c.off
	n, err := c.boundedReader.Read(p)
	for i := 0; i < n; {
		j := bytes.IndexByte(p[i:n], '\n')
		if j < 0 {
			break
		}
		pos := start + int64(i+j) - c.base
		if w := int(pos >> 6); w >= len(c.nl) {
			old := len(c.nl)
			c.nl = slices.Grow(c.nl, w+1-old)[:w+1]
			clear(c.nl[old:])
		}
		c.nl[pos>>6] |= 1 << (pos & 63)
		i += j + 1
	}
	return n, err
}

// lineAt returns the 1-based line of byte offset off.
func (c *lineCounter) lineAt(off int64) int {
	if off <= c.q {
		return c.lines + 1
	}
	// Count the newlines in [q, off), then forget the words below off.
	a, b := c.q-c.base, off-c.base
	for w := a >> 6; w < int64(len(c.nl)) && w<<6 < b; w++ {
		word := c.nl[w]
		if lo := w << 6; a > lo {
			word &^= 1<<(a-lo) - 1
		}
		if hi := w<<6 + 64; b < hi {
			word &= 1<<(b-(hi-64)) - 1
		}
		c.lines += bits.OnesCount64(word)
	}
	c.q = off
	drop := int(b >> 6)
	n := copy(c.nl, c.nl[min(drop, len(c.nl)):])
	c.nl = c.nl[:n]
	c.base += int64(drop) << 6
	return c.lines + 1
}

func (s *sharegptReader) next() (*Request, error) {
	for {
		if s.pending.len() > 0 && (s.eof || s.pending.peek().next <= s.nextStart) {
			return s.emit(s.pending.pop())
		}
		if s.eof {
			return nil, io.EOF
		}
		if err := s.readConversation(); err != nil {
			return nil, err
		}
	}
}

type sgMessage struct {
	From    *string `json:"from"`
	Value   *string `json:"value"`
	Role    *string `json:"role"`
	Content *string `json:"content"`
}

type sgConversation struct {
	ID            *flexID      `json:"id"`
	Conversations *[]sgMessage `json:"conversations"`
	Conversation  *[]sgMessage `json:"conversation"`
	Messages      *[]sgMessage `json:"messages"`
}

func sharegptRole(from string) (string, bool) {
	switch strings.ToLower(from) {
	case "human", "user":
		return "user", true
	case "gpt", "chatgpt", "assistant", "bard", "bing", "model":
		return "assistant", true
	case "system":
		return "system", true
	case "tool", "function", "observation", "ipython":
		return "tool", true
	}
	return "", false
}

// offset is the decoder's input offset in the whole input.
func (s *sharegptReader) offset() int64 { return s.decBase + s.dec.InputOffset() }

func (s *sharegptReader) syntaxErr(err error) error {
	line := s.lc.lineAt(s.offset())
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line = s.lc.lineAt(s.decBase + se.Offset)
	}
	if errors.Is(err, errValueTooLong) {
		return &fatalError{&InputError{File: s.name, Line: s.valueLine(), Msg: overLimit("JSON value", s.opt.MaxLineBytes), Err: err}}
	}
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		// Never wrap io.EOF: callers test errors.Is(err, io.EOF) for the end.
		return &fatalError{&InputError{File: s.name, Line: line, Msg: "unexpected end of input", Err: io.ErrUnexpectedEOF}}
	}
	return &fatalError{&InputError{File: s.name, Line: line, Msg: "invalid JSON: " + err.Error(), Err: err}}
}

// valueLine is the line where the value the decoder failed in starts (or
// of the end of the whitespace it failed in): its input offset is still
// before the whitespace and comma ahead of the value, which it holds in its
// buffer.
func (s *sharegptReader) valueLine() int {
	line := s.lc.lineAt(s.offset())
	r := s.dec.Buffered()
	var buf [4096]byte
	for {
		n, err := r.Read(buf[:])
		for _, c := range buf[:n] {
			switch c {
			case '\n':
				line++
			case ' ', '\t', '\r', ',':
			default:
				return line
			}
		}
		if err != nil || n == 0 {
			return line
		}
	}
}

// readConversation decodes the next conversation and schedules its session.
// At the end of the input it sets s.eof.
func (s *sharegptReader) readConversation() error {
	if !s.started {
		s.started = true
		for {
			b, err := s.br.ReadByte()
			if err == io.EOF {
				s.eof = true
				return nil
			}
			if errors.Is(err, errValueTooLong) {
				return &fatalError{&InputError{File: s.name, Line: s.lc.lineAt(s.lc.off), Msg: overLimit("JSON value", s.opt.MaxLineBytes), Err: err}}
			}
			if err != nil {
				return &fatalError{fmt.Errorf("%s: %w", s.name, err)}
			}
			// (A leading byte order mark is gone: newStream drops it.)
			if b == ' ' || b == '\t' || b == '\r' || b == '\n' {
				continue
			}
			s.array = b == '['
			if err := s.br.UnreadByte(); err != nil {
				return &fatalError{err}
			}
			break
		}
		// The decoder's offsets start here, after the leading whitespace.
		s.decBase = s.lc.off - int64(s.br.Buffered())
		s.dec = json.NewDecoder(s.br)
		if s.array {
			if _, err := s.dec.Token(); err != nil { // the '['
				return s.syntaxErr(err)
			}
			s.lc.mark = s.offset()
		}
	}
	if !s.dec.More() {
		if s.array {
			if t, err := s.dec.Token(); err != nil || t != json.Delim(']') {
				if err == nil {
					err = fmt.Errorf("unexpected %v", t)
				}
				return s.syntaxErr(err)
			}
			s.lc.mark = s.offset()
			if _, err := s.dec.Token(); err != io.EOF {
				if errors.Is(err, errValueTooLong) {
					return s.syntaxErr(err)
				}
				return &fatalError{&InputError{File: s.name, Line: s.lc.lineAt(s.offset()), Msg: "data after the end of the JSON array"}}
			}
		} else if _, err := s.dec.Token(); err != io.EOF {
			if err == nil {
				err = errors.New("unexpected delimiter")
			}
			return s.syntaxErr(err)
		}
		s.eof = true
		return nil
	}
	var raw json.RawMessage
	if err := s.dec.Decode(&raw); err != nil {
		return s.syntaxErr(err)
	}
	s.lc.mark = s.offset()
	line := s.lc.lineAt(s.lc.mark - int64(len(raw)))
	index := s.convIndex
	s.convIndex++
	bad := func(field, format string, args ...any) error {
		return &InputError{File: s.name, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	var c sgConversation
	if s.slow || !s.fast.decode(raw, &c) {
		c = sgConversation{}
		if err := json.Unmarshal(raw, &c); err != nil {
			field, msg := jsonProblem(err)
			return &InputError{File: s.name, Line: line, Field: field, Msg: msg, Err: err}
		}
	}
	var list []sgMessage
	key := "conversations"
	switch {
	case c.Conversations != nil:
		list = *c.Conversations
	case c.Conversation != nil:
		list, key = *c.Conversation, "conversation"
	case c.Messages != nil:
		list, key = *c.Messages, "messages"
	default:
		return bad("conversations", "missing")
	}
	msgs := make([]Message, 0, len(list))
	total := 0
	for i, m := range list {
		from, val := m.From, m.Value
		if from == nil {
			from = m.Role
		}
		if val == nil {
			val = m.Content
		}
		if from == nil {
			return bad(fmt.Sprintf("%s[%d].from", key, i), "missing")
		}
		role, ok := sharegptRole(*from)
		if !ok {
			return bad(fmt.Sprintf("%s[%d].from", key, i), "unknown speaker %q", *from)
		}
		if val == nil {
			return bad(fmt.Sprintf("%s[%d].value", key, i), "missing")
		}
		total += len(*val)
		msgs = append(msgs, Message{Role: role, Content: []string{*val}})
	}
	if total > 4*s.opt.MaxPromptTokens {
		return bad(key, "conversation of %d bytes exceeds the prompt limit", total)
	}
	var turns []sgTurn
	var pending []Message
	for i := 0; i < len(msgs); i++ {
		pending = append(pending, msgs[i])
		if msgs[i].Role != "user" || (i+1 < len(msgs) && msgs[i+1].Role != "assistant") {
			continue
		}
		t := sgTurn{add: pending}
		pending = nil
		if i+1 < len(msgs) {
			ans := msgs[i+1].Content[0]
			t.answer = &ans
			pending = []Message{msgs[i+1]}
			i++
		}
		turns = append(turns, t)
	}
	if len(turns) == 0 {
		s.empty++
		return nil
	}
	for k := 1; k < len(turns); k++ {
		turns[k].think = int64(s.opt.ThinkTime.Sample(s.rng))
	}
	id := "sharegpt-" + strconv.FormatInt(index, 10)
	if c.ID != nil && *c.ID != "" {
		id = string(*c.ID)
	}
	sess := &sgSession{id: id, seq: s.seq, line: line, next: s.nextStart, prevID: -1, turns: turns}
	s.seq++
	s.nextStart += int64(expSample(s.rng, s.gapMean))
	s.pending.push(sess)
	return nil
}

func (s *sharegptReader) emptyRecords() int { return s.empty }

// emit builds the request of the session's next turn and reschedules it.
func (s *sharegptReader) emit(sess *sgSession) (*Request, error) {
	t := sess.turns[sess.k]
	for _, m := range t.add {
		if err := sess.conv.add(s.enc, m); err != nil {
			return nil, &fatalError{fmt.Errorf("%s:%d: %w", s.name, sess.line, err)}
		}
		sess.msgs = append(sess.msgs, m)
	}
	prompt, err := sess.conv.prompt(s.enc)
	if err != nil {
		return nil, &fatalError{fmt.Errorf("%s:%d: %w", s.name, sess.line, err)}
	}
	if len(prompt) > s.opt.MaxPromptTokens {
		// Drop the rest of this conversation.
		return nil, &InputError{File: s.name, Line: sess.line, Field: "conversations",
			Msg: fmt.Sprintf("turn %d: prompt of %d tokens exceeds the limit of %d", sess.k, len(prompt), s.opt.MaxPromptTokens)}
	}
	req := &Request{
		ID: s.nextID, Session: sess.id, Turn: sess.k, Prev: sess.prevID, Arrival: sess.next,
		Model: s.opt.Model, Endpoint: EndpointChat, PromptTokens: prompt, PromptLen: len(prompt),
		OutputTokens: s.opt.DefaultOutputTokens, Line: sess.line,
	}
	s.nextID++
	if t.answer != nil {
		ids, err := s.enc.answer(*t.answer)
		if err != nil {
			return nil, &fatalError{fmt.Errorf("%s:%d: %w", s.name, sess.line, err)}
		}
		req.OutputTokenIDs, req.OutputTokens, req.OutputText = ids, len(ids), *t.answer
	}
	if sess.k > 0 && s.closed {
		req.AfterPrevious, req.ThinkTime = true, t.think
	}
	req.Body = chatBody(s.opt.Model, sess.msgs, req.OutputTokens, "")
	sess.prevID = req.ID
	sess.k++
	if sess.k < len(sess.turns) {
		sess.next += sess.turns[sess.k].think
		s.pending.push(sess)
	}
	return req, nil
}
