package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the test binary act as the eppsim command: the signal
// tests run it as a child process with EPPSIM_TEST_MAIN=1.
func TestMain(m *testing.M) {
	if os.Getenv("EPPSIM_TEST_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// badInputFiles writes the files the bad-input table refers to and returns
// their paths by name.
func badInputFiles(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{}
	write := func(name, content string) {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		files[name] = p
	}
	mooncake := `{"timestamp": 0, "input_length": 1100, "output_length": 50, "hash_ids": [0, 1, 2]}
{"timestamp": 500, "input_length": 700, "output_length": 20, "hash_ids": [0, 3]}
{"timestamp": 900, "input_length": 700, "output_length": 20, "hash_ids": [0, 4]}
`
	write("mooncake.jsonl", mooncake)
	write("first0.jsonl", `{"timestamp": 0, "input_length": 0, "output_length": 5, "hash_ids": [1]}`+"\n"+mooncake)
	write("middle.jsonl", strings.Replace(mooncake, `"input_length": 700, "output_length": 20, "hash_ids": [0, 3]`, `"input_length": 700, "output_length": -2, "hash_ids": [0, 3]`, 1))
	write("last.jsonl", mooncake+`{"timestamp": 950, "input_length": 70`+"\n")
	write("empty.jsonl", "")
	bin := make([]byte, 2048)
	for i := range bin {
		bin[i] = byte(i*37 + 11)
	}
	write("binary.bin", string(bin))
	write("unknown-plugin.yaml", "apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\nplugins:\n- type: nope\n")
	write("fleet-empty.yaml", "groups: []\n")
	write("fleet-typo.yaml", "groups:\n- count: 2\n  preset: llama-3.1-8b-h100\n  cuont: 3\n")
	write("not-a-dir", "x")
	if err := os.Mkdir(filepath.Join(dir, "earlier"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join("earlier", "summary.json"), "{}\n")
	files["earlier"] = filepath.Join(dir, "earlier")
	files["dir"] = dir
	return files
}

// TestBadInputs: every bad input ends within seconds with exit code 2 and a
// message that names the file, line, field or flag at fault, and leaves
// nothing in --out (a new directory is not created; an existing one keeps
// exactly what it held).
func TestBadInputs(t *testing.T) {
	f := badInputFiles(t)
	out := func() string { return filepath.Join(t.TempDir(), "out") }
	type tc struct {
		name string
		args []string
		want string // substring of the error
	}
	tr := func(name string) []string { return []string{"run", "--trace", f[name]} }
	cases := []tc{
		// The trace.
		{"first record invalid", tr("first0.jsonl"), f["first0.jsonl"] + ":1: input_length: must be > 0, got 0"},
		{"middle record invalid", tr("middle.jsonl"), f["middle.jsonl"] + ":2: output_length"},
		{"last record broken", tr("last.jsonl"), f["last.jsonl"] + ":4: "},
		{"mooncake read as openai", append(tr("mooncake.jsonl"), "--format", "openai"), f["mooncake.jsonl"] + ":1: "},
		{"mooncake read as sharegpt", append(tr("mooncake.jsonl"), "--format", "sharegpt"), f["mooncake.jsonl"]},
		{"mooncake read as alibaba", append(tr("mooncake.jsonl"), "--format", "alibaba"), f["mooncake.jsonl"] + ":1: "},
		{"mooncake read as azure", append(tr("mooncake.jsonl"), "--format", "azure"), f["mooncake.jsonl"]},
		{"empty trace", tr("empty.jsonl"), f["empty.jsonl"]},
		{"binary trace", tr("binary.bin"), f["binary.bin"]},
		{"missing trace", []string{"run", "--trace", filepath.Join(f["dir"], "nope.jsonl")}, "nope.jsonl"},
		{"unknown builtin", []string{"run", "--trace", "builtin:nope"}, "nope"},
		{"unknown format", []string{"run", "--format", "bogus"}, "--format"},
		{"unknown mode", []string{"run", "--mode", "sideways"}, "--mode"},
		// Engine and fleet flags: no silent substitution.
		{"kv blocks 0", []string{"run", "--kv-blocks", "0"}, "--kv-blocks 0: must be at least 2"},
		{"kv blocks negative", []string{"run", "--kv-blocks", "-5"}, "--kv-blocks -5: must be at least 2"},
		{"kv blocks 1", []string{"run", "--kv-blocks", "1"}, "--kv-blocks 1: must be at least 2"},
		{"max num seqs 0", []string{"run", "--max-num-seqs", "0"}, "--max-num-seqs 0"},
		{"max num batched tokens 0", []string{"run", "--max-num-batched-tokens", "0"}, "--max-num-batched-tokens 0"},
		{"old batched tokens name -1", []string{"run", "--max-batched-tokens", "-1"}, "--max-batched-tokens -1"},
		{"block size 0", []string{"run", "--block-size", "0"}, "--block-size 0"},
		{"negative offloading size", []string{"run", "--kv-offloading-size", "-1"}, "--kv-offloading-size -1: must be a number of GiB ≥ 0"},
		{"offloading size NaN", []string{"run", "--kv-offloading-size", "NaN"}, "--kv-offloading-size NaN"},
		{"offloading size too small", []string{"run", "--kv-offloading-size", "0.0001"}, "holds no block"},
		{"zero pcie bandwidth", []string{"run", "--kv-offloading-size", "8", "--offload-pcie-bandwidth", "0"}, "--offload-pcie-bandwidth 0: must be a positive number of GB/s"},
		{"negative job overhead", []string{"run", "--offload-job-overhead", "-1us"}, "--offload-job-overhead -1µs: must not be negative"},
		{"unknown upstream option", []string{"run", "--epp-upstream", "pr9999"}, `--epp-upstream "pr9999": unknown (have pr2292)`},
		{"replicas 0", []string{"run", "--replicas", "0"}, "--replicas 0"},
		{"unknown engine", []string{"run", "--engine", "tgi"}, `--engine: unknown engine "tgi" (have vllm, sglang)`},
		{"sglang with a CPU tier", []string{"run", "--engine", "sglang", "--kv-offloading-size", "8"}, "engine sglang: kv_offloading_size is vLLM's CPU KV tier"},
		{"sglang without memory", []string{"run", "--engine", "sglang", "--preset", "llama-3.1-70b-h100-tp4", "--tp", "1"}, "sglang"},
		{"unknown preset", []string{"run", "--preset", "nope"}, "--preset"},
		{"missing fleet", []string{"run", "--fleet", filepath.Join(f["dir"], "fleet.yaml")}, "fleet.yaml"},
		{"empty fleet", []string{"run", "--fleet", f["fleet-empty.yaml"]}, f["fleet-empty.yaml"] + ": groups"},
		{"fleet typo", []string{"run", "--fleet", f["fleet-typo.yaml"]}, "cuont"},
		// Environment and limits.
		{"negative kv event lag", []string{"run", "--kv-event-lag", "-5ms"}, "--kv-event-lag -5ms: must not be negative"},
		{"negative max requests", []string{"run", "--max-requests", "-1"}, "--max-requests -1: must not be negative"},
		{"negative warmup", []string{"run", "--warmup", "-5s"}, "--warmup -5s: must not be negative"},
		{"negative duration", []string{"run", "--duration", "-1s"}, "--duration -1s"},
		{"warmup past duration", []string{"run", "--warmup", "10s", "--duration", "5s"}, "--warmup 10s: must be shorter than --duration 5s"},
		{"zero scrape interval", []string{"run", "--refresh-metrics-interval", "0s"}, "--refresh-metrics-interval 0s: must be greater than 0"},
		{"zero sample interval", []string{"run", "--timeseries-interval", "0s"}, "--timeseries-interval"},
		{"zero dcgm collect interval", []string{"run", "--dcgm-collect-interval", "0s"}, "--dcgm-collect-interval 0s: must be greater than 0"},
		{"negative dcgm collect interval", []string{"run", "--dcgm-collect-interval", "-30s"}, "--dcgm-collect-interval -30s: must be greater than 0"},
		{"negative epp latency", []string{"run", "--epp-latency", "-1ms"}, "--epp-latency"},
		{"negative network latency", []string{"run", "--network-latency", "-1ms"}, "--network-latency"},
		{"negative gateway limit", []string{"run", "--gateway-max-requests", "-1"}, "--gateway-max-requests -1: must be > 0, or 0 for no limit"},
		{"gateway limit in a sweep", []string{"sweep", "--gateway-max-requests", "-5", "--vary", "queue-scorer.weight=1,2", "--out", out()}, "--gateway-max-requests -5"},
		{"negative time scale", []string{"run", "--time-scale", "-2"}, "--time-scale -2"},
		{"workers 0", []string{"run", "--workers", "0"}, "--workers 0"},
		{"bad progress mode", []string{"run", "--progress", "sometimes"}, "--progress"},
		{"seed not a number", []string{"run", "--seed", "-1"}, `"--seed"`},
		{"max requests not a number", []string{"run", "--max-requests", "abc"}, `"--max-requests"`},
		{"unknown flag", []string{"run", "--bogus"}, "--bogus"},
		{"positional argument", []string{"run", "extra"}, `"extra"`},
		{"unknown verb", []string{"nope"}, `"nope"`},
		// EPP configs.
		{"missing epp config", []string{"run", "--epp-config", filepath.Join(f["dir"], "nope.yaml")}, "nope.yaml"},
		{"misspelled baseline", []string{"run", "--epp-config", "orcale"},
			`orcale: no such file or directory (nor a built-in config: default, least-queue, oracle, random, round-robin, vllm-dp-lb; did you mean "oracle"?)`},
		{"unknown plugin", []string{"run", "--epp-config", f["unknown-plugin.yaml"]}, f["unknown-plugin.yaml"] + ":4: plugins[0].type"},
		{"second config bad", []string{"run", "--epp-config", "default", "--epp-config", f["unknown-plugin.yaml"]}, f["unknown-plugin.yaml"] + ":4:"},
		{"epp validate", []string{"epp", "validate", f["unknown-plugin.yaml"]}, f["unknown-plugin.yaml"] + ":4:"},
		// Output directories.
		{"out holds earlier results", []string{"run", "--max-requests", "5", "--out", f["earlier"]}, "--force"},
		{"out is a file", []string{"run", "--max-requests", "5", "--out", f["not-a-dir"], "--force"}, "not a directory"},
		// Other verbs.
		{"trace inspect first0", []string{"trace", "inspect", f["first0.jsonl"]}, f["first0.jsonl"] + ":1: input_length"},
		{"sweep without out", []string{"sweep", "--vary", "queue-scorer.weight=1,2"}, "--out"},
		{"sweep bad vary", []string{"sweep", "--vary", "queue-scorer.weight", "--out", out()}, "queue-scorer.weight"},
		{"sweep bad trace", []string{"sweep", "--trace", f["first0.jsonl"], "--vary", "queue-scorer.weight=1,2", "--out", out()}, f["first0.jsonl"] + ":1:"},
		{"sweep negative lag", []string{"sweep", "--kv-event-lag", "-1s", "--vary", "queue-scorer.weight=1,2", "--out", out()}, "--kv-event-lag"},
		{"tune bad budget", []string{"tune", "--budget", "-3", "--out", out()}, "--budget"},
		{"diff missing", []string{"diff", filepath.Join(f["dir"], "a"), filepath.Join(f["dir"], "b")}, "baseline"},
	}
	if len(cases) < 30 {
		t.Fatalf("only %d cases", len(cases))
	}
	before := snapshot(t, f["earlier"])
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := c.args
			dest := ""
			if args[0] == "run" && !contains(args, "--out") {
				dest = out()
				args = append(append([]string(nil), args...), "--out", dest)
			}
			type result struct {
				stderr string
				err    error
			}
			done := make(chan result, 1)
			go func() {
				_, stderr, err := runCLI(t, args...)
				done <- result{stderr, err}
			}()
			var r result
			select {
			case r = <-done:
			case <-time.After(30 * time.Second):
				t.Fatalf("eppsim %s: still running after 30 s", strings.Join(args, " "))
			}
			if r.err == nil {
				t.Fatalf("eppsim %s: accepted", strings.Join(args, " "))
			}
			if code := exitCode(r.err); code != 2 {
				t.Errorf("exit code %d, want 2 (error %v)", code, r.err)
			}
			if !strings.Contains(r.err.Error(), c.want) {
				t.Errorf("error %q does not name %q", r.err, c.want)
			}
			if dest != "" {
				if _, err := os.Stat(dest); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("--out %s was left behind (%v)", dest, err)
				}
			}
		})
	}
	if after := snapshot(t, f["earlier"]); after != before {
		t.Errorf("the earlier results changed: %q -> %q", before, after)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// snapshot lists a directory's entries (hidden ones included) with their
// sizes.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s:%d ", e.Name(), info.Size())
	}
	return b.String()
}

