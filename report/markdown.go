package report

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// namedSummaries lists the runs' summaries in run order.
func (o *Output) namedSummaries() []NamedSummary {
	out := make([]NamedSummary, len(o.runs))
	for i, r := range o.runs {
		out[i] = NamedSummary{Name: r.name, Summary: r.sum}
	}
	return out
}

// plotTitles names the plots in the reports.
var plotTitles = map[string]string{
	PlotHitLadder:       "Hit-rate ladder per config",
	PlotTTFTCDF:         "TTFT CDF per config",
	PlotPredictedVsTrue: "Predicted vs true prefix reuse, with calibration",
	PlotHitRatio:        "Hit ratio over time: true, routed and best replica per config",
	PlotReplicaLoad:     "Per-replica KV usage and queue over time (heatmaps)",
	PlotTTFTByClass:     "TTFT CDF per priority class",
	PlotStageTTFT:       "TTFT p90 per load stage against its rate, per config",
	PlotStageThroughput: "Output tokens/s per load stage against its rate, per config",
	PlotStageLatency:    "TTFT mean and ITL mean per load stage against its rate, per config",
	PlotStageLoad:       "Waiting requests and KV usage over time, stage boundaries marked",
}

// MetricsDocLink is where report.md and report.html send readers for the
// definitions: the copy of docs/metrics.md written next to them.
const MetricsDocLink = MetricsFile

// mdEscape makes s safe inside a Markdown table cell or list item.
func mdEscape(s string) string {
	r := strings.NewReplacer("\\", "\\\\", "|", "\\|", "\n", " ", "\r", " ", "*", "\\*", "_", "\\_", "`", "\\`",
		"<", "&lt;", ">", "&gt;", "[", "\\[", "]", "\\]")
	return r.Replace(s)
}

// mdCode puts s in an inline code span.
func mdCode(s string) string {
	s = strings.NewReplacer("\n", " ", "\r", " ").Replace(s)
	fence := "`"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		return fence + " " + s + " " + fence
	}
	return fence + s + fence
}

