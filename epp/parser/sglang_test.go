package parser_test

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/epp"
	"github.com/eppsim/eppsim/epp/config"
	"github.com/eppsim/eppsim/epp/parser"
	"github.com/eppsim/eppsim/epp/plugins"
)

// TestSGLangParse: which parser gets a generate request and what
// sglanghttp-parser makes of it (upstream sglanghttp.go, vllmhttp.go and
// handlers/parsers.go: longest claimed suffix wins, so the list order
// never matters between the two generate parsers).
func TestSGLangParse(t *testing.T) {
	const (
		sgl  = parser.TypeSGLangHTTP
		vllm = parser.TypeVLLMHTTP
		sglB = `{"input_ids":[5,6,7],"extra_key":"tenant-a","sampling_params":{"max_new_tokens":12},"stream":true}`
		vlB  = `{"token_ids":[5,6,7],"cache_salt":"tenant-a"}`
	)
	defaults := []string{parser.TypeOpenAI, parser.TypeAnthropic, vllm, parser.TypePassthrough}
	full := &epp.GenerateRequest{TokenIDs: []uint32{5, 6, 7}, CacheSalt: "tenant-a", MaxOutputTokens: i64(12), Stream: true}
	tests := []struct {
		name    string
		parsers []string
		path    string
		body    string
		by      string // the rejecting parser; "" = accepted
		problem string // in the rejection's text
		want    *epp.GenerateRequest
	}{
		{"/generate", []string{sgl}, "/generate", sglB, "", "", full},
		{"trailing slash and query", []string{sgl}, "/generate/?a=b", sglB, "", "", full},
		{"no leading slash", []string{sgl}, "generate", sglB, "", "", full},
		{"negative cap ignored", []string{sgl}, "/generate", `{"input_ids":[1],"sampling_params":{"max_new_tokens":-5}}`, "", "",
			&epp.GenerateRequest{TokenIDs: []uint32{1}}},
		{"missing input_ids", []string{sgl}, "/generate", vlB, sgl, "input_ids: missing", nil},
		{"empty input_ids", []string{sgl}, "/generate", `{"input_ids":[]}`, sgl, "input_ids: empty", nil},
		{"invalid input_ids", []string{sgl}, "/generate", `{"input_ids":[1.5]}`, sgl, "input_ids: want an array", nil},
		{"non-string extra_key", []string{sgl}, "/generate", `{"input_ids":[1],"extra_key":7}`, sgl, "extra_key: want a string", nil},
		{"invalid JSON", []string{sgl}, "/generate", `{"input_ids":`, sgl, "sglang generate body", nil},
		// "generate" is a plain suffix of these paths: claimed, then refused.
		{"vLLM's path claimed and refused", []string{sgl}, "/inference/v1/generate", sglB, sgl, "unsupported", nil},
		{"/v1/generate claimed and refused", []string{sgl}, "/v1/generate", sglB, sgl, "unsupported", nil},
		{"no path, vLLM body: vLLM's path", []string{sgl}, "", vlB, sgl, "unsupported", nil},
		{"chat not claimed, no fallback: unchecked", []string{sgl}, "/v1/chat/completions", `not json`, "", "", nil},
		{"chat to the fallback", []string{sgl, parser.TypePassthrough}, "/v1/chat/completions", `not json`, "", "", nil},
		// Both generate parsers: the longer suffix wins in either order.
		{"both, /generate: sglang", []string{vllm, sgl}, "/generate", sglB, "", "", full},
		{"both, vLLM path: vllmhttp", []string{sgl, vllm}, "/inference/v1/generate", vlB, "", "", nil},
		{"both, vLLM path, SGLang body: 400", []string{sgl, vllm}, "/inference/v1/generate", sglB, vllm, "token_ids", nil},
		// The defaults do not list sglanghttp-parser.
		{"defaults, /generate: passthrough", defaults, "/generate", sglB, "", "", nil},
		{"defaults, vLLM path, SGLang body: 400", defaults, "/inference/v1/generate", sglB, vllm, "token_ids", nil},
		{"vllmhttp alone, /generate: unclaimed", []string{vllm}, "/generate", `{"token_ids":[1.5]}`, "", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &epp.Router{Parsers: parsers(t, tt.parsers...)}
			req := &epp.Request{ID: "1", Path: tt.path, Body: []byte(tt.body)}
			err := r.Parse(req)
			if tt.by == "" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				if !reflect.DeepEqual(req.Generate, tt.want) {
					t.Fatalf("Generate %+v, want %+v", req.Generate, tt.want)
				}
				return
			}
			var bad *epp.BadRequestError
			if !errors.As(err, &bad) || !errors.Is(err, epp.ErrBadRequest) {
				t.Fatalf("want a BadRequestError, got %v", err)
			}
			if bad.Parser != tt.by || !strings.Contains(err.Error(), tt.problem) {
				t.Fatalf("rejected by %s (%v), want %s with %q", bad.Parser, err, tt.by, tt.problem)
			}
			if req.Generate != nil {
				t.Fatalf("rejected request has Generate %+v", req.Generate)
			}
		})
	}
}

func i64(v int64) *int64 { return &v }