// TestRunOutForce: --force writes into a directory that holds earlier
// results; other files there are left alone.
func TestRunOutForce(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "mine.txt"), []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runCLI(t, "run", "--max-requests", "5", "--out", dir, "--force"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"summary.json", "requests.csv", "mine.txt"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Error(err)
		}
	}
}

// heavyTrace writes a Mooncake-format trace that takes the simulator many
// seconds, so that a signal reaches it mid-run.
func heavyTrace(t *testing.T) string {
	t.Helper()
	var b bytes.Buffer
	for i := range 20000 {
		fmt.Fprintf(&b, `{"timestamp": %d, "input_length": 1500, "output_length": 300, "hash_ids": [%d, %d, %d]}`+"\n",
			i*5, i%7, 1000+i, 2000+i)
	}
	p := filepath.Join(t.TempDir(), "heavy.jsonl")
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// startEppsim runs the test binary as eppsim with args.
func startEppsim(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "EPPSIM_TEST_MAIN=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &stdout, &stderr
}

// waitExit waits for cmd at most limit and returns its exit code and how
// long it took after the signal.
func waitExit(t *testing.T, cmd *exec.Cmd, limit time.Duration) (int, time.Duration) {
	t.Helper()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), time.Since(start)
	case <-time.After(limit):
		cmd.Process.Kill()
		t.Fatalf("still running %v after the signal", limit)
	}
	return 0, 0
}

