package report

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// metric is one row of the headline table.
type metric struct {
	label string
	value func(*Summary) string
}

const dash = "–"

func ff(v float64, prec int) string { return strconv.FormatFloat(v, 'f', prec, 64) }

// headline lists the metrics that report.md and report.html compare side
// by side; prediction rows appear for each prefix producer that some run
// has.
func (o *Output) headline() []metric {
	ms := []metric{
		{"requests completed / total", func(s *Summary) string {
			return strconv.Itoa(s.Requests.Complete) + " / " + strconv.Itoa(s.Requests.Total)
		}},
		{"rejected", func(s *Summary) string { return strconv.Itoa(s.Requests.Rejected) }},
		{"in flight at end", func(s *Summary) string { return strconv.Itoa(s.Requests.InFlight) }},
		{"TTFT p50 (ms)", func(s *Summary) string { return ff(s.Latency.TTFT.P50, 1) }},
		{"TTFT p99 (ms)", func(s *Summary) string { return ff(s.Latency.TTFT.P99, 1) }},
		{"TPOT p50 (ms)", func(s *Summary) string { return ff(s.Latency.TPOT.P50, 2) }},
		{"E2E p99 (ms)", func(s *Summary) string { return ff(s.Latency.E2E.P99, 1) }},
		{"throughput (req/s)", func(s *Summary) string { return ff(s.Throughput.RequestsPerS, 2) }},
		{"output tokens/s", func(s *Summary) string { return ff(s.Throughput.OutputTokensPerS, 0) }},
		{"true hit ratio", func(s *Summary) string { return ff(s.Cache.TrueHitRatio, 3) }},
		{"oracle hit ratio", func(s *Summary) string { return ff(s.Cache.OracleHitRatio, 3) }},
		{"regret (tokens)", func(s *Summary) string { return strconv.FormatInt(s.Cache.RegretTokens, 10) }},
	}
	for _, pr := range []struct{ key, label string }{{approxProducer, "approx"}, {preciseProducer, "precise"}} {
		present := false
		for _, r := range o.runs {
			present = present || (r.sum != nil && r.sum.Prediction[pr.key] != nil)
		}
		if !present {
			continue
		}
		row := func(label string, f func(*Prediction) float64) metric {
			return metric{label + " (" + pr.label + ")", func(s *Summary) string {
				if p := s.Prediction[pr.key]; p != nil {
					return ff(f(p), 3)
				}
				return dash
			}}
		}
		ms = append(ms,
			row("prediction MAE", func(p *Prediction) float64 { return p.MAE }),
			row("prediction bias", func(p *Prediction) float64 { return p.Bias }),
			row("phantom hit rate", func(p *Prediction) float64 { return p.PhantomRate }),
			row("missed hit rate", func(p *Prediction) float64 { return p.MissedRate }))
	}
	return append(ms,
		metric{"load imbalance (max/mean)", func(s *Summary) string { return ff(s.Routing.Imbalance, 2) }},
		metric{"tie share", func(s *Summary) string { return ff(s.Routing.TieShare, 3) }},
		metric{"preemptions", func(s *Summary) string { return strconv.FormatInt(s.Cache.Preemptions, 10) }},
		metric{"evictions", func(s *Summary) string { return strconv.FormatInt(s.Cache.Evictions, 10) }},
	)
}

// cell is a metric's value for a run ("–" when the run has no summary).
func (m metric) cell(r *runData) string {
	if r.sum == nil {
		return dash
	}
	return m.value(r.sum)
}

// plotTitles names the plots in the reports.
var plotTitles = map[string]string{
	PlotTTFTCDF:         "TTFT CDF per config",
	PlotPredictedVsTrue: "Predicted vs true prefix reuse, with calibration",
	PlotHitRatio:        "True and oracle hit ratio over time",
	PlotReplicaLoad:     "Per-replica load and KV usage over time (first config)",
}

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
	for _, m := range o.headline() {
		b.WriteString("| " + m.label + " |")
		for _, r := range o.runs {
			b.WriteString(" " + m.cell(r) + " |")
		}
		b.WriteString("\n")
	}
	b.WriteString("\nLatencies are nearest-rank percentiles over completed requests after warm-up. " +
		"Hit ratios are token-weighted over the fleet; regret is Σ(oracle − true) cached tokens. " +
		"Prediction rows compare the approximate prefix producer's predicted match with the true reuse on the chosen replica.\n")
	if notes := o.allNotes(); len(notes) > 0 {
		b.WriteString("\n## Notes\n\n")
		for _, n := range notes {
			b.WriteString("- " + mdEscape(n) + "\n")
		}
	}
	b.WriteString("\n## Plots\n\n")
	for _, name := range PlotNames {
		b.WriteString("### " + plotTitles[name] + "\n\n")
		b.WriteString("![" + plotTitles[name] + "](" + name + ".png)\n\n")
		b.WriteString("Files: `" + name + ".svg`, `" + name + ".png`\n\n")
	}
	b.WriteString("## Data files\n\n")
	b.WriteString("- `" + SummaryFile + "`: the summaries above, one per config under `runs`\n")
	b.WriteString("- `" + RequestsFile + "`: one row per request and config\n")
	b.WriteString("- `" + TimeseriesFile + "`: per replica and sample: waiting, running, KV usage, hit ratio since the previous sample\n")
	return b.Bytes()
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
