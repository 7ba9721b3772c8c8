package picker

import "github.com/eppsim/eppsim/epp"

// RoundRobinType names eppsim's round-robin baseline picker. It is not an
// upstream plugin and is deliberately not registered: configurations that
// the real EPP would reject must not load. The simulator builds it directly
// for the `round-robin` baseline.
const RoundRobinType = "eppsim-round-robin-picker"

// RoundRobin picks the candidates in turn, ignoring scores: the i-th request
// goes to candidate i mod n (candidates in fleet order).
type RoundRobin struct {
	epp.TypedName
	next int
}

// NewRoundRobin returns a round-robin picker.
func NewRoundRobin(name string) *RoundRobin {
	return &RoundRobin{TypedName: epp.TypedName{PluginType: RoundRobinType, PluginName: name}}
}

// Pick implements epp.Picker.
func (p *RoundRobin) Pick(_ *epp.Cycle, _ *epp.Request, scored []epp.ScoredEndpoint) []*epp.Endpoint {
	if len(scored) == 0 {
		return nil
	}
	e := scored[p.next%len(scored)].Endpoint
	p.next++
	return []*epp.Endpoint{e}
}
