package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/eppsim/eppsim/arch"
	"github.com/eppsim/eppsim/epp"
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
	api         string
	timeScale   float64
	skipInvalid bool
	replicas    int
	preset      string
	modelConfig string
	gpu         string
	tp          int
	gpuCatalog  string
	engine      string
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
	gatewayMax  int
	sampleEvery time.Duration
	checkInvar  bool
	iperf       iperfFlags
	calibration string
	asyncSched  bool
	dp          int
	offloadGiB  float64
	pcieGBps    float64
	jobOverhead time.Duration
	pd          pdFlags
	dcgmCollect time.Duration
	maxFleetGiB float64
	upstream    []string
	release     string
	classes     []string
	objectives  []string
	fairnessID  string

	flags *pflag.FlagSet // to tell flags given from defaults
}

func (f *specFlags) register(fl *pflag.FlagSet) {
	f.flags = fl
	fl.StringVar(&f.trace, "trace", workload.DefaultWorkload, "trace file, builtin:NAME for an embedded workload, or inference-perf:FILE.yaml for an inference-perf config's traffic")
	fl.StringVar(&f.format, "format", "auto", formatHelp)
	fl.StringVar(&f.mode, "mode", "default", modeHelp)
	fl.StringVar(&f.api, "api", "default", apiHelp)
	fl.Float64Var(&f.timeScale, "time-scale", 0, "multiply trace timestamps by this factor (0 = as recorded)")
	fl.BoolVar(&f.skipInvalid, "skip-invalid", false, "skip malformed trace lines (counted and reported)")
	fl.IntVar(&f.replicas, "replicas", 4, "number of replicas (ignored with --fleet)")
	fl.StringVar(&f.preset, "preset", "llama-3.1-8b-h100", "replica preset: "+strings.Join(replica.PresetNames(), ", ")+", or a preset YAML file (ignored with --fleet or --model-config)")
	fl.StringVar(&f.modelConfig, "model-config", "", "a Hugging Face config.json (or a directory holding one, or the id of an embedded config) to build replicas from without a preset, with --gpu and --tensor-parallel-size (ignored with --fleet)")
	fl.StringVar(&f.gpu, "gpu", "", "GPU of the catalogue ("+strings.Join(arch.DefaultGPUs().Names(), ", ")+", or an alias): the --model-config replicas' GPU (default H100), or replaces the preset's")
	fl.IntVar(&f.tp, "tensor-parallel-size", 0, "vLLM's --tensor-parallel-size: GPUs per replica, weights and KV cache split across them (default: the preset's, or 1; ignored with --fleet)")
	fl.IntVar(&f.tp, "tp", 0, "alias of --tensor-parallel-size")
	fl.StringVar(&f.gpuCatalog, "gpu-catalogue", "", "YAML file of GPUs added to or changed in the built-in catalogue (format of arch/gpus.yaml)")
	fl.StringVar(&f.engine, "engine", "", "inference engine of every replica: "+strings.Join(replica.EngineTypes, " or ")+" (default: each preset's or fleet group's engine_type, vllm; docs/replicas.md, Choosing the engine)")
	fl.StringVar(&f.fleet, "fleet", "", "fleet YAML file: replica groups with count, preset or model/gpu/tp, overrides, labels")
	fl.IntVar(&f.kvBlocks, "num-gpu-blocks-override", 0, "vLLM's --num-gpu-blocks-override on every replica: the KV blocks (null block included) instead of the capacity computed from GPU memory")
	fl.IntVar(&f.kvBlocks, "kv-blocks", 0, "")
	_ = fl.MarkDeprecated("kv-blocks", "use --num-gpu-blocks-override (vLLM's name)")
	fl.Float64Var(&f.gpuMemUtil, "gpu-memory-utilization", 0, "vLLM's --gpu-memory-utilization on every replica, in (0, 1] (default: the preset's, 0.9)")
	fl.StringVar(&f.kvDtype, "kv-cache-dtype", "", "vLLM's --kv-cache-dtype on every replica: auto, bfloat16, fp8, fp8_e4m3, fp8_e5m2")
	fl.IntVar(&f.maxSeqs, "max-num-seqs", 0, "vLLM's --max-num-seqs on every replica (default: the preset's)")
	fl.IntVar(&f.maxModelLen, "max-model-len", 0, "vLLM's --max-model-len on every replica (default: the model's max_position_embeddings)")
	fl.IntVar(&f.maxBatched, "max-num-batched-tokens", 0, "vLLM's --max-num-batched-tokens on every replica (default: the preset's)")
	fl.IntVar(&f.maxBatched, "max-batched-tokens", 0, "")
	_ = fl.MarkDeprecated("max-batched-tokens", "use --max-num-batched-tokens (vLLM's name)")
	fl.IntVar(&f.blockSize, "block-size", 0, "vLLM's --block-size (KV block size in tokens) on every replica (the computed KV capacity follows)")
	fl.IntVar(&f.dp, "data-parallel-size", 0, "vLLM's --data-parallel-size on every replica: that many independent engines per replica, each its own rank endpoint <pod>-rank-<i> (default: the preset's, 1)")
	fl.Float64Var(&f.offloadGiB, "kv-offloading-size", 0, "vLLM's --kv-offloading-size on every replica: GiB of CPU memory for a CPU KV tier (native OffloadingConnector: stores prompt blocks as they are computed, LRU, asynchronous loads; docs/pd-offload.md); 0 = off")
	fl.Float64Var(&f.pcieGBps, "offload-pcie-bandwidth", 0, fmt.Sprintf("GB/s per GPU of the CPU tier's copies, each way (default %g, an estimate: PCIe Gen5 x16 pinned; Gen4 is about 22)", replica.DefaultOffloadPCIeGBps))
	fl.DurationVar(&f.jobOverhead, "offload-job-overhead", 0, fmt.Sprintf("fixed cost of one CPU tier copy job (default %gµs, an estimate)", replica.DefaultOffloadJobOverheadUs))
	f.pd.register(fl)
	fl.DurationVar(&f.dcgmCollect, "dcgm-collect-interval", time.Duration(sim.DefaultDCGMCollectInterval), "dcgm-exporter's --collect-interval on every replica, when the EPP config polls DCGM (dcgm-data-source with dcgm-extractor): each exporter publishes the replica's GPU busy share of every such period (at least 1ms; docs/epp.md, GPU telemetry)")
	fl.Float64Var(&f.maxFleetGiB, "max-fleet-memory", float64(sim.DefaultMaxFleetBytes)/(1<<30), "GiB the fleet's replicas may take, estimated up front (KV block pools and prefix caches at full size, CPU tiers, a fixed share per replica; docs/replicas.md): a larger fleet is refused before the run")
	fl.StringArrayVar(&f.upstream, "epp-upstream", nil, "turn on a later llm-d-router behaviour in every EPP config, named after the upstream change (repeatable): "+upstreamHelp())
	fl.StringVar(&f.release, "epp-release", "", "model an older EPP config's plugins after this upstream release instead of translating them to today's (docs/epp.md, Older configs and releases): "+releaseHelp())
	fl.BoolVar(&f.asyncSched, "async-scheduling", true, "vLLM's --async-scheduling on every replica (its default): a request arriving during a step waits one more step; --async-scheduling=false schedules it at the next step")
	fl.StringVar(&f.calibration, "calibration", "", "step-time calibration file for every replica (docs/latency.md; default: each preset's, the one that ships)")
	fl.Uint64Var(&f.seed, "seed", 1, seedHelp)
	fl.IntVar(&f.maxRequests, "max-requests", 0, "stop after this many requests (0 = all)")
	fl.DurationVar(&f.duration, "duration", 0, "stop injecting requests after this much simulated time (0 = all)")
	fl.DurationVar(&f.warmup, "warmup", 0, "exclude requests arriving before this from statistics")
	fl.DurationVar(&f.refresh, "refresh-metrics-interval", 50*time.Millisecond, "EPP metrics scrape period (at least 1ms)")
	fl.DurationVar(&f.kvLag, "kv-event-lag", 5*time.Millisecond, "KV event delivery lag to the EPP")
	fl.DurationVar(&f.eppLatency, "epp-latency", 0, "EPP decision latency added before a request reaches its replica")
	fl.DurationVar(&f.netLatency, "network-latency", 0, "network latency added before a request reaches its replica")
	fl.IntVar(&f.gatewayMax, "gateway-max-requests", 0, fmt.Sprintf("requests in flight the gateway lets through to the EPP at once (its Envoy circuit breaker on the EPP's ext_proc cluster, max_requests; Envoy's default is %d): a request beyond it fails at once with HTTP 500; 0 = no limit (docs/flow-control.md, The gateway in front of the EPP)", sim.DefaultEnvoyMaxRequests))
	fl.DurationVar(&f.sampleEvery, "timeseries-interval", 10*time.Second, "time-series sampling period (with --out; at least 10ms)")
	fl.BoolVar(&f.checkInvar, "check-invariants", false, "verify replica invariants after every step (slow; debugging)")
	f.iperf.register(fl)
	f.iperf.registerClient(fl)
	fl.StringArrayVar(&f.classes, "priority-class", nil, "a priority class of the workload, NAME=PRIORITY:SHARE (repeatable): an InferenceObjective NAME of that priority, sent (x-llm-d-inference-objective) by that share of the sessions (shares are weights); requests whose trace names an objective keep it (docs/workloads.md, docs/flow-control.md)")
	fl.StringArrayVar(&f.objectives, "inference-objective", nil, "an InferenceObjective the EPP knows, NAME=PRIORITY or NAME (no priority) (repeatable): for traces whose requests name objectives (x_objective, x_headers, inference-perf api.headers)")
	fl.StringVar(&f.fairnessID, "fairness-id", "none", "fairness ID (x-llm-d-inference-fairness-id) of requests that carry none: none (the EPP's default-flow), session (the session id) or class (the objective)")
}

