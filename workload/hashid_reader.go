package workload

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
)

// hashIDReader reads the two hash-id JSONL formats.
//
// Mooncake: {"timestamp": ms, "input_length", "output_length", "hash_ids"};
// sessions are inferred: a request continues the latest earlier request
// whose block list — its full blocks, or all its blocks — ignoring the first
// block (a universal system prompt), is a prefix of its own block list, with
// at least one block beyond the first (traces.md C.7.4). The longest such
// prefix wins.
//
// Alibaba: {"chat_id", "parent_chat_id" (-1 for a root), "timestamp": s,
// "input_length", "output_length", "turn", "type", "hash_ids"}; sessions are
// explicit: a request continues its parent.
type hashIDReader struct {
	name      string
	format    Format
	lr        *lineReader
	opt       *Options
	synth     blockSynth
	modelJSON []byte
	blockSize int
	closed    bool
	nextID    int64
	lastTS    int64

	chains  *sessionTable[uint64] // Mooncake: prefix hash of full-block list -> request
	chats   *sessionTable[string] // Alibaba: chat_id -> request
	prefixH []uint64
	fast    hashIDFast
}

func newHashIDReader(r io.Reader, name string, f Format, o *Options) (*hashIDReader, error) {
	lx, err := o.Tokenizer.Lexicon(o.BytesPerToken)
	if err != nil {
		return nil, err
	}
	bs := o.BlockSize
	if bs == 0 {
		bs = 512
		if f == FormatAlibaba {
			bs = 16
		}
	}
	h := &hashIDReader{
		name: name, format: f, lr: newLineReader(r, o.MaxLineBytes), opt: o,
		synth:     blockSynth{seed: uint64(o.Seed), lex: lx},
		modelJSON: jsonString(o.Model), blockSize: bs,
		closed: o.Mode.closed(ModeOpenLoop),
	}
	if f == FormatMooncake {
		h.chains = newSessionTable[uint64](int64(o.SessionWindow), o.MaxSessions)
	} else {
		h.chats = newSessionTable[string](int64(o.SessionWindow), o.MaxSessions)
	}
	return h, nil
}

// flexID is an id given as a JSON number or string.
type flexID string

func (f *flexID) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*f = flexID(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return err
	}
	*f = flexID(n.String())
	return nil
}

type hashIDLine struct {
	Timestamp    json.RawMessage `json:"timestamp"`
	InputLength  *int64          `json:"input_length"`
	OutputLength *int64          `json:"output_length"`
	HashIDs      []int64         `json:"hash_ids"`
	// Alibaba only.
	ChatID       *flexID `json:"chat_id"`
	ParentChatID *flexID `json:"parent_chat_id"`
	Turn         *int    `json:"turn"`
}

// decodeHashIDLine is the general path, for lines parseHashIDFast declines.
// (Its own variable escapes to the heap, the fast path's does not.)
func decodeHashIDLine(line []byte) (hashIDLine, error) {
	var l hashIDLine
	err := json.Unmarshal(line, &l)
	return l, err
}

