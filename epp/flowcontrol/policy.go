package flowcontrol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/eppsim/eppsim/epp"
)

// Registered plugin types (flow-control.md §8–§10).
const (
	FCFSType           = "fcfs-ordering-policy"
	EDFType            = "edf-ordering-policy"
	SLODeadlineType    = "slo-deadline-ordering-policy"
	GlobalStrictType   = "global-strict-fairness-policy"
	RoundRobinType     = "round-robin-fairness-policy"
	ProgramAwareType   = "program-aware-fairness"
	StaticLimitType    = "static-usage-limit-policy"
	HoldbackType       = "priority-holdback-policy"
	SoftReflectiveType = "soft-reflective-ceiling-policy"
)

// Register adds the flow-control policy types to r.
func Register(r *epp.Registry) {
	for _, typ := range []string{FCFSType, EDFType, SLODeadlineType} {
		r.Register(typ, orderingFactory(typ))
	}
	r.Register(GlobalStrictType, func(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
		if err := objectParams(GlobalStrictType, name, params); err != nil {
			return nil, err
		}
		return &GlobalStrict{epp.TypedName{PluginType: GlobalStrictType, PluginName: name}}, nil
	})
	r.Register(RoundRobinType, func(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
		if err := objectParams(RoundRobinType, name, params); err != nil {
			return nil, err
		}
		return &RoundRobin{epp.TypedName{PluginType: RoundRobinType, PluginName: name}}, nil
	})
	r.Register(ProgramAwareType, programAwareFactory)
	r.Register(StaticLimitType, staticFactory)
	r.Register(HoldbackType, holdbackFactory)
	r.Register(SoftReflectiveType, softReflectiveFactory)
}