// identity returns the workload's priority classes, the fairness ID
// source and the InferenceObjectives of the run (flow-control.md §2).
func (f *specFlags) identity() ([]workload.PriorityClass, string, []epp.Objective, error) {
	var classes []workload.PriorityClass
	var objs []epp.Objective
	seen := map[string]bool{}
	for _, c := range f.classes {
		pc, err := workload.ParsePriorityClass(c)
		if err != nil {
			return nil, "", nil, fmt.Errorf("--priority-class: %w", err)
		}
		if seen[pc.Name] {
			return nil, "", nil, fmt.Errorf("--priority-class %s: the objective %q is given twice", c, pc.Name)
		}
		seen[pc.Name] = true
		classes = append(classes, pc)
		p := pc.Priority
		objs = append(objs, epp.Objective{Name: pc.Name, Priority: &p})
	}
	for _, o := range f.objectives {
		name, prio, hasPrio := strings.Cut(o, "=")
		name = strings.TrimSpace(name)
		if name == "" {
			return nil, "", nil, fmt.Errorf("--inference-objective %q: want NAME=PRIORITY or NAME", o)
		}
		if seen[name] {
			return nil, "", nil, fmt.Errorf("--inference-objective %s: the objective %q is given twice", o, name)
		}
		seen[name] = true
		obj := epp.Objective{Name: name}
		if hasPrio {
			p, err := strconv.Atoi(strings.TrimSpace(prio))
			if err != nil {
				return nil, "", nil, fmt.Errorf("--inference-objective %s: priority %q is not an integer", o, prio)
			}
			obj.Priority = &p
		}
		objs = append(objs, obj)
	}
	fid, err := workload.ParseFairnessID(f.fairnessID)
	if err != nil {
		return nil, "", nil, fmt.Errorf("--fairness-id: %w", err)
	}
	return classes, fid, objs, nil
}

