// Command eppsim-regress is eppsim's own regression gate (make regress;
// docs/ci.md). It runs the pinned scenarios of testdata/regress/
// scenarios.yaml with the eppsim binary and compares each result, every
// field within the file's tolerance, with the committed baseline
// testdata/regress/NAME/summary.json using `eppsim diff --tolerance`. Any
// change in the simulated results fails the gate; an intended change is
// committed together with new baselines (make regress-update) and the
// diff's Markdown (out/regress/regress.md) in the commit message.
//
// Usage (from the repository root):
//
//	eppsim-regress [-eppsim bin/eppsim] [-dir testdata/regress] [-out out/regress] [-update]
//
// Scenarios whose `requires` path is missing (the shared Mooncake trace
// outside CI) are skipped with a message. Exit status: 0 every scenario
// matches (or -update wrote the baselines), 1 a result changed, 2 the gate
// could not run.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/yaml"
)

// scenarioFile is testdata/regress/scenarios.yaml.
type scenarioFile struct {
	// Tolerance is the relative tolerance on every number (float
	// formatting noise only: the simulator is deterministic).
	Tolerance float64    `json:"tolerance"`
	Scenarios []scenario `json:"scenarios"`
}

// scenario is one `eppsim run` command line.
type scenario struct {
	Name string `json:"name"`
	// Requires is a path that must exist for the scenario to run (else it
	// is skipped).
	Requires string   `json:"requires,omitempty"`
	Args     []string `json:"args"`
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

func loadScenarios(path string) (*scenarioFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f scenarioFile
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if !(f.Tolerance > 0) {
		return nil, fmt.Errorf("%s: tolerance must be positive, got %g", path, f.Tolerance)
	}
	if len(f.Scenarios) == 0 {
		return nil, fmt.Errorf("%s: no scenarios", path)
	}
	seen := map[string]bool{}
	for i, s := range f.Scenarios {
		switch {
		case !nameRE.MatchString(s.Name):
			return nil, fmt.Errorf("%s: scenarios[%d]: name %q must be lower-case letters, digits and dashes", path, i, s.Name)
		case seen[s.Name]:
			return nil, fmt.Errorf("%s: scenarios[%d]: duplicate name %q", path, i, s.Name)
		case len(s.Args) == 0:
			return nil, fmt.Errorf("%s: scenario %s: no args", path, s.Name)
		}
		for _, a := range s.Args {
			if a == "--out" || strings.HasPrefix(a, "--out=") || a == "--json" || strings.HasPrefix(a, "--json=") {
				return nil, fmt.Errorf("%s: scenario %s: %s is set by the gate", path, s.Name, a)
			}
		}
		seen[s.Name] = true
	}
	return &f, nil
}

// outcome of one scenario.
type outcome struct {
	status   string // ok, CHANGED, skipped, updated, ERROR
	markdown []byte // the diff's Markdown
	detail   string // error text or skip reason
	took     time.Duration
}

type gate struct {
	eppsim, dir, out string
	update           bool
	tolerance        float64
}

// wallClock matches the summary fields that differ between any two runs.
var wallClock = regexp.MustCompile(`"(wall_s|requests_per_wall_s)": [0-9.eE+-]+`)

// run executes one scenario and compares (or updates) its baseline.
func (g *gate) run(s scenario) outcome {
	start := time.Now()
	o := g.runScenario(s)
	o.took = time.Since(start)
	return o
}

func (g *gate) runScenario(s scenario) outcome {
	if s.Requires != "" {
		if _, err := os.Stat(s.Requires); err != nil {
			return outcome{status: "skipped", detail: s.Requires + " not found (CI has it)"}
		}
	}
	sdir := filepath.Join(g.out, s.Name)
	if err := os.RemoveAll(sdir); err != nil {
		return outcome{status: "ERROR", detail: err.Error()}
	}
	if err := os.MkdirAll(sdir, 0o755); err != nil {
		return outcome{status: "ERROR", detail: err.Error()}
	}
	runDir := filepath.Join(sdir, "run")
	args := append([]string{"run"}, s.Args...)
	args = append(args, "--out", runDir, "--progress", "never")
	var log bytes.Buffer
	cmd := exec.Command(g.eppsim, args...)
	cmd.Stdout, cmd.Stderr = &log, &log
	err := cmd.Run()
	if werr := os.WriteFile(filepath.Join(sdir, "run.log"), log.Bytes(), 0o644); werr != nil && err == nil {
		err = werr
	}
	if err != nil {
		return outcome{status: "ERROR", detail: fmt.Sprintf("eppsim %s: %v\n%s", strings.Join(args, " "), err, log.String())}
	}
	baseDir := filepath.Join(g.dir, s.Name)
	baseFile := filepath.Join(baseDir, "summary.json")
	var o outcome
	if _, err := os.Stat(baseFile); err == nil {
		o = g.diff(baseDir, runDir, filepath.Join(sdir, "diff"))
	} else if !g.update {
		return outcome{status: "ERROR", detail: fmt.Sprintf("no baseline %s (run make regress-update and commit it)", baseFile)}
	}
	if !g.update {
		return o
	}
	if o.status == "ERROR" {
		o.detail = "no comparison with the old baseline: " + o.detail
	}
	data, err := os.ReadFile(filepath.Join(runDir, "summary.json"))
	if err == nil {
		err = writeFileAtomic(baseFile, wallClock.ReplaceAll(data, []byte(`"$1": 0`)))
	}
	if err != nil {
		return outcome{status: "ERROR", detail: err.Error()}
	}
	o.status = "updated"
	return o
}

// diff runs eppsim diff in strict mode.
func (g *gate) diff(baseDir, runDir, out string) outcome {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(g.eppsim, "diff", baseDir, runDir, "--tolerance", strconv.FormatFloat(g.tolerance, 'g', -1, 64), "--out", out)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return outcome{status: "ok", markdown: stdout.Bytes()}
	case errors.As(err, &ee) && ee.ExitCode() == 1 && bytes.HasPrefix(stdout.Bytes(), []byte("## eppsim diff")):
		return outcome{status: "CHANGED", markdown: stdout.Bytes()}
	default:
		return outcome{status: "ERROR", detail: fmt.Sprintf("eppsim diff: %v\n%s", err, strings.TrimSpace(stderr.String()))}
	}
}

