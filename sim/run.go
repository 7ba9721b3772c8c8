package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/eppsim/eppsim/epp"
	"github.com/eppsim/eppsim/replica"
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
}

// ReplicaResult is one replica's end-of-run state.
type ReplicaResult struct {
	Name      string
	Stats     replica.Stats
	Evictions int64
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
}

type kvBatch struct {
	replica int
	batch   []epp.KVEvent
}

type fleetReplica struct {
	spec   ReplicaSpec
	eng    *replica.Engine
	ingest int64
	perTok int64
	// jitter > 0 draws each request's ingest from jrng (Delays).
	jitter float64
	jrng   *rand.Rand
	inStep bool
	run    *runner
	idx    int
	// wakeAt is the time of the earliest wake-up scheduled for a CPU tier
	// copy completing while the engine is idle (0: none).
	wakeAt int64
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
	for _, ev := range batch {
		out = append(out, epp.KVEvent{Kind: epp.KVEventKind(ev.Kind), BlockHashes: ev.BlockHashes, ParentBlockHash: ev.ParentHash,
			HasParent: ev.HasParent, TokenIDs: ev.TokenIDs, BlockSize: ev.BlockSize, ExtraKeys: ev.ExtraKeys, Medium: ev.Medium})
	}
	slot := r.kvSlot(kvBatch{replica: f.idx, batch: out})
	r.at(now+r.opts.KVEventLag, evKV, slot)
}

