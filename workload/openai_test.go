package workload

import (
	"slices"
	"strings"
	"testing"
)

// Llama-3 (and cl100k) ids: "user" 882, "assistant" 78191, "\n\n" 271,
// "hello" 15339, " world" 1917, "Hi" 13347, " there" 1070.
var helloWorldPrompt = []uint32{TokBeginOfText, TokStartHeader, 882, TokEndHeader, 271, 15339, 1917, TokEOT, TokStartHeader, 78191, TokEndHeader, 271}

func TestOpenAIFixture(t *testing.T) {
	reqs := readFile(t, "testdata/openai.jsonl", Options{})
	checkInvariants(t, reqs)
	if len(reqs) != 4 {
		t.Fatalf("%d requests", len(reqs))
	}
	r0, r1, r2, r3 := reqs[0], reqs[1], reqs[2], reqs[3]
	if !slices.Equal(r0.PromptTokens, helloWorldPrompt) {
		t.Errorf("chat prompt %v\nwant %v", r0.PromptTokens, helloWorldPrompt)
	}
	if want := []uint32{13347, 1070, TokEOT}; !slices.Equal(r0.OutputTokenIDs, want) || r0.OutputTokens != 3 || r0.OutputText != "Hi there" {
		t.Errorf("output %v (%d)", r0.OutputTokenIDs, r0.OutputTokens)
	}
	if r0.Endpoint != EndpointChat || r0.Model != "m1" || r0.Session != "a" || r0.Turn != 0 || r0.Arrival != 1e9 || r0.Prev != -1 {
		t.Errorf("r0 %+v", r0)
	}
	if want := `{"model":"m1","messages":[{"role":"user","content":"hello world"}],"max_tokens":64}`; string(r0.Body) != want {
		t.Errorf("r0 body %s", r0.Body)
	}
	// Bare body: x_ fields stripped, exact decimal arrival.
	if want := `{"model":"m2","prompt":"hello world","max_tokens":7,"cache_salt":"s1"}`; string(r1.Body) != want {
		t.Errorf("r1 body %s", r1.Body)
	}
	if !slices.Equal(r1.PromptTokens, []uint32{15339, 1917}) || r1.Endpoint != EndpointCompletions || r1.CacheSalt != "s1" ||
		r1.OutputTokens != 7 || r1.Arrival != 1500500000 || r1.Session != "" || r1.OutputTokenIDs != nil {
		t.Errorf("r1 %+v", r1)
	}
	// Turn 2 of session a: its prompt extends turn 1's prompt + output.
	prefix := append(slices.Clone(r0.PromptTokens), r0.OutputTokenIDs...)
	if !hasPrefix(r2.PromptTokens, prefix) || len(r2.PromptTokens) <= len(prefix) {
		t.Errorf("turn 2 prompt does not extend turn 1 prompt + output")
	}
	if r2.Session != "a" || r2.Turn != 1 || r2.Prev != 0 || r2.OutputTokens != 3 || r2.AfterPrevious {
		t.Errorf("r2 %+v", r2)
	}
	if want := `{"model":"m3","prompt":[1,2,3],"max_completion_tokens":9}`; string(r3.Body) != want {
		t.Errorf("r3 body %s", r3.Body)
	}
	if !slices.Equal(r3.PromptTokens, []uint32{1, 2, 3}) || r3.OutputTokens != 9 || r3.Turn != 4 || r3.Prev != -1 || r3.Arrival != 3e9 {
		t.Errorf("r3 %+v", r3)
	}

	closed := readFile(t, "testdata/openai.jsonl", Options{Mode: ModeClosedLoop})
	if c := closed[2]; !c.AfterPrevious || c.ThinkTime != 2e9 || c.Arrival != 3e9 {
		t.Errorf("closed-loop turn 2: %v %d %d", c.AfterPrevious, c.ThinkTime, c.Arrival)
	}
}

