package sim

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/epp/config"
	"github.com/eppsim/eppsim/epp/plugins"
	"github.com/eppsim/eppsim/workload"
)

// TestRunSGLangGenerateSalt: a prompt sent to SGLang's /generate through
// sglanghttp-parser is what the approximate producer hashes, extra_key its
// salt: the predicted hits on repeated prompts are those of the same
// tokens and salts sent as pre-tokenized completions. With the default
// parsers /generate passes through and nothing is predicted.
func TestRunSGLangGenerateSalt(t *testing.T) {
	sgConfig, err := os.ReadFile("../epp/parser/testdata/sglang-epp-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	prompt := tokens(0, 1024)
	ids := strings.Trim(strings.Join(strings.Fields(fmt.Sprint(prompt)), ","), "[]")
	salts := []string{"s1", "s1", "s2", ""}
	traffic := func(api workload.API) []*workload.Request {
		var reqs []*workload.Request
		for i, salt := range salts {
			r := req(int64(i), int64(i)*10*second, prompt, 4)
			r.CacheSalt, r.Endpoint = salt, api.Endpoint()
			switch {
			case api == workload.APISGLangGenerate && salt != "":
				r.Body = fmt.Appendf(nil, `{"input_ids":[%s],"sampling_params":{"max_new_tokens":4},"stream":true,"extra_key":%q}`, ids, salt)
			case api == workload.APISGLangGenerate:
				r.Body = fmt.Appendf(nil, `{"input_ids":[%s],"sampling_params":{"max_new_tokens":4},"stream":true}`, ids)
			case salt != "":
				r.Body = fmt.Appendf(nil, `{"model":"m","prompt":[%s],"max_tokens":4,"cache_salt":%q}`, ids, salt)
			default:
				r.Body = fmt.Appendf(nil, `{"model":"m","prompt":[%s],"max_tokens":4}`, ids)
			}
			reqs = append(reqs, r)
		}
		return reqs
	}
	run := func(cfg []byte, api workload.API) []Record {
		t.Helper()
		loaded, err := config.Load(cfg, config.Options{Registry: plugins.Builtin(), Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		var recs []Record
		if _, err := Run(&sliceSource{reqs: traffic(api)}, loaded.Router(), testFleet(t, 1, 2000),
			Options{KVEventLag: 5_000_000, OnRecord: func(r *Record) { recs = append(recs, *r) }}); err != nil {
			t.Fatal(err)
		}
		if len(recs) != len(salts) {
			t.Fatalf("%s: %d records", api, len(recs))
		}
		return recs
	}
	sg, comp := run(sgConfig, workload.APISGLangGenerate), run(sgConfig, workload.APICompletions)
	// Request 1 repeats request 0's prompt and salt: the producer indexed
	// all 16 of its 64-token blocks. Other salts (or none) share nothing.
	want := []float64{0, 1, 0, 0}
	for i, w := range want {
		if !sg[i].HasPredicted || sg[i].Predicted != w || comp[i].Predicted != w || sg[i].Outcome != Completed {
			t.Errorf("request %d: predicted %v (generate), %v (completions); want %v", i, sg[i].Predicted, comp[i].Predicted, w)
		}
	}
	// The same scorers with no parsers listed: the default list.
	def := run([]byte(`apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: prefix-cache-scorer
- type: queue-scorer
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: prefix-cache-scorer
    weight: 3
  - pluginRef: queue-scorer
    weight: 1
`), workload.APISGLangGenerate)
	for i, r := range def {
		if r.Outcome != Completed || r.Predicted != 0 {
			t.Errorf("default parsers, request %d: %v, predicted %v; want completed, 0", i, r.Outcome, r.Predicted)
		}
	}
}

func TestUsageReported(t *testing.T) {
	for _, tc := range []struct {
		path, body string
		want       bool
	}{
		{workload.EndpointCompletions, `{"prompt":"x"}`, true},
		{workload.EndpointCompletions, `{"prompt":"x","stream":true}`, false},
		{workload.EndpointChat, `{"stream":true,"stream_options":{"include_usage":true}}`, true},
		{workload.EndpointVLLMGenerate, `{"token_ids":[1],"stream":true}`, false},
		// SGLang's stream ends with a chunk whose meta_info has the usage.
		{workload.EndpointSGLangGenerate, `{"input_ids":[1],"stream":true}`, true},
	} {
		if got := usageReported(tc.path, []byte(tc.body)); got != tc.want {
			t.Errorf("%s %s: %v, want %v", tc.path, tc.body, got, tc.want)
		}
	}
}
