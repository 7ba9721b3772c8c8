// Package scenario is eppsim's library entry point for one simulation: a
// workload, a fleet and an environment (a Spec) plus an EPP configuration
// (an EPP) become a report.Summary. `eppsim run`, sweeps, tuning and the
// regression gate all call Run; each call builds fresh EPP plugins, so
// runs are independent. The workload is read through a Feed: a run of its
// own (Run, RunContext), the configs of one `eppsim run` together
// (RunReader on one Feed's readers), or every run of a sweep or tuning
// (Pool) share one reading of the trace, read-only, within a bounded
// window of requests.
package scenario

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/eppsim/eppsim/epp/config"
	"github.com/eppsim/eppsim/epp/picker"
	"github.com/eppsim/eppsim/epp/plugins"
	"github.com/eppsim/eppsim/epp/producer"
	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/report"
	"github.com/eppsim/eppsim/sim"
	"github.com/eppsim/eppsim/workload"
)

// Spec is everything of a run except the EPP configuration.
type Spec struct {
	Version string
	// Trace is a file or builtin:NAME; Workload the reader options (its
	// Seed should equal Env.Seed).
	Trace    string
	Workload workload.Options
	// Open, when set, opens the workload instead of Trace (a source built
	// in memory, such as an inference-perf config); Trace then only
	// labels it.
	Open func() (*workload.Stream, error)
	// OpenKey, when set with Open, names what Open returns: a Pool's runs
	// of specs with the same OpenKey and Workload share one reading of it,
	// as runs of one Trace do. Two specs whose Open return different
	// requests must not share an OpenKey. Empty: each run reads its Open.
	OpenKey string
	Fleet   []sim.ReplicaSpec
	// Env holds the seed, EPP environment and limits; its hooks are ignored
	// (use Hooks).
	Env sim.Options
	// ArrivalScale, when > 0 and not 1, multiplies every arrival and think
	// time after the workload is read (scale.go): 0.5 replays the trace at
	// twice its rate. Unlike Workload.TimeScale it leaves the reading
	// alone, so a Pool's runs at many rates of one trace (a capacity
	// search) share one reading.
	ArrivalScale float64
	// Upstream names later llm-d-router behaviours to turn on in every EPP
	// configuration of the run (UpstreamOptions); none by default (the EPP
	// at ebab687).
	Upstream []string
	// Release, when set (config.Releases, e.g. llm-d-v0.2), makes older
	// configurations' plugins behave as in that upstream release instead
	// of translating them to today's (docs/epp.md "Older configs and
	// releases"). An EPP's own Release wins.
	Release string
}

// UpstreamOptions are the later llm-d-router behaviours Spec.Upstream can
// turn on, named after the upstream change, with what each does.
var UpstreamOptions = map[string]string{
	producer.UpstreamPR2292: "approx-prefix-cache-producer: size each pod's LRU to max(GPU, CPU offload) cache capacity (llm-d-router PR #2292 for issue #1650; the simulated replicas report their CPU tier's capacity as vLLM PR #51615 proposes)",
}

// applyUpstream turns the named upstream behaviours on in l's plugins.
func applyUpstream(l *config.Loaded, names []string) error {
	for _, n := range names {
		if _, ok := UpstreamOptions[n]; !ok {
			known := slices.Sorted(maps.Keys(UpstreamOptions))
			return fmt.Errorf("unknown upstream option %q (have %s)", n, strings.Join(known, ", "))
		}
	}
	if !slices.Contains(names, producer.UpstreamPR2292) {
		return nil
	}
	for _, p := range l.Plugins {
		if a, ok := p.Plugin.(*producer.ApproxPrefix); ok {
			a.SetOffloadLRU(true)
		}
	}
	return nil
}

// EPP names an EPP configuration: a file, "default" (the EPP's built-in
// default), a baseline name, or inline YAML.
type EPP struct {
	// Name labels the run (display and summary key).
	Name string
	// Source is a file path, "default" or a baseline; ignored when YAML is
	// set.
	Source string
	YAML   []byte
	// DPLB, for the vllm-dp-lb baseline, is its balancer's parameters
	// (nil: picker.DefaultDPLBOptions); other configurations ignore it.
	DPLB *picker.DPLBOptions
	// Release is config.Options.Release for this configuration ("" = the
	// Spec's).
	Release string
}

