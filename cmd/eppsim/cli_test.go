package main

import (
	"bytes"
	"testing"
)

// runCLI executes the eppsim root command with args and returns what it
// wrote to stdout and stderr.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	root := newRootCmd()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	err = execute(root, "eppsim", args)
	return out.String(), errb.String(), err
}
