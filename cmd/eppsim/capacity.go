package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/eppsim/eppsim/capacity"
	"github.com/eppsim/eppsim/scenario"
	"github.com/eppsim/eppsim/sweep"
)

type capacityFlags struct {
	specFlags
	configs     []string
	slo         []string
	rate        float64
	tolerance   float64
	start       float64
	traceMemory float64
	maxFactor   float64
	maxReplicas int
	seeds       int
	earlyStop   bool
	shard       string
	perRound    int
	share       string
	shareWait   time.Duration
	out         string
	force       bool
	progress    string
	dpi         int
}

func newCapacityCmd() *cobra.Command {
	f := &capacityFlags{}
	cmd := &cobra.Command{
		Use:   "capacity",
		Short: "Find the highest rate (or the fewest replicas) at which every SLO term holds",
		Long: `capacity answers one of two questions per --epp-config, on the traffic and fleet of the
other flags (those of eppsim run):

  without --rate: the highest rate the fleet sustains with every --slo term holding. It
    scales the traffic's arrivals by a rate multiplier (1 = as given, after --time-scale),
    brackets the answer (the first step guided by the knee, docs/latency.md) and bisects
    geometrically until the highest rate that holds and the lowest that fails are within
    --tolerance;
  with --rate R (requests/s): the fewest replicas of the fleet's preset that hold the SLO
    at that rate (exact, integer bisection).

An SLO term is [stage:|stageK:]METRIC OP VALUE: ttft_STAT, tpot_STAT, e2e_STAT, queue_STAT
(STAT p50, p90, p95, p99, max or mean; VALUE a duration, 2s or 50ms, a bare number is ms) or
success (completed ÷ requests, 0.99 or 99%); OP <=, <, >= or >. "stage:" makes the term hold
in every load stage (an inference-perf ladder), "stage1:" in stage 1 only. Every point runs
--seeds seeds and holds when the SLO holds on each.

A simulation that has provably violated a whole-run term stops early (more requests over a
percentile's bound than the percentile allows, a mean's sum past its bound times the
requests, more rejections than success allows) and is recorded as stopped; --early-stop=false
runs every simulation to its end. All configurations' points of one step run at once, on one
reading of the trace.

It prints the table (config, answer, binding SLO term, binding replica limit, margin to the
next point) and "What this run shows"; --out DIR writes capacity.json, curves.csv (every
point and seed: the SLO metrics, utilization, binding limit, TTFT p99 interval),
capacity.md and the plots (slo-METRIC.svg/png per term, replicas.svg/png), and keeps every
finished simulation in runs.jsonl as it goes: the same command again (after an interruption,
or a crash) reads those runs instead of simulating them and resumes; --force starts over.

Across machines: --shard I/N searches only the configurations whose index ≡ I (mod N), and
"eppsim capacity merge" joins the shards' directories; or --shard I/N --share DIR (a directory
all shards mount) splits every round's simulations between the shards, whatever the number
of configurations, each shard logging its runs in DIR and waiting for the others' before the
next round, and each writes the whole result. --points-per-round K evaluates K points of each
configuration per round (K + 1 parts of the bracket instead of 2). See docs/capacity.md.`,
		Example: `  eppsim trace synth --preset chat --sessions 200 --out chat.jsonl
  eppsim capacity --trace chat.jsonl --mode open-loop --rate 40 --epp-config default \
    --epp-config round-robin --slo 'ttft_p90<=1s' --slo 'success>=0.99' --out cap-replicas
  eppsim capacity --trace ../shared/traces/mooncake_conversation_trace.jsonl --replicas 16 \
    --epp-config default --epp-config round-robin --slo 'ttft_p99<=10s' --out cap-rate
`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return capacityMain(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), f, capacityFingerprint(cmd.Flags()))
		},
	}
	fl := cmd.Flags()
	f.specFlags.register(fl)
	fl.StringArrayVar(&f.configs, "epp-config", nil, "EndpointPickerConfig file, \"default\", or a baseline (repeatable; default: default)")
	fl.StringArrayVar(&f.slo, "slo", nil, "an SLO term, e.g. 'ttft_p99<=2s', 'tpot_p90<=50ms', 'success>=0.99', 'stage:ttft_p90<=1s' (repeatable, at least one)")
	fl.Float64Var(&f.rate, "rate", 0, "requests/s: find the fewest replicas that hold the SLO at this rate (0: find the highest rate for the fleet)")
	fl.Float64Var(&f.tolerance, "tolerance", capacity.DefaultTolerance, "relative precision of the rate search")
	fl.Float64Var(&f.start, "start", 0, "rate multiplier of the first point (0: where the fleet would run at 70% of its sustainable rate for the traffic's mean request, docs/capacity.md; 1: the traffic as given)")
	fl.Float64Var(&f.traceMemory, "trace-memory", 2, "GiB of decoded requests the search keeps in memory for all its rounds (a larger trace is read once per round; 0: always once per round)")
	fl.Float64Var(&f.maxFactor, "max-factor", capacity.DefaultMaxFactor, "the rate search tries multipliers within [start/F, start·F]")
	fl.IntVar(&f.maxReplicas, "max-replicas", 1000, "largest fleet the replica search tries (at most 10,000)")
	fl.IntVar(&f.seeds, "seeds", 1, "seeds per point (--seed, --seed+1, ...): a point holds when every seed holds")
	fl.BoolVar(&f.earlyStop, "early-stop", true, "stop a simulation once an SLO term can no longer hold")
	fl.StringVar(&f.shard, "shard", "", "search only the configurations with index ≡ I (mod N), as I/N (with --share: simulate the runs of each round with index ≡ I (mod N))")
	fl.IntVar(&f.perRound, "points-per-round", 0, "points each configuration's search evaluates at once (0: 1, or with --share enough to give every shard a run per round)")
	fl.StringVar(&f.share, "share", "", "a directory every --shard of a shared search reads and writes: the shards search every configuration together and each writes the whole result")
	fl.DurationVar(&f.shareWait, "share-wait", capacity.DefaultShareMax, "how long a shard of a shared search waits for the others' runs of a round")
	fl.StringVar(&f.out, "out", "", "output directory (capacity.json, curves.csv, capacity.md, plots)")
	fl.BoolVar(&f.force, "force", false, "overwrite the results an --out directory holds")
	fl.StringVar(&f.progress, "progress", "auto", "a line per point on stderr: auto (when a terminal), always, never")
	fl.IntVar(&f.dpi, "dpi", 150, "resolution of the PNG plots")
	cmd.AddCommand(newCapacityMergeCmd())
	return cmd
}

