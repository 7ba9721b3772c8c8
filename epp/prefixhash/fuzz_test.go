package prefixhash

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/eppsim/eppsim/epp"
)

var fuzzPaths = []string{"", "/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/responses", "/v1/embeddings", "/v1/conversations", "/inference/v1/generate"}

var fuzzSeeds = []string{
	`{"model":"m","prompt":"hello"}`,
	`{"model":"m","prompt":["abc","defgh"],"cache_salt":"s1"}`,
	`{"model":"m","prompt":["only"]}`,
	`{"model":"m","prompt":[]}`,
	`{"model":"m","prompt":[1,2,3]}`,
	`{"model":"m","prompt":[1.5]}`,
	`{"model":"m","prompt":null}`,
	`{"prompt":"a\u00e9\ud83d\ude00\ud800x\"\\\/\b\f\n\r\t","cache_salt":null}`,
	`{"messages":[{"role":"user","content":"Hello, who are you?"},{"role":"assistant","content":"I am an AI assistant."}]}`,
	`{"messages":[{"content":"c first","role":"system"},null,{"role":"user","content":null},{"role":"user","content":[]}]}`,
	`{"messages":[{"role":"user","content":[{"type":"text","text":"Tell me "},{"type":"text","text":"a joke.","cache_control":{"type":"ephemeral"}}]}]}`,
	`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://x/y.png"}},{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}]}`,
	`{"messages":[{"role":"user","content":[{"type":"video_url","video_url":{"url":"v"}},{"type":"audio_url","audio_url":{"url":"a"}}]}]}`,
	`{"tools":[{"type":"function","function":{"name":"f","parameters":{"b":1,"a":"<&>"}}}],"messages":[{"role":"user","content":"x"}]}`,
	`{"tools":[],"messages":[{"role":"user","content":"x"}],"cache_salt":"s"}`,
	`{"Messages":[{"role":"user","content":"x"}]}`,
	`{"messages":[{"Role":"user","content":"x"}]}`,
	`{"messages":[{"role":"user","content":"a"}],"messages":[{"role":"user","content":"b"}]}`,
	`{"meſſages":[{"role":"user","content":"x"}]}`,
	`{"messages":{"role":"user"}}`,
	`{"messages":[{"role":5}]}`,
	`{"messages":[{"role":"user","content":5}]}`,
	`{"messages":[],"prompt":"p"}`,
	`{"prompt":"p","messages":[{"role":"user","content":"m"}]}`,
	`{"token_ids":[1,2,3],"cache_salt":"s"}`,
	`{"input":"text","instructions":"be nice","tools":[{"z":1,"a":2}]}`,
	`{"input":[1,2]}`,
	`{"items":[{"type":"message","role":"user","content":"hi"}]}`,
	`{"system":[{"type":"text","text":"x-anthropic-billing-header: 1"},{"type":"text","text":"sys"}],"messages":[{"role":"user","content":[{"type":"thinking","thinking":"hm"},{"type":"tool_use","id":"t1","name":"f","input":{"a": 1}},{"type":"tool_result","content":[{"type":"text","text":"r1"},{"type":"text","text":"r2"},{"type":"image","source":{"type":"base64","data":"QUJD"}}]}]}]}`,
	`[]`, `null`, `"x"`, `{`, `{"prompt":"x"} trailing`, `{"prompt":"\x01"}`, `{"prompt":"\ud800\u0041"}`,
	"{\"prompt\":\"\xff\xfe\"}", `{"messages":[{"role":"user","content":"x","name":{"nested":[1,2,{"deep":true}]}}],"n":-1.5e-3}`,
	// Long strings, for the scanner's 32-byte steps: plain, then with a
	// control character, an escape, non-ASCII and invalid UTF-8 past the
	// first steps.
	`{"model":"m","prompt":"the cache prefix router token block replica latency model request the cache"}`,
	"{\"model\":\"m\",\"prompt\":\"the cache prefix router token block replica latency model\x1f request\"}",
	`{"model":"m","prompt":"the cache prefix router token block replica latency model\n request \u00e9\"x\" the end"}`,
	`{"messages":[{"role":"user","content":"the cache prefix router token block replica latency héllo wörld 😀 model request"}]}`,
	"{\"model\":\"m\",\"prompt\":\"the cache prefix router token block replica latency model \xc3 request\"}",
	// Chat-template fields and tool calls, well and badly typed (spec §2.1
	// step 0), and audio blocks (§5.2.1).
	`{"messages":[{"role":"assistant","content":"x","tool_calls":[{"id":"1"}]}],"add_generation_prompt":true,"documents":[],"chat_template":"t","chat_template_kwargs":{"a":1}}`,
	`{"messages":[{"role":"assistant","content":"x","tool_calls":"x"}]}`,
	`{"messages":[{"role":"user","content":"x"}],"add_generation_prompt":"yes","continue_final_message":1,"return_assistant_tokens_mask":null}`,
	`{"prompt":"p","documents":"d","chat_template_kwargs":5}`,
	`{"messages":[{"role":"user","content":[{"type":"text","text":"a","audio_url":"s"},{"type":"audio_url","audio_url":"a.wav"}]}]}`,
	`{"messages":[{"role":"user","content":"x"}],"temperature":1E400}`,
}

