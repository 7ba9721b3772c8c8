package workload

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/epp"
	"github.com/eppsim/eppsim/epp/parser"
	"github.com/eppsim/eppsim/epp/prefixhash"
)

func TestParseAPI(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want API
		ok   bool
	}{
		{"", APIDefault, true},
		{"default", APIDefault, true},
		{"chat", APIChat, true},
		{" Completions ", APICompletions, true},
		{"vllm-generate", APIVLLMGenerate, true},
		{"SGLANG-GENERATE", APISGLangGenerate, true},
		{"generate", "", false},
		{"messages", "", false},
	} {
		got, err := ParseAPI(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseAPI(%q) = %q, %v; want %q, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// TestAPIBody: the bodies written out by hand from the APIs' wire formats.
func TestAPIBody(t *testing.T) {
	ids := []uint32{128000, 7, 0}
	for _, tc := range []struct {
		api  API
		salt string
		want string
	}{
		{APICompletions, "", `{"model":"m","prompt":[128000,7,0],"max_tokens":5}`},
		{APICompletions, "s", `{"model":"m","prompt":[128000,7,0],"max_tokens":5,"cache_salt":"s"}`},
		{APIVLLMGenerate, "", `{"model":"m","token_ids":[128000,7,0],"sampling_params":{"max_tokens":5}}`},
		{APIVLLMGenerate, `t"1`, `{"model":"m","token_ids":[128000,7,0],"sampling_params":{"max_tokens":5},"cache_salt":"t\"1"}`},
		{APISGLangGenerate, "", `{"input_ids":[128000,7,0],"sampling_params":{"max_new_tokens":5},"stream":true}`},
		{APISGLangGenerate, "tenant-2", `{"input_ids":[128000,7,0],"sampling_params":{"max_new_tokens":5},"stream":true,"extra_key":"tenant-2"}`},
	} {
		if got := string(apiBody(tc.api, "m", ids, 5, tc.salt)); got != tc.want {
			t.Errorf("%s salt %q:\n got %s\nwant %s", tc.api, tc.salt, got, tc.want)
		}
	}
}

// eppTokens is what the EPP's parser of api and its token producer see of
// body: the prompt tokens and the cache salt.
func eppTokens(t *testing.T, api API, body []byte) ([]uint32, string) {
	t.Helper()
	req := &epp.Request{Path: api.Endpoint(), Body: body}
	switch api {
	case APISGLangGenerate:
		p, err := parser.New(parser.TypeSGLangHTTP, "p")
		if err != nil {
			t.Fatal(err)
		}
		if err := p.ParseRequest(req); err != nil {
			t.Fatalf("sglanghttp-parser: %v", err)
		}
		return req.Generate.TokenIDs, req.Generate.CacheSalt
	case APIVLLMGenerate:
		p, err := parser.New(parser.TypeVLLMHTTP, "p")
		if err != nil {
			t.Fatal(err)
		}
		if err := p.ParseRequest(req); err != nil {
			t.Fatalf("vllmhttp-parser: %v", err)
		}
	}
	est, err := prefixhash.NewEstimator(nil)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := est.Tokenize(req.Path, body)
	if err != nil {
		t.Fatalf("%s: tokenize: %v", api, err)
	}
	return tr.Prompts[0], tr.CacheSalt
}

// TestStreamAPI: every format without an API of its own, sent through a
// pre-tokenized API, keeps its requests but for the endpoint and the body,
// whose prompt the EPP reads as the request's PromptTokens and salt.
func TestStreamAPI(t *testing.T) {
	spec, err := PresetSpec("chat")
	if err != nil {
		t.Fatal(err)
	}
	spec.Sessions = 4
	spec.Tenants.CacheSalt = true
	sources := []struct {
		name string
		open func(API) (*Stream, error)
	}{
		{"mooncake", func(a API) (*Stream, error) { return Open("testdata/mooncake.jsonl", opts(Options{API: a})) }},
		{"azure", func(a API) (*Stream, error) { return Open("testdata/azure.csv", opts(Options{API: a})) }},
		{"sharegpt", func(a API) (*Stream, error) { return Open("testdata/sharegpt.json", opts(Options{API: a})) }},
		{"synth", func(a API) (*Stream, error) { return NewSynthesizer(spec, synthTestRNG(), opts(Options{API: a})) }},
	}
	for _, src := range sources {
		base := drainStream(t, src.name, func() (*Stream, error) { return src.open(APIDefault) })
		salted := false
		for _, api := range []API{APICompletions, APIVLLMGenerate, APISGLangGenerate} {
			got := drainStream(t, src.name, func() (*Stream, error) { return src.open(api) })
			if len(got) != len(base) || len(got) == 0 {
				t.Fatalf("%s %s: %d requests, want %d", src.name, api, len(got), len(base))
			}
			for i, r := range got {
				b := *base[i]
				if (src.name == "mooncake" || src.name == "azure") && api == APICompletions {
					// The format's own API: nothing is rebuilt.
					if r.Endpoint != b.Endpoint || !bytes.Equal(r.Body, b.Body) {
						t.Errorf("%s %s request %d rebuilt", src.name, api, i)
					}
					continue
				}
				if r.Endpoint != api.Endpoint() {
					t.Errorf("%s %s request %d: endpoint %q", src.name, api, i, r.Endpoint)
				}
				toks, salt := eppTokens(t, api, r.Body)
				if !slices.Equal(toks, b.PromptTokens) || salt != b.CacheSalt {
					t.Errorf("%s %s request %d: the EPP sees %d tokens, salt %q; want the request's %d, %q", src.name, api, i, len(toks), salt, len(b.PromptTokens), b.CacheSalt)
				}
				salted = salted || salt != ""
				b.Endpoint, b.Body = r.Endpoint, r.Body
				if !requestsEqual(r, &b) {
					t.Errorf("%s %s request %d differs beyond endpoint and body", src.name, api, i)
				}
			}
		}
		if src.name == "synth" && !salted {
			t.Errorf("synth: no salted request to check")
		}
	}
}

func synthTestRNG() *rand.Rand { return rand.New(rand.NewPCG(1, 0)) }

func requestsEqual(a, b *Request) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

func drainStream(t *testing.T, name string, open func() (*Stream, error)) []*Request {
	t.Helper()
	s, err := open()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	defer s.Close()
	reqs, err := Drain(s)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return reqs
}

func TestStreamAPIRefused(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		f          Format
		api        API
		want       string
	}{
		{"t.jsonl", `{"timestamp": 0, "input_length": 3, "output_length": 1, "hash_ids": [0]}`, FormatMooncake, APIChat,
			"t.jsonl: request API chat: mooncake prompts are tokens, not messages"},
		{"a.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n0,10,1\n", FormatAzure, APIChat,
			"a.csv: request API chat: azure-csv prompts are tokens"},
		{"o.jsonl", `{"model":"m","prompt":"x"}`, FormatOpenAI, APIVLLMGenerate,
			"o.jsonl: request API vllm-generate: openai-jsonl traces name the API of each request themselves"},
		{"o.jsonl", `{"model":"m","prompt":"x"}`, FormatOpenAI, APIChat, "openai-jsonl traces name the API"},
		{"o.jsonl", `{"model":"m","prompt":"x"}`, FormatOpenAI, "generate", `unknown request API "generate"`},
	} {
		_, err := NewSource(strings.NewReader(tc.data), tc.name, opts(Options{Format: tc.f, API: tc.api}))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: %v, want %q", tc.f, tc.api, err, tc.want)
		}
	}
	// The format's own API is no rebuild, and no error.
	if _, err := NewSource(strings.NewReader(`{"model":"m","prompt":"x"}`), "o.jsonl", opts(Options{Format: FormatShareGPT, API: APIChat})); err != nil {
		t.Errorf("sharegpt chat: %v", err)
	}
}

