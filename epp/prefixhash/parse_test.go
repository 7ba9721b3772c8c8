package prefixhash

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// checkBodyReference is what the EPP's parsers do with a body (spec §2.1
// step 0), with encoding/json and the typed structs of body.go: decode it
// into a map[string]any, then into the typed request of its API.
func checkBodyReference(kind Kind, body []byte) error {
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		return err
	}
	var v any
	switch kind {
	case KindChatCompletions:
		v = new(chatBody)
	case KindMessages:
		v = new(messagesBody)
	case KindResponses:
		v = new(responsesBody)
	case KindConversations:
		v = new(conversationsBody)
	case KindEmbeddings:
		v = new(embeddingsBody)
	case KindGenerate:
		v = new(generateBody)
	default:
		v = new(completionsBody)
	}
	return json.Unmarshal(body, v)
}

var allKinds = []Kind{KindUnknown, KindChatCompletions, KindCompletions, KindMessages, KindResponses,
	KindConversations, KindEmbeddings, KindGenerate}

func TestCheckBody(t *testing.T) {
	const msg = `"messages":[{"role":"user","content":"hi"}]`
	tests := []struct {
		name  string
		kind  Kind
		body  string
		field string // "" with problem "" = accepted
		// problem is a substring of the ParseError's Problem.
		problem string
	}{
		// The bodies of issue #12.
		{"tool_calls string", KindChatCompletions, `{"messages":[{"role":"assistant","content":"x","tool_calls":"x"}]}`,
			"messages[0].tool_calls", "got a string, want an array"},
		{"image_url string", KindChatCompletions, `{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":"x"}]}]}`,
			"messages[0].content[1].image_url", "got a string, want an object"},
		{"add_generation_prompt string", KindChatCompletions, `{` + msg + `,"add_generation_prompt":"yes"}`,
			"add_generation_prompt", "got a string, want a boolean"},
		{"documents string", KindChatCompletions, `{` + msg + `,"documents":"d"}`,
			"documents", "got a string, want an array"},
		{"chat_template_kwargs number", KindChatCompletions, `{` + msg + `,"chat_template_kwargs":5}`,
			"chat_template_kwargs", "got a number, want an object"},
		{"1E400 in an unknown key", KindChatCompletions, `{` + msg + `,"temperature":1E400}`,
			"temperature", "number 1E400 is outside the float64 range"},
		{"1E400 deep in a tool", KindChatCompletions, `{` + msg + `,"tools":[{"f":{"p":[1,-2e999]}}]}`,
			"tools[0].f.p[1]", "number -2e999 is outside"},
		{"1E400 in completions", KindCompletions, `{"prompt":"p","x":{"y":1E400}}`, "x.y", "outside the float64 range"},
		{"1E400 in generate", KindGenerate, `{"token_ids":[1,2],"extra":[1E400]}`, "extra[0]", "outside"},
		// More declared fields.
		{"chat_template number", KindChatCompletions, `{` + msg + `,"chat_template":3}`, "chat_template", "got a number, want a string"},
		{"continue_final_message 1", KindChatCompletions, `{` + msg + `,"continue_final_message":1}`, "continue_final_message", "want a boolean"},
		{"return_assistant_tokens_mask array", KindChatCompletions, `{` + msg + `,"return_assistant_tokens_mask":[]}`,
			"return_assistant_tokens_mask", "got an array, want a boolean"},
		{"tools object", KindChatCompletions, `{` + msg + `,"tools":{"a":1}}`, "tools", "got an object, want an array"},
		{"cache_salt number", KindChatCompletions, `{` + msg + `,"cache_salt":7}`, "cache_salt", "got a number, want a string"},
		{"messages object", KindChatCompletions, `{"messages":{"role":"user"}}`, "messages", "got an object, want an array"},
		{"role number", KindChatCompletions, `{"messages":[{"role":5,"content":"x"}]}`, "messages[0].role", "got a number, want a string"},
		{"content number", KindChatCompletions, `{"messages":[{"role":"user","content":5}]}`, "messages[0].content",
			"got a number, want a string or an array of content blocks"},
		{"content object", KindChatCompletions, `{"messages":[{"role":"user","content":{"type":"text"}}]}`, "messages[0].content", "got an object"},
		{"content block string", KindChatCompletions, `{"messages":[{"role":"user","content":["a"]}]}`, "messages[0].content[0]",
			"got a string, want an object"},
		{"video_url number", KindChatCompletions, `{"messages":[{"role":"user","content":[{"type":"video_url","video_url":3}]}]}`,
			"messages[0].content[0].video_url", "got a number, want an object"},
		{"video_url url number", KindChatCompletions, `{"messages":[{"role":"user","content":[{"type":"video_url","video_url":{"url":3}}]}]}`,
			"messages[0].content[0].video_url.url", "got a number, want a string"},
		{"input_audio data bool", KindChatCompletions, `{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":true}}]}]}`,
			"messages[0].content[0].input_audio.data", "got a boolean, want a string"},
		{"text number", KindChatCompletions, `{"messages":[{"role":"user","content":[{"type":"text","text":1}]}]}`,
			"messages[0].content[0].text", "want a string"},
		{"nested second message", KindChatCompletions, `{"messages":[{"role":"user","content":"a"},null,{"role":"assistant","content":"b","tool_calls":{}}]}`,
			"messages[2].tool_calls", "got an object, want an array"},
		{"case-folded key", KindChatCompletions, `{` + msg + `,"Add_Generation_Prompt":"yes"}`, "Add_Generation_Prompt", "want a boolean"},
		{"long-s key folds to s", KindChatCompletions, `{` + msg + `,"cache_ſalt":1}`, "cache_ſalt", "want a string"},
		{"escaped key", KindChatCompletions, `{` + msg + `,"tool\u005fcalls":1,"\u0064ocuments":2}`, `\u0064ocuments`, "want an array"},
		{"repeated key, second bad", KindChatCompletions, `{` + msg + `,"add_generation_prompt":true,"add_generation_prompt":"no"}`,
			"add_generation_prompt", "want a boolean"},
		{"first error wins", KindChatCompletions, `{"documents":1,` + msg + `,"chat_template":2}`, "documents", "want an array"},
		{"overflow before type error", KindChatCompletions, `{"documents":1,"n":1e400,` + msg + `}`, "n", "outside the float64 range"},
		// Completions and embeddings prompts.
		{"prompt number", KindCompletions, `{"prompt":5}`, "prompt", "got a number, want a string or an array"},
		{"prompt null", KindCompletions, `{"prompt":null}`, "prompt", "got null"},
		{"prompt object", KindCompletions, `{"prompt":{"a":"b"}}`, "prompt", "got an object"},
		{"prompt mixed strings", KindCompletions, `{"prompt":["a",1]}`, "prompt[1]", "prompt: mixed types in array"},
		{"prompt mixed numbers", KindCompletions, `{"prompt":[1,"a"]}`, "prompt[1]", "prompt: mixed types in array"},
		{"prompt fractional token", KindCompletions, `{"prompt":[1,2.5]}`, "prompt[1]", "number 2.5 is not a valid token ID"},
		{"prompt negative token", KindCompletions, `{"prompt":[-1]}`, "prompt[0]", "not a valid token ID"},
		{"prompt token 2^32", KindCompletions, `{"prompt":[4294967296]}`, "prompt[0]", "not a valid token ID"},
		{"prompt of arrays", KindCompletions, `{"prompt":[[1,2]]}`, "prompt[0]", "unsupported array element type"},
		{"prompt of nulls", KindCompletions, `{"prompt":[null]}`, "prompt[0]", "unsupported array element type"},
		{"prompt salt number", KindCompletions, `{"prompt":"p","cache_salt":1}`, "cache_salt", "want a string"},
		{"no path: completions", KindUnknown, `{"cache_salt":false}`, "cache_salt", "want a string"},
		{"embeddings input bool", KindEmbeddings, `{"input":true}`, "input", "want a string or an array"},
		{"embeddings input mixed", KindEmbeddings, `{"input":["a",{}]}`, "input[1]", "embeddings input: mixed types"},
		// Messages, conversations, responses, generate.
		{"anthropic system number", KindMessages, `{"system":1,"messages":[]}`, "system", "want a string or an array of content blocks"},
		{"anthropic tool_result content", KindMessages, `{"messages":[{"role":"user","content":[{"type":"tool_result","content":[{"type":"text","text":2}]}]}]}`,
			"messages[0].content[0].content[0].text", "want a string"},
		{"anthropic source string", KindMessages, `{"messages":[{"role":"user","content":[{"type":"image","source":"s"}]}]}`,
			"messages[0].content[0].source", "want an object"},
		{"anthropic tool_use_id number", KindMessages, `{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":1}]}]}`,
			"messages[0].content[0].tool_use_id", "want a string"},
		{"conversations items object", KindConversations, `{"items":{}}`, "items", "want an array"},
		{"conversations metadata array", KindConversations, `{"items":[],"metadata":[]}`, "metadata", "want an object"},
		{"conversations role number", KindConversations, `{"items":[{"role":1}]}`, "items[0].role", "want a string"},
		{"responses salt number", KindResponses, `{"input":"x","cache_salt":1}`, "cache_salt", "want a string"},
		{"generate token string", KindGenerate, `{"token_ids":["1"]}`, "token_ids[0]", "got a string, want a number"},
		{"generate token fractional", KindGenerate, `{"token_ids":[1,1.5]}`, "token_ids[1]", "invalid token ID 1.5"},
		{"generate token negative", KindGenerate, `{"token_ids":[-3]}`, "token_ids[0]", "invalid token ID"},
		{"generate placeholder offset float", KindGenerate, `{"token_ids":[1],"features":{"mm_placeholders":{"image":[{"offset":1.5}]}}}`,
			"features.mm_placeholders.image[0].offset", "got number 1.5, want an integer"},
		{"generate hashes number", KindGenerate, `{"features":{"mm_hashes":{"image":[1]}}}`, "features.mm_hashes.image[0]", "want a string"},
		// The body as a whole.
		{"not JSON", KindChatCompletions, `{"messages":[`, "", "invalid JSON: unexpected end of input"},
		{"trailing data", KindCompletions, `{"prompt":"x"} x`, "", "after the top-level value"},
		{"bad escape", KindCompletions, `{"prompt":"\q"}`, "", "invalid JSON: bad string"},
		{"control character", KindCompletions, "{\"prompt\":\"a\x01\"}", "", "invalid JSON: bad string"},
		{"empty body", KindCompletions, ``, "", "unexpected end of input"},
		{"array body", KindChatCompletions, `[]`, "", "got an array, want a JSON object"},
		{"string body", KindGenerate, `"x"`, "", "got a string, want a JSON object"},
		{"syntax error beats a type error", KindChatCompletions, `{"documents":1,"x":tru}`, "", "invalid JSON"},
		{"leading zero", KindCompletions, `{"prompt":"x","n":01}`, "", "invalid JSON"},

		// Accepted.
		{"plain chat", KindChatCompletions, `{"model":"m",` + msg + `}`, "", ""},
		{"unknown keys of any type", KindChatCompletions, `{` + msg + `,"stream":"yes","max_tokens":"10","temperature":[],"foo":{"bar":1e300}}`, "", ""},
		{"unknown message and block keys", KindChatCompletions, `{"messages":[{"role":"user","name":5,"content":[{"type":"text","text":"a","cache_control":7}]}]}`, "", ""},
		{"audio_url string is unknown", KindChatCompletions, `{"messages":[{"role":"user","content":[{"type":"audio_url","audio_url":"a.wav"}]}]}`, "", ""},
		{"video_url null", KindChatCompletions, `{"messages":[{"role":"user","content":[{"type":"video_url","video_url":null}]}]}`, "", ""},
		{"declared fields null", KindChatCompletions, `{"messages":null,"tools":null,"documents":null,"chat_template":null,"add_generation_prompt":null,` +
			`"chat_template_kwargs":null,"cache_salt":null}`, "", ""},
		{"message and content null", KindChatCompletions, `{"messages":[null,{"role":null,"content":null,"tool_calls":null}]}`, "", ""},
		{"declared fields well typed", KindChatCompletions, `{` + msg + `,"tools":[{"type":"function"}],"documents":[{"t":"d"}],"chat_template":"{{x}}",` +
			`"return_assistant_tokens_mask":false,"continue_final_message":true,"add_generation_prompt":true,"chat_template_kwargs":{"enable_thinking":false},` +
			`"messages":[{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function"}]}]}`, "", ""},
		{"integer in a float context", KindChatCompletions, `{` + msg + `,"temperature":1,"top_p":0}`, "", ""},
		{"tiny number underflows to 0", KindChatCompletions, `{` + msg + `,"x":1e-400}`, "", ""},
		{"largest float64", KindChatCompletions, `{` + msg + `,"x":1.7976931348623157e308}`, "", ""},
		{"null body", KindChatCompletions, `null`, "", ""},
		{"empty object", KindChatCompletions, `{}`, "", ""},
		{"chat fields ignored by completions", KindCompletions, `{"prompt":"p","documents":"d","add_generation_prompt":"yes","messages":5}`, "", ""},
		{"prompt tokens", KindCompletions, `{"prompt":[0,1.0,4294967295,-0]}`, "", ""},
		{"prompt strings", KindCompletions, `{"prompt":["a","b"]}`, "", ""},
		{"prompt empty array", KindCompletions, `{"prompt":[]}`, "", ""},
		{"prompt absent", KindCompletions, `{"model":"m"}`, "", ""},
		{"embeddings tokens", KindEmbeddings, `{"input":[3,4]}`, "", ""},
		{"generate floats that are integers", KindGenerate, `{"token_ids":[1.0,2e3,null],"features":{"mm_hashes":{"image":["h",null]},` +
			`"mm_placeholders":{"image":[{"offset":0,"length":-0},null]}}}`, "", ""},
		{"generate features null", KindGenerate, `{"token_ids":[1],"features":null}`, "", ""},
		{"anthropic full", KindMessages, `{"system":[{"type":"text","text":"s"}],"tools":[{"name":"f","input_schema":{}}],"messages":[{"role":"user","content":[` +
			`{"type":"tool_use","id":"t","name":"f","input":{"a":[1,{"b":null}]}},{"type":"tool_result","tool_use_id":"t","content":"r"},` +
			`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]}]}`, "", ""},
		{"responses any input", KindResponses, `{"input":[{"role":"user","content":[1,true,null]}],"instructions":5,"tools":"x"}`, "", ""},
		{"conversations any content", KindConversations, `{"items":[{"type":"message","content":{"a":1}}],"metadata":{"k":[1]}}`, "", ""},
		{"invalid UTF-8 is valid JSON", KindCompletions, "{\"prompt\":\"\xff\xfe\",\"\xffkey\":1}", "", ""},
		{"whitespace", KindCompletions, " \t\r\n{ \"prompt\" : \"p\" } \n", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckBody(tt.kind, []byte(tt.body))
			ref := checkBodyReference(tt.kind, []byte(tt.body))
			if (err == nil) != (ref == nil) {
				t.Fatalf("CheckBody: %v; encoding/json reference: %v", err, ref)
			}
			if tt.problem == "" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				return
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("want a *ParseError, got %v", err)
			}
			if pe.Field != tt.field || !strings.Contains(pe.Problem, tt.problem) {
				t.Fatalf("got field %q problem %q (%v), want field %q problem containing %q", pe.Field, pe.Problem, err, tt.field, tt.problem)
			}
			wantKind := tt.kind
			if wantKind == KindUnknown {
				wantKind = KindCompletions
			}
			if pe.Kind != wantKind || !strings.HasPrefix(err.Error(), wantKind.String()+" request: ") {
				t.Fatalf("error %q: kind %v, want %v", err, pe.Kind, wantKind)
			}
		})
	}
}

