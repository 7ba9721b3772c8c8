package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/eppsim/eppsim/epp"
	"github.com/eppsim/eppsim/internal/memo"
	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/replica/sglang"
	"github.com/eppsim/eppsim/workload"
)

// ReplicaSpec describes one replica of the fleet.
type ReplicaSpec struct {
	// Name is the pod's "namespace/name"; Address its "ip:port".
	Name    string
	Address string
	Labels  map[string]string
	Preset  replica.Preset
}

// Options are the environment of a run.
type Options struct {
	// Seed drives every random choice of the run (EPP tie-breaks, ...).
	Seed uint64
	// ScrapeInterval is the EPP's metrics refresh period
	// (--refresh-metrics-interval, default 50 ms, spec epp.md §7.1).
	ScrapeInterval int64
	// KVEventLag delays the delivery of replica KV events to the EPP.
	KVEventLag int64
	// EPPLatency and NetworkLatency delay a routed request's arrival at its
	// replica (and so its TTFT).
	EPPLatency     int64
	NetworkLatency int64
	// MaxRequests stops reading the workload after this many requests
	// (0 = all). Duration stops it at this simulated arrival time (0 = none).
	// Requests already injected always run to completion.
	MaxRequests int
	Duration    int64
	// Warmup marks requests arriving before it as warm-up in their records.
	Warmup int64
	// OnRecord receives each request's record when it is final.
	OnRecord func(*Record)
	// SampleInterval > 0 makes the run call OnSample for every replica at
	// each multiple of it while the run is active (for time series).
	SampleInterval int64
	OnSample       func(*Sample)
	// PD are the parameters of the P/D request path (pd-offload.md A.4,
	// A.8, C.4), used when the EPP's profile handler disaggregates; nil
	// means DefaultPD().
	PD *PDOptions
	// Objectives are the InferenceObjectives the EPP knows: a request's
	// objective header names one, whose priority the request gets
	// (flow-control.md §2); their priorities are flow control's bands.
	Objectives []epp.Objective
	// DCGMCollectInterval is every replica's dcgm-exporter collect
	// interval (its --collect-interval, ns; 0 means
	// DefaultDCGMCollectInterval), used when the EPP config has a
	// dcgm-data-source with a dcgm-extractor (gpu.go).
	DCGMCollectInterval int64
	// MaxFleetBytes bounds the fleet's estimated memory (FleetMemory):
	// 0 means DefaultMaxFleetBytes, a negative value no bound. A larger
	// fleet is refused (a *FleetError wrapping a *MemoryError) before any
	// engine is built.
	MaxFleetBytes int64
	// Client, when set, runs inference-perf's load generator between the
	// workload and the EPP (client.go): it decides when each request is
	// sent. nil sends every request at its Arrival.
	Client *workload.ClientPlan
	// Stop, when set, is asked after each final record whether the run
	// may end there (stop.go); a stopped run says so in Result.Stopped.
	Stop StopFunc
	// GatewayMaxRequests > 0 bounds the requests in flight past the
	// gateway (its Envoy circuit breaker on the EPP's ext_proc cluster,
	// gateway.go): a request arriving when that many are open fails at
	// once with HTTP 500. 0 means no limit.
	GatewayMaxRequests int
}

// PDOptions are the costs of the P/D request path outside the engines
// (pd-offload.md A.4, A.8, C.4). Zero is a valid value for every delay
// (C.5: sensitivity runs).
type PDOptions struct {
	// TransferGBps, TransferBaseUs and HandshakeMs are the NIXL read's
	// bandwidth per rank pair, fixed latency and first-contact handshake
	// (replica.KVTransferConfig).
	TransferGBps   float64
	TransferBaseUs float64
	HandshakeMs    float64
	// Hop is one sidecar↔prefill pod hop (ns): the prefill leg's way
	// there and its response's way back. Response is the prefill pod's
	// response serialisation; Notify the decode side's notification that
	// frees the prefill pod's blocks.
	Hop, Response, Notify int64
}

// Defaults of the P/D request path's delays (pd-offload.md C.4, all
// estimates).
const (
	DefaultPDHop      = int64(time.Millisecond)
	DefaultPDResponse = int64(time.Millisecond)
	DefaultPDNotify   = int64(time.Millisecond)
)

// DefaultPD returns the P/D parameters of pd-offload.md C.4: BLIS's NIXL
// bandwidth (25 GB/s) and base latency (0.05 ms), and the estimated 20 ms
// handshake, 1 ms hops, 1 ms response and 1 ms notification.
func DefaultPD() PDOptions {
	return PDOptions{TransferGBps: replica.DefaultPDTransferGBps, TransferBaseUs: replica.DefaultPDTransferBaseUs,
		HandshakeMs: replica.DefaultPDHandshakeMs, Hop: DefaultPDHop, Response: DefaultPDResponse, Notify: DefaultPDNotify}
}

// Validate checks the parameters' ranges.
func (p *PDOptions) Validate() error {
	switch {
	case !(p.TransferGBps > 0) || math.IsInf(p.TransferGBps, 0):
		return fmt.Errorf("P/D transfer bandwidth must be a positive number of GB/s, got %g", p.TransferGBps)
	case !(p.TransferBaseUs >= 0) || math.IsInf(p.TransferBaseUs, 0):
		return fmt.Errorf("P/D transfer base latency must be a number of µs ≥ 0, got %g", p.TransferBaseUs)
	case !(p.HandshakeMs >= 0) || math.IsInf(p.HandshakeMs, 0):
		return fmt.Errorf("P/D handshake must be a number of ms ≥ 0, got %g", p.HandshakeMs)
	case p.Hop < 0 || p.Response < 0 || p.Notify < 0:
		return fmt.Errorf("P/D hop, response and notification delays must not be negative (got %v, %v, %v)",
			time.Duration(p.Hop), time.Duration(p.Response), time.Duration(p.Notify))
	}
	return nil
}

// Sample is one replica's state at one instant.
type Sample struct {
	Time    int64
	Replica int
	Waiting int
	Running int
	KVUsage float64
	// Cumulative prefix-cache counters in tokens (vllm:prefix_cache_*).
	PrefixQueries int64
	PrefixHits    int64
}

// Outcome is how a request ended.
type Outcome string

// Outcomes.
const (
	Completed Outcome = "completed"
	Rejected  Outcome = "rejected"
)

