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

const (
	traceFixtures  = "../../workload/testdata"
	sharedMooncake = "../../../shared/traces/mooncake_conversation_trace.jsonl"
)

func TestTraceInspectText(t *testing.T) {
	out, _, err := runCLI(t, "trace", "inspect", filepath.Join(traceFixtures, "mooncake.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	// Values hand-computed in workload's TestInspectMooncakeFixture.
	for _, want := range []string{
		"format:          mooncake (open-loop)\n",
		"requests:        6\n",
		"sessions:        3 (3 continuations, up to 3 turns)\n",
		"duration:        4s (1.50 req/s)\n",
		"input tokens:    mean 1189  p50 1024  p90 2100  p99 2100  max 2100\n",
		"trace blocks:    17 of 512 tokens, 8 distinct; 52.9% repeat an earlier one\n",
		"16-token blocks: 444 full prompt blocks; 60.1% already cached when they arrive\n",
		"infinite-cache hit ratio: 59.6% (4256 of 7136 prompt tokens; 16-token blocks, num_tokens-1 rule)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestTraceInspectSharedMooncake(t *testing.T) {
	if _, err := os.Stat(sharedMooncake); err != nil {
		t.Skip("shared Mooncake trace not present")
	}
	out, _, err := runCLI(t, "trace", "inspect", "--json", sharedMooncake)
	if err != nil {
		t.Fatal(err)
	}
	var s workload.Summary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatal(err)
	}
	if s.Requests != 12031 || s.Sessions != 8028 || s.HitRatio < 0.370 || s.HitRatio > 0.377 {
		t.Errorf("requests %d sessions %d hit ratio %.4f", s.Requests, s.Sessions, s.HitRatio)
	}
}

func TestTraceSynthConvertRoundTrip(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	if _, _, err := runCLI(t, "trace", "synth", "--preset", "chat", "--sessions", "8", "--seed", "5", "--out", a); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runCLI(t, "trace", "synth", "--preset", "chat", "--sessions", "8", "--seed", "5", "--out", b); err != nil {
		t.Fatal(err)
	}
	da, _ := os.ReadFile(a)
	db, _ := os.ReadFile(b)
	if len(da) == 0 || !bytes.Equal(da, db) {
		t.Fatal("synth with the same seed wrote different files")
	}
	if fi, _ := os.Stat(a); fi.Mode().Perm() != 0o644 {
		t.Errorf("output mode %v", fi.Mode())
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*tmp*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	out, _, err := runCLI(t, "trace", "inspect", "--json", a)
	if err != nil {
		t.Fatal(err)
	}
	var s workload.Summary
	if err := json.Unmarshal([]byte(out), &s); err != nil || s.Sessions != 8 || s.Format != workload.FormatOpenAI {
		t.Fatalf("inspect of synth output: %+v %v", s, err)
	}

	// Mooncake -> OpenAI JSONL: the completions prompt text tokenizes back
	// to the synthesized tokens.
	c := filepath.Join(dir, "c.jsonl")
	if _, _, err := runCLI(t, "trace", "convert", "--to", "openai-jsonl", filepath.Join(traceFixtures, "mooncake.jsonl"), "--out", c); err != nil {
		t.Fatal(err)
	}
	orig := traceRead(t, filepath.Join(traceFixtures, "mooncake.jsonl"))
	conv := traceRead(t, c)
	if len(orig) != len(conv) {
		t.Fatalf("%d requests converted, want %d", len(conv), len(orig))
	}
	for i := range orig {
		o, v := orig[i], conv[i]
		if !slices.Equal(o.PromptTokens, v.PromptTokens) || o.Arrival != v.Arrival || o.Session != v.Session ||
			o.Turn != v.Turn || o.Prev != v.Prev || o.OutputTokens != v.OutputTokens || !bytes.Equal(o.Body, v.Body) {
			t.Errorf("request %d differs after conversion", i)
		}
	}
}

func traceRead(t *testing.T, path string) []*workload.Request {
	t.Helper()
	s, err := workload.Open(path, workload.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	reqs, err := workload.Drain(s)
	if err != nil {
		t.Fatal(err)
	}
	return reqs
}

func TestTraceBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte(`{"timestamp": 0, "input_length": 1000, "output_length": 5, "hash_ids": [0]}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"inspect", bad}, bad + ":1: hash_ids: 1 ids for input_length 1000 (block size 512 needs 2)"},
		{[]string{"inspect", filepath.Join(dir, "missing.jsonl")}, "no such file"},
		{[]string{"inspect", "--format", "parquet", bad}, `unknown trace format "parquet"`},
		{[]string{"inspect", "--block-size", "0", bad}, "--block-size 0: must be > 0"},
		{[]string{"inspect", "builtin:nope"}, `no built-in workload "nope"`},
		{[]string{"synth", "--preset", "nope", "--out", filepath.Join(dir, "x")}, `no built-in workload "nope"`},
		{[]string{"synth", "--preset", "chat"}, "--out is required"},
		{[]string{"convert", "--to", "csv", bad, "--out", filepath.Join(dir, "y")}, `--to "csv": only openai-jsonl is supported`},
		{[]string{"convert", bad, "--out", filepath.Join(dir, "z")}, "hash_ids: 1 ids"},
	}
	for _, tt := range tests {
		_, _, err := runCLI(t, append([]string{"trace"}, tt.args...)...)
		if err == nil || !strings.Contains(err.Error(), tt.want) || exitCode(err) != 2 {
			t.Errorf("trace %v: error %v (exit %d), want %q and exit 2", tt.args, err, exitCode(err), tt.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "z")); err == nil {
		t.Error("failed convert left an output file")
	}
	// --skip-invalid counts and reports instead.
	out, stderr, err := runCLI(t, "trace", "inspect", "--skip-invalid", bad)
	if err != nil || !strings.Contains(out, "requests:        0 (1 invalid records skipped)") || !strings.Contains(stderr, "skipped 1 invalid record(s)") {
		t.Errorf("skip-invalid: %v\n%s\n%s", err, out, stderr)
	}
}
