package main

import (
	"fmt"
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
}

func (f *specFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.trace, "trace", workload.DefaultWorkload, "trace file, or builtin:NAME for an embedded workload")
	fl.StringVar(&f.format, "format", "auto", "trace format (auto, mooncake, alibaba, openai, sharegpt, azure)")
	fl.StringVar(&f.mode, "mode", "", "replay mode: open (trace timestamps) or closed (sessions); default per format")
	fl.Float64Var(&f.timeScale, "time-scale", 0, "multiply trace timestamps by this factor (0 = as recorded)")
	fl.BoolVar(&f.skipInvalid, "skip-invalid", false, "skip malformed trace lines (counted and reported)")
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
	fl.BoolVar(&f.checkInvar, "check-invariants", false, "verify replica invariants after every step (slow; debugging)")
}

// spec builds the scenario the flags describe.
func (f *specFlags) spec() (*scenario.Spec, error) {
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
			e.NumGPUBlocksOverride = f.kvBlocks
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
