package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestInterruptedExitCode: a verb stopped by a signal exits 128 + the
// signal's number (130 SIGINT, 143 SIGTERM) and names the signal; a
// context cancelled without one exits 130. The error wraps what the verb
// returned.
func TestInterruptedExitCode(t *testing.T) {
	verbErr := errors.New("sweep interrupted after 3 of 8 points")
	for _, tc := range []struct {
		name  string
		cause error
		err   error
		code  int
		msg   string
	}{
		{"SIGINT", &signalCause{syscall.SIGINT}, nil, 130, "interrupted by SIGINT"},
		{"SIGTERM", &signalCause{syscall.SIGTERM}, nil, 143, "interrupted by SIGTERM"},
		{"SIGTERM, verb's error", &signalCause{syscall.SIGTERM}, verbErr, 143, "SIGTERM: sweep interrupted after 3 of 8 points"},
		{"cancelled", nil, nil, 130, "interrupted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			cancel(tc.cause)
			err := interrupted(ctx, tc.err)
			if got := exitCode(err); got != tc.code {
				t.Errorf("exit code %d, want %d", got, tc.code)
			}
			if err.Error() != tc.msg {
				t.Errorf("message %q, want %q", err, tc.msg)
			}
			want := tc.err
			if want == nil {
				want = errInterrupted
			}
			if !errors.Is(err, want) {
				t.Errorf("%v does not wrap %v", err, want)
			}
		})
	}
}

// TestSignalContextHandsOver: a verb's signalContext tells execute's
// handler (the --cpuprofile one) that the verb now handles the signals.
func TestSignalContextHandsOver(t *testing.T) {
	called := 0
	ctx := context.WithValue(context.Background(), handOverKey{}, signalHandOver(func() { called++ }))
	sctx, stop := signalContext(ctx)
	stop()
	if called != 1 {
		t.Fatalf("hand-over called %d times, want 1", called)
	}
	if !strings.Contains(context.Cause(sctx).Error(), "canceled") {
		t.Fatalf("stopped context's cause %v", context.Cause(sctx))
	}
}

// TestVerbsExitWithSignal: tune, capacity, calibrate and validate latency exit with
// the code of the signal that stops them (130 SIGINT, 143 SIGTERM), name
// it, and write no output — capacity only its run log, from which it
// resumes (run, sweep, trace synth/convert: their own tests; the
// mapping: TestInterruptedExitCode).
func TestVerbsExitWithSignal(t *testing.T) {
	trace := heavyTrace(t)
	for _, tc := range []struct {
		name string
		sig  syscall.Signal
		args func(out string) []string
	}{
		{"tune", syscall.SIGTERM, func(out string) []string {
			return []string{"tune", "--trace", trace, "--replicas", "2", "--param", "queue-scorer.weight", "--budget", "50", "--out", out, "--progress", "never"}
		}},
		{"capacity", syscall.SIGINT, func(out string) []string {
			return []string{"capacity", "--trace", trace, "--replicas", "2", "--slo", "ttft_p99<=1000s", "--out", out, "--progress", "never"}
		}},
		{"calibrate", syscall.SIGINT, func(out string) []string {
			return []string{"calibrate", resultsDirs.codegen, "--budget", "100000", "--quiet", "--out", out}
		}},
		{"validate latency", syscall.SIGTERM, func(out string) []string {
			// The overloaded run's 1,448-token outputs keep it busy for
			// seconds, well past the signal.
			return []string{"validate", "latency", resultsDirs.codegen, resultsDirs.mixtral, "../../latency/testdata/results/llama-2-7b-tp1-reasoning-overloaded", "--out", out, "--workers", "1"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			cmd, _, stderr := startEppsim(t, tc.args(out)...)
			time.Sleep(700 * time.Millisecond)
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			code, took := waitExit(t, cmd, 10*time.Second)
			if code != 128+int(tc.sig) || !strings.Contains(stderr.String(), signalName(tc.sig)) {
				t.Fatalf("exit %d after %v, stderr %q; want %d", code, took, stderr, 128+int(tc.sig))
			}
			if tc.name == "capacity" {
				// The run log appears once the traffic is counted, which a
				// loaded machine may not reach before the signal.
				entries, err := os.ReadDir(out)
				if !errors.Is(err, os.ErrNotExist) && (err != nil || len(entries) != 1 || entries[0].Name() != "runs.jsonl") {
					t.Errorf("%s holds %v (%v), want nothing or only runs.jsonl", out, entries, err)
				}
				return
			}
			if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s written: %v", out, err)
			}
		})
	}
}
