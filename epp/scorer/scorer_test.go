package scorer

import (
	"encoding/json"
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
	uncachedKey = epp.DataKey{Type: epp.UncachedRequestTokensType, Producer: epp.InFlightLoadProducer}
)

func near(t *testing.T, label string, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %v, want %v", label, got, want)
	}
	for i := range got {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			t.Errorf("%s: got %v, want %v", label, got, want)
			return
		}
	}
}

func factoryErr(t *testing.T, typ, params string) error {
	t.Helper()
	r := epp.NewRegistry()
	Register(r)
	f, _ := r.Lookup(typ)
	var raw json.RawMessage
	if params != "" {
		raw = json.RawMessage(params)
	}
	_, err := f("p", raw, epp.NewHandle(1))
	return err
}

func TestRegisteredTypes(t *testing.T) {
	r := epp.NewRegistry()
	Register(r)
	want := []string{
		ActiveRequestType, ContextLengthAwareType, EndpointAttrFilterType, EndpointAttributeType,
		HeaderLabelAffinityType, KVCacheUtilizationType, LatencyType, LoadAwareType, LoraAffinityType,
		MMEmbeddingsCacheType, NoHitLRUType, PrefixCacheType, QueueType, RunningRequestsType,
		SessionAffinityFilterType, SessionAffinityType, TokenLoadType, TopologyAffinityType,
	}
	slices.Sort(want)
	if got := r.Types(); !slices.Equal(got, want) {
		t.Fatalf("types = %v\nwant %v", got, want)
	}
	// Each factory builds a plugin of its own type with defaults (except
	// those whose parameters are mandatory), and every scorer copes with
	// no candidates.
	mandatory := map[string]string{
		EndpointAttributeType:   `{"attributeKey":"a","algorithm":{"type":"linear_higher_is_better"}}`,
		EndpointAttrFilterType:  `{"attribute":"a","algorithm":{"type":"threshold","threshold":{"operator":"LessThan","value":1}}}`,
		HeaderLabelAffinityType: `{"headerName":"x-h","labelKey":"l"}`,
	}
	for _, typ := range want {
		f, _ := r.Lookup(typ)
		var raw json.RawMessage
		if m := mandatory[typ]; m != "" {
			raw = json.RawMessage(m)
		}
		p, err := f("inst-"+typ, raw, epp.NewHandle(1))
		if err != nil {
			t.Errorf("%s: %v", typ, err)
			continue
		}
		if p.Type() != typ || p.Name() != "inst-"+typ {
			t.Errorf("%s: typed name %s/%s", typ, p.Type(), p.Name())
		}
		if s, ok := p.(epp.Scorer); ok {
			s.Score(&epp.Cycle{}, &epp.Request{}, nil, nil)
		}
		if fl, ok := p.(epp.Filter); ok {
			if got := fl.Filter(&epp.Cycle{}, &epp.Request{}, nil); len(got) != 0 {
				t.Errorf("%s: filter of nothing returned %d", typ, len(got))
			}
		}
	}
}

func TestQueueAndRunning(t *testing.T) {
	tests := []struct {
		name string
		v    []int
		want []float64
	}{
		{"single", []int{7}, []float64{1}},
		{"all equal", []int{3, 3, 3}, []float64{1, 1, 1}},
		{"all zero", []int{0, 0}, []float64{1, 1}},
		{"min-max", []int{2, 4, 6}, []float64{1, 0.5, 0}},
		{"offset min", []int{10, 20, 14}, []float64{1, 0, 0.6}},
	}
	for _, tt := range tests {
		eps := endpoints(len(tt.v))
		for i, v := range tt.v {
			eps[i].Metrics.WaitingQueueSize = v
			eps[i].Metrics.RunningRequestsSize = v
		}
		near(t, "queue "+tt.name, score(NewQueue("q"), nil, eps), tt.want)
		near(t, "running "+tt.name, score(NewRunningRequests("r"), nil, eps), tt.want)
	}
	if got := score(NewQueue("q"), nil, nil); len(got) != 0 {
		t.Error("empty")
	}
}

func TestKVCacheUtilization(t *testing.T) {
	eps := endpoints(3)
	eps[0].Metrics.KVCacheUsagePercent = 0.5
	eps[1].Metrics.KVCacheUsagePercent = 0.125
	// eps[2] never scraped: usage 0 → 1.
	near(t, "kv", score(NewKVCacheUtilization("k"), nil, eps), []float64{0.5, 0.875, 1})
}

