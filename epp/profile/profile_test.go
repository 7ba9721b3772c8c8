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

func TestDataParallelFallback(t *testing.T) {
	h := build(t, DataParallelType, `{"primaryPort":8000}`)
	ns, ok := h.(epp.NotSimulated)
	if !ok || !strings.Contains(ns.NotSimulatedReason(), "not model") || !strings.Contains(ns.NotSimulatedReason(), DataParallelType) {
		t.Fatalf("not-simulated reason %v", ns)
	}
	for _, tt := range []struct {
		profiles []string
		want     string
	}{{[]string{"default"}, "default"}, {[]string{"prefill", "decode"}, "decode"}} {
		ps := profiles(tt.profiles...)
		if got := h.PickProfiles(nil, nil, ps, map[string]*epp.ProfileResult{}); !slices.Equal(got, []string{tt.want}) {
			t.Errorf("pick %v, want %s", got, tt.want)
			continue
		}
		ok2 := &epp.ProfileResult{Targets: []*epp.Endpoint{{EndpointInfo: &epp.EndpointInfo{Name: "e"}}}}
		results := map[string]*epp.ProfileResult{tt.want: ok2}
		if again := h.PickProfiles(nil, nil, ps, results); len(again) != 0 {
			t.Errorf("second pick %v", again)
		}
		res, err := h.ProcessResults(nil, nil, results)
		if err != nil || res.PrimaryProfile != tt.want || res.Target().Name != "e" {
			t.Errorf("result %+v %v", res, err)
		}
		if _, err := h.ProcessResults(nil, nil, map[string]*epp.ProfileResult{tt.want: nil}); err == nil {
			t.Error("failed profile accepted")
		}
	}
}

func TestFallbackParamErrors(t *testing.T) {
	errs := []struct{ typ, params, want string }{
		{DataParallelType, `{"primaryPort":-1}`, "invalid primaryPort"},
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
