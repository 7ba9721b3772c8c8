package epp_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/epp"
	"github.com/eppsim/eppsim/epp/filter"
	"github.com/eppsim/eppsim/epp/picker"
	"github.com/eppsim/eppsim/epp/profile"
	"github.com/eppsim/eppsim/epp/scorer"
)

// fixedScorer returns preset raw scores by endpoint name (0 when absent).
type fixedScorer struct {
	name string
	raw  map[string]float64
}

func (s *fixedScorer) Type() string { return "fixed" }
func (s *fixedScorer) Name() string { return s.name }
func (s *fixedScorer) Score(_ *epp.Cycle, _ *epp.Request, eps []*epp.Endpoint, scores []float64) {
	for i, e := range eps {
		if scores[i] != 0 {
			panic("scores not zeroed before the call")
		}
		scores[i] = s.raw[e.Name]
	}
}

// recordingPicker records the totals it was given and picks the first.
type recordingPicker struct {
	got []epp.ScoredEndpoint
}

func (p *recordingPicker) Type() string { return "recording" }
func (p *recordingPicker) Name() string { return "recording" }
func (p *recordingPicker) Pick(_ *epp.Cycle, _ *epp.Request, s []epp.ScoredEndpoint) []*epp.Endpoint {
	p.got = slices.Clone(s)
	return []*epp.Endpoint{s[0].Endpoint}
}

func candidates(n int) []*epp.Endpoint {
	out := make([]*epp.Endpoint, n)
	for i := range out {
		out[i] = &epp.Endpoint{EndpointInfo: &epp.EndpointInfo{Name: fmt.Sprintf("ns/p%d", i), Labels: map[string]string{}}}
	}
	return out
}

// The total is Σ weight·clamp(raw, 0, 1) over scorers, not divided by the
// weight sum (spec §2.3).
func TestProfileRunWeightedSumClampNotNormalised(t *testing.T) {
	eps := candidates(3)
	a := &fixedScorer{name: "a", raw: map[string]float64{"ns/p0": 1.5, "ns/p1": 0.25, "ns/p2": -2}}
	b := &fixedScorer{name: "b", raw: map[string]float64{"ns/p0": 0.5, "ns/p1": 1, "ns/p2": 0.75}}
	pk := &recordingPicker{}
	p := &epp.Profile{
		Name:    "default",
		Scorers: []epp.WeightedScorer{{Scorer: a, Weight: 2}, {Scorer: b, Weight: 3}},
		Picker:  pk,
	}
	trace := &epp.ProfileTrace{}
	res, err := p.Run(&epp.Cycle{}, &epp.Request{}, eps, trace)
	if err != nil {
		t.Fatal(err)
	}
	// p0: 2·1 + 3·0.5 = 3.5; p1: 2·0.25 + 3·1 = 3.5; p2: 2·0 + 3·0.75 = 2.25.
	want := []float64{3.5, 3.5, 2.25}
	for i, s := range pk.got {
		if s.Endpoint != eps[i] || s.Score != want[i] {
			t.Fatalf("scored[%d] = %s %v, want %s %v", i, s.Endpoint.Name, s.Score, eps[i].Name, want[i])
		}
	}
	if res.Targets[0] != eps[0] || res.Trace != trace {
		t.Fatalf("result %+v", res)
	}
	// Trace: raw values unclamped, weights, totals, candidates, pick, tie.
	if trace.Profile != "default" || !slices.Equal(trace.Candidates, []string{"ns/p0", "ns/p1", "ns/p2"}) {
		t.Fatalf("trace header %+v", trace)
	}
	if len(trace.Scorers) != 2 || trace.Scorers[0].Scorer != "a" || trace.Scorers[0].Weight != 2 ||
		!slices.Equal(trace.Scorers[0].Raw, []float64{1.5, 0.25, -2}) ||
		!slices.Equal(trace.Scorers[1].Raw, []float64{0.5, 1, 0.75}) {
		t.Fatalf("trace scorers %+v", trace.Scorers)
	}
	if !slices.Equal(trace.Totals, want) || !slices.Equal(trace.Picked, []string{"ns/p0"}) || !trace.Tied {
		t.Fatalf("trace totals %v picked %v tied %v", trace.Totals, trace.Picked, trace.Tied)
	}
	if len(trace.Filters) != 0 {
		t.Fatalf("filters %v", trace.Filters)
	}
}

