package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const benchConfigs = "../../testdata/shared/benchmarks"

// TestEPPMigrate: stdout is the translation with its comments, stderr
// names each translation with the file and line; --out writes the same
// bytes; --epp-release translates to eppsim's model of the release.
func TestEPPMigrate(t *testing.T) {
	src := filepath.Join(benchConfigs, "73-capacity", "estimated-scheduling.yaml")
	out, stderr, err := runCLI(t, "epp", "migrate", src)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	for _, want := range []string{
		src + ": line 1: apiVersion inference.networking.x-k8s.io/v1alpha1 → llm-d.ai/v1alpha1",
		src + ": line 6: prefix-cache-scorer estimate mode (hashBlockSize 64 characters",
		"behaviour differs: v0.2.x hashed 64-character blocks",
		"--epp-release llm-d-v0.2 reproduces v0.2.x",
		src + ": line 10: plugin type kv-cache-scorer → kv-cache-utilization-scorer",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if strings.Count(stderr, "\n") != 3 {
		t.Errorf("stderr has %d lines, want 3:\n%s", strings.Count(stderr, "\n"), stderr)
	}
	for _, want := range []string{"# eppsim epp migrate: line 10: plugin type kv-cache-scorer", "- type: approx-prefix-cache-producer\n", "lruCapacityPerServer: 7813\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q", want)
		}
	}
	dst := filepath.Join(t.TempDir(), "new.yaml")
	if _, _, err := runCLI(t, "epp", "migrate", src, "--out", dst); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(dst); err != nil || string(b) != out {
		t.Errorf("--out wrote %q (%v), want stdout's bytes", b, err)
	}
	// The written file validates with no translation left.
	v, stderr, err := runCLI(t, "epp", "validate", dst)
	if err != nil || strings.Contains(v, "older schema") {
		t.Errorf("validate of the translation: %v\n%s%s", err, v, stderr)
	}
	rel, _, err := runCLI(t, "epp", "migrate", "--epp-release", "llm-d-v0.2", filepath.Join(benchConfigs, "73-capacity", "precise-scheduling.yaml"))
	if err != nil || !strings.Contains(rel, "- name: prefix-cache-scorer\n  type: llm-d-v0.2-prefix-cache-scorer\n  parameters:\n    mode: cache_tracking\n") {
		t.Errorf("--epp-release: %v\n%s", err, rel)
	}
	// Today's schema: written unchanged, and said so.
	today := filepath.Join(sharedEPPConfigs, "epp-config.yaml")
	got, stderr, err := runCLI(t, "epp", "migrate", today)
	want, _ := os.ReadFile(today)
	if err != nil || got != string(want) || !strings.Contains(stderr, "nothing to translate") {
		t.Errorf("today's schema: %v, changed %v, stderr %q", err, got != string(want), stderr)
	}
}

// TestEPPMigrateErrors: a file that cannot be translated, a bad release,
// a missing file or a bad --out exit 2 naming what is wrong.
func TestEPPMigrateErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "old.yaml")
	doc := "apiVersion: inference.networking.x-k8s.io/v1alpha1\nkind: EndpointPickerConfig\nplugins:\n- type: prefix-cache-scorer\n  parameters:\n    hashBlockSize: 0\n"
	if err := os.WriteFile(bad, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"epp", "migrate", bad}, bad + ":6: plugins[0].parameters.hashBlockSize: older schema: prefix-cache-scorer hashBlockSize must be > 0, got 0: set a positive value"},
		{[]string{"epp", "migrate", "--epp-release", "llm-d-v0.1", bad}, `--epp-release "llm-d-v0.1": unknown (have llm-d-v0.2)`},
		{[]string{"epp", "migrate", filepath.Join(dir, "none.yaml")}, "none.yaml"},
		{[]string{"epp", "migrate", filepath.Join(benchConfigs, "73-capacity", "load-scheduling.yaml"), "--out", dir}, "--out " + dir},
		{[]string{"epp", "migrate"}, "accepts 1 arg"},
	}
	for _, tc := range cases {
		_, _, err := runCLI(t, tc.args...)
		if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: exit %d, %v; want 2 and %q", tc.args, exitCode(err), err, tc.want)
		}
	}
}

// TestRunOlderConfig: `run` accepts a published (older) config, warns on
// stderr with the same translations as `epp migrate`, and records them in
// the summary; --epp-release runs eppsim's model of the release.
func TestRunOlderConfig(t *testing.T) {
	src := filepath.Join(benchConfigs, "73-capacity", "estimated-scheduling.yaml")
	for _, release := range []string{"", "llm-d-v0.2"} {
		args := []string{"run", "--max-requests", "30", "--replicas", "2", "--epp-config", src, "--json"}
		if release != "" {
			args = append(args, "--epp-release", release)
		}
		out, stderr, err := runCLI(t, args...)
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
		wantLine := "eppsim: warning: " + src + ": older schema, translated: line 6: prefix-cache-scorer estimate mode"
		if release != "" {
			wantLine = "eppsim: warning: " + src + ": older schema, translated: line 5: plugin type prefix-cache-scorer (estimate mode) → llm-d-v0.2-prefix-cache-scorer"
		}
		if !strings.Contains(stderr, wantLine) || !strings.Contains(stderr, "line 10: plugin type kv-cache-scorer → kv-cache-utilization-scorer") {
			t.Errorf("release %q: stderr:\n%s", release, stderr)
		}
		var doc struct {
			Runs map[string]struct {
				Config struct {
					EPP struct {
						Release      string   `json:"release"`
						Translations []string `json:"translations"`
					} `json:"epp"`
				} `json:"config"`
			} `json:"runs"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("--json output: %v\n%.400s", err, out)
		}
		epp := doc.Runs["estimated-scheduling"].Config.EPP
		if epp.Release != release || len(epp.Translations) != 3 {
			t.Errorf("release %q: summary epp %+v", release, epp)
		}
	}
	// A config of today's schema warns of nothing new.
	_, stderr, err := runCLI(t, "run", "--max-requests", "10", "--replicas", "2", "--epp-config", filepath.Join(sharedEPPConfigs, "epp-config.yaml"))
	if err != nil || strings.Contains(stderr, "older schema") {
		t.Errorf("today's schema: %v\n%s", err, stderr)
	}
}
