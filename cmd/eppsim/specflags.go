package main

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/scenario"
	"github.com/eppsim/eppsim/sim"
	"github.com/eppsim/eppsim/workload"
)

// specFlags are the traffic, fleet and environment flags shared by every
// verb that simulates (run, sweep, tune, ...).
type specFlags struct {
	trace       string
	format      string
	mode        string
	timeScale   float64
	skipInvalid bool
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
	checkInvar  bool
	iperf       iperfFlags

	flags *pflag.FlagSet // to tell flags given from defaults
}

func (f *specFlags) register(fl *pflag.FlagSet) {
	f.flags = fl
	fl.StringVar(&f.trace, "trace", workload.DefaultWorkload, "trace file, builtin:NAME for an embedded workload, or inference-perf:FILE.yaml for an inference-perf config's traffic")
	fl.StringVar(&f.format, "format", "auto", formatHelp)
	fl.StringVar(&f.mode, "mode", "default", modeHelp)
	fl.Float64Var(&f.timeScale, "time-scale", 0, "multiply trace timestamps by this factor (0 = as recorded)")
	fl.BoolVar(&f.skipInvalid, "skip-invalid", false, "skip malformed trace lines (counted and reported)")
	fl.IntVar(&f.replicas, "replicas", 4, "number of replicas (ignored with --fleet)")
	fl.StringVar(&f.preset, "preset", "llama-3.1-8b-h100", "replica preset: "+strings.Join(presetNames(), ", ")+" (ignored with --fleet)")
	fl.StringVar(&f.fleet, "fleet", "", "fleet YAML file: replica groups with count, preset, overrides, labels")
	fl.IntVar(&f.kvBlocks, "kv-blocks", 0, "override num_gpu_blocks on every replica (null block included)")
	fl.IntVar(&f.maxSeqs, "max-num-seqs", 0, "vLLM's --max-num-seqs on every replica (default: the preset's)")
	fl.IntVar(&f.maxBatched, "max-num-batched-tokens", 0, "vLLM's --max-num-batched-tokens on every replica (default: the preset's)")
	fl.IntVar(&f.maxBatched, "max-batched-tokens", 0, "")
	_ = fl.MarkDeprecated("max-batched-tokens", "use --max-num-batched-tokens (vLLM's name)")
	fl.IntVar(&f.blockSize, "block-size", 0, "vLLM's --block-size (KV block size in tokens) on every replica (default: the preset's)")
	fl.Uint64Var(&f.seed, "seed", 1, seedHelp)
	fl.IntVar(&f.maxRequests, "max-requests", 0, "stop after this many requests (0 = all)")
	fl.DurationVar(&f.duration, "duration", 0, "stop injecting requests after this much simulated time (0 = all)")
	fl.DurationVar(&f.warmup, "warmup", 0, "exclude requests arriving before this from statistics")
	fl.DurationVar(&f.refresh, "refresh-metrics-interval", 50*time.Millisecond, "EPP metrics scrape period")
	fl.DurationVar(&f.kvLag, "kv-event-lag", 5*time.Millisecond, "KV event delivery lag to the EPP")
	fl.DurationVar(&f.eppLatency, "epp-latency", 0, "EPP decision latency added before a request reaches its replica")
	fl.DurationVar(&f.netLatency, "network-latency", 0, "network latency added before a request reaches its replica")
	fl.DurationVar(&f.sampleEvery, "timeseries-interval", 10*time.Second, "time-series sampling period (with --out)")
	fl.BoolVar(&f.checkInvar, "check-invariants", false, "verify replica invariants after every step (slow; debugging)")
	f.iperf.register(fl)
}

// Help texts shared by every verb that reads traces, so run, sweep, tune
// and trace describe the same values.
const (
	formatHelp = "trace format: auto (detect), mooncake, alibaba, openai-jsonl, sharegpt, azure-csv, inference-perf"
	modeHelp   = "replay mode: default (per format), open-loop (trace timestamps), closed-loop (next turn after the previous completes)"
	seedHelp   = "seed of every random choice (synthesized text, tokens, arrivals, think times, EPP tie-breaks); the same seed gives the same output"
)

// given reports whether the user set flag name (as opposed to its default).
func (f *specFlags) given(name string) bool {
	return f.flags != nil && f.flags.Changed(name)
}

