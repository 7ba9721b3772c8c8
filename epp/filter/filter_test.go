package filter

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eppsim/eppsim/epp"
)

var (
	approxKey   = epp.DataKey{Type: epp.PrefixCacheMatchInfoType, Producer: epp.ApproxPrefixProducer}
	inflightKey = epp.DataKey{Type: epp.InFlightLoadType, Producer: epp.InFlightLoadProducer}
)

func endpoints(labels ...map[string]string) []*epp.Endpoint {
	out := make([]*epp.Endpoint, len(labels))
	for i, l := range labels {
		out[i] = &epp.Endpoint{EndpointInfo: &epp.EndpointInfo{Name: fmt.Sprintf("ns/p%d", i), Labels: l}}
	}
	return out
}

func n(k int) []*epp.Endpoint { return endpoints(make([]map[string]string, k)...) }

func build(t *testing.T, typ, params string) epp.Plugin {
	t.Helper()
	p, err := tryBuild(typ, params, epp.NewHandle(1))
	if err != nil {
		t.Fatalf("%s(%s): %v", typ, params, err)
	}
	return p
}

func tryBuild(typ, params string, h *epp.Handle) (epp.Plugin, error) {
	r := epp.NewRegistry()
	Register(r)
	f, ok := r.Lookup(typ)
	if !ok {
		return nil, fmt.Errorf("type %s not registered", typ)
	}
	var raw json.RawMessage
	if params != "" {
		raw = json.RawMessage(params)
	}
	return f("f", raw, h)
}

func run(f epp.Plugin, c *epp.Cycle, eps []*epp.Endpoint) []string {
	if c == nil {
		c = &epp.Cycle{}
	}
	return epp.Names(f.(epp.Filter).Filter(c, &epp.Request{}, eps))
}

func wantErr(t *testing.T, typ, params, sub string) {
	t.Helper()
	_, err := tryBuild(typ, params, nil)
	if err == nil || !strings.Contains(err.Error(), sub) {
		t.Errorf("%s %s: err %v, want containing %q", typ, params, err, sub)
	}
}

func TestRegisteredTypes(t *testing.T) {
	r := epp.NewRegistry()
	Register(r)
	want := []string{ByLabelType, ByLabelSelectorType, ConcurrencyDetectorType, DecodeType, EncodeType,
		LabelSelectorType, PrefillType, PrefixCacheAffinityType, SLOHeadroomTierType, TopologyAffinityFilterType, TopologyExtractorType,
		UtilizationDetectorType, UtilizationFilterType}
	slices.Sort(want)
	if got := r.Types(); !slices.Equal(got, want) {
		t.Fatalf("types %v, want %v", got, want)
	}
	for _, typ := range want {
		params := ""
		if typ == ByLabelType {
			params = `{"label":"a","allowsNoLabel":true}`
		}
		p := build(t, typ, params)
		if p.Type() != typ || p.Name() != "f" {
			t.Errorf("%s: typed name %s/%s", typ, p.Type(), p.Name())
		}
		if typ == TopologyExtractorType {
			continue // a data-layer extractor, not a filter
		}
		if got := p.(epp.Filter).Filter(&epp.Cycle{}, &epp.Request{}, nil); len(got) != 0 {
			t.Errorf("%s: empty input gave %v", typ, got)
		}
	}
}

func TestRoleFilters(t *testing.T) {
	roles := []string{"", RoleDecode, RolePrefill, RoleEncode, RolePrefillDecode, RoleEncodePrefill, RoleEncodePrefillDecode, RoleBoth, "other"}
	labels := make([]map[string]string, len(roles))
	for i, r := range roles {
		if r != "" {
			labels[i] = map[string]string{RoleLabel: r}
		}
	}
	eps := endpoints(labels...) // p0 unlabeled
	tests := map[string][]string{
		DecodeType:  {"ns/p0", "ns/p1", "ns/p4", "ns/p6", "ns/p7"},
		PrefillType: {"ns/p2", "ns/p4", "ns/p5", "ns/p6", "ns/p7"},
		EncodeType:  {"ns/p3", "ns/p5", "ns/p6"},
	}
	for typ, want := range tests {
		// Parameters are ignored, as upstream.
		if got := run(build(t, typ, `{"whatever":1}`), nil, eps); !slices.Equal(got, want) {
			t.Errorf("%s = %v, want %v", typ, got, want)
		}
	}
}

