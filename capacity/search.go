package capacity

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/report"
	"github.com/eppsim/eppsim/scenario"
	"github.com/eppsim/eppsim/sim"
	"github.com/eppsim/eppsim/workload"
)

// Defaults of a search.
const (
	DefaultTolerance = 0.05
	DefaultMaxFactor = 256.0
	// DefaultRetainBytes keeps the shared Mooncake trace's 1.1 GB of
	// synthesized prompts in memory for a search.
	DefaultRetainBytes = 2 << 30
	MaxReplicas        = 10_000
)

// Search is one capacity question about traffic, a fleet template and one
// or more EPP configurations.
type Search struct {
	// Spec is the traffic, the fleet (the template: for a replica search,
	// its first replica's preset, repeated) and the environment; its seed
	// is the first of Seeds.
	Spec *scenario.Spec
	EPPs []scenario.EPP
	SLO  []Term
	// Rate > 0 (requests/s) asks for the fewest replicas that hold the SLO
	// at that rate; 0 asks for the highest rate Spec.Fleet sustains.
	Rate float64
	// Tolerance is the rate search's relative precision: it ends when the
	// highest rate that holds and the lowest that fails are within a
	// factor 1 + Tolerance (0: DefaultTolerance). The replica search is
	// exact.
	Tolerance float64
	// Start is the rate multiplier of the first evaluation; 0 starts
	// where the fleet would run at 70% of its sustainable rate for the
	// traffic's mean request without prefix-cache hits
	// (replica.SustainableRate; a replica search starts with the fleet
	// that would, and without --start the template's size), or at 1 when
	// that cannot be estimated. MaxFactor bounds the multipliers tried to
	// [Start/MaxFactor, Start·MaxFactor] (0: DefaultMaxFactor).
	Start, MaxFactor float64
	// RetainBytes bounds the decoded requests kept in memory for the
	// whole search (0: DefaultRetainBytes; negative: none): a workload
	// that fits is read and prepared once, a larger one once per round.
	RetainBytes int64
	// MaxReplicas bounds the replica search (0: MaxReplicas).
	MaxReplicas int
	// Seeds is how many seeds every point runs (Spec's seed and the next
	// ones; 0: 1): a point holds when the SLO holds on every seed.
	Seeds int
	// NoEarlyStop runs every simulation to its end.
	NoEarlyStop bool
	// Shard selects the configurations this process searches: those whose
	// index i has i mod N == I (N ≤ 1: all). With Share, every shard
	// searches every configuration and Shard splits each round's
	// simulations instead.
	Shard struct{ I, N int }
	// PointsPerRound is how many points each configuration's search
	// evaluates at once (0: 1; with Share, enough for every shard to
	// have a simulation each round: ⌈N ÷ (configurations × seeds)⌉). One
	// point is the bisection; K points split the bracket into K + 1
	// parts per round, and the bracketing takes the next K steps of its
	// schedule, so more points per round cost more simulations and fewer
	// rounds.
	PointsPerRound int
	// RunLog is the file that records every finished simulation
	// (RunsFile in --out; "" for none). A search started again with the
	// same log reads its runs from it instead of simulating them, so an
	// interrupted search resumes; Fresh starts the log over.
	RunLog string
	Fresh  bool
	// Share is a directory every shard of a shared search reads and
	// writes (a volume the pods of an Indexed Job mount): shard I
	// simulates the round's simulations whose index ≡ I (mod N), appends
	// them to SharedRunsFile(I, N) there, and waits (polling every
	// ShareWait.Poll, at most ShareWait.Max) until the other shards have
	// recorded theirs; every shard then takes the same next step and ends
	// with the whole result.
	Share     string
	ShareWait ShareWait
	// Fingerprint is the caller's description of everything else that
	// determines the simulations (the command's flags): a run log whose
	// search had another fingerprint is refused.
	Fingerprint string
	// Progress, when set, receives a line per evaluated point.
	Progress io.Writer
}

// ShareWait bounds a shared search's wait for the other shards.
type ShareWait struct {
	Poll, Max time.Duration
}

// Defaults of a shared search's wait: the other shards' logs are read
// once a second, for at most a day (a shard pod that dies is restarted by
// its Job and resumes from its log).
const (
	DefaultSharePoll = time.Second
	DefaultShareMax  = 24 * time.Hour
)

