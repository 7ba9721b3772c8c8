package flowcontrol

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/eppsim/eppsim/epp"
)

// ProgramAwareParams are program-aware-fairness's parameters (§8).
type ProgramAwareParams struct {
	Strategy             string   `json:"strategy"`
	LASWeightService     *float64 `json:"lasWeightService"`
	LASWeightHeadWait    *float64 `json:"lasWeightHeadWait"`
	LASHalfLifeSeconds   *float64 `json:"lasHalfLifeSeconds"`
	EvictionTTLSeconds   *int64   `json:"evictionTtlSeconds"`
	EvictionSweepSeconds *int64   `json:"evictionSweepSeconds"`
}

// ProgramAware is program-aware-fairness (β, §8): least-attained-service
// fairness among programs (fairness IDs). Its state is global per
// program; it is also a PreRequest and end-of-stream hook. Every use of
// upstream's time.Now() reads simulated time; the idle sweep runs on the
// grid k·evictionSweepSeconds (§16.3), applied lazily: between two calls
// no program's state changes, so the last grid point passed decides.
type ProgramAware struct {
	epp.TypedName
	wS, wW   float64
	halfLife float64 // ns; 0: no decay
	ttl      int64   // ns; 0: no idle sweep
	sweep    int64   // ns
	programs map[string]*program
	swept    int64 // last sweep grid point applied
	stashKey epp.DataKey
}

type program struct {
	inFlight, dispatched int64
	waitMean             float64 // ms
	lastCompletion       int64
	completed            bool // lastCompletion is set (upstream's zero time is the far past)
	service              float64
	anchor               int64
	anchored             bool
}

func programAwareFactory(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
	var p ProgramAwareParams
	if err := epp.DecodeParams(ProgramAwareType, name, params, &p); err != nil {
		return nil, err
	}
	return NewProgramAware(name, p)
}

// NewProgramAware applies the defaults, validates p and returns the policy.
func NewProgramAware(name string, p ProgramAwareParams) (*ProgramAware, error) {
	pa := &ProgramAware{TypedName: epp.TypedName{PluginType: ProgramAwareType, PluginName: name},
		wS: 0.8, wW: 0.2, halfLife: 60e9, ttl: 3600e9, sweep: 300e9, programs: map[string]*program{},
		stashKey: epp.DataKey{Type: "ProgramAwareHeadEnqueueTime", Producer: name}}
	var errs []error
	if p.Strategy != "" && p.Strategy != "las" {
		errs = append(errs, fmt.Errorf("strategy must be \"las\", got %q", p.Strategy))
	}
	if p.LASWeightService != nil {
		pa.wS = *p.LASWeightService
	}
	if p.LASWeightHeadWait != nil {
		pa.wW = *p.LASWeightHeadWait
	}
	if !(pa.wS >= 0) || !(pa.wW >= 0) {
		errs = append(errs, fmt.Errorf("lasWeightService and lasWeightHeadWait must be ≥ 0, got %v and %v", pa.wS, pa.wW))
	}
	if p.LASHalfLifeSeconds != nil {
		if h := *p.LASHalfLifeSeconds; !(h >= 0) || math.IsInf(h, 0) {
			errs = append(errs, fmt.Errorf("lasHalfLifeSeconds must be ≥ 0 (0: no decay), got %v", h))
		} else {
			pa.halfLife = h * 1e9
		}
	}
	if p.EvictionTTLSeconds != nil {
		if *p.EvictionTTLSeconds < 0 {
			errs = append(errs, fmt.Errorf("evictionTtlSeconds must be ≥ 0 (0: no idle sweep), got %d", *p.EvictionTTLSeconds))
		}
		pa.ttl = *p.EvictionTTLSeconds * 1e9
	}
	if p.EvictionSweepSeconds != nil {
		if *p.EvictionSweepSeconds <= 0 {
			errs = append(errs, fmt.Errorf("evictionSweepSeconds must be > 0, got %d", *p.EvictionSweepSeconds))
		}
		pa.sweep = *p.EvictionSweepSeconds * 1e9
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("plugin %q (type %s): %w", name, ProgramAwareType, err)
	}
	return pa, nil
}

// NewState implements FairnessPolicy: the state is global per program.
func (*ProgramAware) NewState() any { return nil }

