package report

import (
	"reflect"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/sim"
)

// TestClassSummary aggregates hand-made records of two classes: per class
// the requests, completions, rejections by cause, TTFT and EPP queue; the
// EPP queue over every completed request; the fairness rows.
func TestClassSummary(t *testing.T) {
	ms := int64(1e6)
	recs := []*sim.Record{
		{ID: 0, Objective: "critical", Priority: 10, FairnessID: "a", Outcome: sim.Completed, TTFT: 100 * ms, E2E: 200 * ms, FlowWait: 0, Queue: 5 * ms},
		{ID: 1, Objective: "critical", Priority: 10, FairnessID: "a", Outcome: sim.Completed, TTFT: 300 * ms, E2E: 400 * ms, FlowWait: 20 * ms, Queue: 7 * ms},
		{ID: 2, Objective: "batch", Priority: -1, FairnessID: "b", Outcome: sim.Completed, TTFT: 900 * ms, E2E: 1000 * ms, FlowWait: 600 * ms},
		{ID: 3, Objective: "batch", Priority: -1, FairnessID: "b", Outcome: sim.Rejected, Cause: "fc-ttl-expired", HTTPStatus: 429, FlowWait: 60500 * ms},
		{ID: 4, Objective: "batch", Priority: -1, FairnessID: "b", Outcome: sim.Rejected, Cause: "fc-capacity", HTTPStatus: 429},
		{ID: 5, Objective: "batch", Priority: -1, FairnessID: "c", Outcome: sim.Rejected, Cause: "fc-ttl-expired", Warmup: true},
	}
	a := NewAggregator()
	for _, r := range recs {
		a.Add(r)
	}
	c := a.Summary(nil).Classes
	if c == nil {
		t.Fatal("no class summary")
	}
	if !reflect.DeepEqual(c.RejectedByCause, map[string]int{"fc-ttl-expired": 2, "fc-capacity": 1}) {
		t.Errorf("rejected by cause %v", c.RejectedByCause)
	}
	// EPP queue over the three completed requests: 0, 20, 600 ms.
	if c.EPPQueue.P50 != 20 || c.EPPQueue.Max != 600 || c.EPPQueue.Mean != 620.0/3 {
		t.Errorf("EPP queue %+v", c.EPPQueue)
	}
	if len(c.ByClass) != 2 || c.ByClass[0].Objective != "critical" || c.ByClass[1].Objective != "batch" {
		t.Fatalf("classes %+v", c.ByClass)
	}
	hi, lo := c.ByClass[0], c.ByClass[1]
	if hi.Requests != 2 || hi.Completed != 2 || hi.TTFT.P50 != 100 || hi.TTFT.P99 != 300 || hi.EPPQueue.Max != 20 || hi.EngineQueue.P99 != 7 {
		t.Errorf("critical %+v", hi)
	}
	// The warm-up request (ID 5) counts in rejected_by_cause only.
	if lo.Requests != 3 || lo.Completed != 1 || lo.shed() != 1 || lo.expired() != 1 || lo.FlowWaitRejectedMean != 60500 {
		t.Errorf("batch %+v", lo)
	}
	if len(c.ByFairnessID) != 3 || c.ByFairnessID[0].FairnessID != "b" || c.ByFairnessID[0].Requests != 3 {
		t.Errorf("fairness rows %+v", c.ByFairnessID)
	}
	if s := classSentence(NamedSummary{Name: "fc", Summary: &Summary{Classes: c}}); !strings.Contains(s, "critical (p 10), has p99 TTFT 300 ms") ||
		!strings.Contains(s, "batch (p -1), had 1 of 3 requests shed, 1 expired in the EPP's queue and 0 evicted in flight") {
		t.Errorf("finding %q", s)
	}
	// The table's rejection cell: shed = legacy-saturated + fc-capacity,
	// expired = fc-ttl-expired + fc-no-endpoints, evicted alone, the rest other.
	row := ClassRow{Rejected: map[string]int{"legacy-saturated": 2, "fc-capacity": 1, "fc-ttl-expired": 4, "fc-no-endpoints": 1,
		"evicted": 7, "admit-denied": 3, "scheduling-failed": 1}}
	if got, want := row.rejections(), "3 / 5 / 7 / 4"; got != want {
		t.Errorf("rejections %q, want %q", got, want)
	}
	// A default run has no class summary.
	b := NewAggregator()
	b.Add(&sim.Record{Outcome: sim.Completed, FairnessID: "default-flow"})
	if b.Summary(nil).Classes != nil {
		t.Error("class summary without classes")
	}
	b.WithClasses()
	if b.Summary(nil).Classes == nil {
		t.Error("WithClasses gives no class summary")
	}
}
