package report

import (
	"cmp"
	"math"
	"slices"
	"strconv"

	"github.com/eppsim/eppsim/sim"
)

// StagePlan is a load stage as the traffic declares it
// (workload.StagePlan: an inference-perf config's load.stages entry,
// after --time-scale).
type StagePlan struct {
	Rate      float64 // requested rate, requests/s
	DurationS float64 // s
}

// StageSummary is one load stage of a run whose traffic has more than one
// (summary.json "stages", docs/metrics.md): the columns of llm-d's
// published per-stage tables, over the requests after warm-up that
// arrived in the stage, wherever they ended.
type StageSummary struct {
	// Stage is the index (workload.Request.Stage: the position in an
	// inference-perf config's load.stages, or OpenAI JSONL x_stage).
	Stage int `json:"stage"`
	// RequestedRate (requests/s) and DurationS are the stage's as the
	// traffic declares them; undefined when it does not.
	RequestedRate Num `json:"requested_rate"`
	DurationS     Num `json:"duration_s"`
	// Requests arrived in the stage after warm-up, those still in flight
	// at the end included; Completed and Rejected of them.
	Requests  int `json:"requests"`
	Completed int `json:"completed"`
	Rejected  int `json:"rejected"`
	// SuccessRate is Completed ÷ Requests.
	SuccessRate Num `json:"success_rate"`
	// FirstArrivalS is the stage's first arrival (s), SendSpanS its last
	// arrival minus the first, RequestsPerS Requests ÷ SendSpanS
	// (inference-perf's achieved rate over its send duration).
	FirstArrivalS Num `json:"first_arrival_s"`
	SendSpanS     Num `json:"send_span_s"`
	RequestsPerS  Num `json:"requests_per_s"`
	// ThroughputSpanS runs from the first arrival to the later of the
	// last completion and the last arrival; OutputTokensPerS is the
	// completed requests' output tokens over it (inference-perf's
	// successes.throughput.output_tokens_per_sec).
	ThroughputSpanS  Num `json:"throughput_span_s"`
	OutputTokensPerS Num `json:"output_tokens_per_s"`
	// TTFT and E2E are over the completed requests (ms), ITLMean the mean
	// TPOT, (E2E − TTFT) ÷ (output − 1), of those with more than one
	// output token (ms).
	TTFT    Dist `json:"ttft_ms"`
	ITLMean Num  `json:"itl_mean_ms"`
	// ITLStream is the ITL mean as inference-perf takes it from the
	// stream (ms): every gap between two consecutive lines of the
	// completed responses, pooled over them — the sum of their E2E − TTFT
	// over the sum of their lines less one (two lines per server-sent
	// event, sim.Record.StreamEvents). Present only when the client model
	// counted streams (inference-perf configs with api.streaming).
	ITLStream *Num `json:"itl_stream_mean_ms,omitempty"`
	E2E       Dist `json:"e2e_ms"`
	// GaugeSamples counts the replicas' scrapes in the stage's part of the
	// run (sim.StageResult); Waiting (requests) and KVUsage (share of
	// blocks) are the mean, p90 and max of the scraped gauges over them.
	GaugeSamples int64      `json:"gauge_samples"`
	Waiting      GaugeStats `json:"waiting"`
	KVUsage      GaugeStats `json:"kv_usage"`
}

// GaugeStats summarises a scraped gauge over samples; every field is
// undefined without a sample.
type GaugeStats struct {
	Mean Num `json:"mean"`
	P90  Num `json:"p90"`
	Max  Num `json:"max"`
}

// stageAcc accumulates one stage's records after warm-up.
type stageAcc struct {
	stage               int
	arrived             int
	completed, rejected int
	first, last         int64 // arrivals
	end                 int64 // latest completion
	outputTokens        int64
	tpotSum             float64 // ms
	tpotN               int
	// streamSpan (ms) and streamGaps: the stream lines' gaps of the
	// completed streamed requests (StageSummary.ITLStream).
	streamSpan float64
	streamGaps int64
}

// stageFor returns the accumulator of stage (created on first sight) and
// its dense index.
func (a *Aggregator) stageFor(stage int) (*stageAcc, int32) {
	if a.lastStage >= 0 && a.stageAccs[a.lastStage].stage == stage {
		return a.stageAccs[a.lastStage], a.lastStage
	}
	id, ok := a.stageIdx[stage]
	if !ok {
		if a.stageIdx == nil {
			a.stageIdx = map[int]int32{}
		}
		id = int32(len(a.stageAccs))
		a.stageIdx[stage] = id
		a.stageAccs = append(a.stageAccs, &stageAcc{stage: stage, first: math.MaxInt64, last: math.MinInt64, end: math.MinInt64})
	}
	a.lastStage = id
	return a.stageAccs[id], id
}

