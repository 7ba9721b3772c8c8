package workload

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
)

// InferencePerfOptions tune how an inference-perf config becomes traffic
// (Options.InferencePerf). The zero value reproduces the recorded runs of
// ../shared/latency (docs/workloads.md, "inference-perf configs").
type InferencePerfOptions struct {
	// TokenInflation is the fraction by which random token text grows when
	// the server re-tokenizes it: a random segment (system prompt, question,
	// random prompt) of nominal length n gets round(n × (1 + TokenInflation))
	// tokens. 0 means DefaultTokenInflation; a negative value means none
	// (the nominal lengths, as inference-perf builds that generate
	// exact-length text send). Synthetic data (real text) is not inflated.
	TokenInflation float64
	// EvenArrivals spaces the arrivals of a load.type constant stage exactly
	// duration/N apart, instead of inference-perf's jittered schedule (N
	// arrivals at exponential gaps normalized to span the stage).
	EvenArrivals bool
	// RateScale, when > 0 and not 1, multiplies every stage's rate and
	// keeps its duration, so that the stage sends int(rate × scale ×
	// duration) requests: a capacity search's higher rates of a ladder,
	// each stage as long as written (TimeScale would shorten it instead).
	RateScale float64
	// AliasKeys reads the legacy shared_prefix keys num_unique_system_prompts
	// and num_users_per_system_prompt as num_groups and
	// num_prompts_per_group, as newer inference-perf does (and rejects
	// enable_multi_turn_chat: true). By default they are ignored, as the
	// inference-perf build of the recorded runs did.
	AliasKeys bool
	// OpenLoop turns the client model off (Stream.Client returns nil):
	// every request is sent at its scheduled time whatever is in flight,
	// and a stage's schedule starts Load.Interval + 1 s after the previous
	// stage's last arrival. By default sim runs inference-perf v0.2.0's
	// client (ClientPlan).
	OpenLoop bool
	// CPUs is the load generator machine's CPU count, from which
	// num_workers defaults when the config omits it (0:
	// DefaultIPerfCPUs).
	CPUs int
	// MaxConcurrency, when > 0, replaces num_workers ×
	// worker_max_concurrency as the cap on requests in flight.
	MaxConcurrency int
	// RequestTimeout, when > 0, replaces the per-request timeout (ns):
	// load.request_timeout, else DefaultIPerfRequestTimeout.
	RequestTimeout int64
}

// DefaultTokenInflation is the mean excess of the measured prompt lengths of
// the 16 recorded shared_prefix runs with a known config
// (../shared/latency/experiments.json: measured mean prompt_len_tokens over
// system_prompt_len + question_len, Llama-2, Mixtral and CodeLlama
// tokenizers): 4.0-5.2 %, mean 4.68 %. inference-perf decodes random token
// ids to text and the server tokenizes that text again, which gives about
// 4.7 % more tokens, in proportion to the length (+26 at 566 nominal
// tokens, +48 at 1034), so the adjustment is a factor, not a constant.
const DefaultTokenInflation = 0.047

// InferencePerfPrefix names an inference-perf config as a trace:
// "inference-perf:profile.yaml".
const InferencePerfPrefix = "inference-perf:"

// maxConfigBytes bounds the size of a config file (an inference-perf
// config, a synthesizer spec): real ones are a few kilobytes.
const maxConfigBytes = 1 << 20

func (o *InferencePerfOptions) inflation() (float64, error) {
	f := o.TokenInflation
	switch {
	case f == 0:
		return DefaultTokenInflation, nil
	case f < 0:
		return 0, nil
	case f > 1 || math.IsNaN(f):
		return 0, fmt.Errorf("inference-perf token inflation %g: must be at most 1", f)
	}
	return f, nil
}

// openInferencePerf reads the config at path and opens its traffic.
func openInferencePerf(path string, o Options, userModel string) (*Stream, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	defer f.Close()
	return readInferencePerf(f, path, o, userModel)
}

func readInferencePerf(r io.Reader, name string, o Options, userModel string) (*Stream, error) {
	data, err := readConfig(r, name, maxConfigBytes)
	if err != nil {
		return nil, err
	}
	cfg, err := ParseInferencePerf(data, name)
	if err != nil {
		return nil, err
	}
	return newInferencePerfStream(cfg, o, userModel)
}

// NewInferencePerfSource returns the traffic of a parsed inference-perf
// config: its load stages one after the other, each request carrying its
// stage in Request.Stage. Options.Model, if set, overrides
// server.model_name; Options.Seed drives every random choice (prompt text,
// the prompt pool's order, lengths, arrivals).
func NewInferencePerfSource(cfg *InferencePerfConfig, opt Options) (*Stream, error) {
	userModel := opt.Model
	o, err := opt.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.File, err)
	}
	return newInferencePerfStream(cfg, o, userModel)
}

