package main

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/workload"
)

// sglangEPPConfig lists sglanghttp-parser before openai-parser and
// passthrough-parser.
var sglangEPPConfig = filepath.Join("..", "..", "epp", "parser", "testdata", "sglang-epp-config.yaml")

// apiRun is the part of a run's summary the request API may change: the
// cache ladder and the approximate producer's prediction.
type apiRun struct {
	Requests   struct{ Total, Completed, Rejected int }
	Cache      map[string]any
	Prediction map[string]struct {
		Requests       int     `json:"requests"`
		PredictedFrac  float64 `json:"mean_predicted_fraction"`
		PredictedToks  float64 `json:"predicted_tokens"`
		TrueTokens     float64 `json:"true_tokens"`
		UnderPredicted float64 `json:"underpredicted_rate"`
	}
}

func runAPI(t *testing.T, args ...string) apiRun {
	t.Helper()
	out, _, err := runCLI(t, append([]string{"run", "--max-requests", "40", "--replicas", "2", "--json"}, args...)...)
	if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	var doc struct{ Runs map[string]apiRun }
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Runs) != 1 {
		t.Fatalf("run %v: %d runs, %v", args, len(doc.Runs), err)
	}
	for _, r := range doc.Runs {
		return r
	}
	return apiRun{}
}

// TestRunAPISGLangGenerate: builtin:chat sent through SGLang's /generate
// with sglanghttp-parser listed is routed on the same tokens and salt as
// the same prompts sent pre-tokenized as completions: the same ladder and
// the same predicted hits; so is vLLM's /inference/v1/generate with the
// default parsers (vllmhttp-parser). With the default parser list /generate falls
// to passthrough-parser (upstream): every request is routed, none with a
// predicted hit.
func TestRunAPISGLangGenerate(t *testing.T) {
	comp := runAPI(t, "--api", "completions", "--epp-config", sglangEPPConfig)
	sg := runAPI(t, "--api", "sglang-generate", "--epp-config", sglangEPPConfig)
	vl := runAPI(t, "--api", "vllm-generate", "--epp-config", "default")
	const producer = "approx-prefix-cache-producer"
	if p := comp.Prediction[producer]; comp.Requests.Completed != 40 || p.Requests != 40 || !(p.PredictedToks > 0) {
		t.Fatalf("completions: %+v", comp)
	}
	compDefault := runAPI(t, "--api", "completions", "--epp-config", "default")
	for _, c := range []struct {
		name     string
		got, cmp apiRun
	}{{"sglang-generate", sg, comp}, {"vllm-generate", vl, compDefault}} {
		if c.got.Requests != c.cmp.Requests || !reflect.DeepEqual(c.got.Cache, c.cmp.Cache) || c.got.Prediction[producer] != c.cmp.Prediction[producer] {
			t.Errorf("%s routed unlike completions:\n%+v\n%+v", c.name, c.got, c.cmp)
		}
	}
	pass := runAPI(t, "--api", "sglang-generate")
	if p := pass.Prediction[producer]; pass.Requests.Completed != 40 || pass.Requests.Rejected != 0 || p.PredictedToks != 0 || p.PredictedFrac != 0 {
		t.Errorf("default parsers: %+v, want 40 completed and nothing predicted", pass)
	}
}

func TestAPIFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--max-requests", "1", "--api", "generate"}, `--api: unknown request API "generate" (want default, chat, completions, vllm-generate, sglang-generate)`},
		{[]string{"run", "--max-requests", "1", "--api", "chat", "--trace", filepath.Join(traceFixtures, "mooncake.jsonl")},
			"request API chat: mooncake prompts are tokens, not messages"},
		{[]string{"trace", "inspect", "--api", "vllm-generate", filepath.Join(traceFixtures, "openai.jsonl")},
			"request API vllm-generate: openai-jsonl traces name the API of each request themselves"},
	} {
		_, _, err := runCLI(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
	// trace convert writes what --api builds, and reads it back.
	out := filepath.Join(t.TempDir(), "g.jsonl")
	if _, _, err := runCLI(t, "trace", "convert", "--api", "sglang-generate", filepath.Join(traceFixtures, "mooncake.jsonl"), "--out", out); err != nil {
		t.Fatal(err)
	}
	orig, conv := traceRead(t, filepath.Join(traceFixtures, "mooncake.jsonl")), traceRead(t, out)
	if len(conv) != len(orig) || len(conv) == 0 {
		t.Fatalf("%d requests converted, want %d", len(conv), len(orig))
	}
	for i, r := range conv {
		if r.Endpoint != workload.EndpointSGLangGenerate || !reflect.DeepEqual(r.PromptTokens, orig[i].PromptTokens) {
			t.Errorf("request %d: %s, %d tokens; want /generate, %d", i, r.Endpoint, len(r.PromptTokens), len(orig[i].PromptTokens))
		}
	}
}