// writeFileAtomic writes data to a temporary file next to path and renames
// it into place.
func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if err := errors.Join(werr, cerr, os.Chmod(f.Name(), 0o644)); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// demote turns every Markdown heading one level deeper (the diffs nest
// under the scenario headings of regress.md).
func demote(md []byte) []byte {
	lines := bytes.SplitAfter(md, []byte("\n"))
	for i, l := range lines {
		if bytes.HasPrefix(l, []byte("#")) {
			lines[i] = append([]byte("#"), l...)
		}
	}
	return bytes.Join(lines, nil)
}

func main() {
	os.Exit(mainErr(os.Args[1:], os.Stdout, os.Stderr))
}

func mainErr(argv []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("eppsim-regress", flag.ContinueOnError)
	fs.SetOutput(stderr)
	g := &gate{}
	fs.StringVar(&g.eppsim, "eppsim", "bin/eppsim", "the eppsim binary")
	fs.StringVar(&g.dir, "dir", "testdata/regress", "directory of scenarios.yaml and the baselines")
	fs.StringVar(&g.out, "out", "out/regress", "directory for the runs, diffs and plots")
	fs.BoolVar(&g.update, "update", false, "rewrite the baselines from this run")
	if err := fs.Parse(argv); err != nil {
		return 2
	}
	sf, err := loadScenarios(filepath.Join(g.dir, "scenarios.yaml"))
	if err != nil {
		fmt.Fprintln(stderr, "eppsim-regress:", err)
		return 2
	}
	g.tolerance = sf.Tolerance
	if err := os.MkdirAll(g.out, 0o755); err != nil {
		fmt.Fprintln(stderr, "eppsim-regress:", err)
		return 2
	}
	// Scenarios run in parallel, one per core; results print in file order.
	results := make([]outcome, len(sf.Scenarios))
	sem := make(chan struct{}, max(runtime.NumCPU(), 1))
	var wg sync.WaitGroup
	for i, s := range sf.Scenarios {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			results[i] = g.run(s)
		})
	}
	wg.Wait()

	var md bytes.Buffer
	md.WriteString("# eppsim regression gate\n\n")
	code := 0
	for i, s := range sf.Scenarios {
		r := results[i]
		line := fmt.Sprintf("regress %-10s %s", s.Name, r.status)
		if r.status != "skipped" {
			line += fmt.Sprintf(" (%.1fs)", r.took.Seconds())
		}
		if r.detail != "" && r.status == "skipped" {
			line += ": " + r.detail
		}
		fmt.Fprintln(stdout, line)
		fmt.Fprintf(&md, "## Scenario %s: %s\n\n", s.Name, r.status)
		switch r.status {
		case "CHANGED":
			code = max(code, 1)
			stdout.Write(r.markdown)
			fmt.Fprintln(stdout)
		case "ERROR":
			code = 2
			fmt.Fprintln(stdout, "  "+strings.ReplaceAll(strings.TrimSpace(r.detail), "\n", "\n  "))
		case "updated":
			if bytes.Contains(r.markdown, []byte("changed beyond the tolerance")) {
				stdout.Write(r.markdown)
				fmt.Fprintln(stdout)
			} else if r.detail != "" {
				fmt.Fprintln(stdout, "  "+strings.ReplaceAll(strings.TrimSpace(r.detail), "\n", "\n  "))
			}
		}
		if r.markdown != nil {
			md.Write(demote(r.markdown))
		} else if r.detail != "" {
			md.WriteString(r.detail + "\n")
		}
		md.WriteString("\n")
	}
	if err := writeFileAtomic(filepath.Join(g.out, "regress.md"), md.Bytes()); err != nil {
		fmt.Fprintln(stderr, "eppsim-regress:", err)
		code = 2
	}
	fmt.Fprintf(stdout, "regress reports and plots: %s (regress.md; NAME/diff/diff.html, NAME/run/report.html)\n", g.out)
	switch {
	case g.update && code < 2:
		fmt.Fprintf(stdout, "baselines written to %s: commit them with the change, and paste %s into the commit message\n",
			g.dir, filepath.Join(g.out, "regress.md"))
		return 0
	case code == 1:
		fmt.Fprintln(stdout, "regress: simulated results changed. If intended, run make regress-update and commit the new baselines "+
			"with this Markdown in the commit message.")
	}
	return code
}
