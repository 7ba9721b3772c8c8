package workload

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestShareGPTFixture(t *testing.T) {
	st, err := Open("testdata/sharegpt.json", opts(Options{Seed: 1}))
	if err != nil {
		t.Fatal(err)
	}
	reqs, err := Drain(st)
	if err != nil {
		t.Fatal(err)
	}
	if st.EmptyRecords() != 1 { // c3 has no turn
		t.Errorf("%d empty conversations, want 1", st.EmptyRecords())
	}
	checkInvariants(t, reqs)
	if len(reqs) != 4 {
		t.Fatalf("%d requests", len(reqs))
	}
	// Emitted by nominal arrival: c1 turn 0 at 0, c2 and sharegpt-3 a
	// Poisson gap apart, c1 turn 1 a think time (~minutes) after turn 0.
	want := []struct {
		session string
		turn    int
		prev    int64
		line    int
		out     int
	}{
		{"c1", 0, -1, 2, 3},
		{"c2", 0, -1, 9, 256},
		{"sharegpt-3", 0, -1, 14, 0},
		{"c1", 1, 0, 2, 0},
	}
	for i, w := range want {
		r := reqs[i]
		if r.Session != w.session || r.Turn != w.turn || r.Prev != w.prev || r.Line != w.line || (w.out > 0 && r.OutputTokens != w.out) {
			t.Errorf("request %d = {%s %d %d line %d out %d}, want %+v", i, r.Session, r.Turn, r.Prev, r.Line, r.OutputTokens, w)
		}
		if r.Endpoint != EndpointChat || r.Model != DefaultModel || r.AfterPrevious != (w.turn > 0) {
			t.Errorf("request %d: endpoint %s model %s after %v", i, r.Endpoint, r.Model, r.AfterPrevious)
		}
	}
	if reqs[0].Arrival != 0 || reqs[3].Arrival != reqs[0].Arrival+reqs[3].ThinkTime || reqs[3].ThinkTime <= 0 {
		t.Errorf("arrivals %d %d think %d", reqs[0].Arrival, reqs[3].Arrival, reqs[3].ThinkTime)
	}
	// "system" 9125; "Be brief." is tokenized as one segment.
	brief, _ := testTokenizer().Encode("Be brief.")
	wantPrompt := []uint32{TokBeginOfText, TokStartHeader, 9125, TokEndHeader, 271}
	wantPrompt = append(wantPrompt, brief...)
	wantPrompt = append(wantPrompt, TokEOT)
	wantPrompt = append(wantPrompt, helloWorldPrompt[1:]...)
	if !slices.Equal(reqs[0].PromptTokens, wantPrompt) {
		t.Errorf("c1 turn 0 prompt %v\nwant %v", reqs[0].PromptTokens, wantPrompt)
	}
	if want := []uint32{13347, 1070, TokEOT}; !slices.Equal(reqs[0].OutputTokenIDs, want) || reqs[0].OutputText != "Hi there" {
		t.Errorf("c1 turn 0 output %v", reqs[0].OutputTokenIDs)
	}
	// Turn 1 = turn 0 prompt + turn 0 output + the new user message.
	again, _ := testTokenizer().Encode("again")
	want1 := slices.Concat(reqs[0].PromptTokens, reqs[0].OutputTokenIDs,
		[]uint32{TokStartHeader, 882, TokEndHeader, 271}, again, []uint32{TokEOT, TokStartHeader, 78191, TokEndHeader, 271})
	if !slices.Equal(reqs[3].PromptTokens, want1) {
		t.Errorf("c1 turn 1 prompt %v\nwant %v", reqs[3].PromptTokens, want1)
	}
	if reqs[1].OutputTokenIDs != nil {
		t.Error("a turn without an answer has output ids")
	}
	if want := `{"model":"meta-llama/Llama-3.1-8B-Instruct","messages":[{"role":"assistant","content":"Welcome!"},{"role":"user","content":"What is two plus two?"}],"max_tokens":256}`; string(reqs[1].Body) != want {
		t.Errorf("c2 body %s", reqs[1].Body)
	}
	var body struct {
		Messages []struct{ Role, Content string }
	}
	if err := json.Unmarshal(reqs[2].Body, &body); err != nil || len(body.Messages) != 2 || body.Messages[1].Content != "two" {
		t.Errorf("consecutive user messages: %s", reqs[2].Body)
	}

	// The same conversations as JSONL give the same requests; open-loop
	// keeps the nominal times.
	var convs []json.RawMessage
	data, _ := os.ReadFile("testdata/sharegpt.json")
	if err := json.Unmarshal(data, &convs); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, c := range convs {
		b, _ := json.Marshal(c)
		lines = append(lines, string(b))
	}
	jl := readAll(t, "s.jsonl", strings.Join(lines, "\n"), Options{Seed: 1, Format: FormatShareGPT, Mode: ModeOpenLoop})
	for i := range reqs {
		a, b := reqs[i], jl[i]
		if !slices.Equal(a.PromptTokens, b.PromptTokens) || string(a.Body) != string(b.Body) || a.Arrival != b.Arrival || b.AfterPrevious {
			t.Errorf("JSONL request %d differs", i)
		}
	}
}

