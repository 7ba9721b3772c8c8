// Command eppsim simulates KV-cache-aware LLM request routing: a fleet of
// vLLM-like replicas served by the llm-d Endpoint Picker, driven by replayed
// or synthesized conversation traffic. See README.md for the verbs.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	if err := execute(newRootCmd()); err != nil {
		fmt.Fprintln(os.Stderr, "eppsim:", err)
		os.Exit(exitCode(err))
	}
}

// execute runs root. An error from before any verb ran — an unknown
// command or flag, a flag value that does not parse, wrong arguments — is
// a usage error and exits 2, like every other input error.
func execute(root *cobra.Command) error {
	started := false
	pre := root.PersistentPreRunE
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		started = true
		if pre != nil {
			return pre(cmd, args)
		}
		return nil
	}
	err := root.Execute()
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
