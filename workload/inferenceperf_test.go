package workload

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const iperfFixtures = "testdata/inference-perf"

func parseIPerfFixture(t *testing.T, label string) *InferencePerfConfig {
	t.Helper()
	path := filepath.Join(iperfFixtures, label+".yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseInferencePerf(data, path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestParseInferencePerfFixtures checks what is read of the six workload
// labels of ../shared/latency/README.md: the resolved configs of four
// recorded runs and two profile.yaml files with the legacy keys.
func TestParseInferencePerfFixtures(t *testing.T) {
	tests := []struct {
		label       string
		sys, q, out int
		stages      []InferencePerfStage // Line not compared
		model       string
		workers     int
		notes       int
		legacy      InferencePerfLegacy
	}{
		{"general", 100, 447, 248, []InferencePerfStage{{Rate: 8, Duration: 600}, {Rate: 20, Duration: 600}}, "meta-llama/Llama-2-70b-hf", 224, 0, InferencePerfLegacy{}},
		{"general-lite", 100, 447, 248, []InferencePerfStage{{Rate: 2.5, Duration: 600}, {Rate: 6, Duration: 600}}, "meta-llama/Llama-3.1-8B-Instruct", 0, 3,
			InferencePerfLegacy{NumUniqueSystemPrompts: 9, NumUsersPerSystemPrompt: 5, EnableMultiTurnChat: true, MultiTurnLine: 5}},
		{"codegen", 100, 466, 247, []InferencePerfStage{{Rate: 5, Duration: 600}, {Rate: 10, Duration: 600}}, "meta-llama/Llama-2-7b-hf", 224, 0, InferencePerfLegacy{}},
		{"roleplay", 150, 600, 251, []InferencePerfStage{{Rate: 6, Duration: 1200}}, "meta-llama/Llama-2-7b-hf", 224, 0, InferencePerfLegacy{}},
		{"reasoning", 100, 934, 1448, []InferencePerfStage{{Rate: 4, Duration: 1200}}, "meta-llama/Llama-2-7b-hf", 224, 0, InferencePerfLegacy{}},
		{"reasoning-lite", 100, 934, 1448, []InferencePerfStage{{Rate: 1, Duration: 1200}}, "meta-llama/Llama-2-7b-hf", 0, 3,
			InferencePerfLegacy{NumUniqueSystemPrompts: 23, NumUsersPerSystemPrompt: 1, EnableMultiTurnChat: true, MultiTurnLine: 17}},
	}
	for _, tc := range tests {
		t.Run(tc.label, func(t *testing.T) {
			c := parseIPerfFixture(t, tc.label)
			sp := c.Data.SharedPrefix
			if c.Data.Type != "shared_prefix" || sp.NumGroups != 10 || sp.NumPromptsPerGroup != 10 ||
				sp.SystemPromptLen != tc.sys || sp.QuestionLen != tc.q || sp.OutputLen != tc.out {
				t.Errorf("data %+v", c.Data)
			}
			if sp.Legacy != tc.legacy {
				t.Errorf("legacy %+v, want %+v", sp.Legacy, tc.legacy)
			}
			if c.API != (InferencePerfAPI{Type: "completion", Streaming: true}) {
				t.Errorf("api %+v", c.API)
			}
			if c.Server != (InferencePerfServer{ModelName: tc.model, IgnoreEOS: true}) {
				t.Errorf("server %+v", c.Server)
			}
			l := c.Load
			if l.Type != "constant" || l.Interval != 1 || l.NumWorkers != tc.workers || len(l.Stages) != len(tc.stages) {
				t.Fatalf("load %+v", l)
			}
			for i, st := range l.Stages {
				if st.Rate != tc.stages[i].Rate || st.Duration != tc.stages[i].Duration || st.Line == 0 {
					t.Errorf("stage %d: %+v, want %+v", i, st, tc.stages[i])
				}
			}
			if len(c.Notes) != tc.notes {
				t.Errorf("notes %q", c.Notes)
			}
		})
	}
}

func TestParseInferencePerfDefaults(t *testing.T) {
	c, err := ParseInferencePerf([]byte("data:\n  type: random\n  input_distribution: {total_count: 50}\n  output_distribution: {mean: 100, std_dev: 0, min: 100, max: 100, total_count: 50}\nload:\n  stages: [{rate: 1, duration: 50}]\n"), "d.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := InferencePerfDistribution{Type: "normal", Min: 10, Max: 1024, Mean: 512, StdDev: 200, TotalCount: 50}
	if c.Data.Input != want {
		t.Errorf("input %+v, want %+v", c.Data.Input, want)
	}
	if c.API.Type != "completion" || c.API.Streaming || !c.Server.IgnoreEOS || c.Server.ModelName != "" ||
		c.Load.Type != "constant" || c.Load.Interval != 1 || c.Load.Stages[0].Requests() != 50 {
		t.Errorf("defaults: %+v", c)
	}
}

// TestParseInferencePerfErrors: every bad config names file, line and field.
func TestParseInferencePerfErrors(t *testing.T) {
	const good = "data:\n  type: shared_prefix\n  shared_prefix:\n    num_groups: 2\nload:\n  type: constant\n  stages:\n  - rate: 5\n    duration: 10\n  - rate: 2\n    duration: 10\n"
	tests := []struct {
		name, yaml, want string
	}{
		{"zero rate", strings.Replace(good, "rate: 2", "rate: 0", 1),
			"profile.yaml:10: load.stages[1].rate: must be > 0 (and at most 1e+06 requests/s), got 0"},
		{"negative duration", strings.Replace(good, "duration: 10\n  - rate: 2", "duration: -3\n  - rate: 2", 1),
			"profile.yaml:9: load.stages[0].duration: must be in [1, 100000000], got -3"},
		{"fractional duration", strings.Replace(good, "duration: 10\n  - rate: 2", "duration: 1.5\n  - rate: 2", 1),
			"profile.yaml:9: load.stages[0].duration: expected a whole number, got 1.5"},
		{"typo in load", strings.Replace(good, "  type: constant", "  tpye: constant", 1),
			`profile.yaml:6: load.tpye: unknown key (inference-perf defines type, interval, stages, sweep, num_workers, worker_max_concurrency, worker_max_tcp_connections, circuit_breakers, request_timeout, trace, lora_traffic_split here)`},
		{"typo in shared_prefix", strings.Replace(good, "num_groups", "num_group", 1),
			"profile.yaml:4: data.shared_prefix.num_group: unknown key (inference-perf defines num_groups, num_prompts_per_group, system_prompt_len, question_len, output_len, num_unique_system_prompts, num_users_per_system_prompt, enable_multi_turn_chat here)"},
		{"unknown section", good + "lod:\n  type: poisson\n",
			"profile.yaml:12: lod: unknown section (eppsim reads api, data, load and server, and skips report, storage, metrics, tokenizer, circuit_breakers)"},
		{"sharegpt", strings.Replace(good, "type: shared_prefix", "type: shareGPT", 1),
			`profile.yaml:2: data.type: "shareGPT" reads a ShareGPT dataset (data.path); replay the file with --trace FILE --format sharegpt instead; eppsim generates shared_prefix, random and synthetic data`},
		{"mock", strings.Replace(good, "type: shared_prefix", "type: mock", 1),
			`profile.yaml:2: data.type: "mock" needs inference-perf's mock model server; eppsim generates shared_prefix, random and synthetic data`},
		{"no data", "load:\n  stages: [{rate: 1, duration: 1}]\n",
			`profile.yaml:1: data.type: missing: inference-perf's default "mock" data needs its mock server; eppsim generates shared_prefix, random and synthetic data`},
		{"concurrent load", strings.Replace(good, "type: constant", "type: concurrent", 1),
			`profile.yaml:6: load.type: "concurrent" (a fixed number of requests in flight) is not simulated; eppsim generates constant and poisson load`},
		{"no stages", "data:\n  type: shared_prefix\n  shared_prefix: {}\n",
			"profile.yaml:1: load.stages: missing: give at least one {rate, duration} stage"},
		{"empty stages", strings.Replace(good, "  stages:\n  - rate: 5\n    duration: 10\n  - rate: 2\n    duration: 10\n", "  stages: []\n", 1),
			"profile.yaml:7: load.stages: empty: give at least one {rate, duration} stage"},
		{"stage without duration", strings.Replace(good, "  - rate: 2\n    duration: 10\n", "  - rate: 2\n", 1),
			"profile.yaml:10: load.stages[1].duration: missing"},
		{"no request", strings.Replace(good, "rate: 2", "rate: 0.05", 1),
			"profile.yaml:10: load.stages[1]: rate 0.05 × duration 10 s gives no request (inference-perf sends int(rate × duration))"},
		{"string rate", strings.Replace(good, "rate: 5", "rate: fast", 1),
			`profile.yaml:8: load.stages[0].rate: expected a number, got "fast"`},
		{"duplicate key", strings.Replace(good, "    num_groups: 2\n", "    num_groups: 2\n    num_groups: 3\n", 1),
			"profile.yaml:5: data.shared_prefix.num_groups: duplicate key"},
		{"sweep", good + "  sweep: {type: linear}\n",
			"profile.yaml:12: load.sweep: stages derived from the measured saturation of a live server cannot be simulated; give load.stages"},
		{"api type", good + "api:\n  type: embeddings\n",
			`profile.yaml:13: api.type: "embeddings" is not simulated (eppsim sends completion and chat requests)`},
		{"ignore_eos string", good + "server:\n  ignore_eos: \"yes\"\n",
			`profile.yaml:13: server.ignore_eos: expected true or false, got "yes"`},
		{"shared_prefix missing", strings.Replace(good, "  shared_prefix:\n    num_groups: 2\n", "", 1),
			"profile.yaml:2: data.shared_prefix: missing: shared_prefix data needs its settings"},
		{"random without distribution", "data:\n  type: random\nload:\n  stages: [{rate: 1, duration: 5}]\n",
			"profile.yaml:2: data.input_distribution: missing: random data draws its lengths from it"},
		{"total_count too small", "data:\n  type: random\n  input_distribution: {total_count: 100}\n  output_distribution: {total_count: 1000}\nload:\n  stages: [{rate: 5, duration: 10}, {rate: 30, duration: 10}]\n",
			"profile.yaml:3: data.input_distribution.total_count: 100 lengths for the 300 requests of load.stages[1]: inference-perf takes the n-th length for the n-th request of a stage, so total_count must cover the largest stage"},
		{"mean outside range", "data:\n  type: synthetic\n  input_distribution: {min: 10, max: 20, mean: 30, total_count: 5}\n",
			"profile.yaml:3: data.input_distribution.mean: 30 is outside [min, max] = [10, 20]"},
		{"not a mapping", "- data\n- load\n", "profile.yaml:1: expected a mapping, got a list"},
		{"syntax", "data:\n  type: random\n   total_count: 3\n", "profile.yaml:3: invalid YAML: mapping values are not allowed in this context"},
		{"empty", "", "profile.yaml:1: empty file (want an inference-perf config with load.stages)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseInferencePerf([]byte(tc.yaml), "profile.yaml")
			if err == nil {
				t.Fatalf("no error; want %q", tc.want)
			}
			if !IsInputError(err) {
				t.Errorf("not an *InputError: %T", err)
			}
			if err.Error() != tc.want {
				t.Errorf("error\n got %q\nwant %q", err.Error(), tc.want)
			}
		})
	}
	if _, err := ParseInferencePerf([]byte(good), "profile.yaml"); err != nil {
		t.Fatalf("the good config: %v", err)
	}
}
