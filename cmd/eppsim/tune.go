package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/eppsim/eppsim/scenario"
	"github.com/eppsim/eppsim/sweep"
)

type tuneFlags struct {
	specFlags
	eppConfig   string
	params      []string
	objective   string
	constraints []string
	budget      int
	seeds       int
	method      string
	workers     int
	out         string
	progress    string
	dpi         int
}

func newTuneCmd() *cobra.Command {
	f := &tuneFlags{}
	cmd := &cobra.Command{
		Use:   "tune",
		Short: "Optimise scorer weights with a budget of simulations (Nelder-Mead or CMA-ES)",
		Long: `tune searches continuous scorer weights for the best value of one objective, each
evaluation a full simulation of the traffic with a fixed seed (--seeds K averages K seeds
and reports their spread). It starts from the base config's weights, keeps each weight in
its bounds (--param PLUGIN.weight=LO:HI, default 0:10; proposals outside are projected onto
the box) and rounds weights to 3 decimals. Without --param every scorer of the base config
is tuned.

It writes to --out: trajectory.csv (every distinct evaluation in order, with the best so
far), best.yaml (the base config with the best weights), tune.json (the specification,
start, best, improvement and trajectory) and trajectory.svg/png.`,
		Example: `  eppsim trace synth --preset chat --sessions 300 --out chat.jsonl
  eppsim tune --trace chat.jsonl --replicas 8 \
    --param prefix-cache-scorer.weight --param queue-scorer.weight=0:5 \
    --objective ttft_p99 --budget 40 --seeds 3 --out tune-out`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return tuneMain(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), f)
		},
	}
	fl := cmd.Flags()
	f.specFlags.register(fl)
	fl.StringVar(&f.eppConfig, "epp-config", "default", "base EndpointPickerConfig: a file, \"default\" or a baseline")
	fl.StringArrayVar(&f.params, "param", nil, "a tuned weight PLUGIN.weight[=LO:HI] (repeatable; default: every scorer, 0:10)")
	fl.StringVar(&f.objective, "objective", sweep.DefaultObjective, "metric to minimise, or -METRIC to maximise")
	fl.StringArrayVar(&f.constraints, "constraint", nil, "feasibility bound METRIC<VALUE that every seed must meet (repeatable)")
	fl.IntVar(&f.budget, "budget", 40, "optimiser evaluations, the start included")
	fl.IntVar(&f.seeds, "seeds", 1, "seeds averaged per evaluation (--seed, --seed+1, ...)")
	fl.StringVar(&f.method, "method", sweep.MethodNelderMead, "nelder-mead or cmaes")
	fl.IntVar(&f.workers, "workers", runtime.GOMAXPROCS(0), "simulations at once (seeds of an evaluation, initial simplex)")
	fl.StringVar(&f.out, "out", "", "output directory (required)")
	fl.StringVar(&f.progress, "progress", "auto", "progress on stderr: auto (when a terminal), always, never")
	fl.IntVar(&f.dpi, "dpi", 150, "resolution of the PNG plot")
	return cmd
}

func tuneMain(ctx context.Context, stdout, stderr io.Writer, f *tuneFlags) error {
	if f.out == "" {
		return withExitCode(2, fmt.Errorf("--out is required"))
	}
	var params []sweep.TuneParam
	for _, s := range f.params {
		p, err := sweep.ParseTuneParam(s)
		if err != nil {
			return withExitCode(2, err)
		}
		params = append(params, p)
	}
	obj, err := sweep.ParseObjective(f.objective)
	if err != nil {
		return withExitCode(2, err)
	}
	cons, err := sweep.ParseConstraints(f.constraints)
	if err != nil {
		return withExitCode(2, err)
	}
	if f.seeds < 1 || f.workers < 1 {
		return withExitCode(2, fmt.Errorf("--seeds and --workers must be at least 1"))
	}
	prog, err := progressWriter(f.progress, stderr)
	if err != nil {
		return withExitCode(2, err)
	}
	spec, err := f.specFlags.spec()
	if err != nil {
		return withExitCode(2, err)
	}
	// It hashes the trace to resume, then reads it once per round of
	// points, as a sweep does.
	if err := checkRereadableTrace("tune", spec.Trace); err != nil {
		return withExitCode(2, err)
	}
	ctx, stop := signalContext(ctx)
	defer stop()
	e := scenario.ForSource(f.eppConfig)
	e.Release = spec.Release
	if l, err := loadEPP(ctx, e, spec.Env.Seed); err == nil {
		warnOlderConfig(stderr, f.eppConfig, l.MigrationWarnings())
	} else if ctx.Err() != nil {
		return err
	}
	res, err := sweep.Tune(ctx, sweep.TuneSpec{Version: version, Spec: spec, EPP: e,
		Fleet: f.fleetDescription(spec.Fleet), Params: params, Objective: obj, Constraints: cons,
		Budget: f.budget, Seeds: f.seeds, Method: f.method, Workers: f.workers, Progress: prog})
	if prog != nil {
		fmt.Fprintln(prog)
	}
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
	if err := sweep.WriteTune(f.out, res, f.dpi); err != nil {
		return err
	}
	printTune(stdout, f.out, res)
	return nil
}

func printTune(w io.Writer, dir string, r *sweep.TuneResult) {
	fmt.Fprintf(w, "tune (%s): %d evaluations (%d distinct × %d seeds simulated) in %s · %s\n",
		r.Method, r.Evaluations, len(r.Trajectory), len(r.Seeds), r.Wall.Round(10*time.Millisecond), r.Status)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "\t")
	for _, p := range r.Params {
		fmt.Fprintf(tw, "%s\t", p.Name)
	}
	fmt.Fprintf(tw, "%s\t", r.Objective.Metric.Path)
	if len(r.Seeds) > 1 {
		fmt.Fprint(tw, "std over seeds\t")
	}
	fmt.Fprintln(tw)
	row := func(label string, e *sweep.TuneEval) {
		fmt.Fprintf(tw, "%s\t", label)
		for _, x := range e.Weights {
			fmt.Fprintf(tw, "%g\t", x)
		}
		fmt.Fprintf(tw, "%.6g\t", float64(e.Mean))
		if len(r.Seeds) > 1 {
			fmt.Fprintf(tw, "%.4g\t", float64(e.Std))
		}
		fmt.Fprintln(tw)
	}
	row("start", r.Start)
	if r.Best != nil {
		row("best", r.Best)
	}
	tw.Flush()
	if abs, rel := r.Improvement(); !math.IsNaN(abs) {
		fmt.Fprintf(w, "improvement over the start: %.6g (%.1f%%, %s)\n", abs, 100*rel, r.Objective.Label())
	}
	if n := r.Noise(); n != nil {
		fmt.Fprintf(w, "noise: %s\n", n.Note)
	}
	if note := sweep.SwitchedOffNote(r.SwitchedOff()); note != "" {
		fmt.Fprintf(w, "note: %s\n", note)
	}
	if r.Best == nil {
		fmt.Fprintln(w, "no feasible evaluation")
	}
	fmt.Fprintf(w, "wrote %s, %s, %s, %s.svg/png in %s\n", sweep.TrajectoryFile, sweep.BestFile, sweep.TuneFile, sweep.PlotTrajectory, dir)
}