// ForSource returns the EPP for a --epp-config value, named after the file
// (without directory and extension) or the built-in name.
func ForSource(src string) EPP {
	name := src
	if _, ok := baselines[src]; !ok && src != "default" {
		name = strings.TrimSuffix(filepath.Base(src), filepath.Ext(src))
	}
	return EPP{Name: name, Source: src}
}

// IsBuiltin reports whether src names the default config or a baseline.
func IsBuiltin(src string) bool {
	_, ok := baselines[src]
	return ok || src == "default"
}

// Hooks observe a run.
type Hooks struct {
	OnRecord func(*sim.Record)
	OnSample func(*sim.Sample)
	// Stop, when set, may end the run early (sim.Options.Stop); the
	// summary then says so (report.Summary Sim.StoppedEarly).
	Stop sim.StopFunc
}

// Load builds the EPP's configuration with fresh plugins seeded by seed.
func (e EPP) Load(seed uint64) (*Loaded, error) {
	opts := config.Options{Registry: plugins.Builtin(), Seed: seed, Release: e.Release}
	var (
		l   *config.Loaded
		err error
	)
	src, isBaseline := baselines[e.Source]
	switch {
	case e.YAML != nil:
		opts.File = e.Name
		l, err = config.Load(e.YAML, opts)
	case e.Source == "default":
		l, err = config.Default(opts)
	case isBaseline:
		l, err = config.Load([]byte(src), opts)
	default:
		l, err = config.LoadFile(e.Source, opts)
		if errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("%w (%s)", err, builtinHint(e.Source))
		}
	}
	if err != nil {
		return nil, err
	}
	return &Loaded{Loaded: l, baseline: isBaseline && e.YAML == nil, source: e.Source, dplb: e.DPLB}, nil
}

// builtinHint tells a user whose --epp-config names no file what the
// built-in configs are, and which one src looks like a misspelling of.
func builtinHint(src string) string {
	names := append(slices.Sorted(maps.Keys(baselines)), "default")
	slices.Sort(names)
	hint := "nor a built-in config: " + strings.Join(names, ", ")
	if best := config.ClosestName(src, names, 3); best != "" {
		hint += `; did you mean "` + best + `"?`
	}
	return hint
}

// Loaded is a loaded EPP configuration.
type Loaded struct {
	*config.Loaded
	baseline bool
	source   string
	dplb     *picker.DPLBOptions
}

// Disaggregates reports whether the configuration's profile handler can
// send a request's prefill to a pod of its own (P/D, pd-offload.md A.2).
func (l *Loaded) Disaggregates() bool { return sim.Disaggregates(l.Loaded.Router()) }

// InputError marks a failure caused by the run's inputs (an unreadable or
// invalid trace, config or fleet) rather than by eppsim itself.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// IsInputError reports whether err was caused by bad input.
func IsInputError(err error) bool {
	var ie *InputError
	return errors.As(err, &ie)
}

// Run simulates spec behind the EPP and summarises it.
func Run(spec *Spec, e EPP, hooks Hooks) (*report.Summary, error) {
	return RunContext(context.Background(), spec, e, hooks)
}

// RunContext is Run, abandoned when ctx is cancelled (the error then wraps
// ctx's cause, and hooks see no further records). It reads the workload
// through a Feed of its own, a window ahead of the simulation.
func RunContext(ctx context.Context, spec *Spec, e EPP, hooks Hooks) (*report.Summary, error) {
	var feed *Feed
	defer func() {
		if feed != nil {
			feed.Close() // after the reader's Close: the stream is closed on return
		}
	}()
	return run(ctx, spec, e, hooks, func() (*FeedReader, error) {
		feed = NewFeed(SpecOpener(spec), FeedOptions{Prepare: Preparer(spec, []EPP{e})})
		return feed.JoinContext(ctx, nil)
	})
}

// RunReader is RunContext reading the workload from rd, a reader of a Feed
// over spec's workload (the caller's to create and close); the run closes
// rd when it ends.
func RunReader(ctx context.Context, spec *Spec, e EPP, hooks Hooks, rd *FeedReader) (*report.Summary, error) {
	return run(ctx, spec, e, hooks, func() (*FeedReader, error) { return rd, nil })
}

