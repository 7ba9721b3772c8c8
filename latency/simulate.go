package latency

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/cespare/xxhash/v2"

	"github.com/eppsim/eppsim/epp/picker"
	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/report"
	"github.com/eppsim/eppsim/scenario"
	"github.com/eppsim/eppsim/sim"
	"github.com/eppsim/eppsim/workload"
)

// Metrics are the compared latency metrics, in the order of latency.csv.
// itl_mean is (E2E mean − TTFT mean)/(output_len − 1) with the nominal
// output length, on both sides, as the published comparisons define it
// (../shared/latency/README.md "Metric caveats").
var Metrics = []string{"e2e_mean", "e2e_p90", "e2e_p99", "ttft_mean", "ttft_p90", "ttft_p99", "itl_mean"}

// Values are one scope's metrics (ms), keyed by Metrics' names; a metric
// without a value is absent.
type Values map[string]float64

// Result is one run's predicted latencies by scope ("summary", "stage_k").
type Result struct {
	Experiment *Experiment
	Predicted  map[string]Values
	// Completed counts the completed requests by scope.
	Completed map[string]int
	// Engines counts the completed requests of the run's stages by engine
	// (data-parallel rank; one entry when dp = 1).
	Engines []int
	// Knee is the run's knee as its simulation reports it (report.Knee:
	// the engines' sustainable rate for the run's mean request, the
	// binding limit), Utilization its busiest engine's load at the
	// busiest stage over that engine's sustainable rate: near 1 and above, the run is at or past its knee. Nil
	// and 0 when the stage completed nothing.
	Knee        *report.Knee
	Utilization float64
}

// PredictedOverloaded reports whether the simulation put the run past its
// knee: a whole-run TTFT mean of at least OverloadedTTFT, the measured
// runs' own criterion.
func (r *Result) PredictedOverloaded() bool {
	return r.Predicted["summary"]["ttft_mean"] >= OverloadedTTFT
}

// Options tune a simulation of experiments.
type Options struct {
	// Seed drives the workload's random text and arrival jitter.
	Seed uint64
	// StageLimit, when > 0, shortens every stage to at most this many
	// seconds (at its rate): calibration runs the shortened runs, whose
	// steady state is that of the full ones when the run is not
	// overloaded. 0 simulates the runs as recorded.
	StageLimit int
	// StepScale, when > 0 and not 1, multiplies every engine step: the
	// ends of a latency interval near the knee (interval.go).
	StepScale float64
	// Draws is how many arrival draws (seeds Seed, Seed+1, …) predict a
	// run near its knee (SimulateAll, nearKnee); 0 means KneeDraws and 1
	// a single draw (calibrate --draws 1).
	Draws int
	// Pool, when set, shares each run's workload between the simulations
	// of it (NewPool): the requests, their text and their block hashes
	// depend on the run, the seed and StageLimit only, never on the
	// calibration, so a calibration's objective, which simulates every
	// run at each evaluation, synthesizes each one once. The predictions
	// are the same with or without it, to the byte (TestPoolSameResults).
	// Nil: each simulation synthesizes its own.
	Pool *scenario.Pool
}

// KeepBytes is how much workload (scenario.RequestSize) a pool from
// NewPool keeps between simulations. Calibration's shortened runs of the
// shared file (a stage limit of 150 s) hold about 250 MiB at one seed, so
// a fit keeps every run it fits and the draws of those near their knee.
// Simulating the full runs reads its workloads without a pool (validate
// latency, and calibrate's figures): they hold about 1.2 GiB at one seed,
// and keeping them saved 4% of validate latency's time on the shared file
// (1:49 → 1:45 on two cores) for 14 times its memory (0.18 → 2.5 GB),
// while with it one evaluation of the objective on the shortened runs
// takes 0.75 s instead of 1.26 s (BenchmarkObjectivePool, two cores).
const KeepBytes = 512 << 20

// NewPool returns the pool that shares the runs' workloads between
// simulations (Options.Pool), keeping up to KeepBytes of them. Close it
// when the simulations are over.
func NewPool() *scenario.Pool { return scenario.NewKeepingPool(0, KeepBytes) }

