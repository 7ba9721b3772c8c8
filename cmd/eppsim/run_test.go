package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
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
	if err != nil || !strings.Contains(table, "true: reused (routed + queue effect)") || !strings.Contains(table, "20 / 20") {
		t.Fatalf("table output (%v):\n%s", err, table)
	}
}

// TestRunTableLayout: the table's row groups in order, the ladder in one
// group, the findings and the simulator's speed below the table (the
// speed is not a result of the simulated system).
func TestRunTableLayout(t *testing.T) {
	out, _, err := runCLI(t, "run", "--max-requests", "30", "--replicas", "3", "--epp-config", "default", "--epp-config", "round-robin")
	if err != nil {
		t.Fatal(err)
	}
	var at []int
	for _, want := range []string{
		"\n  requests ", "\n    completed / total ", "\n  load ", "\n    simulated duration ", "\n    offered load (req/s) ",
		"\n    offered prompt tokens/s ", "\n  latency (ms) ", "\n  throughput ", "\n  hit-rate ladder (share of prompt tokens) ",
		"\n    infinite-cache bound ", "\n    oracle: best replica at routing ", "\n    routed: chosen replica at routing ",
		"\n    true: reused (routed + queue effect) ", "\n    regret: oracle − routed (M tokens) ",
		"\n  prediction, approximate producer ", "\n    bias (mean predicted − true fraction) ",
		"\n    over-predicted (share of predicted tokens) ", "\n    under-predicted (share of true tokens) ",
		"\n  routing ", "\n    idle replicas ", "\n    busiest replica's share ",
		"\nWhat this run shows:\n- round-robin: TTFT p50 ", "\nDefinitions of every metric: docs/metrics.md",
		"\nsimulator wall-clock time: default ",
	} {
		i := strings.Index(out, want)
		if i < 0 {
			t.Fatalf("table lacks %q:\n%s", want, out)
		}
		at = append(at, i)
	}
	if !slices.IsSorted(at) {
		t.Fatalf("rows out of order:\n%s", out)
	}
	// The round-robin column of the approximate producer's rows is empty.
	if !regexp.MustCompile(`\n    MAE \(per request\) +[0-9.]+ +–\n`).MatchString(out) {
		t.Fatalf("prediction rows:\n%s", out)
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
			// The command lines differ in --workers and --out.
			a, b = wallFree.ReplaceAll(a, nil), wallFree.ReplaceAll(b, nil)
			a, b = commandLineRE.ReplaceAll(a, nil), commandLineRE.ReplaceAll(b, nil)
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
	if !strings.HasPrefix(string(csv), "config,id,session,turn,arrival_s,replica,prompt_tokens,output_tokens,cached_tokens,oracle_cached_tokens,"+
		"routed_cached_tokens,infinite_cached_tokens,predicted_fraction,") {
		t.Fatalf("header %q", strings.SplitN(string(csv), "\n", 2)[0])
	}
	// summary.json records the full command line.
	var doc struct{ Command string }
	sj, _ := os.ReadFile(filepath.Join(dirs[1], "summary.json"))
	if err := json.Unmarshal(sj, &doc); err != nil {
		t.Fatal(err)
	}
	if want := "eppsim run --max-requests 60 --replicas 2 --epp-config default --epp-config round-robin --epp-config oracle " +
		"--timeseries-interval 5s --workers 3 --out " + dirs[1]; doc.Command != want {
		t.Fatalf("command %q, want %q", doc.Command, want)
	}
}

var (
	wallFree      = regexp.MustCompile(`"(wall_s|requests_per_wall_s)": [0-9.e+-]+`)
	commandLineRE = regexp.MustCompile(`"command": "[^"]*"`)
)

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

// TestRunModelConfig: --model-config builds replicas from a config.json
// on --gpu with --tensor-parallel-size (or --tp), no preset needed; the
// engine is sized as vLLM sizes it unless --num-gpu-blocks-override (or
// its old name --kv-blocks) says otherwise.
func TestRunModelConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.json")
	if err := os.WriteFile(cfg, []byte(`{"model_type": "qwen3", "num_hidden_layers": 40, "hidden_size": 5120, "head_dim": 128,
	  "num_attention_heads": 40, "num_key_value_heads": 8, "vocab_size": 151936, "intermediate_size": 17408,
	  "max_position_embeddings": 40960, "tie_word_embeddings": false, "torch_dtype": "bfloat16", "rope_theta": 1000000}`), 0o644); err != nil {
		t.Fatal(err)
	}
	type engine struct {
		Blocks  int `json:"num_gpu_blocks"`
		Batched int `json:"max_num_batched_tokens"`
		Seqs    int `json:"max_num_seqs"`
	}
	fleetOf := func(args ...string) (string, engine) {
		t.Helper()
		out, _, err := runCLI(t, append([]string{"run", "--max-requests", "10", "--replicas", "2", "--json"}, args...)...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		var doc struct {
			Runs map[string]struct {
				Config struct {
					Fleet []struct {
						Name, Preset string
						Engine       engine
					}
				}
			}
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatal(err)
		}
		f := doc.Runs["default"].Config.Fleet
		if len(f) != 2 {
			t.Fatalf("fleet %+v", f)
		}
		return f[0].Preset, f[0].Engine
	}
	name, e := fleetOf("--model-config", cfg, "--gpu", "A100-SXM4-80GB", "--tp", "2")
	if !strings.HasSuffix(name, "-a100-80gb-tp2") || e.Batched != 2048 || e.Seqs != 256 || e.Blocks < 10000 {
		t.Errorf("model config on A100 TP2: %s %+v", name, e)
	}
	name, e = fleetOf("--model-config", "Qwen/Qwen3-14B", "--tensor-parallel-size", "1", "--num-gpu-blocks-override", "3000")
	if name != "qwen3-14b-h100" || e.Blocks != 3000 || e.Batched != 8192 {
		t.Errorf("embedded model on the default H100: %s %+v", name, e)
	}
	gpus := filepath.Join(dir, "gpus.yaml")
	if err := os.WriteFile(gpus, []byte("gpus:\n- {name: H100-NVL, base: H100, memory_gb: 94, device_memory_mib: 95830}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, h100 := fleetOf("--model-config", "Qwen/Qwen3-14B")
	if name, e = fleetOf("--model-config", "Qwen/Qwen3-14B", "--gpu", "h100-nvl", "--gpu-catalogue", gpus); name != "qwen3-14b-h100-nvl" || e.Blocks <= h100.Blocks {
		t.Errorf("user catalogue GPU: %s %+v (H100: %+v)", name, e, h100)
	}
	// Llama-4's 10M-token max_position_embeddings needs --max-model-len, as in vLLM.
	if _, _, err := runCLI(t, "run", "--model-config", "RedHatAI/Llama-4-Scout-17B-16E-Instruct-FP8-dynamic", "--tp", "2"); err == nil || !strings.Contains(err.Error(), "lower max_model_len") {
		t.Errorf("scout without --max-model-len: %v", err)
	}
	if name, e = fleetOf("--model-config", "RedHatAI/Llama-4-Scout-17B-16E-Instruct-FP8-dynamic", "--tp", "2", "--max-model-len", "4096",
		"--max-num-seqs", "128", "--max-num-batched-tokens", "2048"); name != "llama-4-scout-17b-16e-instruct-fp8-dynamic-h100-tp2" || e.Blocks < 10000 {
		t.Errorf("scout: %s %+v", name, e)
	}
	if _, e = fleetOf("--num-gpu-blocks-override", "1234"); e.Blocks != 1234 {
		t.Errorf("--num-gpu-blocks-override: %+v", e)
	}
	// --gpu and --tp replace a preset's.
	if name, e = fleetOf("--preset", "llama-3.1-8b-h100", "--gpu", "H200", "--gpu-memory-utilization", "0.8"); name != "llama-3.1-8b-h100" || e.Blocks < 45000 {
		t.Errorf("preset on H200: %s %+v", name, e)
	}
	for _, args := range [][]string{
		{"run", "--model-config", filepath.Join(dir, "missing.json")},
		{"run", "--model-config", cfg, "--gpu", "TPU"},
		{"run", "--model-config", cfg, "--tp", "3"},
		{"run", "--model-config", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "L40S"},
		{"run", "--gpu-catalogue", filepath.Join(dir, "missing.yaml")},
		{"run", "--kv-cache-dtype", "int3"},
		{"run", "--gpu-memory-utilization", "2"},
	} {
		if _, _, err := runCLI(t, args...); err == nil || exitCode(err) != 2 {
			t.Errorf("%v: err %v (exit %d), want exit 2", args, err, exitCode(err))
		}
	}
}

// TestRunPresetFileAndHelp: --preset takes a preset file; run --help
// lists the built-in presets and hides the deprecated --kv-blocks.
func TestRunPresetFileAndHelp(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "mine.yaml")
	src := "model: meta-llama/Llama-2-7b-hf\ngpu: L40S\nengine: {max_model_len: 4096, num_gpu_blocks_override: 900}\n"
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCLI(t, "run", "--max-requests", "10", "--replicas", "1", "--preset", file, "--json")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `"preset": "mine"`) || !strings.Contains(out, `"num_gpu_blocks": 900`) {
		t.Errorf("preset file run:\n%s", out)
	}
	help, _, err := runCLI(t, "run", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"llama-3.1-70b-h100-tp4, llama-3.1-8b-a100, llama-3.1-8b-h100", "--model-config", "--tensor-parallel-size",
		"--tp ", "--num-gpu-blocks-override", "--gpu-catalogue", "H100, H200, A100-80GB"} {
		if !strings.Contains(help, want) {
			t.Errorf("run --help lacks %q", want)
		}
	}
	if strings.Contains(help, "--kv-blocks") {
		t.Error("run --help shows the deprecated --kv-blocks")
	}
}

// TestRunRegretNeverNegative: routed and oracle are measured at the same
// instant, so regret = oracle − routed is never negative, request by
// request (requests.csv) and in every config's summary, also with one
// overloaded replica (max_num_seqs 1, a small KV cache) and with one
// replica (where it is exactly 0).
func TestRunRegretNeverNegative(t *testing.T) {
	dir := t.TempDir()
	fleet := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(fleet, []byte("groups:\n- {name: fast, count: 3, preset: llama-3.1-8b-h100}\n"+
		"- {name: slow, count: 1, preset: llama-3.1-8b-h100, overrides: {engine: {max_num_seqs: 1, num_gpu_blocks_override: 600}}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		fleet []string
	}{{"overloaded", []string{"--fleet", fleet}}, {"one-replica", []string{"--replicas", "1"}}} {
		out := filepath.Join(dir, tc.name)
		args := append([]string{"run", "--max-requests", "150", "--time-scale", "0.2", "--epp-config", "default",
			"--epp-config", "round-robin", "--epp-config", "oracle", "--out", out}, tc.fleet...)
		if _, _, err := runCLI(t, args...); err != nil {
			t.Fatal(err)
		}
		rows := readCSVFile(t, filepath.Join(out, "requests.csv"))
		n := 0
		for _, r := range rows {
			if r["replica"] == "" {
				continue
			}
			n++
			oracle, routed, inf := atoi(t, r["oracle_cached_tokens"]), atoi(t, r["routed_cached_tokens"]), atoi(t, r["infinite_cached_tokens"])
			if routed > oracle || oracle > inf {
				t.Fatalf("%s: %s request %s: routed %d, oracle %d, infinite %d", tc.name, r["config"], r["id"], routed, oracle, inf)
			}
			if tc.name == "one-replica" && routed != oracle {
				t.Fatalf("one replica: %s request %s: routed %d != oracle %d", r["config"], r["id"], routed, oracle)
			}
		}
		if n != 3*150 {
			t.Fatalf("%s: %d routed rows", tc.name, n)
		}
		var doc struct {
			Runs map[string]struct {
				Cache struct {
					Regret   int64   `json:"regret_tokens"`
					Infinite float64 `json:"infinite_cache_hit_ratio"`
					Oracle   float64 `json:"oracle_hit_ratio"`
					Routed   float64 `json:"routed_hit_ratio"`
				}
			}
		}
		sj, _ := os.ReadFile(filepath.Join(out, "summary.json"))
		if err := json.Unmarshal(sj, &doc); err != nil {
			t.Fatal(err)
		}
		for name, s := range doc.Runs {
			c := s.Cache
			if c.Regret < 0 || c.Routed > c.Oracle || c.Oracle > c.Infinite || (tc.name == "one-replica" && c.Regret != 0) {
				t.Fatalf("%s/%s: %+v", tc.name, name, c)
			}
		}
	}
}

// readCSVFile reads a CSV file with a header into one map per row.
func readCSVFile(t *testing.T, path string) []map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]string
	for _, rec := range recs[1:] {
		m := map[string]string{}
		for i, h := range recs[0] {
			m[h] = rec[i]
		}
		out = append(out, m)
	}
	return out
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestMooncakeComparisonReport is issue 13's acceptance run (make
// test-long): the shared Mooncake trace on 16 replicas behind default,
// round-robin and oracle. report.md opens with the trade-off and the idle
// replicas, shows the ladder chart and the error-by-cause table, every
// request's regret is ≥ 0 in every config, and the same holds on one
// replica (the first 1,500 requests: one replica cannot keep up with the
// whole trace's rate in reasonable simulated time), where regret is 0.
func TestMooncakeComparisonReport(t *testing.T) {
	if testing.Short() {
		t.Skip("whole-trace comparison: make test-long")
	}
	if _, err := os.Stat(sharedMooncake); err != nil {
		t.Skip("shared Mooncake trace not present")
	}
	dir := t.TempDir()
	configs := []string{"--epp-config", "default", "--epp-config", "round-robin", "--epp-config", "oracle", "--progress", "never"}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"16", []string{"--replicas", "16"}},
		{"1", []string{"--replicas", "1", "--max-requests", "1500"}},
	} {
		out := filepath.Join(dir, tc.name)
		args := append(append([]string{"run", "--trace", sharedMooncake, "--out", out}, tc.args...), configs...)
		table, _, err := runCLI(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		rows := readCSVFile(t, filepath.Join(out, "requests.csv"))
		for _, r := range rows {
			if r["replica"] == "" {
				continue
			}
			o, rt := atoi(t, r["oracle_cached_tokens"]), atoi(t, r["routed_cached_tokens"])
			if rt > o || o > atoi(t, r["infinite_cached_tokens"]) || (tc.name == "1" && rt != o) {
				t.Fatalf("%s replicas, %s request %s: routed %d, oracle %d, infinite %s", tc.name, r["config"], r["id"], rt, o, r["infinite_cached_tokens"])
			}
		}
		md, err := os.ReadFile(filepath.Join(out, "report.md"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(out, "metrics.md")); err != nil {
			t.Fatal(err)
		}
		text := string(md)
		first := text[strings.Index(text, "## What this run shows"):strings.Index(text, "## Headline metrics")]
		for _, want := range []string{"- round-robin: TTFT p50 ", " default (", " true hit ratio (", "- oracle: TTFT p50 "} {
			if !strings.Contains(first, want) {
				t.Errorf("%s replicas: the first section lacks %q:\n%s", tc.name, want, first)
			}
		}
		for _, want := range []string{"![Hit-rate ladder per config](hit_ladder.png)", "## Prediction error by cause\n",
			"| evictions the index did not see (eviction\\_unseen) |", "[metrics.md](metrics.md)"} {
			if !strings.Contains(text, want) {
				t.Errorf("%s replicas: report.md lacks %q", tc.name, want)
			}
		}
		if tc.name == "16" {
			// The default config leaves replicas idle on this trace, and
			// the first section says so.
			if !regexp.MustCompile(`- default (decides [0-9.]+% of requests by tie-break and )?leaves \d+ of 16 replicas idle`).MatchString(first) {
				t.Errorf("the first section does not name default's idle replicas:\n%s", first)
			}
			if !regexp.MustCompile(`- round-robin: TTFT p50 [0-9.]+× lower than default \(`).MatchString(first) {
				t.Errorf("the first section does not state round-robin's TTFT against default's:\n%s", first)
			}
			t.Logf("Mooncake, 16 replicas:\n%s", table)
		}
	}
}
