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

	"github.com/eppsim/eppsim/report"
	"github.com/eppsim/eppsim/scenario"
	"github.com/eppsim/eppsim/sim"
)

type runFlags struct {
	specFlags
	configs  []string
	out      string
	jsonOut  bool
	progress string
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
	f.specFlags.register(fl)
	fl.StringArrayVar(&f.configs, "epp-config", nil, "EndpointPickerConfig file, \"default\", or a baseline (repeatable)")
	fl.StringVar(&f.out, "out", "", "write summary.json, requests.csv, timeseries.csv, reports and plots to this directory")
	fl.BoolVar(&f.jsonOut, "json", false, "print the summary document as JSON instead of the table")
	fl.StringVar(&f.progress, "progress", "auto", "progress on stderr: auto (when a terminal), always, never")
	return cmd
}

// configRun is one EPP config's result.
type configRun struct {
	name    string
	summary *report.Summary
}

func runMain(stdout, stderr io.Writer, f *runFlags) error {
	spec, err := f.specFlags.spec()
	if err != nil {
		return withExitCode(2, err)
	}
	configs := f.configs
	if len(configs) == 0 {
		configs = []string{"default"}
	}
	var out *report.Output
	if f.out != "" {
		out, err = report.NewOutput(f.out, report.Meta{Version: version, Trace: f.trace, Seed: f.seed, Fleet: f.fleetDescription(len(spec.Fleet)), Command: "eppsim run"})
		if err != nil {
			return withExitCode(2, err)
		}
		defer out.Abort() // removes temp files unless Close succeeded
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
	printRuns(stdout, f, len(spec.Fleet), runs)
	return nil
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

func printRuns(w io.Writer, f *runFlags, replicas int, runs []configRun) {
	fmt.Fprintf(w, "trace %s · %s · seed %d\n\n", f.trace, f.fleetDescription(replicas), f.seed)
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
