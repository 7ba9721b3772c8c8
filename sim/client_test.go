package sim

import (
	"testing"

	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/workload"
)

// clientFleet is n replicas with a fixed (jitter-free) ingest and output
// delay, so that identical requests alone on a replica take identical
// times, and the client sees a response end after the engine's last step.
func clientFleet(t *testing.T, n int) []ReplicaSpec {
	t.Helper()
	fleet := testFleet(t, n, 4000)
	c := replica.DefaultCalibration()
	c.Coefficients.IngestUs, c.Coefficients.PerOutputTokenUs, c.Coefficients.IngestJitter = 2000, 100, 0
	for i := range fleet {
		fleet[i].Preset = fleet[i].Preset.WithCalibration(c, "client-test")
		fleet[i].Preset.StepModel = "calibrated"
	}
	return fleet
}

// stageReq is request id of stage st, scheduled at at on a stage schedule
// starting at start: a distinct 256-token prompt (no cache hits) and 32
// output tokens.
func stageReq(id int64, st int, start, at int64) *workload.Request {
	r := req(id, at, tokens(int(id)*1000, 256), 32)
	r.Stage, r.StageStart = st, start
	return r
}

func plan(stages ...int) *workload.ClientPlan {
	return &workload.ClientPlan{StageRequests: stages, Lead: second, Poll: second, Interval: second}
}

// TestClientConcurrencyCap: N replicas behind round-robin and a cap of
// N: request i goes to replica i mod N, where request i-N has just ended,
// so every request runs alone on its replica and takes the same time S
// (request 0's E2E). A request is sent at the later of its scheduled time
// i·g and the end of the request N places before it:
// send(i) = max(i·g, send(i-N) + S), which with every request scheduled
// at 0 is (i div N)·S, and with g >= S just i·g. Its TTFT and E2E start
// at the send, so they are the same for every request.
func TestClientConcurrencyCap(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cap    int
		gap    func(s int64) int64 // schedule spacing, from S
		closed func(i int, s int64) int64
	}{
		{"cap1-burst", 1, func(int64) int64 { return 0 }, func(i int, s int64) int64 { return int64(i) * s }},
		{"cap2-burst", 2, func(int64) int64 { return 0 }, func(i int, s int64) int64 { return int64(i/2) * s }},
		{"cap3-burst", 3, func(int64) int64 { return 0 }, func(i int, s int64) int64 { return int64(i/3) * s }},
		// Scheduled slower than one at a time: nobody waits.
		{"cap1-slow", 1, func(s int64) int64 { return s + s/2 }, func(i int, s int64) int64 { return int64(i) * (s + s/2) }},
		// Scheduled S/3 apart with two slots: the pairs of sends wait.
		{"cap2-third", 2, func(s int64) int64 { return s / 3 }, nil},
		// Scheduled 0.4·S apart with two slots: request i-2 ends at
		// (i-2)·0.4·S + S, 0.2·S after request i's scheduled time.
		{"cap2-0.4", 2, func(s int64) int64 { return s * 4 / 10 }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fleet := clientFleet(t, tc.cap)
			// S: one request alone.
			one, _ := run(t, []*workload.Request{stageReq(0, 0, 0, 0)}, fleet, Options{})
			s := one[0].E2E
			if s <= 0 || one[0].Completion <= one[0].FirstToken {
				t.Fatalf("reference request %+v", one[0])
			}
			g := tc.gap(s)
			const n = 7
			var reqs []*workload.Request
			want := make([]int64, n)
			waited := false
			for i := range n {
				reqs = append(reqs, stageReq(int64(i), 0, 0, int64(i)*g))
				want[i] = int64(i) * g
				if i >= tc.cap {
					want[i] = max(want[i], want[i-tc.cap]+s)
				}
				if tc.closed != nil && want[i] != tc.closed(i, s) {
					t.Fatalf("recurrence %d, closed form %d at %d", want[i], tc.closed(i, s), i)
				}
				waited = waited || want[i] > int64(i)*g
			}
			if !waited && tc.name != "cap1-slow" {
				t.Fatal("no request waits: the case tests nothing")
			}
			p := plan(len(reqs))
			p.MaxConcurrency = tc.cap
			recs, res := run(t, reqs, fleet, Options{Client: p})
			if res.Completed != len(reqs) {
				t.Fatalf("completed %d of %d", res.Completed, len(reqs))
			}
			for _, r := range recs {
				i := int(r.ID)
				if r.Arrival != want[i] {
					t.Errorf("request %d sent at %d, want %d (S %d, gap %d)", i, r.Arrival, want[i], s, g)
				}
				if r.TTFT != one[0].TTFT || r.E2E != s {
					t.Errorf("request %d: TTFT %d E2E %d, want %d and %d (from the send)", i, r.TTFT, r.E2E, one[0].TTFT, s)
				}
			}
		})
	}
}