func FuzzTokenize(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add(uint8(i), []byte(s))
	}
	e := &Estimator{}
	f.Fuzz(func(t *testing.T, p uint8, body []byte) {
		path := fuzzPaths[int(p)%len(fuzzPaths)]
		tr, err := e.Tokenize(path, body)
		if err == nil && tr != nil && tr.TokenCount() == 0 {
			t.Fatalf("empty TokenizedRequest returned")
		}
		_ = CacheSalt(body)
		_ = KindOf(path, body)
	})
}

// FuzzFastPathMatchesReference checks that whenever the fast path claims a
// body, the encoding/json reference path accepts it and yields the same
// prompts and salt.
func FuzzFastPathMatchesReference(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add(uint8(i), []byte(s))
	}
	e := &Estimator{}
	f.Fuzz(func(t *testing.T, p uint8, body []byte) {
		path := fuzzPaths[int(p)%len(fuzzPaths)]
		fast, ok := fastTokenize(path, body)
		if !ok {
			return
		}
		if fast.TokenCount() == 0 {
			fast = nil
		}
		ref, err := e.tokenizeReference(path, body)
		if err != nil {
			t.Fatalf("fast path accepted %q (path %q) but reference failed: %v", body, path, err)
		}
		if !sameTokenized(fast, ref) {
			t.Fatalf("path %q body %q:\nfast %+v\nref  %+v", path, body, fast, ref)
		}
	})
}

// FuzzMaxOutputTokens checks the fast output-cap reader against encoding/json.
func FuzzMaxOutputTokens(f *testing.F) {
	for _, s := range append(fuzzSeeds, `{"max_tokens":5}`, `{"max_tokens":null,"max_output_tokens":7}`,
		`{"max_completion_tokens":1.0}`, `{"max_tokens":-3,"max_completion_tokens":9}`, `{"max_tokens":1e2}`) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fast, ok := fastMaxOutputTokens(body)
		if !ok {
			return
		}
		var c outputCaps
		if err := json.Unmarshal(body, &c); err != nil {
			t.Fatalf("fast accepted %q, encoding/json: %v", body, err)
		}
		want := int64(0)
		for _, p := range []*int64{c.MaxCompletionTokens, c.MaxTokens, c.MaxOutputTokens} {
			if p != nil {
				want = *p
				break
			}
		}
		if fast != want {
			t.Fatalf("%q: fast %d ref %d", body, fast, want)
		}
	})
}

// FuzzCacheSalt checks the fast cache-salt reader against encoding/json.
func FuzzCacheSalt(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fast, ok := fastCacheSalt(body)
		if !ok {
			return
		}
		var ref saltOnly
		if err := json.Unmarshal(body, &ref); err != nil {
			t.Fatalf("fast accepted %q, encoding/json: %v", body, err)
		}
		if ref.CacheSalt != fast {
			t.Fatalf("%q: fast %q ref %q", body, fast, ref.CacheSalt)
		}
	})
}

func sameTokenized(a, b *epp.TokenizedRequest) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if a.CacheSalt != b.CacheSalt || len(a.Prompts) != len(b.Prompts) || len(a.MultiModal) != len(b.MultiModal) {
		return false
	}
	for i := range a.Prompts {
		if len(a.Prompts[i]) != len(b.Prompts[i]) || (len(a.Prompts[i]) > 0 && !reflect.DeepEqual(a.Prompts[i], b.Prompts[i])) {
			return false
		}
	}
	return true
}

// TestFastPathCoverage pins which seeds the fast path claims, and that the
// claimed ones agree with the reference.
func TestFastPathCoverage(t *testing.T) {
	e := &Estimator{}
	claimed := 0
	for _, s := range fuzzSeeds {
		for _, path := range fuzzPaths[:3] {
			fast, ok := fastTokenize(path, []byte(s))
			if !ok {
				continue
			}
			claimed++
			if fast.TokenCount() == 0 {
				fast = nil
			}
			ref, err := e.tokenizeReference(path, []byte(s))
			if err != nil || !sameTokenized(fast, ref) {
				t.Errorf("path %q body %s: fast %+v ref %+v err %v", path, s, fast, ref, err)
			}
		}
	}
	if claimed < 20 {
		t.Errorf("fast path claimed only %d seed bodies", claimed)
	}
}
