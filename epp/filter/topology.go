package filter

import (
	"encoding/json"

	"github.com/eppsim/eppsim/epp"
)

// Topology plugin types (../shared/spec/epp.md §1.4, §9).
const (
	TopologyExtractorType      = epp.TopologyExtractorType
	TopologyAffinityFilterType = "topology-affinity-filter"
)

// The pod labels a topology extractor reads by default: Kubernetes'
// well-known topology labels, and a rack label.
const (
	DefaultHostnameLabel = "kubernetes.io/hostname"
	DefaultRackLabel     = "topology.kubernetes.io/rack"
	DefaultZoneLabel     = "topology.kubernetes.io/zone"
	DefaultRegionLabel   = "topology.kubernetes.io/region"
)

// TopologyExtractorParams name the labels of each topology field.
type TopologyExtractorParams struct {
	Hostname string `json:"hostname"`
	Rack     string `json:"rack"`
	Zone     string `json:"zone"`
	Region   string `json:"region"`
}

// TopologyExtractor is topology-extractor (α, epp.md §1.4): an endpoint's
// topology is read from its pod's labels, which in eppsim are the
// replica's labels in the fleet file (docs/replicas.md). A pod with none of
// the labels has no topology: the topology filter then keeps every
// endpoint and the scorer gives 0, as upstream does in a cluster without
// topology labels.
type TopologyExtractor struct {
	epp.TypedName
	p TopologyExtractorParams
}

// Infrastructure says what the simulator does for the data-layer plugin.
func (x *TopologyExtractor) Infrastructure() string {
	return "simulated natively: each endpoint's topology (host, rack, zone, region) comes from the replica's labels " +
		x.p.Hostname + ", " + x.p.Rack + ", " + x.p.Zone + ", " + x.p.Region
}

// TopologyOf implements epp.TopologySource.
func (x *TopologyExtractor) TopologyOf(e *epp.EndpointInfo) (*epp.Topology, bool) {
	t := &epp.Topology{Hostname: e.Labels[x.p.Hostname], Rack: e.Labels[x.p.Rack], Zone: e.Labels[x.p.Zone], Region: e.Labels[x.p.Region]}
	return t, !t.Empty()
}

func topologyExtractorFactory(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
	var p TopologyExtractorParams
	if err := epp.DecodeParams(TopologyExtractorType, name, params, &p); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		v   *string
		def string
	}{{&p.Hostname, DefaultHostnameLabel}, {&p.Rack, DefaultRackLabel}, {&p.Zone, DefaultZoneLabel}, {&p.Region, DefaultRegionLabel}} {
		if *f.v == "" {
			*f.v = f.def
		}
	}
	return &TopologyExtractor{TypedName: epp.TypedName{PluginType: TopologyExtractorType, PluginName: name}, p: p}, nil
}

// TopologyAffinityParams are topology-affinity-filter's parameters.
type TopologyAffinityParams struct {
	// MinAffinity is the loosest level a kept candidate may share with
	// the peer: host (default), rack, zone or region.
	MinAffinity string `json:"minAffinity"`
	// TopologyProducerName names the topology extractor (default
	// topology-extractor).
	TopologyProducerName string `json:"topologyProducerName"`
}

// TopologyAffinity is topology-affinity-filter (α, epp.md §9): with a
// peer endpoint of known topology (the decode pick, published by the
// disaggregation handler before the prefill profile runs), it keeps the
// candidates at least as close to the peer as minAffinity. It fails open:
// without a peer topology, or when no candidate is close enough, every
// candidate is kept. Candidates without a topology are never close.
type TopologyAffinity struct {
	epp.TypedName
	min  epp.TopologyLevel
	topo *epp.TopologyResolver
}

func topologyAffinityFactory(name string, params json.RawMessage, h *epp.Handle) (epp.Plugin, error) {
	p := TopologyAffinityParams{MinAffinity: "host"}
	if err := epp.DecodeParams(TopologyAffinityFilterType, name, params, &p); err != nil {
		return nil, err
	}
	if p.MinAffinity == "" {
		p.MinAffinity = "host"
	}
	lvl, err := epp.ParseTopologyLevel(p.MinAffinity)
	if err != nil {
		return nil, pluginErr(TopologyAffinityFilterType, name, "minAffinity: %v", err)
	}
	return &TopologyAffinity{TypedName: epp.TypedName{PluginType: TopologyAffinityFilterType, PluginName: name}, min: lvl,
		topo: epp.NewTopologyResolver(h, p.TopologyProducerName)}, nil
}

// Filter implements epp.Filter.
func (f *TopologyAffinity) Filter(_ *epp.Cycle, req *epp.Request, eps []*epp.Endpoint) []*epp.Endpoint {
	peer, ok := f.topo.Peer(req)
	if !ok {
		return eps
	}
	var kept []*epp.Endpoint
	for _, e := range eps {
		if t, ok := f.topo.Of(e.EndpointInfo); ok && epp.CompareTopology(peer, t) <= f.min {
			kept = append(kept, e)
		}
	}
	if len(kept) == 0 {
		return eps
	}
	return kept
}