// Help texts shared by every verb that reads traces, so run, sweep, tune
// and trace describe the same values.
const (
	formatHelp = "trace format: auto (detect), mooncake, alibaba, openai-jsonl, sharegpt, azure-csv, inference-perf"
	apiHelp    = "request API of traces without one of their own: default (completions for mooncake, alibaba and azure-csv; chat for sharegpt and builtin:NAME), chat, completions, vllm-generate (/inference/v1/generate) or sglang-generate (/generate; list sglanghttp-parser in the EPP config); the pre-tokenized APIs send the prompt's token ids (docs/workloads.md, Request APIs)"
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
		name string
		v    time.Duration
	}{
		{"duration", f.duration}, {"warmup", f.warmup}, {"kv-event-lag", f.kvLag},
		{"epp-latency", f.eppLatency}, {"network-latency", f.netLatency},
		{"refresh-metrics-interval", f.refresh}, {"timeseries-interval", f.sampleEvery},
		{"dcgm-collect-interval", f.dcgmCollect},
		{"offload-job-overhead", f.jobOverhead},
		{"pd-transfer-base-latency", f.pd.base}, {"pd-handshake", f.pd.handshake},
		{"pd-hop", f.pd.hop}, {"pd-response", f.pd.response}, {"pd-notify", f.pd.notify},
	}
	for _, d := range durations {
		period, isPeriod := minPeriod[d.name]
		switch {
		case isPeriod && d.v <= 0:
			return fmt.Errorf("--%s %v: must be greater than 0 (at least %v: %s)", d.name, d.v, period.min, period.why)
		case isPeriod && d.v < period.min:
			return fmt.Errorf("--%s %v: must be at least %v (%s)", d.name, d.v, period.min, period.why)
		case d.v < 0:
			return fmt.Errorf("--%s %v: must not be negative (0 = %s)", d.name, d.v, zeroMeaning[d.name])
		}
	}
	// A deprecated name in an error is the name the user typed.
	named := func(name, old string) string {
		if f.given(old) {
			return old
		}
		return name
	}
	batched := named("max-num-batched-tokens", "max-batched-tokens")
	tp := named("tensor-parallel-size", "tp")
	for _, err := range []error{
		positive("replicas", f.replicas, 1, "replicas in the fleet"),
		positive(named("num-gpu-blocks-override", "kv-blocks"), f.kvBlocks, 2, "block 0 is vLLM's null block"),
		positive(tp, f.tp, 1, "GPUs per replica"),
		positive("data-parallel-size", f.dp, 1, "engines per replica"),
		positive("max-model-len", f.maxModelLen, 1, "tokens of prompt and output"),
		positive("max-num-seqs", f.maxSeqs, 1, "requests running at once"),
		positive(batched, f.maxBatched, 1, "tokens per engine step"),
		positive("block-size", f.blockSize, 1, "tokens per KV block"),
	} {
		if err != nil {
			return err
		}
	}
	if f.given("kv-offloading-size") && (!(f.offloadGiB >= 0) || math.IsInf(f.offloadGiB, 0)) {
		return fmt.Errorf("--kv-offloading-size %v: must be a number of GiB ≥ 0 (0 = no CPU offloading)", f.offloadGiB)
	}
	if f.given("offload-pcie-bandwidth") && (!(f.pcieGBps > 0) || math.IsInf(f.pcieGBps, 0)) {
		return fmt.Errorf("--offload-pcie-bandwidth %v: must be a positive number of GB/s", f.pcieGBps)
	}
	if f.given("pd-transfer-bandwidth") && (!(f.pd.gbps > 0) || math.IsInf(f.pd.gbps, 0)) {
		return fmt.Errorf("--pd-transfer-bandwidth %v: must be a positive number of GB/s", f.pd.gbps)
	}
	if err := replica.CheckEngineType(f.engine); err != nil {
		return fmt.Errorf("--engine: %w", err)
	}
	if f.replicas > sim.MaxReplicas {
		return fmt.Errorf("--replicas %d: at most %d (a fleet file's bound too)", f.replicas, sim.MaxReplicas)
	}
	if !(f.maxFleetGiB > 0) || math.IsInf(f.maxFleetGiB, 0) {
		return fmt.Errorf("--max-fleet-memory %v: must be a positive number of GiB", f.maxFleetGiB)
	}
	if f.given("gpu-memory-utilization") && !(f.gpuMemUtil > 0 && f.gpuMemUtil <= 1) {
		return fmt.Errorf("--gpu-memory-utilization %v: must be in (0, 1] (vLLM's fraction of GPU memory)", f.gpuMemUtil)
	}
	if f.maxRequests < 0 {
		return fmt.Errorf("--max-requests %d: must not be negative (0 = every request of the trace)", f.maxRequests)
	}
	if math.IsNaN(f.timeScale) || math.IsInf(f.timeScale, 0) || f.timeScale < 0 {
		return fmt.Errorf("--time-scale %v: must be a finite number ≥ 0 (0 = timestamps as recorded)", f.timeScale)
	}
	for _, u := range f.upstream {
		if _, ok := scenario.UpstreamOptions[u]; !ok {
			return fmt.Errorf("--epp-upstream %q: unknown (have %s)", u, strings.Join(slices.Sorted(maps.Keys(scenario.UpstreamOptions)), ", "))
		}
	}
	if err := checkRelease(f.release); err != nil {
		return err
	}
	if f.gatewayMax < 0 {
		return fmt.Errorf("--gateway-max-requests %d: must be > 0, or 0 for no limit", f.gatewayMax)
	}
	if f.duration > 0 && f.warmup >= f.duration {
		return fmt.Errorf("--warmup %v: must be shorter than --duration %v (every request would be warm-up)", f.warmup, f.duration)
	}
	return nil
}

