package report

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/sim"
)

const sec = int64(1e9)

// stagedRecord is a record of stage arriving at at (s), completed with
// ttft and e2e (ms) and out output tokens.
func stagedRecord(id int64, stage int, at float64, ttft, e2e float64, out int) sim.Record {
	a := int64(at * float64(sec))
	return sim.Record{ID: id, Stage: stage, Arrival: a, Replica: 0, PromptTokens: 100, OutputTokens: out,
		TTFT: int64(ttft * 1e6), E2E: int64(e2e * 1e6), Completion: a + int64(e2e*1e6), Outcome: sim.Completed}
}

// stagedRun is a two-stage ladder of hand-made records plus a third
// declared stage that sent nothing, fed in completion order (the stages
// interleave), with the simulation's view of the stages: stage 0's
// scraped gauges, and a request of stage 1 still in flight at the end.
//
// Stage 0 (2 req/s for 10 s): arrivals at 1, 3, 5 and 9 s; the one at 5 s
// rejected; TTFT 100, 300, 200 ms; E2E 1,100, 2,300, 4,200 ms; 11, 21 and
// 1 output tokens (TPOT 100 and 100 ms; none for the one-token answer).
// Its last completion is at 9 + 4.2 = 13.2 s. Stage 1 (4 req/s for 5 s):
// arrivals at 20 and 21 s, TTFT 50 and 150 ms, E2E 550 and 650 ms, 6 and
// 11 tokens (TPOT 100 and 50 ms), the last completion at 21.65 s. A
// warm-up request of stage 0 at 0.5 s counts in no stage.
func stagedRun(t *testing.T) *Summary {
	t.Helper()
	a := NewAggregator()
	a.WithStages([]StagePlan{{Rate: 2, DurationS: 10}, {Rate: 4, DurationS: 5}, {Rate: 8, DurationS: 5}})
	recs := stagedRecords()
	for i := range recs {
		a.Add(&recs[i])
	}
	res := &sim.Result{Replicas: []sim.ReplicaResult{{Name: "r0"}}, Stages: []sim.StageResult{{Stage: 0, Arrivals: 4}, {Stage: 1, Arrivals: 3}}}
	// Stage 0's scrapes: waiting 0 0 1 2 5 0 0 3 0 1 (mean 1.2; sorted,
	// the 9th of 10 is 3; max 5) and KV usage 0.1 ×5, 0.5 ×4, 0.9 (mean
	// 0.34, 9th 0.5, max 0.9).
	for _, w := range []float64{0, 0, 1, 2, 5, 0, 0, 3, 0, 1} {
		res.Stages[0].Waiting.Add(w)
	}
	for _, kv := range []float64{0.1, 0.5, 0.1, 0.5, 0.9, 0.1, 0.5, 0.1, 0.5, 0.1} {
		res.Stages[0].KVUsage.Add(kv)
	}
	return a.Summary(res)
}

// stagedRecords are stagedRun's records in completion order.
func stagedRecords() []sim.Record {
	rejected := sim.Record{ID: 2, Stage: 0, Arrival: 5 * sec, Replica: -1, Outcome: sim.Rejected, Reason: "too long"}
	warm := stagedRecord(9, 0, 0.5, 10, 20, 5)
	warm.Warmup = true
	return []sim.Record{
		warm,
		stagedRecord(0, 0, 1, 100, 1100, 11),
		stagedRecord(4, 1, 20, 50, 550, 6),
		stagedRecord(1, 0, 3, 300, 2300, 21),
		rejected,
		stagedRecord(5, 1, 21, 150, 650, 11),
		stagedRecord(3, 0, 9, 200, 4200, 1),
	}
}

func near(a Num, b float64) bool {
	return a.Defined() && math.Abs(a.Float()-b) <= 1e-12*math.Max(1, math.Abs(b))
}

