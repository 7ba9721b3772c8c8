package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunMeasuringNothing (issue #25 D5, D6): a warm-up longer than the
// trace, and engines that refuse every request (max_model_len 10; two KV
// blocks, one of them vLLM's null block, hold 16 tokens), each on 4
// replicas. The run exits 0 (docs/metrics.md: "this fleet serves nothing"
// is an answer), warns on stderr, writes every latency and rate as null,
// shows n/a in the table and report.md, and its findings say why instead
// of "leaves 4 of 4 replicas idle".
func TestRunMeasuringNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		why  string
	}{
		{"warmup", []string{"--warmup", "1000h"}, "all 12 requests arrived during the warm-up (--warmup 1000h0m0s)"},
		{"max-model-len", []string{"--max-model-len", "10"}, "every request was rejected (12 of 12): 12 refused by the engine (engine-rejected), " +
			"e.g. “request 0: 608 prompt + 217 output tokens exceed the engine's maximum sequence length 10 (max_model_len)”"},
		{"gpu-blocks", []string{"--num-gpu-blocks-override", "2"}, "every request was rejected (12 of 12): 12 refused by the engine (engine-rejected), " +
			"e.g. “request 0: 608 prompt + 217 output tokens exceed the engine's maximum sequence length 16 (the KV cache: num_gpu_blocks 2 less vLLM's null block, of block_size 16 tokens)”"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			args := append([]string{"run", "--max-requests", "12", "--replicas", "4", "--out", dir}, tc.args...)
			stdout, stderr, err := runCLI(t, args...)
			if err != nil {
				t.Fatalf("exit: %v\n%s", err, stderr)
			}
			if !strings.Contains(stderr, "eppsim: warning: default: "+tc.why) {
				t.Errorf("stderr lacks the warning %q:\n%s", tc.why, stderr)
			}
			// report.md escapes Markdown's specials (max\_model\_len).
			md := strings.ReplaceAll(readText(t, filepath.Join(dir, "report.md")), `\`, "")
			for _, out := range []string{stdout, md} {
				if !strings.Contains(out, "default: "+tc.why) {
					t.Errorf("no finding %q in:\n%s", tc.why, out)
				}
				if strings.Contains(out, "replicas idle") {
					t.Errorf("a finding calls the replicas idle:\n%s", out)
				}
			}
			for _, row := range []string{"TTFT p50", "E2E p99", "completed req/s", "idle replicas"} {
				if !strings.Contains(stdout, row) || !strings.Contains(lineOf(stdout, row), "n/a") {
					t.Errorf("table row %q: %q, want n/a", row, lineOf(stdout, row))
				}
			}
			var doc struct {
				Runs map[string]struct {
					Latency struct {
						TTFT map[string]*float64 `json:"ttft"`
					} `json:"latency_ms"`
					Throughput map[string]*float64 `json:"throughput"`
					Cache      struct {
						True *float64 `json:"true_hit_ratio"`
					} `json:"cache"`
				}
			}
			if err := json.Unmarshal([]byte(readText(t, filepath.Join(dir, "summary.json"))), &doc); err != nil {
				t.Fatal(err)
			}
			r := doc.Runs["default"]
			for k, v := range r.Latency.TTFT {
				if v != nil {
					t.Errorf("latency_ms.ttft.%s = %v, want null", k, *v)
				}
			}
			for k, v := range r.Throughput {
				if v != nil {
					t.Errorf("throughput.%s = %v, want null", k, *v)
				}
			}
			if len(r.Latency.TTFT) != 6 || len(r.Throughput) != 3 || r.Cache.True != nil {
				t.Errorf("summary %+v", r)
			}
		})
	}
}

func readText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// lineOf is the first line of s containing sub.
func lineOf(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}