// SpecOpener returns the function that opens spec's workload (Spec.Open,
// or Spec.Trace with Spec.Workload), for NewFeed.
func SpecOpener(spec *Spec) func() (*workload.Stream, error) {
	if spec.Open != nil {
		return spec.Open
	}
	return func() (*workload.Stream, error) { return workload.Open(spec.Trace, spec.Workload) }
}

// run is RunContext with the workload's reader from join, called once the
// EPP configuration has loaded.
func run(ctx context.Context, spec *Spec, e EPP, hooks Hooks, join func() (*FeedReader, error)) (*report.Summary, error) {
	if e.Release == "" {
		e.Release = spec.Release
	}
	l, err := e.Load(spec.Env.Seed)
	if err != nil {
		return nil, &InputError{err}
	}
	if err := applyUpstream(l.Loaded, spec.Upstream); err != nil {
		return nil, &InputError{err}
	}
	router, err := l.router()
	if err != nil {
		return nil, err
	}
	router.Record = true
	rd, err := join()
	if err != nil {
		if ctx.Err() != nil {
			return nil, err // interrupted while the workload opened
		}
		return nil, &InputError{err}
	}
	defer rd.Close()
	opts := spec.Env
	if l.baseline && l.source == "oracle" {
		opts.KVEventLag = 0 // the oracle baseline sees KV events without lag
	}
	// An inference-perf config's traffic goes through inference-perf's
	// client (docs/workloads.md, "Client concurrency").
	opts.Client = rd.Client()
	agg := report.NewAggregator()
	if l.FlowControl != nil {
		agg.WithClasses()
	}
	src, plans := source(spec, rd)
	if len(plans) > 0 {
		declared := make([]report.StagePlan, len(plans))
		for i, p := range plans {
			declared[i] = report.StagePlan{Rate: p.Rate, DurationS: p.Duration}
		}
		agg.WithStages(declared)
	}
	opts.OnRecord = func(r *sim.Record) {
		agg.Add(r)
		if hooks.OnRecord != nil {
			hooks.OnRecord(r)
		}
	}
	opts.OnSample = hooks.OnSample
	opts.Stop = hooks.Stop
	if hooks.OnSample == nil {
		opts.SampleInterval = 0
	}
	start := time.Now()
	res, err := sim.RunContext(ctx, src, router, spec.Fleet, opts)
	wall := time.Since(start).Seconds()
	if err != nil {
		var fe *sim.FleetError
		if workload.IsInputError(err) || errors.As(err, &fe) {
			return nil, &InputError{err}
		}
		return nil, err
	}
	s := agg.Summary(res)
	s.Sim.WallSeconds = wall
	if wall > 0 {
		s.Sim.RequestsPerWallS = float64(res.Injected) / wall
	}
	s.Config = runConfig(spec, l, opts, res)
	if l.Disaggregates() {
		pdConfig(s.Config, spec.Fleet, opts)
	} else if report.Measured(s) {
		if s.Knee, err = kneeOf(spec.Fleet, s); err != nil {
			return nil, err
		}
		s.Intervals = intervalsOf(spec.Fleet, s)
		if s.Knee != nil {
			if _, _, near, ok := StepScales(spec.Fleet, s); ok {
				s.Knee.NearKnee = near
			}
		}
	}
	if c := opts.Client; c != nil {
		s.Config.Environment["inference_perf_client"] = map[string]any{
			"max_concurrency": c.MaxConcurrency, "num_workers": c.NumWorkers, "worker_max_concurrency": c.WorkerMaxConcurrency,
			"request_timeout": time.Duration(c.Timeout).String(), "interval": time.Duration(c.Interval).String(),
		}
	}
	if len(router.GPUPolls) > 0 {
		// Only a config that polls DCGM has simulated dcgm-exporters.
		w := opts.DCGMCollectInterval
		if w == 0 {
			w = sim.DefaultDCGMCollectInterval
		}
		s.Config.Environment["dcgm_collect_interval"] = time.Duration(w).String()
	}
	if n := rd.Skipped(); n > 0 {
		s.Config.Workload.SkippedInvalid = n
		for _, err := range rd.SkippedErrors()[:min(n, maxSkipExamples)] {
			s.Config.Workload.SkippedExamples = append(s.Config.Workload.SkippedExamples, err.Error())
		}
	}
	return s, nil
}