// upstreamHelp lists the --epp-upstream values with what each does.
func upstreamHelp() string {
	var parts []string
	for _, n := range slices.Sorted(maps.Keys(scenario.UpstreamOptions)) {
		parts = append(parts, n+" ("+scenario.UpstreamOptions[n]+")")
	}
	return strings.Join(parts, "; ")
}

// minPeriod bounds the periods of the simulation's timers from below:
// each fires for the whole simulated time, so a period of nanoseconds
// never lets a run end (--refresh-metrics-interval 1ns: not done in a
// minute where 50 ms takes 0.2 s). The bounds are the finest the modelled
// process is: an HTTP scrape of /metrics takes about a millisecond;
// dcgm-exporter's --collect-interval is given in milliseconds; an engine
// step lasts milliseconds to tens of them, so time-series samples finer
// than 10 ms repeat the same state (and at 1 ms the 36-minute chat run
// wrote a 425 MB timeseries.csv).
var minPeriod = map[string]struct {
	min time.Duration
	why string
}{
	"refresh-metrics-interval": {time.Millisecond, "a metrics scrape takes about a millisecond"},
	"dcgm-collect-interval":    {time.Millisecond, "dcgm-exporter collects every N milliseconds"},
	"timeseries-interval":      {10 * time.Millisecond, "about one engine step; finer samples repeat the same state"},
}