// Run is one simulation of a point: one seed.
type Run struct {
	Seed  uint64 `json:"seed"`
	Holds bool   `json:"holds"`
	// StoppedEarly is the early stop's reason: the run violates the SLO
	// and measured nothing else (Values are then absent).
	StoppedEarly string `json:"stopped_early,omitempty"`
	// StoppedAtS is the simulated time of the stop, FinalRequests the
	// requests final by then, of Requests.
	StoppedAtS    float64 `json:"stopped_at_s,omitempty"`
	FinalRequests int     `json:"final_requests"`
	Requests      int     `json:"requests"`
	// Values are the SLO terms' metrics (Term.Key: ms, or a share), null
	// when undefined; Violated the terms that fail.
	Values   map[string]report.Num `json:"values,omitempty"`
	Violated []string              `json:"violated,omitempty"`
	// OfferedRate is the offered load (requests/s) of the run.
	OfferedRate report.Num `json:"offered_rate_per_s"`
	// Knee and Intervals are the run's (report.Knee, docs/latency.md),
	// absent for a stopped run.
	Knee      *report.Knee             `json:"knee,omitempty"`
	Intervals *report.LatencyIntervals `json:"latency_intervals_ms,omitempty"`
	// GatewayRefused counts the requests after warm-up that the
	// gateway's circuit breaker refused (--gateway-max-requests), up to
	// the stop of a stopped run.
	GatewayRefused int `json:"gateway_refused,omitempty"`
}

// Point is one rate multiplier (or fleet size) of a configuration's
// search, simulated on every seed.
type Point struct {
	Multiplier float64 `json:"rate_multiplier"`
	// Rate is the traffic's mean rate at this multiplier (requests/s).
	Rate     float64 `json:"rate_per_s"`
	Replicas int     `json:"replicas"`
	Holds    bool    `json:"holds"`
	Runs     []Run   `json:"runs"`
}

// Config is one configuration's answer.
type Config struct {
	// Index is the configuration's position among --epp-config.
	Index int    `json:"index"`
	Name  string `json:"config"`
	// Found is false when the search left its bounds without an answer
	// (Note says which way).
	Found bool   `json:"found"`
	Note  string `json:"note,omitempty"`
	// MaxRate and MaxMultiplier: the highest rate found to hold (a rate
	// search); MinReplicas: the fewest replicas that hold (a replica
	// search).
	MaxRate       float64 `json:"max_rate_per_s,omitempty"`
	MaxMultiplier float64 `json:"max_rate_multiplier,omitempty"`
	MinReplicas   int     `json:"min_replicas,omitempty"`
	// Next is the neighbouring point that fails (the lowest failing rate
	// or the largest failing fleet), Margin the answer's distance to it
	// (a relative rate, or replicas).
	NextRate     float64 `json:"next_rate_per_s,omitempty"`
	NextReplicas int     `json:"next_replicas,omitempty"`
	Margin       float64 `json:"margin"`
	// Binding is the SLO term that fails at the next point (its early
	// stop's, or the one furthest past its bound); BindingLimit the
	// engine limit that binds the busiest replica at the answer
	// (report.Knee: max_num_seqs, kv_blocks, max_num_batched_tokens or
	// compute).
	Binding      string `json:"binding_slo_term,omitempty"`
	BindingLimit string `json:"binding_replica_limit,omitempty"`
	// Utilization is the busiest replica's at the answer (report.Knee;
	// the largest over the seeds): above 1, the SLO holds only because
	// the traffic ends before the queue has grown.
	Utilization float64 `json:"utilization,omitempty"`
	// Points are every evaluated point, by rate (or fleet size).
	Points []Point `json:"points"`
}

// Result is a search's answer for every configuration.
type Result struct {
	Question  string   `json:"question"` // "max-rate" or "min-replicas"
	SLO       []string `json:"slo"`
	Tolerance float64  `json:"tolerance,omitempty"`
	// Rate is the replica search's rate, BaseRate the traffic's mean
	// rate as given (multiplier 1), Replicas the rate search's fleet.
	Rate     float64  `json:"rate_per_s,omitempty"`
	BaseRate float64  `json:"base_rate_per_s"`
	Replicas int      `json:"replicas,omitempty"`
	Seeds    []uint64 `json:"seeds"`
	// Scaling is how a rate multiplier applies: "arrivals" (every arrival
	// and think time divided by it, the request count unchanged) or
	// "stage-rates" (an inference-perf ladder: every stage's rate times
	// it, durations kept).
	Scaling string `json:"rate_scaling"`
	// ClosedLoop is set when turns of the traffic wait for their previous
	// answers (closed-loop replay): its rate then falls as latency grows.
	ClosedLoop bool `json:"closed_loop,omitempty"`
	// Start is the rate search's first multiplier.
	Start float64 `json:"start_multiplier,omitempty"`
	// PointsPerRound is Search.PointsPerRound (absent for 1).
	PointsPerRound int  `json:"points_per_round,omitempty"`
	EarlyStop      bool `json:"early_stop"`
	// TotalConfigs is how many configurations the search has, Shard the
	// part this result holds (I/N; empty for all of them).
	TotalConfigs int      `json:"total_configs"`
	Shard        string   `json:"shard,omitempty"`
	Configs      []Config `json:"configs"`
	// Stats count the simulations: run to the end and stopped early.
	Stats Stats `json:"simulations"`
}

