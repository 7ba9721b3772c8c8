package sweep

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// column is one headline metric of points.csv and sweep.json.
type column struct {
	name, path string
	prec       int // decimals; -1 for integers
}

// headlineColumns are the headline metrics, in points.csv order.
func headlineColumns() []column {
	return []column{
		{"ttft_p50_ms", "latency_ms.ttft.p50", 3},
		{"ttft_p99_ms", "latency_ms.ttft.p99", 3},
		{"e2e_p99_ms", "latency_ms.e2e.p99", 3},
		{"tpot_p50_ms", "latency_ms.tpot.p50", 3},
		{"throughput_rps", "throughput.requests_per_s", 4},
		{"output_tokens_per_s", "throughput.output_tokens_per_s", 2},
		{"true_hit_ratio", "cache.true_hit_ratio", 6},
		{"oracle_hit_ratio", "cache.oracle_hit_ratio", 6},
		{"regret_tokens", "cache.regret_tokens", -1},
		{"prediction_mae", "prediction." + approxProducer + ".mae", 6},
		{"load_imbalance", "routing.load_imbalance", 4},
		{"completed", "requests.completed", -1},
		{"rejected", "requests.rejected", -1},
	}
}

// PointResult is one finished point, evaluated.
type PointResult struct {
	Index  int
	Values []string
	// Headline holds the headline metrics in headlineColumns order (NaN
	// when absent); Objectives the objective values (as measured, not
	// sign-adjusted).
	Headline   []float64
	Objectives []float64
	// Violated lists the constraints the point breaks, and
	// NoMeasuredRequest when its run measured nothing.
	Violated []string
	Error    string
	Feasible bool
}

// Results is a sweep's evaluated points.
type Results struct {
	Spec        SpecDoc
	Hash        string
	Objectives  []Objective
	Constraints []Constraint
	// Points are sorted by index.
	Points []PointResult
	// Best is the best feasible point (nil when none is feasible).
	Best *PointResult
	// Pareto lists the indices of the non-dominated feasible points when
	// there are two objectives, by the first objective.
	Pareto []int
	// Noise states the seed noise of the best point's margin (nil without
	// a best point); SwitchedOff lists the scorers the best point sets to
	// weight 0.
	Noise       *Noise
	SwitchedOff []string
}

// Complete reports whether every point of the sweep is present.
func (r *Results) Complete() bool { return len(r.Points) == r.Spec.Points }

// Failed counts the points whose simulation failed.
func (r *Results) Failed() int {
	n := 0
	for _, p := range r.Points {
		if p.Error != "" {
			n++
		}
	}
	return n
}

// evaluate computes every point's metrics, feasibility, the best point
// and the Pareto front. recs must be sorted by index.
func evaluate(h *logHeader, recs []Record, objs []Objective, cons []Constraint) (*Results, error) {
	r := &Results{Spec: h.Spec, Hash: h.Hash, Objectives: objs, Constraints: cons}
	cols := headlineColumns()
	metrics := make([]Metric, len(cols))
	for i, c := range cols {
		m, err := ParseMetric(c.path)
		if err != nil {
			return nil, err
		}
		metrics[i] = m
	}
	for _, rec := range recs {
		pr := PointResult{Index: rec.Index, Values: rec.Values, Error: rec.Error}
		if rec.Error == "" {
			var doc map[string]any
			if err := json.Unmarshal(rec.Summary, &doc); err != nil {
				return nil, fmt.Errorf("point %d: summary: %w", rec.Index, err)
			}
			for _, m := range metrics {
				pr.Headline = append(pr.Headline, m.Value(doc))
			}
			pr.Feasible = true
			for _, o := range objs {
				v := o.Metric.Value(doc)
				pr.Objectives = append(pr.Objectives, v)
				if math.IsNaN(v) {
					pr.Feasible = false
				}
			}
			for _, c := range cons {
				if v := c.Metric.Value(doc); !c.Holds(v) {
					pr.Violated = append(pr.Violated, c.String())
					pr.Feasible = false
				}
			}
			if !Measured(doc) {
				pr.Violated = append(pr.Violated, NoMeasuredRequest)
				pr.Feasible = false
			}
		}
		r.Points = append(r.Points, pr)
	}
	for i := range r.Points {
		p := &r.Points[i]
		if p.Feasible && (r.Best == nil || r.better(p, r.Best)) {
			r.Best = p
		}
	}
	if len(objs) == 2 {
		r.Pareto = r.paretoFront()
	}
	r.Noise = r.sweepNoise()
	if r.Best != nil {
		r.SwitchedOff = switchedOff(r.Spec.Dims, r.Best.Values)
	}
	return r, nil
}