func TestLoadAware(t *testing.T) {
	tests := []struct {
		params string
		q      []int
		want   []float64
	}{
		{`{"threshold":10}`, []int{0, 5, 10, 11}, []float64{0.5, 0.25, 0, 0}},
		{`{"threshold":4}`, []int{1, 3}, []float64{0.375, 0.125}},
		{`{"threshold":0}`, []int{64}, []float64{0.25}},   // ≤0 → 128
		{`{"threshold":-3}`, []int{32}, []float64{0.375}}, // ≤0 → 128
	}
	for _, tt := range tests {
		eps := endpoints(len(tt.q))
		for i, q := range tt.q {
			eps[i].Metrics.WaitingQueueSize = q
		}
		near(t, "load-aware "+tt.params, score(newScorer(t, LoadAwareType, tt.params), nil, eps), tt.want)
	}
	if err := factoryErr(t, LoadAwareType, `{"threshold":"x"}`); err == nil {
		t.Error("bad threshold accepted")
	}
	if err := factoryErr(t, LoadAwareType, `{"thresh":3}`); err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Errorf("unknown field: %v", err)
	}
}

func TestLoraAffinityEdges(t *testing.T) {
	eps := endpoints(3)
	// eps[0]: no LoRA info at all, max 0 → 0.
	// eps[1]: max 1, nothing loaded → capacity → 0.8.
	eps[1].Metrics.MaxActiveModels = 1
	// eps[2]: full and target waiting → 0.6.
	eps[2].Metrics = epp.Metrics{MaxActiveModels: 1, ActiveModels: map[string]int{"b": 1}, WaitingModels: map[string]int{"a": 1}}
	near(t, "lora", score(NewLoraAffinity("l"), &epp.Request{TargetModel: "a"}, eps), []float64{0, 0.8, 0.6})
}

func TestActiveRequestEdges(t *testing.T) {
	put := func(eps []*epp.Endpoint, counts ...int) {
		for i, c := range counts {
			if c >= 0 {
				eps[i].Put(inflightKey, epp.InFlightLoad{Requests: c})
			}
		}
	}
	tests := []struct {
		name   string
		params string
		counts []int // -1 = attribute missing
		want   []float64
	}{
		{"missing attributes are idle", "", []int{-1, -1}, []float64{1, 1}},
		{"all equal busy", "", []int{4, 4}, []float64{0, 0}},
		{"negative idle → 0", `{"idleThreshold":-2}`, []int{0, 2, 4}, []float64{1, 0.5, 0}},
		{"maxBusyScore out of range → 1", `{"maxBusyScore":1.5}`, []int{0, 2, 4}, []float64{1, 0.5, 0}},
		{"maxBusyScore 0", `{"maxBusyScore":0}`, []int{0, 2, 4}, []float64{1, 0, 0}},
		{"idle 3", `{"idleThreshold":3,"maxBusyScore":0.8}`, []int{3, 5, 10}, []float64{1, 0.4, 0}},
		{"deprecated requestTimeout accepted", `{"requestTimeout":"2m"}`, []int{1, 3}, []float64{2.0 / 3, 0}},
	}
	for _, tt := range tests {
		eps := endpoints(len(tt.counts))
		put(eps, tt.counts...)
		near(t, tt.name, score(newScorer(t, ActiveRequestType, tt.params), nil, eps), tt.want)
	}
	// A named producer reads its own key only.
	s := newScorer(t, ActiveRequestType, `{"inFlightLoadProducerName":"mine"}`).(*ActiveRequest)
	eps := endpoints(2)
	put(eps, 0, 8) // default producer: ignored
	eps[0].Put(epp.DataKey{Type: epp.InFlightLoadType, Producer: "mine"}, &epp.InFlightLoad{Requests: 2})
	near(t, "named producer", score(s, nil, eps), []float64{0, 1})
	if got := s.Consumes(); !slices.Equal(got, []epp.Dependency{{Key: epp.DataKey{Type: epp.InFlightLoadType, Producer: "mine"}, Required: true}}) {
		t.Errorf("consumes %v", got)
	}
}

func TestTokenLoadEdges(t *testing.T) {
	eps := endpoints(4)
	eps[1].Put(inflightKey, epp.InFlightLoad{Tokens: 1 << 21}) // half the default threshold
	eps[2].Put(uncachedKey, &epp.UncachedRequestTokens{Tokens: 1 << 22})
	eps[3].Put(inflightKey, epp.InFlightLoad{Tokens: -5}) // ≤ 0 → 1
	for _, params := range []string{"", `{"queueThresholdTokens":0}`, `{"queueThresholdTokens":-1}`} {
		near(t, "token-load "+params, score(newScorer(t, TokenLoadType, params), nil, eps), []float64{1, 0.5, 0, 1})
	}
	s := newScorer(t, TokenLoadType, `{"inFlightLoadProducerName":"p2"}`).(*TokenLoad)
	want := []epp.Dependency{
		{Key: epp.DataKey{Type: epp.InFlightLoadType, Producer: "p2"}, Required: true},
		{Key: epp.DataKey{Type: epp.UncachedRequestTokensType, Producer: "p2"}, Required: true},
	}
	if got := s.Consumes(); !slices.Equal(got, want) {
		t.Errorf("consumes %v", got)
	}
	near(t, "other producer", score(s, nil, eps), []float64{1, 1, 1, 1})
}