func capacityMain(ctx context.Context, stdout, stderr io.Writer, f *capacityFlags, fingerprint string) error {
	ctx, stop := signalContext(ctx)
	defer stop()
	terms, err := capacity.ParseSLO(f.slo)
	if err != nil {
		return withExitCode(2, err)
	}
	switch {
	case f.rate < 0:
		return withExitCode(2, fmt.Errorf("--rate %g: must be a rate in requests/s > 0 (or 0 for the rate search)", f.rate))
	case !(f.tolerance > 0) || f.tolerance > 1:
		return withExitCode(2, fmt.Errorf("--tolerance %g: must be in (0, 1]", f.tolerance))
	case f.start < 0:
		return withExitCode(2, fmt.Errorf("--start %g: must be a rate multiplier > 0 (or 0 for the estimate)", f.start))
	case f.traceMemory < 0 || f.traceMemory > 1024:
		return withExitCode(2, fmt.Errorf("--trace-memory %g: must be in 0..1024 GiB", f.traceMemory))
	case !(f.maxFactor > 1):
		return withExitCode(2, fmt.Errorf("--max-factor %g: must be > 1", f.maxFactor))
	case f.maxReplicas < 1 || f.maxReplicas > capacity.MaxReplicas:
		return withExitCode(2, fmt.Errorf("--max-replicas %d: must be in 1..%d", f.maxReplicas, capacity.MaxReplicas))
	case f.seeds < 1:
		return withExitCode(2, fmt.Errorf("--seeds %d: must be at least 1", f.seeds))
	}
	var shard sweep.Shard
	if f.shard != "" {
		if shard, err = sweep.ParseShard(f.shard); err != nil {
			return withExitCode(2, err)
		}
	}
	switch {
	case f.perRound < 0 || f.perRound > 64:
		return withExitCode(2, fmt.Errorf("--points-per-round %d: must be in 0..64", f.perRound))
	case f.share != "" && shard.N < 2:
		return withExitCode(2, fmt.Errorf("--share %s: needs --shard I/N with N ≥ 2 (the shards that share the directory)", f.share))
	case !(f.shareWait > 0):
		return withExitCode(2, fmt.Errorf("--share-wait %s: must be positive", f.shareWait))
	}
	if f.share != "" {
		// Every shard may create it: MkdirAll accepts one that exists.
		if err := os.MkdirAll(f.share, 0o755); err != nil {
			return withExitCode(2, fmt.Errorf("--share: %w", err))
		}
	}
	prog, err := progressWriter(f.progress, stderr)
	if err != nil {
		return withExitCode(2, err)
	}
	spec, err := f.specFlags.spec()
	if err != nil {
		return withExitCode(2, err)
	}
	// It counts the trace, then reads it once per rate tried.
	if err := checkRereadableTrace("a capacity search", spec.Trace); err != nil {
		return withExitCode(2, err)
	}
	configs := f.configs
	if len(configs) == 0 {
		configs = []string{"default"}
	}
	var epps []scenario.EPP
	names := map[string]int{}
	for _, c := range configs {
		e := scenario.ForSource(c)
		if names[e.Name]++; names[e.Name] > 1 {
			e.Name = fmt.Sprintf("%s#%d", e.Name, names[e.Name])
		}
		l, err := loadEPP(ctx, e, spec.Env.Seed)
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			return withExitCode(2, fmt.Errorf("--epp-config %s: %w", c, err))
		}
		if l.Disaggregates() {
			return withExitCode(2, fmt.Errorf("--epp-config %s: a P/D configuration has no knee estimate to guide the search, and capacity does not search P/D fleets yet", c))
		}
		epps = append(epps, e)
	}
	resume := false
	if f.out != "" {
		// An --out that holds a run log resumes its search (the log
		// refuses another search's); --force starts over.
		_, err := os.Stat(filepath.Join(f.out, capacity.RunsFile))
		resume = err == nil && f.share == ""
		if !resume {
			if err := checkOutDir(f.out, f.force); err != nil {
				return withExitCode(2, err)
			}
		}
	}
	s := capacity.Search{Spec: spec, EPPs: epps, SLO: terms, Rate: f.rate, Tolerance: f.tolerance, Start: f.start,
		MaxFactor: f.maxFactor, RetainBytes: retainBytes(f.traceMemory), MaxReplicas: f.maxReplicas, Seeds: f.seeds, NoEarlyStop: !f.earlyStop, Progress: prog,
		PointsPerRound: f.perRound, Share: f.share, Fingerprint: fingerprint}
	// --force starts a search's own run log over; a shared search's logs
	// are always resumed (a restarted pod must find its runs: remove the
	// --share directory to start over), and --force then only lets the
	// result overwrite --out.
	s.Fresh = f.force && f.share == ""
	s.ShareWait.Max = f.shareWait
	s.Shard.I, s.Shard.N = shard.I, shard.N
	if f.out != "" && f.share == "" {
		s.RunLog = filepath.Join(f.out, capacity.RunsFile)
	}
	res, err := capacity.Do(ctx, s)
	if err != nil {
		if ctx.Err() != nil {
			if s.RunLog != "" || s.Share != "" {
				return interrupted(ctx, fmt.Errorf("%w; the finished simulations are in %s: run the same command again to resume", errInterrupted, runLogName(&s)))
			}
			return interrupted(ctx, nil)
		}
		if scenario.IsInputError(err) {
			return withExitCode(2, err)
		}
		return err
	}
	printCapacity(stdout, res)
	if f.out != "" {
		if err := os.MkdirAll(f.out, 0o755); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
		if err := capacity.Write(f.out, res, f.dpi); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s, %s, %s and the plots in %s\n", capacity.JSONFile, capacity.CurvesFile, capacity.MarkdownOut, f.out)
	}
	return nil
}

