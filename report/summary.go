// Package report turns a run's request records into summaries: request
// accounting, latency percentiles, offered load and throughput, the
// hit-rate ladder (infinite cache, oracle, routed, true), routing regret
// and the queue effect, and the prefix producers' prediction error. It
// reads records only; it never reaches into live simulation state. Every
// field is defined in docs/metrics.md.
package report

import (
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/replica/sglang"
	"github.com/eppsim/eppsim/sim"
)

// Aggregator accumulates records of one run (one config).
type Aggregator struct {
	total, completed, rejected int
	reasons                    map[string]int
	ttft, tpot, e2e, queue     []float64 // ms
	promptTokens               int64
	outputTokens               int64
	// The ladder's rungs and the queue effect, Σ tokens.
	cached, oracle, routedTok, infinite int64
	cpuCached                           int64 // of cached, loaded from CPU tiers
	cpuHits                             int   // requests with a CPU tier hit
	queueGained, queueLost              int64
	first, last                         int64
	perReplica                          map[int][2]int64 // replica -> {cached, prompt}
	routed                              map[int]int
	ties                                int
	approx, precise                     predAcc
	pd                                  *pdAcc // nil until a record has a P/D decision
	// Per priority class and fairness ID (ClassSummary).
	classes *classAggregator
	// Offered load: every request after warm-up that reached the EPP.
	offered                   int
	offeredPrompt             int64
	offeredFirst, offeredLast int64
	// The rejections after warm-up by cause, for the finding of a run
	// that measured nothing.
	rejections []rejection
	// Per load stage (StageSummary), over the records after warm-up:
	// accumulators by dense index, the index by stage, the last one used,
	// and each measured TTFT/E2E sample's dense index (nil while every
	// sample is of index 0); the declared stages (WithStages).
	stageAccs []*stageAcc
	stageIdx  map[int]int32
	lastStage int32
	stageOf   []int32
	plans     []StagePlan
}

// rejection counts the rejected requests after warm-up of one cause
// (Record.Cause), with the reason of the first of them as an example.
type rejection struct {
	cause    string
	requests int
	example  string
}

// NewAggregator returns an empty aggregator.
func NewAggregator() *Aggregator {
	return &Aggregator{reasons: map[string]int{}, perReplica: map[int][2]int64{}, routed: map[int]int{},
		first: math.MaxInt64, offeredFirst: math.MaxInt64, offeredLast: math.MinInt64, classes: newClassAggregator(), lastStage: -1}
}

// WithClasses makes the summary break the run down by priority class and
// fairness ID (Summary.Classes) even when no record calls for it: the run's
// EPP config has flow control on.
func (a *Aggregator) WithClasses() { a.classes.on = true }

// Add accounts one final record. Warm-up records count in the request
// totals only.
func (a *Aggregator) Add(r *sim.Record) {
	a.total++
	a.classes.add(r)
	if !r.Warmup {
		a.offered++
		a.offeredPrompt += int64(r.PromptTokens)
		a.offeredFirst = min(a.offeredFirst, r.Arrival)
		a.offeredLast = max(a.offeredLast, r.Arrival)
	}
	switch r.Outcome {
	case sim.Completed:
		a.completed++
	case sim.Rejected:
		a.rejected++
		a.reasons[r.Reason]++
		if !r.Warmup {
			a.addRejection(r)
			a.addStage(r)
		}
		return
	}
	if r.Warmup {
		return
	}
	const ms = 1e6
	a.ttft = append(a.ttft, float64(r.TTFT)/ms)
	a.e2e = append(a.e2e, float64(r.E2E)/ms)
	a.addStage(r)
	a.queue = append(a.queue, float64(r.Queue)/ms)
	if r.OutputTokens > 1 {
		a.tpot = append(a.tpot, float64(r.E2E-r.TTFT)/ms/float64(r.OutputTokens-1))
	}
	a.promptTokens += int64(r.PromptTokens)
	a.outputTokens += int64(r.OutputTokens)
	a.cached += int64(r.CachedTokens)
	a.cpuCached += int64(r.CPUCachedTokens)
	if r.CPUCachedTokens > 0 {
		a.cpuHits++
	}
	a.oracle += int64(r.OracleCachedTokens)
	a.routedTok += int64(r.RoutedCachedTokens)
	a.infinite += int64(r.InfiniteCachedTokens)
	if d := int64(r.CachedTokens - r.RoutedCachedTokens); d > 0 {
		a.queueGained += d
	} else {
		a.queueLost -= d
	}
	a.first = min(a.first, r.Arrival)
	a.last = max(a.last, r.Completion)
	// The replica that computed the prompt (the prefill pod of a
	// disaggregated request) owns its reuse; a disaggregated request
	// counts as routed to both of its pods.
	computer := r.Replica
	if r.PD != nil {
		if a.pd == nil {
			a.pd = &pdAcc{reasons: map[string]int{}, perReplica: map[int]*legs{}}
		}
		a.pd.add(r)
		if r.PD.Disaggregated {
			computer = r.PD.PrefillReplica
			a.routed[computer]++
		}
	}
	pr := a.perReplica[computer]
	a.perReplica[computer] = [2]int64{pr[0] + int64(r.CachedTokens), pr[1] + int64(r.PromptTokens)}
	a.routed[r.Replica]++
	if r.Tied {
		a.ties++
	}
	if r.HasPredicted {
		a.approx.add(r, r.Predicted, r.PredictedBlocks)
	}
	if r.HasPrecise {
		a.precise.add(r, r.PredictedPrecise, r.PreciseBlocks)
	}
}

