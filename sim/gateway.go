package sim

import (
	"container/heap"
	"fmt"
	"net/http"
)

// The gateway in front of the EPP (docs/flow-control.md, "The gateway in
// front of the EPP").
//
// An Envoy-based gateway calls the EPP through its ext_proc filter: every
// request opens one gRPC stream to the EPP's ext_proc cluster when its
// headers arrive and holds it until its response has passed (the EPP
// processes the response too). Envoy bounds the streams of one cluster by
// its circuit breaker's max_requests, 1024 unless configured
// (envoy.config.cluster.v3.CircuitBreakers.Thresholds), and fails a request
// that finds them all taken at once, without queueing it and without
// reaching the EPP: the ext_proc call fails with gRPC UNAVAILABLE
// ("overflow") and, with the filter's default failure_mode_allow false,
// the client gets HTTP 500 (llm-d/llm-d issue #1582, envoyproxy/gateway
// issue #9997, envoyproxy/ai-gateway pull request #1884).
//
// Options.GatewayMaxRequests models that breaker for the whole gateway
// (the sum over its Envoy replicas, each of which counts its own
// streams): a request reaching the gateway while that many are open is
// answered 500 with cause CauseGatewayOverflow. 0 means no limit, eppsim's
// default, since whether a deployment's gateway keeps Envoy's default
// depends on the gateway (Envoy Gateway's generated EPP cluster keeps it;
// a gateway that sets thresholds of its own has its own limit, or none).

// DefaultEnvoyMaxRequests is Envoy's compiled-in circuit-breaker
// max_requests of a cluster: the streams its ext_proc cluster to the EPP
// holds at once unless the gateway configures it.
const DefaultEnvoyMaxRequests = 1024

// CauseGatewayOverflow is the Record.Cause of a request the gateway's
// circuit breaker refused (Options.GatewayMaxRequests).
const CauseGatewayOverflow = "gateway-overflow"

// gatewayAdmit opens f's stream through the gateway, arriving now, or
// refuses f (HTTP 500) when a limit is set and its streams are all open.
// It reports whether f passed. The streams are counted with or without a
// limit, for Result.PeakInFlight.
func (r *runner) gatewayAdmit(now int64, f *flight) bool {
	r.gatewayRelease(now)
	limit := r.opts.GatewayMaxRequests
	if limit > 0 && r.gatewayOpen >= limit {
		f.rec.Outcome, f.rec.HTTPStatus, f.rec.Cause = Rejected, http.StatusInternalServerError, CauseGatewayOverflow
		f.rec.Reason = fmt.Sprintf("gateway circuit breaker: %d requests already hold a stream to the EPP (its max_requests)", limit)
		r.finish(f)
		return false
	}
	r.gatewayOpen++
	r.res.PeakInFlight = max(r.res.PeakInFlight, r.gatewayOpen)
	f.gated = true
	return true
}

// gatewayEnded closes the stream of a request that ended now: at once, or
// when a completed response's end passes the gateway (its Completion,
// after the server's output delays), as the client sees it. A later end
// waits in gatewayEnds until the next arrival looks (gatewayRelease): the
// count matters only to arrivals, so it needs no event of its own.
func (r *runner) gatewayEnded(now int64, f *flight) {
	if !f.gated {
		return
	}
	f.gated = false
	if f.rec.Outcome == Completed && f.rec.Completion > now {
		heap.Push(&r.gatewayEnds, f.rec.Completion)
		return
	}
	r.gatewayOpen--
}

// gatewayRelease closes the streams whose responses ended by now: a
// response ending at the instant a request arrives has freed its stream.
func (r *runner) gatewayRelease(now int64) {
	for len(r.gatewayEnds) > 0 && r.gatewayEnds[0] <= now {
		heap.Pop(&r.gatewayEnds)
		r.gatewayOpen--
	}
}

// endTimes is a min-heap of response end times (container/heap).
type endTimes []int64

func (h endTimes) Len() int           { return len(h) }
func (h endTimes) Less(i, j int) bool { return h[i] < h[j] }
func (h endTimes) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *endTimes) Push(x any)        { *h = append(*h, x.(int64)) }
func (h *endTimes) Pop() any {
	old := *h
	v := old[len(old)-1]
	*h = old[:len(old)-1]
	return v
}
