package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/spf13/cobra"

	"github.com/eppsim/eppsim/report"
)

type diffFlags struct {
	failOn        []string
	noDefaults    bool
	tolerance     float64
	out           string
	jsonOut       bool
	allowMismatch bool
	onlyCommon    bool
	dpi           int
	force         bool
}

func newDiffCmd() *cobra.Command {
	f := &diffFlags{}
	cmd := &cobra.Command{
		Use:   "diff BASELINE CURRENT",
		Short: "Compare two runs and decide whether CURRENT regressed (exit 0 ok, 1 regression, 2 unusable input)",
		Long: `diff compares two eppsim results config by config and prints a Markdown table (metric,
baseline, current, change, threshold, verdict) for a CI job summary or a PR comment.

BASELINE and CURRENT are each a summary.json (or the --out directory of eppsim run that holds
it) or the saved output of eppsim run --json; a quoted glob pattern ('out/main-seed*') merges
several, e.g. one run per seed. Configs are paired by name; when each side has one config, the
two are compared whatever their names. Both sides must have run the same workload on
the same fleet with the same seeds, or diff refuses (exit 2) and says what differs.

Thresholds: --fail-on METRIC:+N% fails when METRIC grows by more than N% of the baseline,
METRIC:-N when it falls by more than N (absolute); METRIC is the dotted path of a number in the
summary JSON (latency_ms.ttft.p99, throughput.requests_per_s, cache.true_hit_ratio,
prediction.approx.mae, ...). Repeat it to add or override checks; METRIC:off drops one. The
defaults are ` + strings.Join(report.DefaultThresholds, ", ") + `.

Several runs of one config with different seeds (from a glob of per-seed runs, or names like
"default", "default#2", "x seed=2"; configs equal apart from the seed) are compared by their means: a change fails only
when it exceeds both the threshold and the noise band, 2·sd(c_i − b_i)/√n over the per-seed
differences (both sides ran the same seeds, as diff requires unless --allow-mismatch), else
2·sqrt(sd_b²/n_b + sd_c²/n_c).

--tolerance R is the strict mode of the regression gate: every field of every run (the run
config included; wall-clock fields, sim.events and the eppsim version excluded) must match,
numbers within relative tolerance R; any change fails.

--out DIR writes diff.md, diff.json, diff.html and plots (TTFT CDFs overlaid, per-metric bars
with the threshold, hit ratio over time) as SVG and PNG. Full CDFs and time series need the
requests.csv or timeseries.csv that eppsim run --out writes next to summary.json; otherwise the
TTFT plot shows the summary's percentiles.

Exit status: 0 no regression, 1 regression, 2 the comparison could not be made (missing or
unparsable file, different workloads, fleets or seeds, bad --fail-on).`,
		Example: `  eppsim run --epp-config default --out out/main
  eppsim run --epp-config least-queue --out out/pr
  eppsim diff out/main out/pr --fail-on 'latency_ms.ttft.p99:+3%' --out out/diff`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 2 {
				return withExitCode(2, fmt.Errorf("diff takes BASELINE and CURRENT, got %d arguments", len(args)))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return diffMain(cmd.OutOrStdout(), cmd.ErrOrStderr(), f, args[0], args[1])
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVar(&f.failOn, "fail-on", nil, "threshold METRIC:+N% | METRIC:-N | METRIC:off (repeatable; adds to or overrides the defaults)")
	fl.BoolVar(&f.noDefaults, "no-default-thresholds", false, "check only the --fail-on thresholds")
	fl.Float64Var(&f.tolerance, "tolerance", 0, "strict mode: every field must match within this relative tolerance (e.g. 1e-9)")
	fl.StringVar(&f.out, "out", "", "write diff.md, diff.json, diff.html and the comparison plots to this directory (refused if it holds files, unless --force)")
	fl.BoolVar(&f.force, "force", false, "write into a non-empty --out directory, replacing the files a diff writes")
	fl.BoolVar(&f.jsonOut, "json", false, "print the comparison as JSON instead of Markdown")
	fl.BoolVar(&f.allowMismatch, "allow-mismatch", false, "compare even when workloads, fleets or seeds differ (reported as notes)")
	fl.BoolVar(&f.onlyCommon, "only-common", false, "compare the configs both sides have; ignore the others")
	fl.IntVar(&f.dpi, "dpi", 150, "resolution of the PNG plots (with --out)")
	return cmd
}

// maxNamed is the most regressed metrics the error line names.
const maxNamed = 5

func diffMain(stdout, stderr io.Writer, f *diffFlags, basePath, curPath string) error {
	var ths []report.Threshold
	if !f.noDefaults {
		var err error
		if ths, err = report.ParseThresholds(report.DefaultThresholds); err != nil {
			return err // a bug: the defaults must parse
		}
	}
	extra, err := report.ParseThresholds(f.failOn)
	if err != nil {
		return withExitCode(2, fmt.Errorf("--fail-on: %w", err))
	}
	ths = report.MergeThresholds(ths, extra)
	if !(f.tolerance >= 0) || math.IsInf(f.tolerance, 0) {
		return withExitCode(2, fmt.Errorf("--tolerance %g: must be a finite number ≥ 0", f.tolerance))
	}
	if len(ths) == 0 && f.tolerance == 0 {
		return withExitCode(2, errors.New("nothing to check: no thresholds (--no-default-thresholds without --fail-on) and no --tolerance"))
	}
	if f.out != "" {
		if err := checkOutDir(f.out, f.force); err != nil {
			return withExitCode(2, err)
		}
	}
	base, err := report.LoadRunSets(basePath)
	if err != nil {
		return withExitCode(2, fmt.Errorf("baseline: %w", err))
	}
	cur, err := report.LoadRunSets(curPath)
	if err != nil {
		return withExitCode(2, fmt.Errorf("current: %w", err))
	}
	res, err := report.Diff(base, cur, report.DiffOptions{Thresholds: ths, Tolerance: f.tolerance,
		AllowMismatch: f.allowMismatch, OnlyCommon: f.onlyCommon})
	if err != nil {
		return withExitCode(2, err)
	}
	if f.out != "" {
		if err := report.WriteDiffOutput(f.out, res, f.dpi); err != nil {
			return withExitCode(2, err)
		}
	}
	if f.jsonOut {
		js, err := res.JSON()
		if err != nil {
			return withExitCode(2, err)
		}
		if _, err := stdout.Write(js); err != nil {
			return withExitCode(2, err)
		}
	} else if _, err := stdout.Write(res.Markdown()); err != nil {
		return withExitCode(2, err)
	}
	if f.out != "" {
		fmt.Fprintf(stderr, "diff report and plots: %s\n", f.out)
	}
	if res.Regressions > 0 {
		named := res.RegressedMetrics()
		msg := strings.Join(named[:min(len(named), maxNamed)], ", ")
		if len(named) > maxNamed {
			msg += fmt.Sprintf(" and %d more", len(named)-maxNamed)
		}
		return withExitCode(1, fmt.Errorf("regression: %s", msg))
	}
	return nil
}
