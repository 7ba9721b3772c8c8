package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/eppsim/eppsim/arch"
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
	modelConfig string
	gpu         string
	tp          int
	gpuCatalog  string
	fleet       string
	kvBlocks    int
	gpuMemUtil  float64
	kvDtype     string
	maxSeqs     int
	maxModelLen int
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
	fl.StringVar(&f.preset, "preset", "llama-3.1-8b-h100", "replica preset: "+strings.Join(replica.PresetNames(), ", ")+", or a preset YAML file (ignored with --fleet or --model-config)")
	fl.StringVar(&f.modelConfig, "model-config", "", "a Hugging Face config.json (or a directory holding one, or the id of an embedded config) to build replicas from without a preset, with --gpu and --tensor-parallel-size (ignored with --fleet)")
	fl.StringVar(&f.gpu, "gpu", "", "GPU of the catalogue ("+strings.Join(arch.DefaultGPUs().Names(), ", ")+", or an alias): the --model-config replicas' GPU (default H100), or replaces the preset's")
	fl.IntVar(&f.tp, "tensor-parallel-size", 0, "vLLM's tensor_parallel_size: GPUs per replica, weights and KV cache split across them (default: the preset's, or 1; ignored with --fleet)")
	fl.IntVar(&f.tp, "tp", 0, "alias of --tensor-parallel-size")
	fl.StringVar(&f.gpuCatalog, "gpu-catalogue", "", "YAML file of GPUs added to or changed in the built-in catalogue (format of arch/gpus.yaml)")
	fl.StringVar(&f.fleet, "fleet", "", "fleet YAML file: replica groups with count, preset or model/gpu/tp, overrides, labels")
	fl.IntVar(&f.kvBlocks, "num-gpu-blocks-override", 0, "vLLM's num_gpu_blocks_override on every replica: the KV blocks (null block included) instead of the capacity computed from GPU memory")
	fl.IntVar(&f.kvBlocks, "kv-blocks", 0, "deprecated: the old name of --num-gpu-blocks-override")
	_ = fl.MarkHidden("kv-blocks")
	fl.Float64Var(&f.gpuMemUtil, "gpu-memory-utilization", 0, "vLLM's gpu_memory_utilization on every replica (default: the preset's, 0.9)")
	fl.StringVar(&f.kvDtype, "kv-cache-dtype", "", "vLLM's kv_cache_dtype on every replica: auto, bfloat16, fp8, fp8_e4m3, fp8_e5m2")
	fl.IntVar(&f.maxSeqs, "max-num-seqs", 0, "override max_num_seqs on every replica")
	fl.IntVar(&f.maxModelLen, "max-model-len", 0, "override max_model_len on every replica (default: the model's max_position_embeddings)")
	fl.IntVar(&f.maxBatched, "max-batched-tokens", 0, "override max_num_batched_tokens on every replica")
	fl.IntVar(&f.maxBatched, "max-num-batched-tokens", 0, "alias of --max-batched-tokens (vLLM's name)")
	fl.IntVar(&f.blockSize, "block-size", 0, "override the KV block size on every replica (the computed KV capacity follows)")
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
	var gpus *arch.GPUCatalogue
	if f.gpuCatalog != "" {
		var err error
		if gpus, err = arch.LoadGPUCatalogue(f.gpuCatalog); err != nil {
			return nil, fmt.Errorf("--gpu-catalogue: %w", err)
		}
	}
	if f.tp < 0 {
		return nil, fmt.Errorf("--tensor-parallel-size must be at least 1, got %d", f.tp)
	}
	var fleet []sim.ReplicaSpec
	if f.fleet != "" {
		var err error
		if fleet, err = sim.LoadFleetWith(f.fleet, sim.FleetOptions{GPUs: gpus}); err != nil {
			return nil, err
		}
	} else {
		p, err := f.replicaPreset(gpus)
		if err != nil {
			return nil, err
		}
		if f.replicas < 1 {
			return nil, fmt.Errorf("--replicas must be at least 1, got %d", f.replicas)
		}
		fleet = sim.UniformFleet(f.replicas, p)
	}
	if f.gpuMemUtil < 0 || f.gpuMemUtil > 1 {
		return nil, fmt.Errorf("--gpu-memory-utilization must be in (0, 1], got %g", f.gpuMemUtil)
	}
	for i := range fleet {
		e := &fleet[i].Preset.Engine
		if f.kvBlocks > 0 {
			e.NumGPUBlocksOverride = f.kvBlocks
		}
		if f.maxSeqs > 0 {
			e.MaxNumSeqs = f.maxSeqs
		}
		if f.maxModelLen > 0 {
			e.MaxModelLen = f.maxModelLen
		}
		if f.maxBatched > 0 {
			e.MaxNumBatchedTokens = f.maxBatched
		}
		if f.blockSize > 0 {
			e.BlockSize = f.blockSize
		}
		if f.gpuMemUtil > 0 {
			e.GPUMemoryUtilization = f.gpuMemUtil
		}
		if f.kvDtype != "" {
			e.KVCacheDtype = f.kvDtype
		}
		e.CheckInvariants = f.checkInvar
	}
	// Resolve every engine now, so a configuration vLLM would refuse (too
	// little memory, a bad argument) is an input error before the run.
	for i := range fleet {
		if _, err := fleet[i].Preset.EngineConfig(); err != nil {
			return nil, err
		}
		if i > 0 && fleet[i].Preset.Name == fleet[i-1].Preset.Name {
			continue // the same preset: checked once
		}
		if _, err := fleet[i].Preset.Model(); err != nil {
			return nil, err
		}
	}
	return fleet, nil
}

