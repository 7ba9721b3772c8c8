package epp

import "fmt"

// Node topology for the topology-affinity filter and scorer
// (../shared/spec/epp.md §1.4 topology-extractor, §4 topology-affinity-scorer,
// §9 topology-affinity-filter; pd-offload.md §A: the disagg handler
// publishes the decode pick for them).

// TopologyExtractorType is the topology extractor's type and default name.
const TopologyExtractorType = "topology-extractor"

// PeerEndpointKey is the request attribute under which a disaggregation
// handler publishes the endpoint its decode profile picked, before it
// runs the prefill profile; topology plugins grade prefill candidates by
// their proximity to it.
var PeerEndpointKey = DataKey{Type: "PeerEndpoint", Producer: "disagg-profile-handler"}

// Topology is where an endpoint runs. An empty field is unknown.
type Topology struct {
	Hostname, Rack, Zone, Region string
}

// Empty reports whether no field is known.
func (t *Topology) Empty() bool {
	return t == nil || (t.Hostname == "" && t.Rack == "" && t.Zone == "" && t.Region == "")
}

// TopologyLevel is how close two endpoints are, tightest first.
type TopologyLevel int

// Topology levels, from the tightest to none in common.
const (
	LevelHost TopologyLevel = iota
	LevelRack
	LevelZone
	LevelRegion
	LevelNone
)

// ParseTopologyLevel reads host, rack, zone or region.
func ParseTopologyLevel(s string) (TopologyLevel, error) {
	switch s {
	case "host":
		return LevelHost, nil
	case "rack":
		return LevelRack, nil
	case "zone":
		return LevelZone, nil
	case "region":
		return LevelRegion, nil
	}
	return LevelNone, fmt.Errorf("unknown topology level %q: want host, rack, zone or region", s)
}

// CompareTopology returns the tightest level at which a and b are both
// known and equal; LevelNone when there is none (or either is nil).
func CompareTopology(a, b *Topology) TopologyLevel {
	if a == nil || b == nil {
		return LevelNone
	}
	same := func(x, y string) bool { return x != "" && x == y }
	switch {
	case same(a.Hostname, b.Hostname):
		return LevelHost
	case same(a.Rack, b.Rack):
		return LevelRack
	case same(a.Zone, b.Zone):
		return LevelZone
	case same(a.Region, b.Region):
		return LevelRegion
	}
	return LevelNone
}

// TopologySource is a topology extractor: it tells an endpoint's topology
// from what the cluster says about its pod.
type TopologySource interface {
	TopologyOf(e *EndpointInfo) (*Topology, bool)
}

// TopologyResolver finds, at first use, the topology extractor a filter or
// scorer names (topologyProducerName; the default extractor when empty).
// Without one, no endpoint has a topology.
type TopologyResolver struct {
	handle *Handle
	name   string
	src    TopologySource
	done   bool
}

// NewTopologyResolver returns the resolver of the extractor named name
// (the default extractor when empty) among h's plugins.
func NewTopologyResolver(h *Handle, name string) *TopologyResolver {
	if name == "" {
		name = TopologyExtractorType
	}
	return &TopologyResolver{handle: h, name: name}
}

// Of returns e's topology, if the extractor knows one.
func (r *TopologyResolver) Of(e *EndpointInfo) (*Topology, bool) {
	if !r.done {
		r.done = true
		if r.handle != nil {
			r.src, _ = r.handle.Plugins[r.name].(TopologySource)
		}
	}
	if r.src == nil || e == nil {
		return nil, false
	}
	t, ok := r.src.TopologyOf(e)
	if !ok || t.Empty() {
		return nil, false
	}
	return t, true
}

// Peer returns the topology of the request's peer endpoint (the decode
// pick), if it has one.
func (r *TopologyResolver) Peer(req *Request) (*Topology, bool) {
	v, ok := req.Get(PeerEndpointKey)
	if !ok {
		return nil, false
	}
	e, ok := v.(*Endpoint)
	if !ok || e == nil {
		return nil, false
	}
	return r.Of(e.EndpointInfo)
}