// better orders feasible points: by the first objective, then the second,
// then the lower index.
func (r *Results) better(a, b *PointResult) bool {
	for k, o := range r.Objectives {
		va, vb := o.signed(a.Objectives[k]), o.signed(b.Objectives[k])
		if va != vb {
			return va < vb
		}
	}
	return a.Index < b.Index
}

// paretoFront returns the feasible points that no other feasible point
// dominates on the two objectives (both minimised after sign adjustment),
// ordered by the first objective.
func (r *Results) paretoFront() []int {
	var feas []*PointResult
	for i := range r.Points {
		if r.Points[i].Feasible {
			feas = append(feas, &r.Points[i])
		}
	}
	o0, o1 := r.Objectives[0], r.Objectives[1]
	slices.SortFunc(feas, func(a, b *PointResult) int {
		switch {
		case a.Index == b.Index:
			return 0
		case r.better(a, b):
			return -1
		}
		return 1
	})
	var front []int
	minY := math.Inf(1)
	var last *PointResult
	for _, p := range feas {
		x, y := o0.signed(p.Objectives[0]), o1.signed(p.Objectives[1])
		switch {
		case y < minY:
			minY = y
		case last != nil && y == minY && x == o0.signed(last.Objectives[0]):
			// equal to the last front point: not dominated either
		default:
			continue
		}
		front = append(front, p.Index)
		last = p
	}
	return front
}

// finalize evaluates a sweep directory's records and writes points.csv,
// best.yaml, sweep.json and the plots into dir.
func finalize(dir string, h *logHeader, recs []Record, objs []Objective, cons []Constraint, dpi int) (*Results, error) {
	r, err := evaluate(h, recs, objs, cons)
	if err != nil {
		return nil, err
	}
	if err := writeAtomic(dir, PointsFile, r.pointsCSV()); err != nil {
		return nil, err
	}
	if r.Best != nil {
		y, err := r.bestYAML()
		if err != nil {
			return nil, err
		}
		if err := writeAtomic(dir, BestFile, y); err != nil {
			return nil, err
		}
	} else if err := os.Remove(filepath.Join(dir, BestFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("removing the stale %s: %w", BestFile, err)
	}
	sj, err := r.sweepJSON()
	if err != nil {
		return nil, err
	}
	if err := writeAtomic(dir, SweepFile, sj); err != nil {
		return nil, err
	}
	if err := r.writePlots(dir, dpi); err != nil {
		return nil, err
	}
	return r, nil
}

// fmtFloat formats a metric with fixed decimals (prec -1: an integer);
// NaN is empty.
func fmtFloat(v float64, prec int) string {
	if math.IsNaN(v) {
		return ""
	}
	if prec < 0 {
		return strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

// fmtValue formats an objective value with ten significant digits.
func fmtValue(v float64) string {
	if math.IsNaN(v) {
		return ""
	}
	return strconv.FormatFloat(v, 'g', 10, 64)
}

// csvField quotes a field when it needs it.
func csvField(s string) string {
	if strings.ContainsAny(s, ",\"\n\r") {
		return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
	}
	return s
}

// pointsCSV is points.csv: index, the varied values, the headline
// metrics, the objectives, feasible and error; one row per point by index.
func (r *Results) pointsCSV() []byte {
	var b bytes.Buffer
	cols := headlineColumns()
	head := []string{"index"}
	for _, d := range r.Spec.Dims {
		head = append(head, d.Name)
	}
	for _, c := range cols {
		head = append(head, c.name)
	}
	for _, o := range r.Objectives {
		head = append(head, "objective:"+o.String())
	}
	head = append(head, "feasible", "error")
	for i, h := range head {
		head[i] = csvField(h)
	}
	b.WriteString(strings.Join(head, ",") + "\n")
	for _, p := range r.Points {
		row := []string{strconv.Itoa(p.Index)}
		for _, v := range p.Values {
			row = append(row, csvField(v))
		}
		for i, c := range cols {
			v := math.NaN()
			if p.Error == "" {
				v = p.Headline[i]
			}
			row = append(row, fmtFloat(v, c.prec))
		}
		for k := range r.Objectives {
			v := math.NaN()
			if p.Error == "" {
				v = p.Objectives[k]
			}
			row = append(row, fmtValue(v))
		}
		row = append(row, strconv.FormatBool(p.Feasible), csvField(oneLine(p.Error)))
		b.WriteString(strings.Join(row, ",") + "\n")
	}
	return b.Bytes()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// bestYAML is best.yaml: the base configuration with the best point's
// plugin values applied, headed by comments naming the point.
func (r *Results) bestYAML() ([]byte, error) {
	return bestConfigYAML(r.Spec, r.Best.Values, func(b *bytes.Buffer) {
		fmt.Fprintf(b, "# eppsim sweep: best feasible point %d of %d", r.Best.Index, r.Spec.Points)
		for k, o := range r.Objectives {
			fmt.Fprintf(b, "; %s = %s", o.Label(), fmtValue(r.Best.Objectives[k]))
		}
		b.WriteString("\n")
		for i, d := range r.Spec.Dims {
			fmt.Fprintf(b, "# %s = %s\n", d.Name, r.Best.Values[i])
		}
	})
}

// bestConfigYAML applies values (aligned with spec.Dims) to the sweep's
// base configuration and marshals it after the comment lines header
// writes.
func bestConfigYAML(spec SpecDoc, values []string, header func(*bytes.Buffer)) ([]byte, error) {
	b, err := baseFromYAML([]byte(spec.BaseEPP), spec.Baseline)
	if err != nil {
		return nil, fmt.Errorf("%s: base config: %w", BestFile, err)
	}
	var dims []Dim
	for _, d := range spec.Dims {
		dim, err := newDim(d.Name, d.Values)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", BestFile, err)
		}
		dims = append(dims, dim)
	}
	_, y, err := b.configFor(dims, values)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", BestFile, err)
	}
	var out bytes.Buffer
	header(&out)
	if spec.Baseline != "" {
		fmt.Fprintf(&out, "# base: the %s baseline", spec.Baseline)
		if spec.Baseline == "round-robin" {
			out.WriteString(" (eppsim swaps its picker for round-robin)")
		}
		out.WriteString("\n")
	}
	out.Write(y)
	return out.Bytes(), nil
}

// jsonFloat is a float that encodes NaN as null.
type jsonFloat float64

// MarshalJSON implements json.Marshaler.
func (f jsonFloat) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
		return []byte("null"), nil
	}
	return json.Marshal(float64(f))
}

