package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/eppsim/eppsim/report"
	"github.com/eppsim/eppsim/scenario"
	"github.com/eppsim/eppsim/sim"
)

type runFlags struct {
	specFlags
	configs []string
	out     string
	jsonOut bool
	// kneeRuns: near the knee, repeat a config at both ends of the
	// step-time interval to widen its latency intervals.
	kneeRuns bool
	progress string
	workers  int
	force    bool
	argv     string // the command line, for summary.json
}

func newRunCmd() *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Simulate traffic on a fleet behind one or more EPP configs and report what happens",
		Long: `run replays a workload (a trace file or an embedded one) on a fleet of simulated vLLM
replicas, routed by the llm-d EPP built from each --epp-config, and reports latency, throughput,
true and oracle cache hit ratios and the prefix producers' prediction error per config. Every
config sees the identical workload and seed: the trace is read (and hash-id prompts synthesized)
once, and every config replays the same requests, so all configs run together, none more than a
window of requests ahead of the slowest. --workers of them simulate at once (one per core by
default); a run that waits for slower ones gives its core to another. All configs are in memory
together, each with its fleet and router. The results and files are those of running the configs
one after the other, whatever --workers.

--epp-config takes a file, "default" (the EPP's built-in default config) or a baseline:
round-robin, random, least-queue, oracle (precise KV-event prefix scoring with zero event lag
plus the default load scorers), vllm-dp-lb (no EPP: vLLM's own internal data-parallel load
balancer over the fleet's engines, as one vLLM API server with --data-parallel-size runs them).

The table groups the results: requests, load (simulated duration, offered load), latency,
throughput, the hit-rate ladder (infinite-cache bound ≥ oracle ≥ routed, then true: what the
trace offers, what the fleet's caches held at routing time on the best and on the chosen
replica, what was reused), each prefix producer's prediction error (bias, MAE, over- and
under-predicted token shares) and routing (idle replicas, the busiest replica's share). Below
it, "What this run shows" compares the configs in a few sentences built from those numbers,
then the simulator's own wall-clock speed. Every metric is defined in eppsim's
docs/metrics.md, which --out also writes as metrics.md next to report.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.argv = commandLine(cmd)
			return runMain(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), f)
		},
	}
	fl := cmd.Flags()
	f.specFlags.register(fl)
	fl.StringArrayVar(&f.configs, "epp-config", nil, "EndpointPickerConfig file, \"default\", or a baseline (repeatable)")
	fl.StringVar(&f.out, "out", "", "write summary.json, requests.csv, timeseries.csv, reports and plots to this directory (created; refused if it holds files, unless --force)")
	fl.BoolVar(&f.force, "force", false, "write into a non-empty --out directory, replacing the files a run writes")
	fl.BoolVar(&f.jsonOut, "json", false, "print the summary document as JSON instead of the table")
	fl.BoolVar(&f.kneeRuns, "knee-intervals", true, "for a config near its knee (its busiest replica at 90% of its sustainable rate with steps at the slow end of the calibration's interval), simulate it twice more, every step at each end of that interval, and widen its latency intervals to those runs (docs/latency.md, \"Intervals\"); false keeps the calibration's error factors alone")
	fl.StringVar(&f.progress, "progress", "auto", "progress on stderr: auto (when a terminal), always, never")
	fl.IntVar(&f.workers, "workers", runtime.GOMAXPROCS(0), "configs simulating at once, on one shared reading of the trace (results do not depend on it)")
	return cmd
}

// configRun is one EPP config's result.
type configRun struct {
	name    string
	summary *report.Summary
}

func runMain(ctx context.Context, stdout, stderr io.Writer, f *runFlags) error {
	// Signals are caught before anything is created, so that an interrupt
	// at any point cleans up.
	ctx, stop := signalContext(ctx)
	defer stop()
	spec, err := f.specFlags.spec()
	if err != nil {
		return withExitCode(2, err)
	}
	configs := f.configs
	if len(configs) == 0 {
		configs = []string{"default"}
	}
	if f.workers < 1 {
		return withExitCode(2, fmt.Errorf("--workers %d: must be at least 1", f.workers))
	}
	progress, err := progressWriter(f.progress, stderr)
	if err != nil {
		return withExitCode(2, err)
	}
	var board *progressBoard
	if progress != nil {
		board = &progressBoard{w: progress}
	}
	names := map[string]int{}
	jobs := make([]runJob, len(configs))
	pd := false
	// Request identity columns and the per-class plot: with flow control
	// or a workload that names classes, objectives or fairness IDs.
	classes := len(spec.Env.Objectives) > 0 || len(spec.Workload.Classes) > 0 || spec.Workload.FairnessID != ""
	for i, c := range configs {
		name := scenario.ForSource(c).Name
		if names[name]++; names[name] > 1 {
			name = fmt.Sprintf("%s#%d", name, names[name])
		}
		jobs[i] = runJob{name: name, src: c}
		// A bad config is reported before anything is simulated.
		e := scenario.ForSource(c)
		e.Release = spec.Release
		l, err := loadEPP(ctx, e, spec.Env.Seed)
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			return withExitCode(2, err)
		}
		warnOlderConfig(stderr, c, l.MigrationWarnings())
		pd = pd || l.Disaggregates()
		classes = classes || l.FlowControl != nil
	}
	var out *report.Output
	if f.out != "" {
		if err := checkOutDir(f.out, f.force); err != nil {
			return withExitCode(2, err)
		}
		out, err = report.NewOutput(f.out, report.Meta{Version: version, Trace: f.trace, Seed: f.seed, Fleet: f.fleetDescription(spec.Fleet), Command: f.argv, PD: pd, Classes: classes})
		if err != nil {
			return withExitCode(2, err)
		}
		defer out.Abort() // removes temp files unless Close succeeded
	}
	runs, err := runConfigs(ctx, jobs, spec, out, board, f.workers)
	if err == nil && f.kneeRuns {
		err = kneeIntervals(ctx, jobs, spec, runs)
	}
	if err != nil {
		if ctx.Err() != nil {
			return interrupted(ctx, nil)
		}
		return err
	}
	// A run that measured nothing still exits 0 (docs/metrics.md), but
	// says so on stderr as well as in its findings.
	for _, w := range report.Warnings(namedRuns(runs)) {
		fmt.Fprintln(stderr, "eppsim: warning: "+w)
	}
	if out != nil {
		if err := out.Close(); err != nil {
			return err
		}
	}
	if f.jsonOut {
		doc := map[string]any{"version": version, "trace": f.trace, "seed": f.seed, "command": f.argv}
		rs := map[string]*report.Summary{}
		for _, r := range runs {
			rs[r.name] = r.summary
		}
		doc["runs"] = rs
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(doc)
	}
	printRuns(stdout, f, spec.Fleet, runs)
	return nil
}

func namedRuns(runs []configRun) []report.NamedSummary {
	named := make([]report.NamedSummary, len(runs))
	for i, r := range runs {
		named[i] = report.NamedSummary{Name: r.name, Summary: r.summary}
	}
	return named
}

// kneeIntervals repeats every config whose run is near its knee with
// every step at both ends of the calibration's step-time interval
// (scenario.StepScales) and widens the run's latency intervals to what
// those runs measured: near the knee a few per cent of step time move
// the queueing, and so TTFT, by orders of magnitude. The repeats read the
// trace again and write nothing.
func kneeIntervals(ctx context.Context, jobs []runJob, spec *scenario.Spec, runs []configRun) error {
	for i, r := range runs {
		low, high, near, ok := scenario.StepScales(spec.Fleet, r.summary)
		if !ok || !near {
			continue
		}
		ends := make([]*report.Summary, 2)
		for k, scale := range []float64{low, high} {
			scaled := *spec
			scaled.Fleet = scenario.ScaleSteps(spec.Fleet, scale)
			e := scenario.ForSource(jobs[i].src)
			e.Name = jobs[i].name
			s, err := scenario.RunContext(ctx, &scaled, e, scenario.Hooks{})
			if err != nil {
				return fmt.Errorf("%s, steps ×%.3g: %w", jobs[i].name, scale, err)
			}
			ends[k] = s
		}
		scenario.WidenIntervals(r.summary, ends[0], ends[1], low, high)
	}
	return nil
}

// runJob is one --epp-config to simulate.
type runJob struct{ name, src string }

// runConfigs simulates the configs and returns their results in config
// order. Every config reads one shared Feed of the workload (the trace is
// read once), so all of them run together, each a window of requests at
// most ahead of the slowest; a Gate lets up to workers of them simulate at
// once, and a run that waits for the slower ones gives its place to
// another. Runs are otherwise independent (each has its own router and
// seeded streams), and out receives each run's rows through its own
// recorder, begun in config order, so nothing depends on how the runs
// interleave. The first error in config order is returned once every run
// has ended.
func runConfigs(ctx context.Context, jobs []runJob, spec *scenario.Spec, out *report.Output, board *progressBoard, workers int) ([]configRun, error) {
	recorders := make([]*report.RunWriter, len(jobs))
	if out != nil {
		for i, j := range jobs {
			recorders[i] = out.BeginRun(j.name, replicaNames(spec.Fleet)...)
		}
	}
	epps := make([]scenario.EPP, len(jobs))
	for i, j := range jobs {
		epps[i] = scenario.ForSource(j.src)
	}
	feed := scenario.NewFeed(scenario.SpecOpener(spec), scenario.FeedOptions{WindowBytes: runWindow(len(jobs)),
		Prepare: scenario.Preparer(spec, epps)})
	defer feed.Close()
	gate := scenario.NewGate(workers)
	readers := make([]*scenario.FeedReader, len(jobs))
	for i := range jobs {
		// The first join waits for the trace to open (on the feed's
		// goroutine: a FIFO without a writer blocks there), or for ctx.
		rd, err := feed.JoinContext(ctx, gate)
		if err != nil {
			for _, r := range readers[:i] {
				r.Close()
			}
			if ctx.Err() != nil {
				return nil, err
			}
			return nil, withExitCode(2, &scenario.InputError{Err: err})
		}
		readers[i] = rd
	}
	runs := make([]configRun, len(jobs))
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for i := range jobs {
		wg.Go(func() {
			gate.Enter()
			defer gate.Leave()
			s, err := runOne(ctx, jobs[i], spec, readers[i], recorders[i], board)
			runs[i], errs[i] = configRun{jobs[i].name, s}, err
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return runs, nil
}

// runWindow is the shared feed's window for n configs: room for the runs
// to drift apart a little more with each one, within 64 MiB.
func runWindow(n int) int64 {
	return min(int64(n)*scenario.DefaultWindowBytes, 64<<20)
}

// runOne simulates one config, recording into rec (nil: no --out).
func runOne(ctx context.Context, j runJob, spec *scenario.Spec, rd *scenario.FeedReader, rec *report.RunWriter, board *progressBoard) (*report.Summary, error) {
	e := scenario.ForSource(j.src)
	e.Name = j.name
	prog := board.add(j.name)
	hooks := scenario.Hooks{OnRecord: prog.record}
	if rec != nil {
		hooks.OnRecord = func(r *sim.Record) {
			prog.record(r)
			rec.AddRecord(r)
		}
		hooks.OnSample = rec.AddSample
	}
	s, err := scenario.RunReader(ctx, spec, e, hooks, rd)
	prog.done()
	if err != nil {
		if scenario.IsInputError(err) {
			return nil, withExitCode(2, err)
		}
		return nil, err
	}
	if rec != nil {
		rec.End(s, replicaNames(spec.Fleet))
	}
	return s, nil
}

func replicaNames(fleet []sim.ReplicaSpec) []string {
	names := make([]string, len(fleet))
	for i, r := range fleet {
		names[i] = r.Name
	}
	return names
}

func printRuns(w io.Writer, f *runFlags, fleet []sim.ReplicaSpec, runs []configRun) {
	fmt.Fprintf(w, "trace %s · %s · seed %d\n\n", f.trace, f.fleetDescription(fleet), f.seed)
	named := make([]report.NamedSummary, len(runs))
	for i, r := range runs {
		named[i] = report.NamedSummary{Name: r.name, Summary: r.summary}
	}
	rows := report.HeadlineRows(named)
	// The label column is left-aligned by hand (tabwriter aligns every
	// column the same way), the values right-aligned by tabwriter.
	width := len("metric")
	for _, row := range rows {
		width = max(width, utf8.RuneCountInString(row.Group), 2+utf8.RuneCountInString(row.Label))
	}
	pad := func(s string) string { return s + strings.Repeat(" ", width-utf8.RuneCountInString(s)) }
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\t", pad("metric"))
	for _, r := range runs {
		fmt.Fprintf(tw, "%s\t", r.name)
	}
	fmt.Fprintln(tw)
	for _, row := range rows {
		if row.Label == "" {
			fmt.Fprintf(tw, "%s\t%s\n", pad(row.Group), strings.Repeat("\t", len(runs)))
			continue
		}
		fmt.Fprintf(tw, "%s\t", pad("  "+row.Label))
		for _, c := range row.Cells {
			fmt.Fprintf(tw, "%s\t", c)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	printStages(w, named)
	var notes []string
	// An estimate shared by several configs is printed once, with their
	// names.
	var estimates []string
	estNames := map[string][]string{}
	for _, r := range runs {
		for _, n := range r.summary.Config.Estimates {
			if _, seen := estNames[n]; !seen {
				estimates = append(estimates, n)
			}
			estNames[n] = append(estNames[n], r.name)
		}
	}
	for _, n := range estimates {
		fmt.Fprintf(w, "\n%s: estimate: %s", strings.Join(estNames[n], ", "), n)
	}
	if len(estimates) > 0 {
		fmt.Fprintln(w)
	}
	for _, r := range runs {
		if n := report.SkipNote(&r.summary.Config.Workload); n != "" {
			notes = append(notes, r.name+": "+n)
		}
		for _, n := range r.summary.Config.NotSimulated {
			notes = append(notes, r.name+": not simulated: "+n)
		}
		for _, n := range r.summary.Config.Warnings {
			notes = append(notes, r.name+": warning: "+n)
		}
	}
	if len(notes) > 0 {
		fmt.Fprintf(w, "\n%s\n", strings.Join(notes, "\n"))
	}
	if findings := report.Findings(named); len(findings) > 0 {
		fmt.Fprintln(w, "\nWhat this run shows:")
		for _, s := range findings {
			fmt.Fprintf(w, "- %s\n", s)
		}
	}
	fmt.Fprintln(w, "\nDefinitions of every metric: docs/metrics.md (written to --out as metrics.md).")
	// The simulator's own speed: wall-clock time, not a property of the
	// simulated system.
	var speed []string
	for _, r := range runs {
		speed = append(speed, fmt.Sprintf("%s %.2f s (%.0f requests/s)", r.name, r.summary.Sim.WallSeconds, r.summary.Sim.RequestsPerWallS))
	}
	fmt.Fprintf(w, "simulator wall-clock time: %s\n", strings.Join(speed, ", "))
}

// printStages prints each config's per-stage table (report.StageTable)
// when the traffic has more than one load stage.
func printStages(w io.Writer, runs []report.NamedSummary) {
	if !report.HasStages(runs) {
		return
	}
	fmt.Fprintln(w, "\nPer load stage, over the requests that arrived in it (docs/metrics.md, stages):")
	for _, r := range runs {
		header, rows := report.StageTable(r.Summary)
		if header == nil {
			continue
		}
		fmt.Fprintf(w, "\n%s\n", r.Name)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		for _, row := range append([][]string{header}, rows...) {
			fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
		}
		tw.Flush()
	}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progressBoard prints, at most every 200 ms of wall time, the simulated
// time and requests done of every run in progress on one line, and a final
// line per run as it finishes. A nil board prints nothing.
type progressBoard struct {
	w    io.Writer
	mu   sync.Mutex
	runs []*progress // in progress
	last time.Time
}

// progress is one run's part of a board.
type progress struct {
	board *progressBoard
	name  string
	n     int
	sim   time.Duration
}

func (b *progressBoard) add(name string) *progress {
	p := &progress{board: b, name: name}
	if b != nil {
		b.mu.Lock()
		b.runs = append(b.runs, p)
		b.mu.Unlock()
	}
	return p
}

func (p *progress) record(r *sim.Record) {
	b := p.board
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	p.n++
	p.sim = time.Duration(r.Arrival).Truncate(time.Second)
	if now := time.Now(); now.Sub(b.last) >= 200*time.Millisecond {
		b.last = now
		parts := make([]string, len(b.runs))
		for i, q := range b.runs {
			parts[i] = fmt.Sprintf("%s: simulated %s, %d requests done", q.name, q.sim, q.n)
		}
		fmt.Fprintf(b.w, "\r%s", strings.Join(parts, " | "))
	}
}

func (p *progress) done() {
	b := p.board
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.runs = slices.DeleteFunc(b.runs, func(q *progress) bool { return q == p })
	fmt.Fprintf(b.w, "\r%s: %d requests done%s\n", p.name, p.n, strings.Repeat(" ", 30))
}
