// Command eppsim simulates KV-cache-aware LLM request routing: a fleet of
// vLLM-like replicas served by the llm-d Endpoint Picker, driven by replayed
// or synthesized conversation traffic. See README.md for the verbs.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/eppsim/eppsim/internal/gctune"
)

func main() {
	// Keep a long replay's heap near its live data (internal/gctune);
	// GOGC or GOMEMLIMIT in the environment take precedence.
	gctune.Start(gctune.DefaultLimit)
	if err := execute(newRootCmd(), os.Args[0], os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "eppsim:", err)
		os.Exit(exitCode(err))
	}
}

// argvAnnotation is the root command's annotation that holds the command
// line, shell-quoted (commandLine).
const argvAnnotation = "eppsim.argv"

// execute runs root on args, as program name (argv[0]) would. An error
// from before any verb ran — an unknown command or flag, a flag value that
// does not parse, wrong arguments — is a usage error and exits 2, like
// every other input error.
func execute(root *cobra.Command, name string, args []string) error {
	root.SetArgs(args)
	if root.Annotations == nil {
		root.Annotations = map[string]string{}
	}
	root.Annotations[argvAnnotation] = shellQuote(append([]string{name}, args...))
	started := false
	prof := newProfiledRun(root.ErrOrStderr())
	pre := root.PersistentPreRunE
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		started = true
		if err := checkFlagValues(cmd); err != nil {
			return withExitCode(2, err)
		}
		if f := cmd.Flags().Lookup(profileFlag); f != nil {
			if err := prof.begin(cmd.Context(), f.Value.String()); err != nil {
				return err
			}
		}
		if pre != nil {
			return pre(cmd, args)
		}
		return nil
	}
	// The verbs' signalContext tells the profiler that the verb handles
	// signals itself.
	ctx := context.WithValue(context.Background(), handOverKey{}, signalHandOver(prof.handOver))
	err := root.ExecuteContext(ctx)
	if perr := prof.end(); err == nil {
		err = perr
	}
	var ee *exitError
	if err != nil && !started && !errors.As(err, &ee) {
		return withExitCode(2, err)
	}
	return err
}

// exitError carries a process exit code through cobra's error return.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// withExitCode wraps err so that main exits with code.
func withExitCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: code, err: err}
}

func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return 1
}

// commandLine is the full command line of cmd's invocation, shell-quoted,
// as summary.json records it.
func commandLine(cmd *cobra.Command) string {
	if s, ok := cmd.Root().Annotations[argvAnnotation]; ok {
		return s
	}
	return cmd.CommandPath()
}

// shellQuote joins args into one line a POSIX shell reads back as the
// same arguments: each argument with anything but letters, digits and
// -_./:=@%+, is single-quoted.
func shellQuote(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		safe := a != ""
		for _, c := range a {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_./:=@%+,", c)) {
				safe = false
				break
			}
		}
		if safe {
			out[i] = a
		} else {
			out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(out, " ")
}
