package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestInterruptedWhileReading: the first signal stops a verb at once while
// it waits for its trace (issue #25 D9: run --trace FIFO without a writer
// ignored SIGTERM for 11 minutes; sleep 20 | eppsim run --trace /dev/stdin
// exited 18.6 s after it): opening a FIFO nobody writes, reading one whose
// writer went quiet, reading a pipe on stdin, and opening an
// --epp-config FIFO nobody writes (run, sweep, capacity, tune). The exit
// code is the signal's, and run --out leaves nothing behind. (A sweep refuses such a
// trace: TestSweepRefusesFIFOTrace.)
func TestInterruptedWhileReading(t *testing.T) {
	for _, tc := range []struct {
		name string
		sig  syscall.Signal
		// args gets the trace path (a FIFO) and the --out path.
		args  func(trace, out string) []string
		input string // "fifo": nobody writes; "partial": a writer writes part of a trace; "stdin": a quiet pipe on stdin
		wait  bool   // out holds files once the verb is under way
	}{
		{"run, FIFO without a writer", syscall.SIGTERM, func(trace, out string) []string {
			return []string{"run", "--trace", trace, "--out", out, "--progress", "never"}
		}, "fifo", true},
		{"run, FIFO gone quiet", syscall.SIGINT, func(trace, out string) []string {
			return []string{"run", "--trace", trace, "--epp-config", "default", "--epp-config", "round-robin", "--out", out, "--progress", "never"}
		}, "partial", true},
		{"run, quiet stdin", syscall.SIGTERM, func(_, out string) []string {
			return []string{"run", "--trace", "/dev/stdin", "--out", out, "--progress", "never"}
		}, "stdin", true},
		{"trace convert, FIFO without a writer", syscall.SIGINT, func(trace, out string) []string {
			return []string{"trace", "convert", trace, "--out", filepath.Join(filepath.Dir(out), "x.jsonl")}
		}, "fifo", false},
		// An --epp-config that is a FIFO without a writer (the FIFO given
		// here as the config; the trace is the built-in default): its open
		// blocked on the verb's goroutine, past SIGTERM.
		{"run, --epp-config FIFO without a writer", syscall.SIGTERM, func(config, out string) []string {
			return []string{"run", "--epp-config", config, "--max-requests", "5", "--out", out, "--progress", "never"}
		}, "fifo", false},
		{"sweep, --epp-config FIFO without a writer", syscall.SIGTERM, func(config, out string) []string {
			return []string{"sweep", "--epp-config", config, "--vary", "queue-scorer.weight=1,2", "--max-requests", "5", "--out", out, "--progress", "never"}
		}, "fifo", false},
		{"capacity, --epp-config FIFO without a writer", syscall.SIGINT, func(config, out string) []string {
			return []string{"capacity", "--epp-config", config, "--mode", "open-loop", "--replicas", "2", "--slo", "ttft_p99<=2s", "--out", out, "--progress", "never"}
		}, "fifo", false},
		{"tune, --epp-config FIFO without a writer", syscall.SIGTERM, func(config, out string) []string {
			return []string{"tune", "--epp-config", config, "--param", "queue-scorer.weight=0:5", "--budget", "4", "--out", out}
		}, "fifo", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			trace, out := filepath.Join(dir, "trace.jsonl"), filepath.Join(dir, "out")
			mkfifo(t, trace)
			cmd := exec.Command(os.Args[0], tc.args(trace, out)...)
			cmd.Env = append(os.Environ(), "EPPSIM_TEST_MAIN=1")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if tc.input == "stdin" {
				r, w, err := os.Pipe()
				if err != nil {
					t.Fatal(err)
				}
				defer w.Close()
				defer r.Close()
				cmd.Stdin = r
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			if tc.input == "partial" {
				w, err := os.OpenFile(trace, os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer w.Close()
				writeMooncakeLines(t, w, 2000)
			}
			if tc.wait {
				waitForFiles(t, out, 10*time.Second)
				time.Sleep(300 * time.Millisecond)
			} else {
				time.Sleep(time.Second)
			}
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			code, took := waitExit(t, cmd, 10*time.Second)
			if code != 128+int(tc.sig) || !strings.Contains(stderr.String(), signalName(tc.sig)) {
				t.Fatalf("exit %d after %v, stderr %q; want %d", code, took, stderr.String(), 128+int(tc.sig))
			}
			if took > time.Second {
				t.Errorf("took %v to stop", took)
			}
			if strings.HasPrefix(tc.name, "run") {
				if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("--out left behind: %v", err)
				}
			}
			// The blocked open of a FIFO without a writer returns now.
			if f, err := os.OpenFile(trace, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				f.Close()
			}
		})
	}
}

// TestSweepRefusesFIFOTrace: a verb that reads its trace more than once
// refuses a FIFO or a pipe at once (exit 2, naming --trace) instead of
// blocking on it, where SIGTERM did not stop it: a sweep and tune, which
// hash their trace and may read it once per round of points, and a
// capacity search, which counts it and reads it once per rate.
func TestSweepRefusesFIFOTrace(t *testing.T) {
	for _, tc := range []struct {
		verb string
		args []string
	}{
		{"a sweep", []string{"sweep", "--vary", "queue-scorer.weight=1,2"}},
		{"tune", []string{"tune", "--param", "queue-scorer.weight=0:5", "--budget", "4"}},
		{"a capacity search", []string{"capacity", "--mode", "open-loop", "--replicas", "2", "--slo", "ttft_p99<=2s"}},
	} {
		t.Run(tc.args[0], func(t *testing.T) {
			fifo := filepath.Join(t.TempDir(), "trace.jsonl")
			mkfifo(t, fifo)
			var err error
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _, err = runCLI(t, append(tc.args, "--trace", fifo, "--out", filepath.Join(t.TempDir(), "out"), "--progress", "never")...)
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				// Let the blocked open return.
				if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					f.Close()
				}
				t.Fatalf("%s blocked on the FIFO", tc.args[0])
			}
			if exitCode(err) != 2 || err == nil || !strings.Contains(err.Error(), "--trace "+fifo+" is a FIFO or pipe, and "+tc.verb+" reads its trace more than once") {
				t.Fatalf("err %v (exit %d)", err, exitCode(err))
			}
		})
	}
}
