package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/eppsim/eppsim/workload"
)

// iperfFlags tune the traffic of inference-perf configs (--trace
// inference-perf:FILE.yaml, trace synth --from inference-perf).
type iperfFlags struct {
	inflation float64
	even      bool
	alias     bool
}

func (f *iperfFlags) register(fl *pflag.FlagSet) {
	fl.Float64Var(&f.inflation, "iperf-token-inflation", workload.DefaultTokenInflation,
		"inference-perf configs: fraction by which random-token text grows when the server re-tokenizes it (0: the nominal lengths)")
	fl.BoolVar(&f.even, "iperf-even-arrivals", false,
		"inference-perf configs: space load.type constant arrivals exactly 1/rate apart instead of inference-perf's jittered schedule")
	fl.BoolVar(&f.alias, "iperf-alias-keys", false,
		"inference-perf configs: read num_unique_system_prompts/num_users_per_system_prompt as num_groups/num_prompts_per_group (newer inference-perf) instead of ignoring them (the recorded runs)")
}

// apply sets o.InferencePerf from the flags.
func (f *iperfFlags) apply(o *workload.Options) error {
	if !(f.inflation >= 0 && f.inflation <= 1) {
		return fmt.Errorf("--iperf-token-inflation %g: must be in [0, 1]", f.inflation)
	}
	o.InferencePerf = workload.InferencePerfOptions{TokenInflation: f.inflation, EvenArrivals: f.even, AliasKeys: f.alias}
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