// TestCheckBodyNesting: encoding/json accepts 10000 nested arrays and
// objects and rejects 10001.
func TestCheckBodyNesting(t *testing.T) {
	for _, n := range []int{9999, 10000, 10001} {
		for _, open := range []string{"[", `{"x":`} {
			inner, close := "[]", "]"
			if open != "[" {
				inner, close = "{}", "}"
			}
			// The body's own object is the first level, inner the last.
			body := `{"nested":` + strings.Repeat(open, n-2) + inner + strings.Repeat(close, n-2) + `}`
			err := CheckBody(KindChatCompletions, []byte(body))
			ref := checkBodyReference(KindChatCompletions, []byte(body))
			if (err == nil) != (ref == nil) || (err == nil) != (n <= maxNesting) {
				t.Errorf("depth %d (%s): CheckBody %v, reference %v", n, open, err, ref)
			}
		}
	}
}

// checkKeys are the keys the CheckBody differential generator draws from:
// every declared field of every request struct, case and escape variants,
// and unknown keys.
var checkKeys = []string{"messages", "prompt", "cache_salt", "tools", "token_ids", "role", "content", "type", "text",
	"image_url", "video_url", "input_audio", "audio_url", "url", "data", "format", "tool_calls", "documents", "chat_template",
	"return_assistant_tokens_mask", "continue_final_message", "add_generation_prompt", "chat_template_kwargs",
	"input", "instructions", "items", "metadata", "system", "source", "media_type", "id", "name", "tool_use_id", "thinking",
	"features", "mm_hashes", "mm_placeholders", "offset", "length", "image",
	"Messages", "PROMPT", "rol\\u0065", "cache_Salt", "Tool_Calls", "ſystem", "x", "model", "stream"}

