package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"sync"
	"syscall"

	"github.com/spf13/cobra"
)

// profileFlag is the root's --cpuprofile.
const profileFlag = "cpuprofile"

// addProfileFlag gives every verb --cpuprofile FILE: a Go CPU profile of
// the whole command, for `go tool pprof` (how eppsim's own hot paths were
// found; see README "Performance"). execute starts it once the verb's
// flags have parsed and writes it however the verb ends: success, error
// or signal (profiledRun).
func addProfileFlag(root *cobra.Command) {
	root.PersistentFlags().String(profileFlag, "", "write a Go CPU profile of the command to this file (written when the command ends, however it ends)")
}

// A cpuProfile is --cpuprofile's profile being recorded into its file
// (checkOutFile's rules: a temporary file renamed into place, or a device
// or FIFO written through).
type cpuProfile struct {
	f    *outFile
	once sync.Once
	err  error
}

// startProfile starts the CPU profile of the command into path.
func startProfile(ctx context.Context, path string) (*cpuProfile, error) {
	t, err := checkOutFile("--"+profileFlag, path)
	if err != nil {
		return nil, err
	}
	f, err := t.create(ctx)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Abort()
		return nil, t.wrap(err)
	}
	return &cpuProfile{f: f}, nil
}

// stop ends the profile and completes its file. Only the first call does
// anything; it may come from any goroutine.
func (p *cpuProfile) stop() error {
	p.once.Do(func() {
		pprof.StopCPUProfile()
		p.err = p.f.Commit()
	})
	return p.err
}

// profiledRun is the CPU profiling of one execute: it starts the profile
// when the verb begins (begin, from the root's PersistentPreRunE) and
// ends it when execute returns (end). Meanwhile, the first SIGINT or
// SIGTERM writes the profile and exits 128 + the signal's number, unless
// the verb has called signalContext (handOver): such a verb stops on the
// signal and returns, and end writes the profile then.
type profiledRun struct {
	stderr io.Writer

	mu       sync.Mutex
	prof     *cpuProfile
	signals  chan os.Signal // nil until begin
	handed   chan struct{}  // closed by handOver
	ended    chan struct{}  // closed by end
	isHanded bool
}

func newProfiledRun(stderr io.Writer) *profiledRun {
	return &profiledRun{stderr: stderr, handed: make(chan struct{}), ended: make(chan struct{})}
}

// begin starts profiling into path (nothing when path is empty) and
// catches the signals until the verb takes them over.
func (r *profiledRun) begin(ctx context.Context, path string) error {
	if path == "" {
		return nil
	}
	p, err := startProfile(ctx, path)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.prof = p
	if r.isHanded {
		return nil
	}
	r.signals = make(chan os.Signal, 1)
	signal.Notify(r.signals, os.Interrupt, syscall.SIGTERM)
	go r.watch(r.signals)
	return nil
}

// watch waits for a signal the verb does not handle.
func (r *profiledRun) watch(ch chan os.Signal) {
	select {
	case sig := <-ch:
		r.mu.Lock()
		handed := r.isHanded
		r.mu.Unlock()
		if handed {
			return // the verb got the signal too, and stops
		}
		signal.Stop(ch)
		if err := r.prof.stop(); err != nil {
			fmt.Fprintln(r.stderr, "eppsim:", err)
		}
		fmt.Fprintf(r.stderr, "eppsim: %v by %s\n", errInterrupted, signalName(sig))
		os.Exit(signalExitCode(sig))
	case <-r.handed:
	case <-r.ended:
	}
}

// handOver is signalContext's call: the verb handles the signals now.
func (r *profiledRun) handOver() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.isHanded {
		return
	}
	r.isHanded = true
	if r.signals != nil {
		signal.Stop(r.signals)
	}
	close(r.handed)
}

// end writes the profile, if one is being recorded.
func (r *profiledRun) end() error {
	r.mu.Lock()
	p, sigs := r.prof, r.signals
	r.mu.Unlock()
	close(r.ended)
	if sigs != nil {
		signal.Stop(sigs)
	}
	if p == nil {
		return nil
	}
	return p.stop()
}
