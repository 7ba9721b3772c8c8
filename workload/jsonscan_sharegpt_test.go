package workload

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"
)

// sgFastMatches decodes raw with sgFast and, if the fast path takes it,
// checks that json.Unmarshal decodes the same. It reports whether the fast
// path took it.
func sgFastMatches(t testing.TB, raw []byte) bool {
	t.Helper()
	var f sgFast
	var got sgConversation
	if !f.decode(raw, &got) {
		return false
	}
	var want sgConversation
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatalf("fast path took a conversation encoding/json rejects (%v): %q", err, raw)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("conversation %q:\nfast %s\nencoding/json %s", raw, dumpConv(&got), dumpConv(&want))
	}
	return true
}

func dumpConv(c *sgConversation) string {
	b, _ := json.Marshal(c)
	return string(b)
}

// shareGPTFromOpenAI turns an OpenAI chat trace into ShareGPT
// conversations: each session's last request's messages plus its answer,
// as a JSON array (indented) and as JSONL.
func shareGPTFromOpenAI(t testing.TB, data []byte) (array, jsonl []byte) {
	t.Helper()
	type line struct {
		Body struct {
			Messages []struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		} `json:"body"`
		Session string `json:"x_session_id"`
		Output  string `json:"x_output_text"`
	}
	last := map[string]*line{}
	var order []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, maxLineBytes)
	for sc.Scan() {
		l := new(line)
		if err := json.Unmarshal(sc.Bytes(), l); err != nil {
			t.Fatal(err)
		}
		if _, ok := last[l.Session]; !ok {
			order = append(order, l.Session)
		}
		last[l.Session] = l
	}
	from := map[string]string{"system": "system", "user": "human", "assistant": "gpt"}
	var a, j bytes.Buffer
	a.WriteString("[\n")
	for i, sid := range order {
		l := last[sid]
		var conv bytes.Buffer
		// Alternate the key spellings the reader accepts.
		key, fk, vk := "conversations", "from", "value"
		if i%3 == 1 {
			key, fk, vk = "messages", "role", "content"
		}
		conv.WriteString(`{"id": ` + string(jsonString(sid)) + `, "` + key + `": [`)
		for k, m := range l.Body.Messages {
			if k > 0 {
				conv.WriteString(", ")
			}
			role := from[m.Role]
			if fk == "role" {
				role = m.Role
			}
			conv.WriteString(`{"` + fk + `": "` + role + `", "` + vk + `": ` + string(m.Content) + `}`)
		}
		if l.Output != "" {
			conv.WriteString(`, {"` + fk + `": "gpt", "` + vk + `": ` + string(jsonString(l.Output)) + `}`)
		}
		conv.WriteString("]}")
		if i > 0 {
			a.WriteString(",\n")
		}
		a.WriteString("  ")
		a.Write(conv.Bytes())
		j.Write(conv.Bytes())
		j.WriteString("\n")
	}
	a.WriteString("\n]\n")
	return a.Bytes(), j.Bytes()
}

var sgModes = []Options{
	{Format: FormatShareGPT},
	{Format: FormatShareGPT, Mode: ModeOpenLoop, Rate: 5, Seed: 3},
	{Format: FormatShareGPT, SkipInvalid: true, MaxPromptTokens: 1500},
}

func TestShareGPTFastDifferential(t *testing.T) {
	traces := map[string][]byte{}
	fixture, err := os.ReadFile("testdata/sharegpt.json")
	if err != nil {
		t.Fatal(err)
	}
	traces["testdata/sharegpt.json"] = fixture
	for _, name := range []string{"chat", "agentic", "rag"} {
		a, j := shareGPTFromOpenAI(t, builtinOpenAI(t, name, sessionsUnlessShort(150, 40)))
		traces["builtin:"+name+"/array"] = a
		traces["builtin:"+name+"/jsonl"] = j
	}
	var mixed bytes.Buffer
	for _, tt := range sharegptTrickyConvs {
		mixed.WriteString(tt.conv)
		mixed.WriteString("\n")
	}
	traces["mixed"] = mixed.Bytes()
	for name, data := range traces {
		for _, o := range sgModes {
			comparePaths(t, name, func() io.Reader { return bytes.NewReader(data) }, o, 0)
		}
	}
	// The fast path takes the converted conversations.
	_, j := shareGPTFromOpenAI(t, builtinOpenAI(t, "chat", 150))
	for _, line := range bytes.Split(bytes.TrimSpace(j), []byte("\n")) {
		if !sgFastMatches(t, line) {
			t.Fatalf("fast path declined %.200q", line)
		}
	}
	chat := builtinOpenAI(t, "chat", chatTraceRequests)
	a, _ := shareGPTFromOpenAI(t, chat)
	if n, lines := comparePaths(t, "chat-sharegpt", func() io.Reader { return bytes.NewReader(a) }, Options{Format: FormatShareGPT}, 0), bytes.Count(chat, []byte("\n")); n != lines {
		t.Errorf("builtin:chat as ShareGPT: %d requests, want %d", n, lines)
	}
}