var checkNumbers = []string{"1", "0", "-0", "7", "1.0", "2.5", "-1", "1e2", "-2.5e3", "1E400", "-1e309", "1e-400", "4294967295", "4294967296",
	"9223372036854775807", "9223372036854775808"}

// TestCheckBodyDifferential compares CheckBody with the encoding/json
// reference on random request-like bodies of every kind.
func TestCheckBodyDifferential(t *testing.T) {
	g := &genJSON{r: rand.New(rand.NewPCG(diffSeed, 3)), keys: checkKeys, numbers: checkNumbers}
	n := 20000
	if testing.Short() {
		n = 2000
	}
	accepted := map[Kind]int{}
	for range n {
		body := []byte(g.requestish())
		for _, kind := range allKinds {
			err := CheckBody(kind, body)
			ref := checkBodyReference(kind, body)
			if (err == nil) != (ref == nil) {
				t.Fatalf("kind %v body %s:\nCheckBody %v\nreference %v", kind, body, err, ref)
			}
			if err == nil {
				accepted[kind]++
			}
		}
	}
	for _, kind := range allKinds {
		if a := accepted[kind]; a < n/20 || a > n-n/20 {
			t.Errorf("%v: %d of %d bodies accepted: the generator does not exercise both outcomes", kind, a, n)
		}
	}
}