// Stats count a search's simulations.
type Stats struct {
	Full    int `json:"full"`
	Stopped int `json:"stopped_early"`
	// Requests is Σ requests simulated to their end, Skipped Σ requests
	// an early stop spared (each stopped run's requests not yet final).
	Requests int `json:"requests_simulated"`
	Skipped  int `json:"requests_spared"`
}

// traffic is what a search knows of its workload before simulating: the
// arrivals of each seed's reading (ns, in order), and the first seed's
// mean prompt and output.
type traffic struct {
	arrivals       map[uint64][]int64
	prompt, output float64
	// stages are the load stages the workload declares (an
	// inference-perf config): its rate multiplier then scales every
	// stage's rate and keeps its duration
	// (workload.InferencePerfOptions.RateScale), each rate a workload of
	// its own, instead of compressing the arrivals.
	stages []workload.StagePlan
}

// stretch reports whether the search scales stage rates (an
// inference-perf ladder) rather than arrivals.
func (t *traffic) stretch() bool { return len(t.stages) > 0 }

// stageSizes bounds each declared stage's requests at multiplier m (the
// stage stop's n), nil without declared stages.
func (t *traffic) stageSizes(m float64) []int {
	if !t.stretch() {
		return nil
	}
	out := make([]int, len(t.stages))
	for i, st := range t.stages {
		out[i] = int(st.Rate*m*st.Duration) + 1
	}
	return out
}

// stageRequests bounds the requests of the stage ladder at multiplier m
// (int(rate·m·duration) per stage, plus one for rounding).
func (t *traffic) stageRequests(m float64, env *sim.Options) int {
	n := 0
	for _, st := range t.stages {
		n += int(st.Rate*m*st.Duration) + 1
	}
	if env.MaxRequests > 0 {
		n = min(n, env.MaxRequests)
	}
	return n
}

// count reads spec's workload once, without materializing prompts where
// the format allows (hash-id traces), for its arrivals and its mean prompt
// and output lengths (tokens).
func count(ctx context.Context, spec *scenario.Spec) (arr []int64, stages []workload.StagePlan, prompt, output float64, closed bool, err error) {
	s := *spec
	if s.Open == nil {
		s.Workload.NoTokens = true
	}
	st, err := scenario.SpecOpener(&s)()
	if err != nil {
		return nil, nil, 0, 0, false, &scenario.InputError{Err: err}
	}
	defer st.Close()
	var sp, so float64
	for {
		if len(arr)%1024 == 0 && ctx.Err() != nil {
			return nil, nil, 0, 0, false, context.Cause(ctx)
		}
		r, err := st.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, 0, 0, false, &scenario.InputError{Err: err}
		}
		arr = append(arr, r.Arrival)
		sp += float64(r.PromptLen)
		so += float64(r.OutputTokens)
		closed = closed || r.AfterPrevious
	}
	if n := float64(len(arr)); n > 0 {
		prompt, output = sp/n, so/n
	}
	return arr, st.Stages(), prompt, output, closed, nil
}

// requests is how many requests a run reads at arrival scale k
// (sim.Options MaxRequests and Duration): an upper bound for the early
// stop.
func requests(arr []int64, env *sim.Options, k float64) int {
	n := len(arr)
	if env.Duration > 0 {
		for i, a := range arr {
			if int64(math.Floor(float64(a)*k)) > env.Duration {
				n = i
				break
			}
		}
	}
	if env.MaxRequests > 0 {
		n = min(n, env.MaxRequests)
	}
	return n
}

// meanRate is the mean request rate of arrivals (requests/s).
func meanRate(arr []int64) float64 {
	if len(arr) < 2 || arr[len(arr)-1] <= arr[0] {
		return math.NaN()
	}
	return float64(len(arr)) / (float64(arr[len(arr)-1]-arr[0]) / 1e9)
}

// feeds hands out one reading of each seed's workload to the runs of a
// round: one retaining Feed per workload while it can still take runs
// (a trace that fits scenario.DefaultRetainBytes is read once for the
// whole search), else a new one per round, joined by every run of the
// round before any starts.
type feeds struct {
	epps   []scenario.EPP
	retain int64
	mu     sync.Mutex
	open   map[string]*scenario.Feed
	all    []*scenario.Feed
}

