package workload

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// azureReader reads the Azure LLM inference CSV traces (TIMESTAMP,
// ContextTokens, GeneratedTokens; columns found by header name). They carry
// lengths only, so every request gets unique synthesized content (virtual
// 512-token blocks that no other request uses), after an optional shared
// system prompt of Options.SystemPromptTokens tokens (to emulate Mooncake's
// universal first block). Arrival is TIMESTAMP minus the first row's.
type azureReader struct {
	name      string
	cr        *csv.Reader
	lim       *boundedReader
	opt       *Options
	synth     blockSynth
	modelJSON []byte
	colTS     int
	colIn     int
	colOut    int
	ncols     int
	first     time.Time
	hasFirst  bool
	last      int64
	nextID    int64
	line      int
	lastLine  int // line of the last record's last field
}

// errRecordTooLong is the Azure reader's boundedReader error: encoding/csv
// buffers a whole record however long it is, so its input fails past
// Options.MaxLineBytes beyond the end of the last record it returned (a
// record is ended by its line end, or spans several lines inside quotes).
var errRecordTooLong = errors.New("CSV record too long")

// boundedReader reads r, failing with tooLong when a read would take it
// more than limit bytes (+1 for the line end) past mark: the end of the
// last record its reader returned, which the reader moves. It bounds how
// much a decoder that buffers a whole record or value (encoding/csv,
// encoding/json) can hold, at a comparison per read.
type boundedReader struct {
	r       io.Reader
	off     int64 // bytes read
	mark    int64
	limit   int64
	tooLong error
}

func (l *boundedReader) Read(p []byte) (int, error) {
	room := l.mark + l.limit + 1 - l.off
	if room <= 0 {
		return 0, l.tooLong
	}
	if int64(len(p)) > room {
		p = p[:room]
	}
	n, err := l.r.Read(p)
	l.off += int64(n)
	return n, err
}

func newAzureReader(r io.Reader, name string, o *Options) (*azureReader, error) {
	lx, err := o.Tokenizer.Lexicon(o.BytesPerToken)
	if err != nil {
		return nil, err
	}
	lim := &boundedReader{r: r, limit: int64(o.MaxLineBytes), tooLong: errRecordTooLong}
	cr := csv.NewReader(lim)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	a := &azureReader{
		name: name, cr: cr, lim: lim, opt: o, synth: blockSynth{seed: uint64(o.Seed), lex: lx},
		modelJSON: jsonString(o.Model), colTS: -1, colIn: -1, colOut: -1,
	}
	header, err := cr.Read()
	if err != nil {
		switch {
		case err == io.EOF:
			return nil, &InputError{File: name, Line: 1, Msg: "empty file (want a CSV header)"}
		case errors.Is(err, errRecordTooLong):
			return nil, &InputError{File: name, Line: 1, Msg: "header: " + overLimit("CSV record", o.MaxLineBytes), Err: err}
		}
		return nil, &InputError{File: name, Line: 1, Msg: "bad CSV header: " + err.Error(), Err: err}
	}
	lim.mark = cr.InputOffset()
	a.lastLine, _ = cr.FieldPos(len(header) - 1)
	a.ncols = len(header)
	for i, h := range header {
		// (A leading byte order mark is gone: newStream drops it.)
		switch strings.ToLower(strings.TrimSpace(h)) {
		case "timestamp":
			a.colTS = i
		case "contexttokens":
			a.colIn = i
		case "generatedtokens":
			a.colOut = i
		}
	}
	for _, c := range []struct {
		col  int
		name string
	}{{a.colTS, "TIMESTAMP"}, {a.colIn, "ContextTokens"}, {a.colOut, "GeneratedTokens"}} {
		if c.col < 0 {
			return nil, &InputError{File: name, Line: 1, Field: c.name, Msg: "column missing from the header"}
		}
	}
	return a, nil
}

func (a *azureReader) bad(field, format string, args ...any) error {
	return &InputError{File: a.name, Line: a.line, Field: field, Msg: fmt.Sprintf(format, args...)}
}