// FuzzCheckBodyMatchesReference checks that CheckBody accepts exactly the
// bodies encoding/json decodes into the typed request structs.
func FuzzCheckBodyMatchesReference(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add(uint8(i), []byte(s))
	}
	for i, s := range checkSeeds {
		f.Add(uint8(i), []byte(s))
	}
	f.Fuzz(func(t *testing.T, k uint8, body []byte) {
		kind := allKinds[int(k)%len(allKinds)]
		err := CheckBody(kind, body)
		ref := checkBodyReference(kind, body)
		if (err == nil) != (ref == nil) {
			t.Fatalf("kind %v body %q:\nCheckBody %v\nreference %v", kind, body, err, ref)
		}
	})
}

var checkSeeds = []string{
	`{"messages":[{"role":"assistant","content":"x","tool_calls":"x"}]}`,
	`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":"x"}]}]}`,
	`{"messages":[],"add_generation_prompt":"yes","documents":"d","chat_template_kwargs":5}`,
	`{"prompt":"p","t":1E400}`,
	`{"prompt":[1,"a"]}`,
	`{"token_ids":[1.5],"features":{"mm_placeholders":{"a":[{"offset":1e2}]}}}`,
	`{"system":1,"messages":[{"role":"user","content":[{"type":"tool_result","content":[{"type":"text","text":2}]}]}]}`,
	`{"items":[{"role":1}],"metadata":[]}`,
	`{"input":true}`,
	`{"cache_ſalt":1,"Tool_Calls":2,"\u0064ocuments":3}`,
}

