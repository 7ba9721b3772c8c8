package producer

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/epp"
	"github.com/eppsim/eppsim/epp/prefixhash"
)

func TestTokenProducerParams(t *testing.T) {
	cases := []struct {
		params  string
		backend string
		err     string
	}{
		{``, BackendEstimate, ""},
		{`{}`, BackendEstimate, ""},
		{`{"estimate":{}}`, BackendEstimate, ""},
		{`{"estimate":{"image":{"mode":"static","static":{"staticToken":7}}}}`, BackendEstimate, ""},
		{`{"modelName":"m"}`, BackendVLLM, ""},
		{`{"modelName":"m","vllm":{"url":"http://localhost:8000","timeout":"5s"}}`, BackendVLLM, ""},
		{`{"modelName":"m","udsTokenizerConfig":{"socketFile":"/tmp/t.sock"}}`, BackendUDS, ""},
		{`{"vllm":{"url":"x"}}`, "", "'modelName' must be specified"},
		{`{"udsTokenizerConfig":{"socketFile":"x"}}`, "", "'modelName' must be specified"},
		{`{"estimate":{},"modelName":"m"}`, "", "only one of"},
		{`{"estimate":{},"vllm":{}}`, "", "only one of"},
		{`{"modelName":"m","vllm":{},"udsTokenizerConfig":{"socketFile":"x"}}`, "", "only one of"},
		{`{"estimate":{"image":{"mode":"huge"}}}`, "", "estimate.image.mode"},
		{`{"estimate":{"audio":{}}}`, "", "unknown field"},
		{`{"modelname":"m","bogus":1}`, "", "unknown field"},
		{`{"vllm":"http://x","modelName":"m"}`, "", "cannot unmarshal"},
	}
	for _, c := range cases {
		var raw json.RawMessage
		if c.params != "" {
			raw = json.RawMessage(c.params)
		}
		p, err := tokenFactory(TokenProducerType)("tp", raw, epp.NewHandle(0))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err = %v, want %q", c.params, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.params, err)
			continue
		}
		if got := p.(*TokenProducer).Backend(); got != c.backend {
			t.Errorf("%s: backend %s, want %s", c.params, got, c.backend)
		}
	}
}

func TestTokenProducerProduce(t *testing.T) {
	c := &epp.Cycle{}
	est, _ := NewTokenProducer(TokenProducerType, "token-producer", TokenProducerParams{})
	vllm, _ := NewTokenProducer(TokenProducerType, "token-producer", TokenProducerParams{ModelName: "m"})
	legacy, _ := NewTokenProducer(LegacyTokenizerType, "tokenizer", TokenProducerParams{})

	if got := legacy.Produces(); !reflect.DeepEqual(got, []epp.DataKey{{Type: "TokenizedPrompt", Producer: "tokenizer"}}) || legacy.Type() != "tokenizer" {
		t.Errorf("legacy produces %v type %s", got, legacy.Type())
	}
	if got := est.Produces()[0].String(); got != "TokenizedPrompt/token-producer" {
		t.Errorf("produces %s", got)
	}

	// Estimate: body text packed; salt from the body.
	req := &epp.Request{Path: "/v1/completions", Body: []byte(`{"prompt":"hello","cache_salt":"s1"}`), ServerPromptTokens: []uint32{9, 9, 9}}
	if err := est.Produce(c, req, nil); err != nil {
		t.Fatal(err)
	}
	if want := (&epp.TokenizedRequest{Prompts: [][]uint32{{1819043176, 111}}, CacheSalt: "s1"}); !reflect.DeepEqual(req.Tokenized, want) {
		t.Errorf("estimate: %+v", req.Tokenized)
	}

	// vLLM backend: the server's tokens, one prompt, salt from the body.
	req = &epp.Request{Path: "/v1/completions", Body: []byte(`{"prompt":["a","b"],"cache_salt":"s2"}`), ServerPromptTokens: []uint32{5, 6, 7}}
	if err := vllm.Produce(c, req, nil); err != nil {
		t.Fatal(err)
	}
	if want := (&epp.TokenizedRequest{Prompts: [][]uint32{{5, 6, 7}}, CacheSalt: "s2", FromServer: true}); !reflect.DeepEqual(req.Tokenized, want) {
		t.Errorf("vllm: %+v", req.Tokenized)
	}
	req = &epp.Request{Body: []byte(`{"prompt":"x"}`)}
	if err := vllm.Produce(c, req, nil); err != nil || req.Tokenized != nil {
		t.Errorf("vllm without server tokens: %+v %v", req.Tokenized, err)
	}

	// Zero tokens: stays nil.
	req = &epp.Request{Path: "/v1/completions", Body: []byte(`{"prompt":""}`)}
	if err := est.Produce(c, req, nil); err != nil || req.Tokenized != nil {
		t.Errorf("empty prompt: %+v %v", req.Tokenized, err)
	}

	// Already tokenized: only the salt is filled, never overwritten, and
	// the tokens it was given are not changed (they may be shared): the
	// request gets a copy with the salt.
	pre := &epp.TokenizedRequest{Prompts: [][]uint32{{1}}}
	req = &epp.Request{Body: []byte(`{"prompt":"zzz","cache_salt":"s3"}`), Tokenized: pre}
	_ = est.Produce(c, req, nil)
	if req.Tokenized == pre || req.Tokenized.CacheSalt != "s3" || len(req.Tokenized.Prompts[0]) != 1 || pre.CacheSalt != "" {
		t.Errorf("pre-tokenized: %+v (given %+v)", req.Tokenized, pre)
	}
	pre.CacheSalt = "keep"
	req.Tokenized = pre
	_ = est.Produce(c, req, nil)
	if req.Tokenized != pre || pre.CacheSalt != "keep" {
		t.Errorf("salt overwritten: %q", req.Tokenized.CacheSalt)
	}

	// Bad body: an error, no tokens.
	req = &epp.Request{Path: "/v1/chat/completions", Body: []byte(`{"messages":{}}`)}
	if err := est.Produce(c, req, nil); err == nil || req.Tokenized != nil {
		t.Errorf("bad body: %v %+v", err, req.Tokenized)
	}
}

