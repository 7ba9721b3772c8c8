package capacity

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/eppsim/eppsim/report"
	"github.com/eppsim/eppsim/sim"
	"github.com/eppsim/eppsim/sweep"
)

// Scopes of an SLO term: the whole run, or every load stage.
const (
	WholeRun   = -1
	EveryStage = -2
)

// Term is one SLO term: a metric of the run (or of every stage, or of one
// stage), an operator and a bound. Latencies are in ms, success a share.
type Term struct {
	// Text is the term as written (--slo).
	Text string
	// Metric is "ttft", "tpot", "e2e", "queue" or "success"; Stat, for
	// a latency, "p50", "p90", "p95", "p99", "max" or "mean".
	Metric, Stat string
	Op           string
	Bound        float64
	// Scope is WholeRun, EveryStage or a stage index.
	Scope int
}

// latencyStats are the statistics a latency term may bound, with the
// percentile each is (1 for the max, 0 for the mean).
var latencyStats = map[string]float64{"p50": 0.50, "p90": 0.90, "p95": 0.95, "p99": 0.99, "max": 1, "mean": 0}

// ParseTerm parses an SLO term: [SCOPE:]METRIC OP VALUE, where METRIC is
// ttft_STAT, tpot_STAT, e2e_STAT or queue_STAT (STAT p50, p90, p95, p99,
// max or mean) with a duration VALUE (2s, 50ms; a bare number is ms), or
// success with a share (0.99) or a percentage (99%); OP is <=, <, >= or
// >; SCOPE is "stage" (every load stage) or "stageK" (stage K, 0-based).
func ParseTerm(s string) (Term, error) {
	t := Term{Text: strings.TrimSpace(s), Scope: WholeRun}
	body := t.Text
	if scope, rest, ok := strings.Cut(body, ":"); ok {
		switch {
		case scope == "stage":
			t.Scope = EveryStage
		case strings.HasPrefix(scope, "stage"):
			k, err := strconv.Atoi(scope[len("stage"):])
			if err != nil || k < 0 {
				return t, fmt.Errorf("--slo %q: scope %q: want stage (every stage) or stageK (K = 0, 1, ...)", s, scope)
			}
			t.Scope = k
		default:
			return t, fmt.Errorf("--slo %q: scope %q: want stage (every stage) or stageK (K = 0, 1, ...)", s, scope)
		}
		body = rest
	}
	i := strings.IndexAny(body, "<>=")
	if i < 0 {
		return t, fmt.Errorf("--slo %q: want METRIC<=VALUE (or <, >=, >), e.g. ttft_p99<=2s, success>=0.99", s)
	}
	op := body[i : i+1]
	if i+1 < len(body) && body[i+1] == '=' {
		op += "="
	}
	switch op {
	case "<", "<=", ">", ">=":
	default:
		return t, fmt.Errorf("--slo %q: operator %q: want <=, <, >= or >", s, op)
	}
	t.Op = op
	name := strings.TrimSpace(body[:i])
	val := strings.TrimSpace(body[i+len(op):])
	if name == "success" {
		t.Metric = "success"
		pct := strings.HasSuffix(val, "%")
		v, err := strconv.ParseFloat(strings.TrimSuffix(val, "%"), 64)
		if pct {
			v /= 100
		}
		if err != nil || !(v >= 0 && v <= 1) {
			return t, fmt.Errorf("--slo %q: success bound %q: want a share in [0, 1] (0.99) or a percentage (99%%)", s, val)
		}
		t.Bound = v
	} else {
		m, stat, ok := strings.Cut(name, "_")
		if _, known := latencyStats[stat]; !ok || !known || !(m == "ttft" || m == "tpot" || m == "e2e" || m == "queue") {
			return t, fmt.Errorf("--slo %q: unknown metric %q (want ttft_p99, tpot_p90, e2e_p50, queue_mean, ... or success)", s, name)
		}
		t.Metric, t.Stat = m, stat
		v, err := parseMillis(val)
		if err != nil {
			return t, fmt.Errorf("--slo %q: bound %q: %w", s, val, err)
		}
		t.Bound = v
	}
	if t.Scope != WholeRun && !t.stageMetric() {
		return t, fmt.Errorf("--slo %q: a stage reports ttft_*, e2e_*, tpot_mean and success only", s)
	}
	return t, nil
}

// parseMillis reads a duration (2s, 50ms, 1.5s) or a bare number of ms.
func parseMillis(v string) (float64, error) {
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
			return 0, errors.New("must be a finite duration ≥ 0")
		}
		return f, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, errors.New("want a duration such as 2s or 50ms (a bare number is ms)")
	}
	if d < 0 {
		return 0, errors.New("must be a duration ≥ 0")
	}
	return float64(d) / 1e6, nil
}