func TestByLabel(t *testing.T) {
	eps := endpoints(nil, map[string]string{"tier": "a"}, map[string]string{"tier": "b"}, map[string]string{"tier": ""})
	tests := []struct {
		params string
		want   []string
	}{
		{`{"label":"tier","validValues":["a"]}`, []string{"ns/p1"}},
		{`{"label":"tier","validValues":["a","b"],"allowsNoLabel":true}`, []string{"ns/p0", "ns/p1", "ns/p2"}},
		{`{"label":"tier","allowsNoLabel":true}`, []string{"ns/p0"}},
		// "" is a valid value: matches the empty label and (as upstream) an absent one.
		{`{"label":"tier","validValues":[""]}`, []string{"ns/p0", "ns/p3"}},
	}
	for _, tt := range tests {
		if got := run(build(t, ByLabelType, tt.params), nil, eps); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.params, got, tt.want)
		}
	}
	wantErr(t, ByLabelType, `{"validValues":["a"]}`, "'label' must be specified")
	wantErr(t, ByLabelType, `{"label":"tier"}`, "either 'validValues' must be non-empty or 'allowsNoLabel' must be true")
	wantErr(t, ByLabelType, "", "'label' must be specified")
	wantErr(t, ByLabelType, `{"label":"tier","allowNoLabel":true}`, "unknown field")
}

func TestLabelSelector(t *testing.T) {
	eps := endpoints(
		map[string]string{"app": "vllm", "zone": "a", "gpu": "h100"},
		map[string]string{"app": "vllm", "zone": "b"},
		map[string]string{"app": "sglang", "zone": "a"},
		nil,
	)
	tests := []struct {
		params string
		want   []string
	}{
		{"", []string{"ns/p0", "ns/p1", "ns/p2", "ns/p3"}},
		{`{}`, []string{"ns/p0", "ns/p1", "ns/p2", "ns/p3"}},
		{`{"matchLabels":{"app":"vllm"}}`, []string{"ns/p0", "ns/p1"}},
		{`{"matchLabels":{"app":"vllm","zone":"a"}}`, []string{"ns/p0"}},
		{`{"matchExpressions":[{"key":"zone","operator":"In","values":["a","c"]}]}`, []string{"ns/p0", "ns/p2"}},
		{`{"matchExpressions":[{"key":"zone","operator":"NotIn","values":["a"]}]}`, []string{"ns/p1", "ns/p3"}},
		{`{"matchExpressions":[{"key":"gpu","operator":"Exists"}]}`, []string{"ns/p0"}},
		{`{"matchExpressions":[{"key":"gpu","operator":"DoesNotExist"}]}`, []string{"ns/p1", "ns/p2", "ns/p3"}},
		{`{"matchLabels":{"app":"vllm"},"matchExpressions":[{"key":"gpu","operator":"DoesNotExist"}]}`, []string{"ns/p1"}},
		{`{"matchLabels":{"app":"none"}}`, []string{}},
	}
	for _, typ := range []string{LabelSelectorType, ByLabelSelectorType} {
		for _, tt := range tests {
			f := build(t, typ, tt.params)
			if f.Type() != typ {
				t.Errorf("type %s", f.Type())
			}
			if got := run(f, nil, eps); !slices.Equal(got, tt.want) {
				t.Errorf("%s %s: %v, want %v", typ, tt.params, got, tt.want)
			}
		}
	}
	errs := map[string]string{
		`{"matchExpressions":[{"key":"a","operator":"In"}]}`:                      "values must be non-empty",
		`{"matchExpressions":[{"key":"a","operator":"NotIn","values":[]}]}`:       "values must be non-empty",
		`{"matchExpressions":[{"key":"a","operator":"Exists","values":["x"]}]}`:   "values must be empty",
		`{"matchExpressions":[{"key":"a","operator":"Gt","values":["1"]}]}`:       "not a valid label selector operator",
		`{"matchExpressions":[{"key":"-bad","operator":"Exists"}]}`:               "invalid label key",
		`{"matchLabels":{"Bad_Prefix/x":"y"}}`:                                    "invalid label key",
		`{"matchLabels":{"a":"has space"}}`:                                       "invalid label value",
		`{"matchLabels":{"a":"` + strings.Repeat("v", 64) + `"}}`:                 "invalid label value",
		`{"matchExpressions":[{"key":"a","operator":"In","values":["x"],"z":1}]}`: "unknown field",
	}
	for params, sub := range errs {
		wantErr(t, LabelSelectorType, params, sub)
	}
	// Valid qualified keys.
	for _, k := range []string{"llm-d.ai/role", "a", "A_b.c-9", "example.com/x"} {
		if _, err := NewSelector("s", LabelSelector{MatchExpressions: []LabelSelectorRequirement{{Key: k, Operator: OpExists}}}); err != nil {
			t.Errorf("key %q: %v", k, err)
		}
	}
}