// Record is one request's result.
type Record struct {
	ID      int64
	Session string
	Turn    int
	// Stage is the request's load stage (workload.Request.Stage).
	Stage        int
	Arrival      int64 // when the request reached the EPP (ns)
	Replica      int   // index into the fleet; -1 if not routed
	PromptTokens int
	OutputTokens int
	// CachedTokens is the true reuse on the chosen replica
	// (num_cached_tokens at first scheduling).
	CachedTokens int
	// CPUCachedTokens is the part of CachedTokens loaded from the
	// replica's CPU tier (pd-offload.md B.6); 0 without offloading.
	CPUCachedTokens int
	// OracleCachedTokens is the largest cached prefix over every replica of
	// the fleet at routing time (lag-free), measured at the same instant
	// as RoutedCachedTokens, so OracleCachedTokens >= RoutedCachedTokens
	// for every routed request.
	OracleCachedTokens int
	// InfiniteCachedTokens is the prefix of this prompt that every request
	// routed before it had computed together: what one infinite cache in
	// front of the fleet would reuse (workload.PrefixReuse, the quantity
	// `trace inspect` sums). It bounds what any replica can hold, so
	// InfiniteCachedTokens >= OracleCachedTokens.
	InfiniteCachedTokens int
	// Predicted is the approximate prefix producer's match/total on the
	// chosen replica at routing time; HasPredicted is false when no approx
	// producer is configured. PredictedPrecise likewise for KV events.
	Predicted        float64
	HasPredicted     bool
	PredictedPrecise float64
	HasPrecise       bool
	// PredictedBlocks and PreciseBlocks are the producers' TotalBlocks:
	// one router block is 1/TotalBlocks of the prompt.
	PredictedBlocks int
	PreciseBlocks   int
	// RoutedCachedTokens is the chosen replica's cached prefix at routing
	// time (exact, lag-free); it differs from CachedTokens when the cache
	// changed between routing and first scheduling (the queue effect,
	// CachedTokens - RoutedCachedTokens). 0 when the request was not
	// routed.
	RoutedCachedTokens int
	// Tied is true when the pick shared the top score.
	Tied bool
	// Times (ns): TTFT and E2E from Arrival; Queue from replica arrival to
	// first scheduling. Each includes the non-blocking ingest delay where
	// it applies.
	TTFT, E2E, Queue int64
	FirstToken       int64
	Completion       int64
	Preemptions      int
	Outcome          Outcome
	Reason           string
	Warmup           bool
	// Objective, Priority and FairnessID are the request's identity as the
	// EPP resolved it from its headers (flow-control.md §2).
	Objective  string
	Priority   int
	FairnessID string
	// FlowWait is the time the request spent in the EPP's flow-control
	// queues (dispatch or shedding minus Arrival; 0 with the gate off),
	// ProducerWait the time a data producer held its scheduling cycle (the
	// burst window, flow-control.md §14.1). Both are inside TTFT and E2E,
	// apart from the engine's Queue.
	FlowWait, ProducerWait int64
	// StreamEvents is the number of server-sent events of a completed
	// streamed response as the client model counts them (one per output
	// token, the usage chunk, [DONE]); 0 without the client model
	// (Options.Client) or a stream.
	StreamEvents int
	// HTTPStatus and Cause say how a rejected request was answered: the
	// status the EPP (or, for a request the engine refused, vLLM) sent and
	// a short cause (epp.Cause*, or "engine-rejected"); 0 and "" when the
	// request completed.
	HTTPStatus int
	Cause      string
	// PD is the P/D part of the record, present when the EPP's profile
	// handler decided on disaggregation for the request (pd-offload.md
	// A). For a disaggregated request the prefill pod computed the
	// prompt, so CachedTokens, CPUCachedTokens, RoutedCachedTokens and the
	// predictions refer to it; Replica is the decode pod (the EPP's
	// primary target), TTFT and E2E are what the client sees, and Queue
	// is the prefill leg's queue plus the decode leg's.
	PD *PDRecord
}

// PDRecord is a request's P/D decision and, when disaggregated, its two
// legs and KV transfer (times in ns).
type PDRecord struct {
	Disaggregated bool
	// Reason is the decision's reason (epp.PDReason*); DeciderPromptTokens
	// and DeciderCachedTokens are what the prefill decider read: the
	// prompt's tokens and the cached tokens it believed the decode pick
	// held (pd-offload.md A.3).
	Reason              string
	DeciderPromptTokens int
	DeciderCachedTokens int
	// PrefillReplica is the prefill pod (index into the fleet; -1 for a
	// decode-only request).
	PrefillReplica int
	// PrefillQueue runs from the prefill leg's arrival at the prefill pod
	// to its first scheduling, PrefillTime to its one token (its engine's
	// TTFT).
	PrefillQueue, PrefillTime int64
	// DecodeQueue runs from the decode leg's arrival at the decode pod to
	// its admission (the read's start, or its first scheduling when
	// decode-only); TransferTime is the read (handshake included);
	// PullWait runs from the read's end to the step that promotes the
	// request.
	DecodeQueue, TransferTime, PullWait int64
	// DecodeTime runs from the decode leg's arrival at the decode pod to
	// its first token (that engine's TTFT: the read, or the prefill when
	// decode-only, included).
	DecodeTime int64
	// PulledBlocks and TransferBytes (per rank) are what the read moved;
	// DecodeHitTokens the prompt tokens the decode pod's own cache held
	// at admission; DecodeRoutedTokens the decode pod's cached prefix at
	// routing time.
	PulledBlocks       int
	TransferBytes      int64
	DecodeHitTokens    int
	DecodeRoutedTokens int
}

// Result summarises a run.
type Result struct {
	Injected  int
	Completed int
	Rejected  int
	InFlight  int
	Events    uint64
	SimTime   int64
	Replicas  []ReplicaResult
	// HeldAtEnd counts P/D prefill legs still holding their blocks when
	// the run ended (0 unless a decode leg never read them).
	HeldAtEnd int
	// Stages are the load stages that reached the EPP, in stage order:
	// their arrivals and the scraped gauges over each (StageResult).
	Stages []StageResult
	// Stopped is set when Options.Stop ended the run early (stop.go).
	Stopped *Stopped
	// PeakInFlight is the most requests in flight past the gateway at
	// once, from their arrival to their response's end, with or without a
	// limit (gateway.go); the requests it refused are the records of cause
	// CauseGatewayOverflow.
	PeakInFlight int
}

// ReplicaResult is one replica's end-of-run state.
type ReplicaResult struct {
	Name      string
	Stats     replica.Stats
	Evictions int64
	// Role is the replica's llm-d.ai/role label ("" without one).
	Role string
	// The mean of the replica's scraped gauges over the scrapes of the run
	// (every ScrapeInterval), and the KV usage's peak: KV usage as a share
	// of blocks, waiting and running requests.
	MeanKVUsage, PeakKVUsage, MeanWaiting, MeanRunning float64
}

// event kinds, in the top byte of the event arg.
const (
	evArrival uint64 = iota + 1
	evDeliver
	evStepEnd
	evScrape
	evKV
	evRelease
	evSample
	evWake
	evPrefill // a P/D prefill leg reaches its prefill pod
	evNotify  // a decode pod's notification reaches the prefill pod
	evFlowTick
	evFlowSweep
	evResume    // a data producer's wait ends (burst window)
	evDCGM      // the dcgm-exporters publish (gpu.go)
	evTimeout   // the client model's timeout of a request (client.go)
	evClientEnd // a response's end reaches the client model (client.go)
)

const kindShift = 56

func arg(kind uint64, idx int) uint64 { return kind<<kindShift | uint64(idx) }

type flight struct {
	wr      *workload.Request
	er      *epp.Request
	res     *epp.Result
	rr      *replica.Request
	rec     Record
	replica int
	// prr and prefill are a disaggregated request's prefill leg and pod.
	prr     *replica.Request
	prefill int
	// hashes is the prompt's engine-block chain; cands the candidate
	// snapshot the EPP scheduled on.
	hashes []uint64
	cands  []*epp.Endpoint
	// waitFrom is when a data producer suspended the request's cycle.
	waitFrom int64
	// aborted: flow control evicted the request while it was in flight;
	// pending: a delivery event (evDeliver, evPrefill) names the flight's
	// slot; inEngine: the (decode) leg was added to its engine; notified:
	// the prefill pod was told to free a P/D prefill leg's blocks.
	aborted, pending, inEngine, notified bool
	// gated: the request holds a stream through the gateway's circuit
	// breaker (gateway.go).
	gated bool
}

// release is a prefill leg whose blocks a notification frees.
type release struct {
	replica int
	rr      *replica.Request
}

type kvBatch struct {
	replica int
	batch   []epp.KVEvent
}

type fleetReplica struct {
	spec ReplicaSpec
	eng  engine
	// mover is eng's kvMover, nil for an engine without one (SGLang).
	mover  kvMover
	ingest int64
	perTok int64
	// jitter > 0 draws each request's ingest from jrng (Delays).
	jitter float64
	jrng   *rand.Rand
	inStep bool
	run    *runner
	idx    int
	// wakeAt is the time of the earliest wake-up scheduled for a CPU tier
	// copy or P/D read completing while the engine is idle (0: none).
	wakeAt int64
	// Gauge sums over the scrapes (ReplicaResult).
	kvSum, kvPeak, waitSum, runSum float64
	// busy is the replica's GPU busy time for its dcgm-exporter (used
	// only when runner.gpu is set).
	busy gpuBusy
}

// ingestDelay is one request's non-blocking ingest delay (ns): the mean,
// of which the jitter share is exponentially distributed.
func (f *fleetReplica) ingestDelay() int64 {
	if f.jitter == 0 {
		return f.ingest
	}
	m := float64(f.ingest)
	return int64(m*(1-f.jitter) + m*f.jitter*f.jrng.ExpFloat64())
}

