package scorer

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/eppsim/eppsim/epp"
	"github.com/eppsim/eppsim/epp/filter"
)

// TestTopologyAffinityScorer: candidates score by the tightest level they
// share with the decode pick (epp.md §4): same host 1, same rack 0.2,
// same zone 0.05, same region 0.02, nothing or no topology 0; without a
// peer every candidate scores 0.
func TestTopologyAffinityScorer(t *testing.T) {
	h := epp.NewHandle(0)
	reg := epp.NewRegistry()
	filter.Register(reg)
	xf, _ := reg.Lookup(filter.TopologyExtractorType)
	x, err := xf(filter.TopologyExtractorType, nil, h)
	if err != nil {
		t.Fatal(err)
	}
	h.Plugins[filter.TopologyExtractorType] = x
	ep := func(host, rack, zone, region string) *epp.Endpoint {
		l := map[string]string{}
		for k, v := range map[string]string{filter.DefaultHostnameLabel: host, filter.DefaultRackLabel: rack,
			filter.DefaultZoneLabel: zone, filter.DefaultRegionLabel: region} {
			if v != "" {
				l[k] = v
			}
		}
		return &epp.Endpoint{EndpointInfo: &epp.EndpointInfo{Labels: l}}
	}
	peer := ep("h1", "r1", "z1", "us")
	cands := []*epp.Endpoint{ep("h1", "r9", "z9", "eu"), ep("h2", "r1", "z1", "us"), ep("h3", "r2", "z1", "us"),
		ep("h4", "", "z2", "us"), ep("h5", "r5", "z5", "eu"), ep("", "", "", "")}
	s, err := topologyAffinityFactory("s", json.RawMessage(`{"topologyProducerName":"topology-extractor"}`), h)
	if err != nil {
		t.Fatal(err)
	}
	req := &epp.Request{}
	req.Put(epp.PeerEndpointKey, peer)
	scores := make([]float64, len(cands))
	s.(epp.Scorer).Score(nil, req, cands, scores)
	if want := []float64{1, 0.2, 0.05, 0.02, 0, 0}; !slices.Equal(scores, want) {
		t.Errorf("scores %v, want %v", scores, want)
	}
	clear(scores)
	s.(epp.Scorer).Score(nil, &epp.Request{}, cands, scores)
	if slices.Max(scores) != 0 {
		t.Errorf("no peer: scores %v", scores)
	}
	// A producer name no plugin has: no topology, every score 0.
	other, _ := topologyAffinityFactory("s", json.RawMessage(`{"topologyProducerName":"elsewhere"}`), h)
	other.(epp.Scorer).Score(nil, req, cands, scores)
	if slices.Max(scores) != 0 {
		t.Errorf("unknown extractor: scores %v", scores)
	}
}