func TestStageSummaries(t *testing.T) {
	s := stagedRun(t)
	if len(s.Stages) != 3 {
		t.Fatalf("%d stages: %+v", len(s.Stages), s.Stages)
	}
	s0, s1, s2 := s.Stages[0], s.Stages[1], s.Stages[2]
	// Stage 0: 4 requests, 3 completed: 75%; 4 over the 8 s from 1 to 9 s:
	// 0.5 req/s; 33 output tokens over the 12.2 s from 1 to 13.2 s.
	if s0.Stage != 0 || s0.RequestedRate != 2 || s0.DurationS != 10 || s0.Requests != 4 || s0.Completed != 3 || s0.Rejected != 1 ||
		s0.SuccessRate != 0.75 || s0.FirstArrivalS != 1 || s0.SendSpanS != 8 || s0.RequestsPerS != 0.5 ||
		!near(s0.ThroughputSpanS, 12.2) || !near(s0.OutputTokensPerS, 33/12.2) {
		t.Errorf("stage 0: %+v", s0)
	}
	// TTFT 100, 200, 300: mean 200, nearest-rank p50 the 2nd (200), p90
	// the 3rd (300); ITL mean (100 + 100) / 2; E2E mean 7,600 / 3, p90
	// 4,200.
	if s0.TTFT.Mean != 200 || s0.TTFT.P50 != 200 || s0.TTFT.P90 != 300 || s0.ITLMean != 100 || !near(s0.E2E.Mean, 7600.0/3) || s0.E2E.P90 != 4200 {
		t.Errorf("stage 0 latency: TTFT %+v ITL %v E2E %+v", s0.TTFT, s0.ITLMean, s0.E2E)
	}
	if s0.GaugeSamples != 10 || s0.Waiting != (GaugeStats{Mean: 1.2, P90: 3, Max: 5}) || !near(s0.KVUsage.Mean, 0.34) || s0.KVUsage.P90 != 0.5 || s0.KVUsage.Max != 0.9 {
		t.Errorf("stage 0 gauges: %d samples, waiting %+v, KV %+v", s0.GaugeSamples, s0.Waiting, s0.KVUsage)
	}
	// Stage 1: the simulation saw 3 arrivals, one still in flight at the
	// end: 2 of 3 completed; 3 over the 1 s from 20 to 21 s; 17 tokens
	// over the 1.65 s to 21.65 s; TTFT 50, 150; ITL (100 + 50) / 2.
	if s1.RequestedRate != 4 || s1.Requests != 3 || s1.Completed != 2 || s1.Rejected != 0 || !near(s1.SuccessRate, 2.0/3) ||
		s1.FirstArrivalS != 20 || s1.SendSpanS != 1 || s1.RequestsPerS != 3 || !near(s1.ThroughputSpanS, 1.65) || !near(s1.OutputTokensPerS, 17/1.65) {
		t.Errorf("stage 1: %+v", s1)
	}
	if s1.TTFT.Mean != 100 || s1.TTFT.P50 != 50 || s1.TTFT.P90 != 150 || s1.ITLMean != 75 || s1.E2E.Mean != 600 || s1.E2E.P90 != 650 {
		t.Errorf("stage 1 latency: TTFT %+v ITL %v E2E %+v", s1.TTFT, s1.ITLMean, s1.E2E)
	}
	// Without a scrape the gauges are undefined.
	if s1.GaugeSamples != 0 || s1.Waiting.Mean.Defined() || s1.KVUsage.P90.Defined() || s1.KVUsage.Max.Defined() {
		t.Errorf("stage 1 gauges: %+v %+v", s1.Waiting, s1.KVUsage)
	}
	// Stage 2 sent nothing: its rate is known, every metric undefined.
	if s2.Stage != 2 || s2.RequestedRate != 8 || s2.Requests != 0 || s2.SuccessRate.Defined() || s2.RequestsPerS.Defined() ||
		s2.OutputTokensPerS.Defined() || s2.FirstArrivalS.Defined() || s2.SendSpanS.Defined() || s2.TTFT.P90.Defined() ||
		s2.ITLMean.Defined() || s2.E2E.Mean.Defined() || s2.Waiting.Max.Defined() {
		t.Errorf("stage 2: %+v", s2)
	}
	// The whole run's figures are unchanged by stages: TTFT over the five
	// measured completions, the warm-up request left out.
	if s.Latency.TTFT.Mean != (100+300+200+50+150)/5.0 || s.Requests.Total != 7 {
		t.Errorf("run: TTFT %+v, %d requests", s.Latency.TTFT, s.Requests.Total)
	}
}