// TestRunInterrupted: SIGINT or SIGTERM stops eppsim run at once: it prints
// "interrupted by" the signal, exits 130 (SIGINT) or 143 (SIGTERM) and
// leaves no file (temporary or spooled) and no new --out directory behind.
func TestRunInterrupted(t *testing.T) {
	trace := heavyTrace(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			// Two configs at once: both runs record into --out (one
			// spools), so every kind of temporary file exists.
			cmd, _, stderr := startEppsim(t, "run", "--trace", trace, "--replicas", "4", "--epp-config", "default",
				"--epp-config", "round-robin", "--out", out, "--progress", "never")
			waitForFiles(t, out, 3*time.Second)
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			code, took := waitExit(t, cmd, 10*time.Second)
			want := 128 + int(sig)
			if code != want || !strings.Contains(stderr.String(), "interrupted by "+signalName(sig)) {
				t.Fatalf("exit %d after %v, stderr %q; want %d and \"interrupted by %s\"", code, took, stderr, want, signalName(sig))
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				entries, _ := os.ReadDir(out)
				t.Fatalf("--out left behind: %v %v", err, entries)
			}
		})
	}
}

// waitForFiles waits until dir holds a file (the run has begun recording)
// or the time runs out.
func waitForFiles(t *testing.T, dir string, limit time.Duration) {
	t.Helper()
	for start := time.Now(); time.Since(start) < limit; time.Sleep(20 * time.Millisecond) {
		if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
			return
		}
	}
}

// TestSweepInterrupted: the first SIGTERM stops a sweep within seconds,
// even with long points in flight: exit 143, the log stays resumable, and
// the message says how to resume.
func TestSweepInterrupted(t *testing.T) {
	trace := heavyTrace(t)
	out := filepath.Join(t.TempDir(), "sweep")
	args := []string{"sweep", "--trace", trace, "--replicas", "2", "--vary", "queue-scorer.weight=1,2,3,4",
		"--workers", "2", "--out", out, "--progress", "never"}
	cmd, _, stderr := startEppsim(t, args...)
	waitForFiles(t, out, 3*time.Second)
	time.Sleep(300 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code, took := waitExit(t, cmd, 10*time.Second)
	if code != 143 || !strings.Contains(stderr.String(), "run the same command again to resume") {
		t.Fatalf("exit %d after %v, stderr %q", code, took, stderr)
	}
	if took > 5*time.Second {
		t.Errorf("took %v to stop", took)
	}
	// The log is intact: it has its header and no abandoned point.
	data, err := os.ReadFile(filepath.Join(out, "points.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(string(data)), "\n"); len(lines) != 1 || strings.Contains(string(data), `"error"`) {
		t.Fatalf("points.jsonl after the interrupt:\n%s", data)
	}
}
