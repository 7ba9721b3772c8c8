package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestRunBuiltinSideBySide(t *testing.T) {
	out, _, err := runCLI(t, "run", "--max-requests", "40", "--replicas", "2", "--epp-config", "default", "--epp-config", "default", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Runs map[string]struct {
			Requests struct{ Total, Completed int }
			Cache    struct {
				True   float64 `json:"true_hit_ratio"`
				Oracle float64 `json:"oracle_hit_ratio"`
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("bad JSON: %v\n%s", err, out)
	}
	if len(doc.Runs) != 2 {
		t.Fatalf("runs %v, want default and default#2", doc.Runs)
	}
	s := doc.Runs["default#2"]
	if s.Requests.Total != 40 || s.Requests.Completed != 40 || s.Cache.Oracle < s.Cache.True || s.Cache.True <= 0 {
		t.Fatalf("summary %+v", s)
	}
	table, _, err := runCLI(t, "run", "--max-requests", "20", "--replicas", "2")
	if err != nil || !strings.Contains(table, "true hit ratio") || !strings.Contains(table, "20/20") {
		t.Fatalf("table output (%v):\n%s", err, table)
	}
}

func TestRunBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"run", "--preset", "nope"},
		{"run", "--replicas", "0"},
		{"run", "--trace", "/nonexistent/trace.jsonl"},
		{"run", "--epp-config", "/nonexistent/config.yaml"},
		{"run", "--epp-config", "default", "--epp-config", "/nonexistent/config.yaml"},
		{"run", "--workers", "0"},
		{"run", "--progress", "sometimes"},
	} {
		if _, _, err := runCLI(t, args...); err == nil || exitCode(err) != 2 {
			t.Errorf("%v: err %v (exit %d), want exit 2", args, err, exitCode(err))
		}
	}
}

// TestRunOutDeterministic: --out writes every file, and the same command
// twice — the configs simulated one after the other, then all at once —
// gives byte-identical requests.csv and timeseries.csv and the same
// summary.json apart from the wall-clock fields.
func TestRunOutDeterministic(t *testing.T) {
	var dirs [2]string
	for i, workers := range []string{"1", "3"} {
		dirs[i] = t.TempDir()
		if _, _, err := runCLI(t, "run", "--max-requests", "60", "--replicas", "2", "--epp-config", "default",
			"--epp-config", "round-robin", "--epp-config", "oracle", "--timeseries-interval", "5s",
			"--workers", workers, "--out", dirs[i]); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"summary.json", "requests.csv", "timeseries.csv", "report.md", "report.html",
		"ttft_cdf.svg", "ttft_cdf.png", "predicted_vs_true.svg", "hit_ratio_over_time.png", "replica_load.svg"} {
		a, err := os.ReadFile(filepath.Join(dirs[0], name))
		if err != nil || len(a) == 0 {
			t.Fatalf("%s: %v (%d bytes)", name, err, len(a))
		}
		b, _ := os.ReadFile(filepath.Join(dirs[1], name))
		if name == "summary.json" {
			a, b = wallFree.ReplaceAll(a, nil), wallFree.ReplaceAll(b, nil)
		}
		if name == "requests.csv" || name == "summary.json" || name == "timeseries.csv" {
			if !bytes.Equal(a, b) {
				t.Errorf("%s differs between two identical runs", name)
			}
		}
	}
	csv, _ := os.ReadFile(filepath.Join(dirs[0], "requests.csv"))
	if lines := strings.Count(string(csv), "\n"); lines != 1+3*60 {
		t.Fatalf("requests.csv has %d lines, want header + 180", lines)
	}
	if !strings.HasPrefix(string(csv), "config,id,session,turn,arrival_s,replica,prompt_tokens,output_tokens,cached_tokens,oracle_cached_tokens,predicted_fraction,") {
		t.Fatalf("header %q", strings.SplitN(string(csv), "\n", 2)[0])
	}
}

var wallFree = regexp.MustCompile(`"(wall_s|requests_per_wall_s)": [0-9.e+-]+`)

func TestRunFleetFile(t *testing.T) {
	fleet := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(fleet, []byte("groups:\n- {name: big, count: 1, preset: llama-3.1-8b-h100}\n- {name: small, count: 2, preset: llama-3.1-8b-a100, overrides: {engine: {num_gpu_blocks_override: 5000}}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCLI(t, "run", "--max-requests", "30", "--fleet", fleet, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Runs map[string]struct {
			Config struct {
				Fleet []struct {
					Name   string
					Preset string
					Engine struct {
						NumGPUBlocks int `json:"num_gpu_blocks"`
					}
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	f := doc.Runs["default"].Config.Fleet
	if len(f) != 3 || f[0].Name != "default/big-0" || f[2].Name != "default/small-1" || f[2].Preset != "llama-3.1-8b-a100" || f[2].Engine.NumGPUBlocks != 5000 {
		t.Fatalf("fleet %+v", f)
	}
	if _, _, err := runCLI(t, "run", "--fleet", filepath.Join(t.TempDir(), "missing.yaml")); err == nil || exitCode(err) != 2 {
		t.Fatalf("missing fleet file: %v", err)
	}
}