func (f *feeds) join(ctx context.Context, spec *scenario.Spec, key string) (*scenario.FeedReader, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for range 2 {
		fd := f.open[key]
		if fd == nil {
			fd = scenario.NewFeed(scenario.SpecOpener(spec), scenario.FeedOptions{RetainBytes: f.retain,
				WindowBytes: int64(min(len(f.epps), 8)) * scenario.DefaultWindowBytes, Prepare: scenario.Preparer(spec, f.epps)})
			f.open[key] = fd
			f.all = append(f.all, fd)
		}
		rd, err := fd.JoinContext(ctx, nil)
		if errors.Is(err, scenario.ErrFeedClosed) {
			delete(f.open, key)
			continue
		}
		return rd, err
	}
	return nil, errors.New("capacity: a new feed refused its first run")
}

func (f *feeds) close() {
	for _, fd := range f.all {
		fd.Close()
	}
	f.all, f.open = nil, map[string]*scenario.Feed{}
}

// Do runs the search.
func Do(ctx context.Context, s Search) (*Result, error) {
	if len(s.EPPs) == 0 {
		return nil, errors.New("--epp-config: no configuration to search")
	}
	if len(s.SLO) == 0 {
		return nil, errors.New("--slo: at least one term is needed")
	}
	if s.Tolerance == 0 {
		s.Tolerance = DefaultTolerance
	}
	if !(s.Tolerance > 0) || s.Tolerance > 1 {
		return nil, fmt.Errorf("--tolerance %g: must be in (0, 1]", s.Tolerance)
	}
	if s.MaxFactor == 0 {
		s.MaxFactor = DefaultMaxFactor
	}
	if s.MaxReplicas == 0 {
		s.MaxReplicas = MaxReplicas
	}
	if s.Seeds <= 0 {
		s.Seeds = 1
	}
	if s.Rate > 0 && !uniform(s.Spec.Fleet) {
		return nil, &scenario.InputError{Err: errors.New("--rate: a replica search needs a uniform fleet (--replicas/--preset, not a --fleet file with groups or labels)")}
	}
	res := &Result{Question: "max-rate", EarlyStop: !s.NoEarlyStop, Replicas: len(s.Spec.Fleet), Tolerance: s.Tolerance}
	if s.Rate > 0 {
		res.Question, res.Rate, res.Replicas, res.Tolerance = "min-replicas", s.Rate, 0, 0
	}
	for _, t := range s.SLO {
		res.SLO = append(res.SLO, t.Text)
	}
	res.TotalConfigs = len(s.EPPs)
	if s.Shard.N > 1 {
		res.Shard = fmt.Sprintf("%d/%d", s.Shard.I, s.Shard.N)
	}
	tr := traffic{arrivals: map[uint64][]int64{}}
	for k := range s.Seeds {
		seed := s.Spec.Env.Seed + uint64(k)
		res.Seeds = append(res.Seeds, seed)
		arr, stages, prompt, output, closed, err := count(ctx, seedSpec(s.Spec, seed))
		if err != nil {
			return nil, err
		}
		if k == 0 {
			tr.prompt, tr.output, tr.stages = prompt, output, stages
			res.ClosedLoop = closed
		}
		if len(arr) == 0 {
			return nil, &scenario.InputError{Err: fmt.Errorf("%s: the workload has no request", s.Spec.Trace)}
		}
		tr.arrivals[seed] = arr
	}
	res.BaseRate = meanRate(tr.arrivals[res.Seeds[0]])
	res.Scaling = "arrivals"
	if tr.stretch() {
		res.Scaling = "stage-rates"
	}
	if math.IsNaN(res.BaseRate) {
		return nil, &scenario.InputError{Err: fmt.Errorf("%s: the workload's arrivals span no time, so it has no rate to scale", s.Spec.Trace)}
	}
	perReplica := replicaRate(s.Spec.Fleet, tr.prompt, tr.output)
	start := s.Start
	if start == 0 {
		start = 1
		if perReplica > 0 {
			// Near where the answer usually is: the fleet at 70% of its
			// sustainable rate for the mean request, uncached.
			start = 0.7 * perReplica * float64(len(s.Spec.Fleet)) / res.BaseRate
		}
	}
	autoStart := s.Start == 0
	s.Start = start
	if s.Rate == 0 {
		res.Start = start
	}
	retain := s.RetainBytes
	if retain == 0 {
		retain = DefaultRetainBytes
	}
	fd := &feeds{epps: s.EPPs, open: map[string]*scenario.Feed{}, retain: max(retain, 0)}
	defer fd.close()
	shared := s.Share != "" && s.Shard.N > 1
	if shared {
		res.Shard = ""
	}
	var states []*state
	for i, e := range s.EPPs {
		if !shared && s.Shard.N > 1 && i%s.Shard.N != s.Shard.I {
			continue
		}
		st := &state{cfg: Config{Index: i, Name: e.Name}, epp: e}
		x := s.Start
		if s.Rate > 0 {
			x = float64(len(s.Spec.Fleet))
			if perReplica > 0 && autoStart {
				x = math.Ceil(s.Rate / (0.7 * perReplica))
			}
			x = math.Min(math.Max(x, 1), float64(s.MaxReplicas))
		}
		states = append(states, st)
		st.next = []float64{x}
	}
	if s.PointsPerRound <= 0 {
		s.PointsPerRound = 1
		if shared {
			per := len(states) * s.Seeds
			s.PointsPerRound = (s.Shard.N + per - 1) / per
		}
	}
	if s.PointsPerRound > 1 {
		res.PointsPerRound = s.PointsPerRound
		for _, st := range states {
			// The first round: the start and the next steps of the
			// bracketing as if each held (a rate search) or failed (a
			// replica search).
			if s.Rate > 0 {
				st.next = st.replicasUp(&s, st.next[0], 0, s.PointsPerRound-1, true)
			} else {
				st.next = st.ratesFrom(&s, st.next[0], 0, s.PointsPerRound-1, true)
			}
		}
	}
	if s.ShareWait.Poll <= 0 {
		s.ShareWait.Poll = DefaultSharePoll
	}
	if s.ShareWait.Max <= 0 {
		s.ShareWait.Max = DefaultShareMax
	}
	logPath, others := s.RunLog, []string(nil)
	if shared {
		logPath = filepath.Join(s.Share, SharedRunsFile(s.Shard.I, s.Shard.N))
		for i := range s.Shard.N {
			if i != s.Shard.I {
				others = append(others, filepath.Join(s.Share, SharedRunsFile(i, s.Shard.N)))
			}
		}
	}
	var rl *runLog
	if logPath != "" {
		h, err := searchHash(&s)
		if err != nil {
			return nil, &scenario.InputError{Err: err}
		}
		if rl, err = openRunLog(logPath, h, others, s.Fresh); err != nil {
			if scenario.IsInputError(err) {
				return nil, err
			}
			return nil, fmt.Errorf("--out: %w", err)
		}
		defer rl.close()
	}
	for round := 0; ; round++ {
		var active []*state
		for _, st := range states {
			if !st.done {
				active = append(active, st)
			}
		}
		if len(active) == 0 {
			break
		}
		if err := evalRound(ctx, &s, res, &tr, fd, rl, active); err != nil {
			return nil, err
		}
		for _, st := range active {
			if s.Rate > 0 {
				st.stepReplicas(&s)
			} else {
				st.stepRate(&s)
			}
		}
	}
	for _, st := range states {
		st.finish(&s, res)
		res.Configs = append(res.Configs, st.cfg)
	}
	return res, nil
}

