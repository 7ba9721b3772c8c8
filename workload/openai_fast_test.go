package workload

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// fastDecodeMatches decodes line with openaiFast and, if the fast path takes
// it, checks that encoding/json decodes the same from it without an error
// at any stage the general path would reach (envelope, body, messages,
// contents, body stripping). It reports whether the fast path took it.
func fastDecodeMatches(t testing.TB, line []byte) bool {
	t.Helper()
	var f openaiFast
	if !f.decode(line) {
		return false
	}
	var fenv openaiEnvelope
	var fbody openaiBody
	f.fill(&fenv, &fbody)

	var env openaiEnvelope
	if err := json.Unmarshal(line, &env); err != nil {
		t.Fatalf("fast path took a line encoding/json rejects (%v): %q", err, line)
	}
	rawBody := json.RawMessage(line)
	if env.Body != nil {
		rawBody = env.Body
		if bytes.Equal(bytes.TrimSpace(env.Body), []byte("null")) {
			t.Fatalf("fast path took a null body: %q", line)
		}
	}
	var body openaiBody
	if err := json.Unmarshal(rawBody, &body); err != nil {
		t.Fatalf("fast path took a body encoding/json rejects (%v): %q", err, line)
	}
	if msg := diffDecoded(&fenv, &env, &fbody, &body); msg != "" {
		t.Fatalf("%s\nline %q", msg, line)
	}

	fmsgs := f.bodyMessages()
	if body.Messages != nil && !bytes.Equal(body.Messages, []byte("null")) {
		var msgs []openaiMessage
		if err := json.Unmarshal(body.Messages, &msgs); err != nil {
			t.Fatalf("fast path took messages encoding/json rejects (%v): %q", err, line)
		}
		if len(msgs) != len(fmsgs) {
			t.Fatalf("%d messages, encoding/json %d: %q", len(fmsgs), len(msgs), line)
		}
		for i, m := range msgs {
			fm := fmsgs[i]
			if (m.Role != nil) != fm.hasRole || (m.Role != nil && *m.Role != fm.role) {
				t.Fatalf("message %d: role %v %q, encoding/json %v: %q", i, fm.hasRole, fm.role, ptrStr(m.Role), line)
			}
			parts, err := contentParts(m.Content)
			if err != nil {
				t.Fatalf("message %d: fast path took a content contentParts rejects (%v): %q", i, err, line)
			}
			if !reflect.DeepEqual(parts, fm.parts) {
				t.Fatalf("message %d: parts %q, encoding/json %q: %q", i, fm.parts, parts, line)
			}
		}
	} else if len(fmsgs) != 0 {
		t.Fatalf("%d messages where encoding/json has none: %q", len(fmsgs), line)
	}

	clean, err := stripXFields(rawBody)
	if err != nil {
		t.Fatalf("fast path took a body stripXFields rejects (%v): %q", err, line)
	}
	if got := f.cleanBody(); !bytes.Equal(got, clean) {
		t.Fatalf("body %q\nstripXFields %q\nline %q", got, clean, line)
	}
	return true
}

func ptrStr[T any](p *T) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprintf("%v", *p)
}

// diffDecoded compares what the two paths decoded, pointer and raw fields by
// nil-ness and value.
func diffDecoded(fenv, env *openaiEnvelope, fbody, body *openaiBody) string {
	var diffs []string
	eqPtr := func(name string, a, b any) {
		av, bv := reflect.ValueOf(a), reflect.ValueOf(b)
		if av.IsNil() != bv.IsNil() || (!av.IsNil() && !reflect.DeepEqual(av.Elem().Interface(), bv.Elem().Interface())) {
			diffs = append(diffs, fmt.Sprintf("%s: fast %s, encoding/json %s", name, fmtPtr(av), fmtPtr(bv)))
		}
	}
	eqRaw := func(name string, a, b json.RawMessage) {
		if (a == nil) != (b == nil) || !bytes.Equal(a, b) {
			diffs = append(diffs, fmt.Sprintf("%s: fast %q (nil %v), encoding/json %q (nil %v)", name, a, a == nil, b, b == nil))
		}
	}
	eqX := func(p string, a, b *openaiX) {
		eqRaw(p+"x_arrival_ms", a.ArrivalMs, b.ArrivalMs)
		eqPtr(p+"x_session_id", a.SessionID, b.SessionID)
		eqPtr(p+"x_turn", a.Turn, b.Turn)
		eqPtr(p+"x_output_tokens", a.OutputTokens, b.OutputTokens)
		eqPtr(p+"x_output_text", a.OutputText, b.OutputText)
		eqRaw(p+"x_think_ms", a.ThinkMs, b.ThinkMs)
		eqPtr(p+"x_stage", a.Stage, b.Stage)
	}
	eqPtr("url", fenv.URL, env.URL)
	eqRaw("body", fenv.Body, env.Body)
	eqX("", &fenv.openaiX, &env.openaiX)
	eqPtr("body.model", fbody.Model, body.Model)
	eqRaw("body.messages", fbody.Messages, body.Messages)
	eqRaw("body.prompt", fbody.Prompt, body.Prompt)
	eqPtr("body.max_tokens", fbody.MaxTokens, body.MaxTokens)
	eqPtr("body.max_completion_tokens", fbody.MaxCompletionTokens, body.MaxCompletionTokens)
	eqPtr("body.cache_salt", fbody.CacheSalt, body.CacheSalt)
	eqX("body.", &fbody.openaiX, &body.openaiX)
	return strings.Join(diffs, "\n")
}