func runConfig(spec *Spec, l *Loaded, opts sim.Options, res *sim.Result) *report.RunConfig {
	w := spec.Workload
	rc := &report.RunConfig{
		Version: spec.Version, Seed: opts.Seed,
		Workload: report.WorkloadConfig{Trace: spec.Trace, Format: string(w.Format), Mode: w.Mode.String(),
			MaxRequests: opts.MaxRequests, Injected: res.Injected},
		Environment: map[string]any{
			"refresh_metrics_interval": time.Duration(opts.ScrapeInterval).String(),
			"kv_event_lag":             time.Duration(opts.KVEventLag).String(),
			"epp_latency":              time.Duration(opts.EPPLatency).String(),
			"network_latency":          time.Duration(opts.NetworkLatency).String(),
		},
		EPP: eppInfo(l.Loaded),
	}
	if opts.GatewayMaxRequests > 0 {
		rc.Environment["gateway_max_requests"] = opts.GatewayMaxRequests
	}
	if len(spec.Upstream) > 0 {
		rc.EPP.Upstream = slices.Clone(spec.Upstream)
	}
	if len(l.Translations) > 0 {
		rc.EPP.Release = l.Release()
		for _, t := range l.Translations {
			rc.EPP.Translations = append(rc.EPP.Translations, t.String())
		}
	}
	// Request identity (flow-control.md §2): the workload's priority mix
	// and fairness source, and the InferenceObjectives the EPP knows.
	for _, c := range w.Classes {
		rc.Workload.PriorityClasses = append(rc.Workload.PriorityClasses, fmt.Sprintf("%s=%d:%g", c.Name, c.Priority, c.Share))
	}
	rc.Workload.FairnessID = w.FairnessID
	if len(opts.Objectives) > 0 {
		var objs []string
		for _, o := range opts.Objectives {
			if o.Priority == nil {
				objs = append(objs, o.Name)
			} else {
				objs = append(objs, fmt.Sprintf("%s=%d", o.Name, *o.Priority))
			}
		}
		rc.Environment["inference_objectives"] = objs
	}
	if opts.Duration > 0 {
		rc.Workload.Duration = time.Duration(opts.Duration).String()
	}
	if opts.Warmup > 0 {
		rc.Workload.Warmup = time.Duration(opts.Warmup).String()
	}
	for _, r := range spec.Fleet {
		labels := r.Labels
		if l, err := sim.EngineLabels(r); err == nil {
			labels = l // as the EPP sees the endpoint: SGLang's engine-type label
		}
		info := report.ReplicaInfo{Name: r.Name, Address: r.Address, Labels: labels,
			Preset: r.Preset.Name, Model: r.Preset.ModelRef, GPU: r.Preset.GPU.Name, TensorParallelSize: r.Preset.TensorParallelSize,
			StepModel: r.Preset.StepModelID()}
		// The run succeeded, so every replica's engine config resolved.
		if r.Preset.EngineTypeOf() == replica.EngineSGLang {
			info.EngineType = replica.EngineSGLang
			if cfg, err := sim.SGLangConfig(r); err == nil {
				info.SGLang = &cfg
			}
		} else {
			cfg, _ := r.Preset.EngineConfig()
			info.Engine = &cfg
		}
		rc.Fleet = append(rc.Fleet, info)
	}
	for _, ns := range l.NotSimulated {
		rc.NotSimulated = append(rc.NotSimulated, ns.String())
	}
	rc.Estimates = estimates(spec.Fleet)
	return rc
}

