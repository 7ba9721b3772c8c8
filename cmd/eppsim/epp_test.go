package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/epp/config"
	"github.com/eppsim/eppsim/epp/plugins"
)

const sharedEPPConfigs = "../../testdata/shared/epp-configs"

func TestEPPValidateShippedConfigs(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(sharedEPPConfigs, "*.yaml"))
	if len(files) == 0 {
		t.Skip("shared configs not found")
	}
	// epp-mm-embeddings-cache-config.yaml sets cacheSizeInMB, which the
	// real producer's strict parameters do not know (they have
	// cacheSizeInMBPerServer): it fails to load upstream, and here.
	var loadable []string
	for _, f := range files {
		if filepath.Base(f) != "epp-mm-embeddings-cache-config.yaml" {
			loadable = append(loadable, f)
		}
	}
	_, stderr, err := runCLI(t, append([]string{"epp", "validate"}, files...)...)
	if err == nil || !strings.Contains(stderr, `epp-mm-embeddings-cache-config.yaml:14: plugins[4].parameters`) ||
		!strings.Contains(stderr, `unknown field "cacheSizeInMB"`) || !strings.Contains(err.Error(), "1 of 19 configurations are invalid") {
		t.Errorf("validate of every shipped config: %v\n%s", err, stderr)
	}
	out, stderr, err := runCLI(t, append([]string{"epp", "validate"}, loadable...)...)
	if err != nil {
		t.Fatalf("validate: %v\n%s", err, stderr)
	}
	if got := strings.Count(out, ": valid\n"); got != len(loadable) {
		t.Errorf("%d configs reported valid, want %d", got, len(loadable))
	}
	for _, want := range []string{
		"admission: legacy gate (flowControl off)",
		"admission: flow control: TTL 1m0s (1m0s without endpoints), usage-limit policy soft-reflective-ceiling-policy",
		"  band 0: program-aware-fairness, fcfs-ordering-policy, ≤ 1000000000 bytes, ≤ 5000 requests",
		"admit plugins: probabilistic-admitter",
		"data producers (execution order): token-producer → approx-prefix-cache-producer",
		"auto-created producers: approx-prefix-cache-producer (for PrefixCacheMatchInfoDataKey/approx-prefix-cache-producer (required by prefix-cache-scorer)), token-producer",
		"scorers: prefix-cache-scorer ×2",
		"not simulated:\n",
		"  dcgm-source: simulated: polls each replica's simulated dcgm-exporter every 1s (rounded to a multiple of --refresh-metrics-interval)",
		"  dcgm-extractor: simulated: stores each endpoint's last polled GPU utilization",
		"apiVersion inference.networking.x-k8s.io/v1alpha1 is deprecated",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

func TestEPPValidateDefault(t *testing.T) {
	out, _, err := runCLI(t, "epp", "validate")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"built-in default configuration (spec §1.2): valid",
		"scorers: queue-scorer ×2, kv-cache-utilization-scorer ×2, prefix-cache-scorer ×3",
		"picker:  max-score-picker",
		"profiles (handler single-profile-handler)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestEPPValidateInvalid(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	src := "apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\nplugins:\n- type: queue-scorer\nschedulingProfiles:\n- name: default\n  plugins:\n  - pluginRef: queue-scorer\n    wieght: 2\n"
	if err := os.WriteFile(bad, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(sharedEPPConfigs, "epp-config.yaml")
	_, stderr, err := runCLI(t, "epp", "validate", bad, good)
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	if exitCode(err) != 2 {
		t.Errorf("exit code %d, want 2", exitCode(err))
	}
	// The config's error is printed once (stderr); the final error, which
	// main prints too, only counts and names the invalid files.
	want := bad + `:9: schedulingProfiles[0].plugins[0]: unknown field "wieght"`
	if strings.Count(stderr, want) != 1 || strings.Contains(err.Error(), want) ||
		err.Error() != "1 of 2 configurations are invalid: "+bad {
		t.Errorf("stderr %q / err %q: want %q once in stderr and a count in err", stderr, err, want)
	}
	// One invalid config alone: its error is the command's error, and
	// nothing else is printed.
	_, stderr, err = runCLI(t, "epp", "validate", bad)
	if err == nil || err.Error() != want || stderr != "" || exitCode(err) != 2 {
		t.Errorf("single invalid config: err %v (exit %d), stderr %q", err, exitCode(err), stderr)
	}
}

func TestEPPValidateYAMLRoundTrip(t *testing.T) {
	path := filepath.Join(sharedEPPConfigs, "pd-epp-config.yaml")
	if _, err := os.Stat(path); err != nil {
		t.Skip("shared config missing")
	}
	out, _, err := runCLI(t, "epp", "validate", "-o", "yaml", path)
	if err != nil {
		t.Fatal(err)
	}
	l, err := config.Load([]byte(out), config.Options{Registry: plugins.Builtin()})
	if err != nil {
		t.Fatalf("effective YAML does not load: %v\n%s", err, out)
	}
	if l.ProfileHandler != "disagg-profile-handler" || len(l.AutoProducers) != 0 {
		t.Errorf("reloaded: handler %q auto %v", l.ProfileHandler, l.AutoProducers)
	}
	if _, _, err := runCLI(t, "epp", "validate", "-o", "json", path); err != nil {
		t.Fatal(err)
	}
}

// TestEPPExplain: the worked example of docs/epp.md. By hand: 77 estimate
// tokens → 2 blocks of 64; pod-a's history shares the first block → prefix
// 0.5; queue min-max over (0,3,0) → (1,0,1); kv 1−usage → (0.7,0.38,0.95).
// Totals 2·1+2·0.7+3·0.5 = 4.9, 0.76, 3.9 → pod-a.
func TestEPPExplain(t *testing.T) {
	out, stderr, err := runCLI(t, "epp", "explain",
		"--endpoints", "testdata/epp-explain-endpoints.yaml",
		"--request", "testdata/epp-explain-request.yaml", "--seed", "7")
	if err != nil {
		t.Fatalf("explain: %v\n%s", err, stderr)
	}
	for _, want := range []string{
		"config: built-in default (seed 7)",
		"after replaying 1 history requests",
		"TokenizedPrompt/token-producer: 1 prompt(s), 77 tokens",
		"default/pod-a: match 1 of 2 blocks (block 64 tokens)",
		"default/pod-b: match 0 of 2 blocks (block 64 tokens)",
		"default/pod-a  1.0000 → 2.0000                 0.7000 → 1.4000         0.5000 → 1.5000  4.9000",
		"default/pod-b  0.0000 → 0.0000                 0.3800 → 0.7600         0.0000 → 0.0000  0.7600",
		"default/pod-c  1.0000 → 2.0000                 0.9500 → 1.9000         0.0000 → 0.0000  3.9000",
		"picked: default/pod-a",
		`result: primary profile "default" → default/pod-a (10.0.0.1:8000)`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestEPPExplainFilters(t *testing.T) {
	cfg := filepath.Join(sharedEPPConfigs, "epp-config.yaml")
	if _, err := os.Stat(cfg); err != nil {
		t.Skip("shared config missing")
	}
	dir := t.TempDir()
	req := filepath.Join(dir, "req.json")
	if err := os.WriteFile(req, []byte(`{"model":"m","prompt":"hello","max_tokens":4}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCLI(t, "epp", "explain", "--config", cfg,
		"--endpoints", "testdata/epp-explain-endpoints.yaml", "--request", req)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"decode-filter: default/pod-a, default/pod-b (2 of 3)",
		"prefix-cache-scorer ×2",
		`path /v1/completions`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// Every endpoint filtered out: exit 1 and show where.
	eps := filepath.Join(dir, "eps.yaml")
	if err := os.WriteFile(eps, []byte("endpoints:\n- name: a\n  labels: {llm-d.ai/role: prefill}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err = runCLI(t, "epp", "explain", "--config", cfg, "--endpoints", eps, "--request", req)
	if err == nil || exitCode(err) != 1 {
		t.Fatalf("err %v", err)
	}
	if !strings.Contains(out, "decode-filter: none (0 of 1)") {
		t.Errorf("output lacks the empty filter:\n%s", out)
	}
}

// TestEPPExplainBadBody: a request body the EPP's parser rejects is
// reported as rejected (exit 1) before any plugin runs; a history body it
// rejects is an input error (spec §2.1 step 0).
func TestEPPExplainBadBody(t *testing.T) {
	dir := t.TempDir()
	req := filepath.Join(dir, "req.json")
	if err := os.WriteFile(req, []byte(`{"model":"m","messages":[{"role":"user","content":"x","tool_calls":"x"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCLI(t, "epp", "explain", "--endpoints", "testdata/epp-explain-endpoints.yaml", "--request", req)
	if err == nil || exitCode(err) != 1 {
		t.Fatalf("err %v", err)
	}
	const want = "request rejected: bad request (HTTP 400 from openai-parser): chat-completions request: messages[0].tool_calls: got a string, want an array"
	if !strings.Contains(out, want) || strings.Contains(out, "TokenizedPrompt") {
		t.Errorf("output lacks %q or shows produced data:\n%s", want, out)
	}
	eps := filepath.Join(dir, "eps.yaml")
	hist := "endpoints:\n- name: a\n  history:\n  - {body: {model: m, prompt: [1, \"x\"]}}\n"
	if err := os.WriteFile(eps, []byte(hist), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = runCLI(t, "epp", "explain", "--endpoints", eps, "--request", "testdata/epp-explain-request.yaml")
	if err == nil || !strings.Contains(err.Error(), "endpoints[0].history[0]: bad request (HTTP 400 from openai-parser): completions request: prompt[1]: prompt: mixed types in array") {
		t.Errorf("err %v", err)
	}
}

func TestEPPExplainBadInput(t *testing.T) {
	dir := t.TempDir()
	eps := filepath.Join(dir, "eps.yaml")
	if err := os.WriteFile(eps, []byte("endpoints:\n- name: a\n  metrics: {queue: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := runCLI(t, "epp", "explain", "--endpoints", eps, "--request", "testdata/epp-explain-request.yaml")
	if err == nil || !strings.Contains(err.Error(), `unknown field "queue"`) {
		t.Errorf("err %v", err)
	}
	_, _, err = runCLI(t, "epp", "explain", "--endpoints", eps)
	if err == nil || !strings.Contains(err.Error(), "--endpoints and --request are required") {
		t.Errorf("err %v", err)
	}
}

func TestReadExplainRequest(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// A raw OpenAI body (fields the wrapper lacks) is taken as the body.
	r, err := readExplainRequest(write("raw.json", `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":3}`))
	if err != nil || !strings.Contains(string(r.Body), `"max_tokens":3`) {
		t.Fatalf("raw: %+v %v", r, err)
	}
	req, err := r.toRequest("x")
	if err != nil || req.Path != "/v1/chat/completions" || req.TargetModel != "m" {
		t.Errorf("raw request %+v %v", req, err)
	}
	// A wrapper with a typo is an error, not a body.
	if _, err := readExplainRequest(write("typo.yaml", "prompt: hi\nheaders: {a: b}\npriorty: 1\n")); err == nil || !strings.Contains(err.Error(), "priorty") {
		t.Errorf("typo: %v", err)
	}
	r, err = readExplainRequest(write("wrap.yaml", "model: m\nprompt: [a, b]\nheaders: {X-Session-Id: s}\npriority: -1\n"))
	if err != nil {
		t.Fatal(err)
	}
	req, err = r.toRequest("y")
	if err != nil || req.Path != "/v1/completions" || req.Priority != -1 || req.Headers["x-session-id"] != "s" || string(req.Body) != `{"model":"m","prompt":["a","b"]}` {
		t.Errorf("wrapper request %+v %s %v", req, req.Body, err)
	}
}

// `epp hash` is wired under `epp` (spec §10 golden value for "hello").
func TestEPPHashWired(t *testing.T) {
	p := filepath.Join(t.TempDir(), "req.json")
	if err := os.WriteFile(p, []byte(`{"prompt":"hello"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCLI(t, "epp", "hash", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--request", p)
	if err != nil || !strings.Contains(out, `"1701567078521826322"`) {
		t.Errorf("hash: %v\n%s", err, out)
	}
}
