package main

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
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