// KneeDraws is how many arrival draws predict a run near its knee when
// Options.Draws is 0. Near the knee a run's TTFT tail is set by how often
// a burst of inference-perf's exponential arrivals finds no free slot,
// which one draw of the schedule decides by chance (docs/latency.md,
// "Tails": Llama-2-7B's TTFT p99 ranged over 72–398 ms across six seeds
// at the same rates). The measured run is one draw of the real client's
// schedule, which no seed reproduces, so the prediction is each metric's
// median over this many draws, the estimate a single draw scatters
// around. Five is the smallest odd count with two draws on either side
// of the median; it was fixed before any figure was measured with it. A
// run is near its knee here from DrawsUtilization on.
const KneeDraws = 5

func (o Options) draws() int {
	if o.Draws <= 0 {
		return KneeDraws
	}
	return o.Draws
}

// Spec builds the scenario of one run: one replica of the run's model on
// its GPU at its tensor-parallel degree with its engine arguments, the
// calibration's step-time model, fed the run's inference-perf workload.
// The KV capacity is the block count vLLM logged when the run has one (an
// engine fact, not a prediction), else the one eppsim computes. A run read
// from a results directory is fed its own config (Experiment.WorkloadYAML).
//
// With dp = 1 the replica is one engine behind a round-robin EPP (routing
// plays no part). With dp > 1 it is dp independent engines, each with the
// run's tensor-parallel degree, engine arguments and KV capacity (vLLM's
// logged block count is each engine's), as vLLM runs a dense model's
// data-parallel ranks: the replica's rank endpoints "<pod>-rank-<i>"
// (sim.ExpandDataParallel), behind vLLM's own API server instead of an EPP
// (EPP: the vllm-dp-lb baseline, picker.VLLMDPLB), which sees the engines'
// request counts as the DP coordinator publishes them: the EPP scrapes
// them every picker.DefaultDPLBPublishInterval, the coordinator's cadence.
func Spec(e *Experiment, c replica.Calibration, o Options) (*scenario.Spec, error) {
	p, err := e.enginePreset()
	if err != nil {
		return nil, err
	}
	p.StepModel = "calibrated"
	p = p.WithCalibration(c, c.Name)
	p.StepScale = o.StepScale
	if _, err := p.Model(); err != nil {
		return nil, err
	}
	yml, name := e.WorkloadYAML()
	cfg, err := workload.ParseInferencePerf(yml, name)
	if err != nil {
		return nil, err
	}
	if o.StageLimit > 0 {
		for i := range cfg.Load.Stages {
			cfg.Load.Stages[i].Duration = min(cfg.Load.Stages[i].Duration, o.StageLimit)
		}
	}
	// The recorded runs are simulated open-loop, as when the shipped
	// calibration was fitted and validated: inference-perf's client model
	// (docs/workloads.md, "Client concurrency") moves the later stages'
	// starts to the first poll after the previous stage's completions, which
	// changes the validation figures the calibration records (ttft_p90
	// 10.67 % → 10.72 %); adopting it is a recalibration.
	wopts := workload.Options{Seed: int64(o.Seed), Model: e.Model, InferencePerf: workload.InferencePerfOptions{OpenLoop: true}}
	if e.IPerfConfig != nil {
		// The bodies name the model as the run's client did.
		wopts.Model = ""
	}
	spec := &scenario.Spec{
		Version: "latency", Trace: "inference-perf:" + e.ID, Workload: wopts,
		Open: func() (*workload.Stream, error) { return workload.NewInferencePerfSource(cfg, wopts) },
		// What Open returns depends on the run's config and the stage
		// limit; the seed and model are in Workload.
		OpenKey: fmt.Sprintf("%s\x00%d\x00%016x", e.ID, o.StageLimit, xxhash.Sum64(yml)),
		Fleet:   sim.UniformFleet(1, p),
		Env:     sim.Options{Seed: o.Seed},
	}
	if dp := e.DataParallel(); dp > 1 {
		p.Engine.DataParallelSize = dp
		if spec.Fleet, err = sim.ExpandDataParallel(sim.UniformFleet(1, p)); err != nil {
			return nil, err
		}
		spec.Env.ScrapeInterval = picker.DefaultDPLBPublishInterval
	}
	return spec, nil
}

