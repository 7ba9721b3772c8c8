package scorer

import (
	"encoding/json"

	"github.com/eppsim/eppsim/epp"
)

// TopologyAffinityType is the topology-affinity scorer's type.
const TopologyAffinityType = "topology-affinity-scorer"

// TopologyLevelScores are topology-affinity-scorer's scores by the
// tightest level a candidate shares with the peer (epp.md §4): host 1.0,
// rack 0.20, zone 0.05, region 0.02, nothing 0.
var TopologyLevelScores = [...]float64{epp.LevelHost: 1.0, epp.LevelRack: 0.20, epp.LevelZone: 0.05, epp.LevelRegion: 0.02, epp.LevelNone: 0}

// TopologyAffinityParams are topology-affinity-scorer's parameters.
type TopologyAffinityParams struct {
	// TopologyProducerName names the topology extractor (default
	// topology-extractor).
	TopologyProducerName string `json:"topologyProducerName"`
}

// TopologyAffinity is topology-affinity-scorer (α, epp.md §4): each
// candidate scores TopologyLevelScores of its proximity to the peer
// endpoint (the decode pick the disaggregation handler publishes); every
// candidate scores 0 without a peer topology, and a candidate without a
// topology scores 0.
type TopologyAffinity struct {
	epp.TypedName
	topo *epp.TopologyResolver
}

func topologyAffinityFactory(name string, params json.RawMessage, h *epp.Handle) (epp.Plugin, error) {
	var p TopologyAffinityParams
	if err := epp.DecodeParams(TopologyAffinityType, name, params, &p); err != nil {
		return nil, err
	}
	return &TopologyAffinity{TypedName: epp.TypedName{PluginType: TopologyAffinityType, PluginName: name},
		topo: epp.NewTopologyResolver(h, p.TopologyProducerName)}, nil
}

// Score implements epp.Scorer.
func (s *TopologyAffinity) Score(_ *epp.Cycle, req *epp.Request, eps []*epp.Endpoint, scores []float64) {
	peer, ok := s.topo.Peer(req)
	if !ok {
		return
	}
	for i, e := range eps {
		if t, ok := s.topo.Of(e.EndpointInfo); ok {
			scores[i] = TopologyLevelScores[epp.CompareTopology(peer, t)]
		}
	}
}