// TestOpenAIGenerate reads generate lines of both APIs.
func TestOpenAIGenerate(t *testing.T) {
	data := strings.Join([]string{
		`{"url":"/inference/v1/generate","body":{"model":"m1","token_ids":[1,2,3],"sampling_params":{"max_tokens":4},"cache_salt":"s","x_session_id":"a"}}`,
		`{"url":"/generate","body":{"input_ids":[1,2,3,9],"sampling_params":{"max_new_tokens":2},"stream":true,"extra_key":"k","cache_salt":"ignored"},"x_session_id":"a","x_arrival_ms":5}`,
		`{"url":"/inference/v1/generate","body":{"token_ids":[5],"x_output_tokens":7,"stream":false},"x_arrival_ms":6}`,
		`{"url":"/generate","body":{"input_ids":[6],"sampling_params":{"max_new_tokens":0}},"x_arrival_ms":7}`,
		`{"url":"/generate","body":{"input_ids":[6],"sampling_params":{"temperature":0}},"x_output_text":"hello world","x_arrival_ms":8}`,
	}, "\n")
	reqs := readAll(t, "g.jsonl", data, Options{})
	checkInvariants(t, reqs)
	want := []struct {
		endpoint, model, salt string
		prompt                []uint32
		out                   int
		session               string
		prev                  int64
	}{
		{EndpointVLLMGenerate, "m1", "s", []uint32{1, 2, 3}, 4, "a", -1},
		{EndpointSGLangGenerate, DefaultModel, "k", []uint32{1, 2, 3, 9}, 2, "a", 0},
		{EndpointVLLMGenerate, DefaultModel, "", []uint32{5}, 7, "", -1},
		{EndpointSGLangGenerate, DefaultModel, "", []uint32{6}, 1, "", -1}, // 0 new tokens: one, as every request
		{EndpointSGLangGenerate, DefaultModel, "", []uint32{6}, 2, "", -1}, // x_output_text: "hello", " world"
	}
	if len(reqs) != len(want) {
		t.Fatalf("%d requests, want %d", len(reqs), len(want))
	}
	for i, w := range want {
		r := reqs[i]
		if r.Endpoint != w.endpoint || r.Model != w.model || r.CacheSalt != w.salt || !slices.Equal(r.PromptTokens, w.prompt) ||
			r.PromptLen != len(w.prompt) || r.OutputTokens != w.out || r.Session != w.session || r.Prev != w.prev {
			t.Errorf("line %d: %s %s salt %q prompt %v out %d session %q prev %d; want %+v", i+1, r.Endpoint, r.Model, r.CacheSalt,
				r.PromptTokens, r.OutputTokens, r.Session, r.Prev, w)
		}
	}
	if want := `{"model":"m1","token_ids":[1,2,3],"sampling_params":{"max_tokens":4},"cache_salt":"s"}`; string(reqs[0].Body) != want {
		t.Errorf("line 1 body %s", reqs[0].Body)
	}
}