// TestStagesJSON: each stage is an entry of summary.json's "stages" with
// its undefined metrics null.
func TestStagesJSON(t *testing.T) {
	b, err := json.Marshal(stagedRun(t))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Stages []map[string]any `json:"stages"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Stages) != 3 {
		t.Fatalf("stages %v", doc.Stages)
	}
	s0, s2 := doc.Stages[0], doc.Stages[2]
	if s0["stage"] != 0.0 || s0["requested_rate"] != 2.0 || s0["requests"] != 4.0 || s0["success_rate"] != 0.75 || s0["requests_per_s"] != 0.5 ||
		s0["itl_mean_ms"] != 100.0 || s0["ttft_ms"].(map[string]any)["p90"] != 300.0 || s0["waiting"].(map[string]any)["p90"] != 3.0 ||
		s0["kv_usage"].(map[string]any)["max"] != 0.9 || s0["gauge_samples"] != 10.0 {
		t.Errorf("stage 0 JSON %v", s0)
	}
	for _, k := range []string{"success_rate", "requests_per_s", "output_tokens_per_s", "itl_mean_ms", "first_arrival_s", "send_span_s", "throughput_span_s"} {
		if v, ok := s2[k]; !ok || v != nil {
			t.Errorf("stage 2 %s = %v, want null", k, v)
		}
	}
	if s2["ttft_ms"].(map[string]any)["p90"] != nil || s2["kv_usage"].(map[string]any)["mean"] != nil || s2["requested_rate"] != 8.0 {
		t.Errorf("stage 2 JSON %v", s2)
	}
}

// TestOneStageHasNoStages: traffic of one stage (every request of stage
// 0, or one declared stage) gets no "stages" key at all, so its
// summary.json is what it was before stages existed.
func TestOneStageHasNoStages(t *testing.T) {
	for _, plans := range [][]StagePlan{nil, {{Rate: 5, DurationS: 60}}} {
		a := NewAggregator()
		a.WithStages(plans)
		for i := range 3 {
			r := stagedRecord(int64(i), 0, float64(i), 10, 100, 5)
			a.Add(&r)
		}
		res := &sim.Result{Replicas: []sim.ReplicaResult{{Name: "r0"}}, Stages: []sim.StageResult{{Stage: 0, Arrivals: 3}}}
		res.Stages[0].Waiting.Add(1)
		s := a.Summary(res)
		if s.Stages != nil {
			t.Fatalf("plans %v: stages %+v", plans, s.Stages)
		}
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), `"stages"`) {
			t.Errorf("plans %v: summary.json has stages: %s", plans, b)
		}
	}
}

func TestStageTable(t *testing.T) {
	header, rows := StageTable(stagedRun(t))
	wantHeader := []string{"stage", "rate (req/s)", "requests", "success", "req/s", "output tok/s", "TTFT mean (s)", "TTFT p50 (s)", "TTFT p90 (s)",
		"ITL mean (ms)", "E2E mean (s)", "E2E p90 (s)", "waiting mean / p90 / max", "KV % mean / p90 / max"}
	if !slices.Equal(header, wantHeader) {
		t.Errorf("header %q", header)
	}
	want := [][]string{
		{"0", "2", "4", "75.00%", "0.500", "2.7", "0.200", "0.200", "0.300", "100.00", "2.533", "4.200", "1.20 / 3 / 5", "34.0 / 50.0 / 90.0"},
		{"1", "4", "3", "66.67%", "3.000", "10.3", "0.100", "0.050", "0.150", "75.00", "0.600", "0.650", "n/a", "n/a"},
		{"2", "8", "0", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a", "n/a"},
	}
	if len(rows) != len(want) {
		t.Fatalf("rows %q", rows)
	}
	for i := range want {
		if !slices.Equal(rows[i], want[i]) {
			t.Errorf("row %d:\n got %q\nwant %q", i, rows[i], want[i])
		}
	}
	// Without declared rates (OpenAI JSONL x_stage) the rate column goes.
	s := stagedRun(t)
	for i := range s.Stages {
		s.Stages[i].RequestedRate = Undefined()
	}
	if header, _ := StageTable(s); slices.Contains(header, "rate (req/s)") {
		t.Errorf("header without rates %q", header)
	}
	if h, r := StageTable(&Summary{}); h != nil || r != nil {
		t.Errorf("a run without stages has a table: %q %q", h, r)
	}
}

// TestOutputStages: with stages, report.md and report.html gain the
// per-stage section (each config's table and the four plots), summary.json
// the stages, and the four plots are written; the files of a run without
// stages are listed in TestOutputWritesEveryFile.
func TestOutputStages(t *testing.T) {
	dir := t.TempDir()
	o, err := NewOutput(dir, testMeta)
	if err != nil {
		t.Fatal(err)
	}
	o.DPI = 40
	for _, name := range []string{"a", "b"} {
		o.StartRun(name, "r0")
		recs := stagedRecords()
		for i := range recs {
			o.AddRecord(&recs[i])
		}
		for k := range 30 {
			o.AddSample(&sim.Sample{Time: int64(k) * sec, Replica: 0, Waiting: k % 3, KVUsage: float64(k) / 40})
		}
		o.EndRun(stagedRun(t), []string{"r0"})
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	files := listDir(t, dir)
	for _, name := range StagePlotNames {
		for _, ext := range []string{".png", ".svg"} {
			if !slices.Contains(files, name+ext) {
				t.Errorf("%s%s not written: %v", name, ext, files)
			}
		}
	}
	md := readFile(t, dir+"/"+MarkdownFile)
	for _, want := range []string{
		"## Per-stage results", "### a\n", "### b\n",
		"| stage | rate (req/s) | requests | success | req/s | output tok/s |",
		"| 0 | 2 | 4 | 75.00% | 0.500 | 2.7 | 0.200 | 0.200 | 0.300 | 100.00 | 2.533 | 4.200 | 1.20 / 3 / 5 | 34.0 / 50.0 / 90.0 |",
		"![" + plotTitles[PlotStageTTFT] + "](stage_ttft_p90.png)", "Files: `stage_load.svg`, `stage_load.png`",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	if i, j := strings.Index(md, "## Per-stage results"), strings.Index(md, "## Hit-rate ladder"); i < 0 || j < i {
		t.Errorf("the per-stage section is not between the headline table and the ladder")
	}
	html := readFile(t, dir+"/"+HTMLFile)
	for _, want := range []string{"<h2 id=\"stages\">Per-stage results</h2>", "<h3>a</h3>", "<td>75.00%</td>", "<figure id=\"stage_latency\">"} {
		if !strings.Contains(html, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	// Each stage plot is shown once, in the per-stage section.
	if n := strings.Count(html, "<figure id=\"stage_load\">"); n != 1 {
		t.Errorf("stage_load shown %d times", n)
	}
	var doc struct {
		Runs map[string]struct {
			Stages []StageSummary `json:"stages"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(readFile(t, dir+"/"+SummaryFile)), &doc); err != nil {
		t.Fatal(err)
	}
	if st := doc.Runs["b"].Stages; len(st) != 3 || st[1].Requests != 3 || st[2].SuccessRate.Defined() {
		t.Errorf("summary.json stages %+v", st)
	}
}

