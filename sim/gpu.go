package sim

import (
	"fmt"
	"net"
	"time"

	"github.com/eppsim/eppsim/epp"
)

// GPU telemetry: the replicas' dcgm-exporters and the EPP's
// dcgm-data-source polls (the EPP side is epp/gpu.go; docs/epp.md, "GPU telemetry").
//
// Convention. A replica's GPUs are busy while one of its engine steps is in
// flight, from BeginStep to the step's end; with tensor parallelism every
// GPU of the replica is equally busy, so the maximum over them, which
// dcgm-extractor takes, is that share. Each replica's exporter publishes at
// 0, W, 2W, … (W = Options.DCGMCollectInterval): at kW the busy time in
// ((k−1)W, kW] divided by W, counting the part of a step in flight up to
// kW; at 0 it publishes 0 (idle before the run). The exporters publish
// first at an instant (Early), so a poll at kW reads kW's value. The EPP's
// source polls at every N-th metrics scrape after the start
// (epp.GPUPollEvery) and stores, for each endpoint, the latest value
// published for its pod: the data-parallel ranks of one pod share its
// address's host, and so its exporter, whose maximum over the pod's GPUs
// is the busiest rank's share.
//
// Only a config with a dcgm-data-source feeding a dcgm-extractor gets any
// of this: the exporters' tick, like the scrape timer, re-arms only while
// the run is active; it is observation, counted in neither Result.Events
// nor Result.SimTime.

// DefaultDCGMCollectInterval is dcgm-exporter's default collect interval
// (-c, --collect-interval: 30000 ms).
const DefaultDCGMCollectInterval = int64(30 * time.Second)

// gpuBusy is one replica's busy-time account for its exporter.
type gpuBusy struct {
	from   int64 // start of the current collect window
	acc    int64 // busy ns in the window, of the steps ended in it
	start  int64 // start of the step in flight
	inStep bool
	// value is the last published share of busy time, in [0, 1].
	value float64
}

// begin records a step starting at t.
func (b *gpuBusy) begin(t int64) { b.start, b.inStep = t, true }

// end records the step in flight ending at t: its part in the current
// window counts.
func (b *gpuBusy) end(t int64) {
	b.acc += t - max(b.start, b.from)
	b.inStep = false
}

// publish closes the window ending at t, of length w, and returns its busy
// share; the part of a step in flight before t counts in this window, the
// rest in the next.
func (b *gpuBusy) publish(t, w int64) float64 {
	if b.inStep {
		b.acc += t - max(b.start, b.from)
	}
	b.value = float64(b.acc) / float64(w)
	b.acc, b.from = 0, t
	return b.value
}

// gpuTelemetry is the state of a run's GPU telemetry.
type gpuTelemetry struct {
	collect int64 // W
	every   []int // each poll's period in scrapes
	// pods groups the fleet's indexes by pod (address host), in fleet
	// order; pod[i] is replica i's group.
	pods  [][]int
	pod   []int
	ticks uint64 // exporter ticks fired
}

func newGPUTelemetry(fleet []*fleetReplica, polls []epp.GPUPoll, opts Options) (*gpuTelemetry, error) {
	g := &gpuTelemetry{collect: opts.DCGMCollectInterval}
	if g.collect == 0 {
		g.collect = DefaultDCGMCollectInterval
	}
	if g.collect < 0 {
		return nil, fmt.Errorf("dcgm-exporter collect interval %v: must be greater than 0", time.Duration(g.collect))
	}
	for _, p := range polls {
		g.every = append(g.every, epp.GPUPollEvery(p.Interval, opts.ScrapeInterval))
	}
	byHost := map[string]int{}
	for _, fr := range fleet {
		host, _, err := net.SplitHostPort(fr.spec.Address)
		if err != nil {
			host = fr.spec.Address
		}
		k, ok := byHost[host]
		if !ok {
			k = len(g.pods)
			byHost[host] = k
			g.pods = append(g.pods, nil)
		}
		g.pods[k] = append(g.pods[k], fr.idx)
		g.pod = append(g.pod, k)
	}
	return g, nil
}

// gpuTick is the exporters publishing; it re-arms while the run is active.
func (r *runner) gpuTick(now int64) {
	g := r.gpu
	g.ticks++
	for _, fr := range r.fleet {
		fr.busy.publish(now, g.collect)
	}
	if r.active() {
		r.loop.AtPhase(now+g.collect, Early, r, arg(evDCGM, 0))
	}
}

// gpuPoll runs the DCGM polls due at scrape number s (0 at time 0): a poll
// of period N scrapes is due at s = N, 2N, …; each stores every
// endpoint's pod's latest published value.
func (r *runner) gpuPoll(s int) {
	due := false
	for _, n := range r.gpu.every {
		due = due || (s > 0 && s%n == 0)
	}
	if !due {
		return
	}
	for i, fr := range r.fleet {
		v := 0.0
		for _, j := range r.gpu.pods[r.gpu.pod[i]] {
			v = max(v, r.fleet[j].busy.value)
		}
		_ = r.router.SetAttribute(fr.spec.Name, epp.GPUUtilizationKey, v)
	}
}
