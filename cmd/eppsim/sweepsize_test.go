package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSweepPrintsSize: a sweep says its size on stderr before it loads
// anything (issue #25 D4).
func TestSweepPrintsSize(t *testing.T) {
	_, stderr, err := runCLI(t, "sweep", "--vary", "queue-scorer.weight=0:9:1", "--vary", "prefix-cache-scorer.weight=1,2",
		"--epp-config", "/nonexistent.yaml", "--out", filepath.Join(t.TempDir(), "out"))
	if err == nil || !strings.Contains(stderr, "eppsim: sweep of 20 points (queue-scorer.weight 10 × prefix-cache-scorer.weight 2)") {
		t.Fatalf("stderr %q, err %v", stderr, err)
	}
}

// TestSweepMillionPointsSignal: a million-point sweep (--yes) answers
// SIGTERM within seconds (it used to validate every point first, with no
// signal check: 4 min 18 s after a SIGTERM at 60 s), and the log keeps
// the points it finished.
func TestSweepMillionPointsSignal(t *testing.T) {
	if testing.Short() {
		t.Skip("a child process sweeping for seconds")
	}
	out := filepath.Join(t.TempDir(), "sweep")
	cmd, _, stderr := startEppsim(t, "sweep", "--vary", "prefix-cache-scorer.weight=0:999:1", "--vary", "queue-scorer.weight=0:999:1",
		"--yes", "--max-requests", "5", "--replicas", "2", "--workers", "2", "--out", out, "--progress", "never")
	waitForFiles(t, out, 10*time.Second)
	time.Sleep(time.Second)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	code, took := waitExit(t, cmd, 10*time.Second)
	if code == 0 || !strings.Contains(stderr.String(), "of 1000000 points") || !strings.Contains(stderr.String(), "interrupted") {
		t.Fatalf("exit %d after %v, stderr %q", code, took, stderr)
	}
	if took > 3*time.Second {
		t.Errorf("took %v to stop", took)
	}
}