func newInferencePerfStream(cfg *InferencePerfConfig, o Options, userModel string) (*Stream, error) {
	if o.Rate > 0 {
		return nil, fmt.Errorf("%s: an inference-perf config sets its own rates (load.stages); use --time-scale to stretch it", cfg.File)
	}
	if _, err := rewriteAPI(FormatInferencePerf, o.API); err != nil {
		return nil, fmt.Errorf("%s: %w (api.type)", cfg.File, err)
	}
	if o.Mode == ModeDefault {
		o.Mode = ModeOpenLoop
	}
	rd, err := newIPerfReader(cfg, &o, userModel)
	if err != nil {
		return nil, err
	}
	return &Stream{name: cfg.File, format: FormatInferencePerf, mode: o.Mode, rd: rd, scale: o.TimeScale, classes: newClassAssigner(o)}, nil
}

// Virtual block ids of synthesized inference-perf text (blockSynth keys):
// 1<<47 | kind<<43 | index<<8 | chunk, each chunk iperfChunk tokens. They
// lie above every trace hash id and are distinct for distinct (kind, index,
// chunk): index < 2^35, chunk < 256 (segments up to maxIPerfSegment tokens).
const (
	iperfBase     = 1 << 47
	iperfChunk    = 1 << 12
	iperfSystem   = 1 // index: group
	iperfQuestion = 2 // index: group × num_prompts_per_group + prompt
	iperfRandom   = 3 // index: request ID
	iperfCorpus   = 4 // index 0: the synthetic corpus
)

// iperfReader generates the traffic of an inference-perf config.
//
// Prompts: shared_prefix data is a pool of num_groups × num_prompts_per_group
// prompts, system prompt of the group + question, shuffled once; the n-th
// request of a stage takes pool[n mod size]. Random data gives each request
// its own text; synthetic data takes the first L tokens of one corpus. All
// text is lexicon words keyed by virtual block ids (blockSynth), so equal
// system prompts are equal token and byte prefixes.
//
// Arrivals: each stage sends int(rate × duration) requests; see
// iperfSchedule. A stage starts Load.Interval + 1 s after the previous
// stage's last arrival.
type iperfReader struct {
	cfg       *InferencePerfConfig
	opt       *Options
	synth     blockSynth
	enc       *chatEncoder // chat API only
	modelJSON []byte
	model     string
	inflation float64
	endpoint  string

	// shared_prefix
	pool               []int32 // shuffled group*perGroup+prompt
	perGroup           int
	sysLen, qLen, outN int
	// random and synthetic: lengths by the request's number in its stage
	inLens, outLens []int32

	rng   *rand.Rand // arrivals
	stage int
	n     int // requests of the current stage emitted
	sched iperfSchedule
	last  float64 // last arrival, s
	// stageStart is the current stage's schedule start, s
	// (Request.StageStart).
	stageStart float64
	nextID     int64
}

// inflate is the token count of a random segment of nominal length n.
func (r *iperfReader) inflate(n int) int {
	return int(math.Round(float64(n) * (1 + r.inflation)))
}