func TestPrefixCacheParams(t *testing.T) {
	tests := []struct {
		params  string
		wantErr string
	}{
		{`{"matchLengthWeight":1.5}`, "matchLengthWeight must be between 0.0 and 1.0"},
		{`{"matchLengthWeight":-0.1}`, "matchLengthWeight must be between 0.0 and 1.0"},
		{`{"matchLengthWeight":0.5,"matchLengthScaleTokens":0}`, "matchLengthScaleTokens must be greater than 0"},
		{`{"matchLengthWeight":0.5,"matchLengthScaleTokens":-8}`, "matchLengthScaleTokens must be greater than 0"},
		{`{"matchLengthWeight":0,"matchLengthScaleTokens":0}`, ""},
		{`{"matchLengthWeight":1}`, ""},
		{`{"prefixMatchInfoProducerName":"precise-prefix-cache-producer"}`, ""},
		{`{"maxModelLen":100}`, "unknown field"},
	}
	for _, tt := range tests {
		err := factoryErr(t, PrefixCacheType, tt.params)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tt.params, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: err %v, want %q", tt.params, err, tt.wantErr)
		}
	}
}

func TestPrefixCacheEdges(t *testing.T) {
	eps := endpoints(4)
	eps[0].Put(approxKey, epp.PrefixCacheMatchInfo{MatchBlocks: 10, TotalBlocks: 20, BlockSizeTokens: 64})
	eps[1].Put(approxKey, &epp.PrefixCacheMatchInfo{MatchBlocks: 20, TotalBlocks: 20, BlockSizeTokens: 0})
	eps[2].Put(approxKey, epp.PrefixCacheMatchInfo{MatchBlocks: 0, TotalBlocks: 0, BlockSizeTokens: 64})
	// eps[3] missing.
	// w=0.25, S=1000: e0 = 0.25·min(1,640/1000)² + 0.75·0.5 = 0.1024+0.375.
	// e1: blockSize 0 → no length term: 0.75·1. e2: total 0 → 0.
	near(t, "w=.25", score(newScorer(t, PrefixCacheType, `{"matchLengthWeight":0.25,"matchLengthScaleTokens":1000}`), nil, eps),
		[]float64{0.4774, 0.75, 0, 0})
	near(t, "default", score(newScorer(t, PrefixCacheType, ""), nil, eps), []float64{0.5, 1, 0, 0})
	// w=1, long match: the length term saturates at 1.
	near(t, "w=1", score(newScorer(t, PrefixCacheType, `{"matchLengthWeight":1,"matchLengthScaleTokens":100}`), nil, eps),
		[]float64{1, 0, 0, 0})
	// A scorer of another producer sees nothing here.
	s := newScorer(t, PrefixCacheType, `{"prefixMatchInfoProducerName":"precise-prefix-cache-producer"}`).(*PrefixCache)
	near(t, "precise key", score(s, nil, eps), []float64{0, 0, 0, 0})
	if got := s.Consumes(); len(got) != 1 || got[0].Key != (epp.DataKey{Type: epp.PrefixCacheMatchInfoType, Producer: epp.PrecisePrefixProducer}) || !got[0].Required {
		t.Errorf("consumes %v", got)
	}
}

func cycleAt(ns int64) *epp.Cycle { return &epp.Cycle{Now: ns} }

func resultFor(profile string, targets ...*epp.Endpoint) *epp.Result {
	return &epp.Result{PrimaryProfile: profile, Profiles: map[string]*epp.ProfileResult{profile: {Targets: targets}}}
}