// replicaRate is the mean sustainable rate of the fleet's replicas
// (requests/s) for a request of the traffic's mean prompt and output
// without prefix-cache hits (replica.SustainableRate); 0 when it cannot
// be estimated.
func replicaRate(fleet []sim.ReplicaSpec, prompt, output float64) float64 {
	engines, err := sim.ExpandDataParallel(fleet)
	if err != nil || len(engines) == 0 || !(prompt >= 1) {
		return 0
	}
	var sum float64
	for _, r := range engines {
		k, err := sim.SustainableRate(r, replica.Mix{PromptTokens: prompt, OutputTokens: max(output, 1)})
		if err != nil || !(k.MaxRate > 0) {
			return 0
		}
		sum += k.MaxRate
	}
	return sum / float64(len(fleet))
}

func uniform(fleet []sim.ReplicaSpec) bool {
	for _, r := range fleet {
		if len(r.Labels) > 0 || !reflect.DeepEqual(r.Preset, fleet[0].Preset) {
			return false
		}
	}
	return len(fleet) > 0
}

func seedSpec(spec *scenario.Spec, seed uint64) *scenario.Spec {
	s := *spec
	s.Env.Seed, s.Workload.Seed = seed, int64(seed)
	return &s
}

// state is one configuration's search in progress: next are the points of
// its next round (rate multipliers, or fleet sizes), round the points of
// the round just evaluated; good and bad bracket the answer.
type state struct {
	cfg   Config
	epp   scenario.EPP
	next  []float64
	round []*Point
	// good is the best point that holds (the highest rate, the fewest
	// replicas), bad the nearest that fails.
	good, bad *Point
	steps     int // points evaluated
	done      bool
}