// loadRouter loads an EPP config with the built-in plugins.
func loadRouter(t *testing.T, file string, yaml string) *epp.Router {
	t.Helper()
	opt := config.Options{Registry: plugins.Builtin(), Seed: 7}
	var l *config.Loaded
	var err error
	if file != "" {
		l, err = config.LoadFile(file, opt)
	} else {
		l, err = config.Load([]byte(yaml), opt)
	}
	if err != nil {
		t.Fatal(err)
	}
	return l.Router()
}

// TestSGLangConfig: a config naming sglanghttp-parser loads with it (and
// only the parsers it lists), and one that references the type without
// defining it gets it auto-registered.
func TestSGLangConfig(t *testing.T) {
	names := func(r *epp.Router) []string {
		var out []string
		for _, p := range r.Parsers {
			out = append(out, p.Type())
		}
		return out
	}
	r := loadRouter(t, "testdata/sglang-epp-config.yaml", "")
	if got, want := names(r), []string{"sglanghttp-parser", "openai-parser", "passthrough-parser"}; !reflect.DeepEqual(got, want) {
		t.Errorf("parsers %v, want %v", got, want)
	}
	r = loadRouter(t, "", "apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\nrequestHandler:\n  parsers:\n  - pluginRef: sglanghttp-parser\n")
	if got, want := names(r), []string{"sglanghttp-parser"}; !reflect.DeepEqual(got, want) {
		t.Errorf("auto-registered parsers %v, want %v", got, want)
	}
	if got := names(loadRouter(t, "", "apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\n")); len(got) != 4 || got[2] != "vllmhttp-parser" {
		t.Errorf("default parsers %v: sglanghttp-parser is not a default", got)
	}
}

// TestSGLangFeedsProducers: an SGLang body on /generate gives the
// producers the same prompt tokens and salt as the same tokens sent to
// vLLM's /inference/v1/generate, so the approximate and precise prefix
// producers hash and match them alike.
func TestSGLangFeedsProducers(t *testing.T) {
	const cfg = `apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: sglanghttp-parser
- type: vllmhttp-parser
- type: token-producer
- type: approx-prefix-cache-producer
- type: precise-prefix-cache-producer
  parameters: {tokenProcessorConfig: {blockSizeTokens: 16}, speculativeIndexing: true}
- type: inflight-load-producer
- type: prefix-cache-scorer
- type: random-picker
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: prefix-cache-scorer
  - pluginRef: random-picker
requestHandler:
  parsers:
  - pluginRef: sglanghttp-parser
  - pluginRef: vllmhttp-parser
`
	ids := make([]string, 100) // 100 tokens: 6 full blocks of 16
	want := make([]uint32, 100)
	for i := range ids {
		want[i] = uint32(i%10) * 10
		ids[i] = strconv.Itoa(int(want[i]))
	}
	list := "[" + strings.Join(ids, ",") + "]"
	sglReq := func(id string) *epp.Request {
		return &epp.Request{ID: id, TargetModel: "m", Path: "/generate",
			Body: []byte(`{"input_ids":` + list + `,"extra_key":"tenant-a","sampling_params":{"max_new_tokens":4}}`)}
	}
	vllmReq := func(id string) *epp.Request {
		return &epp.Request{ID: id, TargetModel: "m", Path: "/inference/v1/generate",
			Body: []byte(`{"token_ids":` + list + `,"cache_salt":"tenant-a","sampling_params":{"max_tokens":4}}`)}
	}
	run := func(mk func(string) *epp.Request) (outcome, outcome, *epp.Request) {
		r := newRouter(func() *epp.Router { return loadRouter(t, "", cfg) })
		first := mk("1")
		o1 := schedule(r, 10, first)
		if o1.Err != "" {
			t.Fatal(o1.Err)
		}
		o2 := schedule(r, 20, mk("2"))
		return o1, o2, first
	}
	s1, s2, sreq := run(sglReq)
	v1, v2, vreq := run(vllmReq)
	wantTok := &epp.TokenizedRequest{Prompts: [][]uint32{want}, CacheSalt: "tenant-a"}
	for name, req := range map[string]*epp.Request{"sglang": sreq, "vllm": vreq} {
		if !reflect.DeepEqual(req.Tokenized, wantTok) {
			t.Errorf("%s: tokenized %+v, want %+v", name, req.Tokenized, wantTok)
		}
	}
	if !reflect.DeepEqual(s1.Produced, v1.Produced) || !reflect.DeepEqual(s2.Produced, v2.Produced) {
		t.Fatalf("producers differ:\nsglang %+v\n       %+v\nvllm   %+v\n       %+v", s1.Produced, s2.Produced, v1.Produced, v2.Produced)
	}
	// The second request hits the first one's blocks on the pod it went to:
	// 100 tokens are 6 full blocks of 16 for the precise producer; every
	// block of the approximate producer (64 tokens; the run shows 2)
	// matches.
	pick := s1.Result["default"][0]
	for prod, frag := range map[string]string{
		"approx-prefix-cache-producer":  "MatchBlocks:2 TotalBlocks:2 ",
		"precise-prefix-cache-producer": "MatchBlocks:6 TotalBlocks:6 ",
	} {
		m, _ := s2.Produced[pick+" PrefixCacheMatchInfoDataKey/"+prod].(string)
		if !strings.Contains(m, frag) {
			t.Errorf("second request on %s: %s match info %q, want %q", pick, prod, m, frag)
		}
	}
}
