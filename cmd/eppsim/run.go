package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/eppsim/eppsim/epp/config"
	"github.com/eppsim/eppsim/epp/plugins"
	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/report"
	"github.com/eppsim/eppsim/sim"
	"github.com/eppsim/eppsim/workload"
)

type runFlags struct {
	trace       string
	format      string
	mode        string
	configs     []string
	replicas    int
	preset      string
	kvBlocks    int
	maxSeqs     int
	maxBatched  int
	seed        uint64
	maxRequests int
	duration    time.Duration
	warmup      time.Duration
	refresh     time.Duration
	kvLag       time.Duration
	eppLatency  time.Duration
	netLatency  time.Duration
	jsonOut     bool
	skipInvalid bool
	timeScale   float64
	checkInvar  bool
}

func newRunCmd() *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Simulate traffic on a fleet behind one or more EPP configs and report what happens",
		Long: `run replays a workload (a trace file or an embedded one) on a fleet of simulated vLLM
replicas, routed by the llm-d EPP built from each --epp-config (or the EPP's built-in default
config), and prints latency, throughput, true/oracle cache hit ratios and the approximate
prefix producer's prediction error per config. Every config sees the identical workload.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runMain(cmd.OutOrStdout(), f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.trace, "trace", "builtin:chat", "trace file, or builtin:NAME for an embedded workload")
	fl.StringVar(&f.format, "format", "auto", "trace format (auto, mooncake, alibaba, openai, sharegpt, azure)")
	fl.StringVar(&f.mode, "mode", "", "replay mode: open (trace timestamps) or closed (sessions); default per format")
	fl.Float64Var(&f.timeScale, "time-scale", 0, "multiply trace timestamps by this factor (0 = as recorded)")
	fl.BoolVar(&f.skipInvalid, "skip-invalid", false, "skip malformed trace lines (counted and reported)")
	fl.StringArrayVar(&f.configs, "epp-config", nil, "EndpointPickerConfig YAML file (repeatable); \"default\" = the EPP's built-in default")
	fl.IntVar(&f.replicas, "replicas", 4, "number of replicas")
	fl.StringVar(&f.preset, "preset", "llama-3.1-8b-h100", "replica preset")
	fl.IntVar(&f.kvBlocks, "kv-blocks", 0, "override num_gpu_blocks (null block included)")
	fl.IntVar(&f.maxSeqs, "max-num-seqs", 0, "override max_num_seqs")
	fl.IntVar(&f.maxBatched, "max-batched-tokens", 0, "override max_num_batched_tokens")
	fl.Uint64Var(&f.seed, "seed", 1, "run seed")
	fl.IntVar(&f.maxRequests, "max-requests", 0, "stop after this many requests (0 = all)")
	fl.DurationVar(&f.duration, "duration", 0, "stop injecting requests after this much simulated time (0 = all)")
	fl.DurationVar(&f.warmup, "warmup", 0, "exclude requests arriving before this from statistics")
	fl.DurationVar(&f.refresh, "refresh-metrics-interval", 50*time.Millisecond, "EPP metrics scrape period")
	fl.DurationVar(&f.kvLag, "kv-event-lag", 5*time.Millisecond, "KV event delivery lag to the EPP")
	fl.DurationVar(&f.eppLatency, "epp-latency", 0, "EPP decision latency added before a request reaches its replica")
	fl.DurationVar(&f.netLatency, "network-latency", 0, "network latency added before a request reaches its replica")
	fl.BoolVar(&f.jsonOut, "json", false, "print the summary as JSON")
	fl.BoolVar(&f.checkInvar, "check-invariants", false, "verify replica invariants after every step (slow; debugging)")
	return cmd
}

// configRun is one EPP config's result.
type configRun struct {
	Name         string          `json:"-"`
	Summary      *report.Summary `json:"summary"`
	NotSimulated []string        `json:"not_simulated,omitempty"`
}

func runMain(w io.Writer, f *runFlags) error {
	preset, err := replica.LookupPreset(f.preset)
	if err != nil {
		return withExitCode(2, err)
	}
	if f.kvBlocks > 0 {
		preset.Engine.NumGPUBlocks = f.kvBlocks
	}
	if f.maxSeqs > 0 {
		preset.Engine.MaxNumSeqs = f.maxSeqs
	}
	if f.maxBatched > 0 {
		preset.Engine.MaxNumBatchedTokens = f.maxBatched
	}
	preset.Engine.CheckInvariants = f.checkInvar
	if f.replicas < 1 {
		return withExitCode(2, fmt.Errorf("--replicas must be at least 1, got %d", f.replicas))
	}
	fleet := make([]sim.ReplicaSpec, f.replicas)
	for i := range fleet {
		fleet[i] = sim.ReplicaSpec{
			Name:    fmt.Sprintf("default/vllm-%d", i),
			Address: fmt.Sprintf("10.0.%d.%d:8000", i/250, i%250+1),
			Preset:  preset,
		}
	}
	wopts, err := workloadOptions(f)
	if err != nil {
		return withExitCode(2, err)
	}
	configs := f.configs
	if len(configs) == 0 {
		configs = []string{"default"}
	}
	runs := make([]configRun, 0, len(configs))
	for _, c := range configs {
		cr, err := runOne(c, f, fleet, wopts)
		if err != nil {
			return err
		}
		runs = append(runs, cr)
	}
	if f.jsonOut {
		out := map[string]any{"runs": map[string]configRun{}}
		for _, r := range runs {
			out["runs"].(map[string]configRun)[r.Name] = r
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	printRuns(w, f, runs)
	return nil
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

func runOne(name string, f *runFlags, fleet []sim.ReplicaSpec, wopts workload.Options) (configRun, error) {
	copts := config.Options{Registry: plugins.Builtin(), Seed: f.seed}
	var loaded *config.Loaded
	var err error
	if name == "default" {
		loaded, err = config.Default(copts)
	} else {
		loaded, err = config.LoadFile(name, copts)
	}
	if err != nil {
		return configRun{}, withExitCode(2, err)
	}
	src, err := workload.Open(f.trace, wopts)
	if err != nil {
		return configRun{}, withExitCode(2, err)
	}
	defer src.Close()
	router := loaded.Router()
	router.Record = true
	agg := report.NewAggregator()
	res, err := sim.Run(src, router, fleet, sim.Options{
		Seed: f.seed, ScrapeInterval: int64(f.refresh), KVEventLag: int64(f.kvLag),
		EPPLatency: int64(f.eppLatency), NetworkLatency: int64(f.netLatency),
		MaxRequests: f.maxRequests, Duration: int64(f.duration), Warmup: int64(f.warmup),
		OnRecord: agg.Add,
	})
	if err != nil {
		if workload.IsInputError(err) {
			return configRun{}, withExitCode(2, err)
		}
		return configRun{}, err
	}
	cr := configRun{Name: displayName(name), Summary: agg.Summary(res)}
	for _, ns := range loaded.NotSimulated {
		cr.NotSimulated = append(cr.NotSimulated, fmt.Sprintf("%s (%s): %s", ns.Name, ns.Type, ns.Reason))
	}
	if n := src.Skipped(); n > 0 {
		cr.NotSimulated = append(cr.NotSimulated, fmt.Sprintf("%d invalid trace lines skipped", n))
	}
	return cr, nil
}

func displayName(c string) string {
	if c == "default" {
		return "default"
	}
	return strings.TrimSuffix(filepath.Base(c), filepath.Ext(c))
}

func printRuns(w io.Writer, f *runFlags, runs []configRun) {
	fmt.Fprintf(w, "trace %s · %d × %s · seed %d\n\n", f.trace, f.replicas, f.preset, f.seed)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "metric\t")
	for _, r := range runs {
		fmt.Fprintf(tw, "%s\t", r.Name)
	}
	fmt.Fprintln(tw)
	row := func(label string, v func(*report.Summary) string) {
		fmt.Fprintf(tw, "%s\t", label)
		for _, r := range runs {
			fmt.Fprintf(tw, "%s\t", v(r.Summary))
		}
		fmt.Fprintln(tw)
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
		if s.Prediction == nil {
			return "-"
		}
		return fmt.Sprintf("%.3f", s.Prediction.MAE)
	})
	row("phantom hit rate", func(s *report.Summary) string {
		if s.Prediction == nil {
			return "-"
		}
		return fmt.Sprintf("%.3f", s.Prediction.PhantomRate)
	})
	row("load imbalance (max/mean)", func(s *report.Summary) string { return fmt.Sprintf("%.2f", s.Routing.Imbalance) })
	row("preemptions", func(s *report.Summary) string { return fmt.Sprint(s.Cache.Preemptions) })
	tw.Flush()
	for _, r := range runs {
		for _, n := range r.NotSimulated {
			fmt.Fprintf(w, "\n%s: not simulated: %s", r.Name, n)
		}
	}
	fmt.Fprintln(w)
}
