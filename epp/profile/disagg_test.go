package profile

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/epp"
	"github.com/eppsim/eppsim/epp/filter"
)

var approxKey = epp.DataKey{Type: epp.PrefixCacheMatchInfoType, Producer: epp.ApproxPrefixProducer}

// decider builds a decider of typ through the registry.
func decider(t *testing.T, typ, params string) Decider {
	t.Helper()
	r := epp.NewRegistry()
	RegisterDisagg(r)
	f, _ := r.Lookup(typ)
	var raw json.RawMessage
	if params != "" {
		raw = json.RawMessage(params)
	}
	p, err := f("d", raw, nil)
	if err != nil {
		t.Fatalf("%s %s: %v", typ, params, err)
	}
	return p.(Decider)
}

// tokens returns a request whose tokenized prompt has n tokens.
func tokens(n int) *epp.Request {
	return &epp.Request{ID: "r", Headers: map[string]string{}, Tokenized: &epp.TokenizedRequest{Prompts: [][]uint32{make([]uint32, n)}}}
}

// withMatch returns an endpoint whose approximate match is m blocks of bs.
func withMatch(m, bs int) *epp.Endpoint {
	e := &epp.Endpoint{EndpointInfo: &epp.EndpointInfo{Name: "d"}}
	e.Put(approxKey, epp.PrefixCacheMatchInfo{MatchBlocks: m, TotalBlocks: 100, BlockSizeTokens: bs, CachedBlockCount: m})
	return e
}

// TestPrefixBasedDecider: pd-offload.md A.3's conditions with the shipped
// nonCachedTokens 16 and 64-token router blocks, by hand: disaggregate iff
// T ≥ 16 and T − 64·m ≥ 16. The threshold is taken at N−1, N and N+1
// uncached tokens.
func TestPrefixBasedDecider(t *testing.T) {
	cases := []struct {
		name, params string
		t, m         int // prompt tokens, matched router blocks (-1: no match info)
		nilDecode    bool
		want         bool
		reason       string
		cached       int
	}{
		{"spec example: 1000 − 960 = 40", `{"nonCachedTokens":16}`, 1000, 15, false, true, epp.PDReasonDisaggregated, 960},
		{"spec example: 1024 cached ≥ 1000", `{"nonCachedTokens":16}`, 1000, 16, false, false, epp.PDReasonCached, 1024},
		{"N−1 = 15 uncached", `{"nonCachedTokens":16}`, 975, 15, false, false, epp.PDReasonCached, 960},
		{"N = 16 uncached", `{"nonCachedTokens":16}`, 976, 15, false, true, epp.PDReasonDisaggregated, 960},
		{"N+1 = 17 uncached", `{"nonCachedTokens":16}`, 977, 15, false, true, epp.PDReasonDisaggregated, 960},
		{"prompt below nonCachedTokens", `{"nonCachedTokens":16}`, 15, 0, false, false, epp.PDReasonShortPrompt, 0},
		{"prompt of exactly nonCachedTokens", `{"nonCachedTokens":16}`, 16, 0, false, true, epp.PDReasonDisaggregated, 0},
		{"promptTokens gate: 99 < 100", `{"nonCachedTokens":16,"promptTokens":100}`, 99, 0, false, false, epp.PDReasonShortPrompt, 0},
		{"promptTokens gate: 100", `{"nonCachedTokens":16,"promptTokens":100}`, 100, 0, false, true, epp.PDReasonDisaggregated, 0},
		{"disabled by default", ``, 5000, 0, false, false, epp.PDReasonDisabled, 0},
		{"no match info", `{"nonCachedTokens":16}`, 1000, -1, false, false, epp.PDReasonNoMatchInfo, 0},
		{"no decode endpoint", `{"nonCachedTokens":16}`, 1000, 0, true, false, epp.PDReasonDisabled, 0},
	}
	for _, c := range cases {
		d := decider(t, PrefixBasedPDDeciderType, c.params)
		var e *epp.Endpoint
		switch {
		case c.nilDecode:
		case c.m < 0:
			e = &epp.Endpoint{EndpointInfo: &epp.EndpointInfo{Name: "d"}}
		default:
			e = withMatch(c.m, 64)
		}
		got, dec := d.Decide(nil, tokens(c.t), e)
		if got != c.want || dec.Reason != c.reason || dec.CachedTokens != c.cached || dec.Decider != "d" {
			t.Errorf("%s: got %v %+v, want %v %s cached %d", c.name, got, dec, c.want, c.reason, c.cached)
		}
	}
	// The decider reads the approximate producer's key only (A.3): a
	// precise match on the same endpoint is ignored.
	e := &epp.Endpoint{EndpointInfo: &epp.EndpointInfo{Name: "d"}}
	e.Put(epp.DataKey{Type: epp.PrefixCacheMatchInfoType, Producer: epp.PrecisePrefixProducer},
		epp.PrefixCacheMatchInfo{MatchBlocks: 100, TotalBlocks: 100, BlockSizeTokens: 64, CachedBlockCount: 100})
	if ok, dec := decider(t, PrefixBasedPDDeciderType, `{"nonCachedTokens":16}`).Decide(nil, tokens(1000), e); ok || dec.Reason != epp.PDReasonNoMatchInfo {
		t.Errorf("precise match read: %v %+v", ok, dec)
	}
	if ok, dec := decider(t, AlwaysDisaggPDDeciderType, "").Decide(nil, tokens(7), nil); !ok || dec.PromptTokens != 7 {
		t.Errorf("always: %v %+v", ok, dec)
	}
	mm := decider(t, AlwaysDisaggMultimodalDeciderType, "")
	if ok, _ := mm.Decide(nil, tokens(7), withMatch(0, 64)); ok {
		t.Error("multimodal decider approved")
	}
	if ns, ok := mm.(epp.NotSimulated); !ok || !strings.Contains(ns.NotSimulatedReason(), "fallback:") {
		t.Error("multimodal decider not marked not simulated")
	}
	if _, ok := decider(t, PrefixBasedPDDeciderType, "").(epp.NotSimulated); ok {
		t.Error("prefix-based decider marked not simulated")
	}
}