// TestStageITLStream: with the client model's stream event counts, a
// stage's ITL is inference-perf's: the gaps between consecutive stream
// lines (two per event) pooled over its completed requests. Two
// requests: E2E − TTFT of 1,000 and 2,300 ms over 11 + 1 + 1 = 13 and
// 21 + 2 = 23 events, so 25 + 45 = 70 gaps: 3,300 / 70 ms. Without
// counts (other traces) the field and the table column are absent.
func TestStageITLStream(t *testing.T) {
	a := NewAggregator()
	r0, r1 := stagedRecord(0, 0, 1, 100, 1100, 11), stagedRecord(1, 0, 3, 300, 2600, 21)
	r0.StreamEvents, r1.StreamEvents = 13, 23
	r2 := stagedRecord(2, 1, 20, 50, 550, 6) // stage 1: not streamed
	for _, r := range []*sim.Record{&r0, &r1, &r2} {
		a.Add(r)
	}
	s := a.Summary(&sim.Result{Replicas: []sim.ReplicaResult{{Name: "r0"}}})
	if len(s.Stages) != 2 {
		t.Fatalf("%d stages", len(s.Stages))
	}
	if got := s.Stages[0].ITLStream; got == nil || !near(*got, 3300.0/70) {
		t.Errorf("stage 0 ITL stream %v, want %v", got, 3300.0/70)
	}
	if s.Stages[1].ITLStream != nil {
		t.Errorf("stage 1 (no stream counts) has ITL stream %v", *s.Stages[1].ITLStream)
	}
	header, rows := StageTable(s)
	if !slices.Contains(header, "ITL stream (ms)") || rows[0][slices.Index(header, "ITL stream (ms)")] != "47.14" ||
		rows[1][slices.Index(header, "ITL stream (ms)")] != na {
		t.Errorf("table %v %v", header, rows)
	}
	header, _ = StageTable(stagedRun(t))
	if slices.Contains(header, "ITL stream (ms)") {
		t.Errorf("a run without stream counts has the column: %v", header)
	}
	b, err := json.Marshal(stagedRun(t).Stages[0])
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "itl_stream") {
		t.Errorf("a stage without stream counts marshals %s", b)
	}
}