var sharegptTrickyConvs = []struct {
	conv        string
	fast, maybe bool
}{
	{conv: `{"id":"a","conversations":[{"from":"human","value":"hi \u00e9\ud83d\ude00 \ud800 x\n"},{"from":"gpt","value":"yo"}]}`, fast: true},
	{conv: `{"id":7,"conversation":[{"role":"user","content":"x"},{"from":"gpt","value":"y","role":"ignored","content":"z"}]}`, fast: true},
	{conv: `{"id":null,"messages":[{"role":"user","content":"x","extra":{"a":[1,{"b":null}]}}],"conversations":null}`, fast: true},
	{conv: `{"conversations":[]}`, fast: true},
	{conv: `{}`, fast: true},
	{conv: `{"id":-1.5e3,"conversations":[{"from":"HUMAN","value":"x"},{"from":"model","value":null,"content":"c"}]}`, fast: true},
	{conv: `{"conversations":[{"value":"x"}]}`, fast: true},
	{conv: `{"conversations":[{"from":"alien","value":"x"}]}`, fast: true},
	{conv: `{"conversations":[{"from":"human"}]}`, fast: true},
	{conv: `{"id":"","conversations":[{"from":null,"role":"user","value":"x"}]}`, fast: true},
	{conv: "{\"conversations\":[{\"from\":\"human\",\"value\":\"bad \xff\xfe utf8\"}]}", fast: true},
	{conv: `{"conversations":[{"from":"human","value":"a"},{"from":"human","value":"b"},{"from":"gpt","value":"c"},{"from":"system","value":"d"}]}`, fast: true},

	{conv: `{"Conversations":[{"from":"human","value":"x"}]}`},
	{conv: `{"conversations":[{"From":"human","value":"x"}]}`},
	{conv: `{"conversations":[{"from":"human","value":"x"}],"conversations":[]}`},
	{conv: `{"conversations":[{"from":"human","from":"gpt","value":"x"}]}`},
	{conv: `{"conversations":[{"from":"human","value":null,"value":"x"}]}`},
	{conv: `{"conversations":[null]}`},
	{conv: `{"conversations":[1]}`},
	{conv: `{"conversations":{"from":"human"}}`},
	{conv: `{"conversations":[{"from":"human","value":5}]}`},
	{conv: `{"id":true,"conversations":[]}`},
	{conv: `{"id":[1],"conversations":[]}`},
	{conv: `{"i\u0064":"x","conversations":[]}`},
	{conv: `[{"conversations":[]}]`},
	{conv: `null`},
	{conv: `"x"`},
	{conv: `{"conversations":[{"from":"human","value":"x"}]`},
	{conv: `{"conversations":[{"from":"human","value":"x"}]}}`},
	{conv: `{"conversations":[{"from":"human","value":"x\q"}]}`},
}

func TestShareGPTFastConversations(t *testing.T) {
	for _, tt := range sharegptTrickyConvs {
		took := sgFastMatches(t, []byte(tt.conv))
		if took != tt.fast && !tt.maybe {
			t.Errorf("fast path took=%v, want %v: %s", took, tt.fast, tt.conv)
		}
		for _, o := range sgModes {
			for _, data := range []string{tt.conv + "\n" + tt.conv, "[" + tt.conv + ",\n" + tt.conv + "]"} {
				comparePaths(t, "s.json", func() io.Reader { return strings.NewReader(data) }, o, 0)
			}
		}
	}
}

func FuzzShareGPTFast(f *testing.F) {
	for _, tt := range sharegptTrickyConvs {
		f.Add([]byte(tt.conv))
	}
	if data, err := os.ReadFile("testdata/sharegpt.json"); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sgFastMatches(t, data)
		for _, o := range sgModes[:1] {
			comparePaths(t, "fuzz", func() io.Reader { return bytes.NewReader(data) }, o, 300)
		}
	})
}