// KVEvents forwards an engine's events to the EPP after the delivery lag.
func (f *fleetReplica) KVEvents(now int64, batch []replica.Event) {
	r := f.run
	var out []epp.KVEvent
	if n := len(r.spareKV); n > 0 {
		out, r.spareKV = r.spareKV[n-1], r.spareKV[:n-1]
	}
	for i := range batch {
		ev := &batch[i]
		out = append(out, epp.KVEvent{Kind: epp.KVEventKind(ev.Kind), BlockHashes: ev.BlockHashes, ParentBlockHash: ev.ParentHash,
			HasParent: ev.HasParent, TokenIDs: ev.TokenIDs, BlockSize: ev.BlockSize, ExtraKeys: ev.ExtraKeys, Medium: ev.Medium,
			Origin: r.tokenOrigin(ev)})
	}
	slot := r.kvSlot(kvBatch{replica: f.idx, batch: out})
	r.at(now+r.opts.KVEventLag, evKV, slot)
}

// tokenOrigin is the epp.TokenOrigin of a replica event whose tokens are a
// request's prompt: the routed request's memo and prompt (the replica's
// request shares the workload request's token array; a nil Memo makes
// it unusable). The zero value when the event has no origin or its request
// is no longer in flight.
func (r *runner) tokenOrigin(ev *replica.Event) epp.TokenOrigin {
	rr := ev.Origin
	if rr == nil {
		return epp.TokenOrigin{}
	}
	slot, ok := r.slotByID[rr.ID]
	if !ok {
		return epp.TokenOrigin{}
	}
	return epp.TokenOrigin{Memo: r.flights[slot].wr.Memo, Prompt: rr.Prompt, Offset: ev.PromptOffset, CacheSalt: rr.CacheSalt}
}

type runner struct {
	loop          Loop
	opts          Options
	router        *epp.Router
	src           workload.Source
	fleet         []*fleetReplica
	byName        map[string]int
	chain         *promptChain
	reuse         *workload.PrefixReuse // the infinite cache of the routed requests
	approx        []epp.DataKey
	precise       []epp.DataKey
	flights       []*flight
	freeF         []int
	slotByID      map[int64]int // in-flight request id -> flights index
	cachedScratch []int
	samples       uint64 // sample events fired
	lastEvent     int64  // time of the last event other than a sample
	kv            []kvBatch
	freeKV        []int
	byAddr        map[string]int // replica index by address (P/D header)
	pd            PDOptions
	releases      []release // pending P/D notifications
	freeRel       []int
	scrapes       int
	stages        stageTracker    // the load stage of the latest arrival, and every stage's gauges
	spareKV       [][]epp.KVEvent // delivered batches' slices, for reuse
	next          *workload.Request
	srcDone       bool // the source is exhausted, failed, or past a limit
	// work counts the scheduled events that can change the simulation
	// (arrivals, deliveries, step ends, releases, KV deliveries): the
	// periodic scrape and sample timers re-arm only while it is positive,
	// so a run whose source ended or failed with nothing in flight ends
	// whatever the timers' state (see active).
	work int
	// done is the run's cancellation channel (nil: never cancelled),
	// polled every cancelPoll events.
	done     <-chan struct{}
	ctx      context.Context
	injected int
	parked   map[int64]*workload.Request // closed-loop turns waiting for Prev
	doneAt   map[int64]int64             // completion time of requests a later turn may follow
	// openLoop: the source replays open-loop (its Mode says so), so no
	// later turn waits for a completion and doneAt stays empty (it would
	// otherwise hold every session request of the run).
	openLoop bool
	res      Result
	err      error
	// Flow control (flow-control.md §16.2): the controller, the times of
	// the scheduled grid cycle and sweep (-1: none), and the flights of
	// the requests queued in the EPP or waiting for a data producer.
	flow            epp.FlowControl
	tickAt, sweepAt int64
	byReq           map[*epp.Request]int
	measureAtDecide bool
	deciding        *flight // the flight whose cycle runs now (OnDecide)
	usageWanted     bool
	// gpu runs the dcgm-exporters and the EPP's DCGM polls (nil: the
	// config has none).
	gpu *gpuTelemetry
	// client is inference-perf's load generator (nil: none).
	client *client
	// gatewayOpen counts the requests holding a stream through the
	// gateway (gateway.go), gatewayEnds the later ends of some of them.
	gatewayOpen int
	gatewayEnds endTimes
}

// cancelPoll is how many events a run fires between two looks at its
// context: a few hundred microseconds of work, so an interrupt stops a run
// at once without a channel operation per event.
const cancelPoll = 1024

// FleetError is a fleet that cannot be built: a replica's engine
// configuration or step-time model is invalid, or names clash. It is the
// user's input that is wrong, not the simulation.
type FleetError struct{ Err error }

func (e *FleetError) Error() string { return e.Err.Error() }
func (e *FleetError) Unwrap() error { return e.Err }

// Run simulates the workload on the fleet behind router. The router must be
// freshly assembled; Run registers the fleet's endpoints with it.
func Run(src workload.Source, router *epp.Router, fleet []ReplicaSpec, opts Options) (*Result, error) {
	return RunContext(context.Background(), src, router, fleet, opts)
}

