package workload

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// depth returns the deepest nesting of arrays and objects in valid JSON.
func depth(data []byte) int {
	d, deepest := 0, 0
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '[', '{':
			d++
			deepest = max(deepest, d)
		case ']', '}':
			d--
		case '"':
			end, _, _ := stringEnd(data, i+1)
			i = end
		}
	}
	return deepest
}

// checkCursor compares jsonCursor with encoding/json on data: validity,
// string decoding and compaction.
func checkCursor(t *testing.T, data []byte) {
	var c jsonCursor
	c.reset(data)
	ok := c.skipValue() && c.atEnd()
	valid := json.Valid(data)
	if ok && !valid {
		t.Fatalf("cursor accepts invalid JSON %q", data)
	}
	if !ok && valid && depth(data) <= maxFastDepth {
		t.Fatalf("cursor rejects valid JSON %q", data)
	}
	if valid {
		var want bytes.Buffer
		if err := json.Compact(&want, data); err != nil {
			t.Fatal(err)
		}
		if got := appendCompactJSON(nil, data); !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("compact %q: %q, json.Compact %q", data, got, want.Bytes())
		}
	}
	// data as the contents of a string.
	quoted := append(append([]byte{'"'}, data...), '"')
	var want string
	errJSON := json.Unmarshal(quoted, &want)
	c.reset(quoted)
	got, ok := c.str()
	ok = ok && c.atEnd()
	if ok != (errJSON == nil) {
		t.Fatalf("string %q: cursor ok=%v, encoding/json %v", quoted, ok, errJSON)
	}
	if ok && got != want {
		t.Fatalf("string %q: cursor %q, encoding/json %q", quoted, got, want)
	}
}

var cursorSeeds = []string{
	`"a\"b\\c\/d\b\f\n\r\t\u00e9\u4e2d\ud83d\ude00 é"`,
	`"\ud800 \udc00 \ud800\u0041 \ud800\ud800 \udbff\udfff \ud800\\u0041 \ud800\u00"`,
	"\"\xff\xfe \xc3 \xed\xa0\x80 \xf4\x90\x80\x80 \xef\xbf\xbd\"",
	`{"a":[1,-0,0.5,1e5,1E-5,-1.5e+3,true,false,null,{},[],"x"]}`,
	" { \"a\" :\t[ 1 ,\r2 ]\n} ",
	`[01]`, `[1.]`, `[-]`, `[.5]`, `[1e]`, `[tru]`, `[nul]`, `{"a" 1}`, `{"a":1,}`, `[1,]`, `"\x"`, `"\u12"`, `"\'"`,
	strings.Repeat("[", 250) + strings.Repeat("]", 250),
	"\"a\x00b\"", "\"a\x7fb\"", `"12345678\n12345678\"1234567890"`,
}

func TestJSONCursor(t *testing.T) {
	for _, s := range cursorSeeds {
		checkCursor(t, []byte(s))
	}
}

func FuzzJSONCursor(f *testing.F) {
	for _, s := range cursorSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(checkCursor)
}

// chatBodyJSON is chatBody as encoding/json writes it (the reference).
func chatBodyJSON(model string, msgs []Message, maxTokens int, cacheSalt string) []byte {
	type part struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	type msg struct {
		Role    string `json:"role"`
		Content any    `json:"content"`
	}
	body := struct {
		Model     string `json:"model"`
		Messages  []msg  `json:"messages"`
		MaxTokens int    `json:"max_tokens"`
		CacheSalt string `json:"cache_salt,omitempty"`
	}{Model: model, MaxTokens: maxTokens, CacheSalt: cacheSalt}
	body.Messages = make([]msg, len(msgs))
	for i, m := range msgs {
		body.Messages[i].Role = m.Role
		switch len(m.Content) {
		case 0:
			body.Messages[i].Content = ""
		case 1:
			body.Messages[i].Content = m.Content[0]
		default:
			parts := make([]part, len(m.Content))
			for j, p := range m.Content {
				parts[j] = part{Type: "text", Text: p}
			}
			body.Messages[i].Content = parts
		}
	}
	return marshalCompact(body)
}

var stringSeeds = []string{
	"", "plain ascii text, long enough for the eight-byte loop",
	"quote \" backslash \\ slash / <html> & amp \x7f del",
	"controls \x00\x01\b\f\n\r\t\x1f end",
	"utf8 é 中 😀 \u2028 \u2029 \u2027 \u202a",
	"bad \xff \xfe \xc3 \xed\xa0\x80 \xf4\x90\x80\x80 \xe2\x80 \xe2\x80\xa8",
	"12345678\"12345678\\1234567\n", "1234567é",
}

func checkChatBody(t *testing.T, a, b string, n int) {
	if got, want := appendJSONString(nil, a), marshalCompact(a); !bytes.Equal(got, want) {
		t.Fatalf("appendJSONString(%q) = %s, encoding/json %s", a, got, want)
	}
	for _, msgs := range [][]Message{
		nil,
		{{Role: a, Content: []string{b}}},
		{{Role: "user", Content: nil}, {Role: "assistant", Content: []string{a, b}}, {Role: b, Content: []string{a, "", b}}},
	} {
		for _, salt := range []string{"", b} {
			if got, want := chatBody(a, msgs, n, salt), chatBodyJSON(a, msgs, n, salt); !bytes.Equal(got, want) {
				t.Fatalf("chatBody %s\nencoding/json %s", got, want)
			}
		}
	}
}

func TestChatBodyEncoding(t *testing.T) {
	for _, a := range stringSeeds {
		for _, b := range stringSeeds {
			checkChatBody(t, a, b, len(a)-5)
		}
	}
}

func FuzzChatBody(f *testing.F) {
	for i, s := range stringSeeds {
		f.Add(s, stringSeeds[(i+1)%len(stringSeeds)], i)
	}
	f.Fuzz(checkChatBody)
}