func TestEstimateMultimodal(t *testing.T) {
	e, err := prefixhash.NewEstimator(nil)
	if err != nil {
		t.Fatal(err)
	}
	// "user" (4 bytes) + "ab" → padded to 8 bytes = 2 tokens, then the
	// image at offset 2 with 640·360/1024 = 225 placeholder tokens.
	body := `{"messages":[{"role":"user","content":[{"type":"text","text":"ab"},{"type":"image_url","image_url":{"url":"https://x/cat.png"}},{"type":"text","text":"cd"}]}]}`
	tr, err := e.Tokenize("/v1/chat/completions", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.MultiModal) != 1 {
		t.Fatalf("features %+v", tr.MultiModal)
	}
	f := tr.MultiModal[0]
	if f.Modality != "image" || f.Offset != 2 || f.Count != 225 {
		t.Errorf("feature %+v", f)
	}
	if n := len(tr.Prompts[0]); n != 2+225+1 {
		t.Errorf("tokens %d", n)
	}
	if tr.Prompts[0][2] != tr.Prompts[0][226] || tr.Prompts[0][227] != 0x6463 {
		t.Errorf("placeholder/tail tokens %x %x %x", tr.Prompts[0][2], tr.Prompts[0][226], tr.Prompts[0][227])
	}
	// Video default: 10 s × 2 fps × 225 = 4500; static image mode: 7.
	e2, _ := prefixhash.NewEstimator(&prefixhash.EstimateConfig{Image: &prefixhash.ImageEstimateConfig{Mode: "static", Static: &prefixhash.StaticImage{StaticToken: 7}}})
	body = `{"messages":[{"role":"user","content":[{"type":"video_url","video_url":{"url":"v"}},{"type":"image_url","image_url":{"url":"i"}}]}]}`
	tr, _ = e2.Tokenize("", []byte(body))
	if len(tr.MultiModal) != 2 || tr.MultiModal[0].Count != 4500 || tr.MultiModal[1].Count != 7 || tr.MultiModal[1].Offset != 1+4500 {
		t.Errorf("features %+v", tr.MultiModal)
	}
}

func TestEstimateToolsAndKinds(t *testing.T) {
	e := &prefixhash.Estimator{}
	text := func(path, body string) string {
		t.Helper()
		tr, err := e.Tokenize(path, []byte(body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if tr == nil {
			return ""
		}
		return strings.TrimRight(string(prefixhash.UnpackTokens(tr.Prompts[0])), "\x00")
	}
	// Tools: json.Marshal of the decoded tools — sorted keys, compact,
	// HTML-escaped — then role+content.
	got := text("/v1/chat/completions", `{"tools":[{"type":"function","function":{"name":"f","description":"a<b"}}],"messages":[{"role":"user","content":"hi"}]}`)
	if want := `[{"function":{"description":"a\u003cb","name":"f"},"type":"function"}]userhi`; got != want {
		t.Errorf("tools: %q", got)
	}
	got = text("/v1/responses", `{"input":"q","instructions":"sys"}`)
	if want := `[{"instructions":"sys"},{"input":"q"}]`; got != want {
		t.Errorf("responses: %q", got)
	}
	got = text("/v1/conversations", `{"items":[{"role":"user","type":"message","content":"hi"}]}`)
	if want := `[{"type":"message","role":"user","content":"hi"}]`; got != want {
		t.Errorf("conversations: %q", got)
	}
	got = text("/v1/messages", `{"system":"S","messages":[{"role":"user","content":[{"type":"text","text":"x"},{"type":"tool_use","id":"i","name":"n","input":{"a": 1}}]}]}`)
	if want := `Suserxin{"a": 1}`; got != want {
		t.Errorf("messages: %q", got)
	}
	tr, _ := e.Tokenize("/v1/completions", []byte(`{"prompt":[7,8,9]}`))
	if !reflect.DeepEqual(tr.Prompts, [][]uint32{{7, 8, 9}}) {
		t.Errorf("token ids: %+v", tr.Prompts)
	}
	tr, _ = e.Tokenize("/inference/v1/generate", []byte(`{"token_ids":[1,2],"cache_salt":"x"}`))
	if !reflect.DeepEqual(tr.Prompts, [][]uint32{{1, 2}}) || tr.CacheSalt != "x" {
		t.Errorf("generate: %+v", tr)
	}
	if _, err := e.Tokenize("/v1/completions", []byte(`{"prompt":[1,"a"]}`)); err == nil {
		t.Error("mixed prompt array accepted")
	}
	if _, err := e.Tokenize("", []byte(`{"input":"x"}`)); err == nil {
		t.Error("pathless unknown body accepted")
	}
}