// ParseSLO parses every --slo term; at least one is needed.
func ParseSLO(ss []string) ([]Term, error) {
	if len(ss) == 0 {
		return nil, errors.New("--slo: at least one term is needed (e.g. --slo 'ttft_p99<=2s')")
	}
	var out []Term
	for _, s := range ss {
		t, err := ParseTerm(s)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// stageMetric reports whether a stage summary has the term's metric.
func (t Term) stageMetric() bool {
	switch t.Metric {
	case "ttft", "e2e", "success":
		return true
	case "tpot":
		return t.Stat == "mean"
	}
	return false
}

// Label is the term for prose: "TTFT p99 ≤ 2 s".
func (t Term) Label() string {
	var b strings.Builder
	if t.Scope == EveryStage {
		b.WriteString("every stage's ")
	} else if t.Scope >= 0 {
		fmt.Fprintf(&b, "stage %d's ", t.Scope)
	}
	b.WriteString(t.metricLabel())
	b.WriteString(" " + map[string]string{"<=": "≤", "<": "<", ">=": "≥", ">": ">"}[t.Op] + " ")
	b.WriteString(t.boundText())
	return b.String()
}

// metricLabel is the term's metric for prose: "TTFT p99", "success".
func (t Term) metricLabel() string {
	if t.Metric == "success" {
		return "success"
	}
	return map[string]string{"ttft": "TTFT", "tpot": "TPOT", "e2e": "E2E", "queue": "queue wait"}[t.Metric] + " " + t.Stat
}

func (t Term) boundText() string {
	if t.Metric == "success" {
		return strconv.FormatFloat(t.Bound, 'g', -1, 64)
	}
	if t.Bound >= 1000 {
		return strconv.FormatFloat(t.Bound/1000, 'g', -1, 64) + " s"
	}
	return strconv.FormatFloat(t.Bound, 'g', -1, 64) + " ms"
}

// Key is the term's column name (capacity.json, curves): ttft_p99,
// stage:success, stage1:ttft_p90.
func (t Term) Key() string {
	k := t.Metric
	if t.Stat != "" {
		k += "_" + t.Stat
	}
	switch {
	case t.Scope == EveryStage:
		k = "stage:" + k
	case t.Scope >= 0:
		k = "stage" + strconv.Itoa(t.Scope) + ":" + k
	}
	return k
}

// holds reports whether v satisfies the term (NaN never does).
func (t Term) holds(v float64) bool { return sweep.Compare(v, t.Op, t.Bound) }

// upper reports whether the term bounds its metric from above.
func (t Term) upper() bool { return t.Op == "<" || t.Op == "<=" }

// Value is the term's metric in a summary: for EveryStage the worst stage
// (largest for an upper bound, smallest for a lower one); NaN when the
// summary lacks it.
func (t Term) Value(s *report.Summary) float64 {
	if t.Scope == WholeRun {
		if t.Metric == "success" {
			if s.Requests.Total == 0 {
				return math.NaN()
			}
			return float64(s.Requests.Complete) / float64(s.Requests.Total)
		}
		var d report.Dist
		switch t.Metric {
		case "ttft":
			d = s.Latency.TTFT
		case "tpot":
			d = s.Latency.TPOT
		case "e2e":
			d = s.Latency.E2E
		case "queue":
			d = s.Latency.Queue
		}
		return distStat(d, t.Stat)
	}
	worst := math.NaN()
	for _, st := range s.Stages {
		if t.Scope >= 0 && st.Stage != t.Scope {
			continue
		}
		v := stageValue(t, &st)
		if math.IsNaN(v) {
			return v // a stage without the metric fails the term
		}
		if math.IsNaN(worst) || (t.upper() && v > worst) || (!t.upper() && v < worst) {
			worst = v
		}
	}
	return worst
}

func stageValue(t Term, st *report.StageSummary) float64 {
	switch t.Metric {
	case "ttft":
		return distStat(st.TTFT, t.Stat)
	case "e2e":
		return distStat(st.E2E, t.Stat)
	case "tpot":
		return num(st.ITLMean)
	case "success":
		return num(st.SuccessRate)
	}
	return math.NaN()
}

func num(n report.Num) float64 {
	if !n.Defined() {
		return math.NaN()
	}
	return n.Float()
}

func distStat(d report.Dist, stat string) float64 {
	switch stat {
	case "p50":
		return num(d.P50)
	case "p90":
		return num(d.P90)
	case "p95":
		return num(d.P95)
	case "p99":
		return num(d.P99)
	case "max":
		return num(d.Max)
	case "mean":
		return num(d.Mean)
	}
	return math.NaN()
}

// recordValue is a record's sample of a latency term's metric (ms), as
// report's Aggregator computes it; ok is false when the record is no
// sample of it (warm-up, rejected, or a TPOT of one output token).
func recordValue(metric string, r *sim.Record) (v float64, ok bool) {
	if r.Warmup || r.Outcome != sim.Completed {
		return 0, false
	}
	const ms = 1e6
	switch metric {
	case "ttft":
		return float64(r.TTFT) / ms, true
	case "e2e":
		return float64(r.E2E) / ms, true
	case "queue":
		return float64(r.Queue) / ms, true
	case "tpot":
		if r.OutputTokens > 1 {
			return float64(r.E2E-r.TTFT) / ms / float64(r.OutputTokens-1), true
		}
	}
	return 0, false
}

// Stopper returns the early stop of a run of at most n requests under
// the terms (nil when no term can stop it): it ends the run as soon as a
// term can no longer hold, whatever the records still to come.
//   - a latency percentile p bounded from above fails once more samples
//     miss the bound than n − ⌈p·n⌉ (a nearest-rank percentile over at
//     most n samples: report's);
//   - a mean bounded from above fails once the sum of its samples passes
//     the bound times n (the mean is over at most n samples, all ≥ 0);
//   - success ≥ f fails once more than n − ⌈f·n⌉ requests were rejected
//     (every request ends completed or rejected in a whole run).
//
// A stage term is judged the same way within each stage k it covers, n
// being stages[k], the most requests stage k sends (nil or a stage beyond
// it: stage terms never stop the run). Lower bounds on latencies never
// stop a run.
func Stopper(terms []Term, n int, stages []int) sim.StopFunc {
	type check struct {
		t     Term
		stage int // WholeRun, or the stage it counts
		n     int
		// allowed is how many rejections (success) or misses (a
		// percentile) the term tolerates over n requests; limit the sum a
		// mean may reach.
		allowed int
		limit   float64
		count   int
		sum     float64
	}
	var cs []*check
	add := func(t Term, stage, n int) {
		c := &check{t: t, stage: stage, n: n}
		switch {
		case t.Metric == "success" && t.Op == ">=":
			// success ≥ f holds iff completed ≥ f·n.
			c.allowed = n - int(math.Ceil(t.Bound*float64(n)))
		case t.Metric == "success" && t.Op == ">":
			c.allowed = n - int(math.Floor(t.Bound*float64(n))) - 1
		case t.Metric != "success" && t.upper():
			c.allowed = n - int(math.Ceil(latencyStats[t.Stat]*float64(n)))
			c.limit = t.Bound * float64(n)
		default:
			return
		}
		cs = append(cs, c)
	}
	for _, t := range terms {
		switch {
		case t.Scope == WholeRun:
			add(t, WholeRun, n)
		case t.Scope == EveryStage:
			for k, nk := range stages {
				add(t, k, nk)
			}
		case t.Scope < len(stages):
			add(t, t.Scope, stages[t.Scope])
		}
	}
	if len(cs) == 0 {
		return nil
	}
	return func(r *sim.Record) string {
		for _, c := range cs {
			t := c.t
			if c.stage != WholeRun && (r.Stage != c.stage || r.Warmup) {
				continue
			}
			if t.Metric == "success" {
				if r.Outcome != sim.Rejected {
					continue
				}
				if c.count++; c.count > c.allowed {
					return fmt.Sprintf("%s cannot hold: %d of at most %d requests%s rejected", t.Label(), c.count, c.n, stageWhere(c.stage))
				}
				continue
			}
			v, ok := recordValue(t.Metric, r)
			if !ok {
				continue
			}
			if t.Stat == "mean" {
				c.sum += v
				if (t.Op == "<=" && c.sum > c.limit) || (t.Op == "<" && c.sum >= c.limit) {
					return fmt.Sprintf("%s cannot hold: the samples%s so far sum to %.0f ms, more than the bound times the %d requests", t.Label(), stageWhere(c.stage), c.sum, c.n)
				}
				continue
			}
			if !t.holds(v) {
				if c.count++; c.count > c.allowed {
					return fmt.Sprintf("%s cannot hold: %d requests%s missed the bound, and %d of at most %d may", t.Label(), c.count, stageWhere(c.stage), c.allowed, c.n)
				}
			}
		}
		return ""
	}
}

// stageWhere names the stage a stop's reason concerns ("" for the whole
// run).
func stageWhere(stage int) string {
	if stage == WholeRun {
		return ""
	}
	return fmt.Sprintf(" in stage %d", stage)
}