// TestStagedGauges: the gauges over all stages are the stages' samples
// together. Waiting 0 0 1 2 5 (stage 0) and 4 4 6 (stage 1): 8 samples,
// mean 22/8, the 8th smallest (nearest-rank p90 of 8) 6, max 6; KV usage
// 0.1 0.5 and 0.9 0.5: mean 0.5, the 4th of 4 is 0.9. A run without
// stages has none.
func TestStagedGauges(t *testing.T) {
	a := NewAggregator()
	a.WithStages([]StagePlan{{Rate: 1, DurationS: 10}, {Rate: 2, DurationS: 10}})
	a.Add(&sim.Record{ID: 0, Stage: 0, Arrival: sec, TTFT: 1e8, E2E: 5e8, Completion: sec + 5e8, OutputTokens: 5, Outcome: sim.Completed})
	a.Add(&sim.Record{ID: 1, Stage: 1, Arrival: 12 * sec, TTFT: 1e8, E2E: 5e8, Completion: 12*sec + 5e8, OutputTokens: 5, Outcome: sim.Completed})
	res := &sim.Result{Replicas: []sim.ReplicaResult{{Name: "r0"}}, Stages: []sim.StageResult{{Stage: 0, Arrivals: 1}, {Stage: 1, Arrivals: 1}}}
	for _, w := range []float64{0, 0, 1, 2, 5} {
		res.Stages[0].Waiting.Add(w)
	}
	for _, w := range []float64{4, 4, 6} {
		res.Stages[1].Waiting.Add(w)
	}
	for _, kv := range []float64{0.1, 0.5} {
		res.Stages[0].KVUsage.Add(kv)
	}
	for _, kv := range []float64{0.9, 0.5} {
		res.Stages[1].KVUsage.Add(kv)
	}
	g := a.Summary(res).StagedGauges
	if g == nil || g.Samples != 8 || g.Waiting != (GaugeStats{Mean: 2.75, P90: 6, Max: 6}) || !near(g.KVUsage.Mean, 0.5) || g.KVUsage.P90 != 0.9 || g.KVUsage.Max != 0.9 {
		t.Fatalf("staged gauges %+v", g)
	}
	plain := NewAggregator()
	plain.Add(&sim.Record{ID: 0, TTFT: 1e8, E2E: 5e8, OutputTokens: 5, Outcome: sim.Completed})
	if s := plain.Summary(&sim.Result{Replicas: []sim.ReplicaResult{{Name: "r0"}}}); s.StagedGauges != nil {
		t.Errorf("a run without stages has staged gauges %+v", s.StagedGauges)
	}
}