// pointDoc is one point in sweep.json.
type pointDoc struct {
	Index      int                  `json:"index"`
	Values     []string             `json:"values"`
	Metrics    map[string]jsonFloat `json:"metrics,omitempty"`
	Objectives []jsonFloat          `json:"objectives,omitempty"`
	Feasible   bool                 `json:"feasible"`
	Violated   []string             `json:"violated,omitempty"`
	Error      string               `json:"error,omitempty"`
}

func (r *Results) pointDoc(p *PointResult) pointDoc {
	d := pointDoc{Index: p.Index, Values: p.Values, Feasible: p.Feasible, Violated: p.Violated, Error: p.Error}
	if p.Error != "" {
		return d
	}
	d.Metrics = map[string]jsonFloat{}
	for i, c := range headlineColumns() {
		d.Metrics[c.name] = jsonFloat(p.Headline[i])
	}
	for _, v := range p.Objectives {
		d.Objectives = append(d.Objectives, jsonFloat(v))
	}
	return d
}

// sweepDoc is sweep.json.
type sweepDoc struct {
	Format      string    `json:"format"`
	Hash        string    `json:"hash"`
	Spec        SpecDoc   `json:"spec"`
	Objectives  []string  `json:"objectives"`
	Constraints []string  `json:"constraints,omitempty"`
	PointsDone  int       `json:"points_done"`
	Complete    bool      `json:"complete"`
	Failed      int       `json:"failed"`
	Best        *pointDoc `json:"best"`
	// Noise is the seed noise of the best point's margin; BestSwitchesOff
	// the scorers its weights switch off (weight 0).
	Noise           *Noise     `json:"noise,omitempty"`
	BestSwitchesOff []string   `json:"best_switches_off,omitempty"`
	Pareto          []int      `json:"pareto_front,omitempty"`
	Points          []pointDoc `json:"points"`
}

func (r *Results) sweepJSON() ([]byte, error) {
	d := sweepDoc{Format: "eppsim-sweep/1", Hash: r.Hash, Spec: r.Spec, PointsDone: len(r.Points),
		Complete: r.Complete(), Failed: r.Failed(), Pareto: r.Pareto, Noise: r.Noise, BestSwitchesOff: r.SwitchedOff}
	for _, o := range r.Objectives {
		d.Objectives = append(d.Objectives, o.String())
	}
	for _, c := range r.Constraints {
		d.Constraints = append(d.Constraints, c.String())
	}
	if r.Best != nil {
		b := r.pointDoc(r.Best)
		d.Best = &b
	}
	d.Points = make([]pointDoc, 0, len(r.Points))
	for i := range r.Points {
		d.Points = append(d.Points, r.pointDoc(&r.Points[i]))
	}
	out, err := json.MarshalIndent(&d, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", SweepFile, err)
	}
	return append(out, '\n'), nil
}