// RunContext is Run, stopped early when ctx is cancelled: it then returns
// an error wrapping ctx.Err() and no result. The source's error ends a run
// the same way; either way the loop stops within cancelPoll events.
func RunContext(ctx context.Context, src workload.Source, router *epp.Router, fleet []ReplicaSpec, opts Options) (*Result, error) {
	if len(fleet) == 0 {
		return nil, &FleetError{errors.New("sim: empty fleet")}
	}
	if err := CheckFleetMemory(fleet, opts.MaxFleetBytes); err != nil {
		return nil, &FleetError{err}
	}
	if opts.ScrapeInterval <= 0 {
		opts.ScrapeInterval = 50_000_000
	}
	if opts.GatewayMaxRequests < 0 {
		return nil, fmt.Errorf("sim: gateway max requests %d: must be > 0, or 0 for no limit", opts.GatewayMaxRequests)
	}
	r := &runner{opts: opts, router: router, src: src, byName: map[string]int{}, byAddr: map[string]int{},
		parked: map[int64]*workload.Request{}, doneAt: map[int64]int64{}, slotByID: map[int64]int{},
		ctx: ctx, done: ctx.Done(), flow: router.Flow, tickAt: -1, sweepAt: -1, byReq: map[*epp.Request]int{}}
	if m, ok := src.(interface{ Mode() workload.Mode }); ok {
		r.openLoop = m.Mode() == workload.ModeOpenLoop
	}
	kvEvents := len(router.KVConsumers) > 0
	disagg := Disaggregates(router)
	if disagg {
		r.pd = DefaultPD()
		if opts.PD != nil {
			r.pd = *opts.PD
		}
		if err := r.pd.Validate(); err != nil {
			return nil, &FleetError{err}
		}
		if err := sameModel(fleet); err != nil {
			return nil, &FleetError{err}
		}
	}
	env := engineEnv{seed: opts.Seed, kvEvents: kvEvents, disagg: disagg, pd: r.pd}
	var chain chainSize
	for i, spec := range fleet {
		eng, cfg, err := newEngine(spec, env)
		if err != nil {
			return nil, err
		}
		if err := chain.add(spec.Name, cfg); err != nil {
			return nil, &FleetError{err}
		}
		if sg, ok := eng.(*sglang.Engine); ok {
			chain.addPage(sg.Config().PageSize)
		}
		labels, err := EngineLabels(spec)
		if err != nil {
			return nil, &FleetError{err}
		}
		ingestUs, perTokUs, jitter := spec.Preset.Delays()
		fr := &fleetReplica{spec: spec, eng: eng, run: r, idx: i,
			ingest: int64(ingestUs * 1e3), perTok: int64(perTokUs * 1e3), jitter: jitter}
		fr.mover, _ = eng.(kvMover)
		if jitter > 0 {
			fr.jrng = NewStreams(opts.Seed).Stream("ingest/" + spec.Name)
		}
		if kvEvents {
			eng.Subscribe(fr)
		}
		if _, dup := r.byName[spec.Name]; dup {
			return nil, &FleetError{fmt.Errorf("duplicate replica name %q", spec.Name)}
		}
		r.byName[spec.Name] = i
		if _, dup := r.byAddr[spec.Address]; dup && disagg {
			return nil, &FleetError{fmt.Errorf("replica %s: address %q is another replica's too: the P/D header names the prefill pod by address", spec.Name, spec.Address)}
		}
		r.byAddr[spec.Address] = i
		r.fleet = append(r.fleet, fr)
		router.AddEndpoint(epp.EndpointInfo{Name: spec.Name, Address: spec.Address, Labels: labels})
	}
	r.chain = newPromptChain(chain.size(), opts.Seed)
	r.reuse = workload.NewPrefixReuseGranular(chain.size(), chain.reuseGranularity())
	router.SetObjectives(opts.Objectives)
	if r.flow != nil {
		// The flow controller looks the pool up through this router (a
		// Loaded's routers share one controller).
		r.flow.SetPool(router.LivePool)
	}
	if m, ok := r.flow.(interface{ SetMetricsRefresh(int64) }); ok {
		m.SetMetricsRefresh(opts.ScrapeInterval)
	}
	// A data producer that suspends scheduling cycles (the burst window)
	// decides later than the request arrives: the hit-rate ladder is
	// measured when the scheduler decides.
	if router.MayWait() {
		r.measureAtDecide = true
		router.OnDecide = func(c *epp.Cycle, req *epp.Request) {
			if slot, ok := r.byReq[req]; ok {
				r.measure(r.flights[slot])
			} else if r.deciding != nil && r.deciding.er == req {
				r.measure(r.deciding)
			}
		}
	}
	r.usageWanted = len(router.Response) > 0
	if len(router.GPUPolls) > 0 {
		g, err := newGPUTelemetry(r.fleet, router.GPUPolls, opts)
		if err != nil {
			return nil, &FleetError{err}
		}
		r.gpu = g
	}
	for _, p := range router.Producers {
		for _, k := range p.Produces() {
			if k.Type != epp.PrefixCacheMatchInfoType {
				continue
			}
			kind := ""
			switch p.Type() {
			case epp.ApproxPrefixProducer:
				kind = epp.PredictionApprox
			case epp.PrecisePrefixProducer:
				kind = epp.PredictionPrecise
			default:
				if pp, ok := p.(epp.PrefixPrediction); ok {
					kind = pp.PrefixPrediction()
				}
			}
			switch kind {
			case epp.PredictionApprox:
				r.approx = append(r.approx, k)
			case epp.PredictionPrecise:
				r.precise = append(r.precise, k)
			}
		}
	}
	// The first scrape precedes the first arrival (same instant, scheduled
	// first) so the EPP knows cache_config_info from the start.
	r.loop.At(0, r, arg(evScrape, 0))
	if opts.SampleInterval > 0 && opts.OnSample != nil {
		r.loop.At(0, r, arg(evSample, 0))
	}
	if r.gpu != nil {
		r.loop.AtPhase(r.gpu.collect, Early, r, arg(evDCGM, 0))
	}
	if opts.Client != nil {
		r.client = newClient(opts.Client)
	}
	r.pull()
	if r.err == nil {
		r.loop.Run(-1)
	}
	if r.err != nil {
		return nil, r.err
	}
	// Time-series samples are observation, not simulation: they count in
	// neither figure, so a run reports the same with and without them.
	r.res.Events = r.loop.Fired() - r.samples
	if r.gpu != nil {
		r.res.Events -= r.gpu.ticks
	}
	if r.client != nil {
		r.res.Events -= r.client.timers
	}
	r.res.SimTime = r.lastEvent
	r.res.InFlight = len(r.slotByID)
	r.res.Stages = r.stages.results()
	for _, fr := range r.fleet {
		rr := ReplicaResult{Name: fr.spec.Name, Stats: fr.eng.Stats(), Evictions: fr.eng.Evictions(), Role: fr.spec.Labels[RoleLabel]}
		if n := float64(r.scrapes); n > 0 {
			rr.MeanKVUsage, rr.PeakKVUsage, rr.MeanWaiting, rr.MeanRunning = fr.kvSum/n, fr.kvPeak, fr.waitSum/n, fr.runSum/n
		}
		r.res.Replicas = append(r.res.Replicas, rr)
		if fr.mover != nil {
			r.res.HeldAtEnd += fr.mover.Held()
		}
	}
	return &r.res, nil
}

// RoleLabel is the pod label of llm-d's P/D roles (pd-offload.md A.1).
const RoleLabel = "llm-d.ai/role"

// Disaggregates reports whether router's profile handler can send a
// request's prefill to a pod of its own (a disaggregation handler with a
// prefill decider, or in prefill-first order).
func Disaggregates(router *epp.Router) bool {
	d, ok := router.Handler.(interface{ Disaggregates() bool })
	return ok && d.Disaggregates()
}

// sameModel requires one model across the fleet: a decode pod reads the
// prefill pod's KV blocks as they are (pd-offload.md A.4).
func sameModel(fleet []ReplicaSpec) error {
	for _, r := range fleet[1:] {
		a, b := fleet[0].Preset.Arch, r.Preset.Arch
		if a != nil && b != nil && a.Name != b.Name {
			return fmt.Errorf("replica %s serves %s and replica %s %s: with P/D disaggregation every replica must serve one model, whose KV blocks move between them",
				fleet[0].Name, a.Name, r.Name, b.Name)
		}
	}
	return nil
}

// pull reads the next request and schedules its arrival.
func (r *runner) pull() {
	if r.client != nil {
		r.clientPull()
		return
	}
	if r.srcDone {
		return
	}
	if wr := r.nextRequest(); wr != nil {
		r.inject(wr, wr.Arrival, max(wr.Arrival, r.loop.Now()))
	}
}

// nextRequest reads the workload's next request, or returns nil when the
// source has ended or failed or MaxRequests are injected (srcDone or the
// failure then says so).
func (r *runner) nextRequest() *workload.Request {
	if r.opts.MaxRequests > 0 && r.injected >= r.opts.MaxRequests {
		r.srcDone = true
		return nil
	}
	wr, err := r.src.Next()
	if err != nil {
		r.srcEnd(err)
		return nil
	}
	return wr
}

// inject schedules wr's arrival at at, unless it is due (its arrival or
// send time) after Duration, which ends the reading. It reports whether
// wr was injected.
func (r *runner) inject(wr *workload.Request, due, at int64) bool {
	if r.opts.Duration > 0 && due > r.opts.Duration {
		r.srcDone = true
		return false
	}
	r.injected++
	r.res.Injected++
	r.next = wr
	r.at(at, evArrival, 0)
	return true
}

// srcEnd ends the reading of the workload on the source's io.EOF or
// error.
func (r *runner) srcEnd(err error) {
	if err == io.EOF {
		r.srcDone = true
		return
	}
	// Trace errors already name the file, line and field; they reach the
	// user exactly as `eppsim trace inspect` prints them.
	r.fail(err)
}

// at schedules an event that can change the simulation (every kind but the
// scrape and sample timers) and counts it in r.work.
func (r *runner) at(t int64, kind uint64, idx int) {
	r.work++
	r.loop.At(t, r, arg(kind, idx))
}

// fail ends the run with err: nothing more is read, and the loop halts.
func (r *runner) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.srcDone = true
	r.next = nil
	r.loop.Halt()
}

// Fire dispatches the run's events.
func (r *runner) Fire(now int64, a uint64) {
	idx := int(a & (1<<kindShift - 1))
	kind := a >> kindShift
	if kind != evScrape && kind != evSample && kind != evDCGM && kind != evTimeout {
		r.work--
	}
	if r.done != nil && r.loop.Fired()%cancelPoll == 0 {
		select {
		case <-r.done:
			r.fail(fmt.Errorf("sim: run stopped at %v of simulated time: %w", time.Duration(now), context.Cause(r.ctx)))
			return
		default:
		}
	}
	switch kind {
	case evArrival:
		wr := r.next
		r.next = nil
		r.clientSent(now, wr)
		r.arrive(now, wr)
		r.pull()
	case evTimeout:
		if !r.clientTimeout(now, int64(idx)) {
			return
		}
	case evClientEnd:
		r.clientEnd(now)
	case evRelease:
		wr := r.parked[int64(idx)]
		delete(r.parked, int64(idx))
		r.route(now, wr)
	case evDeliver:
		r.deliver(now, idx)
	case evStepEnd:
		r.stepEnd(now, idx)
	case evWake:
		r.wake(now, idx)
	case evPrefill:
		r.deliverPrefill(now, idx)
	case evNotify:
		rel := takeSlot(r.releases, &r.freeRel, idx)
		// A P/D fleet has only engines with a kvMover (newEngine).
		r.fleet[rel.replica].mover.Release(rel.rr)
		// Freed blocks may let the prefill pod admit what waits for them.
		r.kick(now, rel.replica)
	case evFlowTick:
		r.flowTick(now)
	case evFlowSweep:
		r.flowSweep(now)
	case evResume:
		r.resume(now, idx)
	case evScrape:
		r.scrape(now)
	case evSample:
		r.sample(now)
		return
	case evDCGM:
		r.gpuTick(now)
		return
	case evKV:
		b := takeSlot(r.kv, &r.freeKV, idx)
		r.router.HandleKVEvents(&epp.Cycle{Now: now}, r.fleet[b.replica].spec.Address, b.batch)
		// Consumers keep nothing of the batch slice (epp.KVEventConsumer),
		// so it carries a later batch.
		clear(b.batch)
		r.spareKV = append(r.spareKV, b.batch[:0])
	}
	r.lastEvent = now
}