func (h *hashIDReader) bad(field, format string, args ...any) error {
	return &InputError{File: h.name, Line: h.lr.line, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// badErr is bad with an underlying cause, which the error wraps.
func (h *hashIDReader) badErr(field string, err error) error {
	return &InputError{File: h.name, Line: h.lr.line, Field: field, Msg: err.Error(), Err: err}
}

func (h *hashIDReader) next() (*Request, error) {
	for {
		line, err := h.lr.next()
		if err == io.EOF {
			return nil, io.EOF
		}
		if err == errLineTooLong {
			return nil, &fatalError{h.bad("", "%s", overLimit("line", h.opt.MaxLineBytes))}
		}
		if err != nil {
			return nil, &fatalError{fmt.Errorf("%s: %w", h.name, err)}
		}
		if isBlank(line) {
			continue
		}
		return h.parse(line)
	}
}

func (h *hashIDReader) parse(line []byte) (*Request, error) {
	l, ok := parseHashIDFast(line, &h.fast)
	if !ok {
		var err error
		if l, err = decodeHashIDLine(line); err != nil {
			field, msg := jsonProblem(err)
			return nil, &InputError{File: h.name, Line: h.lr.line, Field: field, Msg: msg, Err: err}
		}
	}
	// Validate everything before touching session state or ids.
	tsText, err := jsonNumber(l.Timestamp)
	if err != nil {
		return nil, h.badErr("timestamp", err)
	}
	unit := int64(1e6) // Mooncake: ms
	if h.format == FormatAlibaba {
		unit = 1e9 // Alibaba: s
	}
	ts, err := parseTime(tsText, unit)
	if err != nil {
		return nil, h.badErr("timestamp", err)
	}
	if ts < h.lastTS {
		return nil, h.bad("timestamp", "%s is before the previous line's (the trace must be sorted by time)", tsText)
	}
	if l.InputLength == nil {
		return nil, h.bad("input_length", "missing")
	}
	in := *l.InputLength
	if in <= 0 {
		return nil, h.bad("input_length", "must be > 0, got %d", in)
	}
	if in > int64(h.opt.MaxPromptTokens) {
		return nil, h.bad("input_length", "%d exceeds the limit of %d tokens", in, h.opt.MaxPromptTokens)
	}
	if l.OutputLength == nil {
		return nil, h.bad("output_length", "missing")
	}
	out := *l.OutputLength
	if out < 0 || out > maxOutputTokens {
		return nil, h.bad("output_length", "%d out of range [0, %d]", out, maxOutputTokens)
	}
	out = max(out, 1) // vLLM generates at least one token (docs/workloads.md)
	if l.HashIDs == nil {
		return nil, h.bad("hash_ids", "missing")
	}
	bs := int64(h.blockSize)
	if need := (in + bs - 1) / bs; int64(len(l.HashIDs)) != need {
		return nil, h.bad("hash_ids", "%d ids for input_length %d (block size %d needs %d)", len(l.HashIDs), in, bs, need)
	}
	for i, id := range l.HashIDs {
		if id < 0 || id > maxHashID {
			return nil, h.bad(fmt.Sprintf("hash_ids[%d]", i), "id %d out of range [0, 2^47)", id)
		}
	}
	var chat, parent string
	if h.format == FormatAlibaba {
		if l.ChatID == nil || *l.ChatID == "" {
			return nil, h.bad("chat_id", "missing")
		}
		chat = string(*l.ChatID)
		if l.ParentChatID != nil {
			parent = string(*l.ParentChatID)
		}
		if parent == "-1" {
			parent = ""
		}
	}

	h.lastTS = ts
	req := &Request{
		ID: h.nextID, Prev: -1, Arrival: ts, Model: h.opt.Model, Endpoint: EndpointCompletions,
		PromptLen: int(in), OutputTokens: int(out),
		HashIDs: l.HashIDs, HashBlockSize: h.blockSize, Line: h.lr.line,
	}
	h.nextID++
	var prev turnRef
	var found bool
	if h.format == FormatMooncake {
		prev, found = h.inferMooncake(req, l.HashIDs, int(in), ts)
	} else {
		prev, found = h.chats.get(parent, ts)
		switch {
		case found:
			req.Session = prev.session
		case parent != "":
			// The parent is outside the trace or the window: the session is
			// named after it and the turn taken from the trace.
			req.Session = parent
			if l.Turn != nil && *l.Turn > 1 {
				req.Turn = *l.Turn - 1
			}
		default:
			req.Session = chat
		}
	}
	if found {
		req.Prev = prev.id
		req.Turn = prev.turn + 1
		if h.closed {
			req.AfterPrevious = true
			req.ThinkTime = ts - prev.arrival
		}
	}
	if h.format == FormatAlibaba {
		h.chats.put(chat, turnRef{id: req.ID, session: req.Session, turn: req.Turn, arrival: ts})
	}
	if !h.opt.NoTokens {
		req.PromptTokens, req.Body = h.synth.hashPrompt(l.HashIDs, h.blockSize, int(in), h.modelJSON, int(out))
	}
	return req, nil
}

// inferMooncake links req to the request it continues and registers req's
// own full-block list. Keys are 64-bit chained hashes of ids[1:j+1]
// (collisions are negligible at 2^-64 per pair).
func (h *hashIDReader) inferMooncake(req *Request, ids []int64, in int, ts int64) (turnRef, bool) {
	n := len(ids)
	h.prefixH = h.prefixH[:0]
	var acc uint64 = 0x6d6f6f6e63616b65
	h.prefixH = append(h.prefixH, acc) // j = 0: unused
	for j := 1; j < n; j++ {
		acc = splitmix64(acc*0x9e3779b97f4a7c15 ^ uint64(ids[j]))
		h.prefixH = append(h.prefixH, acc)
	}
	var prev turnRef
	found := false
	for j := n - 1; j >= 1; j-- {
		if p, ok := h.chains.get(h.prefixH[j], ts); ok {
			prev, found = p, true
			break
		}
	}
	if found {
		req.Session = prev.session
	} else {
		req.Session = "m" + strconv.FormatInt(req.ID, 10)
	}
	// Register under the full-block list and under the whole list (a later
	// request may repeat this one, partial last block included). With both,
	// the shared Mooncake conversation trace gives the 8,028 chains and
	// 4,003 continuations of traces.md C.1.
	turn := 0
	if found {
		turn = prev.turn + 1
	}
	ref := turnRef{id: req.ID, session: req.Session, turn: turn, arrival: ts}
	if full := min(in/h.blockSize, n); full >= 2 && full < n {
		h.chains.put(h.prefixH[full-1], ref)
	}
	if n >= 2 {
		h.chains.put(h.prefixH[n-1], ref)
	}
	return prev, found
}

func isBlank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' {
			return false
		}
	}
	return true
}