func TestNoHitLRUSequence(t *testing.T) {
	s := newScorer(t, NoHitLRUType, "").(*NoHitLRU)
	eps := endpoints(3) // pod0, pod1, pod2
	run := func(target int, want []float64) {
		t.Helper()
		req := &epp.Request{ID: "r"}
		near(t, "no-hit-lru", score(s, req, eps), want)
		s.PreRequest(&epp.Cycle{}, req, resultFor("default", eps[target]))
	}
	run(1, []float64{1, 0.5, 0}) // all never used, input order
	run(0, []float64{1, 0, 0.5}) // never: pod0 1, pod2 0.5; pod1 at p0: 1−(2+0)/2
	run(2, []float64{0, 0.5, 1}) // never: pod2 1; LRU [pod1 pod0]: pod1 1−1/2, pod0 1−2/2
	run(1, []float64{0.5, 1, 0}) // LRU [pod1 pod0 pod2]: 1−(0+p)/2
	if got := s.LRUKeys(); !slices.Equal(got, []string{"default/pod0", "default/pod2", "default/pod1"}) {
		t.Fatalf("LRU = %v", got)
	}

	// Warm request: 0.5 everywhere and the LRU is untouched.
	eps[2].Put(approxKey, epp.PrefixCacheMatchInfo{MatchBlocks: 1, TotalBlocks: 4})
	req := &epp.Request{ID: "warm"}
	near(t, "warm", score(s, req, eps), []float64{0.5, 0.5, 0.5})
	s.PreRequest(&epp.Cycle{}, req, resultFor("default", eps[0]))
	if got := s.LRUKeys(); !slices.Equal(got, []string{"default/pod0", "default/pod2", "default/pod1"}) {
		t.Fatalf("warm request changed the LRU: %v", got)
	}
	// MatchBlocks 0 everywhere is still cold.
	eps[2].Put(approxKey, epp.PrefixCacheMatchInfo{MatchBlocks: 0, TotalBlocks: 4})
	near(t, "zero match is cold", score(s, &epp.Request{}, eps), []float64{1, 0, 0.5})

	// Single candidate.
	near(t, "single", score(s, &epp.Request{}, eps[:1]), []float64{1})
	// PreRequest without a Score of the same request changes nothing.
	s.PreRequest(&epp.Cycle{}, &epp.Request{ID: "unscored"}, resultFor("default", eps[1]))
	if got := s.LRUKeys(); got[len(got)-1] != "default/pod1" || len(got) != 3 {
		t.Fatalf("unscored PreRequest changed the LRU: %v", got)
	}
}

func TestNoHitLRUPrefillAndCapacity(t *testing.T) {
	s := newScorer(t, NoHitLRUType, `{"lruSize":2}`).(*NoHitLRU)
	eps := endpoints(4)
	req := &epp.Request{}
	score(s, req, eps)
	res := resultFor("decode", eps[3])
	res.Profiles["prefill"] = &epp.ProfileResult{Targets: []*epp.Endpoint{eps[1]}}
	s.PreRequest(&epp.Cycle{}, req, res)
	if got := s.LRUKeys(); !slices.Equal(got, []string{"default/pod3", "default/pod1"}) {
		t.Fatalf("LRU = %v", got)
	}
	req = &epp.Request{}
	// N=4: never pod0 (1), pod2 (1−1/3); pod3 p0 → 1−(2+0)/3, pod1 p1 → 1−3/3.
	near(t, "capacity", score(s, req, eps), []float64{1, 0, 2.0 / 3, 1.0 / 3})
	s.PreRequest(&epp.Cycle{}, req, resultFor("default", eps[0]))
	if got := s.LRUKeys(); !slices.Equal(got, []string{"default/pod1", "default/pod0"}) {
		t.Fatalf("LRU after eviction = %v", got)
	}
	if err := factoryErr(t, NoHitLRUType, `{"prefixPluginName":"x","prefixPluginType":"y","lruSize":0}`); err != nil {
		t.Errorf("deprecated fields: %v", err)
	}
	if d := s.Consumes(); len(d) != 1 || d[0].Required || d[0].Key != approxKey {
		t.Errorf("consumes %v", d)
	}
}

func TestContextLengthAwareParseAndFilter(t *testing.T) {
	labels := []string{"0-2048", "2048-8192", "", " 100 - 200 ", "5-3", "1-2-3", "a-b", "4000-4000"}
	eps := endpoints(len(labels))
	for i, l := range labels {
		if l != "" {
			eps[i].Labels["ctx"] = l
		}
	}
	p, err := NewContextLengthAware("c", ContextLengthAwareParams{Label: "ctx", EnableFiltering: true})
	if err != nil {
		t.Fatal(err)
	}
	req := &epp.Request{Tokenized: &epp.TokenizedRequest{Prompts: [][]uint32{make([]uint32, 100), make([]uint32, 50)}}}
	// L = 150: in 0-2048 and " 100 - 200 "; unlabeled kept; bad labels dropped.
	got := epp.Names(p.Filter(&epp.Cycle{}, req, eps))
	want := []string{"default/pod0", "default/pod2", "default/pod3"}
	if !slices.Equal(got, want) {
		t.Fatalf("filter = %v, want %v", got, want)
	}
	// Scores: 100-200 at L=150: 0.3+0.7·(0.7/1.01+0.3·0.5); bad labels 0.
	sc := score(p, req, eps)
	near(t, "scores", sc[3:7], []float64{0.3 + 0.7*(0.7/(1+100.0/10000)+0.3*0.5), 0, 0, 0})
	// Without enableFiltering the filter passes everything through.
	q, _ := NewContextLengthAware("c", ContextLengthAwareParams{Label: "ctx"})
	if got := q.Filter(&epp.Cycle{}, req, eps); len(got) != len(eps) {
		t.Fatalf("pass-through kept %d", len(got))
	}
	// No tokens: L = 0.
	if got := epp.Names(p.Filter(&epp.Cycle{}, &epp.Request{}, eps)); !slices.Equal(got, []string{"default/pod0", "default/pod2"}) {
		t.Fatalf("L=0 filter = %v", got)
	}
	if err := factoryErr(t, ContextLengthAwareType, `{"label":""}`); err == nil || !strings.Contains(err.Error(), "'label' must be specified") {
		t.Errorf("empty label: %v", err)
	}
	if d := p.Consumes(); len(d) != 1 || d[0].Key != (epp.DataKey{Type: epp.TokenizedPromptType, Producer: epp.TokenProducer}) || !d[0].Required {
		t.Errorf("consumes %v", d)
	}
	var _ epp.Filter = p
	var _ epp.Scorer = p
}

