package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// isProfile fails the test unless path holds a pprof profile (gzipped
// protobuf).
func isProfile(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
		t.Fatalf("profile of %d bytes does not start with the gzip magic", len(data))
	}
}

// TestCPUProfileFlag: --cpuprofile writes a pprof profile (gzipped
// protobuf) once the command has run, also when it fails (issue #25 D15:
// the file stayed empty), and a profile file that cannot be created, or a
// directory, is a clear error (exit 2, naming the flag) before anything
// runs.
func TestCPUProfileFlag(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.prof")
	if _, _, err := runCLI(t, "run", "--max-requests", "10", "--replicas", "2", "--cpuprofile", path); err != nil {
		t.Fatal(err)
	}
	isProfile(t, path)

	failed := filepath.Join(t.TempDir(), "failed.prof")
	if _, _, err := runCLI(t, "run", "--trace", filepath.Join(t.TempDir(), "missing.jsonl"), "--cpuprofile", failed); exitCode(err) != 2 {
		t.Fatalf("run of a missing trace: %v (exit %d)", err, exitCode(err))
	}
	isProfile(t, failed)

	for _, bad := range []struct{ path, want string }{
		{filepath.Join(t.TempDir(), "missing-dir", "cpu.prof"), "no such file or directory"},
		{t.TempDir(), "is a directory"},
	} {
		out, _, err := runCLI(t, "run", "--max-requests", "10", "--cpuprofile", bad.path)
		if err == nil || out != "" || exitCode(err) != 2 || !strings.Contains(err.Error(), "--cpuprofile "+bad.path) || !strings.Contains(err.Error(), bad.want) {
			t.Fatalf("--cpuprofile %s: err %v (exit %d), output %q", bad.path, err, exitCode(err), out)
		}
	}
}

// TestCPUProfileInterrupted: a signal that stops a verb still writes
// --cpuprofile (issue #25 D15: an interrupted sweep or run left a 0-byte
// file), with the signal's exit code: verbs that stop on the signal
// (run, sweep) write it as they return, and for a verb that leaves
// signals alone (trace inspect, here blocked opening a FIFO without a
// writer) the profiler writes it and exits.
func TestCPUProfileInterrupted(t *testing.T) {
	trace := heavyTrace(t)
	for _, tc := range []struct {
		name string
		sig  syscall.Signal
		args func(dir string) []string
		wait string // a directory (under dir) that holds files once the verb is under way; "": sleep
	}{
		{"run", syscall.SIGINT, func(dir string) []string {
			return []string{"run", "--trace", trace, "--replicas", "4", "--out", filepath.Join(dir, "out"), "--progress", "never"}
		}, "out"},
		{"sweep", syscall.SIGTERM, func(dir string) []string {
			return []string{"sweep", "--trace", trace, "--replicas", "2", "--vary", "queue-scorer.weight=1,2", "--workers", "2",
				"--out", filepath.Join(dir, "out"), "--progress", "never"}
		}, "out"},
		{"trace inspect", syscall.SIGTERM, func(dir string) []string {
			fifo := filepath.Join(dir, "fifo")
			mkfifo(t, fifo)
			return []string{"trace", "inspect", fifo}
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			prof := filepath.Join(dir, "cpu.prof")
			cmd, _, stderr := startEppsim(t, append(tc.args(dir), "--cpuprofile", prof)...)
			if tc.wait != "" {
				waitForFiles(t, filepath.Join(dir, tc.wait), 5*time.Second)
			} else {
				time.Sleep(500 * time.Millisecond)
			}
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			code, took := waitExit(t, cmd, 10*time.Second)
			if code != 128+int(tc.sig) || !strings.Contains(stderr.String(), signalName(tc.sig)) {
				t.Fatalf("exit %d after %v, stderr %q; want %d", code, took, stderr, 128+int(tc.sig))
			}
			isProfile(t, prof)
			if left, _ := filepath.Glob(filepath.Join(dir, ".cpu.prof*")); len(left) != 0 {
				t.Errorf("temporary files left: %v", left)
			}
		})
	}
}
