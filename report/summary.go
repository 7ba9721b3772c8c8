// Package report turns a run's request records into summaries: request
// accounting, latency percentiles, throughput, true and oracle cache hit
// ratios, and the approximate producer's prediction error. It reads records
// only; it never reaches into live simulation state.
package report

import (
	"math"
	"slices"

	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/sim"
)

// Aggregator accumulates records of one run (one config).
type Aggregator struct {
	total, completed, rejected int
	reasons                    map[string]int
	ttft, tpot, e2e, queue     []float64 // ms
	promptTokens               int64
	outputTokens               int64
	cached, oracle             int64
	cpuCached                  int64 // of cached, loaded from CPU tiers
	cpuHits                    int   // requests with a CPU tier hit
	first, last                int64
	perReplica                 map[int][2]int64 // replica -> {cached, prompt}
	routed                     map[int]int
	ties                       int
	approx, precise            predAcc
}

// NewAggregator returns an empty aggregator.
func NewAggregator() *Aggregator {
	return &Aggregator{reasons: map[string]int{}, perReplica: map[int][2]int64{}, routed: map[int]int{}, first: math.MaxInt64}
}

// Add accounts one final record. Warm-up records count in the request
// totals only.
func (a *Aggregator) Add(r *sim.Record) {
	a.total++
	switch r.Outcome {
	case sim.Completed:
		a.completed++
	case sim.Rejected:
		a.rejected++
		a.reasons[r.Reason]++
		return
	}
	if r.Warmup {
		return
	}
	const ms = 1e6
	a.ttft = append(a.ttft, float64(r.TTFT)/ms)
	a.e2e = append(a.e2e, float64(r.E2E)/ms)
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
	a.first = min(a.first, r.Arrival)
	a.last = max(a.last, r.Completion)
	pr := a.perReplica[r.Replica]
	a.perReplica[r.Replica] = [2]int64{pr[0] + int64(r.CachedTokens), pr[1] + int64(r.PromptTokens)}
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

// Dist is a latency distribution in ms.
type Dist struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
}

// Summary is one run's headline numbers (summary.json "runs" entry).
type Summary struct {
	Requests struct {
		Total    int            `json:"total"`
		Complete int            `json:"completed"`
		Rejected int            `json:"rejected"`
		Reasons  map[string]int `json:"rejected_reasons,omitempty"`
		InFlight int            `json:"in_flight_at_end"`
	} `json:"requests"`
	Latency struct {
		TTFT  Dist `json:"ttft"`
		TPOT  Dist `json:"tpot"`
		E2E   Dist `json:"e2e"`
		Queue Dist `json:"queue"`
	} `json:"latency_ms"`
	Throughput struct {
		RequestsPerS     float64 `json:"requests_per_s"`
		OutputTokensPerS float64 `json:"output_tokens_per_s"`
		InputTokensPerS  float64 `json:"input_tokens_per_s"`
	} `json:"throughput"`
	Cache struct {
		TrueHitRatio   float64            `json:"true_hit_ratio"`
		OracleHitRatio float64            `json:"oracle_hit_ratio"`
		RegretTokens   int64              `json:"regret_tokens"`
		PerReplica     map[string]float64 `json:"per_replica_hit_ratio"`
		Evictions      int64              `json:"evictions"`
		Preemptions    int64              `json:"preemptions"`
		// Offload splits the true hits by tier when replicas have a CPU
		// tier (--kv-offloading-size); absent otherwise.
		Offload *OffloadCache `json:"offload,omitempty"`
	} `json:"cache"`
	// Prediction compares each prefix producer's belief with the truth,
	// keyed by producer type.
	Prediction map[string]*Prediction `json:"prediction,omitempty"`
	Routing    struct {
		PerReplica map[string]int `json:"requests_per_replica"`
		Imbalance  float64        `json:"load_imbalance"`
		TieShare   float64        `json:"tie_share"`
	} `json:"routing"`
	Sim struct {
		Events     uint64  `json:"events"`
		SimSeconds float64 `json:"simulated_s"`
		// Wall-clock fields: the only values that differ between two runs
		// of the same command.
		WallSeconds      float64 `json:"wall_s"`
		RequestsPerWallS float64 `json:"requests_per_wall_s"`
	} `json:"sim"`
	// Config is what the run was made of, so a summary is reproducible
	// from itself.
	Config *RunConfig `json:"config,omitempty"`
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
	// the calibration (name@hash of its coefficients).
	StepModel string         `json:"step_model"`
	Engine    replica.Config `json:"engine"`
}

// Summary computes the summary; res supplies the run-level counters.
func (a *Aggregator) Summary(res *sim.Result) *Summary {
	s := &Summary{}
	s.Requests.Total, s.Requests.Complete, s.Requests.Rejected = a.total, a.completed, a.rejected
	if len(a.reasons) > 0 {
		s.Requests.Reasons = a.reasons
	}
	s.Latency.TTFT, s.Latency.TPOT, s.Latency.E2E, s.Latency.Queue = dist(a.ttft), dist(a.tpot), dist(a.e2e), dist(a.queue)
	if span := float64(a.last-a.first) / 1e9; span > 0 {
		s.Throughput.RequestsPerS = float64(len(a.e2e)) / span
		s.Throughput.OutputTokensPerS = float64(a.outputTokens) / span
		s.Throughput.InputTokensPerS = float64(a.promptTokens) / span
	}
	if a.promptTokens > 0 {
		// Token-weighted over the fleet, never a mean of per-replica ratios.
		s.Cache.TrueHitRatio = float64(a.cached) / float64(a.promptTokens)
		s.Cache.OracleHitRatio = float64(a.oracle) / float64(a.promptTokens)
	}
	s.Cache.RegretTokens = a.oracle - a.cached
	s.Cache.PerReplica = map[string]float64{}
	s.Routing.PerReplica = map[string]int{}
	names := map[int]string{}
	if res != nil {
		s.Requests.InFlight = res.InFlight
		for i, rr := range res.Replicas {
			names[i] = rr.Name
			s.Cache.Evictions += rr.Evictions
			s.Cache.Preemptions += rr.Stats.Preemptions
		}
		s.Sim.Events = res.Events
		s.Sim.SimSeconds = float64(res.SimTime) / 1e9
	}
	maxRouted := 0
	for i, v := range a.perReplica {
		if v[1] > 0 {
			s.Cache.PerReplica[names[i]] = float64(v[0]) / float64(v[1])
		}
	}
	for i, n := range a.routed {
		s.Routing.PerReplica[names[i]] = n
		maxRouted = max(maxRouted, n)
	}
	if n := len(names); n > 0 && len(a.e2e) > 0 {
		s.Routing.Imbalance = float64(maxRouted) / (float64(len(a.e2e)) / float64(n))
		s.Routing.TieShare = float64(a.ties) / float64(len(a.e2e))
	}
	s.Cache.Offload = a.offloadSummary(res)
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
		return Dist{}
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
	return Dist{Mean: sum / float64(len(s)), P50: q(0.50), P90: q(0.90), P95: q(0.95), P99: q(0.99), Max: s[len(s)-1]}
}