func TestShareGPTBad(t *testing.T) {
	tests := []struct{ data, want string }{
		{"[\n{\"conversations\": [{\"from\": \"human\", \"value\": \"a\"}]},\n{\"conversations\": [{\"from\": \"robot\", \"value\": \"b\"}]}\n]",
			`s.json:3: conversations[0].from: unknown speaker "robot"`},
		{"[{\"id\": \"x\"}]", "s.json:1: conversations: missing"},
		{"[{\"conversations\": [{\"from\": \"human\"}]}]", "s.json:1: conversations[0].value: missing"},
		{"[{\"conversations\": 5}]", "s.json:1: conversations: expected a JSON array, got JSON number"},
		{"[\n{\"conversations\": []},\n{\"conversations\": [}\n]", "s.json:3: invalid JSON: invalid character '}' looking for beginning of value"},
		{"[{\"conversations\": []}", "s.json:1: unexpected end of input"},
		{"[] x", "s.json:1: data after the end of the JSON array"},
		// Lines before the array count (the decoder's offsets start after them).
		{"\n\n\n\n[\n{\"conversations\": [{\"from\": \"human\", \"value\": \"a\"}]},\n{\"conversations\": [{\"from\": \"robot\", \"value\": \"b\"}]}\n]",
			`s.json:7: conversations[0].from: unknown speaker "robot"`},
		{"\n \n{\"conversations\": 5}", "s.json:3: conversations: expected a JSON array, got JSON number"},
		// A leading 0xef that does not start a byte order mark is no JSON.
		{"\xef\xbf\xbd[]", "s.json:1: invalid JSON: invalid character 'ï' looking for beginning of value"},
	}
	for _, tt := range tests {
		err := firstError(t, "s.json", tt.data, Options{Format: FormatShareGPT})
		if err == nil || err.Error() != tt.want {
			t.Errorf("input %q\nerror %v\nwant  %s", tt.data, err, tt.want)
		}
	}
	// A bad conversation is skippable; a syntax error is not.
	s, err := NewSource(strings.NewReader(tests[0].data), "s.json", opts(Options{SkipInvalid: true}))
	if err != nil {
		t.Fatal(err)
	}
	reqs, err := Drain(s)
	if err != nil || len(reqs) != 1 || s.Skipped() != 1 {
		t.Errorf("skip: %d requests, %d skipped, %v", len(reqs), s.Skipped(), err)
	}
	s, _ = NewSource(strings.NewReader(tests[4].data), "s.json", opts(Options{SkipInvalid: true}))
	if _, err := Drain(s); err == nil {
		t.Error("syntax error skipped")
	}
}

// TestLineCounter: lineAt counts the newlines before an offset, over reads
// of any size and queries of increasing offsets, as a direct count does.
func TestLineCounter(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 50 {
		data := make([]byte, rng.IntN(5000))
		for i := range data {
			if rng.IntN(1+trial%7) == 0 {
				data[i] = '\n'
			} else {
				data[i] = 'a'
			}
		}
		c := &lineCounter{boundedReader: boundedReader{r: strings.NewReader(string(data)), limit: 1 << 20, tooLong: errValueTooLong}}
		buf := make([]byte, 1+rng.IntN(300))
		var q int64
		for {
			n, err := c.Read(buf[:1+rng.IntN(len(buf))])
			if n == 0 && err != nil {
				break
			}
			// Query a few offsets up to what was read.
			for range rng.IntN(3) {
				q += rng.Int64N(c.off - q + 1)
				if got, want := c.lineAt(q), 1+bytes.Count(data[:q], []byte("\n")); got != want {
					t.Fatalf("trial %d: lineAt(%d) = %d, want %d", trial, q, got, want)
				}
			}
		}
		if got, want := c.lineAt(int64(len(data))), 1+bytes.Count(data, []byte("\n")); got != want {
			t.Fatalf("trial %d: lineAt(end) = %d, want %d", trial, got, want)
		}
		if len(c.nl) > 1 {
			t.Fatalf("trial %d: %d bitmap words kept after the last query", trial, len(c.nl))
		}
	}
}