func (a *Aggregator) addRejection(r *sim.Record) {
	cause := causeOf(r)
	for i := range a.rejections {
		if a.rejections[i].cause == cause {
			a.rejections[i].requests++
			return
		}
	}
	a.rejections = append(a.rejections, rejection{cause: cause, requests: 1, example: r.Reason})
}

// Dist is a latency distribution in ms.
// Every field is undefined (null in JSON) for an empty sample.
type Dist struct {
	Mean Num `json:"mean"`
	P50  Num `json:"p50"`
	P90  Num `json:"p90"`
	P95  Num `json:"p95"`
	P99  Num `json:"p99"`
	Max  Num `json:"max"`
}

// Summary is one run's headline numbers (summary.json "runs" entry).
type Summary struct {
	Requests struct {
		Total    int            `json:"total"`
		Complete int            `json:"completed"`
		Rejected int            `json:"rejected"`
		Reasons  map[string]int `json:"rejected_reasons,omitempty"`
		InFlight int            `json:"in_flight_at_end"`
		// PeakInFlight is the most requests in flight past the gateway at
		// once (sim.Result.PeakInFlight).
		PeakInFlight int `json:"peak_in_flight"`
	} `json:"requests"`
	Latency struct {
		TTFT  Dist `json:"ttft"`
		TPOT  Dist `json:"tpot"`
		E2E   Dist `json:"e2e"`
		Queue Dist `json:"queue"`
	} `json:"latency_ms"`
	// OfferedLoad is what the traffic asked of the fleet: every request
	// after warm-up that reached the EPP (completed or rejected) over the
	// span of their arrivals.
	// ArrivalSpanS is undefined without such a request, the rates when
	// the span is 0.
	OfferedLoad struct {
		RequestsPerS     Num `json:"requests_per_s"`
		PromptTokensPerS Num `json:"prompt_tokens_per_s"`
		ArrivalSpanS     Num `json:"arrival_span_s"`
	} `json:"offered_load"`
	// Throughput is undefined without a measured request (no measured
	// time).
	Throughput struct {
		RequestsPerS     Num `json:"requests_per_s"`
		OutputTokensPerS Num `json:"output_tokens_per_s"`
		InputTokensPerS  Num `json:"input_tokens_per_s"`
	} `json:"throughput"`
	// Cache holds the hit-rate ladder, token-weighted over the completed
	// requests after warm-up (Σ rung tokens ÷ PromptTokens):
	// InfiniteHitRatio >= OracleHitRatio >= RoutedHitRatio, measured at
	// routing time; TrueHitRatio = RoutedHitRatio + QueueEffectTokens ÷
	// PromptTokens is what the replicas reused. The ratios are undefined
	// when PromptTokens is 0.
	Cache struct {
		InfiniteHitRatio Num   `json:"infinite_cache_hit_ratio"`
		OracleHitRatio   Num   `json:"oracle_hit_ratio"`
		RoutedHitRatio   Num   `json:"routed_hit_ratio"`
		TrueHitRatio     Num   `json:"true_hit_ratio"`
		PromptTokens     int64 `json:"prompt_tokens"`
		// RegretTokens is Σ (oracle − routed) ≥ 0: the reuse the routing
		// decisions left on other replicas.
		RegretTokens int64 `json:"regret_tokens"`
		// QueueEffectTokens is Σ (cached − routed) = gained − lost:
		// prefixes computed (gained) or evicted (lost) on the chosen
		// replica between routing and first scheduling.
		QueueEffectTokens int64              `json:"queue_effect_tokens"`
		QueueGainedTokens int64              `json:"queue_gained_tokens"`
		QueueLostTokens   int64              `json:"queue_lost_tokens"`
		PerReplica        map[string]float64 `json:"per_replica_hit_ratio"`
		Evictions         int64              `json:"evictions"`
		Preemptions       int64              `json:"preemptions"`
		// Offload splits the true hits by tier when replicas have a CPU
		// tier (--kv-offloading-size); absent otherwise.
		Offload *OffloadCache `json:"offload,omitempty"`
	} `json:"cache"`
	// Prediction compares each prefix producer's belief with the truth,
	// keyed by producer type.
	Prediction map[string]*Prediction `json:"prediction,omitempty"`
	// PD is the P/D disaggregation part (pd-offload.md A), present when
	// the EPP's profile handler decided on disaggregation.
	PD *PDSummary `json:"pd,omitempty"`
	// Classes breaks the run down by priority class and fairness ID, with
	// the EPP's queueing and shedding (ClassSummary); absent without
	// classes or flow control.
	Classes *ClassSummary `json:"classes,omitempty"`
	Routing struct {
		// PerReplica counts the completed requests after warm-up sent to
		// each replica of the fleet, 0 included.
		PerReplica map[string]int `json:"requests_per_replica"`
		Imbalance  Num            `json:"load_imbalance"`
		TieShare   Num            `json:"tie_share"`
		// Replicas is the fleet size, IdleReplicas how many of them
		// received no request; BusiestReplica received the most
		// (BusiestShare of all; the first in fleet order on a tie).
		// Without a measured request IdleReplicas, Imbalance, TieShare
		// and BusiestShare are undefined (nothing was measured to judge
		// the routing by) and BusiestReplica is absent.
		Replicas       int    `json:"replicas"`
		IdleReplicas   Num    `json:"idle_replicas"`
		BusiestReplica string `json:"busiest_replica,omitempty"`
		BusiestShare   Num    `json:"busiest_replica_share"`
	} `json:"routing"`
	Sim struct {
		Events     uint64  `json:"events"`
		SimSeconds float64 `json:"simulated_s"`
		// Wall-clock fields: the only values that differ between two runs
		// of the same command.
		WallSeconds      float64 `json:"wall_s"`
		RequestsPerWallS float64 `json:"requests_per_wall_s"`
	} `json:"sim"`
	// KernelCompiles counts the engine steps, over the fleet, that stopped
	// to compile a fused-MoE kernel class at first use, as a freshly
	// started vLLM engine does (replica/moejit.go); absent when none did.
	KernelCompiles int64 `json:"kernel_compiles,omitempty"`
	// Config is what the run was made of, so a summary is reproducible
	// from itself.
	Config *RunConfig `json:"config,omitempty"`
	// Knee is where the fleet stops keeping up with the run's traffic,
	// Intervals the headline latencies' 90% intervals; both absent when
	// they cannot be estimated (knee.go).
	Knee      *Knee             `json:"knee,omitempty"`
	Intervals *LatencyIntervals `json:"latency_intervals_ms,omitempty"`
	// Stages are the run's load stages, one entry per stage in stage
	// order, when its traffic has more than one (StageSummary); absent
	// otherwise.
	Stages []StageSummary `json:"stages,omitempty"`
	// StagedGauges are the scraped gauges over every stage's part of the
	// run together, from the first arrival to the last scrape: what the
	// published 73-capacity table's "Wait Queue" and "KV Cache %" give
	// over its whole run. Present with Stages.
	StagedGauges *StagedGauges `json:"staged_gauges,omitempty"`
	// StoppedEarly is set when the run ended before its workload did
	// (sim.Options.Stop: a capacity search's SLO already violated): every
	// other figure then covers the run up to that instant only.
	StoppedEarly *EarlyStop `json:"stopped_early,omitempty"`

	// rejections are the Aggregator's rejections after warm-up, most
	// requests first (not in summary.json: the findings' explanation of
	// a run without a measured request).
	rejections []rejection
	// offered counts the requests after warm-up that reached the gateway
	// (the denominator of the gateway's refusals in the findings).
	offered int
}

