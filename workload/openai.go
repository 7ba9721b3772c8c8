package workload

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
)

// openaiReader reads OpenAI request JSONL: Batch-API input lines
// {"custom_id", "method", "url", "body": {...}} or bare request bodies, one
// per line. Replay extensions (top level of the line, or inside the body;
// they are stripped from the body the router sees):
//
//	x_arrival_ms     arrival, ms since trace start (decimal, exact to the ns)
//	x_session_id     session id (string or number)
//	x_turn           0-based turn within the session (default: previous turn + 1)
//	x_output_tokens  output length (default: from x_output_text, else
//	                 max_completion_tokens, else max_tokens, else 256)
//	x_output_text    the answer text; gives OutputTokenIDs
//	x_think_ms       closed-loop think time before this turn (default: the gap
//	                 to the previous turn's arrival, or a draw from Options.ThinkTime)
//	x_stage          0-based load stage (Request.Stage; default 0)
//	x_headers        request headers (an object of strings; Request.Headers,
//	                 keys lower-cased)
//	x_objective      the InferenceObjective: header x-llm-d-inference-objective
//	x_fairness_id    the fairness ID: header x-llm-d-inference-fairness-id
//
// Lines are decoded by openaiFast (openai_fast.go) in one pass when they are
// of a shape it fully understands, else by encoding/json; both yield the same
// fields, and the checks after decoding are shared.
type openaiReader struct {
	name     string
	lr       *lineReader
	opt      *Options
	enc      *chatEncoder
	closed   bool
	rng      *rand.Rand
	gapMean  float64
	nextID   int64
	clock    int64
	sessions *sessionTable[string]
	fast     openaiFast
	slow     bool // decode every line with encoding/json (tests)
}

func newOpenAIReader(r io.Reader, name string, o *Options) (*openaiReader, error) {
	enc, err := newChatEncoder(o.Tokenizer, defaultSegCacheBytes)
	if err != nil {
		return nil, err
	}
	rate := o.sessionRate()
	return &openaiReader{
		name: name, lr: newLineReader(r, o.MaxLineBytes), opt: o, enc: enc,
		closed:   o.Mode.closed(ModeOpenLoop),
		rng:      rand.New(rand.NewPCG(uint64(o.Seed), 0x6f70656e6169)),
		gapMean:  1e9 / rate,
		sessions: newSessionTable[string](int64(o.SessionWindow), o.MaxSessions),
	}, nil
}

type openaiX struct {
	ArrivalMs    json.RawMessage   `json:"x_arrival_ms"`
	SessionID    *flexID           `json:"x_session_id"`
	Turn         *int              `json:"x_turn"`
	OutputTokens *int64            `json:"x_output_tokens"`
	OutputText   *string           `json:"x_output_text"`
	ThinkMs      json.RawMessage   `json:"x_think_ms"`
	Stage        *int              `json:"x_stage"`
	Headers      map[string]string `json:"x_headers"`
	Objective    *string           `json:"x_objective"`
	FairnessID   *string           `json:"x_fairness_id"`
}

func (x *openaiX) merge(o *openaiX) {
	if x.ArrivalMs == nil {
		x.ArrivalMs = o.ArrivalMs
	}
	if x.SessionID == nil {
		x.SessionID = o.SessionID
	}
	if x.Turn == nil {
		x.Turn = o.Turn
	}
	if x.OutputTokens == nil {
		x.OutputTokens = o.OutputTokens
	}
	if x.OutputText == nil {
		x.OutputText = o.OutputText
	}
	if x.ThinkMs == nil {
		x.ThinkMs = o.ThinkMs
	}
	if x.Stage == nil {
		x.Stage = o.Stage
	}
	if x.Headers == nil {
		x.Headers = o.Headers
	}
	if x.Objective == nil {
		x.Objective = o.Objective
	}
	if x.FairnessID == nil {
		x.FairnessID = o.FairnessID
	}
}

// headers returns the request headers of the identity fields (nil when
// none): x_headers with lower-cased keys, then x_objective and
// x_fairness_id as their headers.
func (x *openaiX) headers() map[string]string {
	if x.Headers == nil && x.Objective == nil && x.FairnessID == nil {
		return nil
	}
	h := make(map[string]string, len(x.Headers)+2)
	for k, v := range x.Headers {
		h[strings.ToLower(k)] = v
	}
	if x.Objective != nil {
		h[ObjectiveHeader] = *x.Objective
	}
	if x.FairnessID != nil {
		h[FairnessHeader] = *x.FairnessID
	}
	return h
}