type runner struct {
	loop          Loop
	opts          Options
	router        *epp.Router
	src           workload.Source
	fleet         []*fleetReplica
	byName        map[string]int
	hashEng       *replica.Engine
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
	res      Result
	err      error
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
	if opts.ScrapeInterval <= 0 {
		opts.ScrapeInterval = 50_000_000
	}
	r := &runner{opts: opts, router: router, src: src, byName: map[string]int{},
		parked: map[int64]*workload.Request{}, doneAt: map[int64]int64{}, slotByID: map[int64]int{},
		ctx: ctx, done: ctx.Done()}
	kvEvents := len(router.KVConsumers) > 0
	for i, spec := range fleet {
		cfg, err := spec.Preset.EngineConfig()
		if err != nil {
			return nil, fmt.Errorf("sim: replica %s: %w", spec.Name, err)
		}
		cfg.HashSeed = opts.Seed // one PYTHONHASHSEED for the fleet
		cfg.KVEvents = kvEvents
		model, err := spec.Preset.Model()
		if err != nil {
			return nil, &FleetError{fmt.Errorf("replica %s: %w", spec.Name, err)}
		}
		eng, err := replica.NewEngine(cfg, model)
		if err != nil {
			return nil, &FleetError{fmt.Errorf("replica %s: %w", spec.Name, err)}
		}
		if i > 0 && cfg.BlockSize != r.fleet[0].eng.Config().BlockSize {
			return nil, &FleetError{fmt.Errorf("replica %s: block size %d differs from the fleet's %d", spec.Name, cfg.BlockSize, r.fleet[0].eng.Config().BlockSize)}
		}
		ingestUs, perTokUs, jitter := spec.Preset.Delays()
		fr := &fleetReplica{spec: spec, eng: eng, run: r, idx: i,
			ingest: int64(ingestUs * 1e3), perTok: int64(perTokUs * 1e3), jitter: jitter}
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
		r.fleet = append(r.fleet, fr)
		router.AddEndpoint(epp.EndpointInfo{Name: spec.Name, Address: spec.Address, Labels: spec.Labels})
	}
	r.hashEng = r.fleet[0].eng
	r.reuse = workload.NewPrefixReuse(r.hashEng.Config().BlockSize)
	for _, p := range router.Producers {
		for _, k := range p.Produces() {
			if k.Type != epp.PrefixCacheMatchInfoType {
				continue
			}
			switch p.Type() {
			case epp.ApproxPrefixProducer:
				r.approx = append(r.approx, k)
			case epp.PrecisePrefixProducer:
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
	r.res.SimTime = r.lastEvent
	r.res.InFlight = len(r.slotByID)
	for _, fr := range r.fleet {
		r.res.Replicas = append(r.res.Replicas, ReplicaResult{Name: fr.spec.Name, Stats: fr.eng.Stats(), Evictions: fr.eng.Pool().Evictions()})
	}
	return &r.res, nil
}

// pull reads the next request and schedules its arrival.
func (r *runner) pull() {
	if r.srcDone {
		return
	}
	if r.opts.MaxRequests > 0 && r.injected >= r.opts.MaxRequests {
		r.srcDone = true
		return
	}
	wr, err := r.src.Next()
	if err == io.EOF {
		r.srcDone = true
		return
	}
	if err != nil {
		// Trace errors already name the file, line and field; they reach
		// the user exactly as `eppsim trace inspect` prints them.
		r.fail(err)
		return
	}
	if r.opts.Duration > 0 && wr.Arrival > r.opts.Duration {
		r.srcDone = true
		return
	}
	r.injected++
	r.res.Injected++
	r.next = wr
	r.at(max(wr.Arrival, r.loop.Now()), evArrival, 0)
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
	if kind != evScrape && kind != evSample {
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
		r.arrive(now, wr)
		r.pull()
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
	case evScrape:
		r.scrape(now)
	case evSample:
		r.sample(now)
		return
	case evKV:
		b := r.kv[idx]
		r.kv[idx] = kvBatch{}
		r.freeKV = append(r.freeKV, idx)
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
	i := len(r.flights)
	if n := len(r.freeF); n > 0 {
		i = r.freeF[n-1]
		r.freeF = r.freeF[:n-1]
		r.flights[i] = f
	} else {
		r.flights = append(r.flights, f)
	}
	r.slotByID[f.wr.ID] = i
	return i
}

// dropFlight releases a flight's slot.
func (r *runner) dropFlight(slot int) {
	delete(r.slotByID, r.flights[slot].wr.ID)
	r.flights[slot] = nil
	r.freeF = append(r.freeF, slot)
}

func (r *runner) kvSlot(b kvBatch) int {
	if n := len(r.freeKV); n > 0 {
		i := r.freeKV[n-1]
		r.freeKV = r.freeKV[:n-1]
		r.kv[i] = b
		return i
	}
	r.kv = append(r.kv, b)
	return len(r.kv) - 1
}

// route runs the EPP on a request and sends it towards its replica.
func (r *runner) route(now int64, wr *workload.Request) {
	f := &flight{wr: wr, replica: -1}
	f.rec = Record{ID: wr.ID, Session: wr.Session, Turn: wr.Turn, Stage: wr.Stage, Arrival: now, Replica: -1,
		PromptTokens: wr.PromptLen, OutputTokens: wr.OutputTokens, Warmup: now < r.opts.Warmup}
	headers := map[string]string{}
	if wr.Session != "" {
		// eppsim's clients send the session id the way session-affinity
		// (session_id strategy) expects it by default.
		headers["x-session-id"] = wr.Session
	}
	f.er = &epp.Request{ID: strconv.FormatInt(wr.ID, 10), TargetModel: wr.Model, Headers: headers, Path: wr.Endpoint,
		Body: wr.Body, ServerPromptTokens: wr.PromptTokens}
	hashes := r.promptHashes(wr)
	// Every rung of the hit-rate ladder is measured at this one instant,
	// before the EPP decides: the infinite cache of everything routed so
	// far, then each replica's cache (the oracle is their maximum, the
	// chosen replica's is the routed rung).
	st, err := r.reuse.Add(wr)
	if err != nil {
		r.fail(fmt.Errorf("sim: request %d: infinite-cache bound: %w", wr.ID, err))
		return
	}
	f.rec.InfiniteCachedTokens = int(st.Hit)
	cached := r.cachedScratch[:0]
	for _, fr := range r.fleet {
		c := fr.eng.CachedPrefixTokens(hashes, len(wr.PromptTokens))
		cached = append(cached, c)
		f.rec.OracleCachedTokens = max(f.rec.OracleCachedTokens, c)
	}
	r.cachedScratch = cached
	res, err := r.router.Schedule(&epp.Cycle{Now: now}, f.er)
	if err != nil {
		f.rec.Outcome, f.rec.Reason = Rejected, err.Error()
		r.finish(f)
		return
	}
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
	f.rec.Predicted, f.rec.PredictedBlocks, f.rec.HasPredicted = matchFraction(target, r.approx)
	f.rec.PredictedPrecise, f.rec.PreciseBlocks, f.rec.HasPrecise = matchFraction(target, r.precise)
	f.rr = &replica.Request{ID: wr.ID, Prompt: wr.PromptTokens, OutputLen: max(wr.OutputTokens, 1), Output: wr.OutputTokenIDs,
		CacheSalt: wr.CacheSalt, PromptHashes: hashes}
	slot := r.newFlight(f)
	r.at(now+r.opts.EPPLatency+r.opts.NetworkLatency, evDeliver, slot)
}

// promptHashes returns the engine-block hash chain of wr's prompt. Prompts
// of hash-id traces (Mooncake, Alibaba) are a pure function of their trace
// block ids, so their chain is derived from the ids (Engine.ChainHashIDs)
// instead of hashing every token; the chains share prefixes exactly as the
// token chains would, so no result changes.
func (r *runner) promptHashes(wr *workload.Request) []uint64 {
	if wr.HashIDs != nil && len(wr.PromptTokens) == wr.PromptLen {
		if h, ok := r.hashEng.ChainHashIDs(wr.PromptTokens, wr.HashIDs, wr.HashBlockSize, wr.CacheSalt); ok {
			return h
		}
	}
	return r.hashEng.ChainHashes(wr.PromptTokens, wr.CacheSalt)
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
	fr := r.fleet[f.replica]
	if err := fr.eng.Add(f.rr, now); err != nil {
		r.dropFlight(slot)
		f.rec.Outcome, f.rec.Reason = Rejected, err.Error()
		r.router.ResponseComplete(&epp.Cycle{Now: now}, f.er, f.res)
		r.finish(f)
		return
	}
	r.kick(now, f.replica)
}

// kick starts a step on an idle replica. An engine left idle with CPU
// tier copies in flight is woken when the first completes.
func (r *runner) kick(now int64, i int) {
	fr := r.fleet[i]
	if fr.inStep {
		return
	}
	d, ok := fr.eng.BeginStep(now)
	if !ok {
		if t, pending := fr.eng.NextTransfer(); pending && (fr.wakeAt == 0 || t < fr.wakeAt) {
			fr.wakeAt = t
			r.at(t, evWake, i)
		}
		return
	}
	fr.inStep = true
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
	fr.eng.Poll(now)
	r.kick(now, i)
}

func (r *runner) stepEnd(now int64, i int) {
	fr := r.fleet[i]
	fr.inStep = false
	out := fr.eng.EndStep(now)
	if len(out.FirstTokens) == 0 && len(out.Finished) == 0 {
		// Most steps are decode steps with nothing to tell the router;
		// skip building its call context.
		r.kick(now, i)
		return
	}
	c := &epp.Cycle{Now: now}
	for _, rr := range out.FirstTokens {
		f := r.flights[r.slotByID[rr.ID]]
		r.router.ResponseFirstChunk(c, f.er, f.res)
	}
	for _, rr := range out.Finished {
		slot := r.slotByID[rr.ID]
		f := r.flights[slot]
		r.dropFlight(slot)
		r.router.ResponseComplete(c, f.er, f.res)
		rec := &f.rec
		rec.Outcome = Completed
		rec.CachedTokens = rr.NumCachedTokens
		rec.CPUCachedTokens = rr.NumCPUCachedTokens
		rec.Preemptions = len(rr.Preemptions)
		ingest := fr.ingestDelay()
		rec.FirstToken = rr.FirstToken + ingest
		rec.Completion = rr.Completed + ingest + fr.perTok*int64(rr.OutputLen)
		rec.TTFT = rec.FirstToken - rec.Arrival
		rec.E2E = rec.Completion - rec.Arrival
		rec.Queue = rr.FirstScheduled - rr.Arrived
		r.finish(f)
		if f.wr.Session != "" {
			if next, ok := r.parked[f.wr.ID]; ok {
				r.release(max(now, rec.Completion+next.ThinkTime), next)
			} else {
				r.doneAt[f.wr.ID] = rec.Completion
			}
		}
	}
	r.kick(now, i)
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
	if r.opts.OnRecord != nil {
		r.opts.OnRecord(&f.rec)
	}
}

// scrape copies every replica's gauges into the EPP (spec epp.md §7.1) and
// re-arms itself while there is anything left to happen.
func (r *runner) scrape(now int64) {
	for _, fr := range r.fleet {
		g := fr.eng.Gauges()
		_ = r.router.UpdateMetrics(fr.spec.Name, epp.Metrics{
			WaitingQueueSize: g.NumRequestsWaiting, RunningRequestsSize: g.NumRequestsRunning,
			KVCacheUsagePercent: g.KVCacheUsagePerc, CacheBlockSize: g.BlockSize, CacheNumBlocks: g.NumGPUBlocks,
			CacheCPUCapacityTokens: g.CPUCacheCapacityTokens, UpdateTime: now,
		})
	}
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
