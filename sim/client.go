package sim

import (
	"fmt"
	"time"

	"github.com/eppsim/eppsim/epp"
	"github.com/eppsim/eppsim/workload"
)

// client is inference-perf's load generator between the workload and the
// EPP (workload.ClientPlan, docs/workloads.md "Client concurrency"): it
// decides when each request of an inference-perf config is sent, which is
// its Record.Arrival, so that TTFT and E2E start on inference-perf's
// clock (the actual send, after any wait for a slot).
//
// The requests of the current stage are, in schedule order, either on the
// load generator's queue (queued), out of it and holding a slot but not
// yet sent (their dequeue times in ahead), or sent. A slot is held from
// dequeue to the request's end; freeing one dequeues the next request at
// that instant. Sends happen in order, each at the later of its dequeue
// time and its scheduled time, so only the next request is read from the
// workload at a time: memory stays O(1) per stage however large the cap.
type client struct {
	plan *workload.ClientPlan
	// stage is the current stage; enq when it was put on the queue and
	// origin when its schedule starts (origin = enq + plan.Lead).
	stage       int
	enq, origin int64
	// queued, unsent and open count the stage's requests still on the
	// queue, not yet sent and not yet ended.
	queued, unsent, open int
	ahead                []dequeued // FIFO
	timers               uint64     // timeout events fired (not simulation)
}

// dequeued is a run of n requests dequeued at t.
type dequeued struct {
	t int64
	n int
}

// newClient returns the client of plan, its first stage's schedule
// starting at time 0 (as the workload's: inference-perf enqueues a stage
// plan.Lead before its schedule, here at -Lead).
func newClient(plan *workload.ClientPlan) *client {
	c := &client{plan: plan}
	if len(plan.StageRequests) > 0 {
		c.begin(0, -plan.Lead)
	}
	return c
}

// begin puts stage k on the queue at enq: the first min(cap, N) requests
// leave it at once, to sleep until their scheduled times.
func (c *client) begin(k int, enq int64) {
	n := c.plan.StageRequests[k]
	take := n
	if c.plan.MaxConcurrency > 0 {
		take = min(n, c.plan.MaxConcurrency)
	}
	c.stage, c.enq, c.origin = k, enq, enq+c.plan.Lead
	c.queued, c.unsent, c.open = n-take, n, n
	c.ahead = c.ahead[:0]
	if take > 0 {
		c.ahead = append(c.ahead, dequeued{enq, take})
	}
}

// dequeue takes the next request off the queue at t (a slot freed).
func (c *client) dequeue(t int64) {
	if c.queued == 0 {
		return
	}
	c.queued--
	if n := len(c.ahead); n > 0 && c.ahead[n-1].t == t {
		c.ahead[n-1].n++
		return
	}
	c.ahead = append(c.ahead, dequeued{t, 1})
}

// pop returns the dequeue time of the next request to send.
func (c *client) pop() int64 {
	t := c.ahead[0].t
	if c.ahead[0].n--; c.ahead[0].n == 0 {
		c.ahead = c.ahead[1:]
	}
	return t
}

// stageEnd is when the load generator sees the stage's last request end
// at t: its first completion poll at or after t (polls every plan.Poll
// from the enqueueing).
func (c *client) stageEnd(t int64) int64 {
	p := c.plan.Poll
	if p <= 0 || t <= c.enq {
		return max(t, c.enq)
	}
	return c.enq + (t-c.enq+p-1)/p*p
}

// clientPull reads the next request of the current stage once it holds a
// slot and schedules its send; with every request of the stage sent, the
// next stage waits for this one to end (clientEnded).
func (r *runner) clientPull() {
	c := r.client
	if r.srcDone || r.next != nil || c.unsent == 0 || len(c.ahead) == 0 {
		return
	}
	wr := r.nextRequest()
	if wr == nil {
		return
	}
	if wr.Stage != c.stage {
		r.fail(fmt.Errorf("sim: inference-perf client: request %d is of stage %d where stage %d has %d requests left to send",
			wr.ID, wr.Stage, c.stage, c.unsent))
		return
	}
	at := max(c.pop(), c.origin+wr.Arrival-wr.StageStart, r.loop.Now())
	if r.inject(wr, at, at) {
		c.unsent--
	}
}

// clientSent arms the timeout of a request sent now. The timeout event is
// not simulation work: one that finds its request ended does nothing and
// keeps no timer alive.
func (r *runner) clientSent(now int64, wr *workload.Request) {
	if r.client == nil || r.client.plan.Timeout <= 0 {
		return
	}
	r.loop.At(now+r.client.plan.Timeout, r, arg(evTimeout, int(wr.ID)))
}

// clientTimeout aborts request id if it is still in flight (an engine
// runs it or it is on its way to one): the HTTP client's timeout drops the
// connection, the server aborts the request, and inference-perf counts a
// failure. A request queued in the EPP (flow control, a data producer's
// wait) is left to the EPP. It reports whether it changed anything.
func (r *runner) clientTimeout(now int64, id int64) bool {
	r.client.timers++
	slot, ok := r.slotByID[id]
	if !ok {
		return false
	}
	f := r.flights[slot]
	if _, queued := r.byReq[f.er]; queued {
		return false
	}
	r.abort(now, slot)
	r.router.ResponseComplete(&epp.Cycle{Now: now}, f.er, f.res)
	f.rec.Outcome, f.rec.HTTPStatus, f.rec.Cause = Rejected, 0, CauseClientTimeout
	f.rec.Reason = fmt.Sprintf("client timeout after %v", time.Duration(r.client.plan.Timeout))
	r.finish(f)
	r.flowTimers(now)
	return true
}

// CauseClientTimeout is the Record.Cause of a request the client model's
// timeout aborted.
const CauseClientTimeout = "client-timeout"

// clientEnded accounts a request that ended (completed or failed): its
// slot takes the next request off the queue (clientEnd), and the stage's
// last end starts the next stage at the load generator's next poll plus
// load.interval. A completed streamed request gets its stream's event
// count (Record.StreamEvents).
func (r *runner) clientEnded(f *flight) {
	c := r.client
	if c == nil {
		return
	}
	if f.rec.Outcome == Completed && c.plan.Streaming {
		// One event per output token, the usage chunk if asked for, and
		// [DONE].
		f.rec.StreamEvents = f.rec.OutputTokens + 1
		if c.plan.UsageChunk {
			f.rec.StreamEvents++
		}
	}
	// The client sees a completed response end at its Completion, which
	// includes the server's output delays after the engine's last step.
	now := r.loop.Now()
	if f.rec.Outcome == Completed && f.rec.Completion > now {
		r.at(f.rec.Completion, evClientEnd, 0)
		return
	}
	r.clientEnd(now)
}

// clientEnd frees the slot of a request whose response ended now.
func (r *runner) clientEnd(now int64) {
	c := r.client
	c.open--
	c.dequeue(now)
	if c.open == 0 && c.stage+1 < len(c.plan.StageRequests) {
		c.begin(c.stage+1, c.stageEnd(now)+c.plan.Interval)
	}
	r.clientPull()
}