func TestPrefixCacheAffinity(t *testing.T) {
	put := func(eps []*epp.Endpoint, i, match, total, tokens int) {
		eps[i].Put(approxKey, epp.PrefixCacheMatchInfo{MatchBlocks: match, TotalBlocks: total})
		eps[i].Put(inflightKey, epp.InFlightLoad{Tokens: tokens})
	}
	eps := n(4)
	put(eps, 0, 9, 10, 0) // sticky (0.9)
	put(eps, 1, 8, 10, 0) // sticky (0.8 ≥ 0.8)
	put(eps, 2, 7, 10, 0) // not sticky
	put(eps, 3, 0, 0, 0)  // total 0 → ratio 0
	f := build(t, PrefixCacheAffinityType, "")
	if got := run(f, nil, eps); !slices.Equal(got, []string{"ns/p0", "ns/p1"}) {
		t.Fatalf("sticky = %v", got)
	}
	// Single candidate, threshold 0: pass.
	if got := run(f, nil, eps[2:3]); !slices.Equal(got, []string{"ns/p2"}) {
		t.Fatalf("single = %v", got)
	}
	if got := run(build(t, PrefixCacheAffinityType, `{"affinityThreshold":0}`), nil, eps); len(got) != 4 {
		t.Fatalf("threshold 0 kept %v", got)
	}
	// None sticky.
	if got := run(build(t, PrefixCacheAffinityType, `{"affinityThreshold":0.95}`), nil, eps); len(got) != 4 {
		t.Fatalf("none sticky kept %v", got)
	}
	// TTFT gate: peak 1000 tok/s; sticky best = 5000 tokens = 5000 ms,
	// non-sticky best = 0 ms. Penalty 4999 → keep all; 5000 → sticky.
	put(eps, 0, 9, 10, 5000)
	put(eps, 1, 8, 10, 6000)
	if got := run(build(t, PrefixCacheAffinityType, `{"peakPrefillThroughput":1000,"maxTTFTPenaltyMs":4999}`), nil, eps); len(got) != 4 {
		t.Fatalf("gate should break: %v", got)
	}
	if got := run(build(t, PrefixCacheAffinityType, `{"peakPrefillThroughput":1000,"maxTTFTPenaltyMs":5000}`), nil, eps); !slices.Equal(got, []string{"ns/p0", "ns/p1"}) {
		t.Fatalf("gate should hold: %v", got)
	}
	// Penalty 0 → always stick.
	if got := run(build(t, PrefixCacheAffinityType, `{"maxTTFTPenaltyMs":0,"peakPrefillThroughput":0}`), nil, eps); !slices.Equal(got, []string{"ns/p0", "ns/p1"}) {
		t.Fatalf("penalty 0: %v", got)
	}
	// latencyPredictor: no predictions in eppsim → gap 0 → stick.
	lp := build(t, PrefixCacheAffinityType, `{"ttftSource":"latencyPredictor","maxTTFTPenaltyMs":1}`)
	if got := run(lp, nil, eps); !slices.Equal(got, []string{"ns/p0", "ns/p1"}) {
		t.Fatalf("latencyPredictor: %v", got)
	}
	if d := lp.(epp.DataConsumer).Consumes(); len(d) != 2 || d[1].Key.Type != epp.LatencyPredictionType {
		t.Errorf("consumes %v", d)
	}
	if d := f.(epp.DataConsumer).Consumes(); len(d) != 2 || d[0].Key != approxKey || d[1].Key != inflightKey {
		t.Errorf("consumes %v", d)
	}

	errs := map[string]string{
		`{"affinityThreshold":1.5}`:    "affinityThreshold must be in [0, 1]",
		`{"affinityThreshold":-0.1}`:   "affinityThreshold must be in [0, 1]",
		`{"explorationProbability":2}`: "explorationProbability must be in [0, 1]",
		`{"maxTTFTPenaltyMs":-1}`:      "maxTTFTPenaltyMs must be >= 0",
		`{"peakPrefillThroughput":-1}`: "peakPrefillThroughput must be >= 0",
		`{"peakPrefillThroughput":0}`:  "peakPrefillThroughput must be > 0",
		`{"ttftSource":"oracle"}`:      "ttftSource must be",
		`{"ttftSource":""}`:            "ttftSource must be",
		`{"penaltySource":"constant"}`: "unknown field",
	}
	for params, sub := range errs {
		wantErr(t, PrefixCacheAffinityType, params, sub)
	}
}

