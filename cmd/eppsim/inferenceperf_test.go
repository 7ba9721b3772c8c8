package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/workload"
)

const iperfFixtures = "../../workload/testdata/inference-perf"

func TestTraceSynthInferencePerf(t *testing.T) {
	dir := t.TempDir()
	codegen := filepath.Join(iperfFixtures, "codegen.yaml")
	a, b := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	for _, out := range []string{a, b} {
		_, stderr, err := runCLI(t, "trace", "synth", "--from", "inference-perf", codegen, "--seed", "3", "--out", out)
		if err != nil {
			t.Fatal(err)
		}
		if want := "eppsim: wrote 9000 requests in 2 stages to " + out + "\n"; stderr != want {
			t.Errorf("stderr %q, want %q", stderr, want)
		}
	}
	da, _ := os.ReadFile(a)
	db, _ := os.ReadFile(b)
	if len(da) == 0 || !bytes.Equal(da, db) {
		t.Fatal("the same seed wrote different files")
	}
	lines := strings.Split(strings.TrimSuffix(string(da), "\n"), "\n")
	if len(lines) != 9000 || strings.Contains(lines[2999], `"x_stage"`) || !strings.HasSuffix(lines[3000], `"x_output_tokens":247,"x_stage":1}`) {
		t.Fatalf("%d lines; line 3000: %.80s…%s", len(lines), lines[2999], lines[2999][len(lines[2999])-60:])
	}
	// The file reads back as the same traffic.
	out, _, err := runCLI(t, "trace", "inspect", "--json", a)
	if err != nil {
		t.Fatal(err)
	}
	var s workload.Summary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatal(err)
	}
	if s.Format != "openai-jsonl" || s.Requests != 9000 || s.Input.Max != 593 || s.Output.Max != 247 {
		t.Errorf("read back: %+v", s)
	}
	direct, _, err := runCLI(t, "trace", "inspect", "--json", "--seed", "3", workload.InferencePerfPrefix+codegen)
	if err != nil {
		t.Fatal(err)
	}
	var d workload.Summary
	if err := json.Unmarshal([]byte(direct), &d); err != nil {
		t.Fatal(err)
	}
	if d.HitTokens != s.HitTokens || d.PromptTokens != s.PromptTokens || d.DurationSec != s.DurationSec {
		t.Errorf("inspect of the config %+v differs from inspect of the file %+v", d, s)
	}

	// stdout by default; the legacy keys are noted on stderr.
	stdout, stderr, err := runCLI(t, "trace", "synth", "--from", "inference-perf", filepath.Join(iperfFixtures, "reasoning-lite.yaml"),
		"--iperf-token-inflation", "0", "--model", "m")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(stdout, "\n"); n != 1200 || !strings.HasPrefix(stdout, `{"custom_id":"req-0","method":"POST","url":"/v1/completions","body":{"model":"m","prompt":" `) {
		t.Errorf("stdout: %d lines, %.120s", n, stdout)
	}
	if strings.Count(stderr, "eppsim: note: ") != 3 || !strings.Contains(stderr, "reasoning-lite.yaml:15: data.shared_prefix.num_unique_system_prompts: 23 is a legacy key") {
		t.Errorf("stderr %q", stderr)
	}
}

func TestTraceSynthInferencePerfBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "profile.yaml")
	if err := os.WriteFile(bad, []byte("data: {type: shared_prefix, shared_prefix: {}}\nload:\n  stages:\n  - {rate: 5, duration: 60, ramp: 2}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	codegen := filepath.Join(iperfFixtures, "codegen.yaml")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--from", "inference-perf", bad}, bad + ":4: load.stages[0].ramp: unknown key (inference-perf defines rate, duration here)"},
		{[]string{"--from", "vidur", codegen}, `--from "vidur": only inference-perf is supported`},
		{[]string{"--from", "inference-perf"}, "--from inference-perf needs the config file"},
		{[]string{"--from", "inference-perf", codegen, "--preset", "chat"}, "--preset does not apply to --from inference-perf"},
		{[]string{"--from", "inference-perf", codegen, "--iperf-token-inflation", "-1"}, "--iperf-token-inflation -1: must be in [0, 1]"},
		{[]string{"--from", "inference-perf", filepath.Join(dir, "missing.yaml")}, "no such file"},
		{[]string{codegen, "--out", "-"}, "unexpected argument"},
	} {
		_, _, err := runCLI(t, append([]string{"trace", "synth"}, tc.args...)...)
		if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v (exit %d), want exit 2 with %q", tc.args, err, exitCode(err), tc.want)
		}
	}
}

