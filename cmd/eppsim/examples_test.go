package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/workload"
)

// exampleCommands returns the eppsim command lines of a command's Example
// text, continuation lines joined, split into words as a shell would
// (single and double quotes).
func exampleCommands(t *testing.T, example string) [][]string {
	t.Helper()
	var cmds [][]string
	text := strings.ReplaceAll(example, "\\\n", " ")
	for _, line := range strings.Split(text, "\n") {
		words := shellWords(t, strings.TrimSpace(line))
		if len(words) > 0 && words[0] == "eppsim" {
			cmds = append(cmds, words[1:])
		}
	}
	return cmds
}

func shellWords(t *testing.T, s string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	in := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case unicode.IsSpace(r):
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if quote != 0 {
		t.Fatalf("unbalanced quote in %q", s)
	}
	if in {
		words = append(words, cur.String())
	}
	return words
}

// TestHelpExamplesRun runs every Example of every verb, in order, in an
// empty directory: the files they name must be the ones earlier example
// lines create. Simulations are cut short (--max-requests, --budget) and
// the whole example must succeed (diff may report a regression: exit 1).
func TestHelpExamplesRun(t *testing.T) {
	var visit func(c *cobra.Command)
	var all []*cobra.Command
	visit = func(c *cobra.Command) {
		if c.Example != "" {
			all = append(all, c)
		}
		for _, sub := range c.Commands() {
			visit(sub)
		}
	}
	visit(newRootCmd())
	if len(all) < 4 {
		t.Fatalf("only %d commands have examples", len(all))
	}
	// The shared folder's absolute path, before the subtests change the
	// working directory.
	shared, err := filepath.Abs(sharedDir)
	if err != nil {
		t.Fatal(err)
	}
	// Examples on the shared measured runs read the first three of them
	// (two of Llama-2-7B's sustained runs and its overloaded one): the
	// verb, its flags and its outputs are the example's, at a size like the
	// other verbs' cut-short simulations. The whole file's validation is
	// latency's TestLongShippedCalibration, which make test-long runs; the
	// example used to repeat it (about 150 s of make test-long).
	experiments := filepath.Join(shared, "latency", "experiments.json")
	subset := filepath.Join(t.TempDir(), "experiments-first-3.json")
	for _, c := range all {
		t.Run(strings.ReplaceAll(c.CommandPath(), " ", "_"), func(t *testing.T) {
			t.Chdir(t.TempDir())
			for _, args := range exampleCommands(t, c.Example) {
				// Examples on the shared measured runs read them from the
				// project's shared folder; they are whole-file runs, so
				// make test (-short) leaves them to make test-long.
				if usesShared(args) {
					if testing.Short() {
						t.Skipf("eppsim %s: reads ../shared (make test-long runs it)", strings.Join(args, " "))
					}
					if _, err := os.Stat(shared); err != nil {
						t.Skipf("%s not present", sharedDir)
					}
					for i := range args {
						args[i] = strings.Replace(args[i], "../shared/", shared+"/", 1)
						if args[i] == experiments {
							writeFirstExperiments(t, experiments, subset, 3)
							args[i] = subset
						}
					}
				}
				switch {
				case args[0] == "sweep" && len(args) > 1 && args[1] == "merge":
				case args[0] == "run" || args[0] == "sweep":
					args = append(args, "--max-requests", "20", "--replicas", "2")
				case args[0] == "calibrate":
					args = append(args, "--budget", "3", "--stage-limit", "20", "--quiet")
				case args[0] == "capacity" && len(args) > 1 && args[1] != "merge":
					args = append(args, "--max-requests", "40", "--replicas", "2", "--max-factor", "16")
				case args[0] == "tune":
					args = append(args, "--max-requests", "20", "--replicas", "2", "--budget", "6", "--seeds", "1")
				}
				_, stderr, err := runCLI(t, args...)
				if err != nil && !(args[0] == "diff" && exitCode(err) == 1) {
					t.Fatalf("eppsim %s: %v\n%s", strings.Join(args, " "), err, stderr)
				}
			}
		})
	}
}

// TestSharedFlagsAgree: every verb that reads traces describes --format,
// --mode and --seed alike (same type, same help), and run's help lists
// the presets.
func TestSharedFlagsAgree(t *testing.T) {
	root := newRootCmd()
	var readers []*cobra.Command
	for _, path := range [][]string{{"run"}, {"sweep"}, {"tune"}, {"trace", "inspect"}, {"trace", "convert"}} {
		c, _, err := root.Find(path)
		if err != nil {
			t.Fatal(err)
		}
		readers = append(readers, c)
	}
	for _, name := range []string{"format", "mode", "seed"} {
		first := readers[0].Flags().Lookup(name)
		for _, c := range readers {
			f := c.Flags().Lookup(name)
			if f == nil {
				t.Errorf("%s has no --%s", c.CommandPath(), name)
				continue
			}
			if f.Value.Type() != first.Value.Type() || f.Usage != first.Usage || f.DefValue != first.DefValue {
				t.Errorf("--%s: %s says %s %q (default %q), %s says %s %q (default %q)", name,
					readers[0].CommandPath(), first.Value.Type(), first.Usage, first.DefValue,
					c.CommandPath(), f.Value.Type(), f.Usage, f.DefValue)
			}
		}
	}
	preset := readers[0].Flags().Lookup("preset").Usage
	for _, name := range replica.PresetNames() {
		if !strings.Contains(preset, name) {
			t.Errorf("run --preset help %q does not list %s", preset, name)
		}
	}
	// Every format name in the help parses.
	help := readers[0].Flags().Lookup("format").Usage
	for _, word := range strings.Split(help[strings.Index(help, ":")+1:], ",") {
		name := strings.Fields(word)[0]
		if _, err := parseFormatName(name); err != nil {
			t.Errorf("--format help names %q: %v", name, err)
		}
	}
}

func parseFormatName(s string) (string, error) {
	f, err := workload.ParseFormat(s)
	return string(f), err
}

// sharedDir is the project's shared folder, from this package's directory.
const sharedDir = "../../../shared"

// writeFirstExperiments writes to out the experiments file in with its
// first n runs only (every other top-level field kept), unless out exists.
func writeFirstExperiments(t *testing.T, in, out string, n int) {
	t.Helper()
	if _, err := os.Stat(out); err == nil {
		return
	}
	data, err := os.ReadFile(in)
	if err != nil {
		t.Fatal(err)
	}
	var file map[string]json.RawMessage
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatalf("%s: %v", in, err)
	}
	var runs []json.RawMessage
	if err := json.Unmarshal(file["experiments"], &runs); err != nil || len(runs) < n {
		t.Fatalf("%s: %d runs (%v), want at least %d", in, len(runs), err, n)
	}
	if file["experiments"], err = json.Marshal(runs[:n]); err != nil {
		t.Fatal(err)
	}
	if data, err = json.Marshal(file); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func usesShared(args []string) bool {
	for _, a := range args {
		if strings.HasPrefix(a, "../shared/") {
			return true
		}
	}
	return false
}