// Exploration draws from the plugin's seeded stream: about p of the calls
// keep everything, and the same seed reproduces the sequence.
func TestPrefixCacheAffinityExploration(t *testing.T) {
	eps := n(3)
	eps[0].Put(approxKey, epp.PrefixCacheMatchInfo{MatchBlocks: 1, TotalBlocks: 1})
	seq := func(seed uint64) []int {
		p, err := tryBuild(PrefixCacheAffinityType, `{"explorationProbability":0.25}`, epp.NewHandle(seed))
		if err != nil {
			t.Fatal(err)
		}
		var out []int
		for range 4000 {
			out = append(out, len(run(p, nil, eps)))
		}
		return out
	}
	a := seq(3)
	if !slices.Equal(a, seq(3)) {
		t.Fatal("same seed, different exploration sequence")
	}
	if slices.Equal(a, seq(4)) {
		t.Fatal("different seeds, same exploration sequence")
	}
	all := 0
	for _, k := range a {
		if k == 3 {
			all++
		} else if k != 1 {
			t.Fatalf("kept %d", k)
		}
	}
	// Expected 1000; sd ≈ 27.
	if all < 880 || all > 1120 {
		t.Fatalf("explored %d of 4000, want ≈1000", all)
	}
}

type pred struct{ ttft, tpot float64 }

func (p pred) TTFTHeadroom() float64 { return p.ttft }
func (p pred) TPOTHeadroom() float64 { return p.tpot }

func TestSLOHeadroomTier(t *testing.T) {
	eps := n(4)
	f := build(t, SLOHeadroomTierType, "")
	if got := run(f, nil, eps); len(got) != 4 {
		t.Fatalf("no predictions kept %v", got)
	}
	key := epp.DataKey{Type: epp.LatencyPredictionType, Producer: epp.LatencyProducer}
	eps[0].Put(key, pred{1, 1})
	eps[1].Put(key, pred{-1, 1})
	eps[2].Put(key, pred{1, 0})
	// eps[3] without prediction: negative tier.
	pos, neg := 0, 0
	for range 5000 {
		got := run(f, nil, eps)
		switch {
		case slices.Equal(got, []string{"ns/p0", "ns/p2"}):
			pos++
		case slices.Equal(got, []string{"ns/p1", "ns/p3"}):
			neg++
		default:
			t.Fatalf("kept %v", got)
		}
	}
	// ε = 0.01 → ≈50 negative of 5000 (sd ≈ 7).
	if neg < 25 || neg > 80 {
		t.Fatalf("negative tier %d of 5000, want ≈50", neg)
	}
	wantErr(t, SLOHeadroomTierType, `{"epsilonExploreNeg":1.1}`, "epsilonExploreNeg must be in [0, 1]")
}

func ms(d int64) int64 { return d * int64(time.Millisecond) }