// markdown renders report.md.
func (o *Output) markdown() []byte {
	var b bytes.Buffer
	b.WriteString("# eppsim report\n\n")
	item := func(k, v string) {
		if v != "" {
			b.WriteString("- " + k + ": " + v + "\n")
		}
	}
	item("trace", mdCode(o.meta.Trace))
	item("fleet", mdEscape(o.meta.Fleet))
	item("seed", strconv.FormatUint(o.meta.Seed, 10))
	item("eppsim version", mdEscape(o.meta.Version))
	if o.meta.Command != "" {
		item("command", mdCode(o.meta.Command))
	}
	runs := o.namedSummaries()
	b.WriteString("\n## What this run shows\n\n")
	findings := Findings(runs)
	if len(findings) == 0 {
		b.WriteString("No run has a summary.\n")
	}
	for _, f := range findings {
		b.WriteString("- " + mdEscape(f) + "\n")
	}
	b.WriteString("\nEvery metric below is defined, with its formula, unit and when it is undefined, in [" + MetricsDocLink + "](" +
		MetricsDocLink + ") (eppsim's `docs/metrics.md`, copied next to this report).\n")

	b.WriteString("\n## Headline metrics\n\n")
	b.WriteString("| metric |")
	for _, r := range o.runs {
		b.WriteString(" " + mdEscape(r.name) + " |")
	}
	b.WriteString("\n|---|")
	for range o.runs {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	for _, row := range HeadlineRows(runs) {
		if row.Label == "" {
			b.WriteString("| **" + mdEscape(row.Group) + "** |" + strings.Repeat(" |", len(o.runs)) + "\n")
			continue
		}
		b.WriteString("| " + mdEscape(row.Label) + " |")
		for _, c := range row.Cells {
			b.WriteString(" " + mdEscape(c) + " |")
		}
		b.WriteString("\n")
	}
	b.WriteString("\n" + tableNote + "\n")

	if HasStages(runs) {
		b.WriteString("\n## Per-stage results\n\n" + stageNote + "\n")
		for _, r := range runs {
			header, rows := StageTable(r.Summary)
			if header == nil {
				continue
			}
			b.WriteString("\n### " + mdEscape(r.Name) + "\n\n")
			b.WriteString("| " + strings.Join(header, " | ") + " |\n|" + strings.Repeat("---:|", len(header)) + "\n")
			for _, row := range rows {
				cells := make([]string, len(row))
				for i, c := range row {
					cells[i] = mdEscape(c)
				}
				b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
			}
		}
		for _, name := range StagePlotNames {
			b.WriteString("\n![" + plotTitles[name] + "](" + name + ".png)\n\n")
			b.WriteString("Files: `" + name + ".svg`, `" + name + ".png`\n")
		}
	}

	b.WriteString("\n## Hit-rate ladder\n\n" + ladderNote + "\n\n")
	b.WriteString("![" + plotTitles[PlotHitLadder] + "](" + PlotHitLadder + ".png)\n")

	if cols := causeColumns(runs); len(cols) > 0 {
		b.WriteString("\n## Prediction error by cause\n\n" + causeNote + "\n\n")
		writeCauseTable(&b, "cause", cols, causeRows(cols))
		b.WriteString("\n" + rateNote + "\n\n")
		rcols := rateColumns(cols)
		writeCauseTable(&b, "per-request rate", rcols, rateRows(rcols))
	}

	if header, rows := classTable(runs); len(rows) > 0 {
		b.WriteString("\n## Priority classes\n\n" + classNote + "\n\n")
		b.WriteString("| " + strings.Join(header, " | ") + " |\n|---|---|" + strings.Repeat("---:|", len(header)-2) + "\n")
		for _, row := range rows {
			cells := make([]string, len(row))
			for i, c := range row {
				cells[i] = mdEscape(c)
			}
			b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
		}
		b.WriteString("\n![" + plotTitles[PlotTTFTByClass] + "](" + PlotTTFTByClass + ".png)\n")
	}

	b.WriteString("\n## Routing\n\n")
	for _, line := range o.routingLines() {
		b.WriteString("- " + mdEscape(line) + "\n")
	}
	if names := o.replicaOrder(); len(names) > 0 {
		b.WriteString("\n| replica (requests) |")
		for _, r := range o.runs {
			b.WriteString(" " + mdEscape(r.name) + " |")
		}
		b.WriteString("\n|---|" + strings.Repeat("---:|", len(o.runs)) + "\n")
		for _, n := range names {
			b.WriteString("| " + mdEscape(n) + " |")
			for _, r := range o.runs {
				b.WriteString(" " + replicaCell(r.sum, n) + " |")
			}
			b.WriteString("\n")
		}
	}

	if notes := o.allNotes(); len(notes) > 0 {
		b.WriteString("\n## Notes\n\n")
		for _, n := range notes {
			b.WriteString("- " + mdEscape(n) + "\n")
		}
	}
	b.WriteString("\n## Plots\n\n")
	for _, name := range PlotNames {
		if name == PlotHitLadder {
			continue // shown above
		}
		b.WriteString("### " + plotTitles[name] + "\n\n")
		b.WriteString("![" + plotTitles[name] + "](" + name + ".png)\n\n")
		b.WriteString("Files: `" + name + ".svg`, `" + name + ".png`\n\n")
	}
	b.WriteString("## Data files\n\n")
	b.WriteString("- `" + SummaryFile + "`: the summaries above, one per config under `runs`\n")
	b.WriteString("- `" + RequestsFile + "`: one row per request and config, with the rungs of its ladder\n")
	b.WriteString("- `" + TimeseriesFile + "`: per replica and sample: waiting, running, KV usage, hit ratio since the previous sample\n")
	b.WriteString("- `" + MetricsFile + "`: the definition of every metric\n")
	return b.Bytes()
}

// Notes under the tables of report.md and report.html.
const (
	tableNote = "Latencies are nearest-rank percentiles over completed requests after warm-up. " +
		"The ladder's rungs are token-weighted over the fleet (Σ tokens of the rung ÷ Σ prompt tokens), " +
		"measured at routing time except the true hit ratio (vLLM's num_cached_tokens at first scheduling). " +
		"Regret and the queue effect are in millions of tokens everywhere. " +
		"Over- and under-predicted are token-weighted shares: Σ max(0, predicted − true) ÷ Σ predicted and Σ max(0, true − predicted) ÷ Σ true."
	ladderNote = "For each config, from left to right: the infinite-cache bound (what the trace offers: every earlier " +
		"prompt cached forever), the oracle (the best replica's cached prefix at routing time), routed (the chosen " +
		"replica's at that same instant) and true (what the chosen replica reused when the request was first scheduled: " +
		"routed plus the queue effect). Infinite − oracle is what the fleet's cache capacity costs; oracle − routed " +
		"(the regret) is what routing costs; true − routed is what changed while the request waited."
	causeNote = "Shares of each producer's over-predicted tokens (Σ max(0, predicted − true)) and under-predicted tokens " +
		"(Σ max(0, true − predicted)) by cause. Per request, predicted − true = (predicted − routed) + (routed − true): " +
		"the first term is the index's (within one router block: granularity; beyond it: evictions the index did not see, " +
		"or blocks it did not know), the second is the cache changing between routing and first scheduling; each request's " +
		"error is split between its terms of the same sign in proportion to their size."
	stageNote = "One row per load stage (an inference-perf config's load.stages entry, or OpenAI JSONL x_stage), over the " +
		"requests after warm-up that arrived in it, wherever they ended: success = completed ÷ requests; req/s = requests ÷ " +
		"the stage's send span (first to last arrival); output tok/s = the completed requests' output tokens ÷ the span from " +
		"the stage's first arrival to its last completion; TTFT and E2E over its completed requests. ITL mean is eppsim's TPOT, " +
		"(E2E − TTFT) ÷ (output − 1): the ITL of llm-d's published tables is taken over stream chunks and reads about half of " +
		"it. Waiting and KV % are the replicas' scraped gauges over the stage's part of the run (from its first arrival to the " +
		"next stage's), mean / p90 / max over replicas and scrapes. A stage's requests outlive it, so each row mixes the load of " +
		"earlier stages, as the published runs do."
	rateNote = "Per-request rates count requests, whatever their size: phantom = predicted > 0 and nothing reused; " +
		"missed = reuse that nothing predicted (almost none when every prompt shares a first block, so these two say " +
		"little about the token-weighted error above); over/under = predicted above/below true by more than one router block."
)

// causeColumn is one (config, producer, direction) column of the
// error-by-cause table.
// writeCauseTable writes a Markdown table of rows under the heading first
// and one column per cause column.
func writeCauseTable(b *bytes.Buffer, first string, cols []causeColumn, rows []Row) {
	b.WriteString("| " + first + " |")
	for _, c := range cols {
		b.WriteString(" " + mdEscape(c.title) + " |")
	}
	b.WriteString("\n|---|" + strings.Repeat("---:|", len(cols)) + "\n")
	for _, row := range rows {
		b.WriteString("| " + mdEscape(row.Label) + " |")
		for _, c := range row.Cells {
			b.WriteString(" " + mdEscape(c) + " |")
		}
		b.WriteString("\n")
	}
}

type causeColumn struct {
	title string
	p     *Prediction
	over  bool
}

// causeColumns lists an over and an under column for every config and
// prefix producer that has a prediction.
func causeColumns(runs []NamedSummary) []causeColumn {
	var cols []causeColumn
	for _, r := range runs {
		if r.Summary == nil {
			continue
		}
		for _, pr := range producers {
			if p := r.Summary.Prediction[pr.key]; p != nil {
				cols = append(cols, causeColumn{r.Name + " (" + pr.label + ") over", p, true},
					causeColumn{r.Name + " (" + pr.label + ") under", p, false})
			}
		}
	}
	return cols
}

// causeOrder is the order of the causes in the tables.
var causeOrder = []string{CauseEvictionUnseen, CauseIndexMissed, CauseGranularity, CauseSchedulingChange}

// causeLabel names a cause in the error-by-cause table.
var causeLabel = map[string]string{
	CauseEvictionUnseen:   "evictions the index did not see (eviction_unseen)",
	CauseIndexMissed:      "blocks the index did not know: answers' decode blocks, capacity mismatch, lag (index_missed)",
	CauseGranularity:      "granularity: router vs engine blocks (granularity)",
	CauseSchedulingChange: "cache changed between routing and scheduling (routing_vs_scheduling_change)",
}

// causeRows is the error-by-cause table: the token-weighted share first,
// then each cause's share of it.
func causeRows(cols []causeColumn) []Row {
	rows := []Row{{Label: "share of predicted (over) / true (under) tokens"}}
	for _, c := range cols {
		v := c.p.UnderPredictedTokens
		if c.over {
			v = c.p.OverPredictedTokens
		}
		rows[0].Cells = append(rows[0].Cells, fn(v, 3))
	}
	for _, cause := range causeOrder {
		row := Row{Label: causeLabel[cause]}
		for _, c := range cols {
			m := c.p.UnderByCause
			if c.over {
				m = c.p.OverByCause
			}
			if v, ok := m[cause]; ok {
				row.Cells = append(row.Cells, pct(v))
			} else {
				row.Cells = append(row.Cells, dash)
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// rateColumns keeps one column per (config, producer) of the cause
// columns, titled without the direction.
func rateColumns(cols []causeColumn) []causeColumn {
	var out []causeColumn
	for _, c := range cols {
		if c.over {
			out = append(out, causeColumn{strings.TrimSuffix(c.title, " over"), c.p, true})
		}
	}
	return out
}

// rateRows are the narrow per-request rates, one column per (config,
// producer) of rateColumns.
func rateRows(cols []causeColumn) []Row {
	defs := []struct {
		label string
		f     func(*Prediction) float64
	}{
		{"phantom hit rate (predicted > 0, nothing reused)", func(p *Prediction) float64 { return p.PhantomRate }},
		{"missed hit rate (reused, nothing predicted)", func(p *Prediction) float64 { return p.MissedRate }},
		{"over-predicted requests (> one router block)", func(p *Prediction) float64 { return p.OverpredictedRate }},
		{"under-predicted requests (> one router block)", func(p *Prediction) float64 { return p.UnderpredictedRate }},
	}
	var rows []Row
	for _, d := range defs {
		row := Row{Label: d.label}
		for _, c := range cols {
			row.Cells = append(row.Cells, ff(d.f(c.p), 3))
		}
		rows = append(rows, row)
	}
	return rows
}

// replicaOrder lists the replica names in fleet order (from the first run
// that knows them), then any others by name.
func (o *Output) replicaOrder() []string {
	var names []string
	for _, r := range o.runs {
		if len(r.replicas) > 0 {
			names = slices.Clone(r.replicas)
			break
		}
	}
	for _, r := range o.runs {
		if r.sum == nil {
			continue
		}
		for _, n := range slices.Sorted(maps.Keys(r.sum.Routing.PerReplica)) {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	return names
}

// replicaCell is a replica's request count in a run ("–": unknown).
func replicaCell(s *Summary, name string) string {
	if s == nil {
		return dash
	}
	n, ok := s.Routing.PerReplica[name]
	if !ok {
		return dash
	}
	return strconv.Itoa(n)
}

// maxIdleNamed is the most idle replicas named in a routing line.
const maxIdleNamed = 8

// routingLines says, per config, how many replicas received no requests
// (naming them) and the busiest replica's share.
func (o *Output) routingLines() []string {
	var out []string
	order := o.replicaOrder()
	for _, r := range o.runs {
		s := r.sum
		if s == nil {
			continue
		}
		rt := s.Routing
		if !rt.IdleReplicas.Defined() {
			out = append(out, r.name+": no measured request, so no replica's share to report.")
			continue
		}
		line := r.name + ": " + fn(rt.IdleReplicas, 0) + " of " + strconv.Itoa(rt.Replicas) + " replicas received no requests"
		if rt.IdleReplicas > 0 {
			var idle []string
			for _, n := range order {
				if c, ok := rt.PerReplica[n]; ok && c == 0 {
					idle = append(idle, n)
				}
			}
			if len(idle) > maxIdleNamed {
				idle = append(idle[:maxIdleNamed], "…")
			}
			line += " (" + strings.Join(idle, ", ") + ")"
		}
		if rt.BusiestReplica != "" {
			line += "; the busiest, " + rt.BusiestReplica + ", received " + pctN(rt.BusiestShare) + " of them (" + fn(rt.Imbalance, 2) + "× the mean)"
		}
		out = append(out, line+".")
	}
	return out
}

// allNotes lists the run-set notes, then each run's notes prefixed with
// the run's name.
func (o *Output) allNotes() []string {
	notes := append([]string(nil), o.notes...)
	for _, r := range o.runs {
		for _, n := range r.allNotes() {
			notes = append(notes, r.name+": "+n)
		}
	}
	return notes
}

// allNotes is the run's AddNote notes followed by its summary's
// not-simulated notes that AddNote did not already give.
func (r *runData) allNotes() []string {
	notes := append([]string(nil), r.notes...)
	if r.sum != nil && r.sum.Config != nil {
		if n := SkipNote(&r.sum.Config.Workload); n != "" && !slices.Contains(notes, n) {
			notes = append(notes, n)
		}
		for _, n := range r.sum.Config.NotSimulated {
			if n = "not simulated: " + n; !slices.Contains(notes, n) {
				notes = append(notes, n)
			}
		}
		for _, n := range r.sum.Config.Estimates {
			if n = "estimate: " + n; !slices.Contains(notes, n) {
				notes = append(notes, n)
			}
		}
	}
	return notes
}

// SkipNote says how many invalid trace records a run skipped and which
// (the first few errors), or "" when it skipped none.
func SkipNote(w *WorkloadConfig) string {
	if w.SkippedInvalid == 0 {
		return ""
	}
	n := fmt.Sprintf("%d invalid trace records skipped (--skip-invalid)", w.SkippedInvalid)
	if len(w.SkippedExamples) > 0 {
		n += ", the first: " + strings.Join(w.SkippedExamples, "; ")
	}
	return n
}