// goodValues are well-typed values of the declared top-level fields, so
// that generated bodies are often accepted.
var goodValues = map[string][]string{
	"messages": {`[{"role":"user","content":"hi"}]`, `[null,{"role":"assistant","content":null,"tool_calls":[{"id":"1"}]}]`,
		`[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"u"}},{"type":"audio_url","audio_url":"a"}]}]`,
		`[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"r"}]},{"type":"tool_use","input":{"a":1}}]}]`},
	"prompt":                {`"p"`, `["a","b"]`, `[1,2.0]`, `[]`},
	"input":                 {`"x"`, `["a"]`, `[1]`},
	"token_ids":             {`[1,2.0,null]`, `[]`},
	"cache_salt":            {`"s"`, `null`},
	"tools":                 {`[{"a":1}]`, `null`},
	"documents":             {`[]`},
	"chat_template":         {`"t"`},
	"add_generation_prompt": {`true`, `false`},
	"chat_template_kwargs":  {`{"a":[1]}`},
	"items":                 {`[{"type":"message","role":"user","content":"c"}]`},
	"metadata":              {`{}`},
	"system":                {`"s"`, `[{"type":"text","text":"s"}]`},
	"features":              {`{"mm_hashes":{"image":["h"]},"mm_placeholders":{"image":[{"offset":1,"length":2}]}}`},
	"model":                 {`"m"`},
	"stream":                {`true`, `"yes"`},
}

