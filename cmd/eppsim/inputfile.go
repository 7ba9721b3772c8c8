package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/eppsim/eppsim/workload"
)

// checkRereadableTrace refuses, for a verb that reads its trace more than
// once (sweep and tune: they hash the file to resume, then read it once
// per round of points; capacity: it counts the trace, then reads it once
// per rate), a trace that can be read only once: a FIFO, a pipe
// (/dev/stdin) or another non-regular file. Such a verb would otherwise
// hash away the input, or wait forever for a second writer. builtin:
// workloads are fine; an inference-perf: config is the file checked.
func checkRereadableTrace(verb, trace string) error {
	if strings.HasPrefix(trace, workload.BuiltinPrefix) {
		return nil
	}
	path := strings.TrimPrefix(trace, workload.InferencePerfPrefix)
	st, err := os.Stat(path)
	if err != nil || st.Mode().IsRegular() || st.IsDir() {
		return nil // reading it reports the problem
	}
	return fmt.Errorf("--trace %s is %s, and %s reads its trace more than once: give a regular file (trace convert %s --out FILE makes one)",
		trace, strings.TrimPrefix(fileKind(st.Mode()), "not "), verb, trace)
}