func fmtPtr(v reflect.Value) string {
	if v.IsNil() {
		return "nil"
	}
	return fmt.Sprintf("%q", fmt.Sprint(v.Elem().Interface()))
}

// newOpenAIStream opens data as an OpenAI trace, on the general path only if slow.
func newOpenAIStream(t testing.TB, name string, r io.Reader, o Options, slow bool) *Stream {
	t.Helper()
	o.Format = FormatOpenAI
	return newPathStream(t, name, r, o, slow)
}

// newPathStream opens an OpenAI or ShareGPT trace (o.Format), on the
// general path only if slow.
func newPathStream(t testing.TB, name string, r io.Reader, o Options, slow bool) *Stream {
	t.Helper()
	s, err := NewSource(r, name, opts(o))
	if err != nil {
		t.Fatalf("NewSource: %v", err)
	}
	switch rd := s.rd.(type) {
	case *openaiReader:
		rd.slow = slow
	case *sharegptReader:
		rd.slow = slow
	default:
		t.Fatalf("reader %T", rd)
	}
	return s
}

// compareOpenAIPaths reads the same OpenAI trace on the fast and the
// general path and requires identical requests and identical errors; it
// returns how many requests were read.
func compareOpenAIPaths(t testing.TB, name string, open func() io.Reader, o Options, limit int) int {
	t.Helper()
	o.Format = FormatOpenAI
	return comparePaths(t, name, open, o, limit)
}

// comparePaths is compareOpenAIPaths for format o.Format.
func comparePaths(t testing.TB, name string, open func() io.Reader, o Options, limit int) int {
	t.Helper()
	fast := newPathStream(t, name, open(), o, false)
	slow := newPathStream(t, name, open(), o, true)
	n := 0
	for ; limit <= 0 || n < limit; n++ {
		a, errA := fast.Next()
		b, errB := slow.Next()
		if !sameError(errA, errB) {
			t.Fatalf("%s (%+v): request %d: fast error %v\ngeneral error %v", name, o, n, errA, errB)
		}
		if errA != nil {
			break
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%s (%+v): request %d differs: %s", name, o, n, diffRequests(a, b))
		}
	}
	if fast.Skipped() != slow.Skipped() || fast.EmptyRecords() != slow.EmptyRecords() {
		t.Fatalf("%s: skipped %d, general path %d", name, fast.Skipped(), slow.Skipped())
	}
	ea, eb := fast.SkippedErrors(), slow.SkippedErrors()
	if len(ea) != len(eb) {
		t.Fatalf("%s: %d skipped errors, general path %d", name, len(ea), len(eb))
	}
	for i := range ea {
		if !sameError(ea[i], eb[i]) {
			t.Fatalf("%s: skipped error %d: fast %v\ngeneral %v", name, i, ea[i], eb[i])
		}
	}
	return n
}

func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.Error() != b.Error() || IsInputError(a) != IsInputError(b) || errors.Is(a, io.EOF) != errors.Is(b, io.EOF) {
		return false
	}
	var ia, ib *InputError
	if errors.As(a, &ia) && errors.As(b, &ib) {
		return *ia == *ib || (ia.File == ib.File && ia.Line == ib.Line && ia.Field == ib.Field && ia.Msg == ib.Msg &&
			fmt.Sprint(ia.Err) == fmt.Sprint(ib.Err) && reflect.TypeOf(ia.Err) == reflect.TypeOf(ib.Err))
	}
	return true
}