type openaiEnvelope struct {
	URL  *string         `json:"url"`
	Body json.RawMessage `json:"body"`
	openaiX
}

type openaiBody struct {
	Model               *string         `json:"model"`
	Messages            json.RawMessage `json:"messages"`
	Prompt              json.RawMessage `json:"prompt"`
	MaxTokens           *int64          `json:"max_tokens"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens"`
	CacheSalt           *string         `json:"cache_salt"`
	openaiX
}

type openaiMessage struct {
	Role    *string         `json:"role"`
	Content json.RawMessage `json:"content"`
}

type openaiPart struct {
	Type string  `json:"type"`
	Text *string `json:"text"`
}

func (r *openaiReader) next() (*Request, error) {
	for {
		line, err := r.lr.next()
		if err == io.EOF {
			return nil, io.EOF
		}
		if err == errLineTooLong {
			return nil, &fatalError{r.bad("", "%s", overLimit("line", r.opt.MaxLineBytes))}
		}
		if err != nil {
			return nil, &fatalError{fmt.Errorf("%s: %w", r.name, err)}
		}
		if isBlank(line) {
			continue
		}
		return r.parse(line)
	}
}

func (r *openaiReader) bad(field, format string, args ...any) error {
	return &InputError{File: r.name, Line: r.lr.line, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// badErr is bad with an underlying cause, which the error wraps.
func (r *openaiReader) badErr(field string, err error) error {
	return &InputError{File: r.name, Line: r.lr.line, Field: field, Msg: err.Error(), Err: err}
}

func (r *openaiReader) jsonErr(prefix string, err error) error {
	field, msg := jsonProblem(err)
	if field != "" && prefix != "" {
		field = prefix + field
	}
	return &InputError{File: r.name, Line: r.lr.line, Field: field, Msg: msg, Err: err}
}

func (r *openaiReader) parse(line []byte) (*Request, error) {
	var env openaiEnvelope
	var body openaiBody
	fast := !r.slow && r.fast.decode(line)
	if fast {
		r.fast.fill(&env, &body)
		if env.URL != nil && generateAPI(*env.URL) != APIDefault {
			// openaiFast knows no generate fields: the general path decodes.
			fast, env, body = false, openaiEnvelope{}, openaiBody{}
		}
	}
	if !fast {
		if err := json.Unmarshal(line, &env); err != nil {
			return nil, r.jsonErr("", err)
		}
	}
	rawBody, prefix := json.RawMessage(line), ""
	if env.Body != nil {
		rawBody, prefix = env.Body, "body."
		if bytes.Equal(bytes.TrimSpace(env.Body), []byte("null")) {
			return nil, r.bad("body", "must be an object")
		}
	}
	if !fast {
		if err := json.Unmarshal(rawBody, &body); err != nil {
			return nil, r.jsonErr(prefix, err)
		}
	}
	x := env.openaiX
	x.merge(&body.openaiX)

	// Endpoint and prompt tokens.
	hasMsgs := body.Messages != nil && !bytes.Equal(body.Messages, []byte("null"))
	hasPrompt := body.Prompt != nil && !bytes.Equal(body.Prompt, []byte("null"))
	gen := APIDefault
	if env.URL != nil {
		gen = generateAPI(*env.URL)
	}
	endpoint := ""
	switch {
	case gen != APIDefault && (hasMsgs || hasPrompt):
		return nil, r.bad(prefix+promptField(hasMsgs), "not a field of a %s body (url %s)", gen, *env.URL)
	case gen != APIDefault:
		endpoint = *env.URL
	case hasMsgs && hasPrompt:
		return nil, r.bad(prefix+"messages", "both messages and prompt given")
	case hasMsgs:
		endpoint = EndpointChat
	case hasPrompt:
		endpoint = EndpointCompletions
	case bytes.Contains(rawBody, []byte(`"token_ids"`)) || bytes.Contains(rawBody, []byte(`"input_ids"`)):
		return nil, r.bad(prefix+"messages", "missing (neither messages nor prompt given; a generate body needs the url %s or %s)", EndpointVLLMGenerate, EndpointSGLangGenerate)
	default:
		return nil, r.bad(prefix+"messages", "missing (neither messages nor prompt given)")
	}
	if env.URL != nil && *env.URL != endpoint {
		if *env.URL != EndpointChat && *env.URL != EndpointCompletions {
			return nil, r.bad("url", "unsupported endpoint %q (want %s, %s, %s or %s)", *env.URL, EndpointChat, EndpointCompletions, EndpointVLLMGenerate, EndpointSGLangGenerate)
		}
		return nil, r.bad("url", "%s does not match a body with %s", *env.URL, promptField(hasMsgs))
	}
	model := r.opt.Model // generate bodies need not name the model
	if body.Model != nil && *body.Model != "" {
		model = *body.Model
	} else if gen == APIDefault {
		return nil, r.bad(prefix+"model", "missing")
	}
	var prompt []uint32
	var g *generateFields
	var err error
	promptName := promptField(hasMsgs)
	switch {
	case gen != APIDefault:
		g, err = r.generateBody(prefix, rawBody, gen)
		if err == nil {
			prompt, promptName = g.ids, g.idsField
		}
	case hasMsgs && fast:
		prompt, err = r.chatPromptFast(prefix, r.fast.bodyMessages())
	case hasMsgs:
		prompt, err = r.chatPrompt(prefix, body.Messages)
	default:
		prompt, err = r.completionPrompt(prefix, body.Prompt)
	}
	if err != nil {
		return nil, err
	}
	if len(prompt) > r.opt.MaxPromptTokens {
		return nil, r.bad(prefix+promptName, "%d tokens exceed the limit of %d", len(prompt), r.opt.MaxPromptTokens)
	}

	// Output.
	var outIDs []uint32
	if x.OutputText != nil {
		// A chat answer ends with <|eot_id|>; so does the answer to a
		// generate prompt that ends with the chat template's generation
		// prompt (a chat turn sent pre-tokenized, as --api writes it).
		if hasMsgs || (g != nil && r.enc.generationPrompt(prompt)) {
			outIDs, err = r.enc.answer(*x.OutputText)
		} else {
			var ids []uint32
			ids, err = r.enc.cache.encode(*x.OutputText)
			outIDs = slices.Clone(ids)
		}
		if err != nil {
			return nil, r.badErr("x_output_text", err)
		}
	}
	// The body's token limits are checked as vLLM's OpenAI server checks
	// them (it rejects a limit below 1), whether or not they give the output
	// length: the body is replayed as it is.
	maxTokensName, capLo, server := "max_tokens", int64(1), "vLLM"
	if g != nil {
		// A generate body's cap is in sampling_params; top-level caps are
		// no fields of it.
		body.MaxCompletionTokens, body.MaxTokens, maxTokensName, capLo = nil, g.maxTokens, g.maxTokensField, g.maxTokensLo
		if gen == APISGLangGenerate {
			server = "SGLang"
		}
	}
	limits := [...]struct {
		v    *int64
		name string
	}{{body.MaxCompletionTokens, "max_completion_tokens"}, {body.MaxTokens, maxTokensName}}
	for _, l := range limits {
		if l.v != nil && *l.v < capLo {
			return nil, r.bad(prefix+l.name, "%d out of range [%d, %d] (%s rejects a request with %s below %d)", *l.v, capLo, maxOutputTokens, server, l.name, capLo)
		}
	}
	var outLen, lo int64
	field := "x_output_tokens"
	switch {
	case x.OutputTokens != nil:
		if env.OutputTokens == nil {
			field = prefix + field // given in the body
		}
		outLen = *x.OutputTokens
		if outIDs != nil && outLen >= 0 && int64(len(outIDs)) != outLen {
			return nil, r.bad(field, "%d, but x_output_text has %d tokens", outLen, len(outIDs))
		}
	case outIDs != nil:
		outLen = int64(len(outIDs))
	case body.MaxCompletionTokens != nil:
		outLen, field, lo = *body.MaxCompletionTokens, prefix+"max_completion_tokens", 1
	case body.MaxTokens != nil:
		outLen, field, lo = *body.MaxTokens, prefix+maxTokensName, capLo
	default:
		outLen = int64(r.opt.DefaultOutputTokens)
	}
	if outLen < lo || outLen > maxOutputTokens {
		return nil, r.bad(field, "%d out of range [%d, %d]", outLen, lo, maxOutputTokens)
	}
	if outLen == 0 {
		// A recorded length of 0 (or an empty completion): vLLM generates
		// at least one token, so the request is one of one token, whose
		// text the trace does not give.
		outLen, outIDs = 1, nil
	}

	// Time and session.
	var ts int64
	timed := x.ArrivalMs != nil && !bytes.Equal(x.ArrivalMs, []byte("null"))
	if timed {
		text, err := jsonNumber(x.ArrivalMs)
		if err == nil {
			ts, err = parseTime(text, 1e6)
		}
		if err != nil {
			return nil, r.badErr("x_arrival_ms", err)
		}
		if ts < r.clock {
			return nil, r.bad("x_arrival_ms", "%s is before an earlier line's arrival (the trace must be sorted by time)", text)
		}
	}
	var think int64 = -1
	if x.ThinkMs != nil && !bytes.Equal(x.ThinkMs, []byte("null")) {
		text, err := jsonNumber(x.ThinkMs)
		if err == nil {
			think, err = parseTime(text, 1e6)
		}
		if err != nil {
			return nil, r.badErr("x_think_ms", err)
		}
	}
	if x.Turn != nil && *x.Turn < 0 {
		return nil, r.bad("x_turn", "must be >= 0, got %d", *x.Turn)
	}
	if x.Stage != nil && *x.Stage < 0 {
		return nil, r.bad("x_stage", "must be >= 0, got %d", *x.Stage)
	}
	sid := ""
	if x.SessionID != nil {
		sid = string(*x.SessionID)
	}
	var cleanBody []byte
	if fast {
		cleanBody = r.fast.cleanBody()
	} else if cleanBody, err = stripXFields(rawBody); err != nil {
		return nil, r.jsonErr(prefix, err)
	}

	// The line is valid: update state.
	now := r.clock
	if timed {
		now = ts
	}
	var prev turnRef
	found := false
	if sid != "" {
		prev, found = r.sessions.get(sid, now)
	}
	if !timed {
		if !found && r.nextID > 0 {
			r.clock += int64(expSample(r.rng, r.gapMean))
		}
		ts = r.clock
	}
	r.clock = ts
	req := &Request{
		ID: r.nextID, Session: sid, Prev: -1, Arrival: ts, Model: model,
		Body: cleanBody, Endpoint: endpoint, PromptTokens: prompt, PromptLen: len(prompt),
		OutputTokens: int(outLen), OutputTokenIDs: outIDs, Line: r.lr.line,
	}
	r.nextID++
	if x.OutputText != nil {
		req.OutputText = *x.OutputText
	}
	if x.Stage != nil {
		req.Stage = *x.Stage
	}
	req.Headers = x.headers()
	switch {
	case gen == APISGLangGenerate:
		req.CacheSalt = g.salt
	case body.CacheSalt != nil:
		req.CacheSalt = *body.CacheSalt
	}
	if found {
		req.Prev = prev.id
		req.Turn = prev.turn + 1
		if r.closed {
			req.AfterPrevious = true
			gap := ts - prev.arrival
			switch {
			case think >= 0:
			case timed:
				think = gap
			default:
				think = int64(r.opt.ThinkTime.Sample(r.rng))
			}
			req.ThinkTime = max(think, gap)
		}
	}
	if x.Turn != nil {
		req.Turn = *x.Turn
	}
	if sid != "" {
		r.sessions.put(sid, turnRef{id: req.ID, session: sid, turn: req.Turn, arrival: ts})
	}
	return req, nil
}

func promptField(chat bool) string {
	if chat {
		return "messages"
	}
	return "prompt"
}

func (r *openaiReader) chatPrompt(prefix string, raw json.RawMessage) ([]uint32, error) {
	var msgs []openaiMessage
	if err := json.Unmarshal(raw, &msgs); err != nil {
		return nil, r.jsonErr(prefix+"messages.", err)
	}
	if len(msgs) == 0 {
		return nil, r.bad(prefix+"messages", "empty")
	}
	var c conv
	for i, m := range msgs {
		if m.Role == nil || *m.Role == "" {
			return nil, r.bad(messageField(prefix, i, "role"), "missing")
		}
		parts, err := contentParts(m.Content)
		if err != nil {
			return nil, r.badErr(messageField(prefix, i, "content"), err)
		}
		if err := r.addMessage(&c, prefix, i, *m.Role, parts); err != nil {
			return nil, err
		}
	}
	return c.prompt(r.enc)
}

// chatPromptFast is chatPrompt for messages decoded by openaiFast.
func (r *openaiReader) chatPromptFast(prefix string, msgs []openaiFastMsg) ([]uint32, error) {
	if len(msgs) == 0 {
		return nil, r.bad(prefix+"messages", "empty")
	}
	var c conv
	for i := range msgs {
		m := &msgs[i]
		if !m.hasRole || m.role == "" {
			return nil, r.bad(messageField(prefix, i, "role"), "missing")
		}
		if err := r.addMessage(&c, prefix, i, m.role, m.parts); err != nil {
			return nil, err
		}
	}
	return c.prompt(r.enc)
}

// addMessage appends message i to c, within the prompt limit.
func (r *openaiReader) addMessage(c *conv, prefix string, i int, role string, parts []string) error {
	if err := c.add(r.enc, Message{Role: role, Content: parts}); err != nil {
		return r.badErr(messageField(prefix, i, "content"), err)
	}
	if len(c.toks) > r.opt.MaxPromptTokens {
		return r.bad(prefix+"messages", "more than %d tokens", r.opt.MaxPromptTokens)
	}
	return nil
}

func messageField(prefix string, i int, name string) string {
	return fmt.Sprintf("%smessages[%d].%s", prefix, i, name)
}

// contentParts returns a message content's text segments: a string, or the
// text of each "text"/"input_text" part of an array (other parts, such as
// images, are not modeled and contribute no tokens).
func contentParts(raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("invalid string: %w", err)
		}
		return []string{s}, nil
	case '[':
		var parts []openaiPart
		if err := json.Unmarshal(raw, &parts); err != nil {
			return nil, fmt.Errorf("expected an array of content parts: %w", err)
		}
		var out []string
		for _, p := range parts {
			if (p.Type == "text" || p.Type == "input_text") && p.Text != nil {
				out = append(out, *p.Text)
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("expected a string or an array of content parts")
}

func (r *openaiReader) completionPrompt(prefix string, raw json.RawMessage) ([]uint32, error) {
	raw = bytes.TrimSpace(raw)
	field := prefix + "prompt"
	var text string
	switch raw[0] {
	case '"':
		if err := json.Unmarshal(raw, &text); err != nil {
			return nil, r.jsonErr(prefix, err)
		}
	case '[':
		var elems []json.RawMessage
		if err := json.Unmarshal(raw, &elems); err != nil {
			return nil, r.badErr(field, fmt.Errorf("invalid array: %w", err))
		}
		if len(elems) == 0 {
			return nil, r.bad(field, "empty")
		}
		if e := bytes.TrimSpace(elems[0]); len(e) > 0 && e[0] == '"' {
			if len(elems) > 1 {
				return nil, r.bad(field, "%d prompts in one request are not supported", len(elems))
			}
			if err := json.Unmarshal(elems[0], &text); err != nil {
				return nil, r.bad(field, "expected a string")
			}
			break
		}
		// Token ids.
		return r.decodeIDs(field, elems)
	default:
		return nil, r.bad(field, "expected a string, an array of one string, or token ids")
	}
	if text == "" {
		return nil, r.bad(field, "empty")
	}
	ids, err := r.enc.cache.encode(text)
	if err != nil {
		return nil, r.badErr(field, err)
	}
	return slices.Clone(ids), nil
}

// stripXFields returns the compacted JSON object raw without its top-level
// x_* keys, other keys and values kept in order.
func stripXFields(raw []byte) ([]byte, error) {
	if !bytes.Contains(raw, []byte(`"x_`)) {
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("body is not a JSON object")
	}
	var buf bytes.Buffer
	buf.WriteByte('{')
	first := true
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := t.(string)
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, err
		}
		if strings.HasPrefix(key, "x_") {
			continue
		}
		if !first {
			buf.WriteByte(',')
		}
		first = false
		buf.Write(jsonString(key))
		buf.WriteByte(':')
		if err := json.Compact(&buf, val); err != nil {
			return nil, err
		}
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}