// TestClientNoCapIsOpenLoop: without a cap (or with one never reached)
// every request is sent at its scheduled time, as without the client.
func TestClientNoCapIsOpenLoop(t *testing.T) {
	mk := func() []*workload.Request {
		var out []*workload.Request
		for i := range 6 {
			out = append(out, stageReq(int64(i), 0, 0, int64(i)*second/10))
		}
		return out
	}
	fleet := clientFleet(t, 2)
	open, _ := run(t, mk(), fleet, Options{})
	for _, c := range []int{0, 6, 100} {
		p := plan(6)
		p.MaxConcurrency = c
		got, _ := run(t, mk(), fleet, Options{Client: p})
		for i := range open {
			if got[i].Arrival != open[i].Arrival || got[i].TTFT != open[i].TTFT || got[i].E2E != open[i].E2E {
				t.Errorf("cap %d request %d: %+v, open loop %+v", c, i, got[i], open[i])
			}
		}
	}
}

// TestClientTimeout: a request not complete Timeout after its send is
// aborted and fails (client-timeout); its slot goes to the next request at
// that instant, and the aborted request leaves nothing on its replica.
func TestClientTimeout(t *testing.T) {
	fleet := clientFleet(t, 1)
	one, _ := run(t, []*workload.Request{stageReq(0, 0, 0, 0)}, fleet, Options{})
	s := one[0].E2E
	for _, tc := range []struct {
		name     string
		timeout  int64
		wantFail bool
	}{
		{"shorter", s / 2, true},
		{"longer", 2 * s, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := plan(2)
			p.MaxConcurrency, p.Timeout = 1, tc.timeout
			recs, res := run(t, []*workload.Request{stageReq(0, 0, 0, 0), stageReq(1, 0, 0, 0)}, fleet, Options{Client: p})
			if len(recs) != 2 || res.InFlight != 0 || res.HeldAtEnd != 0 {
				t.Fatalf("records %d, in flight %d, blocks held %d", len(recs), res.InFlight, res.HeldAtEnd)
			}
			byID := map[int64]Record{}
			for _, r := range recs {
				byID[r.ID] = r
			}
			first, second := byID[0], byID[1]
			if !tc.wantFail {
				if first.Outcome != Completed || second.Arrival != s || res.Rejected != 0 {
					t.Fatalf("first %+v, second sent at %d (want %d)", first, second.Arrival, s)
				}
				return
			}
			if first.Outcome != Rejected || first.Cause != CauseClientTimeout || first.HTTPStatus != 0 || res.Rejected != 2 {
				t.Fatalf("first %s/%s (HTTP %d), rejected %d: want both timed out", first.Outcome, first.Cause, first.HTTPStatus, res.Rejected)
			}
			if second.Arrival != tc.timeout || second.Outcome != Rejected {
				t.Fatalf("second sent at %d (want %d, the first's timeout), outcome %s", second.Arrival, tc.timeout, second.Outcome)
			}
		})
	}
}