func diffRequests(a, b *Request) string {
	va, vb := reflect.ValueOf(*a), reflect.ValueOf(*b)
	var out []string
	for i := range va.NumField() {
		if !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			fa, fb := fmt.Sprint(va.Field(i).Interface()), fmt.Sprint(vb.Field(i).Interface())
			out = append(out, fmt.Sprintf("%s: fast %.300s\n  general %.300s", va.Type().Field(i).Name, fa, fb))
		}
	}
	return strings.Join(out, "\n")
}

// variants returns data (JSONL) rewritten in shapes the fast path must also
// read: indented, and as bare bodies carrying the replay fields.
func variants(t testing.TB, data []byte) map[string][]byte {
	t.Helper()
	var indented, bare bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, maxLineBytes)
	for sc.Scan() {
		line := sc.Bytes()
		indented.WriteString(" \t")
		indented.Write(spaceOut(line))
		indented.WriteString(" \r\n")
		// Bare: the body with the envelope's x_ fields appended to it.
		var env map[string]json.RawMessage
		if err := json.Unmarshal(line, &env); err != nil {
			t.Fatal(err)
		}
		body := bytes.TrimSuffix(bytes.TrimSpace(env["body"]), []byte("}"))
		bare.Write(body)
		for _, k := range []string{"x_arrival_ms", "x_session_id", "x_turn", "x_output_tokens", "x_output_text", "x_think_ms", "x_stage"} {
			if v, ok := env[k]; ok {
				fmt.Fprintf(&bare, ", %q : %s", k, v)
			}
		}
		bare.WriteString("}\n")
	}
	return map[string][]byte{"indented": indented.Bytes(), "bare": bare.Bytes()}
}

// spaceOut inserts whitespace around the structural characters of the JSON
// line (one line still).
func spaceOut(line []byte) []byte {
	var out []byte
	for i := 0; i < len(line); i++ {
		switch c := line[i]; c {
		case '{', '[', ',', ':':
			out = append(out, c, ' ', '\t')
		case '}', ']':
			out = append(out, '\r', ' ', c)
		case '"':
			end, _, _ := stringEnd(line, i+1)
			out = append(out, line[i:end+1]...)
			i = end
		default:
			out = append(out, c)
		}
	}
	return out
}

