package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/eppsim/eppsim/scenario"
	"github.com/eppsim/eppsim/sweep"
)

type sweepFlags struct {
	specFlags
	eppConfig   string
	vary        []string
	random      int
	randomSeed  uint64
	objectives  []string
	constraints []string
	workers     int
	shard       string
	out         string
	progress    string
	dpi         int
	maxPoints   int
	yes         bool
}

func newSweepCmd() *cobra.Command {
	f := &sweepFlags{}
	cmd := &cobra.Command{
		Use:   "sweep",
		Short: "Evaluate a grid (or a random sample) of EPP weights, plugin parameters and fleet knobs on the same traffic",
		Long: `sweep runs one simulation per point of the space the --vary flags span, every point on the
identical workload and seed, on all cores (--workers), and writes to --out:

  points.jsonl  every finished point, appended and flushed as it finishes (re-running the
                same command skips them: an interrupted sweep resumes)
  points.csv    one row per point: the varied values and the headline metrics
  best.yaml     the best feasible point's full EndpointPickerConfig
  sweep.json    the specification, every point, the best, the Pareto front
  heatmap.svg/png (two or more dimensions), objective.svg/png (one), pareto.svg/png
                (two objectives)

--vary NAME=VALUES, VALUES a comma list and/or FROM:TO:STEP ranges (durations for duration
knobs). NAME is PLUGIN.weight (that scorer's weight in every profile), PLUGIN.PARAM or a
dotted PLUGIN.PARAM.KEY (a key of the plugin's parameters), or a knob: replicas, num-gpu-blocks-override,
max-num-seqs, max-num-batched-tokens, block-size, kv-event-lag, refresh-metrics-interval,
epp-latency, network-latency, seed. Plugin names are those of the effective config
(eppsim epp validate shows them, auto-created producers included).

Grid points are numbered row-major over the --vary flags in the order given (the last
varies fastest); --random N draws N distinct points in a seeded order instead. --shard I/N
runs only the points whose number ≡ I (mod N); "eppsim sweep merge" combines the shard
directories into the files an unsharded sweep writes. See docs/sweeps.md.`,
		Example: `  eppsim trace synth --preset chat --sessions 300 --out chat.jsonl
  eppsim sweep --trace chat.jsonl --replicas 8 \
    --vary prefix-cache-scorer.weight=0:5:1 --vary queue-scorer.weight=0,1,2,4 \
    --objective ttft_p99 --constraint "requests.rejected<=0" --out sweep-out
  eppsim sweep --vary approx-prefix-cache-producer.lruCapacityPerServer=5000,31250 \
    --vary replicas=4,8 --objective ttft_p99 --objective -throughput --out pareto-out`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return sweepMain(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), f)
		},
	}
	fl := cmd.Flags()
	f.specFlags.register(fl)
	fl.StringVar(&f.eppConfig, "epp-config", "default", "base EndpointPickerConfig: a file, \"default\" or a baseline")
	fl.StringArrayVar(&f.vary, "vary", nil, "a dimension NAME=VALUES (repeatable; see above)")
	fl.IntVar(&f.random, "random", 0, "sample this many distinct points instead of the whole grid")
	fl.Uint64Var(&f.randomSeed, "random-seed", 1, "seed of --random's sample")
	fl.StringArrayVar(&f.objectives, "objective", nil, "metric to minimise, or -METRIC to maximise (JSON path or alias; at most two; default "+sweep.DefaultObjective+")")
	fl.StringArrayVar(&f.constraints, "constraint", nil, "feasibility bound METRIC<VALUE (<, <=, >, >=; repeatable)")
	fl.IntVar(&f.workers, "workers", runtime.GOMAXPROCS(0), "points simulated at once")
	fl.StringVar(&f.shard, "shard", "", "run only the points with index ≡ I (mod N), as I/N")
	fl.StringVar(&f.out, "out", "", "sweep directory (required; re-use it to resume)")
	fl.StringVar(&f.progress, "progress", "auto", "progress bar on stderr: auto (when a terminal), always, never")
	fl.IntVar(&f.dpi, "dpi", 150, "resolution of the PNG plots")
	fl.IntVar(&f.maxPoints, "max-points", sweep.DefaultMaxPoints, fmt.Sprintf("refuse a sweep of more points than this (at most %d)", sweep.MaxPoints))
	fl.BoolVar(&f.yes, "yes", false, fmt.Sprintf("run a sweep of any size up to %d points, without --max-points", sweep.MaxPoints))
	cmd.AddCommand(newSweepMergeCmd())
	return cmd
}