// arrive handles a request read from the workload: open-loop requests are
// routed now; a closed-loop turn waits for its previous turn (workload
// ordering contract: its release is never before its Arrival).
func (r *runner) arrive(now int64, wr *workload.Request) {
	if !wr.AfterPrevious || wr.Prev < 0 {
		r.route(now, wr)
		return
	}
	if done, ok := r.doneAt[wr.Prev]; ok {
		delete(r.doneAt, wr.Prev)
		r.release(max(now, done+wr.ThinkTime), wr)
		return
	}
	if r.inFlight(wr.Prev) {
		r.parked[wr.Prev] = wr
		return
	}
	// The previous turn was rejected or never injected: release at the
	// trace arrival.
	r.route(now, wr)
}

func (r *runner) release(at int64, wr *workload.Request) {
	r.parked[wr.Prev] = wr
	r.at(at, evRelease, int(wr.Prev))
}

func (r *runner) inFlight(id int64) bool {
	_, ok := r.slotByID[id]
	return ok
}

func (r *runner) newFlight(f *flight) int {
	i := putSlot(&r.flights, &r.freeF, f)
	r.slotByID[f.wr.ID] = i
	return i
}

// dropFlight releases a flight's slot.
func (r *runner) dropFlight(slot int) {
	delete(r.slotByID, takeSlot(r.flights, &r.freeF, slot).wr.ID)
}

func (r *runner) kvSlot(b kvBatch) int { return putSlot(&r.kv, &r.freeKV, b) }

// putSlot stores v in a free slot of items (the last one freed), or in a
// new one, and returns its index: the tables of in-flight requests,
// pending P/D releases and KV batches, whose events carry the index.
func putSlot[T any](items *[]T, free *[]int, v T) int {
	if n := len(*free); n > 0 {
		i := (*free)[n-1]
		*free = (*free)[:n-1]
		(*items)[i] = v
		return i
	}
	*items = append(*items, v)
	return len(*items) - 1
}

// takeSlot returns items[i] and frees its slot, zeroing it so that it
// holds nothing alive.
func takeSlot[T any](items []T, free *[]int, i int) T {
	v := items[i]
	var zero T
	items[i] = zero
	*free = append(*free, i)
	return v
}

// route is a request reaching the EPP (director order, epp.md §2.1): its
// identity from the headers (steps 2–3, flow-control.md §2), then, unless
// it needs no admission (flowControl gate off and priority ≥ 0: the legacy
// gate admits it without a look), the parse of its body (step 0) and the
// admission controller (step 4): the legacy gate (§4) or flow control's
// enqueue (§6). A request admitted at once is scheduled now (dispatch).
func (r *runner) route(now int64, wr *workload.Request) {
	f := &flight{wr: wr, replica: -1, prefill: -1}
	f.rec = Record{ID: wr.ID, Session: wr.Session, Turn: wr.Turn, Stage: wr.Stage, Arrival: now, Replica: -1,
		PromptTokens: wr.PromptLen, OutputTokens: wr.OutputTokens, Warmup: now < r.opts.Warmup}
	r.stages.arrive(wr.Stage, f.rec.Warmup)
	if !r.gatewayAdmit(now, f) {
		return
	}
	f.er = EPPRequest(wr)
	r.router.Identify(f.er)
	f.rec.Objective, f.rec.Priority, f.rec.FairnessID = f.er.Objective, f.er.Priority, f.er.FairnessID
	if r.flow == nil && f.er.Priority >= 0 {
		r.dispatch(now, f)
		return
	}
	if err := r.router.Parse(f.er); err != nil {
		r.reject(f, err)
		return
	}
	if r.flow == nil {
		if err := r.router.LegacyAdmit(now, f.er); err != nil {
			r.reject(f, err)
			return
		}
		r.dispatch(now, f)
		return
	}
	// Queued requests are in flight: a later turn of the session waits.
	slot := r.newFlight(f)
	r.byReq[f.er] = slot
	step := r.flow.Enqueue(now, f.er)
	if step.Rejected != nil {
		delete(r.byReq, f.er)
		r.dropFlight(slot)
		r.reject(f, step.Rejected)
	}
	r.flowStep(now, step)
	r.flowTimers(now)
}

// reject ends a request the EPP (or an engine) answered itself.
func (r *runner) reject(f *flight, err error) {
	f.rec.Outcome, f.rec.Reason = Rejected, err.Error()
	f.rec.HTTPStatus, f.rec.Cause = epp.HTTPStatus(err)
	r.finish(f)
}

// flowStep applies what an enqueue or dispatch cycle did: revoked
// in-flight requests are evicted, a released request resumes in the
// director at this instant (flow-control.md §6.3).
func (r *runner) flowStep(now int64, step epp.FlowStep) {
	for _, req := range step.Evicted {
		r.evict(now, req)
	}
	if step.Dispatched == nil {
		return
	}
	f, ok := r.leaveQueue(now, step.Dispatched)
	if !ok {
		r.fail(fmt.Errorf("sim: flow control dispatched request %s, which it never queued", step.Dispatched.ID))
		return
	}
	r.dispatch(now, f)
}

// leaveQueue takes a request that flow control dispatched or expired out
// of the queued flights, with the time it waited there; false when it was
// not queued.
func (r *runner) leaveQueue(now int64, req *epp.Request) (*flight, bool) {
	slot, ok := r.byReq[req]
	if !ok {
		return nil, false
	}
	delete(r.byReq, req)
	f := r.flights[slot]
	r.dropFlight(slot)
	f.rec.FlowWait = now - f.rec.Arrival
	return f, true
}

// flowTimers schedules the next grid cycle and sweep flow control asks for
// (flow-control.md §16.3): sweeps first at an instant, the tick last
// (§16.4). A cycle already scheduled earlier stays; a later one is
// replaced (the earlier event then finds itself stale and does nothing).
func (r *runner) flowTimers(now int64) {
	if r.flow == nil {
		return
	}
	if t := r.flow.NextCycle(now); t >= 0 && (r.tickAt < 0 || t < r.tickAt) {
		r.tickAt = t
		r.work++
		r.loop.AtPhase(t, Late, r, arg(evFlowTick, 0))
	}
	if t := r.flow.NextSweep(); t >= 0 && (r.sweepAt < 0 || t < r.sweepAt) {
		r.sweepAt = t
		r.work++
		r.loop.AtPhase(t, Early, r, arg(evFlowSweep, 0))
	}
}

func (r *runner) flowTick(now int64) {
	if now != r.tickAt {
		return
	}
	r.tickAt = -1
	r.flowStep(now, r.flow.Cycle(now))
	r.flowTimers(now)
}

// flowSweep runs the expiry sweep: each expired request ends with its
// HTTP answer (flow-control.md §6.4, §7).
func (r *runner) flowSweep(now int64) {
	if now != r.sweepAt {
		return
	}
	r.sweepAt = -1
	for _, d := range r.flow.Sweep(now) {
		if f, ok := r.leaveQueue(now, d.Req); ok {
			r.reject(f, d.Err)
		}
	}
	r.flowTimers(now)
}

// observe tells flow control that its detector's inputs change at now
// (a scrape, a response chunk, an end of stream).
func (r *runner) observe(now int64) {
	if r.flow != nil {
		r.flow.Observe(now)
	}
}

