package parser_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/epp"
	"github.com/eppsim/eppsim/epp/config"
	"github.com/eppsim/eppsim/epp/parser"
	"github.com/eppsim/eppsim/epp/picker"
	"github.com/eppsim/eppsim/epp/plugins"
	"github.com/eppsim/eppsim/epp/prefixhash"
)

func parsers(t *testing.T, types ...string) []epp.RequestParser {
	t.Helper()
	var out []epp.RequestParser
	for _, typ := range types {
		p, err := parser.New(typ, typ)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// TestRouterParse checks which configured parser handles a request (spec
// §2.1 step 0; upstream's path claims) and what it rejects.
func TestRouterParse(t *testing.T) {
	defaults := []string{parser.TypeOpenAI, parser.TypeAnthropic, parser.TypeVLLMHTTP, parser.TypePassthrough}
	const (
		badChat     = `{"messages":[{"role":"user","content":"x","tool_calls":"x"}]}`
		badMessages = `{"messages":[{"role":"user","content":5}]}`
		badGenerate = `{"token_ids":[1.5]}`
	)
	tests := []struct {
		name    string
		parsers []string
		path    string
		body    string
		by      string // the rejecting parser; "" = accepted
		field   string
	}{
		{"chat: openai", defaults, "/v1/chat/completions", badChat, "openai-parser", "messages[0].tool_calls"},
		{"completions: openai", defaults, "/v1/completions", `{"prompt":{}}`, "openai-parser", "prompt"},
		{"responses: openai", defaults, "/v1/responses", `{"input":"x","cache_salt":1}`, "openai-parser", "cache_salt"},
		{"conversations: openai", defaults, "/v1/conversations", `{"items":5}`, "openai-parser", "items"},
		{"embeddings: openai", defaults, "/v1/embeddings", `{"input":null}`, "openai-parser", "input"},
		{"messages: anthropic", defaults, "/v1/messages", badMessages, "anthropic-parser", "messages[0].content"},
		{"generate: vllmhttp", defaults, "/inference/v1/generate", badGenerate, "vllmhttp-parser", "token_ids[0]"},
		{"unclaimed path: passthrough", defaults, "/v1/models", `not json`, "", ""},
		{"no path: body decides", defaults, "", badChat, "openai-parser", "messages[0].tool_calls"},
		{"no path, no API in the body: completions", defaults, "", `{"cache_salt":1}`, "openai-parser", "cache_salt"},
		{"no path, invalid JSON", defaults, "", `{"messages":`, "openai-parser", ""},
		{"query string and trailing slash", defaults, "/v1/chat/completions/?x=1", badChat, "openai-parser", "messages[0].tool_calls"},
		{"valid chat", defaults, "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"stream":"yes"}`, "", ""},
		{"passthrough only", []string{parser.TypePassthrough}, "/v1/chat/completions", badChat, "", ""},
		{"claim beats an earlier fallback", []string{parser.TypePassthrough, parser.TypeOpenAI}, "/v1/chat/completions", badChat,
			"openai-parser", "messages[0].tool_calls"},
		{"vllmhttp delegates openai paths", []string{parser.TypeVLLMHTTP}, "/v1/chat/completions", badChat, "vllmhttp-parser",
			"messages[0].tool_calls"},
		{"anthropic alone does not claim chat", []string{parser.TypeAnthropic}, "/v1/chat/completions", badChat, "", ""},
		{"openai does not claim messages", []string{parser.TypeOpenAI, parser.TypePassthrough}, "/v1/messages", badMessages, "", ""},
		{"openai does not claim generate", []string{parser.TypeOpenAI}, "/inference/v1/generate", badGenerate, "", ""},
		{"no parsers", nil, "/v1/chat/completions", badChat, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &epp.Router{Parsers: parsers(t, tt.parsers...)}
			err := r.Parse(&epp.Request{ID: "1", Path: tt.path, Body: []byte(tt.body)})
			if tt.by == "" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				return
			}
			var bad *epp.BadRequestError
			var pe *prefixhash.ParseError
			if !errors.As(err, &bad) || !errors.Is(err, epp.ErrBadRequest) || !errors.As(err, &pe) {
				t.Fatalf("want a BadRequestError wrapping a ParseError, got %v", err)
			}
			if bad.Parser != tt.by || pe.Field != tt.field {
				t.Fatalf("rejected by %s at %q (%v), want %s at %q", bad.Parser, pe.Field, err, tt.by, tt.field)
			}
		})
	}
}

func TestFactory(t *testing.T) {
	r := epp.NewRegistry()
	parser.Register(r)
	f, _ := r.Lookup(parser.TypeOpenAI)
	for _, params := range []string{"", "null", `{}`, `{"anything":1}`} {
		if _, err := f("p", []byte(params), nil); err != nil {
			t.Errorf("params %q: %v", params, err)
		}
	}
	if _, err := f("p", []byte(`[1]`), nil); err == nil || !strings.Contains(err.Error(), "want an object") {
		t.Errorf("array params: %v", err)
	}
	if _, err := parser.New("vllmgrpc-parser", "x"); err == nil {
		t.Error("New accepted a type it does not implement")
	}
}

// A long prefix, so that indexing it would change prefix scores.
var (
	textA = strings.Repeat("The quick brown fox jumps over the lazy dog. ", 30)
	textB = strings.Repeat("Pack my box with five dozen liquor jugs. ", 30)
)

func chatBody(text, extra string) string {
	return `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":` +
		fmt.Sprintf("%q", text) + `}]` + extra + `}`
}

// badBodies are bodies the EPP rejects (spec §2.1 step 0), with the
// field their error names. Each carries textB, so that indexing it would
// show in later requests' scores.
var badBodies = []struct {
	name, path, body, field, problem string
}{
	{"tool_calls string", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":` + fmt.Sprintf("%q", textB) +
		`},{"role":"assistant","content":"","tool_calls":"x"}]}`, "messages[1].tool_calls", "got a string, want an array"},
	{"image_url string", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":` +
		fmt.Sprintf("%q", textB) + `},{"type":"image_url","image_url":"x"}]}]}`, "messages[0].content[1].image_url", "got a string, want an object"},
	{"add_generation_prompt string", "/v1/chat/completions", chatBody(textB, `,"add_generation_prompt":"yes"`), "add_generation_prompt", "want a boolean"},
	{"documents string", "/v1/chat/completions", chatBody(textB, `,"documents":"d"`), "documents", "want an array"},
	{"chat_template_kwargs number", "/v1/chat/completions", chatBody(textB, `,"chat_template_kwargs":5`), "chat_template_kwargs", "want an object"},
	{"1E400", "/v1/chat/completions", chatBody(textB, `,"temperature":1E400`), "temperature", "outside the float64 range"},
	{"video_url number", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":` +
		fmt.Sprintf("%q", textB) + `},{"type":"video_url","video_url":3}]}]}`, "messages[0].content[1].video_url", "got a number, want an object"},
	{"nested text number", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":` + fmt.Sprintf("%q", textB) +
		`},{"role":"assistant","content":"ok"},{"role":"user","content":[{"type":"text","text":7}]}]}`, "messages[2].content[0].text", "want a string"},
	{"chat_template number", "/v1/chat/completions", chatBody(textB, `,"chat_template":7`), "chat_template", "want a string"},
	{"prompt mixed", "/v1/completions", `{"model":"m","prompt":[` + fmt.Sprintf("%q", textB) + `,5]}`, "prompt[1]", "mixed types"},
	{"completions 1E400 nested", "/v1/completions", `{"model":"m","prompt":` + fmt.Sprintf("%q", textB) + `,"logit_bias":{"1":-1e999}}`,
		"logit_bias.1", "outside the float64 range"},
	{"truncated JSON", "/v1/chat/completions", chatBody(textB, "")[:200], "", "invalid JSON"},
}

// stateConfigs are EPP configurations whose plugins keep state across
// requests: every shipped configuration, the baselines, and one with every
// stateful producer and scorer.
func stateConfigs(t *testing.T) map[string]func() *epp.Router {
	t.Helper()
	out := map[string]func() *epp.Router{}
	load := func(name string, data []byte, file string) {
		out[name] = func() *epp.Router {
			var l *config.Loaded
			var err error
			if file != "" {
				l, err = config.LoadFile(file, config.Options{Registry: plugins.Builtin(), Seed: 7})
			} else {
				l, err = config.Load(data, config.Options{Registry: plugins.Builtin(), Seed: 7})
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			r := l.Router()
			if name == "round-robin" {
				r.Profiles[0].Picker = picker.NewRoundRobin("round-robin")
			}
			return r
		}
	}
	files, _ := filepath.Glob("../../testdata/shared/epp-configs/*.yaml")
	for _, f := range files {
		if filepath.Base(f) == "epp-mm-embeddings-cache-config.yaml" {
			continue // fails to load, as upstream (flow-control.md §14.3)
		}
		load(filepath.Base(f), nil, f)
	}
	const head = "apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\n"
	load("random", []byte(head+"plugins:\n- type: random-picker\nschedulingProfiles:\n- name: default\n  plugins:\n  - pluginRef: random-picker\n"), "")
	load("least-queue", []byte(head+"plugins:\n- type: queue-scorer\nschedulingProfiles:\n- name: default\n  plugins:\n  - pluginRef: queue-scorer\n"), "")
	load("round-robin", []byte(head+"plugins:\n- type: max-score-picker\nschedulingProfiles:\n- name: default\n  plugins:\n  - pluginRef: max-score-picker\n"), "")
	load("default", []byte(head), "")
	load("stateful", []byte(head+`plugins:
- type: token-producer
- type: approx-prefix-cache-producer
- type: precise-prefix-cache-producer
  parameters: {tokenProcessorConfig: {blockSizeTokens: 16}, speculativeIndexing: true}
- type: inflight-load-producer
- type: prefix-cache-scorer
- name: precise-scorer
  type: prefix-cache-scorer
  parameters: {prefixMatchInfoProducerName: precise-prefix-cache-producer}
- type: no-hit-lru-scorer
- type: session-affinity-scorer
- type: token-load-scorer
- type: active-request-scorer
- type: random-picker
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: prefix-cache-scorer
  - pluginRef: precise-scorer
  - pluginRef: no-hit-lru-scorer
  - pluginRef: session-affinity-scorer
  - pluginRef: token-load-scorer
  - pluginRef: active-request-scorer
  - pluginRef: random-picker
`), "")
	return out
}

// outcome is everything a request's scheduling shows of the EPP's state:
// the error, the picks, every scorer's raw scores and every produced
// attribute of every candidate.
type outcome struct {
	Err      string
	Result   map[string][]string
	Traces   map[string]*epp.ProfileTrace
	Produced map[string]any
}

func schedule(r *epp.Router, now int64, req *epp.Request) outcome {
	o, _ := scheduleErr(r, now, req)
	return o
}

func scheduleErr(r *epp.Router, now int64, req *epp.Request) (outcome, error) {
	cands := r.Candidates()
	res, err := r.ScheduleOn(&epp.Cycle{Now: now}, req, cands)
	o := outcome{Result: map[string][]string{}, Traces: map[string]*epp.ProfileTrace{}, Produced: map[string]any{}}
	if err != nil {
		o.Err = err.Error()
	}
	if res != nil {
		for name, pr := range res.Profiles {
			if pr != nil {
				o.Result[name] = epp.Names(pr.Targets)
				o.Traces[name] = pr.Trace
			}
		}
	}
	for _, p := range r.Producers {
		for _, k := range p.Produces() {
			for _, e := range cands {
				if v, ok := e.Get(k); ok {
					o.Produced[e.Name+" "+k.String()] = fmt.Sprintf("%+v", v)
				}
			}
		}
	}
	return o, err
}

func newRouter(mk func() *epp.Router) *epp.Router {
	r := mk()
	r.Record = true
	for i, n := range []string{"default/pod-a", "default/pod-b", "default/pod-c"} {
		r.AddEndpoint(epp.EndpointInfo{Name: n, Address: fmt.Sprintf("10.0.0.%d:8000", i+1),
			Labels: map[string]string{"llm-d.ai/role": "decode"}})
		_ = r.UpdateMetrics(n, epp.Metrics{WaitingQueueSize: i, KVCacheUsagePercent: 0.1 * float64(i), CacheBlockSize: 16,
			CacheNumBlocks: 1000, UpdateTime: 1})
	}
	return r
}

func request(id, path, body, session string) *epp.Request {
	return &epp.Request{ID: id, TargetModel: "m", Path: path, Body: []byte(body),
		Headers:            map[string]string{"x-session-id": session},
		ServerPromptTokens: prefixhash.PackString(body)}
}

// TestRejectedBodyChangesNothing: a body the parser rejects fails with its
// parse error and leaves every index and counter as it was (spec §2.1 step
// 0): requests scheduled after it see exactly what they see when it was
// never sent, in every configuration.
func TestRejectedBodyChangesNothing(t *testing.T) {
	probes := []*epp.Request{
		request("p1", "/v1/chat/completions", chatBody(textB, ""), "s-bad"),
		request("p2", "/v1/completions", `{"model":"m","prompt":`+fmt.Sprintf("%q", textB)+`}`, "s-bad"),
		request("p3", "/v1/chat/completions", chatBody(textA, ""), "s-a"),
	}
	for cfgName, mk := range stateConfigs(t) {
		for _, bad := range badBodies {
			t.Run(cfgName+"/"+bad.name, func(t *testing.T) {
				run := func(withBad bool) []outcome {
					r := newRouter(mk)
					var out []outcome
					// Earlier traffic, left in flight.
					out = append(out, schedule(r, 10, request("w1", "/v1/chat/completions", chatBody(textA, ""), "s-a")))
					if withBad {
						req := request("bad", bad.path, bad.body, "s-bad")
						o, err := scheduleErr(r, 20, req)
						var be *epp.BadRequestError
						var pe *prefixhash.ParseError
						if !errors.As(err, &be) || !errors.As(err, &pe) || pe.Field != bad.field || !strings.Contains(pe.Problem, bad.problem) ||
							len(o.Result) != 0 || len(o.Produced) != 0 || req.Tokenized != nil {
							t.Fatalf("bad body: outcome %+v, error %v; want field %q, problem %q", o, err, bad.field, bad.problem)
						}
					}
					for i, p := range probes {
						cp := *p
						out = append(out, schedule(r, int64(30+i), &cp))
					}
					return out
				}
				with, without := run(true), run(false)
				if !reflect.DeepEqual(with, without) {
					for i := range with {
						if !reflect.DeepEqual(with[i], without[i]) {
							t.Fatalf("request %d differs after a rejected body:\nwith    %+v\nwithout %+v", i, with[i], without[i])
						}
					}
				}
			})
		}
	}
}

// TestAcceptedBodies: bodies upstream decodes must pass — unknown keys of
// any type, null where a field allows it, integers where floats go.
func TestAcceptedBodies(t *testing.T) {
	r := newRouter(stateConfigs(t)["stateful"])
	for i, body := range []string{
		chatBody(textA, `,"stream":"yes","max_tokens":"10","temperature":1,"top_p":0,"n":1e300,"response_format":{"type":5}`),
		chatBody(textA, `,"tools":null,"documents":null,"chat_template":null,"add_generation_prompt":null,"chat_template_kwargs":null,"cache_salt":null`),
		`{"model":"m","messages":[{"role":"user","content":null,"tool_calls":null,"name":3},{"role":"assistant","content":[{"type":"text","text":"a","cache_control":{}}]}]}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"audio_url","audio_url":"clip.wav"}]}]}`,
		`{"model":"m","prompt":[1,2.0,3e0],"echo":"yes"}`,
	} {
		path := "/v1/chat/completions"
		if strings.Contains(body, `"prompt"`) {
			path = "/v1/completions"
		}
		if o := schedule(r, int64(i), request(fmt.Sprint(i), path, body, "")); o.Err != "" {
			t.Errorf("body %d rejected: %s", i, o.Err)
		}
	}
}