// check rejects values outside a flag's range instead of silently
// replacing them with a default. Each error names the flag and the range.
func (f *specFlags) check() error {
	positive := func(name string, v int, min int, what string) error {
		if f.given(name) && v < min {
			return fmt.Errorf("--%s %d: must be at least %d (%s)", name, v, min, what)
		}
		return nil
	}
	durations := []struct {
		name     string
		v        time.Duration
		positive bool
	}{
		{"duration", f.duration, false}, {"warmup", f.warmup, false}, {"kv-event-lag", f.kvLag, false},
		{"epp-latency", f.eppLatency, false}, {"network-latency", f.netLatency, false},
		{"refresh-metrics-interval", f.refresh, true}, {"timeseries-interval", f.sampleEvery, true},
	}
	for _, d := range durations {
		switch {
		case d.positive && d.v <= 0:
			return fmt.Errorf("--%s %v: must be greater than 0", d.name, d.v)
		case d.v < 0:
			return fmt.Errorf("--%s %v: must not be negative (0 = %s)", d.name, d.v, zeroMeaning[d.name])
		}
	}
	batched := "max-num-batched-tokens"
	if f.given("max-batched-tokens") {
		batched = "max-batched-tokens"
	}
	for _, err := range []error{
		positive("replicas", f.replicas, 1, "replicas in the fleet"),
		positive("kv-blocks", f.kvBlocks, 2, "block 0 is vLLM's null block"),
		positive("max-num-seqs", f.maxSeqs, 1, "requests running at once"),
		positive(batched, f.maxBatched, 1, "tokens per engine step"),
		positive("block-size", f.blockSize, 1, "tokens per KV block"),
	} {
		if err != nil {
			return err
		}
	}
	if f.maxRequests < 0 {
		return fmt.Errorf("--max-requests %d: must not be negative (0 = every request of the trace)", f.maxRequests)
	}
	if math.IsNaN(f.timeScale) || math.IsInf(f.timeScale, 0) || f.timeScale < 0 {
		return fmt.Errorf("--time-scale %v: must be a finite number ≥ 0 (0 = timestamps as recorded)", f.timeScale)
	}
	if f.duration > 0 && f.warmup >= f.duration {
		return fmt.Errorf("--warmup %v: must be shorter than --duration %v (every request would be warm-up)", f.warmup, f.duration)
	}
	return nil
}

// zeroMeaning says what 0 means for the duration flags that accept it.
var zeroMeaning = map[string]string{
	"duration":        "no limit",
	"warmup":          "no warm-up",
	"kv-event-lag":    "events delivered at once",
	"epp-latency":     "none",
	"network-latency": "none",
}

// spec builds the scenario the flags describe.
func (f *specFlags) spec() (*scenario.Spec, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	fleet, err := f.buildFleet()
	if err != nil {
		return nil, err
	}
	wopts, err := f.workloadOptions()
	if err != nil {
		return nil, err
	}
	return &scenario.Spec{
		Version: version, Trace: f.trace, Workload: wopts, Fleet: fleet,
		Env: sim.Options{
			Seed: f.seed, ScrapeInterval: int64(f.refresh), KVEventLag: int64(f.kvLag),
			EPPLatency: int64(f.eppLatency), NetworkLatency: int64(f.netLatency),
			MaxRequests: f.maxRequests, Duration: int64(f.duration), Warmup: int64(f.warmup),
			SampleInterval: int64(f.sampleEvery),
		},
	}, nil
}

func (f *specFlags) buildFleet() ([]sim.ReplicaSpec, error) {
	var fleet []sim.ReplicaSpec
	if f.fleet != "" {
		var err error
		if fleet, err = sim.LoadFleet(f.fleet); err != nil {
			return nil, err
		}
	} else {
		p, err := replica.LookupPreset(f.preset)
		if err != nil {
			return nil, fmt.Errorf("--preset: %w", err)
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

func (f *specFlags) fleetDescription(replicas int) string {
	if f.fleet != "" {
		return fmt.Sprintf("%d replicas from %s", replicas, f.fleet)
	}
	return fmt.Sprintf("%d × %s", replicas, f.preset)
}

func (f *specFlags) workloadOptions() (workload.Options, error) {
	var o workload.Options
	fm, err := workload.ParseFormat(f.format)
	if err != nil {
		return o, fmt.Errorf("--format: %w", err)
	}
	o.Format = fm
	m, err := workload.ParseMode(f.mode)
	if err != nil {
		return o, fmt.Errorf("--mode: %w", err)
	}
	o.Mode = m
	o.TimeScale = f.timeScale
	o.SkipInvalid = f.skipInvalid
	o.Seed = int64(f.seed)
	if err := f.iperf.apply(&o); err != nil {
		return o, err
	}
	return o, nil
}

// presetNames lists the built-in replica presets for help texts.
func presetNames() []string {
	var names []string
	for _, p := range replica.Presets() {
		names = append(names, p.Name)
	}
	return names
}
