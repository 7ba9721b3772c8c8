package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// doctor rewrites the summary document at path with edit applied to run.
func doctor(t *testing.T, path, run string, edit func(map[string]any)) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	edit(doc["runs"].(map[string]any)[run].(map[string]any))
	if b, err = json.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func child(m map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		m = m[k].(map[string]any)
	}
	return m
}

// TestDiffCLI: one small real run, then eppsim diff on it: identical ⇒ 0,
// TTFT p99 +50% ⇒ 1 naming the metric, another workload ⇒ 2 with the
// reason, bad input ⇒ 2.
func TestDiffCLI(t *testing.T) {
	dir := t.TempDir()
	jsonOut, _, err := runCLI(t, "run", "--max-requests", "40", "--replicas", "2", "--epp-config", "default", "--epp-config", "round-robin", "--json")
	if err != nil {
		t.Fatal(err)
	}
	// The same document as a saved file and as the summary.json of a
	// directory (as eppsim run --out leaves it; its plots are tested in
	// report and by TestRunOutDeterministic).
	saved := filepath.Join(dir, "pr.json")
	runDir := filepath.Join(dir, "run")
	if err := os.Mkdir(runDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{saved, filepath.Join(runDir, "summary.json")} {
		if err := os.WriteFile(p, []byte(jsonOut), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Identical.
	out, _, err := runCLI(t, "diff", runDir, saved)
	if err != nil || !strings.Contains(out, "## eppsim diff: no regression") || !strings.Contains(out, "### round-robin") {
		t.Fatalf("identical: %v\n%s", err, out)
	}
	out, _, err = runCLI(t, "diff", runDir, saved, "--tolerance", "1e-9")
	if err != nil || !strings.Contains(out, "## eppsim diff: no change") {
		t.Fatalf("identical, strict: %v\n%s", err, out)
	}

	// TTFT p99 +50% on the default config.
	doctor(t, saved, "default", func(r map[string]any) {
		ttft := child(r, "latency_ms", "ttft")
		ttft["p99"] = ttft["p99"].(float64) * 1.5
	})
	plots := filepath.Join(dir, "plots")
	out, stderr, err := runCLI(t, "diff", runDir, saved, "--out", plots, "--dpi", "20")
	if exitCode(err) != 1 || !strings.Contains(err.Error(), "regression: default: latency_ms.ttft.p99") {
		t.Fatalf("doctored: exit %d, %v", exitCode(err), err)
	}
	if !strings.Contains(out, "| `latency_ms.ttft.p99` |") || !strings.Contains(out, "+50.0%") || !strings.Contains(out, "**REGRESSION**") {
		t.Fatalf("doctored table:\n%s", out)
	}
	if !strings.Contains(stderr, plots) {
		t.Fatalf("stderr %q does not name the output directory", stderr)
	}
	for _, name := range []string{"diff.md", "diff.json", "diff.html", "diff_ttft_cdf.svg", "diff_ttft_cdf.png", "diff_metrics.svg",
		"diff_metrics.png", "diff_hit_ratio.svg", "diff_hit_ratio.png"} {
		if st, err := os.Stat(filepath.Join(plots, name)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
	// A looser threshold for that metric passes; --json prints the verdict.
	out, _, err = runCLI(t, "diff", runDir, saved, "--fail-on", "latency_ms.ttft.p99:+60%", "--json")
	var js struct {
		Verdict    string   `json:"verdict"`
		Thresholds []string `json:"thresholds"`
	}
	if err != nil || json.Unmarshal([]byte(out), &js) != nil || js.Verdict != "ok" || js.Thresholds[0] != "latency_ms.ttft.p99:+60%" {
		t.Fatalf("--fail-on +60%%: %v %+v\n%s", err, js, out)
	}

	// Another workload: exit 2 with the reason.
	doctor(t, saved, "default", func(r map[string]any) { child(r, "config", "workload")["max_requests"] = 80.0 })
	_, _, err = runCLI(t, "diff", runDir, saved)
	if exitCode(err) != 2 || !strings.Contains(err.Error(), "default: workload.max_requests: baseline 40, current 80") {
		t.Fatalf("mismatched workloads: exit %d, %v", exitCode(err), err)
	}

	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"diff", runDir}, "diff takes BASELINE and CURRENT, got 1 arguments"},
		{[]string{"diff", runDir, filepath.Join(dir, "missing")}, "current: stat " + filepath.Join(dir, "missing")},
		{[]string{"diff", filepath.Join(dir, "notes.txt"), runDir}, "baseline: " + filepath.Join(dir, "notes.txt") + ": line 1, column 2: invalid character"},
		{[]string{"diff", runDir, runDir, "--fail-on", "latency_ms.ttft.p99:5%"}, `--fail-on: threshold "latency_ms.ttft.p99:5%": "5%" needs a sign`},
		{[]string{"diff", runDir, runDir, "--fail-on", "sim.wall_s:+5%"}, "wall-clock"},
		{[]string{"diff", runDir, runDir, "--no-default-thresholds"}, "nothing to check"},
		{[]string{"diff", runDir, runDir, "--tolerance", "-1"}, "--tolerance -1: must be a finite number ≥ 0"},
		// An --out holding earlier results is refused, as run's is.
		{[]string{"diff", runDir, runDir, "--out", plots}, "--out " + plots + " already holds earlier results (diff.html, diff.json, diff.md, and 6 more): pass --force"},
		{[]string{"diff", runDir, runDir, "--out", runDir}, "--out " + runDir + " already holds earlier results (summary.json)"},
	} {
		_, _, err := runCLI(t, tc.args...)
		if exitCode(err) != 2 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: exit %d, %v; want exit 2 with %q", tc.args, exitCode(err), err, tc.want)
		}
	}
	// --force writes into it.
	before, err := os.Stat(filepath.Join(plots, "diff.md"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := runCLI(t, "diff", runDir, runDir, "--out", plots, "--force", "--dpi", "20"); err != nil {
		t.Fatalf("--force: %v", err)
	}
	if after, err := os.Stat(filepath.Join(plots, "diff.md")); err != nil || os.SameFile(before, after) {
		t.Errorf("--force did not replace diff.md: %v", err)
	}
}
