package epp

import (
	"errors"
	"fmt"
	"net/http"
)

// WeightedScorer is a scorer reference in a profile with its weight.
type WeightedScorer struct {
	Scorer
	Weight float64
}

// Profile is one scheduling profile: filters, weighted scorers and a picker,
// in configuration order (spec §2.3).
type Profile struct {
	Name    string
	Filters []Filter
	Scorers []WeightedScorer
	Picker  Picker
}

// ErrNoEndpoints is returned when a profile's filters leave no candidate
// (spec §2.3: ResourceExhausted, "no endpoints available").
var ErrNoEndpoints = errors.New("no endpoints available")

// ErrBadRequest matches (errors.Is) every *BadRequestError.
var ErrBadRequest = errors.New("bad request")

// BadRequestError is a request whose parser rejected its body: upstream
// answers HTTP 400 before the director runs, so the request is never
// admitted, scheduled, counted or indexed (spec §2.1 step 0).
type BadRequestError struct {
	Parser string // the parser's name
	Err    error
}

func (e *BadRequestError) Error() string {
	return fmt.Sprintf("bad request (HTTP 400 from %s): %v", e.Parser, e.Err)
}

func (e *BadRequestError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrBadRequest) true.
func (e *BadRequestError) Is(target error) bool { return target == ErrBadRequest }

// Run executes one profile on the candidates (spec §2.3). When trace is
// non-nil it is filled with every intermediate value.
func (p *Profile) Run(c *Cycle, req *Request, candidates []*Endpoint, trace *ProfileTrace) (*ProfileResult, error) {
	eps := candidates
	for _, f := range p.Filters {
		eps = f.Filter(c, req, eps)
		if trace != nil {
			trace.Filters = append(trace.Filters, FilterTrace{Filter: f.Name(), Survivors: Names(eps)})
		}
		if len(eps) == 0 {
			return nil, fmt.Errorf("profile %q: filter %q: %w", p.Name, f.Name(), ErrNoEndpoints)
		}
	}
	totals := make([]float64, len(eps))
	raw := make([]float64, len(eps))
	for _, s := range p.Scorers {
		clear(raw)
		s.Score(c, req, eps, raw)
		for i, v := range raw {
			// Per-scorer clamp to [0,1], then weight; the sum is not
			// normalised by the total weight (spec §2.3).
			totals[i] += min(max(v, 0), 1) * s.Weight
		}
		if trace != nil {
			trace.Scorers = append(trace.Scorers, ScorerTrace{Scorer: s.Name(), Weight: s.Weight, Raw: append([]float64(nil), raw...)})
		}
	}
	// Upstream builds this list by iterating a Go map (random order); eppsim
	// keeps candidate order and leaves tie-breaking to the picker's seeded
	// stream (spec §13).
	scored := make([]ScoredEndpoint, len(eps))
	for i, e := range eps {
		scored[i] = ScoredEndpoint{Endpoint: e, Score: totals[i]}
	}
	if trace != nil {
		trace.Profile = p.Name
		trace.Candidates = Names(eps)
		trace.Totals = append([]float64(nil), totals...)
	}
	targets := p.Picker.Pick(c, req, scored)
	if len(targets) == 0 {
		return nil, fmt.Errorf("profile %q: picker %q: %w", p.Name, p.Picker.Name(), ErrNoEndpoints)
	}
	if trace != nil {
		trace.Picked = Names(targets)
		best := targets[0]
		var top float64
		for i, e := range eps {
			if e == best {
				top = totals[i]
			}
		}
		for i, e := range eps {
			if e != best && totals[i] == top {
				trace.Tied = true
				break
			}
		}
	}
	return &ProfileResult{Targets: targets, Trace: trace}, nil
}

