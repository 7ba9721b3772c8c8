package capacity

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/eppsim/eppsim/report"
)

// Output files of a search (--out DIR).
const (
	JSONFile    = "capacity.json"
	CurvesFile  = "curves.csv"
	MarkdownOut = "capacity.md"
	PlotReplica = "replicas"
)

// JSON is the result as capacity.json holds it.
func (r *Result) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Write writes capacity.json, curves.csv, capacity.md and the plots into
// dir (each through a temporary file).
func Write(dir string, r *Result, dpi int) error {
	j, err := r.JSON()
	if err != nil {
		return err
	}
	files := []struct {
		name string
		data []byte
	}{{JSONFile, j}, {CurvesFile, r.CurvesCSV()}, {MarkdownOut, []byte(r.Markdown())}}
	for _, f := range files {
		if err := report.WriteFileAtomic(filepath.Join(dir, f.name), f.data); err != nil {
			return err
		}
	}
	return r.writePlots(dir, dpi)
}

// replicaSearch reports whether the result answers --rate's question.
func (r *Result) replicaSearch() bool { return r.Question == "min-replicas" }

// Answer is a configuration's answer as a table cell.
func (r *Result) Answer(c *Config) string {
	switch {
	case r.replicaSearch() && c.Found:
		return plural(c.MinReplicas, "replica")
	case !r.replicaSearch() && c.Found:
		return fmtRate(c.MaxRate) + " req/s (×" + fmtNum(c.MaxMultiplier) + ")"
	case !r.replicaSearch() && c.MaxRate > 0:
		return "≥ " + fmtRate(c.MaxRate) + " req/s"
	}
	return "none"
}