// zeroMeaning says what 0 means for the duration flags that accept it.
var zeroMeaning = map[string]string{
	"duration":                 "no limit",
	"warmup":                   "no warm-up",
	"kv-event-lag":             "events delivered at once",
	"epp-latency":              "none",
	"network-latency":          "none",
	"offload-job-overhead":     "no fixed cost per copy",
	"pd-transfer-base-latency": "none",
	"pd-handshake":             "none",
	"pd-hop":                   "none",
	"pd-response":              "none",
	"pd-notify":                "none",
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
	classes, fid, objs, err := f.identity()
	if err != nil {
		return nil, err
	}
	wopts.Classes, wopts.FairnessID = classes, fid
	return &scenario.Spec{
		Version: version, Trace: f.trace, Workload: wopts, Fleet: fleet,
		Env: sim.Options{
			Seed: f.seed, ScrapeInterval: int64(f.refresh), KVEventLag: int64(f.kvLag),
			EPPLatency: int64(f.eppLatency), NetworkLatency: int64(f.netLatency),
			MaxRequests: f.maxRequests, Duration: int64(f.duration), Warmup: int64(f.warmup),
			SampleInterval: int64(f.sampleEvery), PD: f.pd.options(f), Objectives: objs,
			DCGMCollectInterval: int64(f.dcgmCollect), MaxFleetBytes: f.maxFleetBytes(),
			GatewayMaxRequests: f.gatewayMax,
		},
		Upstream: f.upstream, Release: f.release,
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
			return nil, fmt.Errorf("--preset: %w", err)
		}
		if f.engine != "" {
			p.EngineType = f.engine // the replicas are named after it
		}
		fleet = sim.UniformFleet(f.replicas, p)
	}
	if f.gpuMemUtil < 0 || f.gpuMemUtil > 1 {
		return nil, fmt.Errorf("--gpu-memory-utilization must be in (0, 1], got %g", f.gpuMemUtil)
	}
	if f.calibration != "" {
		c, err := replica.LoadCalibration(f.calibration)
		if err != nil {
			return nil, fmt.Errorf("--calibration: %w", err)
		}
		for i := range fleet {
			fleet[i].Preset = fleet[i].Preset.WithCalibration(c, f.calibration)
			fleet[i].Preset.StepModel = "calibrated"
		}
	}
	for i := range fleet {
		e := &fleet[i].Preset.Engine
		if f.dp > 0 {
			e.DataParallelSize = f.dp
		}
		if f.given("async-scheduling") {
			v := f.asyncSched
			e.AsyncScheduling = &v
		}
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
		if f.given("kv-offloading-size") {
			e.KVOffloadingSize = f.offloadGiB
		}
		if f.given("offload-pcie-bandwidth") {
			e.OffloadPCIeGBps = f.pcieGBps
		}
		if f.given("offload-job-overhead") {
			us := float64(f.jobOverhead) / 1e3
			e.OffloadJobOverheadUs = &us
		}
		e.CheckInvariants = f.checkInvar
		if f.engine != "" {
			fleet[i].Preset.EngineType = f.engine
		}
	}
	if err := sim.LabelEngines(fleet); err != nil {
		return nil, err
	}
	// Resolve every engine now, so a configuration its engine would
	// refuse (too little memory, a bad argument) is an input error before
	// the run.
	for i := range fleet {
		if err := sim.CheckEngine(fleet[i]); err != nil {
			return nil, err
		}
		if i > 0 && fleet[i].Preset.Name == fleet[i-1].Preset.Name {
			continue // the same preset: checked once
		}
		if _, err := fleet[i].Preset.Model(); err != nil {
			return nil, err
		}
	}
	fleet, err := sim.ExpandDataParallel(fleet)
	if err != nil {
		return nil, err
	}
	if err := sim.CheckFleetMemory(fleet, f.maxFleetBytes()); err != nil {
		var me *sim.MemoryError
		if errors.As(err, &me) {
			where, fewer := fmt.Sprintf("--replicas %d", f.replicas), "--replicas"
			if f.fleet != "" {
				where, fewer = "--fleet "+f.fleet, "the groups' counts"
			}
			return nil, fmt.Errorf("%s: %w; lower %s or --num-gpu-blocks-override, or raise --max-fleet-memory (GiB) to %s",
				where, err, fewer, strconv.FormatFloat(math.Ceil(float64(me.Estimate)/(1<<30)*10)/10, 'f', 1, 64))
		}
		return nil, err
	}
	return fleet, nil
}