// evalRound simulates every active configuration's next points on every
// seed, all at once, the runs of one seed reading one Feed. Runs the log
// holds are read from it; in a shared search this shard simulates the
// round's runs whose index ≡ I (mod N) and waits for the others'.
func evalRound(ctx context.Context, s *Search, res *Result, tr *traffic, fd *feeds, rl *runLog, active []*state) error {
	type job struct {
		st   *state
		pt   *Point
		k    int
		key  runKey
		spec *scenario.Spec
		rd   *scenario.FeedReader
	}
	var all, jobs []*job
	for _, st := range active {
		st.round = st.round[:0]
		for _, x := range st.next {
			pt := &Point{Multiplier: x, Replicas: len(s.Spec.Fleet)}
			if s.Rate > 0 {
				pt.Multiplier = s.Rate / res.BaseRate
				pt.Replicas = int(x)
			}
			pt.Rate = pt.Multiplier * res.BaseRate
			pt.Runs = make([]Run, len(res.Seeds))
			st.round = append(st.round, pt)
			for k, seed := range res.Seeds {
				j := &job{st: st, pt: pt, k: k, key: runKey{Config: st.cfg.Index, X: x, Seed: seed}}
				all = append(all, j)
				if rl != nil {
					if r, ok := rl.lookup(j.key); ok {
						pt.Runs[k] = r
						continue
					}
				}
				if s.Share != "" && s.Shard.N > 1 && (len(all)-1)%s.Shard.N != s.Shard.I {
					continue // another shard's
				}
				spec := seedSpec(s.Spec, seed)
				if tr.stretch() {
					if pt.Multiplier != 1 {
						spec.Workload.InferencePerf.RateScale = pt.Multiplier
					}
				} else {
					spec.ArrivalScale = 1 / pt.Multiplier
				}
				if s.Rate > 0 {
					spec.Fleet = sim.UniformFleet(pt.Replicas, s.Spec.Fleet[0].Preset)
				}
				j.spec = spec
				jobs = append(jobs, j)
			}
		}
	}
	for _, j := range jobs {
		key := fmt.Sprint(j.spec.Env.Seed)
		if tr.stretch() {
			key += fmt.Sprintf("×%g", j.pt.Multiplier) // a workload per rate
		}
		rd, err := fd.join(ctx, j.spec, key)
		if err != nil {
			for _, o := range jobs {
				if o.rd != nil {
					o.rd.Close()
				}
			}
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return &scenario.InputError{Err: err}
		}
		j.rd = rd
	}
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() {
			seed := j.spec.Env.Seed
			n := requests(tr.arrivals[seed], &j.spec.Env, j.spec.ArrivalScale)
			if tr.stretch() {
				n = tr.stageRequests(j.pt.Multiplier, &j.spec.Env)
			}
			var hooks scenario.Hooks
			if !s.NoEarlyStop {
				hooks.Stop = Stopper(s.SLO, n, tr.stageSizes(j.pt.Multiplier))
			}
			sum, err := scenario.RunReader(ctx, j.spec, j.st.epp, hooks, j.rd)
			if err != nil {
				errs[i] = fmt.Errorf("%s at %s: %w", j.st.epp.Name, describe(j.pt, s.Rate > 0), err)
				return
			}
			j.pt.Runs[j.k] = judge(s.SLO, sum, seed, n)
			if rl != nil {
				errs[i] = rl.add(j.key, j.pt.Runs[j.k])
			}
		})
	}
	wg.Wait()
	if tr.stretch() {
		fd.close() // every rate is a workload of its own: none is read again
	}
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	if s.Share != "" && s.Shard.N > 1 {
		if err := awaitShards(ctx, s, rl, len(all), func(i int) (runKey, bool) {
			j := all[i]
			r, ok := rl.lookup(j.key)
			if ok {
				j.pt.Runs[j.k] = r
			}
			return j.key, ok
		}); err != nil {
			return err
		}
	}
	for _, st := range active {
		for _, pt := range st.round {
			pt.Holds = true
			for _, r := range pt.Runs {
				pt.Holds = pt.Holds && r.Holds
				if r.StoppedEarly != "" {
					res.Stats.Stopped++
					res.Stats.Skipped += r.Requests - r.FinalRequests
					res.Stats.Requests += r.FinalRequests
				} else {
					res.Stats.Full++
					res.Stats.Requests += r.Requests
				}
			}
			st.cfg.Points = append(st.cfg.Points, *pt)
			st.steps++
			if s.Progress != nil {
				verdict := "holds"
				if !pt.Holds {
					verdict = "fails"
					for _, r := range pt.Runs {
						if r.StoppedEarly != "" {
							verdict += " (stopped early)"
							break
						}
					}
				}
				fmt.Fprintf(s.Progress, "eppsim: capacity: %s at %s: %s\n", st.epp.Name, describe(pt, s.Rate > 0), verdict)
			}
		}
	}
	return nil
}

