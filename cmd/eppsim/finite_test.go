package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// positional gives each verb that takes arguments some that pass its
// argument check (the float check runs before anything reads them).
var positional = map[string][]string{
	"eppsim diff":             {"a", "b"},
	"eppsim trace inspect":    {"x.jsonl"},
	"eppsim trace convert":    {"x.jsonl"},
	"eppsim sweep merge":      {"dir"},
	"eppsim calibrate":        {"runs"},
	"eppsim validate latency": {"runs"},
	"eppsim epp validate":     {"x.yaml"},
}

// TestFloatFlagsFinite: every floating-point flag of every verb refuses
// NaN and ±Inf with exit 2 and a message naming the flag (issue #25 D7:
// diff --tolerance NaN passed a tenfold TTFT as "no regression").
func TestFloatFlagsFinite(t *testing.T) {
	var cmds []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Runnable() {
			cmds = append(cmds, c)
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(newRootCmd())
	checked := 0
	for _, c := range cmds {
		path := c.CommandPath()
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if !strings.HasPrefix(f.Value.Type(), "float") {
				return
			}
			for _, v := range []string{"NaN", "+Inf", "-Inf", "inf"} {
				args := append(strings.Fields(path)[1:], positional[path]...)
				args = append(args, "--"+f.Name+"="+v)
				checked++
				_, _, err := runCLI(t, args...)
				if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), "--"+f.Name) {
					t.Errorf("eppsim %s: exit %d, %v; want exit 2 naming --%s", strings.Join(args, " "), exitCode(err), err, f.Name)
				}
			}
		})
	}
	if checked < 40 {
		t.Fatalf("only %d flag values checked", checked)
	}
	// The case of the issue.
	_, _, err := runCLI(t, "diff", "a", "b", "--no-default-thresholds", "--tolerance", "NaN")
	if exitCode(err) != 2 || !strings.Contains(err.Error(), "--tolerance NaN: must be a finite number") {
		t.Errorf("diff --tolerance NaN: exit %d, %v", exitCode(err), err)
	}
}