func progressWriter(mode string, stderr io.Writer) (io.Writer, error) {
	switch mode {
	case "always":
		return stderr, nil
	case "auto":
		if isTerminal(stderr) {
			return stderr, nil
		}
		return nil, nil
	case "never":
		return nil, nil
	}
	return nil, fmt.Errorf("--progress %q: want auto, always or never", mode)
}

func sweepMain(ctx context.Context, stdout, stderr io.Writer, f *sweepFlags) error {
	ctx, stop := signalContext(ctx)
	defer stop()
	if f.out == "" {
		return withExitCode(2, fmt.Errorf("--out is required (the sweep directory)"))
	}
	var dims []sweep.Dim
	for _, v := range f.vary {
		d, err := sweep.ParseVary(v)
		if err != nil {
			return withExitCode(2, err)
		}
		dims = append(dims, d)
	}
	maxPoints := f.maxPoints
	switch {
	case f.yes:
		maxPoints = sweep.MaxPoints
	case maxPoints < 1 || maxPoints > sweep.MaxPoints:
		return withExitCode(2, fmt.Errorf("--max-points %d: must be in 1..%d", maxPoints, sweep.MaxPoints))
	}
	if len(dims) > 0 {
		// The size before anything is loaded or checked.
		grid := sweep.GridSize(dims)
		if f.random > 0 {
			fmt.Fprintf(stderr, "eppsim: sweep of %d points sampled from a grid of %.0f (%s)\n", f.random, grid, sweep.DescribeSize(dims))
		} else {
			fmt.Fprintf(stderr, "eppsim: sweep of %.0f points (%s)\n", grid, sweep.DescribeSize(dims))
		}
	}
	objs, err := sweep.ParseObjectives(f.objectives)
	if err != nil {
		return withExitCode(2, err)
	}
	cons, err := sweep.ParseConstraints(f.constraints)
	if err != nil {
		return withExitCode(2, err)
	}
	var shard sweep.Shard
	if f.shard != "" {
		if shard, err = sweep.ParseShard(f.shard); err != nil {
			return withExitCode(2, err)
		}
	}
	if f.workers < 1 {
		return withExitCode(2, fmt.Errorf("--workers %d: must be at least 1", f.workers))
	}
	prog, err := progressWriter(f.progress, stderr)
	if err != nil {
		return withExitCode(2, err)
	}
	spec, err := f.specFlags.spec()
	if err != nil {
		return withExitCode(2, err)
	}
	if err := checkRereadableTrace("a sweep", spec.Trace); err != nil {
		return withExitCode(2, err)
	}
	e := scenario.ForSource(f.eppConfig)
	e.Release = spec.Release
	if l, err := loadEPP(ctx, e, spec.Env.Seed); err == nil {
		warnOlderConfig(stderr, f.eppConfig, l.MigrationWarnings())
	} else if ctx.Err() != nil {
		return err
	}
	plan, err := sweep.NewPlanContext(ctx, sweep.Sweep{Version: version, Spec: spec, EPP: e, Fleet: f.fleetDescription(spec.Fleet),
		Dims: dims, Random: f.random, RandomSeed: f.randomSeed, MaxPoints: maxPoints})
	if err != nil {
		if errors.Is(err, sweep.ErrInterrupted) {
			return withExitCode(130, err)
		}
		return withExitCode(2, err)
	}
	res, st, err := sweep.Run(ctx, plan, sweep.Options{Out: f.out, Workers: f.workers, Shard: shard,
		Objectives: objs, Constraints: cons, Progress: prog, DPI: f.dpi})
	if err != nil {
		if errors.Is(err, sweep.ErrInterrupted) {
			return interrupted(ctx, err)
		}
		if ctx.Err() != nil {
			return interrupted(ctx, nil) // stopped before it could say where
		}
		if scenario.IsInputError(err) {
			return withExitCode(2, err)
		}
		return err
	}
	fmt.Fprintf(stdout, "sweep %s: %d points", f.out, plan.Len())
	if s := shard.String(); s != "" {
		fmt.Fprintf(stdout, ", shard %s: %d of them", s, st.Selected)
	}
	fmt.Fprintf(stdout, " · %d simulated now, %d done before · %d workers · %s\n", st.Ran, st.Skipped, f.workers, st.Wall.Round(10*time.Millisecond))
	return reportResults(stdout, f.out, res)
}

