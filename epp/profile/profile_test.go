package profile

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/epp"
)

func build(t *testing.T, typ, params string) epp.ProfileHandler {
	t.Helper()
	p, err := tryBuild(typ, params)
	if err != nil {
		t.Fatalf("%s(%s): %v", typ, params, err)
	}
	return p.(epp.ProfileHandler)
}

func tryBuild(typ, params string) (epp.Plugin, error) {
	r := epp.NewRegistry()
	Register(r)
	f, _ := r.Lookup(typ)
	var raw json.RawMessage
	if params != "" {
		raw = json.RawMessage(params)
	}
	return f("h", raw, epp.NewHandle(1))
}

func profiles(names ...string) []*epp.Profile {
	out := make([]*epp.Profile, len(names))
	for i, n := range names {
		out[i] = &epp.Profile{Name: n}
	}
	return out
}

func TestRegisteredTypes(t *testing.T) {
	r := epp.NewRegistry()
	Register(r)
	want := []string{DataParallelType, DisaggType, PDType, SingleType,
		PrefixBasedPDDeciderType, AlwaysDisaggPDDeciderType, AlwaysDisaggMultimodalDeciderType}
	slices.Sort(want)
	if got := r.Types(); !slices.Equal(got, want) {
		t.Fatalf("types %v", got)
	}
}

func TestSingle(t *testing.T) {
	h := build(t, SingleType, "")
	ps := profiles("default")
	if got := h.PickProfiles(nil, nil, ps, map[string]*epp.ProfileResult{}); !slices.Equal(got, []string{"default"}) {
		t.Fatalf("first pick %v", got)
	}
	ok := &epp.ProfileResult{Targets: []*epp.Endpoint{{EndpointInfo: &epp.EndpointInfo{Name: "a"}}}}
	results := map[string]*epp.ProfileResult{"default": ok}
	if got := h.PickProfiles(nil, nil, ps, results); len(got) != 0 {
		t.Fatalf("second pick %v", got)
	}
	res, err := h.ProcessResults(nil, nil, results)
	if err != nil || res.PrimaryProfile != "default" || res.Target().Name != "a" {
		t.Fatalf("result %+v, %v", res, err)
	}
	// A failed profile (nil result) is an error.
	if _, err := h.ProcessResults(nil, nil, map[string]*epp.ProfileResult{"default": nil}); err == nil || !strings.Contains(err.Error(), "failed to run scheduler profile 'default'") {
		t.Fatalf("nil result: %v", err)
	}
	// More or fewer than one result is an error.
	if _, err := h.ProcessResults(nil, nil, map[string]*epp.ProfileResult{"a": ok, "b": ok}); err == nil {
		t.Fatal("two results accepted")
	}
	if _, err := h.ProcessResults(nil, nil, map[string]*epp.ProfileResult{}); err == nil {
		t.Fatal("no result accepted")
	}
	// With several profiles Pick returns all not yet run, in order.
	if got := h.PickProfiles(nil, nil, profiles("a", "b", "c"), map[string]*epp.ProfileResult{"b": nil}); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("multi pick %v", got)
	}
	if _, ok := h.(epp.NotSimulated); ok {
		t.Fatal("single-profile-handler is simulated")
	}
}