func TestUtilizationDetector(t *testing.T) {
	d := build(t, UtilizationDetectorType, "").(*UtilizationDetector)
	now := ms(1000)
	eps := n(4)
	eps[0].Metrics = epp.Metrics{WaitingQueueSize: 1, KVCacheUsagePercent: 0.4, UpdateTime: ms(950)}  // max(0.2, 0.5) = 0.5
	eps[1].Metrics = epp.Metrics{WaitingQueueSize: 10, KVCacheUsagePercent: 0.2, UpdateTime: ms(800)} // exactly 200 ms old: fresh; max(2, 0.25) = 2
	eps[2].Metrics = epp.Metrics{WaitingQueueSize: 0, KVCacheUsagePercent: 0.0, UpdateTime: ms(799)}  // stale → 1
	// eps[3] never scraped → 1
	if got, want := d.Saturation(eps, now), (0.5+2+1+1)/4; math.Abs(got-want) > 1e-12 {
		t.Fatalf("saturation %v, want %v", got, want)
	}
	if got := d.Saturation(nil, now); got != 1 {
		t.Fatalf("empty pool saturation %v", got)
	}
	// Filter: fresh and q < 5 and kv < 0.8 → only p0.
	if got := run(d, &epp.Cycle{Now: now}, eps); !slices.Equal(got, []string{"ns/p0"}) {
		t.Fatalf("filter %v", got)
	}
	// None passes → input unchanged.
	if got := run(d, &epp.Cycle{Now: now}, eps[1:]); len(got) != 3 {
		t.Fatalf("fallback %v", got)
	}
	// Headroom 1.0 doubles the limits (q < 10, kv < 1.0); staleness 1 s keeps p2 fresh.
	h := build(t, UtilizationDetectorType, `{"headroom":1.0,"queueDepthThreshold":5,"kvCacheUtilThreshold":0.5,"metricsStalenessThreshold":"1s"}`).(*UtilizationDetector)
	eps[1].Metrics.WaitingQueueSize = 9
	eps[2].Metrics.KVCacheUsagePercent = 1.0 // not < 0.5·2
	if got := run(h, &epp.Cycle{Now: now}, eps); !slices.Equal(got, []string{"ns/p0", "ns/p1"}) {
		t.Fatalf("headroom filter %v", got)
	}
	// The shipped probabilistic-admitter config parameters load.
	build(t, UtilizationDetectorType, `{"queueDepthThreshold":999999999,"kvCacheUtilThreshold":1.0}`)
	wantErr(t, UtilizationDetectorType, `{"queueDepthThreshold":0}`, "queueDepthThreshold must be strictly positive")
	wantErr(t, UtilizationDetectorType, `{"kvCacheUtilThreshold":1.2}`, "kvCacheUtilThreshold must be in (0.0, 1.0]")
	wantErr(t, UtilizationDetectorType, `{"metricsStalenessThreshold":"0s"}`, "metricsStalenessThreshold must be strictly positive")
	wantErr(t, UtilizationDetectorType, `{"metricsStalenessThreshold":"soon"}`, "invalid duration")
	wantErr(t, UtilizationDetectorType, `{"headroom":-0.5}`, "headroom must be a non-negative")
	// All invalid fields are reported together.
	_, err := tryBuild(UtilizationDetectorType, `{"queueDepthThreshold":-1,"headroom":-1}`, nil)
	if err == nil || !strings.Contains(err.Error(), "queueDepthThreshold") || !strings.Contains(err.Error(), "headroom") {
		t.Fatalf("joined errors: %v", err)
	}
}