// Margin is the distance to the next point as a table cell.
func (r *Result) Margin(c *Config) string {
	switch {
	case !c.Found || (r.replicaSearch() && c.NextReplicas == 0):
		return "–"
	case r.replicaSearch():
		return plural(c.NextReplicas, "replica") + " fail"
	}
	return fmt.Sprintf("+%.1f%%: %s req/s fails", 100*c.Margin, fmtRate(c.NextRate))
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

func fmtRate(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }

func fmtNum(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }

// Table is the plain-text answer table.
func (r *Result) Table() string {
	head := []string{"config", "max rate", "binding SLO term", "binding replica limit", "margin to the next point"}
	if r.replicaSearch() {
		head[1] = "min replicas"
	}
	rows := [][]string{head}
	for i := range r.Configs {
		c := &r.Configs[i]
		bl := c.BindingLimit
		if bl == "" {
			bl = "–"
		}
		bt := c.Binding
		if bt == "" {
			bt = "–"
		}
		rows = append(rows, []string{c.Name, r.Answer(c), bt, bl, r.Margin(c)})
	}
	width := make([]int, len(head))
	for _, row := range rows {
		for i, cell := range row {
			width[i] = max(width[i], len([]rune(cell)))
		}
	}
	var b strings.Builder
	for k, row := range rows {
		for i, cell := range row {
			if i > 0 {
				b.WriteString("  ")
			}
			b.WriteString(cell)
			if i < len(row)-1 {
				b.WriteString(strings.Repeat(" ", width[i]-len([]rune(cell))))
			}
		}
		b.WriteByte('\n')
		if k == 0 {
			for i := range head {
				if i > 0 {
					b.WriteString("  ")
				}
				b.WriteString(strings.Repeat("-", width[i]))
			}
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// Findings are "What this run shows": each configuration's answer in a
// sentence, the best against the others, and how much the early stop
// spared.
func (r *Result) Findings() []string {
	var out []string
	slo := strings.Join(r.termLabels(), " and ")
	var found []*Config
	for i := range r.Configs {
		c := &r.Configs[i]
		if c.Note != "" && !c.Found {
			out = append(out, c.Name+": "+c.Note+".")
		}
		if c.Found {
			found = append(found, c)
		}
	}
	if len(found) >= 2 && !r.replicaSearch() {
		best, worst := found[0], found[0]
		for _, c := range found[1:] {
			if c.MaxRate > best.MaxRate {
				best = c
			}
			if c.MaxRate < worst.MaxRate {
				worst = c
			}
		}
		if best.MaxRate == worst.MaxRate {
			out = append(out, fmt.Sprintf("every configuration sustains %s req/s at %s on this traffic%s.", fmtRate(best.MaxRate), slo, bindingClause(found)))
		}
		if best.MaxRate != worst.MaxRate {
			s := fmt.Sprintf("%s sustains %.2f× %s's rate at %s on this traffic (%s against %s req/s)",
				best.Name, best.MaxRate/worst.MaxRate, worst.Name, slo, fmtRate(best.MaxRate), fmtRate(worst.MaxRate))
			if best.MaxRate/worst.MaxRate-1 <= 2*r.Tolerance {
				s += fmt.Sprintf("; within twice the search's tolerance (%g%%), so no clear difference", 100*r.Tolerance)
			}
			out = append(out, s+bindingClause(found)+".")
		}
	}
	if len(found) >= 2 && r.replicaSearch() {
		best, worst := found[0], found[0]
		for _, c := range found[1:] {
			if c.MinReplicas < best.MinReplicas {
				best = c
			}
			if c.MinReplicas > worst.MinReplicas {
				worst = c
			}
		}
		if best != worst {
			out = append(out, fmt.Sprintf("at %s req/s, %s holds %s with %s, %s needs %d%s.",
				fmtRate(r.Rate), best.Name, slo, plural(best.MinReplicas, "replica"), worst.Name, worst.MinReplicas, bindingClause(found)))
		} else {
			out = append(out, fmt.Sprintf("at %s req/s every configuration needs %s to hold %s%s.",
				fmtRate(r.Rate), plural(best.MinReplicas, "replica"), slo, bindingClause(found)))
		}
	}
	if len(found) == 1 {
		c := found[0]
		if r.replicaSearch() {
			out = append(out, fmt.Sprintf("%s holds %s at %s req/s with %s%s.", c.Name, slo, fmtRate(r.Rate), plural(c.MinReplicas, "replica"), bindingClause(found)))
		} else {
			out = append(out, fmt.Sprintf("%s sustains %s req/s at %s with %s%s.", c.Name, fmtRate(c.MaxRate), slo, plural(r.Replicas, "replica"), bindingClause(found)))
		}
	}
	if r.ClosedLoop {
		out = append(out, "the traffic replays closed-loop: each session's next turn waits for the previous answer, so the rate it offers falls as latency grows and a higher multiplier may never fail the SLO; --mode open-loop replays the arrivals as given.")
	}
	if iv := r.answerIntervals(); iv != "" {
		out = append(out, iv)
	}
	out = append(out, r.beyondCalibration()...)
	out = append(out, r.gatewayRefusals()...)
	for i := range r.Configs {
		c := &r.Configs[i]
		if c.Utilization > 1 {
			out = append(out, fmt.Sprintf("%s: at its answer the busiest replica runs at %.2f× its sustainable rate (the knee): past it a queue grows for as long as the load lasts, so the SLO holds there only for traffic this long.", c.Name, c.Utilization))
		}
	}
	if n := r.Stats.Full + r.Stats.Stopped; n > 0 && r.EarlyStop {
		total := r.Stats.Requests + r.Stats.Skipped
		out = append(out, fmt.Sprintf("%d simulations, %d of them stopped early once the SLO could no longer hold: they spared %d of %d requests (%.0f%%).",
			n, r.Stats.Stopped, r.Stats.Skipped, total, 100*float64(r.Stats.Skipped)/float64(max(total, 1))))
	}
	return out
}

// gatewayRefusals says, per config, in how many of its simulations the
// gateway's circuit breaker refused requests (Run.GatewayRefused): a
// success term can then bind at the gateway, whose limit on requests in
// flight no fleet size raises.
func (r *Result) gatewayRefusals() []string {
	var out []string
	for i := range r.Configs {
		c := &r.Configs[i]
		refused, runs := 0, 0
		for _, p := range c.Points {
			for _, run := range p.Runs {
				runs++
				if run.GatewayRefused > 0 {
					refused++
				}
			}
		}
		if refused > 0 {
			out = append(out, fmt.Sprintf("%s: the gateway refused requests in %d of its %d simulations (--gateway-max-requests): a success term can bind at the gateway's limit on requests in flight, which more replicas do not raise.",
				c.Name, refused, runs))
		}
	}
	return out
}

// beyondCalibration says, once each, where a config's fleet is beyond
// what its step-time calibration was fitted on (a TP size or GPU it never
// saw; report.LatencyIntervals.Beyond), which widens the intervals above.
func (r *Result) beyondCalibration() []string {
	var out []string
	for i := range r.Configs {
		for _, p := range r.Configs[i].Points {
			for _, run := range p.Runs {
				if run.Intervals == nil {
					continue
				}
				for _, n := range run.Intervals.Beyond {
					if s := report.BeyondSentence(n); !slices.Contains(out, s) {
						out = append(out, s)
					}
				}
			}
		}
	}
	return out
}

// answerIntervals is the finding of the answers' latency intervals: the
// step-time model's out-of-sample error at each answer, for the terms that
// have one.
func (r *Result) answerIntervals() string {
	var parts []string
	inside := false
	for i := range r.Configs {
		c := &r.Configs[i]
		if !c.Found {
			continue
		}
		var at *Point
		for k := range c.Points {
			p := &c.Points[k]
			if (r.replicaSearch() && p.Replicas == c.MinReplicas) || (!r.replicaSearch() && p.Multiplier == c.MaxMultiplier) {
				at = p
			}
		}
		if at == nil {
			continue
		}
		for _, t := range r.terms() {
			lo, hi, ok := pointInterval(at, t)
			if !ok {
				continue
			}
			_, mean, _, n, _ := pointStat(at, t)
			if n == 0 {
				continue
			}
			parts = append(parts, fmt.Sprintf("%s %s %s (%s–%s)", c.Name, t.metricLabel(), msText(mean), msText(lo), msText(hi)))
			inside = inside || (lo <= t.Bound && t.Bound <= hi)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	out := "at the answers, with the step-time model's 90% intervals (docs/latency.md \"Intervals\"): " + strings.Join(parts, "; ")
	if inside {
		out += "; the SLO's bound lies inside them, so on real hardware the answers are only as good as the step-time model on this traffic"
	}
	return out + "."
}

func msText(v float64) string {
	if v >= 1000 {
		return strconv.FormatFloat(v/1000, 'f', 2, 64) + " s"
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " ms"
}

// bindingClause says what binds the configurations: "; both are bound by
// kv_blocks" or "; bound by max_num_seqs (precise), kv_blocks (default)".
func bindingClause(cs []*Config) string {
	var limits, terms []string
	for _, c := range cs {
		limits = append(limits, c.BindingLimit)
		terms = append(terms, c.Binding)
	}
	same := func(v []string) bool {
		for _, x := range v[1:] {
			if x != v[0] {
				return false
			}
		}
		return v[0] != ""
	}
	var parts []string
	if same(terms) {
		parts = append(parts, "the binding SLO term is "+terms[0])
	}
	switch {
	case same(limits) && len(cs) == 1:
		parts = append(parts, "the busiest replica is bound by "+limits[0])
	case same(limits) && len(cs) == 2:
		parts = append(parts, "both are bound by "+limits[0])
	case same(limits):
		parts = append(parts, "all are bound by "+limits[0])
	default:
		var each []string
		for _, c := range cs {
			if c.BindingLimit != "" {
				each = append(each, c.BindingLimit+" ("+c.Name+")")
			}
		}
		if len(each) > 0 {
			parts = append(parts, "bound by "+strings.Join(each, ", "))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "; " + strings.Join(parts, "; ")
}

func (r *Result) termLabels() []string {
	var out []string
	for _, s := range r.SLO {
		t, err := ParseTerm(s)
		if err != nil {
			out = append(out, s)
			continue
		}
		out = append(out, t.Label())
	}
	return out
}

func (r *Result) terms() []Term {
	var out []Term
	for _, s := range r.SLO {
		if t, err := ParseTerm(s); err == nil {
			out = append(out, t)
		}
	}
	return out
}

// Markdown is capacity.md: the question, the table, the findings, the
// plots and the knee curve's points.
func (r *Result) Markdown() string {
	var b strings.Builder
	b.WriteString("# Capacity\n\n")
	if r.replicaSearch() {
		fmt.Fprintf(&b, "Fewest replicas that hold %s at %s req/s", strings.Join(r.termLabels(), " and "), fmtRate(r.Rate))
	} else {
		fmt.Fprintf(&b, "Highest rate that %d replicas sustain at %s (tolerance %g%%; the traffic as given runs at %s req/s)",
			r.Replicas, strings.Join(r.termLabels(), " and "), 100*r.Tolerance, fmtRate(r.BaseRate))
	}
	fmt.Fprintf(&b, ", seeds %s.\n\n", seedList(r.Seeds))
	b.WriteString("| config | " + map[bool]string{true: "min replicas", false: "max rate"}[r.replicaSearch()] +
		" | binding SLO term | binding replica limit | margin to the next point |\n|---|---|---|---|---|\n")
	for i := range r.Configs {
		c := &r.Configs[i]
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", c.Name, r.Answer(c), orDash(c.Binding), orDash(c.BindingLimit), r.Margin(c))
	}
	b.WriteString("\n## What this run shows\n\n")
	for _, f := range r.Findings() {
		b.WriteString("- " + f + "\n")
	}
	b.WriteString("\n## Plots\n\n")
	for _, t := range r.terms() {
		fmt.Fprintf(&b, "![%s](%s.svg)\n", t.Label(), plotName(t))
	}
	fmt.Fprintf(&b, "![replicas against rate](%s.svg)\n", PlotReplica)
	b.WriteString("\n## Points\n\nEvery simulated point (`curves.csv` has one row per seed); a run stopped early violates its SLO and measured nothing else.\n\n")
	x := "rate (req/s)"
	if r.replicaSearch() {
		x = "replicas"
	}
	terms := r.terms()
	b.WriteString("| config | " + x + " | holds |")
	for _, t := range terms {
		b.WriteString(" " + t.Key() + " |")
	}
	b.WriteString(" utilization | binding limit |\n|---|---|---|")
	for range terms {
		b.WriteString("---|")
	}
	b.WriteString("---|---|\n")
	for i := range r.Configs {
		c := &r.Configs[i]
		for _, p := range c.Points {
			xv := fmtRate(p.Rate)
			if r.replicaSearch() {
				xv = strconv.Itoa(p.Replicas)
			}
			fmt.Fprintf(&b, "| %s | %s | %s |", c.Name, xv, map[bool]string{true: "yes", false: "no"}[p.Holds])
			for _, t := range terms {
				lo, mean, hi, n, stopped := pointStat(&p, t)
				cell := "stopped early"
				if n > 0 {
					cell = fmtNum(mean)
					if n > 1 {
						cell += " (" + fmtNum(lo) + "–" + fmtNum(hi) + ")"
					}
					if stopped > 0 {
						cell += fmt.Sprintf("; %d stopped", stopped)
					}
				}
				b.WriteString(" " + cell + " |")
			}
			u, lim := "–", "–"
			if k := p.Runs[0].Knee; k != nil {
				if k.BusiestUtilization.Defined() {
					u = strconv.FormatFloat(k.BusiestUtilization.Float(), 'f', 2, 64)
				}
				lim = orDash(k.Binding)
			}
			fmt.Fprintf(&b, " %s | %s |\n", u, lim)
		}
	}
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

func seedList(seeds []uint64) string {
	var s []string
	for _, x := range seeds {
		s = append(s, strconv.FormatUint(x, 10))
	}
	return strings.Join(s, ", ")
}

// pointStat is a term's value at a point over its full runs: min, mean,
// max, how many, and how many runs stopped early.
func pointStat(p *Point, t Term) (lo, mean, hi float64, n, stopped int) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, r := range p.Runs {
		if r.StoppedEarly != "" {
			stopped++
			continue
		}
		v, ok := r.Values[t.Key()]
		if !ok || !v.Defined() {
			continue
		}
		x := v.Float()
		lo, hi, mean = math.Min(lo, x), math.Max(hi, x), mean+x
		n++
	}
	if n > 0 {
		mean /= float64(n)
	}
	return lo, mean, hi, n, stopped
}

// CurvesCSV is the knee curve: one row per configuration, point and seed,
// with every term's value (empty when the run stopped early or the value
// is undefined) and the run's knee and TTFT p99 interval where they exist.
func (r *Result) CurvesCSV() []byte {
	var b bytes.Buffer
	terms := r.terms()
	b.WriteString("config,rate_multiplier,rate_per_s,replicas,seed,holds,stopped_early")
	for _, t := range terms {
		b.WriteString("," + csvField(t.Key()))
	}
	b.WriteString(",utilization,binding_limit")
	for _, t := range terms {
		if hasInterval(t) {
			b.WriteString("," + t.Key() + "_low," + t.Key() + "_high")
		}
	}
	b.WriteByte('\n')
	for i := range r.Configs {
		c := &r.Configs[i]
		for _, p := range c.Points {
			for _, run := range p.Runs {
				fmt.Fprintf(&b, "%s,%s,%s,%d,%d,%t,%t", csvField(c.Name), fmtNum(p.Multiplier), fmtRate(p.Rate), p.Replicas, run.Seed, run.Holds, run.StoppedEarly != "")
				for _, t := range terms {
					b.WriteByte(',')
					if v, ok := run.Values[t.Key()]; ok && v.Defined() {
						b.WriteString(strconv.FormatFloat(v.Float(), 'g', 8, 64))
					}
				}
				u, lim := "", ""
				if k := run.Knee; k != nil {
					if k.BusiestUtilization.Defined() {
						u = strconv.FormatFloat(k.BusiestUtilization.Float(), 'f', 4, 64)
					}
					lim = k.Binding
				}
				fmt.Fprintf(&b, ",%s,%s", u, lim)
				for _, t := range terms {
					if !hasInterval(t) {
						continue
					}
					if lo, hi, ok := interval(t, &run); ok {
						fmt.Fprintf(&b, ",%s,%s", strconv.FormatFloat(lo, 'g', 8, 64), strconv.FormatFloat(hi, 'g', 8, 64))
					} else {
						b.WriteString(",,")
					}
				}
				b.WriteByte('\n')
			}
		}
	}
	return b.Bytes()
}

func csvField(s string) string {
	if strings.ContainsAny(s, ",\"\n") {
		return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
	}
	return s
}

// interval is a run's 90% latency interval (ms) of a whole-run term, where
// the summary has one (report.LatencyIntervals: TTFT p50 and p99, TPOT
// p50, E2E p99; docs/latency.md "Intervals").
func interval(t Term, r *Run) (lo, hi float64, ok bool) {
	iv := r.Intervals
	if iv == nil || t.Scope != WholeRun {
		return 0, 0, false
	}
	var b [2]report.Num
	switch t.Metric + "_" + t.Stat {
	case "ttft_p50":
		b = iv.TTFTP50
	case "ttft_p99":
		b = iv.TTFTP99
	case "tpot_p50":
		b = iv.TPOTP50
	case "e2e_p99":
		b = iv.E2EP99
	default:
		return 0, 0, false
	}
	if !b[0].Defined() || !b[1].Defined() {
		return 0, 0, false
	}
	return b[0].Float(), b[1].Float(), true
}

// hasInterval reports whether a term is one the summaries give intervals
// for.
func hasInterval(t Term) bool {
	if t.Scope != WholeRun {
		return false
	}
	switch t.Metric + "_" + t.Stat {
	case "ttft_p50", "ttft_p99", "tpot_p50", "e2e_p99":
		return true
	}
	return false
}

// pointInterval is the union of a point's runs' intervals of a term.
func pointInterval(p *Point, t Term) (lo, hi float64, ok bool) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for i := range p.Runs {
		if l, h, k := interval(t, &p.Runs[i]); k {
			lo, hi, ok = math.Min(lo, l), math.Max(hi, h), true
		}
	}
	return lo, hi, ok
}
