package report

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/sim"
)

// TestNumJSON: an undefined Num is null and reads back as undefined; a
// defined one is written as encoding/json writes a float64 (so summaries
// of runs where everything is defined do not change) and reads back as
// itself.
func TestNumJSON(t *testing.T) {
	for _, tc := range []struct {
		v    Num
		want string
	}{
		{Undefined(), "null"},
		{0, "0"},
		{5, "5"},
		{0.1, "0.1"},
		{-2.5, "-2.5"},
		{1e-7, "1e-7"},
		{1e21, "1e+21"},
		{123456789.125, "123456789.125"},
	} {
		b, err := json.Marshal(tc.v)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tc.want {
			t.Errorf("Marshal(%v) = %s, want %s", float64(tc.v), b, tc.want)
		}
		var back Num
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if back.Defined() != tc.v.Defined() || (tc.v.Defined() && back != tc.v) {
			t.Errorf("%s reads back as %v", b, float64(back))
		}
	}
	// In a struct, null sets the field undefined, a missing key leaves it.
	var d Dist
	if err := json.Unmarshal([]byte(`{"mean": null, "p50": 3}`), &d); err != nil {
		t.Fatal(err)
	}
	if d.Mean.Defined() || d.P50 != 3 || d.P99 != 0 {
		t.Fatalf("decoded %+v", d)
	}
	if err := json.Unmarshal([]byte(`{"mean": "x"}`), &d); err == nil {
		t.Fatal("a string read as a Num")
	}
}

// fleet4 is the result of a four-replica run with nothing else in it.
func fleet4() *sim.Result {
	return &sim.Result{Replicas: []sim.ReplicaResult{{Name: "r0"}, {Name: "r1"}, {Name: "r2"}, {Name: "r3"}}}
}

// undefinedPaths are the summary.json fields a run without a measured
// request must write as null.
var undefinedPaths = []string{
	"latency_ms.ttft.mean", "latency_ms.ttft.p50", "latency_ms.ttft.p99", "latency_ms.ttft.max",
	"latency_ms.tpot.p50", "latency_ms.e2e.p99", "latency_ms.queue.p50",
	"throughput.requests_per_s", "throughput.output_tokens_per_s", "throughput.input_tokens_per_s",
	"cache.infinite_cache_hit_ratio", "cache.oracle_hit_ratio", "cache.routed_hit_ratio", "cache.true_hit_ratio",
	"routing.idle_replicas", "routing.load_imbalance", "routing.tie_share", "routing.busiest_replica_share",
}

