package workload

import (
	"bytes"
	"strings"
	"testing"
)

// TestZeroOutputLength: an output length of 0 is read as 1 in every format
// that records one (vLLM generates at least one token), so that what is
// simulated, what eppsim reports and what trace convert writes agree: the
// converted line says max_tokens 1 and x_output_tokens 1, which vLLM's
// OpenAI server accepts, and reads back as the same request.
func TestZeroOutputLength(t *testing.T) {
	for _, tt := range []struct {
		name   string
		format Format
		data   string
	}{
		{"mooncake", FormatMooncake, `{"timestamp": 0, "input_length": 20, "output_length": 0, "hash_ids": [0]}`},
		{"alibaba", FormatAlibaba, `{"chat_id": 1, "parent_chat_id": -1, "timestamp": 0, "input_length": 20, "output_length": 0, "hash_ids": [0, 1]}`},
		{"azure", FormatAzure, "TIMESTAMP,ContextTokens,GeneratedTokens\n0,20,0\n"},
		{"openai x_output_tokens", FormatOpenAI, `{"model":"m","prompt":"hello","max_tokens":9,"x_output_tokens":0}`},
		{"openai body.x_output_tokens", FormatOpenAI, `{"body":{"model":"m","prompt":"hello","x_output_tokens":0}}`},
		{"openai empty completion", FormatOpenAI, `{"model":"m","prompt":"hello","x_output_text":"","x_output_tokens":0}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			reqs := readAll(t, "t", tt.data, Options{Format: tt.format})
			if len(reqs) != 1 {
				t.Fatalf("%d requests", len(reqs))
			}
			r := reqs[0]
			if r.OutputTokens != 1 || r.OutputTokenIDs != nil {
				t.Errorf("output %d tokens, ids %v; want 1, none", r.OutputTokens, r.OutputTokenIDs)
			}
			if tt.format != FormatOpenAI && !bytes.HasSuffix(r.Body, []byte(`,"max_tokens":1}`)) {
				t.Errorf("body %.80s...%s, want max_tokens 1", r.Body, r.Body[max(0, len(r.Body)-20):])
			}
			var line bytes.Buffer
			if err := WriteOpenAI(&line, r); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(line.String(), `"x_output_tokens":1`) || strings.Contains(line.String(), `"max_tokens":0`) {
				t.Errorf("converted: %s", line.String())
			}
			back := readAll(t, "c", line.String(), Options{Format: FormatOpenAI})
			if len(back) != 1 || back[0].OutputTokens != 1 || !bytes.Equal(back[0].Body, r.Body) {
				t.Errorf("read back: %+v", back)
			}
		})
	}
}

// TestOutputLengthFields: an output length or token limit out of range is
// reported under the field the line gives it in, with its line.
func TestOutputLengthFields(t *testing.T) {
	for _, tt := range []struct{ line, want string }{
		{`{"model":"m","prompt":"x","max_tokens":-5}`,
			"o.jsonl:2: max_tokens: -5 out of range [1, 2097152] (vLLM rejects a request with max_tokens below 1)"},
		{`{"custom_id":"c","body":{"model":"m","prompt":"x","max_tokens":-5}}`,
			"o.jsonl:2: body.max_tokens: -5 out of range [1, 2097152] (vLLM rejects a request with max_tokens below 1)"},
		{`{"model":"m","prompt":"x","max_tokens":0}`,
			"o.jsonl:2: max_tokens: 0 out of range [1, 2097152] (vLLM rejects a request with max_tokens below 1)"},
		// Checked even when x_output_tokens gives the length: the body is
		// replayed as it is, and vLLM would refuse it.
		{`{"body":{"model":"m","prompt":"x","max_completion_tokens":0},"x_output_tokens":5}`,
			"o.jsonl:2: body.max_completion_tokens: 0 out of range [1, 2097152] (vLLM rejects a request with max_completion_tokens below 1)"},
		{`{"model":"m","prompt":"x","max_tokens":3000000}`, "o.jsonl:2: max_tokens: 3000000 out of range [1, 2097152]"},
		{`{"model":"m","prompt":"x","max_completion_tokens":3000000,"max_tokens":5}`,
			"o.jsonl:2: max_completion_tokens: 3000000 out of range [1, 2097152]"},
		{`{"model":"m","prompt":"x","x_output_tokens":-1}`, "o.jsonl:2: x_output_tokens: -1 out of range [0, 2097152]"},
		{`{"body":{"model":"m","prompt":"x","x_output_tokens":-1}}`, "o.jsonl:2: body.x_output_tokens: -1 out of range [0, 2097152]"},
		{`{"body":{"model":"m","prompt":"x","x_output_tokens":7},"x_output_tokens":-1}`, "o.jsonl:2: x_output_tokens: -1 out of range [0, 2097152]"},
		{`{"body":{"model":"m","messages":[{"role":"user","content":"x"}],"x_output_tokens":5,"x_output_text":"Hi there"}}`,
			"o.jsonl:2: body.x_output_tokens: 5, but x_output_text has 3 tokens"},
	} {
		data := `{"model":"m","prompt":"ok"}` + "\n" + tt.line + "\n"
		err := firstError(t, "o.jsonl", data, Options{Format: FormatOpenAI})
		if err == nil || err.Error() != tt.want || !IsInputError(err) {
			t.Errorf("line %s\nerror %v\nwant  %s", tt.line, err, tt.want)
		}
	}
}