// TestDataParallel is flow-control.md §14.2: one profile runs; the request
// gets x-data-parallel-host-port = the chosen rank's ip:port; every target
// becomes a clone on primaryPort with the same ID and metrics and no
// attributes; with two profiles nothing runs.
func TestDataParallel(t *testing.T) {
	h := build(t, DataParallelType, `{"primaryPort":8000}`)
	if _, ok := h.(epp.NotSimulated); ok {
		t.Fatal("data-parallel-profile-handler is simulated")
	}
	if got := h.PickProfiles(nil, nil, profiles("prefill", "decode"), map[string]*epp.ProfileResult{}); len(got) != 0 {
		t.Errorf("two profiles: picked %v, want none", got)
	}
	ps := profiles("default")
	if got := h.PickProfiles(nil, nil, ps, map[string]*epp.ProfileResult{}); !slices.Equal(got, []string{"default"}) {
		t.Fatalf("pick %v", got)
	}
	key := epp.DataKey{Type: epp.PrefixCacheMatchInfoType, Producer: epp.ApproxPrefixProducer}
	rank := &epp.Endpoint{EndpointInfo: &epp.EndpointInfo{Name: "ns/pod-rank-2", Address: "10.0.0.3:8002", Labels: map[string]string{"llm-d.ai/role": "decode"}},
		Metrics: epp.Metrics{WaitingQueueSize: 3}}
	rank.Put(key, epp.PrefixCacheMatchInfo{MatchBlocks: 2, TotalBlocks: 4})
	results := map[string]*epp.ProfileResult{"default": {Targets: []*epp.Endpoint{rank}}}
	if again := h.PickProfiles(nil, nil, ps, results); len(again) != 0 {
		t.Errorf("second pick %v", again)
	}
	req := &epp.Request{}
	res, err := h.ProcessResults(nil, req, results)
	if err != nil {
		t.Fatal(err)
	}
	if req.Headers[epp.DataParallelHeader] != "10.0.0.3:8002" {
		t.Errorf("header %q", req.Headers[epp.DataParallelHeader])
	}
	tgt := res.Target()
	if tgt == rank || tgt.Name != "ns/pod-rank-2" || tgt.Address != "10.0.0.3:8000" || tgt.Metrics.WaitingQueueSize != 3 || tgt.Labels["llm-d.ai/role"] != "decode" {
		t.Errorf("target %+v %+v", tgt.EndpointInfo, tgt.Metrics)
	}
	if _, ok := tgt.Get(key); ok {
		t.Error("the clone kept an attribute")
	}
	if rank.Address != "10.0.0.3:8002" {
		t.Error("the candidate itself was changed")
	}
	if _, err := h.ProcessResults(nil, &epp.Request{}, map[string]*epp.ProfileResult{"default": nil}); err == nil {
		t.Error("failed profile accepted")
	}
	// An explicit 0 is accepted: port "0".
	z := build(t, DataParallelType, `{"primaryPort":0}`)
	res, _ = z.ProcessResults(nil, &epp.Request{}, map[string]*epp.ProfileResult{"default": {Targets: []*epp.Endpoint{rank}}})
	if res.Target().Address != "10.0.0.3:0" {
		t.Errorf("primaryPort 0: %s", res.Target().Address)
	}
}

func TestFallbackParamErrors(t *testing.T) {
	errs := []struct{ typ, params, want string }{
		{DataParallelType, `{"primaryPort":-1}`, "invalid primaryPort"},
		{DataParallelType, `{"primaryPort":65536}`, "invalid primaryPort"},
		{DataParallelType, `{"port":1}`, "unknown field"},
	}
	for _, e := range errs {
		if _, err := tryBuild(e.typ, e.params); err == nil || !strings.Contains(err.Error(), e.want) {
			t.Errorf("%s %s: err %v, want %q", e.typ, e.params, err, e.want)
		}
	}
}

// The handlers drive the Router's scheduling loop end to end.
func TestRouterWithHandlers(t *testing.T) {
	pick := &firstPicker{}
	for _, typ := range []string{SingleType, DisaggType} {
		var profs []*epp.Profile
		if typ == SingleType {
			profs = []*epp.Profile{{Name: "default", Picker: pick}}
		} else {
			profs = []*epp.Profile{{Name: "prefill", Picker: pick}, {Name: "decode", Picker: pick}}
		}
		r := &epp.Router{Profiles: profs, Handler: build(t, typ, "")}
		r.AddEndpoint(epp.EndpointInfo{Name: "ns/a"})
		r.AddEndpoint(epp.EndpointInfo{Name: "ns/b"})
		res, err := r.Schedule(&epp.Cycle{}, &epp.Request{ID: "1"})
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		if res.Target().Name != "ns/a" || len(res.Profiles) != 1 {
			t.Fatalf("%s: result %+v", typ, res)
		}
	}
}

type firstPicker struct{}

func (firstPicker) Type() string { return "first" }
func (firstPicker) Name() string { return "first" }
func (firstPicker) Pick(_ *epp.Cycle, _ *epp.Request, s []epp.ScoredEndpoint) []*epp.Endpoint {
	if len(s) == 0 {
		return nil
	}
	return []*epp.Endpoint{s[0].Endpoint}
}