// runLogName is where a search keeps its runs.
func runLogName(s *capacity.Search) string {
	if s.Share != "" {
		return filepath.Join(s.Share, capacity.SharedRunsFile(s.Shard.I, s.Shard.N))
	}
	return s.RunLog
}

// capacityFingerprint describes the flags a user set that can change a
// search's simulations: all but those of output, progress and
// distribution (the run log identifies the search by it, beside the
// traffic and configurations by content).
func capacityFingerprint(fl *pflag.FlagSet) string {
	skip := map[string]bool{"out": true, "force": true, "progress": true, "dpi": true, "shard": true, "share": true, "share-wait": true}
	var b strings.Builder
	fmt.Fprintf(&b, "eppsim %s\n", version)
	fl.VisitAll(func(f *pflag.Flag) {
		if f.Changed && !skip[f.Name] {
			fmt.Fprintf(&b, "--%s=%s\n", f.Name, f.Value.String())
		}
	})
	return b.String()
}

// retainBytes is --trace-memory in bytes (negative for none).
func retainBytes(gib float64) int64 {
	if gib == 0 {
		return -1
	}
	return int64(gib * (1 << 30))
}

func printCapacity(w io.Writer, r *capacity.Result) {
	if r.Question == "min-replicas" {
		fmt.Fprintf(w, "capacity: fewest replicas at %.3f req/s, SLO %v, seeds %v\n", r.Rate, r.SLO, r.Seeds)
	} else {
		fmt.Fprintf(w, "capacity: highest rate on %d replicas (the traffic as given: %.3f req/s), SLO %v, tolerance %g%%, seeds %v\n",
			r.Replicas, r.BaseRate, r.SLO, 100*r.Tolerance, r.Seeds)
	}
	fmt.Fprint(w, r.Table())
	fmt.Fprintln(w, "\nWhat this run shows:")
	for _, s := range r.Findings() {
		fmt.Fprintln(w, "- "+s)
	}
}