// measure takes every rung of the hit-rate ladder at this one instant,
// before the EPP decides: the infinite cache of everything routed so far,
// then each replica's cache (the oracle is their maximum, the chosen
// replica's is the routed rung).
func (r *runner) measure(f *flight) {
	wr := f.wr
	st, err := r.reuse.Add(wr)
	if err != nil {
		r.fail(fmt.Errorf("sim: request %d: infinite-cache bound: %w", wr.ID, err))
		return
	}
	f.rec.InfiniteCachedTokens = int(st.Hit)
	f.rec.OracleCachedTokens = 0
	cached := r.cachedScratch[:0]
	for _, fr := range r.fleet {
		c := fr.eng.CachedPrefixTokens(wr.PromptTokens, wr.CacheSalt, f.hashes)
		cached = append(cached, c)
		f.rec.OracleCachedTokens = max(f.rec.OracleCachedTokens, c)
	}
	r.cachedScratch = cached
}

// dispatch runs the director from candidate lookup on (epp.md §2.1 steps
// 5–12) and sends the request towards its replica.
func (r *runner) dispatch(now int64, f *flight) {
	f.hashes = r.promptHashes(f.wr)
	if !r.measureAtDecide {
		r.measure(f)
		if r.err != nil {
			return
		}
	}
	f.cands = r.router.Candidates()
	r.deciding = f
	res, err := r.router.ScheduleOn(&epp.Cycle{Now: now}, f.er, f.cands)
	r.deciding = nil
	r.decided(now, f, res, err)
}

// decided ends a scheduling cycle: routed, or, when a data producer holds
// the cycle (the burst window), parked in flight until the producer's time
// to resume it.
func (r *runner) decided(now int64, f *flight, res *epp.Result, err error) {
	var w *epp.WaitError
	if errors.As(err, &w) {
		f.waitFrom = now
		slot := r.newFlight(f)
		r.byReq[f.er] = slot
		r.at(w.Until, evResume, slot)
		return
	}
	r.routed(now, f, res, err)
}

// resume continues a scheduling cycle a data producer suspended.
func (r *runner) resume(now int64, slot int) {
	f := r.flights[slot]
	if f == nil {
		return
	}
	delete(r.byReq, f.er)
	r.dropFlight(slot)
	f.rec.ProducerWait += now - f.waitFrom
	r.deciding = f
	res, err := r.router.Resume(&epp.Cycle{Now: now}, f.er)
	r.deciding = nil
	r.decided(now, f, res, err)
}

// routed handles the scheduler's result: the request goes to its target
// (and, disaggregated, its prefill leg to the prefill pod).
func (r *runner) routed(now int64, f *flight, res *epp.Result, err error) {
	wr := f.wr
	if r.err != nil {
		return
	}
	if err != nil {
		r.reject(f, err)
		return
	}
	cached := r.cachedScratch
	hashes := f.hashes
	target := res.Target()
	idx, ok := r.byName[target.Name]
	if !ok {
		r.fail(fmt.Errorf("sim: EPP routed request %d to unknown endpoint %q", wr.ID, target.Name))
		return
	}
	f.res, f.replica, f.rec.Replica = res, idx, idx
	f.rec.RoutedCachedTokens = cached[idx]
	if pr := res.Profiles[res.PrimaryProfile]; pr != nil && pr.Trace != nil {
		f.rec.Tied = pr.Trace.Tied
	}
	// The replica that computes the prompt: the prefill pod when the
	// request is disaggregated, the routed cached prefix and the
	// predictions refer to it.
	computer := target.Name
	if res.PD != nil {
		pd := &PDRecord{Disaggregated: res.PD.Disaggregated, Reason: res.PD.Reason, DeciderPromptTokens: res.PD.PromptTokens,
			DeciderCachedTokens: res.PD.CachedTokens, PrefillReplica: -1, DecodeRoutedTokens: cached[idx]}
		f.rec.PD = pd
		if hv, ok := f.er.Headers[epp.PrefillHeader]; ok {
			// The sidecar uses the header's first element (A.4 step 2).
			addr, _, _ := strings.Cut(hv, ",")
			p, ok := r.byAddr[addr]
			if !ok {
				r.fail(fmt.Errorf("sim: EPP named unknown prefill endpoint %q for request %d", addr, wr.ID))
				return
			}
			f.prefill, pd.PrefillReplica = p, p
			f.rec.RoutedCachedTokens = cached[p]
			if e := endpointOf(res, r.fleet[p].spec.Name); e != nil {
				computer = e.Name
			}
		}
	}
	// The predictions are the producers' data on the computing endpoint's
	// snapshot (a data-parallel handler's target is a clone without it).
	snap := target
	if e := snapshotOf(f.cands, computer); e != nil {
		snap = e
	}
	f.rec.Predicted, f.rec.PredictedBlocks, f.rec.HasPredicted = matchFraction(snap, r.approx)
	f.rec.PredictedPrecise, f.rec.PreciseBlocks, f.rec.HasPrecise = matchFraction(snap, r.precise)
	f.rr = &replica.Request{ID: wr.ID, Prompt: wr.PromptTokens, OutputLen: max(wr.OutputTokens, 1), Output: wr.OutputTokenIDs,
		CacheSalt: wr.CacheSalt, PromptHashes: hashes}
	slot := r.newFlight(f)
	f.pending = true
	if f.prefill < 0 {
		r.at(now+r.opts.EPPLatency+r.opts.NetworkLatency, evDeliver, slot)
		return
	}
	// P/D (pd-offload.md A.4): the decode pod's sidecar sends the prefill
	// leg (one output token, its blocks held for the read) to the prefill
	// pod, and the decode leg to its own engine once the prefill pod has
	// answered.
	f.prr = &replica.Request{ID: wr.ID, Prompt: wr.PromptTokens, OutputLen: 1, CacheSalt: wr.CacheSalt, PromptHashes: hashes, HoldBlocks: true}
	f.rr.Remote = &replica.RemotePrefill{Engine: f.prefill}
	r.at(now+r.opts.EPPLatency+r.opts.NetworkLatency+r.pd.Hop, evPrefill, slot)
}

// evict ends an in-flight request flow control revoked (flow-control.md
// §12): its stream is answered with HTTP 429 "evicted" and its connection
// reset, so the engines abort it at once; its end of stream reaches the
// EPP's hooks. A P/D request's prefill pod is told to free a finished
// prefill leg's blocks.
func (r *runner) evict(now int64, req *epp.Request) {
	id, err := strconv.ParseInt(req.ID, 10, 64)
	if err != nil {
		return
	}
	slot, ok := r.slotByID[id]
	if !ok || r.flights[slot].er != req {
		return // its response already completed
	}
	f := r.abort(now, slot)
	r.router.ResponseComplete(&epp.Cycle{Now: now}, f.er, f.res)
	r.reject(f, epp.EvictedError())
}

// abort ends the in-flight request of slot where it is: its engines drop
// it (a P/D prefill pod is told to free a finished prefill leg's blocks).
// The caller finishes its record.
func (r *runner) abort(now int64, slot int) *flight {
	f := r.flights[slot]
	delete(r.slotByID, f.wr.ID)
	f.aborted = true
	switch {
	case f.pending:
		// A delivery event names the slot: it frees it (and a held
		// prefill leg) when it fires.
	case f.inEngine:
		r.fleet[f.replica].eng.Abort(f.rr)
		if f.prr != nil && !f.notified {
			r.notify(now, r.pd.Notify, f)
		}
		r.freeSlot(slot)
		r.kick(now, f.replica)
	default: // a P/D prefill leg on its prefill pod
		r.fleet[f.prefill].eng.Abort(f.prr)
		r.freeSlot(slot)
		r.kick(now, f.prefill)
	}
	r.observe(now)
	return f
}

// freeSlot releases the slot of a flight no longer listed by ID.
func (r *runner) freeSlot(slot int) { takeSlot(r.flights, &r.freeF, slot) }

// snapshotOf returns the candidate snapshot named name.
func snapshotOf(cands []*epp.Endpoint, name string) *epp.Endpoint {
	for _, e := range cands {
		if e.EndpointInfo != nil && e.Name == name {
			return e
		}
	}
	return nil
}