var goodKeys = func() []string {
	keys := make([]string, 0, len(goodValues))
	for k := range goodValues {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}()

// requestish generates a body: mostly an object of declared fields with
// well-typed values, some of them replaced by random values; sometimes a
// random object or value.
func (g *genJSON) requestish() string {
	g.b.Reset()
	switch g.r.IntN(8) {
	case 0:
		g.object(0)
		return g.b.String()
	case 1:
		g.value(0)
		return g.b.String()
	}
	g.b.WriteByte('{')
	n := 0
	for _, k := range goodKeys {
		if g.r.IntN(3) != 0 {
			continue
		}
		if n > 0 {
			g.b.WriteByte(',')
		}
		n++
		g.b.WriteString(`"` + k + `":`)
		if g.r.IntN(6) == 0 {
			g.value(1)
			continue
		}
		vs := goodValues[k]
		g.b.WriteString(vs[g.r.IntN(len(vs))])
	}
	g.b.WriteByte('}')
	return g.b.String()
}

// TestFastPathTypedChatFields: the fast tokenizer keeps bodies with
// well-typed chat-template fields and tool calls (agentic traces) and
// leaves badly typed ones to the reference path, which rejects them.
func TestFastPathTypedChatFields(t *testing.T) {
	tests := []struct {
		path, body string
		claimed    bool
	}{
		{"/v1/chat/completions", `{"messages":[{"role":"assistant","content":"x","tool_calls":[{"id":"c","function":{"arguments":"{}"}}]}]}`, true},
		{"/v1/chat/completions", `{"messages":[{"role":"assistant","content":"x","tool_calls":null}]}`, true},
		{"/v1/chat/completions", `{"messages":[{"role":"assistant","content":"x","tool_calls":"x"}]}`, false},
		{"/v1/chat/completions", `{"messages":[{"role":"assistant","content":"x","tool_calls":{}}]}`, false},
		{"/v1/chat/completions", `{"messages":[],"documents":[1],"chat_template":"t","return_assistant_tokens_mask":false,` +
			`"continue_final_message":true,"add_generation_prompt":null,"chat_template_kwargs":{"k":1}}`, true},
		{"/v1/chat/completions", `{"messages":[],"add_generation_prompt":"yes"}`, false},
		{"/v1/chat/completions", `{"messages":[],"documents":"d"}`, false},
		{"/v1/chat/completions", `{"messages":[],"chat_template_kwargs":5}`, false},
		{"/v1/chat/completions", `{"messages":[],"chat_template":[]}`, false},
		{"", `{"messages":[],"continue_final_message":0}`, false},
		// Completions do not declare them.
		{"/v1/completions", `{"prompt":"p","documents":"d","add_generation_prompt":"yes","chat_template_kwargs":5}`, true},
		{"", `{"prompt":"p","documents":"d"}`, true},
		// audio_url is no field: any value is skipped in a text block.
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"text","text":"a","audio_url":"s","AUDIO_URL":1}]}]}`, true},
	}
	e := &Estimator{}
	for _, tt := range tests {
		fast, ok := fastTokenize(tt.path, []byte(tt.body))
		if ok != tt.claimed {
			t.Errorf("path %q body %s: claimed %v, want %v", tt.path, tt.body, ok, tt.claimed)
			continue
		}
		kind := KindOf(tt.path, []byte(tt.body))
		ref, err := e.tokenizeReference(tt.path, []byte(tt.body))
		if (err == nil) != (CheckBody(kind, []byte(tt.body)) == nil) {
			t.Errorf("path %q body %s: reference tokenizer error %v disagrees with CheckBody", tt.path, tt.body, err)
		}
		if !ok {
			continue
		}
		if fast.TokenCount() == 0 {
			fast = nil
		}
		if err != nil || !sameTokenized(fast, ref) {
			t.Errorf("path %q body %s: fast %+v ref %+v err %v", tt.path, tt.body, fast, ref, err)
		}
	}
}