// jsonTree encodes s and decodes it into a generic tree.
func jsonTree(t *testing.T, s *Summary) map[string]any {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// leaf returns the value at a dotted path and whether the key exists.
func leaf(tree map[string]any, path string) (any, bool) {
	var cur any = tree
	for _, k := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func checkNull(t *testing.T, tree map[string]any, paths ...string) {
	t.Helper()
	for _, p := range paths {
		v, ok := leaf(tree, p)
		if !ok {
			t.Errorf("%s: absent, want null", p)
		} else if v != nil {
			t.Errorf("%s = %v, want null", p, v)
		}
	}
}

// noIdleFinding fails when a finding judges idle replicas.
func noIdleFinding(t *testing.T, findings []string) {
	t.Helper()
	for _, f := range findings {
		if strings.Contains(f, "idle") {
			t.Errorf("finding about idle replicas of a run that measured nothing: %q", f)
		}
	}
}

// TestSummaryEveryRequestInWarmup (issue #25 D5): --warmup longer than the
// trace. Three requests completed, all in the warm-up: nothing is
// measured, so every latency, rate and ratio is null, not 0; the first
// finding says why; no finding calls the four replicas idle (they served
// the warm-up).
func TestSummaryEveryRequestInWarmup(t *testing.T) {
	a := NewAggregator()
	for i := range 3 {
		a.Add(&sim.Record{ID: int64(i), Replica: i, Arrival: int64(i) * 1e9, PromptTokens: 100, OutputTokens: 5, CachedTokens: 10,
			TTFT: 5e6, E2E: 9e6, Completion: int64(i)*1e9 + 9e6, Outcome: sim.Completed, Warmup: true})
	}
	s := a.Summary(fleet4())
	s.Config = &RunConfig{Workload: WorkloadConfig{Warmup: "1000h0m0s"}}
	if s.Requests.Total != 3 || s.Requests.Complete != 3 || Measured(s) {
		t.Fatalf("requests %+v, measured %v", s.Requests, Measured(s))
	}
	tree := jsonTree(t, s)
	checkNull(t, tree, undefinedPaths...)
	// No request after warm-up reached the EPP: no arrival span, no rate.
	checkNull(t, tree, "offered_load.arrival_span_s", "offered_load.requests_per_s", "offered_load.prompt_tokens_per_s")
	if _, ok := leaf(tree, "routing.busiest_replica"); ok {
		t.Error("busiest_replica present without a measured request")
	}
	// Sums over no request are 0, not undefined.
	if v, _ := leaf(tree, "cache.prompt_tokens"); v != 0.0 {
		t.Errorf("prompt_tokens %v", v)
	}
	f := Findings([]NamedSummary{{Name: "default", Summary: s}})
	want := "default: all 3 requests arrived during the warm-up (--warmup 1000h0m0s), which every metric leaves out; nothing is measured, " +
		"so latency, throughput, the hit-rate ladder and the routing shares are undefined (null in summary.json, n/a in the tables)."
	if len(f) != 1 || f[0] != want {
		t.Fatalf("findings %q\nwant [%q]", f, want)
	}
	noIdleFinding(t, f)
	if w := Warnings([]NamedSummary{{Name: "default", Summary: s}}); len(w) != 1 || w[0] != want {
		t.Fatalf("warnings %q", w)
	}
	for _, row := range HeadlineRows([]NamedSummary{{Name: "default", Summary: s}}) {
		switch row.Label {
		case "TTFT p50", "E2E p99", "completed req/s", "output tokens/s", "true: reused (routed + queue effect)", "idle replicas",
			"offered load (req/s)", "load imbalance (max/mean)", "busiest replica's share":
			if row.Cells[0] != "n/a" {
				t.Errorf("%s: %q, want n/a", row.Label, row.Cells[0])
			}
		}
	}
}

// TestSummaryEveryRequestRejected (issue #25 D6): every request refused by
// the engine. Latency, throughput and hit ratios are null; the offered
// load is defined (two requests 1 s apart: 2 req/s, 150 prompt tokens/s);
// the finding says that every request was rejected, by whom and why (the
// first reason), and nothing about idle replicas.
func TestSummaryEveryRequestRejected(t *testing.T) {
	a := NewAggregator()
	reasons := []string{
		"request 0: 100 prompt + 5 output tokens exceed the engine's maximum sequence length 10 (max_model_len)",
		"request 1: 200 prompt + 5 output tokens exceed the engine's maximum sequence length 10 (max_model_len)",
	}
	for i, why := range reasons {
		a.Add(&sim.Record{ID: int64(i), Replica: i, Arrival: int64(i) * 1e9, PromptTokens: 100 * (i + 1), OutputTokens: 5,
			Outcome: sim.Rejected, Reason: why, HTTPStatus: 400, Cause: sim.CauseEngineRejected})
	}
	s := a.Summary(fleet4())
	tree := jsonTree(t, s)
	checkNull(t, tree, undefinedPaths...)
	if s.OfferedLoad.RequestsPerS != 2 || s.OfferedLoad.PromptTokensPerS != 300 || s.OfferedLoad.ArrivalSpanS != 1 {
		t.Errorf("offered load %+v", s.OfferedLoad)
	}
	f := Findings([]NamedSummary{{Name: "default", Summary: s}})
	want := "default: every request was rejected (2 of 2): 2 refused by the engine (engine-rejected), e.g. “" + reasons[0] +
		"”; nothing is measured, so latency, throughput, the hit-rate ladder and the routing shares are undefined (null in summary.json, n/a in the tables)."
	if len(f) == 0 || f[0] != want {
		t.Fatalf("findings %q\nwant first %q", f, want)
	}
	noIdleFinding(t, f)
}

// TestFindingsSkipUnmeasuredComparisons: a config that measured nothing is
// not compared with the others (its TTFT is not "lower" than anything),
// while the measured one still gets its own sentences.
func TestFindingsSkipUnmeasuredComparisons(t *testing.T) {
	ok := fixedSummary(100, 1, 0.5, 1.2, 1)
	ok.Cache.InfiniteHitRatio, ok.Cache.OracleHitRatio, ok.Cache.RoutedHitRatio = 0.7, 0.6, 0.5
	empty := NewAggregator().Summary(fleet4())
	f := Findings([]NamedSummary{{Name: "main", Summary: ok}, {Name: "broken", Summary: empty}})
	if len(f) < 2 || !strings.HasPrefix(f[0], "broken: the workload injected no request") {
		t.Fatalf("findings %q", f)
	}
	for _, s := range f {
		if strings.Contains(s, "TTFT p50") || strings.HasPrefix(s, "broken") && s != f[0] {
			t.Errorf("finding compares or describes the empty run: %q", s)
		}
	}
}

// TestUndefinedShares: shares whose denominator is empty are undefined —
// over-prediction with nothing predicted, under-prediction with nothing
// reused, a tier that served nothing, the mean load copy without a load —
// and the prediction finding says what happened instead of "0.0%".
func TestUndefinedShares(t *testing.T) {
	a := NewAggregator()
	// One completed request: nothing predicted, nothing reused.
	a.Add(&sim.Record{ID: 1, Replica: 0, PromptTokens: 64, OutputTokens: 1, TTFT: 2e6, E2E: 2e6, Completion: 2e6,
		Outcome: sim.Completed, HasPredicted: true, Predicted: 0, PredictedBlocks: 1})
	res := fleet4()
	res.Replicas[0].Stats.OffloadStores = 1 // a CPU tier: the offload part is present
	s := a.Summary(res)
	p := s.Prediction[approxProducer]
	if p == nil || p.OverPredictedTokens.Defined() || p.UnderPredictedTokens.Defined() {
		t.Fatalf("prediction %+v", p)
	}
	if o := s.Cache.Offload; o == nil || o.MeanLoadCopyMs.Defined() || o.GPUHitRatio != 0 || o.CPUHitRatio != 0 {
		t.Fatalf("offload %+v", s.Cache.Offload)
	}
	if bt := p.ByTier; bt == nil || bt.GPU.UnderpredictedShare.Defined() || bt.CPU.UnderpredictedShare.Defined() {
		t.Fatalf("by tier %+v", p.ByTier)
	}
	// One request of one output token: TPOT has no sample.
	if s.Latency.TPOT.P50.Defined() || s.Latency.TTFT.P50 != 2 {
		t.Fatalf("latency %+v", s.Latency)
	}
	want := "default, approximate producer: it predicted no cached token and no token was reused."
	if got := predictionSentence("default", "approximate producer", p); got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if math.IsNaN(s.Cache.TrueHitRatio.Float()) {
		t.Fatal("true hit ratio undefined with 64 prompt tokens")
	}
}

// TestClassWithoutCompletions: a class whose requests were all shed has
// no latency: its TTFT and queue rows are null in summary.json and n/a in
// the tables, and the finding says it completed nothing instead of
// "p99 TTFT 0 ms".
func TestClassWithoutCompletions(t *testing.T) {
	a := NewAggregator()
	for i := range 2 {
		a.Add(&sim.Record{ID: int64(i), Objective: "critical", Priority: 10, Outcome: sim.Rejected, Cause: "fc-capacity", HTTPStatus: 429})
	}
	a.Add(&sim.Record{ID: 2, Objective: "batch", Priority: -1, Outcome: sim.Completed, TTFT: 4e6, E2E: 8e6, Completion: 8e6})
	s := a.Summary(fleet4())
	hi := s.Classes.ByClass[0]
	if hi.Objective != "critical" || hi.Completed != 0 || hi.TTFT.P99.Defined() || hi.EPPQueue.P50.Defined() || hi.EngineQueue.P99.Defined() {
		t.Fatalf("critical %+v", hi)
	}
	tree := jsonTree(t, s)
	row := tree["classes"].(map[string]any)["by_class"].([]any)[0].(map[string]any)
	if ttft := row["ttft_ms"].(map[string]any); ttft["p99"] != nil || ttft["mean"] != nil {
		t.Errorf("critical ttft_ms %v, want nulls", ttft)
	}
	want := "fc: the highest class, critical (p 10), completed none of its 2 requests after warm-up; the lowest, batch (p -1), had 0 of 1 requests shed"
	if got := classSentence(NamedSummary{Name: "fc", Summary: s}); !strings.HasPrefix(got, want) {
		t.Errorf("finding %q\nwant prefix %q", got, want)
	}
	_, rows := classTable([]NamedSummary{{Name: "fc", Summary: s}})
	if got := strings.Join(rows[0][7:], " "); got != "n/a n/a n/a n/a n/a" {
		t.Errorf("class table latencies %q", got)
	}
	for _, r := range HeadlineRows([]NamedSummary{{Name: "fc", Summary: s}}) {
		if r.Group == "class critical (p 10)" && strings.HasPrefix(r.Label, "TTFT") && r.Cells[0] != "n/a" {
			t.Errorf("%s: %q", r.Label, r.Cells[0])
		}
	}
}