// endpointOf returns the scheduled endpoint named name in res (every
// profile's targets are snapshots of the same candidates).
func endpointOf(res *epp.Result, name string) *epp.Endpoint {
	for _, pr := range res.Profiles {
		if pr == nil {
			continue
		}
		for _, e := range pr.Targets {
			if e != nil && e.EndpointInfo != nil && e.Name == name {
				return e
			}
		}
	}
	return nil
}

// deliverPrefill hands a P/D prefill leg to its prefill pod. If the pod
// refuses it, the sidecar returns the error to the client (A.4 step 6:
// there is no fallback to a local prefill).
func (r *runner) deliverPrefill(now int64, slot int) {
	f := r.flights[slot]
	f.pending = false
	if f.aborted {
		r.freeSlot(slot)
		return
	}
	if err := r.fleet[f.prefill].eng.Add(f.prr, now); err != nil {
		r.dropFlight(slot)
		f.rec.Outcome, f.rec.Reason, f.rec.HTTPStatus, f.rec.Cause = Rejected, "prefill pod: "+err.Error(), http.StatusBadRequest, CauseEngineRejected
		r.observe(now)
		r.router.ResponseComplete(&epp.Cycle{Now: now}, f.er, f.res)
		r.finish(f)
		r.flowTimers(now)
		return
	}
	r.kick(now, f.prefill)
}

// prefillDone handles a P/D prefill leg's one token on its pod i: the
// pod's blocks stay held, its response (after the pod's ingest delay, its
// serialisation and the hop back) reaches the decode pod's sidecar, which
// sends the decode leg to its engine (A.4 steps 5–7).
func (r *runner) prefillDone(now int64, i int, f *flight) {
	pr, pd := f.prr, f.rec.PD
	pd.PrefillQueue = pr.FirstScheduled - pr.Arrived
	pd.PrefillTime = pr.FirstToken - pr.Arrived
	f.rec.CachedTokens, f.rec.CPUCachedTokens = pr.NumCachedTokens, pr.NumCPUCachedTokens
	f.pending = true
	r.at(now+r.fleet[i].ingestDelay()+r.pd.Response+r.pd.Hop, evDeliver, r.slotByID[f.wr.ID])
}

// notify schedules the notification that frees a P/D request's prefill
// leg on its pod (A.4 step 13), d after now.
func (r *runner) notify(now, d int64, f *flight) {
	f.notified = true
	i := putSlot(&r.releases, &r.freeRel, release{replica: f.prefill, rr: f.prr})
	r.at(now+d, evNotify, i)
}

// pulled handles decode legs whose read an engine reported complete: the
// decode side notifies the prefill pod (A.4 steps 10, 13).
func (r *runner) pulled(now int64, legs []*replica.Request) {
	for _, rr := range legs {
		slot, ok := r.slotByID[rr.ID]
		if !ok || r.flights[slot].rr != rr || r.flights[slot].notified {
			continue // evicted: its prefill pod was notified then
		}
		r.notify(now, r.pd.Notify, r.flights[slot])
	}
}

// EPPRequest is the request the EPP gets for wr: its body and the prompt
// tokens the model server computes, its headers and the session id header,
// and wr's Memo.
func EPPRequest(wr *workload.Request) *epp.Request {
	headers := make(map[string]string, 1+len(wr.Headers))
	for k, v := range wr.Headers {
		headers[k] = v
	}
	if wr.Session != "" {
		// eppsim's clients send the session id the way session-affinity
		// (session_id strategy) expects it by default.
		headers["x-session-id"] = wr.Session
	}
	return &epp.Request{ID: strconv.FormatInt(wr.ID, 10), TargetModel: wr.Model, Headers: headers, Path: wr.Endpoint,
		Body: wr.Body, ServerPromptTokens: wr.PromptTokens, Memo: wr.Memo}
}

// promptHashes returns the engine-block hash chain of wr's prompt,
// memoized in wr.Memo for the runs with the same block size and seed.
func (r *runner) promptHashes(wr *workload.Request) []uint64 {
	return r.chain.hashes(wr)
}

// A promptChain computes prompts' engine-block hash chains as a fleet's
// engines do (replica.Engine.ChainHashes). Prompts of hash-id traces
// (Mooncake, Alibaba) are a pure function of their trace block ids, so
// their chain is derived from the ids (Engine.ChainHashIDs) instead of
// hashing every token; the chains share prefixes exactly as the token
// chains would, so no result changes. It is not safe for concurrent use.
type promptChain struct {
	h   *replica.BlockHasher
	key chainKey
}

func newPromptChain(blockSize int, seed uint64) *promptChain {
	return &promptChain{h: replica.NewBlockHasher(blockSize, seed), key: chainKey{blockSize, seed}}
}

// chainKey memoizes a prompt's chain (workload.Request.Memo): the chain
// depends on the engine block size and the hash seed.
type chainKey struct {
	blockSize int
	seed      uint64
}

func (c *promptChain) hashes(wr *workload.Request) []uint64 {
	return memo.Get(wr.Memo, c.key, func() []uint64 {
		if wr.HashIDs != nil && len(wr.PromptTokens) == wr.PromptLen {
			if h, ok := c.h.PromptChainIDs(wr.PromptTokens, wr.HashIDs, wr.HashBlockSize, wr.CacheSalt); ok {
				return h
			}
		}
		return c.h.Chain(nil, c.h.Root(wr.CacheSalt), wr.PromptTokens)
	})
}

// matchFraction returns the first producer's match/total on e and total.
func matchFraction(e *epp.Endpoint, keys []epp.DataKey) (frac float64, total int, ok bool) {
	for _, k := range keys {
		m, ok := epp.Attr[epp.PrefixCacheMatchInfo](e, k)
		if !ok {
			continue
		}
		if m.TotalBlocks == 0 {
			return 0, 0, true
		}
		return float64(m.MatchBlocks) / float64(m.TotalBlocks), m.TotalBlocks, true
	}
	return 0, 0, false
}

// deliver hands a routed request to its replica.
func (r *runner) deliver(now int64, slot int) {
	f := r.flights[slot]
	f.pending = false
	if f.aborted {
		if f.prr != nil && !f.notified {
			r.notify(now, r.pd.Notify, f)
		}
		r.freeSlot(slot)
		return
	}
	fr := r.fleet[f.replica]
	if err := fr.eng.Add(f.rr, now); err != nil {
		r.dropFlight(slot)
		if f.prr != nil {
			// The decode side aborts before reading: its notification
			// frees the prefill pod's blocks at once (A.5).
			r.notify(now, r.pd.Notify, f)
		}
		r.observe(now)
		r.router.ResponseComplete(&epp.Cycle{Now: now}, f.er, f.res)
		// vLLM answers a request it cannot fit with HTTP 400.
		f.rec.Outcome, f.rec.Reason, f.rec.HTTPStatus, f.rec.Cause = Rejected, err.Error(), http.StatusBadRequest, CauseEngineRejected
		r.finish(f)
		r.flowTimers(now)
		return
	}
	f.inEngine = true
	r.kick(now, f.replica)
}

// CauseEngineRejected is the Record.Cause of a request an engine refused
// (longer than its maximum sequence length).
const CauseEngineRejected = "engine-rejected"

// kick starts a step on an idle replica. An engine left idle with CPU
// tier copies in flight is woken when the first completes.
func (r *runner) kick(now int64, i int) {
	fr := r.fleet[i]
	if fr.inStep {
		return
	}
	d, ok := fr.eng.BeginStep(now)
	if !ok {
		if fr.mover == nil {
			return
		}
		if t, pending := fr.mover.NextTransfer(); pending && (fr.wakeAt == 0 || t < fr.wakeAt) {
			fr.wakeAt = t
			r.at(t, evWake, i)
		}
		return
	}
	fr.inStep = true
	if r.gpu != nil {
		fr.busy.begin(now)
	}
	r.at(now+d, evStepEnd, i)
}

// wake applies the CPU tier copies complete on an idle replica and starts
// a step if that made work (a step in flight applies them at its end).
func (r *runner) wake(now int64, i int) {
	fr := r.fleet[i]
	if now >= fr.wakeAt {
		fr.wakeAt = 0
	}
	if fr.inStep {
		return
	}
	// Only an engine with a kvMover schedules a wake-up (kick).
	r.pulled(now, fr.mover.Poll(now))
	r.kick(now, i)
}