func newIPerfReader(cfg *InferencePerfConfig, o *Options, userModel string) (*iperfReader, error) {
	if k := o.InferencePerf.RateScale; k > 0 && k != 1 {
		c := *cfg
		c.Load.Stages = slices.Clone(cfg.Load.Stages)
		for i := range c.Load.Stages {
			c.Load.Stages[i].Rate *= k
		}
		cfg = &c
	}
	infl, err := o.InferencePerf.inflation()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.File, err)
	}
	if err := o.InferencePerf.checkClient(); err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.File, err)
	}
	lx, err := o.Tokenizer.Lexicon(o.BytesPerToken)
	if err != nil {
		return nil, err
	}
	model := userModel
	if model == "" {
		model = cfg.Server.ModelName
	}
	if model == "" {
		model = DefaultModel
	}
	seed := uint64(o.Seed)
	r := &iperfReader{
		cfg: cfg, opt: o, synth: blockSynth{seed: seed, lex: lx},
		modelJSON: jsonString(model), model: model, inflation: infl, endpoint: EndpointCompletions,
		rng: rand.New(rand.NewPCG(seed, 0x69706572665f6172)), // "iperf_ar"
	}
	if cfg.API.Type == "chat" {
		r.endpoint = EndpointChat
		if r.enc, err = newChatEncoder(o.Tokenizer, 1<<16); err != nil {
			return nil, err
		}
	}
	if len(cfg.Load.Stages) == 0 {
		return nil, &InputError{File: cfg.File, Field: "load.stages", Msg: "empty: give at least one {rate, duration} stage"}
	}
	longest, segment := 0, 0 // tokens of the longest prompt and text segment
	d := &cfg.Data
	switch d.Type {
	case "shared_prefix":
		sp := d.SharedPrefix
		groups, per := sp.NumGroups, sp.NumPromptsPerGroup
		if o.InferencePerf.AliasKeys {
			if sp.Legacy.EnableMultiTurnChat {
				return nil, &InputError{File: cfg.File, Line: sp.Legacy.MultiTurnLine, Field: "data.shared_prefix.enable_multi_turn_chat",
					Msg: "multi-turn shared-prefix chat is not simulated (without --iperf-alias-keys the legacy keys are ignored, as in the recorded runs)"}
			}
			if sp.Legacy.NumUniqueSystemPrompts > 0 {
				groups = sp.Legacy.NumUniqueSystemPrompts
			}
			if sp.Legacy.NumUsersPerSystemPrompt > 0 {
				per = sp.Legacy.NumUsersPerSystemPrompt
			}
		}
		if groups < 1 || per < 1 || groups*per > maxIPerfPool || sp.QuestionLen < 1 || sp.OutputLen < 1 ||
			sp.SystemPromptLen < 0 || sp.SystemPromptLen > maxIPerfSegment || sp.QuestionLen > maxIPerfSegment {
			return nil, &InputError{File: cfg.File, Field: "data.shared_prefix", Msg: "invalid sizes"}
		}
		r.perGroup, r.outN = per, sp.OutputLen
		r.sysLen, r.qLen = r.inflate(sp.SystemPromptLen), r.inflate(sp.QuestionLen)
		r.pool = make([]int32, groups*per)
		for i := range r.pool {
			r.pool[i] = int32(i)
		}
		prng := rand.New(rand.NewPCG(seed, 0x69706572665f706f)) // "iperf_po"
		prng.Shuffle(len(r.pool), func(i, j int) { r.pool[i], r.pool[j] = r.pool[j], r.pool[i] })
		longest, segment = r.sysLen+r.qLen, max(r.sysLen, r.qLen)
	case "random", "synthetic":
		lrng := rand.New(rand.NewPCG(seed, 0x69706572665f6c65)) // "iperf_le"
		if r.inLens, err = iperfLengths(&d.Input, lrng); err == nil {
			r.outLens, err = iperfLengths(&d.Output, lrng)
		}
		if err != nil {
			return nil, &InputError{File: cfg.File, Field: "data", Msg: err.Error()}
		}
		for _, st := range cfg.Load.Stages {
			if st.Requests() > len(r.inLens) || st.Requests() > len(r.outLens) {
				return nil, &InputError{File: cfg.File, Line: st.Line, Field: "data.input_distribution.total_count",
					Msg: "fewer lengths than the requests of a stage"}
			}
		}
		for _, n := range r.inLens {
			longest = max(longest, int(n))
		}
		if d.Type == "random" {
			longest = r.inflate(longest)
		}
		segment = longest
	default:
		return nil, &InputError{File: cfg.File, Field: "data.type", Msg: fmt.Sprintf("%q is not generated by eppsim", d.Type)}
	}
	if segment > maxIPerfSegment {
		return nil, &InputError{File: cfg.File, Field: "data", Msg: fmt.Sprintf("a text segment of %d tokens (after token inflation) exceeds the limit of %d", segment, maxIPerfSegment)}
	}
	if r.enc != nil {
		longest += 10 // the chat template
	}
	if longest > o.MaxPromptTokens {
		return nil, &InputError{File: cfg.File, Field: "data", Msg: fmt.Sprintf("prompts of %d tokens exceed the limit of %d", longest, o.MaxPromptTokens)}
	}
	r.sched.reset(cfg.Load, cfg.Load.Stages[0], 0, o.InferencePerf.EvenArrivals)
	return r, nil
}