// objectParams accepts absent parameters or a JSON object (policies that
// take none ignore its keys, as upstream's factories do).
func objectParams(typ, name string, params json.RawMessage) error {
	if len(params) == 0 || string(params) == "null" {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(params, &m); err != nil {
		return fmt.Errorf("plugin %q (type %s): parameters: want an object: %w", name, typ, err)
	}
	return nil
}

// OrderingPolicy orders the requests of one flow (§9): the queue is a
// min-heap under Less.
type OrderingPolicy interface {
	epp.Plugin
	Less(a, b *Item) bool
}

// FairnessPolicy picks the flow of a band whose head leaves next (§8).
type FairnessPolicy interface {
	epp.Plugin
	// NewState returns the policy's state for one band.
	NewState() any
	// Pick returns the queue to dispatch from, nil when none.
	Pick(now int64, b *Band) *Queue
}

// UsageLimitPolicy computes the per-band dispatch ceilings (§10): band i
// is gated when the saturation s ≥ ceilings[i]. ceilings arrive filled
// with 1.0; priorities are every band's, highest first (§3.3).
type UsageLimitPolicy interface {
	epp.Plugin
	ComputeLimit(s float64, priorities []int, ceilings []float64)
}

// CycleCounter is implemented by usage-limit policies whose ceilings
// depend on how many times ComputeLimit was called (soft-reflective's
// tick): Skip advances the state as n calls at saturation s would, and
// CallsToOpen returns the number m ≥ 1 of calls from now until one at s
// leaves band index i un-gated, or false when no call will.
type CycleCounter interface {
	Skip(s float64, priorities []int, n int64)
	CallsToOpen(s float64, priorities []int, i int) (int64, bool)
}

// ---- ordering (§9) ----

// farFuture is upstream's time.Unix(0, 2^63−1) key.
const farFuture = math.MaxInt64

// Ordering is one of the three ordering policies; ties beyond upstream's
// keys go to the lower arrival sequence (§16.5).
type Ordering struct {
	epp.TypedName
}

func orderingFactory(typ string) epp.Factory {
	return func(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
		if err := objectParams(typ, name, params); err != nil {
			return nil, err
		}
		return &Ordering{epp.TypedName{PluginType: typ, PluginName: name}}, nil
	}
}

// Less implements OrderingPolicy. A nil item sorts last.
func (o *Ordering) Less(a, b *Item) bool {
	if a == nil || b == nil {
		return b == nil && a != nil
	}
	var ka, kb, ta, tb int64
	switch o.PluginType {
	case EDFType:
		// EnqueueTime + effectiveTTL; TTL ≤ 0 is the far future; ties by
		// EnqueueTime.
		ka, kb = deadline(a.Enqueued, a.TTL), deadline(b.Enqueued, b.TTL)
		ta, tb = a.Enqueued, b.Enqueued
	case SLODeadlineType:
		// ReceivedTimestamp + the TTFT SLO; ties by ReceivedTimestamp.
		ka, kb = a.sloDeadline(), b.sloDeadline()
		ta, tb = a.Received, b.Received
	default: // FCFS: EnqueueTime
		ka, kb = a.Enqueued, b.Enqueued
		ta, tb = ka, kb
	}
	if ka != kb {
		return ka < kb
	}
	if ta != tb {
		return ta < tb
	}
	return a.Seq < b.Seq
}

func deadline(t, ttl int64) int64 {
	if ttl <= 0 || t > farFuture-ttl {
		return farFuture
	}
	return t + ttl
}

// sloDeadline is ReceivedTimestamp + x-llm-d-slo-ttft-ms (alias
// x-slo-ttft-ms), whitespace-trimmed, a base-10 int64 in [0,
// MaxInt64/1e6]; missing or invalid gives the far future (§9).
func (it *Item) sloDeadline() int64 {
	if it.slo < 0 {
		return farFuture
	}
	return deadline(it.Received, it.slo*1e6)
}

// parseSLO reads the TTFT SLO header of req in ms, -1 when missing or
// invalid.
func parseSLO(req *epp.Request) int64 {
	v, ok := req.Headers[epp.SLOTTFTHeader]
	if !ok {
		v, ok = req.Headers[epp.SLOTTFTHeaderAlias]
	}
	if !ok {
		return -1
	}
	ms, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || ms < 0 || ms > math.MaxInt64/1_000_000 {
		return -1
	}
	return ms
}

// ---- fairness (§8) ----

// GlobalStrict is global-strict-fairness-policy: the active queue whose
// head is smallest under the band's ordering, the band acting as one
// logical queue; equal heads go to the lower head sequence (§16.5).
type GlobalStrict struct{ epp.TypedName }

// NewState implements FairnessPolicy (stateless).
func (*GlobalStrict) NewState() any { return nil }

// Pick implements FairnessPolicy.
func (*GlobalStrict) Pick(_ int64, b *Band) *Queue {
	var best *Queue
	for _, q := range b.active {
		if best == nil || b.ordering.Less(q.Head(), best.Head()) {
			best = q
		}
	}
	return best
}

// RoundRobin is round-robin-fairness-policy: a per-band cursor; the flows
// of the band (empty ones not yet garbage-collected included) sorted by
// ID are scanned circularly from just after the cursor, and the first
// non-empty queue is picked and becomes the cursor; with every queue empty
// the cursor is cleared. A cursor whose flow was collected restarts the
// scan at the first ID.
type RoundRobin struct{ epp.TypedName }

type rrState struct{ cursor string }

// NewState implements FairnessPolicy.
func (*RoundRobin) NewState() any { return &rrState{} }

// Pick implements FairnessPolicy. Empty flows never change which
// non-empty queue the scan reaches first, so it runs over the active
// queues (sorted by ID) and needs only whether the cursor's flow exists.
func (*RoundRobin) Pick(now int64, b *Band) *Queue {
	st := b.state.(*rrState)
	if len(b.active) == 0 {
		st.cursor = ""
		return nil
	}
	start := 0
	if st.cursor != "" && b.HasFlow(st.cursor, now) {
		// First active ID strictly after the cursor, wrapping around.
		start, _ = slices.BinarySearchFunc(b.active, st.cursor, func(q *Queue, id string) int { return strings.Compare(q.id, id) })
		if start < len(b.active) && b.active[start].id == st.cursor {
			start++
		}
		if start == len(b.active) {
			start = 0
		}
	}
	q := b.active[start]
	st.cursor = q.id
	return q
}

// ---- usage limits (§10) ----

// Static is static-usage-limit-policy: every band's ceiling is threshold
// (default 1.0; any float is accepted, as upstream does not range-check
// it).
type Static struct {
	epp.TypedName
	threshold float64
}

// StaticParams are static-usage-limit-policy's parameters.
type StaticParams struct {
	Threshold *float64 `json:"threshold"`
}

func staticFactory(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
	var p StaticParams
	if err := epp.DecodeParams(StaticLimitType, name, params, &p); err != nil {
		return nil, err
	}
	s := &Static{TypedName: epp.TypedName{PluginType: StaticLimitType, PluginName: name}, threshold: 1.0}
	if p.Threshold != nil {
		s.threshold = *p.Threshold
	}
	return s, nil
}

// NewStatic returns a static-usage-limit-policy with the given threshold.
func NewStatic(name string, threshold float64) *Static {
	return &Static{TypedName: epp.TypedName{PluginType: StaticLimitType, PluginName: name}, threshold: threshold}
}

// ComputeLimit implements UsageLimitPolicy.
func (s *Static) ComputeLimit(_ float64, _ []int, ceilings []float64) {
	for i := range ceilings {
		ceilings[i] = s.threshold
	}
}

// Holdback is priority-holdback-policy (α): ceilings from maxCeiling for
// the highest band down to minCeiling for the lowest, linear in the band's
// rank or in its priority value.
type Holdback struct {
	epp.TypedName
	min, max float64
	byValue  bool
}

// HoldbackParams are priority-holdback-policy's parameters.
type HoldbackParams struct {
	MinCeiling *float64 `json:"minCeiling"`
	MaxCeiling *float64 `json:"maxCeiling"`
	Shape      string   `json:"shape"`
	Domain     string   `json:"domain"`
}

func holdbackFactory(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
	var p HoldbackParams
	if err := epp.DecodeParams(HoldbackType, name, params, &p); err != nil {
		return nil, err
	}
	h := &Holdback{TypedName: epp.TypedName{PluginType: HoldbackType, PluginName: name}, max: 1}
	var errs []error
	if p.MinCeiling == nil {
		errs = append(errs, errors.New("minCeiling is required"))
	} else if h.min = *p.MinCeiling; !(h.min >= 0 && h.min < 1) {
		errs = append(errs, fmt.Errorf("minCeiling must be in [0, 1), got %v", h.min))
	}
	if p.MaxCeiling != nil {
		h.max = *p.MaxCeiling
	}
	if !(h.max > 0 && h.max <= 1) {
		errs = append(errs, fmt.Errorf("maxCeiling must be in (0, 1], got %v", h.max))
	} else if p.MinCeiling != nil && !(h.max > h.min) {
		errs = append(errs, fmt.Errorf("maxCeiling (%v) must be greater than minCeiling (%v)", h.max, h.min))
	}
	if p.Shape != "" && p.Shape != "linear" {
		errs = append(errs, fmt.Errorf("shape must be \"linear\", got %q", p.Shape))
	}
	switch p.Domain {
	case "", "rank":
	case "value":
		h.byValue = true
	default:
		errs = append(errs, fmt.Errorf("domain must be \"rank\" or \"value\", got %q", p.Domain))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("plugin %q (type %s): %w", name, HoldbackType, err)
	}
	return h, nil
}

// ComputeLimit implements UsageLimitPolicy: with N = 1, c_0 = max; by rank
// c_i = max − i·(max − min)/(N − 1); by value c_i = min + (p_i − p_min)/(
// p_max − p_min)·(max − min), every band max when all priorities are equal.
func (h *Holdback) ComputeLimit(_ float64, prios []int, ceilings []float64) {
	n := len(ceilings)
	if n == 1 {
		ceilings[0] = h.max
		return
	}
	if !h.byValue {
		for i := range ceilings {
			ceilings[i] = h.max - float64(i)*(h.max-h.min)/float64(n-1)
		}
		return
	}
	pmin, pmax := slices.Min(prios), slices.Max(prios)
	for i := range ceilings {
		if pmax == pmin {
			ceilings[i] = h.max
			continue
		}
		ceilings[i] = h.min + float64(prios[i]-pmin)/float64(pmax-pmin)*(h.max-h.min)
	}
}

// SoftReflective is soft-reflective-ceiling-policy (α). It keeps one
// policy-wide counter, tick, advanced on every call in the alternating
// regime s ≥ 1 − s ∧ s < 1 (§10).
type SoftReflective struct {
	epp.TypedName
	tick int64
}

func softReflectiveFactory(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
	if len(params) > 0 && string(params) != "null" {
		var m map[string]json.RawMessage
		dec := json.NewDecoder(bytes.NewReader(params))
		if err := dec.Decode(&m); err != nil {
			return nil, fmt.Errorf("plugin %q (type %s): parameters: want an object: %w", name, SoftReflectiveType, err)
		}
		for k := range m {
			return nil, fmt.Errorf("plugin %q (type %s): parameters: json: unknown field %q (the policy takes no parameters)", name, SoftReflectiveType, k)
		}
	}
	return &SoftReflective{TypedName: epp.TypedName{PluginType: SoftReflectiveType, PluginName: name}}, nil
}

// Tick is the policy's counter (for tests and explanations).
func (p *SoftReflective) Tick() int64 { return p.tick }

func alternating(s float64) bool { return s >= 1-s && s < 1 }

// period is max(1, round(s/(1 − s + 1e−9))), half away from zero.
func period(s float64) int64 {
	return max(1, int64(math.Round(s/(1-s+1e-9))))
}

// ComputeLimit implements UsageLimitPolicy.
func (p *SoftReflective) ComputeLimit(s float64, _ []int, ceilings []float64) {
	n := len(ceilings)
	if n == 1 {
		ceilings[0] = 1
		return
	}
	open := false
	if alternating(s) {
		p.tick++
		open = p.tick%period(s) == 0
	}
	p.fill(s, open, ceilings)
}

func (p *SoftReflective) fill(s float64, open bool, ceilings []float64) {
	n := len(ceilings)
	ceilings[0] = 1
	for i := 1; i < n; i++ {
		r := 1 - float64(i)*s/float64(n-1)
		switch {
		case s < r:
			ceilings[i] = 1
		case s >= 1:
			ceilings[i] = 0
		case open:
			ceilings[i] = 1
		default:
			ceilings[i] = 0
		}
	}
}

// Skip implements CycleCounter.
func (p *SoftReflective) Skip(s float64, prios []int, n int64) {
	if len(prios) > 1 && alternating(s) {
		p.tick += n
	}
}

// CallsToOpen implements CycleCounter: in the alternating regime band i
// (i ≥ 1, s ≥ r_i) opens on the call that makes tick a multiple of the
// period.
func (p *SoftReflective) CallsToOpen(s float64, prios []int, i int) (int64, bool) {
	n := len(prios)
	if n == 1 || i == 0 || !alternating(s) {
		return 0, false
	}
	per := period(s)
	return per - p.tick%per, true
}

var (
	_ OrderingPolicy   = (*Ordering)(nil)
	_ FairnessPolicy   = (*GlobalStrict)(nil)
	_ FairnessPolicy   = (*RoundRobin)(nil)
	_ UsageLimitPolicy = (*Static)(nil)
	_ UsageLimitPolicy = (*Holdback)(nil)
	_ UsageLimitPolicy = (*SoftReflective)(nil)
	_ CycleCounter     = (*SoftReflective)(nil)
)
