package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// exitFixtures writes the files the exit-code table refers to.
func exitFixtures(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{"dir": dir}
	write := func(name, content string) {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		files[name] = p
	}
	exp := func(engine string) string {
		return `{"experiments": [{"id": "r", "model": "Qwen/Qwen2.5-7B-Instruct", "hardware": "H100", "tp": 1,
  "engine": {` + engine + `},
  "workload": {"shared_prefix_requested": {"system_prompt_len": 10, "question_len": 40, "output_len": 20},
   "stages": [{"rate_rps": 1, "duration_s": 5}]}}]}`
	}
	write("seqs0.json", exp(`"max_num_seqs": 0`))
	write("seqs-7.json", exp(`"max_num_seqs": -7`))
	write("blocks0.json", exp(`"max_num_seqs": 8, "total_gpu_kv_blocks": 0`))
	write("fleet-tp0.yaml", "groups:\n- {count: 2, preset: llama-3.1-8b-h100, tp: 0}\n")
	write("fleet-seqs0.yaml", "groups:\n- {count: 2, preset: llama-3.1-8b-h100, overrides: {engine: {max_num_seqs: 0}}}\n")
	write("fleet-bs0.yaml", "groups:\n- {count: 2, preset: llama-3.1-8b-h100, overrides: {engine: {block_size: 0}}}\n")
	write("fleet-big.yaml", "groups:\n- {count: 3000, preset: llama-3.1-8b-h100}\n- {count: 3000, preset: llama-3.1-8b-h100, name: b}\n")
	write("fleet-count0.yaml", "groups:\n- {count: 0, preset: llama-3.1-8b-h100}\n")
	write("bad.json", `{"prompt":`)
	write("noname.yaml", "endpoints:\n- address: 10.0.0.1:8000\n")
	write("noendpoints.yaml", "endpoints: []\n")
	write("badplugin.yaml", "apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\nplugins:\n- type: nope\n")
	if err := os.Mkdir(filepath.Join(dir, "adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	files["adir"] = filepath.Join(dir, "adir")
	// A directory holding a points file that is not a sweep's.
	if err := os.Mkdir(filepath.Join(dir, "notasweep"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join("notasweep", "points.jsonl"), "{\"hello\": 1}\n")
	files["notasweep"] = filepath.Join(dir, "notasweep")
	return files
}

// TestInputErrorsExitTwo: across the verbs, a bad file, field or flag
// value ends with exit 2 and a message that names the flag, file or field
// at fault (issue #25 D4, D8, D10, D11, D12). TestBadInputs covers more
// of run's flags; this table is the other verbs and the defects of #25.
func TestInputErrorsExitTwo(t *testing.T) {
	f := exitFixtures(t)
	out := func() string { return filepath.Join(t.TempDir(), "out") }
	explainFiles := []string{"--endpoints", "testdata/epp-explain-endpoints.yaml", "--request", "testdata/epp-explain-request.yaml"}
	million := []string{"--vary", "prefix-cache-scorer.weight=0:999:1", "--vary", "queue-scorer.weight=0:999:1"}

	// A sweep directory of another sweep.
	other := out()
	if _, _, err := runCLI(t, "sweep", "--max-requests", "3", "--replicas", "1", "--vary", "queue-scorer.weight=1,2",
		"--out", other, "--progress", "never", "--dpi", "20"); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name string
		args []string
		want []string // substrings of the error
	}{
		// D10: timer periods bounded below.
		{"run refresh 1ns", []string{"run", "--refresh-metrics-interval", "1ns"}, []string{"--refresh-metrics-interval 1ns: must be at least 1ms"}},
		{"run timeseries 1us", []string{"run", "--timeseries-interval", "1us"}, []string{"--timeseries-interval 1µs: must be at least 10ms"}},
		{"run dcgm 100us", []string{"run", "--dcgm-collect-interval", "100us"}, []string{"--dcgm-collect-interval 100µs: must be at least 1ms"}},
		{"sweep vary refresh 1ns", []string{"sweep", "--vary", "refresh-metrics-interval=1ns,50ms", "--out", out()}, []string{"refresh-metrics-interval 1ns: must be at least 1ms"}},
		{"tune refresh 1ns", []string{"tune", "--refresh-metrics-interval", "1ns", "--out", out()}, []string{"--refresh-metrics-interval 1ns"}},
		// D8: fleet size and memory.
		{"run replicas 100000", []string{"run", "--replicas", "100000"}, []string{"--replicas 100000: at most 10000"}},
		{"run replicas 10000", []string{"run", "--replicas", "10000"}, []string{"--replicas 10000: the fleet needs an estimated 18.5 GiB", "--max-fleet-memory"}},
		{"run fleet too big", []string{"run", "--fleet", f["fleet-big.yaml"]}, []string{"--fleet " + f["fleet-big.yaml"] + ": the fleet needs an estimated", "the groups' counts"}},
		{"run max fleet memory 0", []string{"run", "--max-fleet-memory", "0"}, []string{"--max-fleet-memory 0: must be a positive number of GiB"}},
		{"sweep vary replicas 20000", []string{"sweep", "--vary", "replicas=1,20000", "--out", out()}, []string{"replicas 20000: at most 10000"}},
		{"sweep vary replicas 8000", []string{"sweep", "--vary", "replicas=1,8000", "--out", out()}, []string{"--vary replicas=8000: the fleet needs", "--max-fleet-memory"}},
		{"tune replicas 10000", []string{"tune", "--replicas", "10000", "--out", out()}, []string{"--replicas 10000: the fleet needs"}},
		// D12: integer fields of fleet and experiments files.
		{"fleet tp 0", []string{"run", "--fleet", f["fleet-tp0.yaml"]}, []string{f["fleet-tp0.yaml"] + ": groups[0]: tp: must be at least 1, got 0"}},
		{"fleet max_num_seqs 0", []string{"run", "--fleet", f["fleet-seqs0.yaml"]}, []string{f["fleet-seqs0.yaml"] + ": groups[0]: overrides:", "engine.max_num_seqs: 0"}},
		{"fleet block_size 0", []string{"run", "--fleet", f["fleet-bs0.yaml"]}, []string{f["fleet-bs0.yaml"], "engine.block_size: 0"}},
		{"fleet count 0", []string{"run", "--fleet", f["fleet-count0.yaml"]}, []string{f["fleet-count0.yaml"] + ": groups[0]: count"}},
		{"validate latency max_num_seqs 0", []string{"validate", "latency", f["seqs0.json"], "--out", out()},
			[]string{f["seqs0.json"] + ": experiments[0] (r): engine.max_num_seqs: must be at least 1, got 0"}},
		{"validate latency max_num_seqs -7", []string{"validate", "latency", f["seqs-7.json"], "--out", out()},
			[]string{f["seqs-7.json"] + ": experiments[0] (r): engine.max_num_seqs: must be at least 1, got -7"}},
		{"calibrate max_num_seqs 0", []string{"calibrate", f["seqs0.json"], "--out", filepath.Join(f["dir"], "cal.yaml")},
			[]string{f["seqs0.json"] + ": experiments[0] (r): engine.max_num_seqs"}},
		{"calibrate total_gpu_kv_blocks 0", []string{"calibrate", f["blocks0.json"], "--out", filepath.Join(f["dir"], "cal.yaml")},
			[]string{f["blocks0.json"] + ": experiments[0] (r): engine.total_gpu_kv_blocks: must be at least 2, got 0"}},
		{"calibrate draws 0", []string{"calibrate", f["seqs0.json"], "--draws", "0", "--out", filepath.Join(f["dir"], "cal.yaml")},
			[]string{"--draws 0: must be at least 1"}},
		// D4: the size of a sweep.
		{"sweep of a million points", append([]string{"sweep", "--out", out()}, million...),
			[]string{"1,000,000 points", "--max-points", "--yes", "--random"}},
		{"sweep past --max-points", []string{"sweep", "--vary", "queue-scorer.weight=0:9:1", "--max-points", "5", "--out", out()},
			[]string{"10 points (queue-scorer.weight 10), more than the bound of 5 (--max-points)"}},
		{"sweep --max-points 0", []string{"sweep", "--vary", "queue-scorer.weight=1,2", "--max-points", "0", "--out", out()}, []string{"--max-points 0: must be in 1..10000000"}},
		// D11: the verbs' input errors.
		{"sweep out of another sweep", []string{"sweep", "--max-requests", "3", "--replicas", "1", "--vary", "queue-scorer.weight=1,3", "--out", other},
			[]string{"--out " + other + " holds a different sweep"}},
		{"sweep out not a sweep", []string{"sweep", "--vary", "queue-scorer.weight=1,3", "--out", f["notasweep"]},
			[]string{"--out: " + filepath.Join(f["notasweep"], "points.jsonl") + ":1: not an eppsim sweep points file"}},
		{"sweep dpi", []string{"sweep", "--vary", "queue-scorer.weight=1,3", "--dpi", "100000", "--out", out()}, []string{"--dpi 100000: must be in 10..1200"}},
		{"sweep merge missing", []string{"sweep", "merge", filepath.Join(f["dir"], "nope"), "--out", out()}, []string{filepath.Join(f["dir"], "nope")}},
		{"tune dpi", []string{"tune", "--dpi", "0", "--out", out()}, []string{"--dpi 0"}},
		{"epp hash block size 0", []string{"epp", "hash", "--model", "m", "--block-size", "0", "--request", f["bad.json"]}, []string{"--block-size 0: must be > 0"}},
		{"epp hash no model", []string{"epp", "hash", "--request", f["bad.json"]}, []string{"--model is required"}},
		{"epp hash bad JSON", []string{"epp", "hash", "--model", "m", "--request", f["bad.json"]}, []string{"--request " + f["bad.json"] + ": request body is not valid JSON"}},
		{"epp hash missing file", []string{"epp", "hash", "--model", "m", "--request", filepath.Join(f["dir"], "nope.json")}, []string{"--request: open " + filepath.Join(f["dir"], "nope.json")}},
		{"epp validate", []string{"epp", "validate", f["badplugin.yaml"]}, []string{f["badplugin.yaml"] + ":4: plugins[0].type"}},
		{"epp validate two", []string{"epp", "validate", f["badplugin.yaml"], f["badplugin.yaml"]}, []string{"2 of 2 configurations are invalid"}},
		{"epp explain no flags", []string{"epp", "explain"}, []string{"--endpoints and --request are required"}},
		{"epp explain bad config", append([]string{"epp", "explain", "--config", f["badplugin.yaml"]}, explainFiles...), []string{"--config: " + f["badplugin.yaml"] + ":4:"}},
		{"epp explain missing endpoints", []string{"epp", "explain", "--endpoints", filepath.Join(f["dir"], "nope.yaml"), "--request", explainFiles[3]}, []string{"--endpoints: open " + filepath.Join(f["dir"], "nope.yaml")}},
		{"epp explain endpoint without name", []string{"epp", "explain", "--endpoints", f["noname.yaml"], "--request", explainFiles[3]}, []string{"--endpoints " + f["noname.yaml"] + ": endpoints[0] has no name"}},
		{"epp explain no endpoints", []string{"epp", "explain", "--endpoints", f["noendpoints.yaml"], "--request", explainFiles[3]}, []string{"--endpoints " + f["noendpoints.yaml"] + ": lists no endpoints"}},
		{"epp explain missing request", []string{"epp", "explain", "--endpoints", explainFiles[1], "--request", filepath.Join(f["dir"], "nope.yaml")}, []string{"--request: open " + filepath.Join(f["dir"], "nope.yaml")}},
		{"trace synth out dir", []string{"trace", "synth", "--out", f["adir"]}, []string{"--out " + f["adir"] + ": is a directory"}},
		{"trace convert out dir", []string{"trace", "convert", "builtin:chat", "--out", f["adir"]}, []string{"--out " + f["adir"] + ": is a directory"}},
		{"trace synth from iperf out dir", []string{"trace", "synth", "--from", "inference-perf", f["bad.json"], "--out", f["adir"]}, []string{"--out " + f["adir"] + ": is a directory"}},
		{"trace synth sessions", []string{"trace", "synth", "--sessions", "-5", "--out", "-"}, []string{"--sessions -5"}},
		{"trace synth missing spec", []string{"trace", "synth", "--spec", filepath.Join(f["dir"], "nope.yaml"), "--out", "-"}, []string{"--spec: workload: open " + filepath.Join(f["dir"], "nope.yaml")}},
		{"trace inspect bytes per token", []string{"trace", "inspect", "builtin:chat", "--bytes-per-token", "-1"}, []string{"--bytes-per-token -1: must be positive"}},
		{"trace inspect trace block size", []string{"trace", "inspect", "builtin:chat", "--trace-block-size", "-3"}, []string{"--trace-block-size -3"}},
		{"diff tolerance", []string{"diff", f["dir"], f["dir"], "--tolerance", "-1"}, []string{"--tolerance -1: must be a finite number ≥ 0"}},
		{"diff missing", []string{"diff", filepath.Join(f["dir"], "a"), filepath.Join(f["dir"], "b")}, []string{"baseline: ", filepath.Join(f["dir"], "a")}},
		{"validate latency dpi", []string{"validate", "latency", f["seqs0.json"], "--dpi", "5", "--out", out()}, []string{"--dpi 5: must be in 10..1200"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			type result struct{ err error }
			done := make(chan result, 1)
			go func() {
				_, _, err := runCLI(t, c.args...)
				done <- result{err}
			}()
			var r result
			select {
			case r = <-done:
			case <-time.After(30 * time.Second):
				t.Fatalf("eppsim %s: still running after 30 s", strings.Join(c.args, " "))
			}
			if r.err == nil {
				t.Fatalf("eppsim %s: accepted", strings.Join(c.args, " "))
			}
			if code := exitCode(r.err); code != 2 {
				t.Errorf("exit code %d, want 2 (error %v)", code, r.err)
			}
			for _, w := range c.want {
				if !strings.Contains(r.err.Error(), w) {
					t.Errorf("error %q does not name %q", r.err, w)
				}
			}
		})
	}
}

// TestFinePeriodsAccepted: the least periods the bounds allow run (a
// short run at a 1 ms scrape and a 10 ms time series finishes).
func TestFinePeriodsAccepted(t *testing.T) {
	_, _, err := runCLI(t, "run", "--max-requests", "10", "--refresh-metrics-interval", "1ms", "--timeseries-interval", "10ms",
		"--dcgm-collect-interval", "1ms", "--out", filepath.Join(t.TempDir(), "out"), "--progress", "never")
	if err != nil {
		t.Fatal(err)
	}
}