// TestOpenAIGenerateErrors: a generate body without its token ids, or with
// fields the server would reject, is refused naming file, line and field.
func TestOpenAIGenerateErrors(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{`{"url":"/inference/v1/generate","body":{"model":"m"}}`,
			"g.jsonl:1: body.token_ids: missing (the prompt of a vllm-generate body is its token ids)"},
		{`{"url":"/inference/v1/generate","body":{"input_ids":[1]}}`,
			"g.jsonl:1: body.token_ids: missing (the body has input_ids, which SGLang's generate (/generate) takes instead: check the url)"},
		{`{"url":"/generate","body":{"token_ids":[1]}}`,
			"g.jsonl:1: body.input_ids: missing (the body has token_ids, which vLLM's generate (/inference/v1/generate) takes instead"},
		{`{"url":"/generate","body":{"input_ids":null}}`, "g.jsonl:1: body.input_ids: missing"},
		{`{"url":"/generate","body":{"input_ids":[]}}`, "g.jsonl:1: body.input_ids: empty"},
		{`{"url":"/generate","body":{"input_ids":[[1,2]]}}`, "g.jsonl:1: body.input_ids[0]: expected a token id in [0, 128256)"},
		{`{"url":"/generate","body":{"input_ids":"text"}}`, "g.jsonl:1: body.input_ids: expected an array of token ids"},
		{`{"url":"/inference/v1/generate","body":{"token_ids":[1,-2]}}`, "g.jsonl:1: body.token_ids[1]: expected a token id"},
		{`{"url":"/inference/v1/generate","body":{"token_ids":[1.5]}}`, "g.jsonl:1: body.token_ids[0]: expected a token id"},
		{`{"url":"/inference/v1/generate","body":{"token_ids":[1],"sampling_params":{"max_tokens":0}}}`,
			"g.jsonl:1: body.sampling_params.max_tokens: 0 out of range [1, 2097152]"},
		{`{"url":"/generate","body":{"input_ids":[1],"sampling_params":{"max_new_tokens":-1}}}`,
			"g.jsonl:1: body.sampling_params.max_new_tokens: -1 out of range [0, 2097152]"},
		{`{"url":"/generate","body":{"input_ids":[1],"sampling_params":{"max_new_tokens":"4"}}}`,
			"g.jsonl:1: body.sampling_params.max_new_tokens: expected an integer"},
		{`{"url":"/generate","body":{"input_ids":[1],"sampling_params":[]}}`, "g.jsonl:1: body.sampling_params: expected an object"},
		{`{"url":"/generate","body":{"input_ids":[1],"extra_key":3}}`, "g.jsonl:1: body.extra_key: expected a string (the cache salt)"},
		{`{"url":"/generate","body":{"input_ids":[1],"stream":"yes"}}`, "g.jsonl:1: body.stream: expected a boolean"},
		{`{"url":"/inference/v1/generate","body":{"token_ids":[1],"cache_salt":1}}`, "g.jsonl:1: body.cache_salt"},
		{`{"url":"/generate","body":{"input_ids":[1],"prompt":"x"}}`, "g.jsonl:1: body.prompt: not a field of a sglang-generate body (url /generate)"},
		{`{"url":"/v1/generate","body":{"token_ids":[1]}}`, `g.jsonl:1: body.messages: missing (neither messages nor prompt given; a generate body needs the url /inference/v1/generate or /generate)`},
		{`{"url":"/v1/embeddings","body":{"model":"m","prompt":"x"}}`,
			`g.jsonl:1: url: unsupported endpoint "/v1/embeddings" (want /v1/chat/completions, /v1/completions, /inference/v1/generate or /generate)`},
		{`{"url":"/generate","body":{"input_ids":[1,2,3]}}`, "g.jsonl:1: body.input_ids: 3 tokens exceed the limit of 2"},
	} {
		err := firstError(t, "g.jsonl", tc.line, Options{MaxPromptTokens: 2})
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || !IsInputError(err) {
			t.Errorf("%s:\n got %v\nwant %s", tc.line, err, tc.want)
		}
	}
}