// addStage accounts a record after warm-up in its stage; measured (a
// completed record, whose TTFT and E2E were just appended) also notes the
// stage of those samples.
func (a *Aggregator) addStage(r *sim.Record) {
	st, id := a.stageFor(r.Stage)
	st.arrived++
	st.first, st.last = min(st.first, r.Arrival), max(st.last, r.Arrival)
	switch r.Outcome {
	case sim.Rejected:
		st.rejected++
		return
	case sim.Completed:
	default:
		return
	}
	st.completed++
	st.end = max(st.end, r.Completion)
	st.outputTokens += int64(r.OutputTokens)
	if r.OutputTokens > 1 {
		st.tpotSum += float64(r.E2E-r.TTFT) / 1e6 / float64(r.OutputTokens-1)
		st.tpotN++
	}
	if r.StreamEvents > 0 {
		// inference-perf (apis/completion.py) stamps every line it reads
		// of the stream, the blank line after each event included: 2 per
		// event, spanning first token to end.
		st.streamSpan += float64(r.E2E-r.TTFT) / 1e6
		st.streamGaps += 2*int64(r.StreamEvents) - 1
	}
	// stageOf stays nil while every measured sample is of the first
	// stage seen (dense index 0), so one-stage runs keep nothing more.
	if id != 0 && a.stageOf == nil {
		a.stageOf = make([]int32, len(a.ttft)-1, cap(a.ttft))
	}
	if a.stageOf != nil {
		a.stageOf = append(a.stageOf, id)
	}
}

// WithStages gives the summary the traffic's declared stages (plans[k] is
// stage k), so that each stage's entry carries its requested rate.
func (a *Aggregator) WithStages(plans []StagePlan) { a.plans = slices.Clone(plans) }

// stageSummaries lists the stages of the traffic (declared, seen in the
// records, or seen by the simulation), nil when it has fewer than two.
func (a *Aggregator) stageSummaries(res *sim.Result) []StageSummary {
	var simStages map[int]*sim.StageResult
	if res != nil && len(res.Stages) > 0 {
		simStages = make(map[int]*sim.StageResult, len(res.Stages))
		for i := range res.Stages {
			simStages[res.Stages[i].Stage] = &res.Stages[i]
		}
	}
	seen := map[int]bool{}
	var stages []int
	note := func(k int) {
		if !seen[k] {
			seen[k] = true
			stages = append(stages, k)
		}
	}
	for k := range a.plans {
		note(k)
	}
	for _, st := range a.stageAccs {
		note(st.stage)
	}
	if res != nil {
		for _, st := range res.Stages {
			note(st.Stage)
		}
	}
	if len(stages) < 2 {
		return nil
	}
	slices.SortFunc(stages, cmp.Compare)
	// Each stage's measured TTFT and E2E samples.
	ttft, e2e := make([][]float64, len(a.stageAccs)), make([][]float64, len(a.stageAccs))
	if a.stageOf == nil && len(a.stageAccs) > 0 {
		ttft[0], e2e[0] = a.ttft, a.e2e
	} else {
		for i, id := range a.stageOf {
			ttft[id] = append(ttft[id], a.ttft[i])
			e2e[id] = append(e2e[id], a.e2e[i])
		}
	}
	out := make([]StageSummary, 0, len(stages))
	for _, k := range stages {
		s := StageSummary{Stage: k, RequestedRate: Undefined(), DurationS: Undefined()}
		if k >= 0 && k < len(a.plans) {
			s.RequestedRate, s.DurationS = Num(a.plans[k].Rate), Num(a.plans[k].DurationS)
		}
		st := &stageAcc{stage: k, first: math.MaxInt64, last: math.MinInt64, end: math.MinInt64}
		var samples []float64
		var e2es []float64
		if id, ok := a.stageIdx[k]; ok {
			st = a.stageAccs[id]
			samples, e2es = ttft[id], e2e[id]
		}
		s.Requests, s.Completed, s.Rejected = st.arrived, st.completed, st.rejected
		if rs := simStages[k]; rs != nil {
			// The simulation counts the requests still in flight at the
			// end too, which have no record.
			s.Requests = max(s.Requests, rs.Arrivals)
			s.GaugeSamples = rs.Waiting.Samples()
			s.Waiting, s.KVUsage = gaugeStats(&rs.Waiting), gaugeStats(&rs.KVUsage)
		} else {
			s.Waiting, s.KVUsage = gaugeStats(nil), gaugeStats(nil)
		}
		s.SuccessRate = ratio(float64(s.Completed), float64(s.Requests))
		s.FirstArrivalS, s.SendSpanS, s.ThroughputSpanS = Undefined(), Undefined(), Undefined()
		span, tspan := 0.0, 0.0
		if st.arrived > 0 {
			s.FirstArrivalS = Num(float64(st.first) / 1e9)
			span = float64(st.last-st.first) / 1e9
			tspan = float64(max(st.end, st.last)-st.first) / 1e9
			s.SendSpanS, s.ThroughputSpanS = Num(span), Num(tspan)
		}
		s.RequestsPerS = ratio(float64(s.Requests), span)
		s.OutputTokensPerS = Undefined()
		if st.completed > 0 {
			s.OutputTokensPerS = ratio(float64(st.outputTokens), tspan)
		}
		s.TTFT, s.E2E = dist(samples), dist(e2es)
		s.ITLMean = ratio(st.tpotSum, float64(st.tpotN))
		if st.streamGaps > 0 {
			v := ratio(st.streamSpan, float64(st.streamGaps))
			s.ITLStream = &v
		}
		out = append(out, s)
	}
	return out
}