// Router is an assembled EPP: data producers in dependency order, the
// scheduling profiles and their handler, and the hooks that run around
// routing. It keeps the endpoint set and the last scraped metrics.
// A Router is not safe for concurrent use; the simulator drives it from one
// goroutine.
type Router struct {
	// Parsers are the request parsers in requestHandler.parsers order
	// (spec §2.1 step 0); none means bodies are not checked.
	Parsers   []RequestParser
	Producers []DataProducer // in execution order (spec §1.3 step 7)
	Profiles  []*Profile
	Handler   ProfileHandler
	// PreRequest and Response hooks in registration order (spec §2.1 step 12).
	PreRequest []PreRequestHook
	Response   []ResponseHook
	// KVConsumers receive replica KV events.
	KVConsumers []KVEventConsumer
	// Record makes Schedule fill ProfileResult.Trace.
	Record bool
	// Admitters are the Admit plugins in configuration order (director
	// step 9, flow-control.md §13).
	Admitters []Admitter
	// Detector is flowControl.saturationDetector: the legacy gate's, and
	// flow control's (flow-control.md §4, §6.3).
	Detector SaturationDetector
	// Flow is the flow-control layer when the flowControl feature gate is
	// on; nil means the legacy gate (flow-control.md §1).
	Flow FlowControl
	// Objectives maps InferenceObjective names to their priorities
	// (SetObjectives; flow-control.md §2).
	Objectives map[string]*int
	// OnDecide, when set, is called right before the scheduler decides
	// (after the producers and Admit plugins): the simulator measures the
	// replicas' caches at that instant.
	OnDecide func(c *Cycle, req *Request)
	// GPUPolls are the configured dcgm-data-sources that feed a
	// dcgm-extractor (gpu.go): the simulator runs their exporters and
	// polls and stores GPUUtilizationKey (SetAttribute). Empty when the
	// configuration has no such pair.
	GPUPolls []GPUPoll

	endpoints []*EndpointInfo
	metrics   []Metrics
	// attrs are the data-layer attributes of each endpoint (SetAttribute),
	// copied into every candidate.
	attrs []attributes
	index map[string]int
}

// AddEndpoint registers a model-server pod. Candidate order is registration
// order.
func (r *Router) AddEndpoint(info EndpointInfo) {
	if r.index == nil {
		r.index = map[string]int{}
	}
	ei := info
	r.index[info.Name] = len(r.endpoints)
	r.endpoints = append(r.endpoints, &ei)
	r.metrics = append(r.metrics, Metrics{})
	r.attrs = append(r.attrs, nil)
}

// Endpoints returns the registered endpoints in order.
func (r *Router) Endpoints() []*EndpointInfo { return r.endpoints }

// UpdateMetrics stores a scrape of the named endpoint (spec §7.1: each
// successful extraction replaces the endpoint's metrics).
func (r *Router) UpdateMetrics(name string, m Metrics) error {
	i, ok := r.index[name]
	if !ok {
		return fmt.Errorf("epp: unknown endpoint %q", name)
	}
	r.metrics[i] = m
	return nil
}

// MetricsOf returns the last scrape of the named endpoint.
func (r *Router) MetricsOf(name string) (Metrics, bool) {
	i, ok := r.index[name]
	if !ok {
		return Metrics{}, false
	}
	return r.metrics[i], true
}

// Candidates returns a fresh per-request snapshot of every endpoint (spec
// §2.1 steps 5–6): identity, last scrape and data-layer attributes (a copy,
// so what a cycle's producers Put stays with the cycle).
func (r *Router) Candidates() []*Endpoint {
	eps := make([]*Endpoint, len(r.endpoints))
	for i, info := range r.endpoints {
		eps[i] = &Endpoint{EndpointInfo: info, Metrics: r.metrics[i]}
		if a := r.attrs[i]; len(a) > 0 {
			eps[i].attrs = append(make(attributes, 0, len(a)+2), a...)
		}
	}
	return eps
}