// replicaPreset is the preset of a uniform fleet: --model-config on --gpu
// with --tensor-parallel-size, or --preset with --gpu and
// --tensor-parallel-size replacing its own.
func (f *specFlags) replicaPreset(gpus *arch.GPUCatalogue) (replica.Preset, error) {
	cat := gpus
	if cat == nil {
		cat = arch.DefaultGPUs()
	}
	if f.modelConfig != "" {
		m, err := arch.ResolveModel(f.modelConfig, "")
		if err != nil {
			return replica.Preset{}, fmt.Errorf("--model-config: %w", err)
		}
		name := f.gpu
		if name == "" {
			name = "H100"
		}
		g, err := cat.Lookup(name)
		if err != nil {
			return replica.Preset{}, fmt.Errorf("--gpu: %w", err)
		}
		p, err := replica.NewPreset(m, g, max(f.tp, 1))
		if err != nil {
			return replica.Preset{}, fmt.Errorf("--model-config: %w", err)
		}
		if gpus != nil {
			return p.WithCatalogue(gpus)
		}
		return p, nil
	}
	p, err := replica.LookupPresetIn(f.preset, gpus)
	if err != nil {
		return replica.Preset{}, fmt.Errorf("--preset: %w", err)
	}
	ov := map[string]any{}
	if f.gpu != "" {
		ov["gpu"] = f.gpu
	}
	if f.tp > 0 {
		ov["tensor_parallel_size"] = f.tp
	}
	if len(ov) > 0 {
		js, _ := json.Marshal(ov)
		if p, err = p.WithOverrides(js); err != nil {
			return replica.Preset{}, err
		}
	}
	return p, nil
}

func (f *specFlags) fleetDescription(replicas int) string {
	switch {
	case f.fleet != "":
		return fmt.Sprintf("%d replicas from %s", replicas, f.fleet)
	case f.modelConfig != "":
		gpu := f.gpu
		if gpu == "" {
			gpu = "H100"
		}
		return fmt.Sprintf("%d × %s on %d×%s", replicas, f.modelConfig, max(f.tp, 1), gpu)
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