func (a *azureReader) next() (*Request, error) {
	rec, err := a.cr.Read()
	if err == io.EOF {
		return nil, io.EOF
	}
	if err != nil {
		if errors.Is(err, errRecordTooLong) {
			// The record starts on the line after the previous one (blank
			// lines before it aside).
			return nil, &fatalError{&InputError{File: a.name, Line: a.lastLine + 1, Msg: overLimit("CSV record", a.opt.MaxLineBytes), Err: err}}
		}
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			a.line = pe.Line
			return nil, &InputError{File: a.name, Line: pe.Line, Msg: "bad CSV: " + pe.Err.Error(), Err: err}
		}
		return nil, &fatalError{fmt.Errorf("%s: %w", a.name, err)}
	}
	a.lim.mark = a.cr.InputOffset()
	a.line, _ = a.cr.FieldPos(0)
	a.lastLine, _ = a.cr.FieldPos(len(rec) - 1)
	if len(rec) != a.ncols {
		return nil, a.bad("", "%d fields, the header has %d", len(rec), a.ncols)
	}
	tsText := strings.TrimSpace(rec[a.colTS])
	var ts time.Time
	var ok bool
	layouts := [...]string{
		"2006-01-02 15:04:05.999999999",
		"2006-01-02 15:04:05.999999999Z07:00",
		"2006-01-02T15:04:05.999999999Z07:00",
		"2006-01-02T15:04:05.999999999",
	}
	for _, layout := range layouts {
		if t, err := time.Parse(layout, tsText); err == nil {
			ts, ok = t, true
			break
		}
	}
	var rel int64
	if ok {
		if !a.hasFirst {
			a.first, a.hasFirst = ts, true
		}
		rel = ts.Sub(a.first).Nanoseconds()
	} else {
		// Seconds since the trace start.
		v, err := parseTime(tsText, 1e9)
		if err != nil {
			return nil, a.bad("TIMESTAMP", "%q is neither a date-time nor seconds", tsText)
		}
		rel = v
	}
	if rel < a.last {
		return nil, a.bad("TIMESTAMP", "%s is before the previous row's (the trace must be sorted by time)", tsText)
	}
	in, err := strconv.ParseInt(strings.TrimSpace(rec[a.colIn]), 10, 64)
	if err != nil || in <= 0 {
		return nil, a.bad("ContextTokens", "want a positive integer, got %q", rec[a.colIn])
	}
	if in > int64(a.opt.MaxPromptTokens) || in > 1<<21 {
		return nil, a.bad("ContextTokens", "%d exceeds the limit of %d tokens", in, min(a.opt.MaxPromptTokens, 1<<21))
	}
	out, err := strconv.ParseInt(strings.TrimSpace(rec[a.colOut]), 10, 64)
	if err != nil || out < 0 || out > maxOutputTokens {
		return nil, a.bad("GeneratedTokens", "want an integer in [0, %d], got %q", maxOutputTokens, rec[a.colOut])
	}
	out = max(out, 1) // vLLM generates at least one token (docs/workloads.md)
	if a.nextID > maxAzureRequests {
		return nil, &fatalError{a.bad("", "more than %d rows", maxAzureRequests)}
	}
	a.last = rel
	req := &Request{
		ID: a.nextID, Prev: -1, Arrival: rel, Model: a.opt.Model, Endpoint: EndpointCompletions,
		PromptLen: int(in), OutputTokens: int(out), Line: a.line,
	}
	a.nextID++
	// Always materialized (NoTokens applies to hash-id traces only): the
	// shared system prompt does not fit the hash-id block model.
	req.PromptTokens, req.Body = a.prompt(req.ID, int(in), int(out))
	return req, nil
}

// prompt synthesizes the shared system prompt (block azureSystemBlock) and
// the request's unique content (virtual blocks azureUniqueBase + id<<12 + b).
func (a *azureReader) prompt(id int64, in, out int) ([]uint32, []byte) {
	toks := make([]uint32, 0, in)
	body := a.synth.bodyStart(a.modelJSON, in)
	sys := min(a.opt.SystemPromptTokens, in)
	toks, body = a.synth.appendBlock(toks, body, true, azureSystemBlock, 0, sys)
	for p := 0; p < in-sys; p += azureBlock {
		h := uint64(azureUniqueBase) + uint64(id)<<12 + uint64(p/azureBlock)
		toks, body = a.synth.appendBlock(toks, body, true, h, 0, min(azureBlock, in-sys-p))
	}
	return toks, bodyEnd(body, out)
}