type capacityMergeFlags struct {
	out          string
	force        bool
	allowPartial bool
	dpi          int
}

func newCapacityMergeCmd() *cobra.Command {
	f := &capacityMergeFlags{}
	cmd := &cobra.Command{
		Use:   "merge DIR...",
		Short: "Join the --out directories of a sharded capacity search",
		Long: `merge reads the capacity.json of each shard's directory, checks that they answer the same
question (SLO, rate, fleet, seeds, tolerance, the traffic's rate) and together cover every
configuration once (--allow-partial writes what they hold), and writes the files an
unsharded search writes into --out.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, dirs []string) error {
			if f.out == "" {
				return withExitCode(2, errors.New("--out is required"))
			}
			if err := checkOutDirNotInput(f.out, dirs, f.force); err != nil {
				return withExitCode(2, err)
			}
			var parts []*capacity.Result
			for _, d := range dirs {
				r, err := capacity.ReadResult(filepath.Join(d, capacity.JSONFile))
				if err != nil {
					return withExitCode(2, err)
				}
				parts = append(parts, r)
			}
			res, err := capacity.Merge(parts, f.allowPartial)
			if err != nil {
				return withExitCode(2, err)
			}
			if err := os.MkdirAll(f.out, 0o755); err != nil {
				return fmt.Errorf("--out: %w", err)
			}
			if err := capacity.Write(f.out, res, f.dpi); err != nil {
				return err
			}
			printCapacity(cmd.OutOrStdout(), res)
			return nil
		},
	}
	cmd.Flags().StringVar(&f.out, "out", "", "output directory (required)")
	cmd.Flags().BoolVar(&f.force, "force", false, "overwrite the results --out holds")
	cmd.Flags().BoolVar(&f.allowPartial, "allow-partial", false, "write even when configurations are missing")
	cmd.Flags().IntVar(&f.dpi, "dpi", 150, "resolution of the PNG plots")
	return cmd
}