// estimates lists the fleet's parameters that are estimates with no
// source (pd-offload.md C.4): the CPU tier's copy bandwidth and per-job
// cost, when a replica with offloading uses eppsim's defaults for them.
func estimates(fleet []sim.ReplicaSpec) []string {
	var out []string
	for _, r := range fleet {
		e := &r.Preset.Engine
		if e.KVOffloadingSize <= 0 {
			continue
		}
		var n string
		if e.OffloadPCIeGBps == 0 {
			n = fmt.Sprintf("CPU offload copies at %g GB/s per GPU (offload_pcie_gb_per_s, PCIe Gen5 x16 pinned: an estimate, pd-offload.md C.4)", replica.DefaultOffloadPCIeGBps)
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
		if e.OffloadJobOverheadUs == nil {
			n = fmt.Sprintf("CPU offload copy jobs cost %g µs each on top (offload_job_overhead_us: an estimate, pd-offload.md C.4)", replica.DefaultOffloadJobOverheadUs)
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	return out
}

// pdConfig records a P/D run's parameters in its run config: the NIXL
// read's and the sidecar's, the estimates among them (pd-offload.md C.4),
// and a warning when no replica can take the prefill profile.
func pdConfig(rc *report.RunConfig, fleet []sim.ReplicaSpec, opts sim.Options) {
	pd := sim.DefaultPD()
	if opts.PD != nil {
		pd = *opts.PD
	}
	def := sim.DefaultPD()
	rc.Environment["pd_transfer_bandwidth_gb_per_s"] = pd.TransferGBps
	rc.Environment["pd_transfer_base_latency"] = time.Duration(pd.TransferBaseUs * 1e3).String()
	rc.Environment["pd_handshake"] = time.Duration(pd.HandshakeMs * 1e6).String()
	rc.Environment["pd_hop"] = time.Duration(pd.Hop).String()
	rc.Environment["pd_response"] = time.Duration(pd.Response).String()
	rc.Environment["pd_notify"] = time.Duration(pd.Notify).String()
	if pd.HandshakeMs == def.HandshakeMs {
		rc.Estimates = append(rc.Estimates, fmt.Sprintf("P/D: a decode pod's first NIXL read from a prefill pod waits for a %v handshake (pd_handshake: an estimate, pd-offload.md C.4)", time.Duration(pd.HandshakeMs*1e6)))
	}
	if pd.Hop == def.Hop || pd.Response == def.Response || pd.Notify == def.Notify {
		rc.Estimates = append(rc.Estimates, fmt.Sprintf("P/D: sidecar↔prefill pod hops of %v each way, a %v prefill response and a %v notification to free the prefill pod's blocks (pd_hop, pd_response, pd_notify: estimates, pd-offload.md C.4)",
			time.Duration(pd.Hop), time.Duration(pd.Response), time.Duration(pd.Notify)))
	}
	for _, r := range fleet {
		switch r.Labels[sim.RoleLabel] {
		case "prefill", "encode-prefill", "prefill-decode", "both", "encode-prefill-decode":
			return
		}
	}
	rc.Warnings = append(rc.Warnings, "no replica has a prefill role (llm-d.ai/role prefill, prefill-decode, both, encode-prefill or encode-prefill-decode): "+
		"the prefill profile finds no endpoint and every request runs decode-only, as upstream does (pd-offload.md A.9); label pods in the fleet file's groups (docs/pd-offload.md)")
}

// maxSkipExamples is how many skipped trace lines a summary names.
const maxSkipExamples = 3

// eppInfo summarises a loaded configuration for a summary (report.EPPInfo).
func eppInfo(l *config.Loaded) *report.EPPInfo {
	info := &report.EPPInfo{File: l.File, BuiltinDefault: l.BuiltinDefault, ProfileHandler: l.ProfileHandler,
		Producers: l.Producers}
	if y, err := l.YAML(); err == nil {
		info.EffectiveConfig = string(y)
	} else {
		info.EffectiveConfig = "# cannot render the effective config: " + err.Error() + "\n"
	}
	for _, p := range l.Profiles {
		ep := report.EPPProfile{Name: p.Name, Filters: p.Filters, Picker: p.Picker}
		for _, sc := range p.Scorers {
			ep.Scorers = append(ep.Scorers, report.EPPScorer{Name: sc.Name, Weight: sc.Weight})
		}
		info.Profiles = append(info.Profiles, ep)
	}
	for g, on := range l.FeatureGates {
		if on {
			info.FeatureGates = append(info.FeatureGates, g)
		}
	}
	slices.Sort(info.FeatureGates)
	return info
}