// awaitShards waits until every one of a round's n runs is recorded
// (have reports run i's), reading the other shards' logs every
// ShareWait.Poll, for at most ShareWait.Max.
func awaitShards(ctx context.Context, s *Search, rl *runLog, n int, have func(i int) (runKey, bool)) error {
	deadline := time.Now().Add(s.ShareWait.Max)
	for {
		missing := -1
		for i := range n {
			if _, ok := have(i); !ok {
				missing = i
				break
			}
		}
		if missing < 0 {
			return nil
		}
		if time.Now().After(deadline) {
			k, _ := have(missing)
			return fmt.Errorf("--share %s: shard %d of %d has not recorded configuration %d at %g, seed %d, after %s: is its pod running?",
				s.Share, missing%s.Shard.N, s.Shard.N, k.Config, k.X, k.Seed, s.ShareWait.Max)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(s.ShareWait.Poll):
		}
		if err := rl.refresh(); err != nil {
			return err
		}
	}
}

func describe(pt *Point, replicas bool) string {
	if replicas {
		return fmt.Sprintf("%d replicas", pt.Replicas)
	}
	return fmt.Sprintf("%.4g req/s (×%.4g)", pt.Rate, pt.Multiplier)
}

// judge evaluates the SLO on a run's summary.
func judge(terms []Term, sum *report.Summary, seed uint64, n int) Run {
	r := Run{Seed: seed, Requests: n, OfferedRate: sum.OfferedLoad.RequestsPerS}
	r.FinalRequests = sum.Requests.Complete + sum.Requests.Rejected
	r.GatewayRefused = sum.RejectedAfterWarmup(sim.CauseGatewayOverflow)
	if st := sum.StoppedEarly; st != nil {
		r.StoppedEarly, r.StoppedAtS, r.FinalRequests = st.Reason, st.AtS, st.FinalRequests
		for _, t := range terms {
			if strings.HasPrefix(st.Reason, t.Label()+" cannot hold") {
				r.Violated = append(r.Violated, t.Text)
			}
		}
		return r
	}
	r.Holds = true
	r.Values = map[string]report.Num{}
	for _, t := range terms {
		v := t.Value(sum)
		if math.IsNaN(v) {
			r.Values[t.Key()] = report.Undefined()
		} else {
			r.Values[t.Key()] = report.Num(v)
		}
		if !t.holds(v) {
			r.Holds = false
			r.Violated = append(r.Violated, t.Text)
		}
	}
	if !report.Measured(sum) {
		r.Holds = false
		r.Violated = append(r.Violated, "no measured request")
	}
	r.Knee, r.Intervals = sum.Knee, sum.Intervals
	return r
}

// rateFactor is the bracketing's n-th step factor: 1.25, 1.56, 2.44, ...
// (each the square of the last).
func rateFactor(n int) float64 { return math.Pow(1.25, math.Pow(2, float64(n-1))) }

// ratesFrom continues the rate bracketing from x, after n steps, for k
// more points up (or down), within [Start/MaxFactor, Start·MaxFactor].
func (st *state) ratesFrom(s *Search, x float64, n, k int, up bool) []float64 {
	out := []float64{x}
	for j := 1; j <= k; j++ {
		if up {
			x *= rateFactor(n + j)
		} else {
			x /= rateFactor(n + j)
		}
		if x > s.Start*s.MaxFactor || x < s.Start/s.MaxFactor {
			break
		}
		out = append(out, x)
	}
	return out
}

// replicasUp continues the replica bracketing from x replicas, after n
// steps, for k more fleets up (by 1, 2, 4, ... replicas, at most
// MaxReplicas) or down (at least 1).
func (st *state) replicasUp(s *Search, x float64, n, k int, up bool) []float64 {
	out := []float64{x}
	for j := 1; j <= k; j++ {
		step := float64(int(1) << min(n+j-1, 20))
		if up {
			if x >= float64(s.MaxReplicas) {
				break
			}
			x = math.Min(x+step, float64(s.MaxReplicas))
		} else {
			if x <= 1 {
				break
			}
			x = math.Max(x-step, 1)
		}
		out = append(out, x)
	}
	return out
}

// stepRate moves a rate search after its round: up (or down) by factors
// that square at each step (1.25, 1.56, 2.44, ...) until the answer is
// bracketed, then splitting the bracket geometrically (bisecting it, with
// one point per round) to the tolerance.
func (st *state) stepRate(s *Search) {
	for _, pt := range st.round {
		if pt.Holds {
			if st.good == nil || pt.Multiplier > st.good.Multiplier {
				st.good = pt
			}
		} else if st.bad == nil || pt.Multiplier < st.bad.Multiplier {
			st.bad = pt
		}
	}
	k := s.PointsPerRound
	switch {
	case st.bad == nil:
		st.next = st.ratesFrom(s, st.good.Multiplier, st.steps-1, k, true)[1:]
	case st.good == nil:
		st.next = st.ratesFrom(s, st.bad.Multiplier, st.steps-1, k, false)[1:]
	case st.bad.Multiplier/st.good.Multiplier <= 1+s.Tolerance:
		st.next = nil
	default:
		g, b := st.good.Multiplier, st.bad.Multiplier
		// Enough points to reach the tolerance in this round, at most k.
		m := min(k, max(1, int(math.Ceil(math.Log(b/g)/math.Log1p(s.Tolerance)))-1))
		if m == 1 {
			st.next = []float64{math.Sqrt(g * b)}
			break
		}
		st.next = st.next[:0]
		for j := 1; j <= m; j++ {
			st.next = append(st.next, g*math.Pow(b/g, float64(j)/float64(m+1)))
		}
	}
	st.done = len(st.next) == 0
}

