package picker

import (
	"math"

	"github.com/eppsim/eppsim/epp"
)

// VLLMDPLBType names eppsim's model of vLLM's internal data-parallel load
// balancer. Like RoundRobinType it is not an upstream EPP plugin and is
// deliberately not registered: the simulator builds it for the
// `vllm-dp-lb` baseline, which stands for vLLM's own API server in front
// of its data-parallel engines (a `validate latency` run with dp > 1).
const VLLMDPLBType = "eppsim-vllm-dp-lb-picker"

// The coordinator's cadence in the vLLM versions read (see VLLMDPLB).
const (
	// DefaultDPLBPublishInterval is the DP coordinator's least interval
	// between two publications of changed counts: 100 ms.
	DefaultDPLBPublishInterval = int64(100e6)
	// DefaultDPLBHeartbeat is its interval when no count changed: 5 s.
	DefaultDPLBHeartbeat = int64(5e9)
)

// DPLBOptions are the parameters of VLLMDPLB.
type DPLBOptions struct {
	// PublishInterval (ns) is the coordinator's least interval between two
	// publications when some engine's counts changed.
	PublishInterval int64
	// Heartbeat (ns) is the coordinator's interval between publications
	// when none changed: the counts are published again as they are.
	Heartbeat int64
	// NoEngineCounts: the engines report no counts, so every publication
	// carries zeros and only the heartbeat publishes. vLLM ran dense
	// models' data-parallel engines this way from vllm-project/vllm PR
	// #30739 (January 2026, before v0.15) until PR #49204 (July 2026), which
	// found that their counts were never published (issue #48808).
	NoEngineCounts bool
}

// DefaultDPLBOptions are the coordinator's cadence with the engines
// reporting their counts, as vLLM's data-parallel design has it.
func DefaultDPLBOptions() DPLBOptions {
	return DPLBOptions{PublishInterval: DefaultDPLBPublishInterval, Heartbeat: DefaultDPLBHeartbeat}
}

// VLLMDPLB is vLLM's internal data-parallel load balancer as one API server
// runs it (read at vllm-project/vllm, vllm/v1/engine/core_client.py
// DPLBAsyncMPClient.get_core_engine_for_request and
// vllm/v1/engine/coordinator.py DPCoordinatorProc, at commits 0090ad12 and
// de4c1fcb of coordinator.py and 00080ee1 of core_client.py, with the
// history of PRs #21617, #22910, #41626, #47420 and #49204; docs/latency.md
// "Data-parallel runs"). The candidates are the engines in rank order.
//
//   - Each engine reports its (waiting, running) request counts after its
//     steps when they changed; the DP coordinator publishes every engine's
//     latest counts to the API server PublishInterval after its previous
//     publication when some engine reported in between (at once when that
//     was longer ago), else Heartbeat after it. The picker replays that
//     timer from the time of the last publication, with the EPP's scrapes
//     as the engines' reports (Metrics.WaitingQueueSize,
//     RunningRequestsSize): the newest scrape's counts, when they differ
//     from the published ones, are published at the later of that scrape
//     and PublishInterval after the last publication; else a publication
//     falls due every Heartbeat. Counts that changed and changed back
//     between two scrapes publish nothing here (vLLM would republish
//     them), which matters only to a request arriving then. A latency run
//     scrapes every PublishInterval.
//   - A publication replaces the API server's copy of the counts
//     wholesale: the local increments since the previous one are dropped.
//     Before the first, the copy is zeros.
//   - For each request the API server takes the engine of the lowest score
//     4·waiting + running over its copy, scanning the engines in rank order
//     from its start index (0 with one API server) and keeping the first
//     minimum (strict <), then adds client_count (1 with one API server)
//     to its copy of that engine's waiting count, so that the requests
//     between two publications spread out.
//
// vLLM after PR #47420 rotates the start index after every choice and,
// after PR #49204, scores max(in-flight, waiting + running) plus a KV-usage
// term; neither is modelled (both came after v0.15.1, the version of the
// measured runs).
type VLLMDPLB struct {
	epp.TypedName
	opts DPLBOptions
	// local is the API server's copy of the counts, published the last
	// publication's, both by candidate position; lastPub is the time of
	// the last publication.
	local, published []dpCounts
	lastPub          int64
}

type dpCounts struct{ waiting, running int }

// NewVLLMDPLB returns vLLM's data-parallel load balancer; zero intervals in
// opts take the defaults.
func NewVLLMDPLB(name string, opts DPLBOptions) *VLLMDPLB {
	if opts.PublishInterval <= 0 {
		opts.PublishInterval = DefaultDPLBPublishInterval
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = DefaultDPLBHeartbeat
	}
	return &VLLMDPLB{TypedName: epp.TypedName{PluginType: VLLMDPLBType, PluginName: name}, opts: opts}
}

// Options returns the balancer's parameters.
func (p *VLLMDPLB) Options() DPLBOptions { return p.opts }

// Pick implements epp.Picker: the engine vLLM's API server sends the
// request to. Scores are ignored.
func (p *VLLMDPLB) Pick(c *epp.Cycle, _ *epp.Request, scored []epp.ScoredEndpoint) []*epp.Endpoint {
	n := len(scored)
	if n == 0 {
		return nil
	}
	if len(p.local) != n {
		// The first request (or a changed pool): the coordinator's state
		// starts at zeros, published at time 0.
		p.local, p.published = make([]dpCounts, n), make([]dpCounts, n)
		p.lastPub = 0
	}
	p.publish(c.Now, scored)
	best, low := 0, math.MaxInt
	for i := range n {
		if s := 4*p.local[i].waiting + p.local[i].running; s < low {
			best, low = i, s
		}
	}
	p.local[best].waiting++
	return []*epp.Endpoint{scored[best].Endpoint}
}

// publish applies the coordinator's publications up to now. Its timer is
// replayed from the time of the last one: the engines' counts changed
// (the newest scrape's differ from the published ones) publish them at the
// later of that scrape and PublishInterval after the last publication;
// else a publication falls due every Heartbeat, republishing the counts as
// they were (zeros without engine counts).
func (p *VLLMDPLB) publish(now int64, scored []epp.ScoredEndpoint) {
	if !p.opts.NoEngineCounts {
		t, changed := int64(0), false
		for i := range scored {
			m := &scored[i].Endpoint.Metrics
			t = max(t, m.UpdateTime)
			changed = changed || (dpCounts{m.WaitingQueueSize, m.RunningRequestsSize}) != p.published[i]
		}
		if at := max(t, p.lastPub+p.opts.PublishInterval); changed && at <= now {
			for i := range scored {
				m := &scored[i].Endpoint.Metrics
				p.published[i] = dpCounts{m.WaitingQueueSize, m.RunningRequestsSize}
			}
			copy(p.local, p.published)
			p.lastPub = at
			return
		}
	}
	if since := now - p.lastPub; since >= p.opts.Heartbeat {
		p.lastPub += since / p.opts.Heartbeat * p.opts.Heartbeat
		copy(p.local, p.published)
	}
}

var _ epp.Picker = (*VLLMDPLB)(nil)