// idleSweep applies the idle sweeps of the grid points up to now: a
// program with nothing in flight whose last completion is older than the
// TTL is deleted (its service with it).
func (pa *ProgramAware) idleSweep(now int64) {
	if pa.ttl <= 0 {
		return
	}
	g := now / pa.sweep * pa.sweep
	if g <= pa.swept {
		return
	}
	pa.swept = g
	for id, p := range pa.programs {
		if p.inFlight == 0 && (!p.completed || g-p.lastCompletion > pa.ttl) {
			delete(pa.programs, id)
		}
	}
}

func (pa *ProgramAware) get(id string, now int64) *program {
	pa.idleSweep(now)
	p := pa.programs[id]
	if p == nil {
		p = &program{}
		pa.programs[id] = p
	}
	return p
}

// decayed applies the lazy decay service·2^(−(now − anchor)/halfLife) and
// moves the anchor to now; the first touch only sets the anchor.
func (pa *ProgramAware) decayed(p *program, now int64) float64 {
	if !p.anchored {
		p.anchored, p.anchor = true, now
		return p.service
	}
	if pa.halfLife > 0 && now > p.anchor {
		p.service *= math.Exp2(-float64(now-p.anchor) / pa.halfLife)
	}
	p.anchor = now
	return p.service
}

// Pick implements FairnessPolicy: score = wS·(1 − norm(service)) +
// wW·norm(head wait in whole ms), norm(v) = (v − min)/(max − min), 0.5
// when max = min; the strictly highest score wins, ties the lowest
// fairness ID (§16.5). The chosen head's EnqueueTime is stashed on its
// request for PreRequest.
func (pa *ProgramAware) Pick(now int64, b *Band) *Queue {
	if len(b.active) == 0 {
		return nil
	}
	svc := make([]float64, len(b.active))
	wait := make([]float64, len(b.active))
	for i, q := range b.active {
		svc[i] = pa.decayed(pa.get(q.id, now), now)
		wait[i] = float64((now - q.Head().Enqueued) / int64(time.Millisecond))
	}
	norm := func(v []float64, x float64) float64 {
		lo, hi := v[0], v[0]
		for _, y := range v {
			lo, hi = min(lo, y), max(hi, y)
		}
		if hi == lo {
			return 0.5
		}
		return (x - lo) / (hi - lo)
	}
	best, bestScore := -1, 0.0
	for i := range b.active { // sorted by fairness ID: the first of equals wins
		score := pa.wS*(1-norm(svc, svc[i])) + pa.wW*norm(wait, wait[i])
		if best < 0 || score > bestScore {
			best, bestScore = i, score
		}
	}
	q := b.active[best]
	q.Head().Req.Put(pa.stashKey, q.Head().Enqueued)
	return q
}

// PreRequest implements epp.PreRequestHook: inFlight and dispatched grow;
// a stashed EnqueueTime folds the wait (ms) into the program's mean.
func (pa *ProgramAware) PreRequest(c *epp.Cycle, req *epp.Request, _ *epp.Result) {
	p := pa.get(req.FairnessID, c.Now)
	p.inFlight++
	p.dispatched++
	if v, ok := req.Get(pa.stashKey); ok {
		if t, ok := v.(int64); ok {
			w := float64(c.Now-t) / 1e6
			p.waitMean += (w - p.waitMean) / float64(p.dispatched)
		}
	}
}

// ResponseFirstChunk implements epp.ResponseHook (nothing to do).
func (*ProgramAware) ResponseFirstChunk(*epp.Cycle, *epp.Request, *epp.Result) {}

// ResponseComplete implements epp.ResponseHook: the end of stream (also of
// an evicted request) adds prompt + 2·completion tokens of the response's
// usage (0 without one) to the decayed service.
func (pa *ProgramAware) ResponseComplete(c *epp.Cycle, req *epp.Request, _ *epp.Result) {
	p := pa.get(req.FairnessID, c.Now)
	add := 0.0
	if u := req.Usage; u != nil {
		add = float64(u.PromptTokens) + 2*float64(u.CompletionTokens)
	}
	p.service = pa.decayed(p, c.Now) + add
	p.inFlight = max(0, p.inFlight-1)
	p.lastCompletion, p.completed = c.Now, true
}

// Service returns a program's decayed service at now (for tests).
func (pa *ProgramAware) Service(id string, now int64) float64 {
	return pa.decayed(pa.get(id, now), now)
}

var (
	_ FairnessPolicy     = (*ProgramAware)(nil)
	_ epp.PreRequestHook = (*ProgramAware)(nil)
	_ epp.ResponseHook   = (*ProgramAware)(nil)
)