func TestOpenAIUntimestamped(t *testing.T) {
	data := strings.Join([]string{
		`{"model":"m","prompt":"a","x_session_id":"s"}`,
		`{"model":"m","prompt":"b","x_session_id":"t"}`,
		`{"model":"m","prompt":"c","x_session_id":"s"}`,
		`{"model":"m","prompt":"d"}`,
	}, "\n")
	for _, mode := range []Mode{ModeOpenLoop, ModeClosedLoop} {
		reqs := readAll(t, "u.jsonl", data, Options{Mode: mode, Rate: 2, Seed: 3})
		checkInvariants(t, reqs)
		// The first line at 0; new sessions (lines 2 and 4) a Poisson gap
		// later; the continuation (line 3) at the previous line's time.
		if reqs[0].Arrival != 0 || reqs[1].Arrival <= 0 || reqs[2].Arrival != reqs[1].Arrival || reqs[3].Arrival <= reqs[2].Arrival {
			t.Errorf("%v arrivals %d %d %d %d", mode, reqs[0].Arrival, reqs[1].Arrival, reqs[2].Arrival, reqs[3].Arrival)
		}
		if reqs[2].Prev != 0 || reqs[2].Turn != 1 || reqs[2].AfterPrevious != (mode == ModeClosedLoop) {
			t.Errorf("%v continuation %+v", mode, reqs[2])
		}
		if mode == ModeClosedLoop && reqs[2].ThinkTime < reqs[2].Arrival-reqs[0].Arrival {
			t.Errorf("think %d shorter than the gap", reqs[2].ThinkTime)
		}
	}
}

func TestOpenAIBadLines(t *testing.T) {
	tests := []struct{ line, want string }{
		{`{"custom_id":"x","body":{"messages":[{"role":"user","content":"x"}]}}`, "o.jsonl:1: body.model: missing"},
		{`{"model":"m","messages":[]}`, "o.jsonl:1: messages: empty"},
		{`{"model":"m"}`, "o.jsonl:1: messages: missing (neither messages nor prompt given)"},
		{`{"url":"/v1/completions","body":{"model":"m","messages":[{"role":"user","content":"x"}]}}`,
			"o.jsonl:1: url: /v1/completions does not match a body with messages"},
		{`{"url":"/v1/embeddings","body":{"model":"m","prompt":"x"}}`,
			`o.jsonl:1: url: unsupported endpoint "/v1/embeddings" (want /v1/chat/completions, /v1/completions, /inference/v1/generate or /generate)`},
		{`{"model":"m","messages":[{"role":"user","content":"x"}],"x_output_tokens":5,"x_output_text":"Hi there"}`,
			"o.jsonl:1: x_output_tokens: 5, but x_output_text has 3 tokens"},
		{`{"model":"m","prompt":["a","b"]}`, "o.jsonl:1: prompt: 2 prompts in one request are not supported"},
		{`{"model":"m","prompt":[1,-2]}`, "o.jsonl:1: prompt[1]: expected a token id in [0, 128256)"},
		{`{"model":"m","messages":[{"content":"x"}]}`, "o.jsonl:1: messages[0].role: missing"},
		{`{"model":"m","messages":[{"role":"user","content":5}]}`,
			"o.jsonl:1: messages[0].content: expected a string or an array of content parts"},
		{`{"model":"m","prompt":"x","x_arrival_ms":"soon"}`, `o.jsonl:1: x_arrival_ms: expected a number, got "soon"`},
		{`{"model":"m","max_tokens":"many","prompt":"x"}`, "o.jsonl:1: max_tokens: expected int64, got JSON string"},
		{`{"body":{"model":"m","max_tokens":1.5,"prompt":"x"}}`, "o.jsonl:1: body.max_tokens: expected int64, got JSON number 1.5"},
		{`[1]`, "o.jsonl:1: expected a JSON object, got JSON array"},
		{`{"model":"m","messages":[{"role":"user","content":"x"}],"x_session_id":[1]}`, "o.jsonl:1: x_session_id: expected a string, got JSON array"},
	}
	for _, tt := range tests {
		err := firstError(t, "o.jsonl", tt.line, Options{Format: FormatOpenAI})
		if err == nil || err.Error() != tt.want {
			t.Errorf("line %s\nerror %v\nwant  %s", tt.line, err, tt.want)
		}
	}
}

func TestStripXFields(t *testing.T) {
	got, err := stripXFields([]byte(`{ "x_a": 1, "model": "m", "x_b": {"y": [1, 2]}, "prompt": "p q" }`))
	if err != nil || string(got) != `{"model":"m","prompt":"p q"}` {
		t.Fatalf("%s %v", got, err)
	}
}