// TestOpenAIGenerateRoundTrip: traffic rebuilt for a generate API, written
// as OpenAI JSONL and read back, is the same traffic, chat answers
// included.
func TestOpenAIGenerateRoundTrip(t *testing.T) {
	spec, err := PresetSpec("chat")
	if err != nil {
		t.Fatal(err)
	}
	spec.Sessions = 3
	spec.Tenants.CacheSalt = true
	// (Not completions: the answer to a completions prompt is read as
	// plain text, without the chat answer's <|eot_id|>.)
	for _, api := range []API{APIVLLMGenerate, APISGLangGenerate} {
		reqs := drainStream(t, "synth", func() (*Stream, error) {
			return NewSynthesizer(spec, synthTestRNG(), opts(Options{API: api, Mode: ModeOpenLoop}))
		})
		var buf bytes.Buffer
		for _, r := range reqs {
			if err := WriteOpenAI(&buf, r); err != nil {
				t.Fatal(err)
			}
		}
		back := readAll(t, "rt.jsonl", buf.String(), Options{Model: spec.Model})
		if len(back) != len(reqs) {
			t.Fatalf("%s: %d requests back, want %d", api, len(back), len(reqs))
		}
		for i, r := range reqs {
			b := back[i]
			if b.Endpoint != r.Endpoint || !bytes.Equal(b.Body, r.Body) || !slices.Equal(b.PromptTokens, r.PromptTokens) ||
				b.CacheSalt != r.CacheSalt || b.OutputTokens != r.OutputTokens || !slices.Equal(b.OutputTokenIDs, r.OutputTokenIDs) || b.Model != r.Model || b.Session != r.Session || b.Arrival != r.Arrival {
				t.Errorf("%s request %d read back differs:\n%s %s\n%s %s", api, i, r.Endpoint, r.Body, b.Endpoint, b.Body)
			}
		}
	}
}

// FuzzOpenAIGenerate: generate lines are read or refused with an
// *InputError, never a panic; and an accepted line's body is one the
// EPP's parser of its API reads as the request's prompt tokens and salt.
func FuzzOpenAIGenerate(f *testing.F) {
	f.Add([]byte(`{"url":"/inference/v1/generate","body":{"model":"m","token_ids":[1,2],"sampling_params":{"max_tokens":3},"cache_salt":"s"}}`), false)
	f.Add([]byte(`{"url":"/generate","body":{"input_ids":[1,2],"sampling_params":{"max_new_tokens":3},"stream":true,"extra_key":"k"}}`), true)
	f.Add([]byte(`{"url":"/generate","body":{"input_ids":[1],"extra_key":null,"sampling_params":null,"x_session_id":2}}`+"\n"+`{"url":"/generate","body":{"input_ids":[4e0]}}`), false)
	f.Fuzz(func(t *testing.T, data []byte, skip bool) {
		fuzzRead(t, FormatOpenAI, data, skip)
		reqs, _ := fuzzReadOnce(t, FormatOpenAI, data, skip, 0)
		for _, r := range reqs {
			api := generateAPI(r.Endpoint)
			if api == APIDefault {
				continue
			}
			toks, salt := eppTokens(t, api, r.Body)
			if !slices.Equal(toks, r.PromptTokens) || salt != r.CacheSalt {
				t.Fatalf("%s body %s: the EPP sees %v salt %q; the request has %v salt %q", api, r.Body, toks, salt, r.PromptTokens, r.CacheSalt)
			}
		}
	})
}