func TestSessionAffinityEncodedHeader(t *testing.T) {
	eps := endpoints(3)
	s := newScorer(t, SessionAffinityType, "").(*SessionAffinity)
	tok := EncodeSessionToken("default/pod2")
	near(t, "pinned", score(s, &epp.Request{Headers: map[string]string{"x-session-token": tok}}, eps), []float64{0, 0, 1})
	near(t, "no header", score(s, &epp.Request{}, eps), []float64{0, 0, 0})
	near(t, "bad base64", score(s, &epp.Request{Headers: map[string]string{"x-session-token": "%%%"}}, eps), []float64{0, 0, 0})
	near(t, "absent pod", score(s, &epp.Request{Headers: map[string]string{"x-session-token": EncodeSessionToken("default/gone")}}, eps), []float64{0, 0, 0})

	name, val, ok := s.ResponseHeader(resultFor("default", eps[1]))
	if !ok || name != "x-session-token" || val != EncodeSessionToken("default/pod1") {
		t.Fatalf("response header %q=%q %v", name, val, ok)
	}

	// Filter variant with a custom header and profileName.
	fl, err := NewSessionAffinityFilter("f", SessionAffinityParams{
		EncodedEndpointHeaderConfig: EncodedEndpointHeaderConfig{HeaderName: "X-Prefill-Token"},
		ProfileName:                 "prefill",
	})
	if err != nil {
		t.Fatal(err)
	}
	req := &epp.Request{Headers: map[string]string{"x-prefill-token": EncodeSessionToken("default/pod0")}}
	if got := epp.Names(fl.Filter(&epp.Cycle{}, req, eps)); !slices.Equal(got, []string{"default/pod0"}) {
		t.Fatalf("filter = %v", got)
	}
	if got := fl.Filter(&epp.Cycle{}, &epp.Request{}, eps); len(got) != 3 {
		t.Fatalf("filter without session kept %d", len(got))
	}
	res := resultFor("decode", eps[2])
	res.Profiles["prefill"] = &epp.ProfileResult{Targets: []*epp.Endpoint{eps[0]}}
	if name, val, _ := fl.ResponseHeader(res); name != "x-prefill-token" || val != EncodeSessionToken("default/pod0") {
		t.Fatalf("prefill response header %q=%q", name, val)
	}
}

func TestSessionAffinitySessionID(t *testing.T) {
	eps := endpoints(3)
	s := newScorer(t, SessionAffinityType, `{"strategy":"session_id"}`).(*SessionAffinity)
	sec := int64(time.Second)
	req := func(id string) *epp.Request { return &epp.Request{Headers: map[string]string{"x-session-id": id}} }

	// First request: unbound → no preference; PreRequest binds to pod1.
	r := req("s1")
	near(t, "unbound", score(s, r, eps), []float64{0, 0, 0})
	s.PreRequest(cycleAt(0), r, resultFor("default", eps[1]))
	if ep, ok := s.Binding("s1"); !ok || ep != "default/pod1" {
		t.Fatalf("binding = %q %v", ep, ok)
	}
	// Second request pinned; routed elsewhere although pod1 was present:
	// no migration and no refresh.
	r = req("s1")
	s.Score(cycleAt(5*sec), r, eps, make([]float64, 3))
	near(t, "pinned", score(s, req("s1"), eps), []float64{0, 1, 0})
	s.PreRequest(cycleAt(5*sec), r, resultFor("default", eps[2]))
	if ep, _ := s.Binding("s1"); ep != "default/pod1" {
		t.Fatalf("migrated while present: %q", ep)
	}
	// pod1 absent from the candidates → migrate to the routed pod.
	r = req("s1")
	sub := []*epp.Endpoint{eps[0], eps[2]}
	near(t, "absent", score(s, r, sub), []float64{0, 0})
	s.PreRequest(cycleAt(6*sec), r, resultFor("default", eps[2]))
	if ep, _ := s.Binding("s1"); ep != "default/pod2" {
		t.Fatalf("not migrated: %q", ep)
	}
	// Refresh at 6 s; TTL 300 s, sweeps every 10 s: at 306 s the last tick
	// is 300 s (294 s unused) → kept; at 310 s, 304 s > 300 s → swept.
	near(t, "kept", score(s, req("s1"), eps), []float64{0, 0, 1})
	s.Score(cycleAt(306*sec), req("s1"), eps, make([]float64, 3))
	if _, ok := s.Binding("s1"); !ok {
		t.Fatal("swept too early")
	}
	sc := make([]float64, 3)
	s.Score(cycleAt(310*sec), req("s1"), eps, sc)
	if _, ok := s.Binding("s1"); ok || !slices.Equal(sc, []float64{0, 0, 0}) {
		t.Fatalf("not swept: %v", sc)
	}
	// No session id: nothing happens.
	s.PreRequest(cycleAt(311*sec), &epp.Request{}, resultFor("default", eps[0]))
	if len(s.core.bindings) != 0 {
		t.Fatal("bound a request without a session id")
	}
}

