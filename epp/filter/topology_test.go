package filter

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/epp"
)

// topoEndpoints: the decode pick d (host h1, rack r1, zone z1, region
// us) and prefill candidates a (same host), b (same rack), c (same zone),
// e (same region), f (no topology labels).
func topoEndpoints() (d *epp.Endpoint, cands []*epp.Endpoint) {
	ep := func(name string, labels map[string]string) *epp.Endpoint {
		return &epp.Endpoint{EndpointInfo: &epp.EndpointInfo{Name: name, Labels: labels}}
	}
	d = ep("d", map[string]string{DefaultHostnameLabel: "h1", DefaultRackLabel: "r1", DefaultZoneLabel: "z1", DefaultRegionLabel: "us"})
	cands = []*epp.Endpoint{
		ep("a", map[string]string{DefaultHostnameLabel: "h1", DefaultRackLabel: "r1", DefaultZoneLabel: "z1", DefaultRegionLabel: "us"}),
		ep("b", map[string]string{DefaultHostnameLabel: "h2", DefaultRackLabel: "r1", DefaultZoneLabel: "z1", DefaultRegionLabel: "us"}),
		ep("c", map[string]string{DefaultHostnameLabel: "h3", DefaultRackLabel: "r2", DefaultZoneLabel: "z1", DefaultRegionLabel: "us"}),
		ep("e", map[string]string{DefaultHostnameLabel: "h4", DefaultZoneLabel: "z2", DefaultRegionLabel: "us"}),
		ep("f", nil),
	}
	return d, cands
}

// topoHandle is a Handle holding a topology extractor built from params.
func topoHandle(t *testing.T, params string) *epp.Handle {
	t.Helper()
	h := epp.NewHandle(0)
	x, err := topologyExtractorFactory(TopologyExtractorType, json.RawMessage(params), h)
	if err != nil {
		t.Fatal(err)
	}
	h.Plugins[TopologyExtractorType] = x
	return h
}

func names(eps []*epp.Endpoint) []string {
	var out []string
	for _, e := range eps {
		out = append(out, e.Name)
	}
	return out
}

// TestTopologyAffinityFilter: minAffinity keeps the candidates at least
// that close to the decode pick (epp.md §9); it fails open without a peer,
// with a peer of unknown topology, and when no candidate is close enough.
func TestTopologyAffinityFilter(t *testing.T) {
	d, cands := topoEndpoints()
	h := topoHandle(t, "")
	req := &epp.Request{}
	req.Put(epp.PeerEndpointKey, d)
	for _, tc := range []struct {
		min  string
		want []string
	}{
		{"", []string{"a"}}, {"host", []string{"a"}}, {"rack", []string{"a", "b"}},
		{"zone", []string{"a", "b", "c"}}, {"region", []string{"a", "b", "c", "e"}},
	} {
		p, err := topologyAffinityFactory("f", json.RawMessage(`{"minAffinity":"`+tc.min+`"}`), h)
		if err != nil {
			t.Fatal(err)
		}
		if got := names(p.(epp.Filter).Filter(nil, req, cands)); !slices.Equal(got, tc.want) {
			t.Errorf("minAffinity %q kept %v, want %v", tc.min, got, tc.want)
		}
	}
	f, _ := topologyAffinityFactory("f", nil, h)
	all := names(cands)
	if got := names(f.(epp.Filter).Filter(nil, req, cands[1:])); !slices.Equal(got, all[1:]) {
		t.Errorf("nothing on the host: kept %v, want all (fail open)", got)
	}
	if got := names(f.(epp.Filter).Filter(nil, &epp.Request{}, cands)); !slices.Equal(got, all) {
		t.Errorf("no peer: kept %v", got)
	}
	unknown := &epp.Request{}
	unknown.Put(epp.PeerEndpointKey, cands[4])
	if got := names(f.(epp.Filter).Filter(nil, unknown, cands)); !slices.Equal(got, all) {
		t.Errorf("peer without topology: kept %v", got)
	}
	// Without an extractor in the configuration nothing has a topology.
	nf, _ := topologyAffinityFactory("f", nil, epp.NewHandle(0))
	if got := names(nf.(epp.Filter).Filter(nil, req, cands)); !slices.Equal(got, all) {
		t.Errorf("no extractor: kept %v", got)
	}
	for params, sub := range map[string]string{
		`{"minAffinity":"node"}`: `unknown topology level "node"`,
		`{"loadAllowance":1}`:    `unknown field "loadAllowance"`,
	} {
		if _, err := topologyAffinityFactory("f", json.RawMessage(params), h); err == nil || !strings.Contains(err.Error(), sub) {
			t.Errorf("%s: err %v, want %q", params, err, sub)
		}
	}
}

// TestTopologyExtractorLabels: the extractor reads the labels its
// parameters name, and a pod with none of them has no topology.
func TestTopologyExtractorLabels(t *testing.T) {
	h := topoHandle(t, `{"hostname":"node"}`)
	r := epp.NewTopologyResolver(h, "")
	got, ok := r.Of(&epp.EndpointInfo{Labels: map[string]string{"node": "n7", DefaultHostnameLabel: "ignored", DefaultZoneLabel: "z"}})
	if !ok || *got != (epp.Topology{Hostname: "n7", Zone: "z"}) {
		t.Errorf("topology %+v %v", got, ok)
	}
	if _, ok := r.Of(&epp.EndpointInfo{Labels: map[string]string{"llm-d.ai/role": "decode"}}); ok {
		t.Error("a pod without topology labels has a topology")
	}
	if x := h.Plugins[TopologyExtractorType].(*TopologyExtractor); !strings.Contains(x.Infrastructure(), "node, topology.kubernetes.io/rack") {
		t.Errorf("infrastructure note %q", x.Infrastructure())
	}
}