func TestDeciderParamErrors(t *testing.T) {
	r := epp.NewRegistry()
	RegisterDisagg(r)
	for _, c := range []struct{ typ, params, want string }{
		{PrefixBasedPDDeciderType, `{"nonCachedTokens":-1}`, "nonCachedTokens parameter of prefix disaggregation decider cannot be negative"},
		{PrefixBasedPDDeciderType, `{"promptTokens":-1}`, "promptTokens cannot be negative"},
		{PrefixBasedPDDeciderType, `{"nonCachedToken":1}`, `unknown field "nonCachedToken"`},
		{PrefixBasedPDDeciderType, `{"prefixMatchInfoProducerName":"x"}`, "unknown field"},
		{AlwaysDisaggPDDeciderType, `{"x":1}`, "unknown field"},
	} {
		f, _ := r.Lookup(c.typ)
		if _, err := f("d", json.RawMessage(c.params), nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s: %v, want %q", c.typ, c.params, err, c.want)
		}
	}
}

// handle returns a plugin handle holding the named deciders.
func handle(t *testing.T, deciders map[string]string) *epp.Handle {
	t.Helper()
	r := epp.NewRegistry()
	RegisterDisagg(r)
	h := epp.NewHandle(1)
	for name, spec := range deciders {
		typ, params, _ := strings.Cut(spec, " ")
		f, _ := r.Lookup(typ)
		var raw json.RawMessage
		if params != "" {
			raw = json.RawMessage(params)
		}
		p, err := f(name, raw, h)
		if err != nil {
			t.Fatal(err)
		}
		h.Plugins[name] = p
	}
	return h
}

func buildWith(h *epp.Handle, typ, params string) (epp.Plugin, error) {
	r := epp.NewRegistry()
	RegisterDisagg(r)
	f, _ := r.Lookup(typ)
	var raw json.RawMessage
	if params != "" {
		raw = json.RawMessage(params)
	}
	return f("h", raw, h)
}