func TestProfileRunFilterEmptiesErrNoEndpoints(t *testing.T) {
	eps := candidates(3)
	eps[0].Labels[filter.RoleLabel] = filter.RolePrefill
	eps[1].Labels[filter.RoleLabel] = filter.RoleDecode
	sel, err := filter.NewSelector("only-zone-x", filter.LabelSelector{MatchLabels: map[string]string{"zone": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	p := &epp.Profile{
		Name:    "decode",
		Filters: []epp.Filter{filter.NewDecode("decode-filter"), sel},
		Picker:  &recordingPicker{},
	}
	trace := &epp.ProfileTrace{}
	_, err = p.Run(&epp.Cycle{}, &epp.Request{}, eps, trace)
	if !errors.Is(err, epp.ErrNoEndpoints) {
		t.Fatalf("err = %v, want ErrNoEndpoints", err)
	}
	if !strings.Contains(err.Error(), `"decode"`) || !strings.Contains(err.Error(), `"only-zone-x"`) {
		t.Fatalf("error does not name profile and filter: %v", err)
	}
	want := []epp.FilterTrace{
		{Filter: "decode-filter", Survivors: []string{"ns/p1", "ns/p2"}},
		{Filter: "only-zone-x", Survivors: []string{}},
	}
	if len(trace.Filters) != 2 || trace.Filters[0].Filter != want[0].Filter || !slices.Equal(trace.Filters[0].Survivors, want[0].Survivors) ||
		trace.Filters[1].Filter != want[1].Filter || len(trace.Filters[1].Survivors) != 0 {
		t.Fatalf("filter trace %+v", trace.Filters)
	}
	// Without a trace the same error, and nothing panics.
	if _, err := p.Run(&epp.Cycle{}, &epp.Request{}, eps, nil); !errors.Is(err, epp.ErrNoEndpoints) {
		t.Fatalf("untraced err = %v", err)
	}
}

// Scorers see only the filter survivors; min-max scorers normalise over them.
func TestProfileRunScorersSeeSurvivors(t *testing.T) {
	eps := candidates(3)
	eps[0].Metrics.WaitingQueueSize = 0
	eps[1].Metrics.WaitingQueueSize = 10
	eps[2].Metrics.WaitingQueueSize = 20
	eps[0].Labels[filter.RoleLabel] = filter.RolePrefill // dropped by decode-filter
	pk := &recordingPicker{}
	p := &epp.Profile{
		Name:    "default",
		Filters: []epp.Filter{filter.NewDecode("decode-filter")},
		Scorers: []epp.WeightedScorer{{Scorer: scorer.NewQueue("queue-scorer"), Weight: 2}},
		Picker:  pk,
	}
	if _, err := p.Run(&epp.Cycle{}, &epp.Request{}, eps, nil); err != nil {
		t.Fatal(err)
	}
	if len(pk.got) != 2 || pk.got[0].Score != 2 || pk.got[1].Score != 0 {
		t.Fatalf("scored %+v", pk.got)
	}
}

func newRouter(t *testing.T, seed uint64, n int) *epp.Router {
	t.Helper()
	h := epp.NewHandle(seed)
	prefix, err := scorer.NewPrefixCache("prefix-cache-scorer", scorer.PrefixCacheParams{MatchLengthScaleTokens: 8192})
	if err != nil {
		t.Fatal(err)
	}
	r := &epp.Router{
		Profiles: []*epp.Profile{{
			Name: "default",
			Scorers: []epp.WeightedScorer{
				{Scorer: scorer.NewQueue("queue-scorer"), Weight: 2},
				{Scorer: scorer.NewKVCacheUtilization("kv-cache-utilization-scorer"), Weight: 2},
				{Scorer: prefix, Weight: 3},
			},
			Picker: picker.NewMaxScore("max-score-picker", 1, h.Rand("max-score-picker")),
		}},
		Handler: profile.NewSingle("single-profile-handler"),
		Record:  true,
	}
	for i := range n {
		r.AddEndpoint(epp.EndpointInfo{Name: fmt.Sprintf("ns/p%d", i), Address: fmt.Sprintf("10.0.0.%d:8000", i)})
	}
	return r
}

func TestRouterScheduleTraceAndDeterminism(t *testing.T) {
	r := newRouter(t, 1, 4)
	for i, m := range []epp.Metrics{
		{WaitingQueueSize: 4, KVCacheUsagePercent: 0.5, UpdateTime: 1},
		{WaitingQueueSize: 0, KVCacheUsagePercent: 0.5, UpdateTime: 1},
		{WaitingQueueSize: 0, KVCacheUsagePercent: 0.5, UpdateTime: 1},
		{WaitingQueueSize: 2, KVCacheUsagePercent: 0.0, UpdateTime: 1},
	} {
		if err := r.UpdateMetrics(fmt.Sprintf("ns/p%d", i), m); err != nil {
			t.Fatal(err)
		}
	}
	res, err := r.Schedule(&epp.Cycle{}, &epp.Request{ID: "req-1"})
	if err != nil {
		t.Fatal(err)
	}
	tr := res.Profiles["default"].Trace
	// queue: [0, 1, 1, 0.5]·2; kv: [0.5, 0.5, 0.5, 1]·2; prefix: 0 (no info).
	if !slices.Equal(tr.Totals, []float64{1, 3, 3, 3}) || !tr.Tied {
		t.Fatalf("totals %v tied %v", tr.Totals, tr.Tied)
	}
	if res.PrimaryProfile != "default" || res.Target().Name == "ns/p0" {
		t.Fatalf("target %s", res.Target().Name)
	}
	// Same seed ⇒ same sequence of picks; the three tied endpoints all win.
	seq := func(seed uint64) []string {
		r := newRouter(t, seed, 4)
		for i := range 4 {
			_ = r.UpdateMetrics(fmt.Sprintf("ns/p%d", i), epp.Metrics{WaitingQueueSize: []int{4, 0, 0, 2}[i], KVCacheUsagePercent: []float64{0.5, 0.5, 0.5, 0}[i], UpdateTime: 1})
		}
		var out []string
		for k := range 60 {
			res, err := r.Schedule(&epp.Cycle{}, &epp.Request{ID: fmt.Sprint(k)})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, res.Target().Name)
		}
		return out
	}
	a := seq(9)
	if !slices.Equal(a, seq(9)) {
		t.Fatal("same seed gave different picks")
	}
	for _, want := range []string{"ns/p1", "ns/p2", "ns/p3"} {
		if !slices.Contains(a, want) {
			t.Errorf("tied endpoint %s never picked in 60 requests: %v", want, a)
		}
	}
	if slices.Contains(a, "ns/p0") {
		t.Error("lower-scored endpoint picked")
	}
}

func TestRouterFailedProfileIsError(t *testing.T) {
	r := newRouter(t, 1, 2)
	r.Profiles[0].Filters = []epp.Filter{filter.NewPrefill("prefill-filter")} // no endpoint has the role
	_, err := r.Schedule(&epp.Cycle{}, &epp.Request{ID: "req-7"})
	if err == nil || !strings.Contains(err.Error(), "req-7") || !strings.Contains(err.Error(), "failed to run scheduler profile 'default'") {
		t.Fatalf("err = %v", err)
	}
	if _, err := (&epp.Router{Handler: profile.NewSingle("s")}).Schedule(&epp.Cycle{}, &epp.Request{ID: "x"}); err == nil {
		t.Fatal("no endpoints accepted")
	}
}

// PreRequest hooks run after scheduling with the result: no-hit-lru records
// the cold request's target.
func TestRouterPreRequestHook(t *testing.T) {
	r := newRouter(t, 3, 3)
	lru, err := scorer.NewNoHitLRU("no-hit-lru-scorer", scorer.NoHitLRUParams{})
	if err != nil {
		t.Fatal(err)
	}
	r.Profiles[0].Scorers = append(r.Profiles[0].Scorers, epp.WeightedScorer{Scorer: lru, Weight: 1})
	r.PreRequest = []epp.PreRequestHook{lru}
	var picks []string
	for k := range 3 {
		res, err := r.Schedule(&epp.Cycle{}, &epp.Request{ID: fmt.Sprint(k)})
		if err != nil {
			t.Fatal(err)
		}
		picks = append(picks, res.Target().Name)
	}
	// All loads equal: no-hit-lru spreads cold requests over the three.
	if got := lru.LRUKeys(); !slices.Equal(got, picks) {
		t.Fatalf("LRU %v, picks %v", got, picks)
	}
	slices.Sort(picks)
	if !slices.Equal(picks, []string{"ns/p0", "ns/p1", "ns/p2"}) {
		t.Fatalf("cold requests not spread: %v", picks)
	}
}

// benchProfile is the built-in default profile (queue 2, kv 2, prefix 3,
// spec §1.2) with max-score-picker, on n endpoints with varied metrics and
// PrefixCacheMatchInfo set by hand (12k-token prompt, 188 blocks of 64).
func benchProfile(b *testing.B, n int) (*epp.Profile, []*epp.Endpoint) {
	h := epp.NewHandle(1)
	prefix, err := scorer.NewPrefixCache("prefix-cache-scorer", scorer.PrefixCacheParams{MatchLengthScaleTokens: 8192})
	if err != nil {
		b.Fatal(err)
	}
	p := &epp.Profile{
		Name: "default",
		Scorers: []epp.WeightedScorer{
			{Scorer: scorer.NewQueue("queue-scorer"), Weight: 2},
			{Scorer: scorer.NewKVCacheUtilization("kv-cache-utilization-scorer"), Weight: 2},
			{Scorer: prefix, Weight: 3},
		},
		Picker: picker.NewMaxScore("max-score-picker", 1, h.Rand("max-score-picker")),
	}
	key := epp.DataKey{Type: epp.PrefixCacheMatchInfoType, Producer: epp.ApproxPrefixProducer}
	eps := candidates(n)
	for i, e := range eps {
		e.Metrics = epp.Metrics{WaitingQueueSize: i % 5, RunningRequestsSize: i % 7, KVCacheUsagePercent: float64(i%10) / 10, UpdateTime: 1}
		e.Put(key, epp.PrefixCacheMatchInfo{MatchBlocks: (i * 37) % 188, TotalBlocks: 188, BlockSizeTokens: 64, CachedBlockCount: (i * 37) % 188})
	}
	return p, eps
}

func benchmarkProfileRun(b *testing.B, n int) {
	p, eps := benchProfile(b, n)
	c, req := &epp.Cycle{}, &epp.Request{ID: "bench"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Run(c, req, eps, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkProfileRunDefault16(b *testing.B) { benchmarkProfileRun(b, 16) }
func BenchmarkProfileRunDefault64(b *testing.B) { benchmarkProfileRun(b, 64) }