// stepReplicas moves a replica search: from its first fleet, up (or
// down) by steps that double (1, 2, 4, ... replicas) until bracketed,
// then integer bisection (with k points per round, k + 1 parts).
func (st *state) stepReplicas(s *Search) {
	for _, pt := range st.round {
		n := pt.Replicas
		if pt.Holds {
			if st.good == nil || n < st.good.Replicas {
				st.good = pt
			}
		} else if st.bad == nil || n > st.bad.Replicas {
			st.bad = pt
		}
	}
	k := s.PointsPerRound
	switch {
	case st.good == nil:
		st.next = st.replicasUp(s, float64(st.bad.Replicas), st.steps-1, k, true)[1:]
	case st.bad == nil:
		st.next = st.replicasUp(s, float64(st.good.Replicas), st.steps-1, k, false)[1:]
	case st.good.Replicas-st.bad.Replicas <= 1:
		st.next = nil
	default:
		g, b := st.good.Replicas, st.bad.Replicas
		m := min(k, g-b-1)
		st.next = st.next[:0]
		for j := 1; j <= m; j++ {
			x := float64(b + j*(g-b)/(m+1))
			if len(st.next) == 0 || x > st.next[len(st.next)-1] {
				st.next = append(st.next, x)
			}
		}
	}
	st.done = len(st.next) == 0
}

// finish states the configuration's answer from its points.
func (st *state) finish(s *Search, res *Result) {
	c := &st.cfg
	replicas := s.Rate > 0
	sort.SliceStable(c.Points, func(i, j int) bool {
		if replicas {
			return c.Points[i].Replicas < c.Points[j].Replicas
		}
		return c.Points[i].Multiplier < c.Points[j].Multiplier
	})
	switch {
	case st.good == nil && replicas:
		c.Note = fmt.Sprintf("fails with every fleet tried, up to %d replicas", st.bad.Replicas)
	case st.good == nil:
		c.Note = fmt.Sprintf("fails at every rate tried, down to %.4g req/s", st.bad.Rate)
	case st.bad == nil && replicas:
		c.Found, c.MinReplicas = true, st.good.Replicas
		c.Note = "holds with one replica"
	case st.bad == nil:
		c.Note = fmt.Sprintf("holds at every rate tried, up to %.4g req/s (×%.4g)", st.good.Rate, st.good.Multiplier)
		c.MaxRate, c.MaxMultiplier = st.good.Rate, st.good.Multiplier
	case replicas:
		c.Found, c.MinReplicas, c.NextReplicas = true, st.good.Replicas, st.bad.Replicas
		c.Margin = float64(st.good.Replicas - st.bad.Replicas)
	default:
		c.Found, c.MaxRate, c.MaxMultiplier, c.NextRate = true, st.good.Rate, st.good.Multiplier, st.bad.Rate
		c.Margin = st.bad.Multiplier/st.good.Multiplier - 1
	}
	if st.bad != nil {
		c.Binding = binding(s.SLO, st.bad)
	}
	if st.good != nil {
		for _, r := range st.good.Runs {
			if r.Knee != nil && r.Knee.Binding != "" {
				c.BindingLimit = r.Knee.Binding
				if r.Knee.BusiestUtilization.Defined() {
					c.Utilization = max(c.Utilization, r.Knee.BusiestUtilization.Float())
				}
			}
		}
	}
}

// binding is the SLO term that fails at a failing point: the one its
// early stop names, or the one furthest past its bound (relative), on the
// first seed that fails.
func binding(terms []Term, pt *Point) string {
	for _, r := range pt.Runs {
		if r.Holds {
			continue
		}
		if r.StoppedEarly != "" && len(r.Violated) > 0 {
			return r.Violated[0]
		}
		best, worst := "", math.Inf(-1)
		for _, t := range terms {
			if !slices.Contains(r.Violated, t.Text) {
				continue
			}
			v := r.Values[t.Key()]
			x := math.Inf(1)
			if v.Defined() && t.Bound > 0 {
				x = v.Float() / t.Bound
				if !t.upper() {
					x = t.Bound / v.Float()
				}
			}
			if x > worst {
				best, worst = t.Text, x
			}
		}
		if best != "" {
			return best
		}
		if len(r.Violated) > 0 {
			return r.Violated[0]
		}
	}
	return ""
}