func TestRunInferencePerf(t *testing.T) {
	trace := workload.InferencePerfPrefix + filepath.Join(iperfFixtures, "general.yaml")
	out, _, err := runCLI(t, "run", "--trace", trace, "--max-requests", "60", "--replicas", "2", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Trace string
		Runs  map[string]struct {
			Requests struct{ Total, Completed int }
			Cache    struct {
				True float64 `json:"true_hit_ratio"`
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("bad JSON: %v\n%s", err, out)
	}
	r := doc.Runs["default"]
	// 60 requests of a 100-prompt pool over 10 system prompts: most of
	// every prompt after a group's first is a cache hit.
	if doc.Trace != trace || r.Requests.Total != 60 || r.Requests.Completed != 60 || r.Cache.True < 0.05 {
		t.Errorf("run: %+v", doc)
	}
	for _, args := range [][]string{
		{"run", "--trace", trace, "--iperf-token-inflation", "1.5"},
		{"run", "--trace", workload.InferencePerfPrefix + "/nonexistent/profile.yaml"},
	} {
		if _, _, err := runCLI(t, args...); err == nil || exitCode(err) != 2 {
			t.Errorf("%v: err %v (exit %d), want exit 2", args, err, exitCode(err))
		}
	}
}

// TestRunInferencePerfStages: a ladder of two stages prints a per-stage
// table per config (one row per stage, its rate and requests as the config
// says) and --out writes the stage plots; traffic of one stage prints none.
func TestRunInferencePerfStages(t *testing.T) {
	dir := t.TempDir()
	profile := filepath.Join(dir, "ladder.yaml")
	ladder := `load:
  type: constant
  stages: [{rate: 2, duration: 10}, {rate: 6, duration: 5}]
data:
  type: shared_prefix
  shared_prefix: {num_groups: 2, num_prompts_per_group: 2, system_prompt_len: 500, question_len: 50, output_len: 20}
`
	if err := os.WriteFile(profile, []byte(ladder), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	stdout, _, err := runCLI(t, "run", "--trace", workload.InferencePerfPrefix+profile, "--replicas", "2",
		"--epp-config", "default", "--epp-config", "round-robin", "--out", out)
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(stdout, "\nPer load stage, over the requests that arrived in it")
	if !ok {
		t.Fatalf("no per-stage table:\n%s", stdout)
	}
	table, _, _ = strings.Cut(table, "\nWhat this run shows")
	for _, config := range []string{"\ndefault\n", "\nround-robin\n"} {
		_, rest, ok := strings.Cut(table, config)
		if !ok {
			t.Fatalf("no table for %q:\n%s", config, table)
		}
		lines := strings.Split(strings.TrimSpace(rest), "\n")
		if len(lines) < 3 || !strings.HasPrefix(strings.TrimSpace(lines[0]), "stage  rate (req/s)  requests  success") {
			t.Fatalf("%s table:\n%s", config, rest)
		}
		for k, want := range [][]string{{"0", "2", "20", "100.00%"}, {"1", "6", "30", "100.00%"}} {
			if f := strings.Fields(lines[1+k]); len(f) < 4 || !slices.Equal(f[:4], want) {
				t.Errorf("%s stage %d: %q, want it to start %q", config, k, lines[1+k], want)
			}
		}
	}
	for _, name := range []string{"stage_ttft_p90.png", "stage_throughput.svg", "stage_latency.png", "stage_load.png"} {
		if _, err := os.Stat(filepath.Join(out, name)); err != nil {
			t.Error(err)
		}
	}
	one := strings.Replace(ladder, ", {rate: 6, duration: 5}", "", 1)
	if err := os.WriteFile(profile, []byte(one), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, _, err = runCLI(t, "run", "--trace", workload.InferencePerfPrefix+profile, "--replicas", "2")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(stdout, "Per load stage") {
		t.Errorf("one stage printed a per-stage table:\n%s", stdout)
	}
}

// TestRunInferencePerfClient: inference-perf configs run through the
// client model by default (summary environment inference_perf_client);
// --iperf-max-concurrency 1 sends one request at a time, so the send span
// grows; --iperf-open-loop sends on schedule; bad client flag values exit
// 2 naming the flag.
func TestRunInferencePerfClient(t *testing.T) {
	dir := t.TempDir()
	profile := filepath.Join(dir, "ladder.yaml")
	ladder := `load:
  type: constant
  stages: [{rate: 4, duration: 5}, {rate: 8, duration: 5}]
api: {streaming: true}
data:
  type: shared_prefix
  shared_prefix: {num_groups: 2, num_prompts_per_group: 2, system_prompt_len: 500, question_len: 50, output_len: 40}
`
	if err := os.WriteFile(profile, []byte(ladder), 0o644); err != nil {
		t.Fatal(err)
	}
	trace := workload.InferencePerfPrefix + profile
	type stage struct {
		Requests  int      `json:"requests"`
		SendSpan  float64  `json:"send_span_s"`
		ITLStream *float64 `json:"itl_stream_mean_ms"`
	}
	doc := func(args ...string) (map[string]any, []stage) {
		t.Helper()
		out, _, err := runCLI(t, append([]string{"run", "--trace", trace, "--replicas", "2", "--epp-config", "round-robin", "--json"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			Runs map[string]struct {
				Config struct {
					Environment map[string]any `json:"environment"`
				} `json:"config"`
				Stages []stage `json:"stages"`
			}
		}
		if err := json.Unmarshal([]byte(out), &d); err != nil {
			t.Fatal(err)
		}
		r := d.Runs["round-robin"]
		c, _ := r.Config.Environment["inference_perf_client"].(map[string]any)
		return c, r.Stages
	}
	c, st := doc()
	if c["max_concurrency"] != 22400.0 || c["request_timeout"] != "5m0s" || len(st) != 2 || st[0].ITLStream == nil || st[0].SendSpan > 5 {
		t.Errorf("default client %v, stages %+v", c, st)
	}
	_, one := doc("--iperf-max-concurrency", "1")
	if one[0].SendSpan <= st[0].SendSpan || one[1].SendSpan <= st[1].SendSpan {
		t.Errorf("one at a time: send spans %+v, default %+v", one, st)
	}
	c, open := doc("--iperf-open-loop")
	if c != nil || open[0].ITLStream != nil {
		t.Errorf("open loop: client %v, stages %+v", c, open)
	}
	for _, tc := range []struct{ flag, val, want string }{
		{"--iperf-cpus", "0", "--iperf-cpus 0: must be at least 1"},
		{"--iperf-max-concurrency", "-3", "--iperf-max-concurrency -3: must be > 0"},
		{"--iperf-request-timeout", "-1s", "--iperf-request-timeout -1s: must be > 0"},
	} {
		_, _, err := runCLI(t, "run", "--trace", trace, tc.flag, tc.val)
		if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: err %v (exit %d), want exit 2 with %q", tc.flag, tc.val, err, exitCode(err), tc.want)
		}
	}
}

// TestRunGatewayLimit: one inference-perf stage sends 40 requests within
// a second; each decodes 300 tokens, longer than that second on the
// preset's replicas, so none has ended when the last is sent. With the
// gateway's limit at 10, exactly the first 10 pass and 30 are refused
// (N − limit, as in the 73-capacity re-run): 10 of 40 complete, the
// summary records the limit, and the findings say it.
func TestRunGatewayLimit(t *testing.T) {
	dir := t.TempDir()
	profile := filepath.Join(dir, "burst.yaml")
	burst := `load:
  type: constant
  stages: [{rate: 40, duration: 1}]
api: {streaming: true}
data:
  type: shared_prefix
  shared_prefix: {num_groups: 4, num_prompts_per_group: 10, system_prompt_len: 200, question_len: 50, output_len: 300}
`
	if err := os.WriteFile(profile, []byte(burst), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"run", "--trace", workload.InferencePerfPrefix + profile, "--replicas", "2", "--epp-config", "round-robin", "--gateway-max-requests", "10"}
	out, _, err := runCLI(t, append(args, "--json")...)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Runs map[string]struct {
			Requests struct {
				Total    int `json:"total"`
				Complete int `json:"completed"`
				Rejected int `json:"rejected"`
				Peak     int `json:"peak_in_flight"`
			} `json:"requests"`
			Config struct {
				Environment map[string]any `json:"environment"`
			} `json:"config"`
		}
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatal(err)
	}
	r := d.Runs["round-robin"]
	if r.Requests.Total != 40 || r.Requests.Complete != 10 || r.Requests.Rejected != 30 || r.Requests.Peak != 10 || r.Config.Environment["gateway_max_requests"] != 10.0 {
		t.Errorf("requests %+v, environment %v", r.Requests, r.Config.Environment)
	}
	text, _, err := runCLI(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	if want := "round-robin: the gateway refused 30 of 40 requests (75.0%) with HTTP 500 (gateway-overflow)"; !strings.Contains(text, want) {
		t.Errorf("output lacks %q:\n%s", want, text)
	}
}