// TestClientStages: stage k+1 is enqueued at the load generator's first
// poll (every Poll from stage k's enqueueing, Lead before its schedule)
// that finds stage k's requests all ended, plus Interval; its schedule
// starts Lead later, its requests keeping their places in it.
func TestClientStages(t *testing.T) {
	fleet := clientFleet(t, 2)
	const ms = int64(1e6)
	for _, tc := range []struct {
		name                 string
		poll, interval, lead int64
	}{
		{"inference-perf", second, second, second},
		{"no-poll", 0, 2 * second, second},
		{"interval-0", second, 0, second},
		{"coarse-poll", 5 * second, 0, second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Stage 0: two requests at 0 and 100 ms. Stage 1 as generated
			// open-loop starts its schedule at 40 s (far from where it
			// will run); its requests sit at +0 and +300 ms in it.
			reqs := []*workload.Request{stageReq(0, 0, 0, 0), stageReq(1, 0, 0, 100*ms),
				stageReq(2, 1, 40*second, 40*second), stageReq(3, 1, 40*second, 40*second+300*ms)}
			p := &workload.ClientPlan{StageRequests: []int{2, 2}, Lead: tc.lead, Poll: tc.poll, Interval: tc.interval}
			recs, res := run(t, reqs, fleet, Options{Client: p})
			if res.Completed != 4 {
				t.Fatalf("completed %d", res.Completed)
			}
			byID := map[int64]Record{}
			for _, r := range recs {
				byID[r.ID] = r
			}
			end0 := max(byID[0].Completion, byID[1].Completion)
			enq0 := -tc.lead
			seen := end0
			if tc.poll > 0 {
				seen = enq0 + (end0-enq0+tc.poll-1)/tc.poll*tc.poll
			}
			origin1 := seen + tc.interval + tc.lead
			if byID[0].Arrival != 0 || byID[1].Arrival != 100*ms {
				t.Errorf("stage 0 sent at %d and %d", byID[0].Arrival, byID[1].Arrival)
			}
			if byID[2].Arrival != origin1 || byID[3].Arrival != origin1+300*ms {
				t.Errorf("stage 1 sent at %d and %d, want %d and %d (stage 0 ended %d, seen %d)",
					byID[2].Arrival, byID[3].Arrival, origin1, origin1+300*ms, end0, seen)
			}
		})
	}
}

// TestClientStreamEvents: a completed streamed response counts one event
// per output token, the usage chunk when the bodies ask for one, and
// [DONE]; unstreamed responses and runs without the client none.
func TestClientStreamEvents(t *testing.T) {
	fleet := clientFleet(t, 1)
	for _, tc := range []struct {
		name             string
		client           bool
		streaming, usage bool
		wantStreamEvents int
	}{
		{"stream+usage", true, true, true, 32 + 2},
		{"stream", true, true, false, 32 + 1},
		{"no-stream", true, false, false, 0},
		{"no-client", false, false, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts Options
			if tc.client {
				p := plan(1)
				p.Streaming, p.UsageChunk = tc.streaming, tc.usage
				opts.Client = p
			}
			recs, _ := run(t, []*workload.Request{stageReq(0, 0, 0, 0)}, fleet, opts)
			if recs[0].StreamEvents != tc.wantStreamEvents {
				t.Fatalf("stream events %d, want %d", recs[0].StreamEvents, tc.wantStreamEvents)
			}
		})
	}
}

// TestClientDeterministic: the same run twice gives the same records.
func TestClientDeterministic(t *testing.T) {
	mk := func() []*workload.Request {
		var out []*workload.Request
		for i := range 20 {
			st, start := 0, int64(0)
			if i >= 10 {
				st, start = 1, 30*second
			}
			out = append(out, stageReq(int64(i), st, start, start+int64(i%10)*second/7))
		}
		return out
	}
	p := plan(10, 10)
	p.MaxConcurrency, p.Timeout = 3, second/2
	a, _ := run(t, mk(), clientFleet(t, 2), Options{Client: p, Seed: 9})
	b, _ := run(t, mk(), clientFleet(t, 2), Options{Client: p, Seed: 9})
	if len(a) != len(b) {
		t.Fatalf("%d and %d records", len(a), len(b))
	}
	for i := range a {
		if a[i].Arrival != b[i].Arrival || a[i].E2E != b[i].E2E || a[i].Outcome != b[i].Outcome {
			t.Fatalf("record %d differs: %+v vs %+v", i, a[i], b[i])
		}
	}
}