// maxFleetBytes is --max-fleet-memory in bytes.
func (f *specFlags) maxFleetBytes() int64 { return max(1, int64(f.maxFleetGiB*(1<<30))) }

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

// fleetDescription describes the fleet for people ("4 × llama-3.1-8b-h100"),
// saying which of its replicas run SGLang when any do.
func (f *specFlags) fleetDescription(fleet []sim.ReplicaSpec) string {
	replicas := len(fleet)
	var d string
	switch {
	case f.fleet != "":
		d = fmt.Sprintf("%d replicas from %s", replicas, f.fleet)
	case f.modelConfig != "":
		gpu := f.gpu
		if gpu == "" {
			gpu = "H100"
		}
		d = fmt.Sprintf("%d × %s on %d×%s", replicas, f.modelConfig, max(f.tp, 1), gpu)
	default:
		d = fmt.Sprintf("%d × %s", replicas, f.preset)
	}
	sg := 0
	for _, r := range fleet {
		if r.Preset.EngineTypeOf() == replica.EngineSGLang {
			sg++
		}
	}
	switch {
	case sg == 0:
	case sg == replicas:
		d += " on SGLang"
	default:
		d += fmt.Sprintf(" (%d on SGLang)", sg)
	}
	return d
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
	if o.API, err = workload.ParseAPI(f.api); err != nil {
		return o, fmt.Errorf("--api: %w", err)
	}
	o.TimeScale = f.timeScale
	o.SkipInvalid = f.skipInvalid
	o.Seed = int64(f.seed)
	if err := f.iperf.apply(&o); err != nil {
		return o, err
	}
	return o, nil
}

