package epp

import (
	"errors"
	"fmt"
	"net/http"
)

// Request identity headers (flow-control.md §2). Header keys are lower-case,
// as Request.Headers holds them.
const (
	ObjectiveHeader       = "x-llm-d-inference-objective"
	ObjectiveHeaderAlias  = "x-gateway-inference-objective"
	FairnessHeader        = "x-llm-d-inference-fairness-id"
	FairnessHeaderAlias   = "x-gateway-inference-fairness-id"
	DroppedReasonHeader   = "x-llm-d-request-dropped-reason"
	SLOTTFTHeader         = "x-llm-d-slo-ttft-ms"
	SLOTTFTHeaderAlias    = "x-slo-ttft-ms"
	SLOTPOTHeader         = "x-llm-d-slo-tpot-ms"
	SLOTPOTHeaderAlias    = "x-slo-tpot-ms"
	DataParallelHeader    = "x-data-parallel-host-port"
	DefaultFairnessID     = "default-flow"
	legacySaturatedReason = "system saturated, sheddable request dropped"
)

// Objective is an InferenceObjective as the EPP's reconciler sees it
// (flow-control.md §2): its metadata.name and spec.priority (nil: none).
type Objective struct {
	Name     string
	Priority *int
}

// Causes of the requests the EPP answers itself (RequestError.Cause): the
// short labels reports count rejections by.
const (
	CauseBadRequest      = "bad-request"       // HTTP 400 from a request parser (epp.md §2.1 step 0)
	CauseLegacySaturated = "legacy-saturated"  // the legacy gate shed a sheddable request (flow-control.md §4)
	CauseFCCapacity      = "fc-capacity"       // flow control: queue at capacity (§6.2)
	CauseFCTTL           = "fc-ttl-expired"    // flow control: timed out in queue (§6.4)
	CauseFCNoEndpoints   = "fc-no-endpoints"   // flow control: no endpoints (§6.2, §6.4)
	CauseFCOther         = "fc-other"          // flow control: any other outcome (§7)
	CauseAdmitDenied     = "admit-denied"      // an Admit plugin denied the request (§13)
	CauseEvicted         = "evicted"           // in-flight eviction (§12)
	CauseNoEndpoints     = "no-endpoints"      // after dispatch: no candidates or the filters removed all (§7)
	CauseSchedulingError = "scheduling-failed" // the scheduler failed otherwise
)

// RequestError is a request the EPP answers itself instead of routing it,
// with the HTTP status and x-llm-d-request-dropped-reason upstream sends
// (flow-control.md §7). Its message is the same for every request of one
// cause, so that reports can count them.
type RequestError struct {
	Status int // HTTP status: 400, 429, 500 or 503
	// DroppedReason is the x-llm-d-request-dropped-reason header ("" when
	// upstream sends none).
	DroppedReason string
	// Cause is one of the Cause* labels.
	Cause string
	// Msg is the start of upstream's message (§7 table).
	Msg string
	Err error
}

func (e *RequestError) Error() string {
	s := e.Msg
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	if e.DroppedReason != "" {
		return fmt.Sprintf("%s (HTTP %d, %s)", s, e.Status, e.DroppedReason)
	}
	return fmt.Sprintf("%s (HTTP %d)", s, e.Status)
}

func (e *RequestError) Unwrap() error { return e.Err }

// HTTPStatus returns the HTTP status and cause of an error the EPP
// answers a request with: a *RequestError's own, 400 for a parser's
// rejection, 429 (ResourceExhausted, epp.md §2.3) when the filters left no
// endpoint, 500 otherwise.
func HTTPStatus(err error) (status int, cause string) {
	var re *RequestError
	switch {
	case err == nil:
		return 0, ""
	case errors.As(err, &re):
		return re.Status, re.Cause
	case errors.Is(err, ErrBadRequest):
		return http.StatusBadRequest, CauseBadRequest
	case errors.Is(err, ErrNoEndpoints):
		return http.StatusTooManyRequests, CauseNoEndpoints
	}
	return http.StatusInternalServerError, CauseSchedulingError
}

// Admitter is an Admit plugin (flow-control.md §13): director step 9 runs
// every Admitter after the data producers, in configuration order; the
// first denial (a non-nil error) rejects the request with HTTP 500.
type Admitter interface {
	Plugin
	Admit(c *Cycle, req *Request, eps []*Endpoint) error
}

// SaturationDetector is a plugin usable as flowControl.saturationDetector
// (epp.md §7.3, flow-control.md §11): Saturation returns the saturation of
// eps at simulated time now (≥ 1 means saturated; 1 for an empty list).
type SaturationDetector interface {
	Plugin
	Saturation(eps []*Endpoint, now int64) float64
}

// SaturationHorizon is implemented by detectors whose value can change with
// time alone (the utilization detector's staleness): NextChange returns the
// earliest time after now at which Saturation(eps, t) may differ from
// Saturation(eps, now) with no other input changing, or -1.
type SaturationHorizon interface {
	NextChange(eps []*Endpoint, now int64) int64
}

// LiveAttributes is implemented by producers that keep live per-endpoint
// state (inflight-load-producer's counters): PutLive attaches it to eps the
// way upstream's datastore endpoints carry it, for readers outside a
// scheduling cycle (the admission layer's saturation detector).
type LiveAttributes interface {
	PutLive(eps []*Endpoint)
}

