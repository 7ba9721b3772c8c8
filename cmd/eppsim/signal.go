package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/eppsim/eppsim/scenario"
)

// Signals. A verb that has something to clean up or stop (run, sweep, tune,
// calibrate, validate latency, trace synth and convert) calls
// signalContext: the first SIGINT or SIGTERM cancels its context, the verb
// stops, removes what it had not finished and returns interrupted(ctx, …),
// which exits 128 + the signal's number (130 SIGINT, 143 SIGTERM, the shell
// convention); a second signal kills the process as usual. The other verbs
// leave the signals alone (a signal kills them, which a shell reports as
// the same 130 or 143), except that with --cpuprofile execute catches the
// first one to write the profile before exiting with that code.

// signalCause is the cause of a signalContext's cancellation: the signal
// received.
type signalCause struct{ sig os.Signal }

func (c *signalCause) Error() string { return signalName(c.sig) + " received" }

// signalName is SIGINT or SIGTERM (the signal's own name otherwise).
func signalName(sig os.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return sig.String()
}

// signalExitCode is the exit code for a process stopped by sig: 128 + its
// number (130 for SIGINT, 143 for SIGTERM).
func signalExitCode(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 130
}

// signalHandOver is the value of execute's context that a verb's
// signalContext calls: from then on the verb handles the signals, and
// execute's own handler (--cpuprofile's) lets them be.
type signalHandOver func()

type handOverKey struct{}

// signalContext is ctx cancelled by the first SIGINT or SIGTERM, with a
// *signalCause as context.Cause; the handler is removed then, so that a
// second signal kills the process. stop removes it too.
func signalContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx == nil {
		ctx = context.Background()
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	// After Notify: no signal gets the default action in between.
	if h, ok := ctx.Value(handOverKey{}).(signalHandOver); ok {
		h()
	}
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		select {
		case sig := <-ch:
			signal.Stop(ch)
			cancel(&signalCause{sig})
		case <-ctx.Done():
			signal.Stop(ch)
		}
	}()
	return ctx, func() { cancel(nil) }
}

// errInterrupted ends a verb stopped by a signal (or by its context).
var errInterrupted = errors.New("interrupted")

// interrupted is the error of a verb that stopped because ctx ended, err
// (nil: errInterrupted) with the signal named ("interrupted by SIGTERM",
// "SIGTERM: sweep interrupted after …"), exiting 128 + the signal's
// number; a context cancelled otherwise (a test's, a parent's) exits 130 as
// an interrupt does.
func interrupted(ctx context.Context, err error) error {
	var sc *signalCause
	if !errors.As(context.Cause(ctx), &sc) {
		if err == nil {
			err = errInterrupted
		}
		return withExitCode(130, err)
	}
	if err == nil {
		err = fmt.Errorf("%w by %s", errInterrupted, signalName(sc.sig))
	} else {
		err = fmt.Errorf("%s: %w", signalName(sc.sig), err)
	}
	return withExitCode(signalExitCode(sc.sig), err)
}

// loadEPP loads e's config on a goroutine of its own and waits for it or
// for ctx, so that an --epp-config whose open blocks (a FIFO with no
// writer) does not keep the first signal from stopping the verb (a
// process substitution, <(...), is a FIFO whose writer comes). When ctx
// ends first the error is interrupted(ctx, nil); the goroutine, still
// blocked, ends with the process.
func loadEPP(ctx context.Context, e scenario.EPP, seed uint64) (*scenario.Loaded, error) {
	type loaded struct {
		l   *scenario.Loaded
		err error
	}
	done := make(chan loaded, 1)
	go func() {
		l, err := e.Load(seed)
		done <- loaded{l, err}
	}()
	select {
	case r := <-done:
		return r.l, r.err
	case <-ctx.Done():
		return nil, interrupted(ctx, nil)
	}
}