func TestSessionAffinitySessionIDSourcesAndFilter(t *testing.T) {
	eps := endpoints(3)
	f, err := NewSessionAffinityFilter("f", SessionAffinityParams{
		Strategy: StrategySessionID,
		SessionIDConfig: SessionIDConfig{
			Sources:            []SessionIDSource{{Header: "X-Agent"}, {Attribute: "SessionID"}},
			EvictionTTLSeconds: 1, EvictionSweepSeconds: 1,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if d := f.Consumes(); len(d) != 1 || !d[0].Required || d[0].Key != (epp.DataKey{Type: epp.SessionIDType, Producer: epp.SessionIDProducer}) {
		t.Fatalf("consumes %v", d)
	}
	r := &epp.Request{}
	r.Put(epp.DataKey{Type: epp.SessionIDType, Producer: epp.SessionIDProducer}, "sess-a")
	if got := f.Filter(cycleAt(0), r, eps); len(got) != 3 {
		t.Fatalf("unbound filter kept %d", len(got))
	}
	f.PreRequest(cycleAt(0), r, resultFor("default", eps[0]))
	r2 := &epp.Request{}
	r2.Put(epp.DataKey{Type: epp.SessionIDType, Producer: epp.SessionIDProducer}, "sess-a")
	if got := epp.Names(f.Filter(cycleAt(int64(time.Second/2)), r2, eps)); !slices.Equal(got, []string{"default/pod0"}) {
		t.Fatalf("filter = %v", got)
	}
	// The header source comes first.
	r3 := &epp.Request{Headers: map[string]string{"x-agent": "other"}}
	r3.Put(epp.DataKey{Type: epp.SessionIDType, Producer: epp.SessionIDProducer}, "sess-a")
	if got := f.Filter(cycleAt(int64(time.Second/2)), r3, eps); len(got) != 3 {
		t.Fatalf("header source ignored: %v", epp.Names(got))
	}
	if _, _, ok := f.ResponseHeader(resultFor("default", eps[0])); ok {
		t.Fatal("session_id writes no response header")
	}
}

func TestSessionAffinityParamErrors(t *testing.T) {
	tests := map[string]string{
		`{"strategy":"cookie"}`: "strategy must be",
		`{"strategy":"session_id","sessionIdConfig":{"sources":[{"header":"a","attribute":"b"}]}}`: "exactly one of header or attribute",
		`{"strategy":"session_id","sessionIdConfig":{"sources":[{}]}}`:                             "exactly one of header or attribute",
		`{"strategy":"session_id","sessionIdConfig":{"evictionTtlSeconds":-1}}`:                    "evictionTtlSeconds must be > 0",
		`{"strategy":"session_id","sessionIdConfig":{"evictionSweepSeconds":-1}}`:                  "evictionSweepSeconds must be > 0",
		`{"headerName":"x"}`: "unknown field",
	}
	for params, want := range tests {
		for _, typ := range []string{SessionAffinityType, SessionAffinityFilterType} {
			if err := factoryErr(t, typ, params); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s %s: err %v, want %q", typ, params, err, want)
			}
		}
	}
}

func TestEndpointAttributeScorer(t *testing.T) {
	eps := endpoints(4)
	eps[0].Labels["GPUUtilization"] = "0.2"
	eps[1].Labels["GPUUtilization"] = "0.6"
	eps[2].Labels["GPUUtilization"] = "not-a-number" // missing
	// eps[3] has a produced value that wins over any label.
	eps[3].Labels["GPUUtilization"] = "0.9"
	eps[3].Put(epp.DataKey{Type: "GPUUtilization", Producer: "dcgm-extractor"}, 1.0)

	// The shipped sim-epp-gpu-config.yaml parameters.
	fixed := newScorer(t, EndpointAttributeType, `{"attributeKey":"GPUUtilization","producer":"dcgm-extractor",
		"algorithm":{"type":"linear_lower_is_better","normalization":{"fixedRange":{"min":0.0,"max":1.0}}}}`)
	near(t, "fixed lower", score(fixed, nil, eps), []float64{0.8, 0.4, 0, 0})
	adaptive := newScorer(t, EndpointAttributeType, `{"attributeKey":"GPUUtilization","producer":"dcgm-extractor",
		"algorithm":{"type":"linear_higher_is_better","normalization":{"adaptiveRange":{}}}}`)
	// Range [0.2, 1.0] over endpoints that have the value.
	near(t, "adaptive higher", score(adaptive, nil, eps), []float64{0, 0.5, 0, 1})
	lower := newScorer(t, EndpointAttributeType, `{"attributeKey":"GPUUtilization","algorithm":{"type":"linear_lower_is_better"}}`)
	// Without producer the dcgm value is not seen: labels 0.2, 0.6, 0.9.
	near(t, "adaptive lower", score(lower, nil, eps), []float64{1, 3.0 / 7, 0, 0})
	// All equal → 1.0 for those with the value.
	eq := endpoints(3)
	eq[0].Labels["k"], eq[1].Labels["k"] = "5", "5"
	near(t, "all equal", score(newScorer(t, EndpointAttributeType, `{"attributeKey":"k","algorithm":{"type":"linear_lower_is_better"}}`), nil, eq), []float64{1, 1, 0})
	// Fixed range clamps.
	cl := endpoints(2)
	cl[0].Labels["k"], cl[1].Labels["k"] = "-3", "30"
	near(t, "clamp", score(newScorer(t, EndpointAttributeType, `{"attributeKey":"k","algorithm":{"type":"linear_higher_is_better","normalization":{"fixedRange":{"min":0,"max":10}}}}`), nil, cl), []float64{0, 1})

	errs := map[string]string{
		`{"algorithm":{"type":"linear_lower_is_better"}}`:     "non-empty attributeKey",
		`{"attributeKey":"k","algorithm":{"type":"sigmoid"}}`: "algorithm.type must be",
		`{"attributeKey":"k"}`:                                "algorithm.type must be",
		`{"attributeKey":"k","algorithm":{"type":"linear_lower_is_better","normalization":{"fixedRange":{"min":1,"max":1}}}}`:     "min < max",
		`{"attributeKey":"k","algorithm":{"type":"linear_lower_is_better","normalization":{"fixedRange":{},"adaptiveRange":{}}}}`: "at most one normalization",
	}
	for params, want := range errs {
		if err := factoryErr(t, EndpointAttributeType, params); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", params, err, want)
		}
	}
}

func TestEndpointAttributeFilter(t *testing.T) {
	eps := endpoints(3)
	eps[0].Labels["u"] = "0.5"
	eps[1].Labels["u"] = "0.95"
	// eps[2] missing.
	mk := func(op string, v float64, extra string) epp.Filter {
		t.Helper()
		params := `{"attribute":"u","algorithm":{"type":"threshold","threshold":{"operator":"` + op + `","value":` + jsonFloat(v) + `}}` + extra + `}`
		r := epp.NewRegistry()
		Register(r)
		f, _ := r.Lookup(EndpointAttrFilterType)
		p, err := f("f", json.RawMessage(params), nil)
		if err != nil {
			t.Fatal(err)
		}
		return p.(epp.Filter)
	}
	tests := []struct {
		op    string
		v     float64
		extra string
		want  []string
	}{
		{OpLessThanOrEqual, 0.9, "", []string{"default/pod0", "default/pod2"}},
		{OpLessThan, 0.5, "", []string{"default/pod2"}},
		{OpGreaterThan, 0.5, `,"onMissing":"Fail"`, []string{"default/pod1"}},
		{OpGreaterThanOrEqual, 0.5, `,"onMissing":"Fail"`, []string{"default/pod0", "default/pod1"}},
		{OpEqual, 0.95, `,"onMissing":"Fail"`, []string{"default/pod1"}},
		{OpNotEqual, 0.95, `,"onMissing":"Fail"`, []string{"default/pod0"}},
		{OpGreaterThan, 5, `,"onMissing":"Fail"`, []string{}},
		{OpGreaterThan, 5, `,"onMissing":"Fail","fallbackOnEmpty":true`, []string{"default/pod0", "default/pod1", "default/pod2"}},
	}
	for _, tt := range tests {
		got := epp.Names(mk(tt.op, tt.v, tt.extra).Filter(&epp.Cycle{}, &epp.Request{}, eps))
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s %v %s: %v, want %v", tt.op, tt.v, tt.extra, got, tt.want)
		}
	}
	// The shipped sim-epp-gpu-config.yaml parameters load.
	if err := factoryErr(t, EndpointAttrFilterType, `{"attribute":"GPUUtilization","producer":"dcgm-extractor","onMissing":"Pass","fallbackOnEmpty":true,"algorithm":{"type":"threshold","threshold":{"operator":"LessThanOrEqual","value":0.90}}}`); err != nil {
		t.Error(err)
	}
	errs := map[string]string{
		`{"algorithm":{"type":"threshold","threshold":{"operator":"LessThan","value":1}}}`:                          "non-empty attribute",
		`{"attribute":"u","onMissing":"Drop","algorithm":{"type":"threshold","threshold":{"operator":"LessThan"}}}`: "onMissing must be",
		`{"attribute":"u","algorithm":{"type":"topK"}}`:                                                             "algorithm.type must be",
		`{"attribute":"u","algorithm":{"type":"threshold"}}`:                                                        "requires algorithm.threshold",
		`{"attribute":"u","algorithm":{"type":"threshold","threshold":{"operator":"Between"}}}`:                     "threshold.operator must be",
	}
	for params, want := range errs {
		if err := factoryErr(t, EndpointAttrFilterType, params); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", params, err, want)
		}
	}
}