func TestDisaggParamErrors(t *testing.T) {
	h := handle(t, map[string]string{"pd": PrefixBasedPDDeciderType + ` {"nonCachedTokens":16}`})
	h.Plugins["nope"] = firstPicker{}
	for _, c := range []struct{ typ, params, want string }{
		{DisaggType, `{"stageOrder":"sideways"}`, `invalid stage order "sideways"`},
		{DisaggType, `{"stageOrder":"prefill-first","deciders":{"prefill":"pd"}}`, "prefill decider is not supported in prefill-first stage order"},
		{DisaggType, `{"deciders":{"prefill":"missing"}}`, "deciders.prefill plugin not found: missing"},
		{DisaggType, `{"deciders":{"prefill":"nope"}}`, "is not a disaggregation decider"},
		{DisaggType, `{"deciders":{"decode":"pd"}}`, `unknown field "decode"`},
		{DisaggType, `{"profiles":{"decode":"d"},"decodeProfile":"x"}`, "cannot mix"},
		{PDType, `{"primaryPort":70000}`, "invalid primaryPort"},
		{PDType, ``, "deciderPluginName plugin not found: prefix-based-pd-decider"},
		{PDType, `{"deciderPluginName":""}`, "decider plugin name is not defined"},
	} {
		if _, err := buildWith(h, c.typ, c.params); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s: %v, want %q", c.typ, c.params, err, c.want)
		}
	}
	for _, params := range []string{`{"deciders":{"prefill":"pd"}}`, `{"deciderPluginName":"pd"}`, `{"stageOrder":"Prefill_First"}`, ``} {
		p, err := buildWith(h, DisaggType, params)
		if err != nil {
			t.Fatalf("%s: %v", params, err)
		}
		if _, ns := p.(epp.NotSimulated); ns {
			t.Errorf("%s: marked not simulated", params)
		}
		if c, ok := p.(epp.DataConsumer); !ok || len(c.Consumes()) != 2 || c.Consumes()[0].Key != approxKey {
			t.Errorf("%s: consumes %v", params, c)
		}
	}
	if p, err := buildWith(h, PDType, `{"deciderPluginName":"pd","primaryPort":8000}`); err != nil {
		t.Fatal(err)
	} else if ns, ok := p.(epp.NotSimulated); !ok || !strings.Contains(ns.NotSimulatedReason(), "primaryPort 8000") {
		t.Errorf("primaryPort note: %v", p)
	}
}

// matchProducer attaches a fixed approximate match to every candidate.
type matchProducer struct{ m map[string]int }

func (matchProducer) Type() string            { return epp.ApproxPrefixProducer }
func (matchProducer) Name() string            { return epp.ApproxPrefixProducer }
func (matchProducer) Produces() []epp.DataKey { return []epp.DataKey{approxKey} }
func (p matchProducer) Produce(_ *epp.Cycle, _ *epp.Request, eps []*epp.Endpoint) error {
	for _, e := range eps {
		e.Put(approxKey, epp.PrefixCacheMatchInfo{MatchBlocks: p.m[e.Name], TotalBlocks: 16, BlockSizeTokens: 64, CachedBlockCount: p.m[e.Name]})
	}
	return nil
}

// pdRouter is the shipped P/D layout (pd-epp-config.yaml) with a
// first-candidate picker: profile prefill = prefill-filter, decode =
// decode-filter, decider prefix-based-pd-decider {nonCachedTokens: 16}.
func pdRouter(t *testing.T, params string, roles map[string]string, match map[string]int) *epp.Router {
	t.Helper()
	h := handle(t, map[string]string{
		"prefix-based-pd-decider":          PrefixBasedPDDeciderType + ` {"nonCachedTokens":16}`,
		"always-disagg-multimodal-decider": AlwaysDisaggMultimodalDeciderType,
	})
	p, err := buildWith(h, DisaggType, params)
	if err != nil {
		t.Fatal(err)
	}
	pick := firstPicker{}
	r := &epp.Router{
		Producers: []epp.DataProducer{matchProducer{match}},
		Profiles: []*epp.Profile{
			{Name: "encode", Filters: []epp.Filter{filter.NewEncode("encode-filter")}, Picker: pick},
			{Name: "prefill", Filters: []epp.Filter{filter.NewPrefill("prefill-filter")}, Picker: pick},
			{Name: "decode", Filters: []epp.Filter{filter.NewDecode("decode-filter")}, Picker: pick},
		},
		Handler:    p.(epp.ProfileHandler),
		PreRequest: []epp.PreRequestHook{p.(epp.PreRequestHook)},
	}
	for i, name := range []string{"d1", "p1", "b1", "d2"} {
		role, ok := roles[name]
		if !ok {
			continue
		}
		labels := map[string]string{}
		if role != "" {
			labels[filter.RoleLabel] = role
		}
		r.AddEndpoint(epp.EndpointInfo{Name: name, Address: "10.0.0." + string(rune('1'+i)) + ":8000", Labels: labels})
	}
	return r
}

