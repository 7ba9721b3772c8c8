package sweep

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/eppsim/eppsim/report"
)

// Metric is a summary metric addressed by its JSON path in the run
// summary (report.Summary), e.g. latency_ms.ttft.p99.
type Metric struct {
	Path string
	keys []string
}

// String returns the metric's JSON path.
func (m Metric) String() string { return m.Path }

// Producer types as report.Summary.Prediction keys them.
const (
	approxProducer  = "approx-prefix-cache-producer"
	preciseProducer = "precise-prefix-cache-producer"
)

// aliasPath resolves a short metric name to its JSON path.
func aliasPath(name string) (string, bool) {
	switch name {
	case "throughput", "rps", "requests_per_s", "throughput_rps":
		return "throughput.requests_per_s", true
	case "output_tps", "output_tokens_per_s":
		return "throughput.output_tokens_per_s", true
	case "input_tps", "input_tokens_per_s":
		return "throughput.input_tokens_per_s", true
	case "hit_ratio", "true_hit_ratio":
		return "cache.true_hit_ratio", true
	case "oracle_hit_ratio":
		return "cache.oracle_hit_ratio", true
	case "routed_hit_ratio":
		return "cache.routed_hit_ratio", true
	case "infinite_cache_hit_ratio", "infinite_hit_ratio":
		return "cache.infinite_cache_hit_ratio", true
	case "queue_effect", "queue_effect_tokens":
		return "cache.queue_effect_tokens", true
	case "over_predicted", "over_predicted_tokens":
		return "prediction." + approxProducer + ".over_predicted_tokens", true
	case "under_predicted", "under_predicted_tokens":
		return "prediction." + approxProducer + ".under_predicted_tokens", true
	case "idle_replicas":
		return "routing.idle_replicas", true
	case "regret", "regret_tokens":
		return "cache.regret_tokens", true
	case "evictions":
		return "cache.evictions", true
	case "preemptions":
		return "cache.preemptions", true
	case "mae", "prediction_mae":
		return "prediction." + approxProducer + ".mae", true
	case "phantom_rate":
		return "prediction." + approxProducer + ".phantom_rate", true
	case "imbalance", "load_imbalance":
		return "routing.load_imbalance", true
	case "tie_share":
		return "routing.tie_share", true
	case "completed":
		return "requests.completed", true
	case "rejected":
		return "requests.rejected", true
	}
	// ttft_p99, e2e_mean, queue_p50, ttft_p99_ms, ...
	base := strings.TrimSuffix(name, "_ms")
	if lat, stat, ok := strings.Cut(base, "_"); ok {
		switch lat {
		case "ttft", "tpot", "e2e", "queue":
			switch stat {
			case "mean", "p50", "p90", "p95", "p99", "max":
				return "latency_ms." + lat + "." + stat, true
			}
		}
	}
	return "", false
}

// dynamicMaps are the summary objects keyed by run-dependent names
// (replicas, rejection reasons, producer error causes).
func dynamicMap(path string) bool {
	switch path {
	case "requests.rejected_reasons", "cache.per_replica_hit_ratio", "routing.requests_per_replica":
		return true
	}
	return strings.HasPrefix(path, "prediction.") && strings.HasSuffix(path, ".error_by_cause")
}