func jsonFloat(v float64) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestHeaderLabelAffinity(t *testing.T) {
	eps := endpoints(3)
	eps[0].Labels["tier"] = "gold"
	eps[1].Labels["tier"] = "silver"
	s := newScorer(t, HeaderLabelAffinityType, `{"headerName":"X-Tier","labelKey":"tier"}`)
	near(t, "match", score(s, &epp.Request{Headers: map[string]string{"x-tier": "gold"}}, eps), []float64{1, 0, 0})
	near(t, "no header", score(s, &epp.Request{}, eps), []float64{0, 0, 0})
	near(t, "no match", score(s, &epp.Request{Headers: map[string]string{"x-tier": "bronze"}}, eps), []float64{0, 0, 0})
	for params, want := range map[string]string{
		"":                       "requires parameters",
		`{"labelKey":"tier"}`:    "headerName is required",
		`{"headerName":"x-t"}`:   "labelKey is required",
		`{"header":"x","l":"y"}`: "unknown field",
	} {
		if err := factoryErr(t, HeaderLabelAffinityType, params); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err %v, want %q", params, err, want)
		}
	}
}

func TestLatencyCompositeFallback(t *testing.T) {
	eps := endpoints(3)
	eps[0].Metrics = epp.Metrics{WaitingQueueSize: 0, KVCacheUsagePercent: 0.2}
	eps[0].Put(approxKey, epp.PrefixCacheMatchInfo{MatchBlocks: 3, TotalBlocks: 4})
	eps[1].Metrics = epp.Metrics{WaitingQueueSize: 10, KVCacheUsagePercent: 0.5}
	eps[2].Metrics = epp.Metrics{WaitingQueueSize: 5, KVCacheUsagePercent: 1.0}
	eps[2].Put(approxKey, epp.PrefixCacheMatchInfo{MatchBlocks: 1, TotalBlocks: 0})
	// Equal thirds: e0 (0.8+1+0.75)/3 = 0.85; e1 (0.5+0+0)/3 → 0.17;
	// e2 (0+0.5+0)/3 → 0.17.
	near(t, "default", score(newScorer(t, LatencyType, ""), nil, eps), []float64{0.85, 0.17, 0.17})
	// Weights ≤ 0 → kv only.
	near(t, "kv only", score(newScorer(t, LatencyType, `{"compositeKVWeight":0,"compositeQueueWeight":0,"compositePrefixWeight":0}`), nil, eps), []float64{0.8, 0.5, 0})
	// Queue only; maxQ 0 → 1 for all.
	q := endpoints(2)
	near(t, "queue only, empty queues", score(newScorer(t, LatencyType, `{"compositeKVWeight":0,"compositePrefixWeight":0}`), nil, q), []float64{1, 1})
	if err := factoryErr(t, LatencyType, `{"headroomSelectionStrategy":"best"}`); err == nil {
		t.Error("bad strategy accepted")
	}
	d := newScorer(t, LatencyType, "").(*Latency).Consumes()
	if len(d) != 2 || d[0].Key != (epp.DataKey{Type: epp.LatencyPredictionType, Producer: epp.LatencyProducer}) || d[1].Key != approxKey {
		t.Errorf("consumes %v", d)
	}
}

func TestMMEmbeddingsCache(t *testing.T) {
	eps := endpoints(3)
	key := epp.DataKey{Type: epp.EncoderCacheMatchInfoType, Producer: epp.MMEmbeddingsProducer}
	eps[0].Put(key, epp.EncoderCacheMatchInfo{Matched: 3, Total: 4})
	eps[1].Put(key, &epp.EncoderCacheMatchInfo{Matched: 3, Total: 0})
	near(t, "mm", score(NewMMEmbeddingsCache("m"), nil, eps), []float64{0.75, 0, 0})
	// producerName selects the producer's key.
	other := epp.DataKey{Type: epp.EncoderCacheMatchInfoType, Producer: "mm2"}
	eps[2].Put(other, epp.EncoderCacheMatchInfo{Matched: 1, Total: 2})
	near(t, "mm producerName", score(newScorer(t, MMEmbeddingsCacheType, `{"producerName":"mm2"}`), nil, eps), []float64{0, 0, 0.5})
}
