package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/eppsim/eppsim/workload"
)

// iperfFlags tune the traffic of inference-perf configs (--trace
// inference-perf:FILE.yaml, trace synth --from inference-perf).
type iperfFlags struct {
	inflation float64
	even      bool
	alias     bool
	// The client model's flags (registerClient), for the verbs that
	// simulate; client says they are registered.
	client   bool
	openLoop bool
	cpus     int
	maxConc  int
	timeout  time.Duration
}

func (f *iperfFlags) register(fl *pflag.FlagSet) {
	fl.Float64Var(&f.inflation, "iperf-token-inflation", workload.DefaultTokenInflation,
		"inference-perf configs: fraction by which random-token text grows when the server re-tokenizes it (0: the nominal lengths)")
	fl.BoolVar(&f.even, "iperf-even-arrivals", false,
		"inference-perf configs: space load.type constant arrivals exactly 1/rate apart instead of inference-perf's jittered schedule")
	fl.BoolVar(&f.alias, "iperf-alias-keys", false,
		"inference-perf configs: read num_unique_system_prompts/num_users_per_system_prompt as num_groups/num_prompts_per_group (newer inference-perf) instead of ignoring them (the recorded runs)")
}

// registerClient adds the flags of inference-perf's client model, which
// only simulating verbs use (docs/workloads.md, "Client concurrency").
func (f *iperfFlags) registerClient(fl *pflag.FlagSet) {
	f.client = true
	fl.BoolVar(&f.openLoop, "iperf-open-loop", false,
		"inference-perf configs: no client model: send every request at its scheduled time whatever is in flight, each stage 1 s + load.interval after the previous stage's last arrival (eppsim before the client model)")
	fl.IntVar(&f.cpus, "iperf-cpus", workload.DefaultIPerfCPUs,
		"inference-perf configs: CPU count of the load generator's machine, the default of load.num_workers (inference-perf v0.2.0: num_workers = CPUs)")
	fl.IntVar(&f.maxConc, "iperf-max-concurrency", 0,
		"inference-perf configs: cap on requests in flight, replacing num_workers × worker_max_concurrency (0: the config's, with inference-perf's defaults)")
	fl.DurationVar(&f.timeout, "iperf-request-timeout", 0,
		fmt.Sprintf("inference-perf configs: per-request timeout from the send, after which the request is aborted and fails (0: load.request_timeout, else aiohttp's default %v)", time.Duration(workload.DefaultIPerfRequestTimeout)))
}

// apply sets o.InferencePerf from the flags.
func (f *iperfFlags) apply(o *workload.Options) error {
	if !(f.inflation >= 0 && f.inflation <= 1) {
		return fmt.Errorf("--iperf-token-inflation %g: must be in [0, 1]", f.inflation)
	}
	switch {
	case !f.client:
	case f.cpus < 1:
		return fmt.Errorf("--iperf-cpus %d: must be at least 1", f.cpus)
	case f.maxConc < 0:
		return fmt.Errorf("--iperf-max-concurrency %d: must be > 0, or 0 for the config's num_workers × worker_max_concurrency", f.maxConc)
	case f.timeout < 0:
		return fmt.Errorf("--iperf-request-timeout %v: must be > 0, or 0 for load.request_timeout (else %v)", f.timeout, time.Duration(workload.DefaultIPerfRequestTimeout))
	}
	o.InferencePerf = workload.InferencePerfOptions{TokenInflation: f.inflation, EvenArrivals: f.even, AliasKeys: f.alias,
		OpenLoop: f.openLoop, CPUs: f.cpus, MaxConcurrency: f.maxConc, RequestTimeout: int64(f.timeout)}
	if !f.client {
		o.InferencePerf.CPUs = 0 // the default
	}
	if f.inflation == 0 {
		o.InferencePerf.TokenInflation = -1 // the nominal lengths
	}
	return nil
}

// iperfSynth writes the traffic of the inference-perf config at path as
// OpenAI JSONL (x_arrival_ms, x_output_tokens, x_stage) to out ("-":
// stdout). The config's notes (ignored legacy keys) go to stderr.
func iperfSynth(ctx context.Context, stdout, stderr io.Writer, path, out string, o workload.Options) error {
	target, err := traceOutTarget(out)
	if err != nil {
		return err
	}
	data, err := workload.ReadConfigFile(path)
	if err != nil {
		return withExitCode(2, err)
	}
	cfg, err := workload.ParseInferencePerf(data, path)
	if err != nil {
		return withExitCode(2, err)
	}
	for _, n := range cfg.Notes {
		fmt.Fprintf(stderr, "eppsim: note: %s\n", n)
	}
	s, err := workload.NewInferencePerfSource(cfg, o)
	if err != nil {
		return withExitCode(2, err)
	}
	ctx, stop := signalContext(ctx)
	defer stop()
	n, err := traceWriteJSONL(ctx, stdout, target, s)
	if err != nil {
		return traceReadErr(err)
	}
	if out != "-" {
		fmt.Fprintf(stderr, "eppsim: wrote %d requests in %d stages to %s\n", n, len(cfg.Load.Stages), out)
	}
	return nil
}