func TestConcurrencyDetector(t *testing.T) {
	eps := n(3)
	eps[0].Put(inflightKey, epp.InFlightLoad{Requests: 10, Tokens: 500_000})
	eps[1].Put(inflightKey, &epp.InFlightLoad{Requests: 100, Tokens: 0})
	// eps[2] missing → 0.
	req := build(t, ConcurrencyDetectorType, "").(*ConcurrencyDetector)
	if got := req.Saturation(eps, 0); math.Abs(got-110.0/300) > 1e-12 {
		t.Fatalf("requests saturation %v", got)
	}
	if got := run(req, nil, eps); !slices.Equal(got, []string{"ns/p0", "ns/p2"}) {
		t.Fatalf("requests filter %v", got)
	}
	tok := build(t, ConcurrencyDetectorType, `{"concurrencyMode":"tokens","maxTokenConcurrency":1000000}`).(*ConcurrencyDetector)
	if got := tok.Saturation(eps, 0); math.Abs(got-500_000.0/3_000_000) > 1e-12 {
		t.Fatalf("tokens saturation %v", got)
	}
	hyb := build(t, ConcurrencyDetectorType, `{"concurrencyMode":"hybrid","maxConcurrency":20,"maxTokenConcurrency":1000000,"headroom":0.5}`).(*ConcurrencyDetector)
	// Per endpoint: max(0.5, 0.5), max(5, 0), 0 → mean 5.5/3.
	if got := hyb.Saturation(eps, 0); math.Abs(got-5.5/3) > 1e-12 {
		t.Fatalf("hybrid saturation %v", got)
	}
	// Limits 30 requests, 1.5M tokens: p1 (100 requests) dropped.
	if got := run(hyb, nil, eps); !slices.Equal(got, []string{"ns/p0", "ns/p2"}) {
		t.Fatalf("hybrid filter %v", got)
	}
	// No fallback: everything above the limit → empty.
	low := build(t, ConcurrencyDetectorType, `{"maxConcurrency":1}`)
	if got := run(low, nil, eps[:2]); len(got) != 0 {
		t.Fatalf("no-fallback filter %v", got)
	}
	if got := req.Saturation(nil, 0); got != 1 {
		t.Fatalf("empty saturation %v", got)
	}
	if d := req.Consumes(); len(d) != 1 || d[0].Key != inflightKey || !d[0].Required {
		t.Errorf("consumes %v", d)
	}
	wantErr(t, ConcurrencyDetectorType, `{"maxConcurrency":0}`, "maxConcurrency must be strictly positive")
	wantErr(t, ConcurrencyDetectorType, `{"maxTokenConcurrency":-1}`, "maxTokenConcurrency must be strictly positive")
	wantErr(t, ConcurrencyDetectorType, `{"concurrencyMode":"bytes"}`, "unsupported concurrencyMode")
	wantErr(t, ConcurrencyDetectorType, `{"headroom":-1}`, "headroom must be a non-negative")
}

func TestUtilizationFilter(t *testing.T) {
	eps := n(3)
	eps[0].Metrics = epp.Metrics{WaitingQueueSize: 0, RunningRequestsSize: 3, KVCacheUsagePercent: 0.5}
	eps[0].Put(inflightKey, epp.InFlightLoad{Requests: 4})
	eps[1].Metrics = epp.Metrics{WaitingQueueSize: 2, RunningRequestsSize: 1, KVCacheUsagePercent: 0.95}
	eps[1].Put(inflightKey, epp.InFlightLoad{Requests: 1})
	// eps[2] all zero / missing.
	tests := []struct {
		params string
		want   []string
	}{
		{`{"conditions":[{"metric":"waiting-queue","maxValue":0}]}`, []string{"ns/p0", "ns/p2"}},
		{`{"conditions":[{"metric":"active-requests","maxValue":3}]}`, []string{"ns/p1", "ns/p2"}},
		{`{"conditions":[{"metric":"running-requests","maxValue":1},{"metric":"kv-cache-utilization","maxValue":0.9}]}`, []string{"ns/p2"}},
		{`{"conditions":[{"metric":"kv-cache-utilization","maxValue":0.5}]}`, []string{"ns/p0", "ns/p2"}},
		{`{"conditions":[{"metric":"kv-cache-utilization","maxValue":-1}]}`, []string{}},
		{`{"conditions":[{"metric":"kv-cache-utilization","maxValue":-1}],"fallbackOnEmpty":true}`, []string{"ns/p0", "ns/p1", "ns/p2"}},
		{``, []string{"ns/p0", "ns/p1", "ns/p2"}},
	}
	for _, tt := range tests {
		if got := run(build(t, UtilizationFilterType, tt.params), nil, eps); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.params, got, tt.want)
		}
	}
	if d := build(t, UtilizationFilterType, `{"conditions":[{"metric":"waiting-queue","maxValue":0}]}`).(epp.DataConsumer).Consumes(); len(d) != 0 {
		t.Errorf("consumes %v", d)
	}
	if d := build(t, UtilizationFilterType, `{"conditions":[{"metric":"active-requests","maxValue":0}],"inFlightLoadProducerName":"x"}`).(epp.DataConsumer).Consumes(); len(d) != 1 || d[0].Key.Producer != "x" {
		t.Errorf("consumes %v", d)
	}
	wantErr(t, UtilizationFilterType, `{"conditions":[{"metric":"gpu","maxValue":0}]}`, "conditions[0].metric must be one of")
}