// Parse runs the request parser that handles req (spec §2.1 step 0): of
// the parsers claiming it, the one with the longest claimed suffix
// (SuffixClaimer; the first configured on a tie), else the first fallback
// parser. A parser's error comes back as a *BadRequestError. With no parser
// for req (none configured, or none claims it and there is no fallback)
// the body is not checked.
func (r *Router) Parse(req *Request) error {
	if req.parsed {
		return nil
	}
	err := r.parse(req)
	req.parsed = err == nil
	return err
}

func (r *Router) parse(req *Request) error {
	var fallback, best RequestParser
	bestLen := -1
	for _, p := range r.Parsers {
		switch p.Claim(req) {
		case ClaimPath:
			n := 0
			if sc, ok := p.(SuffixClaimer); ok {
				n = sc.ClaimedSuffixLen(req)
			}
			if n > bestLen {
				best, bestLen = p, n
			}
		case ClaimFallback:
			if fallback == nil {
				fallback = p
			}
		}
	}
	if best != nil {
		return parseWith(best, req)
	}
	if fallback != nil {
		return parseWith(fallback, req)
	}
	return nil
}

func parseWith(p RequestParser, req *Request) error {
	if err := p.ParseRequest(req); err != nil {
		return &BadRequestError{Parser: p.Name(), Err: err}
	}
	return nil
}

// A Preparer is a plugin that can compute ahead of routing, into
// req.Memo, what it derives from the request alone (Router.Prepare). It
// must not change the plugin's state: it may run on another goroutine
// than the router's, on a router that never routes.
type Preparer interface {
	Prepare(req *Request)
}

// Prepare computes ahead what routing req derives from its body alone
// (the request parser's check, then each Preparer producer's part, in
// producer order) into req.Memo, so that the routers of every simulation
// that replays req find it there. It changes no router state; a request
// without a Memo, or one its parser rejects, is left alone.
func (r *Router) Prepare(req *Request) {
	if req.Memo == nil || r.Parse(req) != nil {
		return
	}
	for _, p := range r.Producers {
		if pp, ok := p.(Preparer); ok {
			pp.Prepare(req)
		}
	}
}

// Schedule routes one request: body parsing, data producers, the
// scheduling loop and the PreRequest hooks (spec §2.1 steps 0, 5–12).
func (r *Router) Schedule(c *Cycle, req *Request) (*Result, error) {
	return r.ScheduleOn(c, req, r.Candidates())
}

// ScheduleOn is Schedule on an explicit candidate snapshot. A body its
// parser rejects returns the *BadRequestError before any plugin runs (a
// request Parse accepted before is not parsed again). When a data
// producer makes the request wait (a *WaitError, e.g. a burst window), the
// cycle is suspended and ScheduleOn returns that error: Resume continues
// it at the time the error names.
func (r *Router) ScheduleOn(c *Cycle, req *Request, candidates []*Endpoint) (*Result, error) {
	if err := r.Parse(req); err != nil {
		return nil, err
	}
	if len(candidates) == 0 {
		return nil, &RequestError{Status: http.StatusServiceUnavailable, DroppedReason: "rejected-no-endpoints", Cause: CauseNoEndpoints,
			Msg: "no endpoints available"}
	}
	return r.run(c, req, candidates, 0)
}

// Resume continues a scheduling cycle that a data producer suspended
// (ScheduleOn returned a *WaitError), at c.Now ≥ the time it named.
func (r *Router) Resume(c *Cycle, req *Request) (*Result, error) {
	p := req.pending
	if p == nil {
		return nil, fmt.Errorf("request %s: no suspended scheduling cycle to resume", req.ID)
	}
	req.pending = nil
	return r.run(c, req, p.candidates, p.next)
}

// Waiter is implemented by data producers that can make a request wait
// (a *WaitError from Produce).
type Waiter interface {
	MayWait() bool
}

// MayWait reports whether a data producer can suspend scheduling cycles.
func (r *Router) MayWait() bool {
	for _, p := range r.Producers {
		if w, ok := p.(Waiter); ok && w.MayWait() {
			return true
		}
	}
	return false
}

// pending is a scheduling cycle suspended at producer next.
type pending struct {
	candidates []*Endpoint
	next       int
}

