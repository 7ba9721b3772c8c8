package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/report"
	"github.com/eppsim/eppsim/scenario"
	"github.com/eppsim/eppsim/sim"
	"github.com/eppsim/eppsim/workload"
)

type runFlags struct {
	trace       string
	format      string
	mode        string
	timeScale   float64
	skipInvalid bool
	configs     []string
	replicas    int
	preset      string
	fleet       string
	kvBlocks    int
	maxSeqs     int
	maxBatched  int
	blockSize   int
	seed        uint64
	maxRequests int
	duration    time.Duration
	warmup      time.Duration
	refresh     time.Duration
	kvLag       time.Duration
	eppLatency  time.Duration
	netLatency  time.Duration
	sampleEvery time.Duration
	out         string
	jsonOut     bool
	checkInvar  bool
	progress    string
}

func newRunCmd() *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Simulate traffic on a fleet behind one or more EPP configs and report what happens",
		Long: `run replays a workload (a trace file or an embedded one) on a fleet of simulated vLLM
replicas, routed by the llm-d EPP built from each --epp-config, and reports latency, throughput,
true and oracle cache hit ratios and the prefix producers' prediction error per config. Every
config sees the identical workload and seed.

--epp-config takes a file, "default" (the EPP's built-in default config) or a baseline:
round-robin, random, least-queue, oracle (precise KV-event prefix scoring with zero event lag
plus the default load scorers).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runMain(cmd.OutOrStdout(), cmd.ErrOrStderr(), f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.trace, "trace", workload.DefaultWorkload, "trace file, or builtin:NAME for an embedded workload")
	fl.StringVar(&f.format, "format", "auto", "trace format (auto, mooncake, alibaba, openai, sharegpt, azure)")
	fl.StringVar(&f.mode, "mode", "", "replay mode: open (trace timestamps) or closed (sessions); default per format")
	fl.Float64Var(&f.timeScale, "time-scale", 0, "multiply trace timestamps by this factor (0 = as recorded)")
	fl.BoolVar(&f.skipInvalid, "skip-invalid", false, "skip malformed trace lines (counted and reported)")
	fl.StringArrayVar(&f.configs, "epp-config", nil, "EndpointPickerConfig file, \"default\", or a baseline (repeatable)")
	fl.IntVar(&f.replicas, "replicas", 4, "number of replicas (ignored with --fleet)")
	fl.StringVar(&f.preset, "preset", "llama-3.1-8b-h100", "replica preset (ignored with --fleet)")
	fl.StringVar(&f.fleet, "fleet", "", "fleet YAML file: replica groups with count, preset, overrides, labels")
	fl.IntVar(&f.kvBlocks, "kv-blocks", 0, "override num_gpu_blocks on every replica (null block included)")
	fl.IntVar(&f.maxSeqs, "max-num-seqs", 0, "override max_num_seqs on every replica")
	fl.IntVar(&f.maxBatched, "max-batched-tokens", 0, "override max_num_batched_tokens on every replica")
	fl.IntVar(&f.blockSize, "block-size", 0, "override the KV block size on every replica")
	fl.Uint64Var(&f.seed, "seed", 1, "run seed")
	fl.IntVar(&f.maxRequests, "max-requests", 0, "stop after this many requests (0 = all)")
	fl.DurationVar(&f.duration, "duration", 0, "stop injecting requests after this much simulated time (0 = all)")
	fl.DurationVar(&f.warmup, "warmup", 0, "exclude requests arriving before this from statistics")
	fl.DurationVar(&f.refresh, "refresh-metrics-interval", 50*time.Millisecond, "EPP metrics scrape period")
	fl.DurationVar(&f.kvLag, "kv-event-lag", 5*time.Millisecond, "KV event delivery lag to the EPP")
	fl.DurationVar(&f.eppLatency, "epp-latency", 0, "EPP decision latency added before a request reaches its replica")
	fl.DurationVar(&f.netLatency, "network-latency", 0, "network latency added before a request reaches its replica")
	fl.DurationVar(&f.sampleEvery, "timeseries-interval", 10*time.Second, "time-series sampling period (with --out)")
	fl.StringVar(&f.out, "out", "", "write summary.json, requests.csv, timeseries.csv, reports and plots to this directory")
	fl.BoolVar(&f.jsonOut, "json", false, "print the summary document as JSON instead of the table")
	fl.BoolVar(&f.checkInvar, "check-invariants", false, "verify replica invariants after every step (slow; debugging)")
	fl.StringVar(&f.progress, "progress", "auto", "progress on stderr: auto (when a terminal), always, never")
	return cmd
}

// configRun is one EPP config's result.
type configRun struct {
	name    string
	summary *report.Summary
}

func runMain(stdout, stderr io.Writer, f *runFlags) error {
	fleet, err := buildFleet(f)
	if err != nil {
		return withExitCode(2, err)
	}
	wopts, err := workloadOptions(f)
	if err != nil {
		return withExitCode(2, err)
	}
	configs := f.configs
	if len(configs) == 0 {
		configs = []string{"default"}
	}
	var out *report.Output
	if f.out != "" {
		out, err = report.NewOutput(f.out, report.Meta{Version: version, Trace: f.trace, Seed: f.seed, Fleet: fleetDescription(f, fleet), Command: "eppsim run"})
		if err != nil {
			return withExitCode(2, err)
		}
		defer out.Abort() // removes temp files unless Close succeeded
	}
	spec := &scenario.Spec{
		Version: version, Trace: f.trace, Workload: wopts, Fleet: fleet,
		Env: sim.Options{
			Seed: f.seed, ScrapeInterval: int64(f.refresh), KVEventLag: int64(f.kvLag),
			EPPLatency: int64(f.eppLatency), NetworkLatency: int64(f.netLatency),
			MaxRequests: f.maxRequests, Duration: int64(f.duration), Warmup: int64(f.warmup),
			SampleInterval: int64(f.sampleEvery),
		},
	}
	showProgress := f.progress == "always" || (f.progress == "auto" && isTerminal(stderr))
	var prog io.Writer
	if showProgress {
		prog = stderr
	}
	var runs []configRun
	names := map[string]int{}
	for _, c := range configs {
		name := scenario.ForSource(c).Name
		if names[name]++; names[name] > 1 {
			name = fmt.Sprintf("%s#%d", name, names[name])
		}
		s, err := runOne(name, c, spec, out, prog)
		if err != nil {
			return err
		}
		runs = append(runs, configRun{name, s})
	}
	if out != nil {
		if err := out.Close(); err != nil {
			return err
		}
	}
	if f.jsonOut {
		doc := map[string]any{"version": version, "trace": f.trace, "seed": f.seed}
		rs := map[string]*report.Summary{}
		for _, r := range runs {
			rs[r.name] = r.summary
		}
		doc["runs"] = rs
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(doc)
	}
	printRuns(stdout, f, fleet, runs)
	return nil
}

func buildFleet(f *runFlags) ([]sim.ReplicaSpec, error) {
	var fleet []sim.ReplicaSpec
	if f.fleet != "" {
		var err error
		if fleet, err = sim.LoadFleet(f.fleet); err != nil {
			return nil, err
		}
	} else {
		p, err := replica.LookupPreset(f.preset)
		if err != nil {
			return nil, err
		}
		if f.replicas < 1 {
			return nil, fmt.Errorf("--replicas must be at least 1, got %d", f.replicas)
		}
		fleet = sim.UniformFleet(f.replicas, p)
	}
	for i := range fleet {
		e := &fleet[i].Preset.Engine
		if f.kvBlocks > 0 {
			e.NumGPUBlocks = f.kvBlocks
		}
		if f.maxSeqs > 0 {
			e.MaxNumSeqs = f.maxSeqs
		}
		if f.maxBatched > 0 {
			e.MaxNumBatchedTokens = f.maxBatched
		}
		if f.blockSize > 0 {
			e.BlockSize = f.blockSize
		}
		e.CheckInvariants = f.checkInvar
	}
	return fleet, nil
}

func fleetDescription(f *runFlags, fleet []sim.ReplicaSpec) string {
	if f.fleet != "" {
		return fmt.Sprintf("%d replicas from %s", len(fleet), f.fleet)
	}
	return fmt.Sprintf("%d × %s", len(fleet), f.preset)
}

func workloadOptions(f *runFlags) (workload.Options, error) {
	var o workload.Options
	fm, err := workload.ParseFormat(f.format)
	if err != nil {
		return o, err
	}
	o.Format = fm
	if f.mode != "" {
		m, err := workload.ParseMode(f.mode)
		if err != nil {
			return o, err
		}
		o.Mode = m
	}
	o.TimeScale = f.timeScale
	o.SkipInvalid = f.skipInvalid
	o.Seed = int64(f.seed)
	return o, nil
}

func runOne(name, src string, spec *scenario.Spec, out *report.Output, progress io.Writer) (*report.Summary, error) {
	e := scenario.ForSource(src)
	e.Name = name
	prog := newProgress(progress, name)
	hooks := scenario.Hooks{OnRecord: prog.record}
	if out != nil {
		out.StartRun(name, replicaNames(spec.Fleet)...)
		hooks.OnRecord = func(r *sim.Record) {
			prog.record(r)
			out.AddRecord(r)
		}
		hooks.OnSample = out.AddSample
	}
	s, err := scenario.Run(spec, e, hooks)
	prog.done()
	if err != nil {
		if scenario.IsInputError(err) {
			return nil, withExitCode(2, err)
		}
		return nil, err
	}
	if out != nil {
		out.EndRun(s, replicaNames(spec.Fleet))
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
	fmt.Fprintf(w, "trace %s · %s · seed %d\n\n", f.trace, fleetDescription(f, fleet), f.seed)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "metric\t")
	for _, r := range runs {
		fmt.Fprintf(tw, "%s\t", r.name)
	}
	fmt.Fprintln(tw)
	row := func(label string, v func(*report.Summary) string) {
		fmt.Fprintf(tw, "%s\t", label)
		for _, r := range runs {
			fmt.Fprintf(tw, "%s\t", v(r.summary))
		}
		fmt.Fprintln(tw)
	}
	pred := func(s *report.Summary) *report.Prediction {
		if p := s.Prediction["approx-prefix-cache-producer"]; p != nil {
			return p
		}
		return s.Prediction["precise-prefix-cache-producer"]
	}
	row("requests completed", func(s *report.Summary) string {
		return fmt.Sprintf("%d/%d", s.Requests.Complete, s.Requests.Total)
	})
	row("rejected", func(s *report.Summary) string { return fmt.Sprint(s.Requests.Rejected) })
	row("TTFT p50 (ms)", func(s *report.Summary) string { return fmt.Sprintf("%.1f", s.Latency.TTFT.P50) })
	row("TTFT p99 (ms)", func(s *report.Summary) string { return fmt.Sprintf("%.1f", s.Latency.TTFT.P99) })
	row("TPOT p50 (ms)", func(s *report.Summary) string { return fmt.Sprintf("%.2f", s.Latency.TPOT.P50) })
	row("E2E p99 (ms)", func(s *report.Summary) string { return fmt.Sprintf("%.1f", s.Latency.E2E.P99) })
	row("throughput (req/s)", func(s *report.Summary) string { return fmt.Sprintf("%.2f", s.Throughput.RequestsPerS) })
	row("output tokens/s", func(s *report.Summary) string { return fmt.Sprintf("%.0f", s.Throughput.OutputTokensPerS) })
	row("true hit ratio", func(s *report.Summary) string { return fmt.Sprintf("%.3f", s.Cache.TrueHitRatio) })
	row("oracle hit ratio", func(s *report.Summary) string { return fmt.Sprintf("%.3f", s.Cache.OracleHitRatio) })
	row("regret (Mtokens)", func(s *report.Summary) string { return fmt.Sprintf("%.2f", float64(s.Cache.RegretTokens)/1e6) })
	row("predicted-vs-true MAE", func(s *report.Summary) string {
		if p := pred(s); p != nil {
			return fmt.Sprintf("%.3f", p.MAE)
		}
		return "-"
	})
	row("phantom hit rate", func(s *report.Summary) string {
		if p := pred(s); p != nil {
			return fmt.Sprintf("%.3f", p.PhantomRate)
		}
		return "-"
	})
	row("load imbalance (max/mean)", func(s *report.Summary) string { return fmt.Sprintf("%.2f", s.Routing.Imbalance) })
	row("preemptions", func(s *report.Summary) string { return fmt.Sprint(s.Cache.Preemptions) })
	row("sim requests/wall s", func(s *report.Summary) string { return fmt.Sprintf("%.0f", s.Sim.RequestsPerWallS) })
	tw.Flush()
	for _, r := range runs {
		for _, n := range r.summary.Config.NotSimulated {
			fmt.Fprintf(w, "\n%s: not simulated: %s", r.name, strings.TrimPrefix(n, "not simulated: "))
		}
	}
	fmt.Fprintln(w)
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

// progress prints simulated time and requests done, at most every 200 ms
// of wall time; a nil writer prints nothing.
type progress struct {
	w    io.Writer
	name string
	n    int
	last time.Time
}

func newProgress(w io.Writer, name string) *progress { return &progress{w: w, name: name} }

func (p *progress) record(r *sim.Record) {
	if p.w == nil {
		return
	}
	p.n++
	if now := time.Now(); now.Sub(p.last) >= 200*time.Millisecond {
		p.last = now
		fmt.Fprintf(p.w, "\r%s: simulated %s, %d requests done", p.name, time.Duration(r.Arrival).Truncate(time.Second), p.n)
	}
}

func (p *progress) done() {
	if p.w != nil {
		fmt.Fprintf(p.w, "\r%s: %d requests done%s\n", p.name, p.n, strings.Repeat(" ", 30))
	}
}