// pdFlags are the P/D request path's parameters (pd-offload.md A.8, C.4),
// used when an EPP config disaggregates.
type pdFlags struct {
	gbps                                   float64
	base, handshake, hop, response, notify time.Duration
}

func (p *pdFlags) register(fl *pflag.FlagSet) {
	d := sim.DefaultPD()
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	fl.Float64Var(&p.gbps, "pd-transfer-bandwidth", d.TransferGBps, "P/D: GB/s of a decode pod's NIXL read of the prompt KV from its prefill pod, per tensor-parallel rank pair (BLIS's default)")
	fl.DurationVar(&p.base, "pd-transfer-base-latency", ms(d.TransferBaseUs/1e3), "P/D: fixed latency of one NIXL read (BLIS's default)")
	fl.DurationVar(&p.handshake, "pd-handshake", ms(d.HandshakeMs), "P/D: NIXL handshake on a decode pod's first read from a prefill pod (an estimate)")
	fl.DurationVar(&p.hop, "pd-hop", time.Duration(d.Hop), "P/D: one hop between the decode pod's sidecar and the prefill pod, each way (an estimate)")
	fl.DurationVar(&p.response, "pd-response", time.Duration(d.Response), "P/D: the prefill pod's response serialisation (an estimate)")
	fl.DurationVar(&p.notify, "pd-notify", time.Duration(d.Notify), "P/D: the decode pod's notification that frees the prefill pod's blocks (an estimate)")
}

// options returns the P/D parameters, or nil when no flag was given (the
// defaults).
func (p *pdFlags) options(f *specFlags) *sim.PDOptions {
	given := false
	for _, n := range []string{"pd-transfer-bandwidth", "pd-transfer-base-latency", "pd-handshake", "pd-hop", "pd-response", "pd-notify"} {
		given = given || f.given(n)
	}
	if !given {
		return nil
	}
	return &sim.PDOptions{TransferGBps: p.gbps, TransferBaseUs: float64(p.base) / 1e3, HandshakeMs: float64(p.handshake) / 1e6,
		Hop: int64(p.hop), Response: int64(p.response), Notify: int64(p.notify)}
}