// WaitError is returned by a data producer whose output is ready only at
// Until (simulated ns, > the call's time): the director waits for it
// (flow-control.md §14.1, the burst window). The producer is called again
// at Until and then writes its output.
type WaitError struct {
	Until int64
}

func (e *WaitError) Error() string {
	return fmt.Sprintf("waiting for a data producer until %d ns", e.Until)
}

// run is director steps 8–12 from producer from on.
func (r *Router) run(c *Cycle, req *Request, candidates []*Endpoint, from int) (*Result, error) {
	for i := from; i < len(r.Producers); i++ {
		// Upstream logs producer errors and carries on (spec §2.1 step 8).
		if err := r.Producers[i].Produce(c, req, candidates); err != nil {
			var w *WaitError
			if errors.As(err, &w) && w.Until > c.Now {
				req.pending = &pending{candidates: candidates, next: i}
				return nil, err
			}
		}
	}
	// Step 9: Admit plugins; the first denial wins (flow-control.md §1, §13).
	for _, a := range r.Admitters {
		if err := a.Admit(c, req, candidates); err != nil {
			return nil, &RequestError{Status: http.StatusInternalServerError, Cause: CauseAdmitDenied,
				Msg: "request cannot be admitted", Err: fmt.Errorf("%s: %w", a.Name(), err)}
		}
	}
	if r.OnDecide != nil {
		r.OnDecide(c, req)
	}
	res, err := r.schedule(c, req, candidates)
	if err != nil {
		return nil, fmt.Errorf("request %s: %w", req.ID, err)
	}
	for _, h := range r.PreRequest {
		h.PreRequest(c, req, res)
	}
	if r.Flow != nil {
		r.Flow.Track(c.Now, req, res)
	}
	return res, nil
}

// schedule is the scheduler loop of spec §2.2.
func (r *Router) schedule(c *Cycle, req *Request, candidates []*Endpoint) (*Result, error) {
	results := map[string]*ProfileResult{}
	ran := map[string]bool{}
	for {
		names := r.Handler.PickProfiles(c, req, r.Profiles, results)
		if len(names) == 0 {
			break
		}
		progressed := false
		for _, name := range names {
			if ran[name] {
				continue
			}
			p := r.profile(name)
			if p == nil {
				return nil, fmt.Errorf("profile handler %q picked unknown profile %q", r.Handler.Name(), name)
			}
			ran[name] = true
			progressed = true
			var trace *ProfileTrace
			if r.Record {
				trace = &ProfileTrace{}
			}
			pr, err := p.Run(c, req, candidates, trace)
			if err != nil {
				// A failed profile records a nil result (spec §2.2); the
				// handler decides whether that is fatal.
				results[name] = nil
				continue
			}
			results[name] = pr
		}
		if !progressed {
			break
		}
	}
	if len(results) == 0 {
		return nil, errors.New("no profile ran")
	}
	return r.Handler.ProcessResults(c, req, results)
}

func (r *Router) profile(name string) *Profile {
	for _, p := range r.Profiles {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// ResponseFirstChunk runs the response hooks for the first body chunk.
func (r *Router) ResponseFirstChunk(c *Cycle, req *Request, res *Result) {
	for _, h := range r.Response {
		h.ResponseFirstChunk(c, req, res)
	}
}

// ResponseComplete runs the response hooks for the end of the stream.
func (r *Router) ResponseComplete(c *Cycle, req *Request, res *Result) {
	for _, h := range r.Response {
		h.ResponseComplete(c, req, res)
	}
	if r.Flow != nil {
		r.Flow.Untrack(c.Now, req)
	}
}

// HandleKVEvents delivers a batch of KV events from the endpoint at address
// to every KV-event consumer.
func (r *Router) HandleKVEvents(c *Cycle, address string, batch []KVEvent) {
	for _, k := range r.KVConsumers {
		k.HandleKVEvents(c, address, batch)
	}
}