// FlowControl is the flow-control admission layer (flow-control.md §5–§12)
// as the simulator drives it: a state machine whose timers (the 1 ms
// dispatch grid, the 1 s expiry sweep) the simulator runs as events.
type FlowControl interface {
	// Enqueue runs EnqueueAndWait's enqueue for req at now and the
	// dispatch cycle that always follows it (§6.1, §6.2).
	Enqueue(now int64, req *Request) FlowStep
	// Cycle runs the dispatch cycle of the grid point now (§6.3).
	Cycle(now int64) FlowStep
	// Sweep runs the expiry sweep of the grid point now (§6.4).
	Sweep(now int64) []FlowDone
	// Observe is called before any input of the saturation detector
	// changes at now (a scrape, a response, an end of stream): grid cycles
	// before now that were not run are accounted with the old inputs.
	Observe(now int64)
	// NextCycle is the earliest grid point ≥ now whose cycle can change
	// anything unless an input changes first (-1: none).
	NextCycle(now int64) int64
	// NextSweep is the first sweep grid point at which a queued request
	// can expire (-1: none).
	NextSweep() int64
	// Queued is the number of queued requests.
	Queued() int
	// Track and Untrack feed in-flight eviction (§12): a dispatched request
	// after its PreRequest hooks, and its end of stream.
	Track(now int64, req *Request, res *Result)
	Untrack(now int64, req *Request)
	// SetDesiredPriorities provisions the bands of the InferenceObjectives'
	// priorities (§3.3).
	SetDesiredPriorities(priorities []int)
	// SetPool gives the controller the candidate lookup (§6.3 step 1).
	SetPool(pool func(now int64) []*Endpoint)
}

// FlowStep is what one enqueue or dispatch cycle did.
type FlowStep struct {
	// Rejected is the enqueued request's rejection (a *RequestError), nil
	// when it was queued. Always nil for Cycle.
	Rejected error
	// Dispatched is the request the cycle released, nil when none.
	Dispatched *Request
	// Evicted are in-flight requests the cycle revoked (§12).
	Evicted []*Request
}

// FlowDone is a queued request flow control finalized without
// dispatching it, with its *RequestError.
type FlowDone struct {
	Req *Request
	Err error
}

// Identify resolves the request's objective, priority and fairness ID from
// its headers (flow-control.md §2, director steps 2–3): the objective is
// x-llm-d-inference-objective, else its alias (the first present wins,
// even if empty); its priority is that InferenceObjective's (0 when
// unknown or unset); the fairness ID is x-llm-d-inference-fairness-id,
// else its alias, else default-flow when empty or absent.
func (r *Router) Identify(req *Request) {
	obj, ok := req.Headers[ObjectiveHeader]
	if !ok {
		obj = req.Headers[ObjectiveHeaderAlias]
	}
	req.Objective = obj
	req.Priority = 0
	if p, ok := r.Objectives[obj]; ok && p != nil {
		req.Priority = *p
	}
	fid, ok := req.Headers[FairnessHeader]
	if !ok {
		fid = req.Headers[FairnessHeaderAlias]
	}
	if fid == "" {
		fid = DefaultFairnessID
	}
	req.FairnessID = fid
}

// SetObjectives installs the InferenceObjectives (name → priority) and
// provisions flow control's desired bands from their non-nil priorities
// (flow-control.md §2, §3.3).
func (r *Router) SetObjectives(objs []Objective) {
	r.Objectives = map[string]*int{}
	var prios []int
	for _, o := range objs {
		r.Objectives[o.Name] = o.Priority
		if o.Priority != nil {
			prios = append(prios, *o.Priority)
		}
	}
	if r.Flow != nil {
		r.Flow.SetDesiredPriorities(prios)
	}
}

// LivePool returns every endpoint with its last scrape and the live
// attributes of LiveAttributes producers: the datastore's view that the
// admission layer reads (flow-control.md §4, §6.3).
func (r *Router) LivePool(_ int64) []*Endpoint {
	eps := r.Candidates()
	for _, p := range r.Producers {
		if l, ok := p.(LiveAttributes); ok {
			l.PutLive(eps)
		}
	}
	return eps
}

// LegacyAdmit is the legacy admission controller (flow-control.md §4),
// director step 4 with the flowControl gate off: a request of priority ≥ 0
// is admitted; a sheddable one (priority < 0) is rejected with HTTP 429
// when the saturation detector puts every endpoint at ≥ 1.
func (r *Router) LegacyAdmit(now int64, req *Request) error {
	if req.Priority >= 0 || r.Detector == nil {
		return nil
	}
	if s := r.Detector.Saturation(r.LivePool(now), now); s >= 1.0 {
		return &RequestError{Status: http.StatusTooManyRequests, Cause: CauseLegacySaturated, Msg: legacySaturatedReason}
	}
	return nil
}

// Admit runs the admission controller of director step 4: flow control's
// enqueue when the flowControl gate is on (its FlowStep), else the legacy
// gate (its rejection as FlowStep.Rejected, or the request itself as
// Dispatched).
func (r *Router) Admit(now int64, req *Request) FlowStep {
	if r.Flow != nil {
		return r.Flow.Enqueue(now, req)
	}
	if err := r.LegacyAdmit(now, req); err != nil {
		return FlowStep{Rejected: err}
	}
	return FlowStep{Dispatched: req}
}

// EvictedError is the answer to an in-flight request flow control revoked
// (flow-control.md §7, §12): HTTP 429, dropped reason "evicted", body
// exactly "request evicted by flow control".
func EvictedError() error {
	return &RequestError{Status: http.StatusTooManyRequests, DroppedReason: "evicted", Cause: CauseEvicted, Msg: "request evicted by flow control"}
}