func (r *runner) stepEnd(now int64, i int) {
	fr := r.fleet[i]
	fr.inStep = false
	if r.gpu != nil {
		fr.busy.end(now)
	}
	out := fr.eng.EndStep(now)
	if len(out.Pulled) > 0 {
		r.pulled(now, out.Pulled)
	}
	if len(out.FirstTokens) == 0 && len(out.Finished) == 0 {
		// Most steps are decode steps with nothing to tell the router;
		// skip building its call context.
		r.kick(now, i)
		return
	}
	c := &epp.Cycle{Now: now}
	// The response hooks change flow control's inputs (in-flight counters).
	r.observe(now)
	for _, rr := range out.FirstTokens {
		f := r.flights[r.slotByID[rr.ID]]
		if rr == f.prr {
			continue // the prefill leg's token never reaches the client
		}
		r.router.ResponseFirstChunk(c, f.er, f.res)
	}
	for _, rr := range out.Finished {
		slot := r.slotByID[rr.ID]
		f := r.flights[slot]
		if rr == f.prr {
			r.prefillDone(now, i, f)
			continue
		}
		r.dropFlight(slot)
		if r.usageWanted && usageReported(f.er.Path, f.er.Body) {
			f.er.Usage = &epp.Usage{PromptTokens: f.wr.PromptLen, CompletionTokens: rr.OutputLen}
		}
		r.router.ResponseComplete(c, f.er, f.res)
		rec := &f.rec
		rec.Outcome = Completed
		rec.Preemptions = len(rr.Preemptions)
		ingest := fr.ingestDelay()
		rec.FirstToken = rr.FirstToken + ingest
		rec.Completion = rr.Completed + ingest + fr.perTok*int64(rr.OutputLen)
		rec.TTFT = rec.FirstToken - rec.Arrival
		rec.E2E = rec.Completion - rec.Arrival
		if pd := rec.PD; pd != nil {
			pd.DecodeTime = rr.FirstToken - rr.Arrived
			pd.DecodeHitTokens = rr.PullHitTokens
			if f.prr != nil {
				pd.DecodeQueue = rr.PullStart - rr.Arrived
				pd.TransferTime = rr.PullEnd - rr.PullStart
				pd.PullWait = rr.FirstScheduled - rr.PullEnd
				pd.PulledBlocks, pd.TransferBytes = rr.PulledBlocks, rr.PullBytes
				rec.Preemptions += len(f.prr.Preemptions)
			} else {
				pd.DecodeQueue = rr.FirstScheduled - rr.Arrived
				pd.DecodeHitTokens = rr.NumCachedTokens
			}
		}
		if f.prr != nil {
			// The prompt was computed on the prefill pod (prefillDone);
			// the client waited in both pods' queues.
			rec.Queue = rec.PD.PrefillQueue + rec.PD.DecodeQueue
		} else {
			rec.CachedTokens = rr.NumCachedTokens
			rec.CPUCachedTokens = rr.NumCPUCachedTokens
			rec.Queue = rr.FirstScheduled - rr.Arrived
		}
		r.finish(f)
		if f.wr.Session != "" {
			if next, ok := r.parked[f.wr.ID]; ok {
				r.release(max(now, rec.Completion+next.ThinkTime), next)
			} else {
				if !r.openLoop {
					r.doneAt[f.wr.ID] = rec.Completion
				}
			}
		}
	}
	r.kick(now, i)
	r.flowTimers(now)
}

// usageReported reports whether the response to body, sent to path,
// carries a usage block: always without streaming, and always from
// SGLang's /generate (its last stream chunk's meta_info, which
// sglanghttp-parser reads); when streaming from vLLM's OpenAI server only
// with stream_options.include_usage.
func usageReported(path string, body []byte) bool {
	if path == workload.EndpointSGLangGenerate || !bytes.Contains(body, []byte(`"stream"`)) {
		return true
	}
	var b struct {
		Stream        any `json:"stream"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if json.Unmarshal(body, &b) != nil || b.Stream != true {
		return true
	}
	return b.StreamOptions != nil && b.StreamOptions.IncludeUsage
}

func (r *runner) finish(f *flight) {
	switch f.rec.Outcome {
	case Completed:
		r.res.Completed++
	case Rejected:
		r.res.Rejected++
		if f.wr.Session != "" {
			if next, ok := r.parked[f.wr.ID]; ok {
				r.release(r.loop.Now(), next)
			}
		}
	}
	r.gatewayEnded(r.loop.Now(), f)
	r.clientEnded(f)
	if r.opts.OnRecord != nil {
		r.opts.OnRecord(&f.rec)
	}
	r.checkStop(&f.rec)
}

// scrape copies every replica's gauges into the EPP (spec epp.md §7.1) and
// re-arms itself while there is anything left to happen.
func (r *runner) scrape(now int64) {
	r.scrapes++
	r.observe(now)
	st := r.stages.cur
	if now < r.opts.Warmup {
		st = nil
	}
	for _, fr := range r.fleet {
		g := fr.eng.Gauges()
		fr.kvSum += g.KVCacheUsagePerc
		fr.kvPeak = max(fr.kvPeak, g.KVCacheUsagePerc)
		fr.waitSum += float64(g.NumRequestsWaiting)
		fr.runSum += float64(g.NumRequestsRunning)
		if st != nil {
			st.Waiting.Add(float64(g.NumRequestsWaiting))
			st.KVUsage.Add(g.KVCacheUsagePerc)
		}
		_ = r.router.UpdateMetrics(fr.spec.Name, epp.Metrics{
			WaitingQueueSize: g.NumRequestsWaiting, RunningRequestsSize: g.NumRequestsRunning,
			KVCacheUsagePercent: g.KVCacheUsagePerc, CacheBlockSize: g.BlockSize, CacheNumBlocks: g.NumGPUBlocks,
			CacheCPUCapacityTokens: g.CPUCacheCapacityTokens, UpdateTime: now,
		})
	}
	if r.gpu != nil {
		r.gpuPoll(r.scrapes - 1)
	}
	r.flowTimers(now)
	if r.active() {
		r.loop.At(now+r.opts.ScrapeInterval, r, arg(evScrape, 0))
	}
}

// sample reports every replica's state and re-arms while the run is active.
func (r *runner) sample(now int64) {
	r.samples++
	for i, fr := range r.fleet {
		g := fr.eng.Gauges()
		r.opts.OnSample(&Sample{Time: now, Replica: i, Waiting: g.NumRequestsWaiting, Running: g.NumRequestsRunning,
			KVUsage: g.KVCacheUsagePerc, PrefixQueries: g.PrefixCacheQueries, PrefixHits: g.PrefixCacheHits})
	}
	if r.active() {
		r.loop.At(now+r.opts.SampleInterval, r, arg(evSample, 0))
	}
}

// active reports whether the periodic timers should re-arm. It needs
// scheduled work: without any, nothing can change again (timers only
// observe), so the run ends even if a replica holds requests it can never
// schedule — those are reported as in flight. Within that bound the timers
// run while anything is pending, read, or in flight.
func (r *runner) active() bool {
	if r.err != nil || r.work == 0 {
		return false
	}
	if !r.srcDone || r.next != nil || len(r.parked) > 0 {
		return true
	}
	for _, fr := range r.fleet {
		if fr.inStep || fr.eng.Busy() {
			return true
		}
	}
	return len(r.slotByID) > 0
}

// NewPreparer returns a function that computes into a request's Memo what
// every run of fleet with seed derives from the request alone (the
// engines' block-hash chain of its prompt), so that those runs find it
// there. It is not safe for concurrent use: one goroutine (a workload
// feed's reader) calls it on the requests in turn.
func NewPreparer(fleet []ReplicaSpec, seed uint64) (func(*workload.Request), error) {
	if len(fleet) == 0 {
		return nil, &FleetError{errors.New("sim: empty fleet")}
	}
	bs, err := chainBlockSize(fleet)
	if err != nil {
		return nil, err
	}
	c := newPromptChain(bs, seed)
	return func(wr *workload.Request) {
		if wr.Memo != nil && wr.PromptTokens != nil {
			c.hashes(wr)
		}
	}, nil
}