// StagedGauges are the replicas' scraped gauges over all of a run's
// stages (Summary.StagedGauges): the samples of every stage's part merged.
type StagedGauges struct {
	Samples int64      `json:"gauge_samples"`
	Waiting GaugeStats `json:"waiting"`
	KVUsage GaugeStats `json:"kv_usage"`
}

// stagedGauges merges the stages' gauge samples of res.
func stagedGauges(res *sim.Result) *StagedGauges {
	var w, kv sim.GaugeDist
	if res != nil {
		for i := range res.Stages {
			w.Merge(&res.Stages[i].Waiting)
			kv.Merge(&res.Stages[i].KVUsage)
		}
	}
	return &StagedGauges{Samples: w.Samples(), Waiting: gaugeStats(&w), KVUsage: gaugeStats(&kv)}
}

// gaugeStats is the mean, nearest-rank p90 and max of a gauge's samples.
func gaugeStats(g *sim.GaugeDist) GaugeStats {
	if g == nil || g.Samples() == 0 {
		return GaugeStats{Mean: Undefined(), P90: Undefined(), Max: Undefined()}
	}
	n := g.Samples()
	vals, counts := g.Values()
	rank := int64(math.Ceil(0.9 * float64(n))) // the p90 is the rank-th smallest sample
	rank = min(max(rank, 1), n)
	p90 := vals[len(vals)-1]
	var seen int64
	for i, c := range counts {
		if seen += c; seen >= rank {
			p90 = vals[i]
			break
		}
	}
	return GaugeStats{Mean: Num(g.Sum() / float64(n)), P90: Num(p90), Max: Num(g.Max())}
}

// HasStages reports whether some run's traffic has more than one stage.
func HasStages(runs []NamedSummary) bool {
	for _, r := range runs {
		if r.Summary != nil && len(r.Summary.Stages) > 0 {
			return true
		}
	}
	return false
}

// StageTable is a run's per-stage table (the CLI's, report.md's and
// report.html's), one row per stage with the columns of llm-d's published
// tables; nil without stages. The requested-rate column is left out when
// no stage declares a rate.
func StageTable(s *Summary) (header []string, rows [][]string) {
	if s == nil || len(s.Stages) == 0 {
		return nil, nil
	}
	rates, stream := false, false
	for _, st := range s.Stages {
		rates = rates || st.RequestedRate.Defined()
		stream = stream || st.ITLStream != nil
	}
	header = []string{"stage"}
	if rates {
		header = append(header, "rate (req/s)")
	}
	header = append(header, "requests", "success", "req/s", "output tok/s", "TTFT mean (s)", "TTFT p50 (s)", "TTFT p90 (s)",
		"ITL mean (ms)")
	if stream {
		header = append(header, "ITL stream (ms)")
	}
	header = append(header, "E2E mean (s)", "E2E p90 (s)", "waiting mean / p90 / max", "KV % mean / p90 / max")
	for _, st := range s.Stages {
		row := []string{strconv.Itoa(st.Stage)}
		if rates {
			row = append(row, rateLabel(st.RequestedRate))
		}
		success := na
		if st.SuccessRate.Defined() {
			success = ff(100*st.SuccessRate.Float(), 2) + "%"
		}
		row = append(row, strconv.Itoa(st.Requests), success, fn(st.RequestsPerS, 3), fn(st.OutputTokensPerS, 1),
			fn(msToS(st.TTFT.Mean), 3), fn(msToS(st.TTFT.P50), 3), fn(msToS(st.TTFT.P90), 3), fn(st.ITLMean, 2))
		if stream {
			itl := Undefined()
			if st.ITLStream != nil {
				itl = *st.ITLStream
			}
			row = append(row, fn(itl, 2))
		}
		row = append(row, fn(msToS(st.E2E.Mean), 3), fn(msToS(st.E2E.P90), 3), gaugeCell(st.Waiting, 2, 0, 1), gaugeCell(st.KVUsage, 1, 1, 100))
		rows = append(rows, row)
	}
	return header, rows
}

// rateLabel renders a requested rate in its shortest form ("3", "0.5",
// "3.333"), n/a when undefined.
func rateLabel(r Num) string {
	if !r.Defined() {
		return na
	}
	return strconv.FormatFloat(math.Round(r.Float()*1000)/1000, 'f', -1, 64)
}

// msToS converts milliseconds to seconds (undefined stays undefined).
func msToS(n Num) Num { return n / 1000 }

// gaugeCell is a "mean / p90 / max" cell, each scaled by scale, the mean
// with meanPrec decimals and the others with prec; n/a without samples.
func gaugeCell(g GaugeStats, meanPrec, prec int, scale float64) string {
	if !g.Mean.Defined() {
		return na
	}
	return ff(scale*g.Mean.Float(), meanPrec) + " / " + ff(scale*g.P90.Float(), prec) + " / " + ff(scale*g.Max.Float(), prec)
}