// builtinOpenAI writes the first n requests of a builtin workload as an
// OpenAI trace.
func builtinOpenAI(t testing.TB, name string, n int) []byte {
	t.Helper()
	s, err := Open(BuiltinPrefix+name, opts(Options{Seed: 7}))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for range n {
		r, err := s.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := WriteOpenAI(&buf, r); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

var openaiModes = []Options{
	{},
	{Mode: ModeClosedLoop},
	{SkipInvalid: true},
	{SkipInvalid: true, Mode: ModeClosedLoop, MaxPromptTokens: 2000, Rate: 3, Seed: 5},
}

func TestOpenAIFastDifferential(t *testing.T) {
	traces := map[string][]byte{}
	fixture, err := os.ReadFile("testdata/openai.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	traces["testdata/openai.jsonl"] = fixture
	for _, name := range []string{"chat", "agentic", "rag"} {
		data := builtinOpenAI(t, name, sessionsUnlessShort(150, 40))
		traces["builtin:"+name] = data
		for v, d := range variants(t, data) {
			traces["builtin:"+name+"/"+v] = d
		}
	}
	// Good and bad lines interleaved.
	var mixed bytes.Buffer
	for i, tt := range openaiTrickyLines {
		mixed.WriteString(tt.line)
		mixed.WriteByte('\n')
		if i%3 == 0 {
			mixed.Write(fixture)
		}
	}
	traces["mixed"] = mixed.Bytes()

	for name, data := range traces {
		for i, o := range openaiModes {
			if strings.Contains(name, "/") && i%3 != 0 {
				continue // the variants in two modes
			}
			n := compareOpenAIPaths(t, name, func() io.Reader { return bytes.NewReader(data) }, o, 0)
			if n == 0 && i == 0 && name != "mixed" {
				t.Errorf("%s: no requests", name)
			}
		}
	}
	// The fast path takes the synthesized lines.
	for _, name := range []string{"builtin:rag", "builtin:chat/bare", "builtin:agentic/indented"} {
		sc := bufio.NewScanner(bytes.NewReader(traces[name]))
		sc.Buffer(nil, maxLineBytes)
		for sc.Scan() {
			if !isBlank(sc.Bytes()) && !fastDecodeMatches(t, sc.Bytes()) {
				t.Fatalf("%s: fast path declined %.200q", name, sc.Bytes())
			}
		}
	}
}

// TestOpenAIFastChatTrace reads the whole of builtin:chat, written as
// OpenAI batch JSONL, through both paths, and checks that the fast path takes
// every line.
func TestOpenAIFastChatTrace(t *testing.T) {
	data := builtinOpenAI(t, "chat", chatTraceRequests)
	open := func() io.Reader { return bytes.NewReader(data) }
	if n, lines := compareOpenAIPaths(t, "chat.jsonl", open, Options{}, 0), bytes.Count(data, []byte("\n")); n != lines || n < 1000 {
		t.Errorf("%d requests from %d lines", n, lines)
	}
	// Every line takes the fast path.
	var fast openaiFast
	sc := bufio.NewScanner(open())
	sc.Buffer(nil, maxLineBytes)
	lines := 0
	for sc.Scan() {
		lines++
		if !fast.decode(sc.Bytes()) {
			t.Fatalf("line %d: fast path declined", lines)
		}
	}
}

// openaiTrickyLines: fast says whether the fast path must take the line
// (false: it must decline, or may either way if maybe).
var openaiTrickyLines = []struct {
	line        string
	fast, maybe bool
}{
	// Taken.
	{line: `{"model":"m","messages":[{"role":"user","content":"a\"b\\c\/d\b\f\n\r\t\u00e9\u4e2d\ud83d\ude00 é"}]}`, fast: true},
	{line: `{"model":"m","messages":[{"role":"user","content":"lone \ud800 x \udc00 y \ud800\u0041 z \ud800\ud800 w"}]}`, fast: true},
	{line: "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"bad utf8 \xff\xfe \xc3 \xed\xa0\x80 end\"}]}", fast: true},
	{line: " \t{ \"model\" : \"m\" , \"messages\" : [ { \"role\" : \"user\" , \"content\" : \"a  b\" } ] , \"x_turn\" : 2 } \t\r", fast: true},
	{line: `{"model":"m","messages":[{"role":"user","content":null},{"role":"assistant"},{"role":"user","content":[]}],"max_tokens":null,"x_session_id":null}`, fast: true},
	{line: `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"input_text","text":"b"},{"type":"text","text":null},{"type":"text"},{"type":"image_url","text":"c"},{"text":"d"}]}]}`, fast: true},
	{line: `{"model":"m","messages":[{"role":"user","content":"x"}],"x_session_id":12.5e3,"x_turn":-0,"x_output_tokens":0,"x_arrival_ms":1.5e3,"x_think_ms":null}`, fast: true},
	{line: `{"body":{"model":"m","messages":[{"role":"user","content":"x","name":"n","tool_calls":[{"a":{"b":[1,2.5e-3,true,false,null]}}]}],"x_turn":3,"x_output_text":"hi"},"x_turn":1,"x_session_id":"s","model":"ignored"}`, fast: true},
	{line: `{"url":"/v1/completions","body":{"model":"m","prompt":"hello","stream":false,"x_a":{"b":1},"temperature":0.5}}`, fast: true},
	{line: `{"model":"m","prompt":[1,2,3],"x_a":1,"x_b":[ 1 , 2 ],"z":"\"x_q\": 1"}`, fast: true},
	{line: `{"model":"m","messages":[{"role":"user","content":"contains \"x_ inside"}]}`, fast: true},
	{line: `{"model":"m","messages":[{"role":"user","content":"x"}],"cache_salt":"s\u0000t","url":"/v1/chat/completions"}`, fast: true},
	{line: `{"model":"m","messages":[{"role":"developer","content":"x"},{"role":"","content":"y"}]}`, fast: true},
	{line: `{"model":"m","messages":[{"role":"user","content":"x"}],"x_output_text":"Hi there","x_output_tokens":5}`, fast: true},
	{line: `{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":-3}`, fast: true},
	{line: `{"model":"","messages":[{"role":"user","content":"x"}]}`, fast: true},
	{line: `{"model":"m","messages":[],"prompt":"p"}`, fast: true},
	{line: `{"url":"/v1/embeddings","body":{"model":"m","prompt":"x"}}`, fast: true},
	{line: `{"model":"m","prompt":"x","x_arrival_ms":"soon"}`, fast: true},
	{line: `{"model":"m","prompt":"x","x_arrival_ms":-1}`, fast: true},
	{line: `{"model":"m","messages":[{"role":"user","content":"x"}],"x_turn":-1}`, fast: true},
	{line: `{"model":"m","prompt":"x","x_stage":2,"body":null}`, fast: false},
	{line: `{"body":{"model":"m","prompt":"x","x_stage":1},"x_stage":3}`, fast: true},
	{line: `{"model":"m","prompt":"x","x_stage":null}`, fast: true},
	{line: `{"model":"m","prompt":"x","x_stage":-2}`, fast: true},
	{line: `{}`, fast: true},
	{line: `{"body":{}}`, fast: true},
	{line: `{"model":"m","messages":null,"prompt":null}`, fast: true},
	{line: `{"model":"m","messages":[{"role":"user","content":"x"}],"x_session_id":""}`, fast: true},
	{line: `{"model":"m","prompt":"x","x_output_text":"\u00e9t\u00e9","x_output_tokens":null}`, fast: true},
	{line: `{"model":"m","prompt":"x","max_completion_tokens":999999999999999999}`, fast: true},

	// Declined: encoding/json decides.
	{line: `{"MODEL":"m","messages":[{"role":"user","content":"x"}]}`},
	{line: `{"model":"m","Messages":[{"role":"user","content":"x"}]}`},
	{line: `{"model":"m","messages":[{"Role":"user","content":"x"}]}`},
	{line: `{"model":"m","messages":[{"role":"user","content":[{"TYPE":"text","text":"x"}]}]}`},
	{line: `{"model":"m","model":"n","messages":[{"role":"user","content":"x"}]}`},
	{line: `{"model":"m","messages":[{"role":"user","role":"system","content":"x"}]}`},
	{line: `{"mod\u0065l":"m","messages":[{"role":"user","content":"x"}]}`},
	{line: `{"model":"m","messages":[{"role":"user","content":"x"}],"x_\u0074urn":1}`},
	{line: "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"\u017fession\":1}"},
	{line: `{"model":"m","messages":[{"role":"user","content":"x"}],"<a>":1}`},
	{line: `{"model":"m","messages":[{"role":"user","content":5}]}`},
	{line: `{"model":"m","messages":[{"role":"user","content":{"text":"x"}}]}`},
	{line: `{"model":"m","messages":[{"role":"user","content":[null]}]}`},
	{line: `{"model":"m","messages":[{"role":"user","content":[{"type":null,"text":"x"}]}]}`},
	{line: `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":5}]}]}`},
	{line: `{"model":"m","messages":[null]}`},
	{line: `{"model":"m","messages":[1]}`},
	{line: `{"model":"m","messages":{"role":"user"}}`},
	{line: `{"model":"m","messages":"x"}`},
	{line: `{"model":5,"prompt":"x"}`},
	{line: `{"model":"m","prompt":"x","max_tokens":1.5}`},
	{line: `{"model":"m","prompt":"x","max_tokens":1e2}`},
	{line: `{"model":"m","prompt":"x","max_tokens":"7"}`},
	{line: `{"model":"m","prompt":"x","max_tokens":9223372036854775807}`},
	{line: `{"model":"m","prompt":"x","max_tokens":92233720368547758070}`},
	{line: `{"model":"m","prompt":"x","x_turn":true}`},
	{line: `{"model":"m","prompt":"x","x_stage":"1"}`},
	{line: `{"model":"m","prompt":"x","x_stage":1.5}`},
	{line: `{"model":"m","prompt":"x","x_session_id":[1]}`},
	{line: `{"model":"m","prompt":"x","x_session_id":true}`},
	{line: `{"body":null}`},
	{line: `{"body":"x"}`},
	{line: `{"body":[{"model":"m"}]}`},
	{line: `{"body":{"model":"m","prompt":"x"},"body":{"model":"n","prompt":"y"}}`},
	{line: `[1]`},
	{line: `null`},
	{line: `"x"`},
	{line: `{"model":"m","prompt":"x"} {}`},
	{line: `{"model":"m","prompt":"x"},`},
	{line: `{"model":"m","prompt":"x",}`},
	{line: `{"model":"m","prompt":"x"`},
	{line: `{"model":"m","prompt":'x'}`},
	{line: `{"model":"m","prompt":"x\'y"}`},
	{line: `{"model":"m","prompt":"x\uZZZZ"}`},
	{line: "{\"model\":\"m\",\"prompt\":\"x\ty\"}"},
	{line: `{"model":"m","prompt":01}`},
	{line: `{"model":"m","prompt":1.}`},
	{line: `{"model":"m","prompt":-}`},
	{line: `{"model":"m","prompt":tru}`},
	{line: `{"model":"m","prompt":nul}`},
	{line: `{"model":"m","prompt":"x","other":[1,2}`},
	{line: "\xef\xbb\xbf{\"model\":\"m\",\"prompt\":\"x\"}"},
	{line: `{"model":"m","prompt":"x","a":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}`},
	{line: `{"model":"m","prompt":"x","a":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`},
	{line: `{"model":"m","messages":[{"role":"user","content":"x"}],"x_turn":99999999999999999999}`},
	{line: "{\"model\":\"m\",\"prompt\":\"x\",\"k\xff\":1}", maybe: true},
}

func TestOpenAIFastLines(t *testing.T) {
	for _, tt := range openaiTrickyLines {
		took := fastDecodeMatches(t, []byte(tt.line))
		if took != tt.fast && !tt.maybe {
			t.Errorf("fast path took=%v, want %v: %.200s", took, tt.fast, tt.line)
		}
		for _, o := range openaiModes {
			// Twice, so that sessions and the clock carry over.
			data := tt.line + "\n" + tt.line + "\n"
			compareOpenAIPaths(t, "o.jsonl", func() io.Reader { return strings.NewReader(data) }, o, 0)
		}
	}
}

func FuzzOpenAIFast(f *testing.F) {
	for _, tt := range openaiTrickyLines {
		f.Add([]byte(tt.line))
	}
	if data, err := os.ReadFile("testdata/openai.jsonl"); err == nil {
		f.Add(data)
		for _, line := range bytes.Split(data, []byte("\n")) {
			f.Add(line)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fastDecodeMatches(t, data)
		for _, o := range []Options{{}, {SkipInvalid: true, Mode: ModeClosedLoop, MaxPromptTokens: 1 << 12}} {
			compareOpenAIPaths(t, "fuzz", func() io.Reader { return bytes.NewReader(data) }, o, 300)
		}
	})
}

// FuzzOpenAIFastFields splices arbitrary bytes into the string fields and
// whitespace of a chat line, so that most inputs stay JSON and reach the
// fast path's decoding of strings, numbers and keys.
func FuzzOpenAIFastFields(f *testing.F) {
	f.Add("m", "user", `hello\nworld \u00e9`, `a\ud83d\ude00`, "s1", " ", "extra", int64(5), false)
	f.Add("", "", "", "", "", "", "", int64(-1), true)
	f.Add(`m\"`, "assistant", "\xff\xfe", `\ud800`, `x\u0000`, "\t\r\n", `x_y`, int64(0), true)
	f.Fuzz(func(t *testing.T, model, role, content, text, sid, ws, key string, n int64, bare bool) {
		var b strings.Builder
		w := func(parts ...string) {
			for _, p := range parts {
				b.WriteString(p)
				b.WriteString(ws)
			}
		}
		body := func() {
			w(`{`, `"model"`, `:`, `"`+model+`"`, `,`, `"messages"`, `:`, `[`,
				`{`, `"role"`, `:`, `"`+role+`"`, `,`, `"content"`, `:`, `"`+content+`"`, `}`, `,`,
				`{`, `"role"`, `:`, `"user"`, `,`, `"content"`, `:`, `[`, `{`, `"type"`, `:`, `"text"`, `,`, `"text"`, `:`, `"`+text+`"`, `}`, `]`, `}`,
				`]`, `,`, `"`+key+`"`, `:`, `"`+text+`"`, `,`, `"max_tokens"`, `:`, strconv.FormatInt(n, 10))
		}
		if bare {
			body()
			w(`,`, `"x_session_id"`, `:`, `"`+sid+`"`, `,`, `"x_output_text"`, `:`, `"`+content+`"`, `}`)
		} else {
			w(`{`, `"url"`, `:`, `"/v1/chat/completions"`, `,`, `"body"`, `:`)
			body()
			w(`}`, `,`, `"x_session_id"`, `:`, `"`+sid+`"`, `,`, `"x_output_text"`, `:`, `"`+content+`"`, `}`)
		}
		line := []byte(b.String())
		fastDecodeMatches(t, line)
		data := append(append(line, '\n'), line...)
		for _, o := range []Options{{}, {SkipInvalid: true, Mode: ModeClosedLoop}} {
			compareOpenAIPaths(t, "fuzz", func() io.Reader { return bytes.NewReader(data) }, o, 10)
		}
	})
}

// sessionsUnlessShort is n, or fewer with -short (make test; make
// test-long runs the full size).
func sessionsUnlessShort(n, short int) int {
	if testing.Short() {
		return short
	}
	return n
}