// summarySchema is a summary with every optional part present, as a JSON
// tree, to check metric paths against.
func summarySchema() map[string]any {
	var s report.Summary
	s.Requests.Reasons = map[string]int{"reason": 1}
	cause := map[string]float64{"cause": 1}
	s.Prediction = map[string]*report.Prediction{approxProducer: {ErrorByCause: cause}, preciseProducer: {ErrorByCause: cause}}
	b, _ := json.Marshal(&s)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

// ParseMetric resolves a metric name: a JSON path into the run summary
// (latency_ms.ttft.p99, cache.true_hit_ratio, throughput.requests_per_s,
// prediction.approx-prefix-cache-producer.mae, ...) or a short alias
// (ttft_p99, throughput, true_hit_ratio, mae, imbalance, ...).
func ParseMetric(s string) (Metric, error) {
	name := strings.TrimSpace(s)
	if name == "" {
		return Metric{}, errors.New("empty metric name")
	}
	path := name
	if p, ok := aliasPath(name); ok {
		path = p
	}
	keys := strings.Split(path, ".")
	var node any = summarySchema()
	for i, k := range keys {
		if k == "" {
			return Metric{}, fmt.Errorf("metric %q: empty path element", s)
		}
		so := strings.Join(keys[:i], ".")
		if dynamicMap(so) {
			if i != len(keys)-1 {
				return Metric{}, fmt.Errorf("metric %q: %s.%s is a number", s, so, k)
			}
			return Metric{Path: path, keys: keys}, nil
		}
		obj, ok := node.(map[string]any)
		if !ok {
			return Metric{}, fmt.Errorf("metric %q: %s is not an object", s, so)
		}
		if i == 0 && (k == "config" || k == "sim" && len(keys) > 1 && strings.Contains(keys[1], "wall")) {
			return Metric{}, fmt.Errorf("metric %q: not a comparable metric", s)
		}
		if node, ok = obj[k]; !ok {
			return Metric{}, fmt.Errorf("unknown metric %q (want a JSON path of the run summary such as latency_ms.ttft.p99, or an alias such as ttft_p99, throughput, true_hit_ratio)", s)
		}
	}
	if _, ok := node.(float64); !ok {
		return Metric{}, fmt.Errorf("metric %q: %s is not a number", s, path)
	}
	return Metric{Path: path, keys: keys}, nil
}

// Value returns the metric in a summary tree (a report.Summary decoded
// into map[string]any); NaN when the summary lacks it (e.g. a prefix
// producer the config does not have). A missing rejection reason counts
// zero.
func (m Metric) Value(doc map[string]any) float64 {
	var node any = doc
	for _, k := range m.keys {
		obj, ok := node.(map[string]any)
		if !ok {
			return math.NaN()
		}
		if node, ok = obj[k]; !ok {
			if strings.HasPrefix(m.Path, "requests.rejected_reasons.") {
				return 0
			}
			return math.NaN()
		}
	}
	if v, ok := node.(float64); ok {
		return v
	}
	return math.NaN()
}

// NoMeasuredRequest is the violation of a sweep point or tune evaluation
// whose run measured nothing (no request after warm-up completed): its
// latencies, rates and ratios are null, and a sum it minimises (regret,
// evictions, preemptions) would be a vacuous 0, so it is never the best.
const NoMeasuredRequest = "no measured request"

// Measured reports whether a summary tree has a measured request. It
// has none when latency_ms.e2e.mean is null (or 0, as summaries written
// before issue #25 had it: no measured request has an E2E of 0); a tree
// without that field is not judged.
func Measured(doc map[string]any) bool {
	var node any = doc
	for _, k := range []string{"latency_ms", "e2e", "mean"} {
		obj, ok := node.(map[string]any)
		if !ok {
			return true
		}
		if node, ok = obj[k]; !ok {
			return true
		}
	}
	v, ok := node.(float64)
	return ok && v > 0
}

// Objective is a metric to minimise or (with a leading "-") maximise.
type Objective struct {
	Metric   Metric
	Maximize bool
}

// ParseObjective parses [+|-]METRIC: "-" maximises, "+" or nothing
// minimises.
func ParseObjective(s string) (Objective, error) {
	t := strings.TrimSpace(s)
	var o Objective
	switch {
	case strings.HasPrefix(t, "-"):
		o.Maximize, t = true, t[1:]
	case strings.HasPrefix(t, "+"):
		t = t[1:]
	}
	m, err := ParseMetric(t)
	if err != nil {
		return Objective{}, fmt.Errorf("--objective %q: %w", s, err)
	}
	o.Metric = m
	return o, nil
}

// String is the objective in --objective form with the full path.
func (o Objective) String() string {
	if o.Maximize {
		return "-" + o.Metric.Path
	}
	return o.Metric.Path
}

// Label describes the objective for people: "minimise latency_ms.ttft.p99".
func (o Objective) Label() string {
	if o.Maximize {
		return "maximise " + o.Metric.Path
	}
	return "minimise " + o.Metric.Path
}

// signed turns v into a value to minimise.
func (o Objective) signed(v float64) float64 {
	if o.Maximize {
		return -v
	}
	return v
}

// Constraint bounds a metric: METRIC OP VALUE with OP one of < <= > >=.
type Constraint struct {
	Metric Metric
	Op     string
	Bound  float64
}

// ParseConstraint parses "METRIC<VALUE" (also <=, >, >=), e.g.
// "latency_ms.ttft.p99<2000".
func ParseConstraint(s string) (Constraint, error) {
	i := strings.IndexAny(s, "<>=!")
	if i < 0 {
		return Constraint{}, fmt.Errorf("--constraint %q: want METRIC<VALUE (or <=, >, >=)", s)
	}
	op := s[i : i+1]
	if i+1 < len(s) && s[i+1] == '=' {
		op += "="
	}
	switch op {
	case "<", "<=", ">", ">=":
	default:
		return Constraint{}, fmt.Errorf("--constraint %q: operator %q: want <, <=, > or >=", s, op)
	}
	m, err := ParseMetric(s[:i])
	if err != nil {
		return Constraint{}, fmt.Errorf("--constraint %q: %w", s, err)
	}
	v, err := parseNumber(strings.TrimSpace(s[i+len(op):]))
	if err != nil {
		return Constraint{}, fmt.Errorf("--constraint %q: bound: %w", s, err)
	}
	return Constraint{Metric: m, Op: op, Bound: v}, nil
}

// String is the constraint in --constraint form.
func (c Constraint) String() string {
	return c.Metric.Path + c.Op + strconv.FormatFloat(c.Bound, 'g', -1, 64)
}

// Holds reports whether v satisfies the constraint (NaN never does).
func (c Constraint) Holds(v float64) bool { return Compare(v, c.Op, c.Bound) }

// Compare reports whether v op bound holds for op <, <=, > or >= (false
// for any other op, and for a NaN v): the comparison of a sweep
// constraint and of a capacity SLO term.
func Compare(v float64, op string, bound float64) bool {
	switch op {
	case "<":
		return v < bound
	case "<=":
		return v <= bound
	case ">":
		return v > bound
	case ">=":
		return v >= bound
	}
	return false
}

// DefaultObjective is what a sweep minimises without --objective.
const DefaultObjective = "latency_ms.ttft.p99"

// ParseObjectives parses --objective values (at most two; none means
// DefaultObjective).
func ParseObjectives(ss []string) ([]Objective, error) {
	if len(ss) == 0 {
		ss = []string{DefaultObjective}
	}
	if len(ss) > 2 {
		return nil, fmt.Errorf("--objective: at most two objectives (a Pareto front), got %d", len(ss))
	}
	var out []Objective
	for _, s := range ss {
		o, err := ParseObjective(s)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	if len(out) == 2 && out[0].Metric.Path == out[1].Metric.Path {
		return nil, fmt.Errorf("--objective: %s given twice", out[0].Metric.Path)
	}
	return out, nil
}

// ParseConstraints parses --constraint values.
func ParseConstraints(ss []string) ([]Constraint, error) {
	var out []Constraint
	for _, s := range ss {
		c, err := ParseConstraint(s)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}