// router is the EPP in front of a run's engines: round-robin over one
// engine, or vLLM's own data-parallel load balancer (Spec).
func router(e *Experiment) scenario.EPP {
	if e.DataParallel() == 1 {
		return scenario.EPP{Name: "single", Source: "round-robin"}
	}
	lb := picker.DefaultDPLBOptions()
	if c := e.Engine.DPLBEngineCounts; c != nil && !*c {
		lb.NoEngineCounts = true
	}
	return scenario.EPP{Name: "vllm-dp-lb", Source: "vllm-dp-lb", DPLB: &lb}
}

// Simulate predicts one run's latencies.
func Simulate(ctx context.Context, e *Experiment, c replica.Calibration, o Options) (*Result, error) {
	spec, err := Spec(e, c, o)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", e.ID, err)
	}
	n := len(e.Workload.Stages)
	ttft := make([][]float64, n+1) // by stage; [n] the whole run
	e2e := make([][]float64, n+1)
	engines := make([]int, e.DataParallel())
	hooks := scenario.Hooks{OnRecord: func(r *sim.Record) {
		if r.Outcome != sim.Completed || r.Stage < 0 || r.Stage >= n {
			return
		}
		if r.Replica >= 0 && r.Replica < len(engines) {
			engines[r.Replica]++
		}
		t, d := float64(r.TTFT)/1e6, float64(r.E2E)/1e6
		ttft[r.Stage], e2e[r.Stage] = append(ttft[r.Stage], t), append(e2e[r.Stage], d)
		ttft[n], e2e[n] = append(ttft[n], t), append(e2e[n], d)
	}}
	var sum *report.Summary
	if o.Pool != nil {
		sum, err = o.Pool.Run(ctx, spec, router(e), hooks)
	} else {
		sum, err = scenario.RunContext(ctx, spec, router(e), hooks)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", e.ID, err)
	}
	res := &Result{Experiment: e, Predicted: map[string]Values{}, Completed: map[string]int{}, Engines: engines}
	out := e.OutputLen()
	for i, scope := range e.Scopes() {
		k := i - 1
		if i == 0 {
			k = n
		}
		res.Completed[scope] = len(e2e[k])
		if len(e2e[k]) == 0 {
			continue
		}
		res.Predicted[scope] = metricsOf(ttft[k], e2e[k], out)
	}
	if k := sum.Knee; k != nil && k.BusiestUtilization.Defined() {
		res.Knee, res.Utilization = k, k.BusiestUtilization.Float()
	}
	return res, nil
}

// metricsOf computes the metrics of latency samples (ms); out is the
// nominal output length.
func metricsOf(ttft, e2e []float64, out float64) Values {
	slices.Sort(ttft)
	slices.Sort(e2e)
	v := Values{
		"e2e_mean": mean(e2e), "e2e_p90": percentile(e2e, 90), "e2e_p99": percentile(e2e, 99),
		"ttft_mean": mean(ttft), "ttft_p90": percentile(ttft, 90), "ttft_p99": percentile(ttft, 99),
	}
	v["itl_mean"] = (v["e2e_mean"] - v["ttft_mean"]) / (out - 1)
	return v
}

// MeasuredValues returns a scope's measured metrics (nil when the run has no
// measurement for it).
func (e *Experiment) MeasuredValues(scope string) Values {
	m, ok := e.Measured[scope]
	if !ok {
		return nil
	}
	v := Values{}
	put := func(k string, x float64) {
		if !math.IsNaN(x) && x > 0 {
			v[k] = x
		}
	}
	put("e2e_mean", m.E2E.Mean)
	put("e2e_p90", m.E2E.P90)
	put("e2e_p99", m.E2E.P99)
	put("ttft_mean", m.TTFT.Mean)
	put("ttft_p90", m.TTFT.P90)
	put("ttft_p99", m.TTFT.P99)
	if e2e, ok1 := v["e2e_mean"]; ok1 {
		if t, ok2 := v["ttft_mean"]; ok2 {
			v["itl_mean"] = (e2e - t) / (e.OutputLen() - 1)
		}
	}
	if len(v) == 0 {
		return nil
	}
	return v
}

func mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// percentile is the p-th percentile of sorted xs with linear
// interpolation between closest ranks (numpy's default, which
// inference-perf's reports use).
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 1 {
		return xs[0]
	}
	r := p / 100 * float64(len(xs)-1)
	lo := int(math.Floor(r))
	if lo >= len(xs)-1 {
		return xs[len(xs)-1]
	}
	f := r - float64(lo)
	return xs[lo] + f*(xs[lo+1]-xs[lo])
}