// reportResults prints the best point and the Pareto front and lists the
// files; it fails when points failed.
func reportResults(w io.Writer, dir string, res *sweep.Results) error {
	if res.Best == nil {
		fmt.Fprintf(w, "no feasible point (%d evaluated)\n", len(res.Points))
	} else {
		fmt.Fprintf(w, "best: point %d:", res.Best.Index)
		for i, d := range res.Spec.Dims {
			fmt.Fprintf(w, " %s=%s", d.Name, res.Best.Values[i])
		}
		for k, o := range res.Objectives {
			fmt.Fprintf(w, " · %s = %.6g", o.Label(), res.Best.Objectives[k])
		}
		fmt.Fprintln(w)
	}
	if res.Noise != nil {
		fmt.Fprintf(w, "noise: %s\n", res.Noise.Note)
	}
	if note := sweep.SwitchedOffNote(res.SwitchedOff); note != "" {
		fmt.Fprintf(w, "note: %s\n", note)
	}
	if len(res.Pareto) > 0 {
		fmt.Fprintf(w, "Pareto front (%d points):", len(res.Pareto))
		for _, i := range res.Pareto {
			fmt.Fprintf(w, " %d", i)
		}
		fmt.Fprintln(w)
	}
	files := []string{sweep.LogFile, sweep.PointsFile, sweep.SweepFile}
	if res.Best != nil {
		files = append(files, sweep.BestFile)
	}
	for _, p := range []string{sweep.PlotHeatmap, sweep.PlotObjective, sweep.PlotPareto} {
		if _, err := os.Stat(filepath.Join(dir, p+".svg")); err == nil {
			files = append(files, p+".svg/png")
		}
	}
	fmt.Fprintf(w, "wrote %s in %s\n", strings.Join(files, ", "), dir)
	if n := res.Failed(); n > 0 {
		return fmt.Errorf("%d points failed (see the error column of %s)", n, filepath.Join(dir, sweep.PointsFile))
	}
	return nil
}

type mergeFlags struct {
	dpi          int
	out          string
	force        bool
	objectives   []string
	constraints  []string
	allowPartial bool
}

func newSweepMergeCmd() *cobra.Command {
	f := &mergeFlags{}
	cmd := &cobra.Command{
		Use:   "merge DIR...",
		Short: "Combine sweep shard directories into the files an unsharded sweep writes",
		Long: `merge reads points.jsonl of every shard directory (they must hold the same sweep: equal
specification hashes), and writes to --out the merged points.jsonl and the same points.csv,
best.yaml, sweep.json and plots that running the sweep without --shard writes. The
objectives and constraints are those the shards were run with, unless given here.`,
		Example: `  eppsim sweep --vary queue-scorer.weight=0:4:1 --shard 0/2 --out out/shard-0
  eppsim sweep --vary queue-scorer.weight=0:4:1 --shard 1/2 --out out/shard-1
  eppsim sweep merge out/shard-0 out/shard-1 --out out/merged`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, dirs []string) error {
			var opts sweep.MergeOptions
			var err error
			if len(f.objectives) > 0 {
				if opts.Objectives, err = sweep.ParseObjectives(f.objectives); err != nil {
					return withExitCode(2, err)
				}
				if opts.Constraints, err = sweep.ParseConstraints(f.constraints); err != nil {
					return withExitCode(2, err)
				}
			} else if len(f.constraints) > 0 {
				return withExitCode(2, fmt.Errorf("--constraint needs --objective in merge (or neither: the shards' own are used)"))
			}
			if f.out == "" {
				return withExitCode(2, fmt.Errorf("--out is required"))
			}
			if err := checkOutDirNotInput(f.out, dirs, f.force); err != nil {
				return withExitCode(2, err)
			}
			opts.AllowPartial, opts.DPI = f.allowPartial, f.dpi
			res, err := sweep.Merge(dirs, f.out, opts)
			if err != nil {
				return withExitCode(2, err)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "merged %d directories: %d of %d points\n", len(dirs), len(res.Points), res.Spec.Points)
			return reportResults(w, f.out, res)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.out, "out", "", "directory for the merged sweep (required; refused if it holds files, unless --force, and if it is one of the inputs)")
	fl.BoolVar(&f.force, "force", false, "write into a non-empty --out directory, replacing the files a merge writes")
	fl.StringArrayVar(&f.objectives, "objective", nil, "override the shards' objectives (as in sweep)")
	fl.StringArrayVar(&f.constraints, "constraint", nil, "override the shards' constraints (with --objective)")
	fl.BoolVar(&f.allowPartial, "allow-partial", false, "write the result even when points are missing")
	fl.IntVar(&f.dpi, "dpi", 150, "resolution of the PNG plots")
	return cmd
}