// iperfLengths draws a distribution's total_count lengths as inference-perf
// does: normal (the default) with mean and std_dev, lognormal shifted so
// that min maps to 0, uniform on [min, max] — each clipped to [min, max]
// and rounded half to even — or fixed int(mean).
func iperfLengths(d *InferencePerfDistribution, rng *rand.Rand) ([]int32, error) {
	if d.TotalCount < 1 || d.TotalCount > maxIPerfCount || d.Min > d.Max || d.Max > maxIPerfSegment || d.Min < 0 {
		return nil, fmt.Errorf("invalid distribution %+v", *d)
	}
	out := make([]int32, d.TotalCount)
	lo, hi := float64(d.Min), float64(d.Max)
	var mu, sigma float64
	if d.Type == "lognormal" {
		m := d.Mean - lo
		if m <= 0 {
			m = 1
		}
		s2 := math.Log(1 + (d.StdDev/m)*(d.StdDev/m))
		mu, sigma = math.Log(m)-s2/2, math.Sqrt(s2)
	}
	for i := range out {
		var v float64
		switch d.Type {
		case "fixed":
			out[i] = int32(min(max(math.Trunc(d.Mean), 0), maxIPerfSegment))
			continue
		case "uniform":
			v = lo + (hi-lo)*rng.Float64()
		case "lognormal":
			v = math.Exp(mu+sigma*rng.NormFloat64()) + lo
		default:
			v = d.Mean + d.StdDev*rng.NormFloat64()
		}
		out[i] = int32(min(max(math.RoundToEven(min(max(v, lo), hi)), lo), hi))
	}
	return out, nil
}

// iperfSchedule draws the arrival times of one stage, as inference-perf's
// load timers do:
//
//   - constant: N = int(rate × duration) arrivals, the gaps exponential
//     draws normalized so that they sum to the duration — the last arrival
//     is exactly at the stage's end, the others are N-1 uniform order
//     statistics (drawn one by one, in order, in O(1) memory). With
//     EvenArrivals the k-th arrival is at duration × k/N instead.
//   - poisson: second by second, a Poisson(rate) count of arrivals spread
//     over that second in the same normalized way (empty seconds are
//     skipped); the stage ends after its N arrivals.
type iperfSchedule struct {
	poisson, even bool
	rate          float64
	next1s        float64 // poisson: start of the next one-second window
	// The current window: n arrivals over [start, start+span], k drawn.
	start, span float64
	n, k        int
	x           float64 // position of the k-th arrival in [0, 1]
}

func (s *iperfSchedule) reset(l InferencePerfLoad, st InferencePerfStage, start float64, even bool) {
	*s = iperfSchedule{poisson: l.Type == "poisson", rate: st.Rate, next1s: start}
	if !s.poisson {
		s.even, s.start, s.span, s.n = even, start, float64(st.Duration), st.Requests()
	}
}

// next returns the next arrival time (s).
func (s *iperfSchedule) next(rng *rand.Rand) float64 {
	if s.k == s.n { // poisson: open the next non-empty second
		skip, c := poissonWindow(rng, s.rate)
		s.start, s.span, s.n, s.k, s.x = s.next1s+float64(skip), 1, c, 0, 0
		s.next1s = s.start + 1
	}
	s.k++
	switch {
	case s.k == s.n:
		return s.start + s.span
	case s.even:
		return s.start + s.span*float64(s.k)/float64(s.n)
	}
	// The smallest of the n-k uniforms left on (x, 1).
	u := 1 - rng.Float64()
	s.x += (1 - s.x) * -math.Expm1(math.Log(u)/float64(s.n-s.k))
	return s.start + s.span*s.x
}

// poissonWindow returns how many one-second windows to skip because they
// receive no arrival, and the Poisson(lambda) count of the next window,
// which is at least 1.
func poissonWindow(rng *rand.Rand, lambda float64) (skip int64, count int) {
	if lambda >= 16 {
		for {
			if c := poisson(rng, lambda); c > 0 {
				return skip, c
			}
			skip++
		}
	}
	// Empty windows before a non-empty one are geometric: P(skip >= k) =
	// e^(-lambda k). The count given count >= 1 comes by inversion.
	skip = int64(math.Floor(math.Log(1-rng.Float64()) / -lambda))
	p := math.Exp(-lambda) * lambda // P(1)
	u := rng.Float64() * -math.Expm1(-lambda)
	count, cum := 1, p
	for cum < u && count < 1000 {
		count++
		p *= lambda / float64(count)
		cum += p
	}
	return skip, count
}

// poisson draws a Poisson(lambda) count: Knuth's product of uniforms, on
// chunks of at most 16 so that e^(-chunk) stays far from underflow.
func poisson(rng *rand.Rand, lambda float64) int {
	n := 0
	for lambda > 0 {
		l := min(lambda, 16)
		lambda -= l
		limit, prod := math.Exp(-l), rng.Float64()
		for prod > limit {
			n++
			prod *= rng.Float64()
		}
	}
	return n
}