// EarlyStop is why and when a run stopped before its workload ended
// (sim.Stopped).
type EarlyStop struct {
	Reason string `json:"reason"`
	// AtS is the simulated time of the record that decided it (s),
	// FinalRequests the requests whose records were final by then.
	AtS           float64 `json:"at_s"`
	FinalRequests int     `json:"final_requests"`
}

// RunConfig records a run's inputs.
type RunConfig struct {
	Version     string         `json:"version"`
	Seed        uint64         `json:"seed"`
	Workload    WorkloadConfig `json:"workload"`
	Environment map[string]any `json:"environment"`
	Fleet       []ReplicaInfo  `json:"fleet"`
	// EPP is the effective EndpointPickerConfig after defaults.
	EPP          *EPPInfo `json:"epp"`
	NotSimulated []string `json:"not_simulated,omitempty"`
	// Estimates names the parameters of the run that are estimates rather
	// than sourced numbers (pd-offload.md marks them "(estimate)"), with
	// their values.
	Estimates []string `json:"estimates,omitempty"`
	// Warnings are facts of the inputs that make a run other than its
	// configuration suggests (a P/D configuration on a fleet without
	// prefill pods).
	Warnings []string `json:"warnings,omitempty"`
}

// EPPInfo is a run's EPP configuration: the effective
// EndpointPickerConfig after upstream's defaults, and how eppsim assembled
// it. The config itself is kept as YAML text in upstream's schema, so that
// it loads again as it is (eppsim run --epp-config) and its camelCase keys
// stay out of the summary's snake_case document.
type EPPInfo struct {
	// File is the config file; BuiltinDefault is true for the EPP's
	// built-in default configuration (no file).
	File           string `json:"file,omitempty"`
	BuiltinDefault bool   `json:"builtin_default,omitempty"`
	// EffectiveConfig is the EndpointPickerConfig after defaults, as YAML.
	EffectiveConfig string `json:"effective_config"`
	ProfileHandler  string `json:"profile_handler"`
	// Profiles lists each scheduling profile's filters, weighted scorers
	// and picker in the order the scheduler runs them.
	Profiles []EPPProfile `json:"profiles"`
	// Producers are the data producers in execution order.
	Producers []string `json:"producers"`
	// FeatureGates lists the gates that are on.
	FeatureGates []string `json:"feature_gates_on,omitempty"`
	// Upstream lists the later llm-d-router behaviours the run turned on
	// (scenario.UpstreamOptions, e.g. pr2292).
	Upstream []string `json:"upstream_options,omitempty"`
	// Release is the upstream release an older configuration's plugins
	// were modelled after (--epp-release, e.g. llm-d-v0.2).
	Release string `json:"release,omitempty"`
	// Translations name what was translated from an older configuration's
	// schema before it loaded (epp/config migrate.go).
	Translations []string `json:"translations,omitempty"`
}