// TestDisaggHandler drives the scheduling loop of spec §2.2 with the
// handler (pd-offload.md A.2): decode first, the decider on the decode
// pick, the prefill profile, the header and the recorded decision.
func TestDisaggHandler(t *testing.T) {
	pd := `{"deciders":{"encode":"always-disagg-multimodal-decider","prefill":"prefix-based-pd-decider"}}`
	fleet := map[string]string{"d1": "decode", "p1": "prefill", "b1": "both", "d2": ""}
	cases := []struct {
		name, params string
		roles        map[string]string
		match        map[string]int
		t            int
		target       string // decode pick
		prefill      string // header value ("" = none)
		reason       string
		cached       int
		err          string
	}{
		{"uncached: P/D", pd, fleet, nil, 1000, "d1", "10.0.0.2:8000", epp.PDReasonDisaggregated, 0, ""},
		{"decode pick holds the prompt", pd, fleet, map[string]int{"d1": 16}, 1000, "d1", "", epp.PDReasonCached, 1024, ""},
		// The decider reads the decode pick's match, not the best one's.
		{"another pod holds the prompt", pd, fleet, map[string]int{"p1": 16}, 1000, "d1", "10.0.0.2:8000", epp.PDReasonDisaggregated, 0, ""},
		{"short prompt", pd, fleet, nil, 15, "d1", "", epp.PDReasonShortPrompt, 0, ""},
		// No pod passes prefill-filter (unlabeled pods are dropped):
		// decode-only, silently (A.9).
		{"no prefill pod", pd, map[string]string{"d1": "decode", "d2": ""}, nil, 1000, "d1", "", epp.PDReasonNoPrefillEndpoint, 0, ""},
		// A "both" pod passes both filters; the prefill profile does not
		// exclude the decode pick (A.1).
		{"both pods only", pd, map[string]string{"b1": "both"}, nil, 1000, "b1", "10.0.0.3:8000", epp.PDReasonDisaggregated, 0, ""},
		{"no decider: decode-only, no decision", `{}`, fleet, nil, 1000, "d1", "", "", 0, ""},
		{"prefill-first", `{"stageOrder":"prefill-first"}`, fleet, nil, 1000, "d1", "10.0.0.2:8000", epp.PDReasonDisaggregated, 0, ""},
		{"no decode pod", pd, map[string]string{"p1": "prefill"}, nil, 1000, "", "", "", 0, "failed to find available decode workers"},
	}
	for _, c := range cases {
		r := pdRouter(t, c.params, c.roles, c.match)
		req := tokens(c.t)
		req.Headers[PrefillHeader] = "1.2.3.4:5" // inbound: always dropped
		res, err := r.Schedule(&epp.Cycle{}, req)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if res.PrimaryProfile != "decode" || res.Target().Name != c.target || req.Headers[PrefillHeader] != c.prefill {
			t.Errorf("%s: primary %s target %s header %q", c.name, res.PrimaryProfile, res.Target().Name, req.Headers[PrefillHeader])
		}
		if c.reason == "" {
			if res.PD != nil || req.Headers[PrefillHeader] != "" {
				t.Errorf("%s: decision %+v without a decider", c.name, res.PD)
			}
			continue
		}
		if res.PD == nil || res.PD.Reason != c.reason || res.PD.Disaggregated != (c.prefill != "") || res.PD.CachedTokens != c.cached {
			t.Errorf("%s: decision %+v, want %s cached %d", c.name, res.PD, c.reason, c.cached)
		}
		if _, ok := res.Profiles["encode"]; ok {
			t.Errorf("%s: the encode profile ran", c.name)
		}
		if _, ok := res.Profiles["prefill"]; ok != (c.prefill != "") {
			t.Errorf("%s: prefill result present %v", c.name, ok)
		}
		if _, ok := req.Headers[EncodersHeader]; ok {
			t.Errorf("%s: encoder header set", c.name)
		}
	}
}
