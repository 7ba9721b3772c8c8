package sim

import (
	"net/http"
	"testing"

	"github.com/eppsim/eppsim/workload"
)

// TestGatewayCircuitBreaker: with a limit of L, a request reaching the
// gateway while L earlier ones are still in flight fails at once (HTTP 500,
// gateway-overflow) without reaching a replica; a request's stream closes
// when its response has passed the gateway, its Completion, which the
// fixed output delay of clientFleet (32 tokens × 100 µs) puts after the
// engine's last step. The reference times come from one request alone.
func TestGatewayCircuitBreaker(t *testing.T) {
	fleet := clientFleet(t, 2)
	one, _ := run(t, []*workload.Request{stageReq(0, 0, 0, 0)}, fleet, Options{})
	done := one[0].Completion // request 0's response end, alone on a replica
	const delay = 32 * 100_000
	if done <= delay {
		t.Fatalf("reference request %+v", one[0])
	}
	for _, tc := range []struct {
		name    string
		limit   int
		at      []int64 // arrival of request i
		refused []bool
		peak    int // most in flight at once
	}{
		{"no limit", 0, []int64{0, 0, 0, 0}, []bool{false, false, false, false}, 4},
		// Without a limit the count still follows each response to its
		// end: a request in the output delay is in flight.
		{"no limit, in the output delay", 0, []int64{0, done - delay/2}, []bool{false, false}, 2},
		{"no limit, after the end", 0, []int64{0, done + 1}, []bool{false, false}, 1},
		{"burst over 2", 2, []int64{0, 0, 0, 0, 0}, []bool{false, false, true, true, true}, 2},
		{"burst of exactly 3", 3, []int64{0, 0, 0}, []bool{false, false, false}, 3},
		// Request 0 and 1 hold both streams until their responses end
		// (both at done, each alone on a replica): a request in the
		// output delay after the engine's last step is still refused,
		// one after the response end passes.
		{"stream held to the response end", 2, []int64{0, 0, done - delay/2, done + 1}, []bool{false, false, true, false}, 2},
		// A refused request holds nothing: request 3 passes as soon as
		// request 0 has ended, though 2 was refused in between.
		{"a refusal holds no stream", 1, []int64{0, 1, 2, done + 1}, []bool{false, true, true, false}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var reqs []*workload.Request
			want := 0
			for i, at := range tc.at {
				reqs = append(reqs, stageReq(int64(i), 0, 0, at))
				if tc.refused[i] {
					want++
				}
			}
			recs, res := run(t, reqs, fleet, Options{GatewayMaxRequests: tc.limit})
			if refusedBy(recs) != want || res.Rejected != want || res.Completed != len(reqs)-want || res.PeakInFlight != tc.peak {
				t.Fatalf("overflows %d rejected %d completed %d peak %d, want %d refused of %d, peak %d",
					refusedBy(recs), res.Rejected, res.Completed, res.PeakInFlight, want, len(reqs), tc.peak)
			}
			for _, r := range recs {
				i := int(r.ID)
				switch {
				case tc.refused[i]:
					if r.Outcome != Rejected || r.HTTPStatus != http.StatusInternalServerError || r.Cause != CauseGatewayOverflow || r.Replica != -1 || r.Arrival != tc.at[i] {
						t.Errorf("request %d: %+v, want refused by the gateway at %d", i, r, tc.at[i])
					}
				case r.Outcome != Completed || r.Replica < 0:
					t.Errorf("request %d: %+v, want completed", i, r)
				}
			}
		})
	}
}

// TestGatewayLimitRefusesNegative: a negative limit is an error, not
// "no limit".
func TestGatewayLimitRefusesNegative(t *testing.T) {
	_, err := Run(&sliceSource{reqs: []*workload.Request{stageReq(0, 0, 0, 0)}}, testRouter(), clientFleet(t, 1), Options{GatewayMaxRequests: -1})
	if err == nil {
		t.Fatal("no error for a negative gateway limit")
	}
}

// TestGatewayStageCap reproduces the signature of a stage larger than the
// limit whose requests all outlive its send span (the 73-capacity re-run,
// docs/benchmarks.md): inference-perf sends N requests, none ends before
// the last is sent, so exactly N − L fail whatever the routing.
func TestGatewayStageCap(t *testing.T) {
	fleet := clientFleet(t, 2)
	const n, limit = 9, 4
	var reqs []*workload.Request
	for i := range n {
		reqs = append(reqs, stageReq(int64(i), 0, 0, int64(i)*1000)) // 1 µs apart
	}
	recs, res := run(t, reqs, fleet, Options{GatewayMaxRequests: limit, Client: plan(n)})
	if res.Completed != limit || refusedBy(recs) != n-limit {
		t.Fatalf("completed %d refused %d, want %d and %d", res.Completed, refusedBy(recs), limit, n-limit)
	}
}

// refusedBy counts the records the gateway refused.
func refusedBy(recs []Record) int {
	n := 0
	for _, r := range recs {
		if r.Cause == CauseGatewayOverflow {
			n++
		}
	}
	return n
}