// EPPProfile is one scheduling profile of an EPPInfo.
type EPPProfile struct {
	Name    string      `json:"name"`
	Filters []string    `json:"filters,omitempty"`
	Scorers []EPPScorer `json:"scorers,omitempty"`
	Picker  string      `json:"picker"`
}

// EPPScorer is a scorer of a profile with its effective weight.
type EPPScorer struct {
	Name   string  `json:"name"`
	Weight float64 `json:"weight"`
}

// WorkloadConfig identifies the traffic; two summaries are comparable only
// when these agree.
type WorkloadConfig struct {
	Trace       string `json:"trace"`
	Format      string `json:"format"`
	Mode        string `json:"mode"`
	MaxRequests int    `json:"max_requests,omitempty"`
	Duration    string `json:"duration,omitempty"`
	Warmup      string `json:"warmup,omitempty"`
	Injected    int    `json:"injected"`
	// SkippedInvalid counts the trace records --skip-invalid skipped;
	// SkippedExamples are the first few of their errors (file:line: field:
	// what is wrong).
	SkippedInvalid  int      `json:"skipped_invalid,omitempty"`
	SkippedExamples []string `json:"skipped_examples,omitempty"`
	// PriorityClasses are the workload's priority mix (NAME=PRIORITY:SHARE)
	// and FairnessID the source of fairness IDs (session, class); absent
	// without them.
	PriorityClasses []string `json:"priority_classes,omitempty"`
	FairnessID      string   `json:"fairness_id,omitempty"`
}