// stages lists the config's load stages as they are written (Stream.Stages
// applies the time scale).
func (r *iperfReader) stages() []StagePlan {
	out := make([]StagePlan, len(r.cfg.Load.Stages))
	for i, st := range r.cfg.Load.Stages {
		out[i] = StagePlan{Rate: st.Rate, Duration: float64(st.Duration), Requests: st.Requests()}
	}
	return out
}

func (r *iperfReader) next() (*Request, error) {
	stages := r.cfg.Load.Stages
	if r.stage == len(stages) {
		return nil, io.EOF
	}
	if r.n == stages[r.stage].Requests() {
		r.stage++
		r.n = 0
		if r.stage == len(stages) {
			return nil, io.EOF
		}
		// inference-perf waits for the stage's requests to complete, then
		// load.interval, then schedules the next stage 1 s ahead.
		r.stageStart = r.last + r.cfg.Load.Interval + 1
		r.sched.reset(r.cfg.Load, stages[r.stage], r.stageStart, r.opt.InferencePerf.EvenArrivals)
	}
	t := r.sched.next(r.rng)
	r.last = t
	req := &Request{
		ID: r.nextID, Prev: -1, Arrival: int64(math.Round(t * 1e9)), Model: r.model,
		Endpoint: r.endpoint, Stage: r.stage, StageStart: int64(math.Round(r.stageStart * 1e9)), Headers: r.cfg.Headers,
	}
	n := r.n
	r.n++
	r.nextID++
	var in int
	switch r.cfg.Data.Type {
	case "shared_prefix":
		req.OutputTokens = r.outN
		in = r.sysLen + r.qLen
	default:
		req.OutputTokens = int(r.outLens[n])
		in = int(r.inLens[n])
		if r.cfg.Data.Type == "random" {
			in = r.inflate(in)
		}
	}
	req.PromptTokens, req.Body = r.prompt(req.ID, n, in, req.OutputTokens)
	req.PromptLen = len(req.PromptTokens)
	return req, nil
}

// prompt builds the prompt tokens and body of request id, the n-th of its
// stage, with in content tokens.
func (r *iperfReader) prompt(id int64, n, in, maxTokens int) ([]uint32, []byte) {
	toks := make([]uint32, 0, in+16)
	if r.enc != nil {
		toks = append(toks, TokBeginOfText)
		toks, _ = r.enc.appendHeader(toks, "user") // a known role: cannot fail
	}
	body := make([]byte, 0, int(float64(in)*(r.synth.lex.bytesPerToken+0.25))+len(r.modelJSON)+160)
	body = append(body, `{"model":`...)
	body = append(body, r.modelJSON...)
	if r.enc != nil {
		body = append(body, `,"messages":[{"role":"user","content":"`...)
	} else {
		body = append(body, `,"prompt":"`...)
	}
	switch r.cfg.Data.Type {
	case "shared_prefix":
		p := uint64(r.pool[n%len(r.pool)])
		toks, body = r.segment(toks, body, iperfSystem, p/uint64(r.perGroup), r.sysLen)
		toks, body = r.segment(toks, body, iperfQuestion, p, r.qLen)
	case "random":
		toks, body = r.segment(toks, body, iperfRandom, uint64(id), in)
	default:
		toks, body = r.segment(toks, body, iperfCorpus, 0, in)
	}
	if r.enc != nil {
		toks = append(toks, TokEOT)
		toks, _ = r.enc.appendHeader(toks, "assistant")
		body = append(body, `"}]`...)
	} else {
		body = append(body, '"')
	}
	body = append(body, `,"max_tokens":`...)
	body = strconv.AppendInt(body, int64(maxTokens), 10)
	body = append(body, `,"ignore_eos":`...)
	body = strconv.AppendBool(body, r.cfg.Server.IgnoreEOS)
	body = append(body, `,"stream":`...)
	body = strconv.AppendBool(body, r.cfg.API.Streaming)
	if r.cfg.API.Streaming {
		body = append(body, `,"stream_options":{"include_usage":true}`...)
	}
	return toks, append(body, '}')
}

// segment appends n tokens of the text segment (kind, index) and its words.
func (r *iperfReader) segment(toks []uint32, body []byte, kind, index uint64, n int) ([]uint32, []byte) {
	for c := 0; c*iperfChunk < n; c++ {
		h := uint64(iperfBase) | kind<<43 | index<<8 | uint64(c)
		toks, body = r.synth.appendBlock(toks, body, true, h, 0, min(iperfChunk, n-c*iperfChunk))
	}
	return toks, body
}