// ReplicaInfo is one replica of the fleet.
type ReplicaInfo struct {
	Name    string            `json:"name"`
	Address string            `json:"address"`
	Labels  map[string]string `json:"labels,omitempty"`
	Preset  string            `json:"preset"`
	// Model, GPU and TensorParallelSize are what the replica runs on.
	Model              string `json:"model,omitempty"`
	GPU                string `json:"gpu,omitempty"`
	TensorParallelSize int    `json:"tensor_parallel_size,omitempty"`
	// StepModel names the step-time model and, for the calibrated one,
	// the calibration (name@hash of its coefficients), with " ×F" when
	// every step is scaled: the deployment's step offset in that
	// calibration, times a knee run's scale.
	StepModel string `json:"step_model"`
	// EngineType is the engine the replica runs (absent: vLLM). Engine is
	// a vLLM replica's resolved configuration, SGLang an SGLang
	// replica's (replica/sglang.Config: the token pool, the scheduler's
	// limits and policies).
	EngineType string          `json:"engine_type,omitempty"`
	Engine     *replica.Config `json:"engine,omitempty"`
	SGLang     *sglang.Config  `json:"sglang,omitempty"`
}

// Summary computes the summary; res supplies the run-level counters.
func (a *Aggregator) Summary(res *sim.Result) *Summary {
	s := &Summary{}
	s.Requests.Total, s.Requests.Complete, s.Requests.Rejected = a.total, a.completed, a.rejected
	s.offered = a.offered
	if len(a.reasons) > 0 {
		s.Requests.Reasons = a.reasons
	}
	s.Latency.TTFT, s.Latency.TPOT, s.Latency.E2E, s.Latency.Queue = dist(a.ttft), dist(a.tpot), dist(a.e2e), dist(a.queue)
	// Rates over the measured time: undefined without a measured request.
	span := 0.0
	if len(a.e2e) > 0 {
		span = float64(a.last-a.first) / 1e9
	}
	s.Throughput.RequestsPerS = ratio(float64(len(a.e2e)), span)
	s.Throughput.OutputTokensPerS = ratio(float64(a.outputTokens), span)
	s.Throughput.InputTokensPerS = ratio(float64(a.promptTokens), span)
	s.OfferedLoad.ArrivalSpanS = Undefined()
	offeredSpan := 0.0
	if a.offered > 0 {
		offeredSpan = float64(a.offeredLast-a.offeredFirst) / 1e9
		s.OfferedLoad.ArrivalSpanS = Num(offeredSpan)
	}
	s.OfferedLoad.RequestsPerS = ratio(float64(a.offered), offeredSpan)
	s.OfferedLoad.PromptTokensPerS = ratio(float64(a.offeredPrompt), offeredSpan)
	s.Cache.PromptTokens = a.promptTokens
	// Token-weighted over the fleet, never a mean of per-replica ratios.
	p := float64(a.promptTokens)
	s.Cache.TrueHitRatio = ratio(float64(a.cached), p)
	s.Cache.OracleHitRatio = ratio(float64(a.oracle), p)
	s.Cache.RoutedHitRatio = ratio(float64(a.routedTok), p)
	s.Cache.InfiniteHitRatio = ratio(float64(a.infinite), p)
	s.Cache.RegretTokens = a.oracle - a.routedTok
	s.Cache.QueueGainedTokens, s.Cache.QueueLostTokens = a.queueGained, a.queueLost
	s.Cache.QueueEffectTokens = a.queueGained - a.queueLost
	s.Cache.PerReplica = map[string]float64{}
	s.Routing.PerReplica = map[string]int{}
	var names []string
	if res != nil {
		s.Requests.InFlight, s.Requests.PeakInFlight = res.InFlight, res.PeakInFlight
		for _, rr := range res.Replicas {
			names = append(names, rr.Name)
			s.Cache.Evictions += rr.Evictions
			s.Cache.Preemptions += rr.Stats.Preemptions
			s.KernelCompiles += rr.Stats.KernelCompiles
		}
		s.Sim.Events = res.Events
		s.Sim.SimSeconds = float64(res.SimTime) / 1e9
		if st := res.Stopped; st != nil {
			s.StoppedEarly = &EarlyStop{Reason: st.Reason, AtS: float64(st.At) / 1e9, FinalRequests: st.Final}
		}
	}
	name := func(i int) string {
		if i >= 0 && i < len(names) {
			return names[i]
		}
		return "replica-" + strconv.Itoa(i)
	}
	for i, v := range a.perReplica {
		if v[1] > 0 {
			s.Cache.PerReplica[name(i)] = float64(v[0]) / float64(v[1])
		}
	}
	// Every replica of the fleet, those that received nothing included.
	for _, n := range names {
		s.Routing.PerReplica[n] = 0
	}
	for i, n := range a.routed {
		s.Routing.PerReplica[name(i)] = n
	}
	s.Routing.Replicas = len(s.Routing.PerReplica)
	// Fleet order, then any replica the fleet did not name (by name).
	order := slices.Clone(names)
	for _, n := range slices.Sorted(maps.Keys(s.Routing.PerReplica)) {
		if !slices.Contains(names, n) {
			order = append(order, n)
		}
	}
	maxRouted, total, idle := 0, 0, 0
	for _, n := range order {
		c := s.Routing.PerReplica[n]
		total += c
		if c == 0 {
			idle++
		}
		if c > maxRouted {
			maxRouted, s.Routing.BusiestReplica = c, n
		}
	}
	// Without a measured request there is no routing to judge: every
	// replica would read as idle (docs/metrics.md, routing).
	s.Routing.IdleReplicas, s.Routing.BusiestShare = Undefined(), Undefined()
	s.Routing.Imbalance, s.Routing.TieShare = Undefined(), Undefined()
	if measured := len(a.e2e); measured > 0 {
		s.Routing.IdleReplicas = Num(idle)
		s.Routing.BusiestShare = ratio(float64(maxRouted), float64(total))
		s.Routing.TieShare = Num(float64(a.ties) / float64(measured))
		if n := s.Routing.Replicas; n > 0 {
			s.Routing.Imbalance = Num(float64(maxRouted) / (float64(total) / float64(n)))
		}
	}
	s.rejections = slices.Clone(a.rejections)
	slices.SortStableFunc(s.rejections, func(x, y rejection) int { return y.requests - x.requests })
	s.Cache.Offload = a.offloadSummary(res)
	s.PD = a.pd.summary(res)
	s.Classes = a.classes.summary()
	s.Stages = a.stageSummaries(res)
	if len(s.Stages) > 0 {
		s.StagedGauges = stagedGauges(res)
	}
	for _, p := range []struct {
		name string
		acc  *predAcc
	}{{"approx-prefix-cache-producer", &a.approx}, {"precise-prefix-cache-producer", &a.precise}} {
		if pr := p.acc.summary(); pr != nil {
			if s.Cache.Offload != nil {
				pr.ByTier = p.acc.tiers.summary()
			}
			if s.Prediction == nil {
				s.Prediction = map[string]*Prediction{}
			}
			s.Prediction[p.name] = pr
		}
	}
	return s
}

// dist computes mean and nearest-rank percentiles (the smallest value with
// at least p of the sample at or below it).
func dist(v []float64) Dist {
	if len(v) == 0 {
		u := Undefined()
		return Dist{Mean: u, P50: u, P90: u, P95: u, P99: u, Max: u}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	var sum float64
	for _, x := range s {
		sum += x
	}
	q := func(p float64) float64 {
		k := int(math.Ceil(p*float64(len(s)))) - 1
		return s[min(max(k, 0), len(s)-1)]
	}
	return Dist{Mean: Num(sum / float64(len(s))), P50: Num(q(0.50)), P90: Num(q(0.90)), P95: Num(q(0.95)), P99: Num(q(0.99)), Max: Num(s[len(s)-1])}
}
