package report

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot/vg"

	"github.com/eppsim/eppsim/sim"
)

// ClassSummary breaks a run down by priority class (InferenceObjective)
// and by fairness ID, with the EPP's own answers by cause
// (flow-control.md §2, §7). It is present when a request of the run had
// an objective, a priority other than 0, a fairness ID other than
// default-flow, waited in flow control or was shed by the EPP's admission,
// or when the run's EPP config has the flowControl gate on.
type ClassSummary struct {
	// ByClass has one row per objective, highest priority first.
	ByClass []ClassRow `json:"by_class"`
	// ByFairnessID has one row per fairness ID, the most requests first,
	// at most MaxFairnessRows of them; the rest are summed in the last row,
	// named "(N other fairness IDs)".
	ByFairnessID []ClassRow `json:"by_fairness_id"`
	// RejectedByCause counts every rejected request by cause (Record.Cause),
	// warm-up included.
	RejectedByCause map[string]int `json:"rejected_by_cause,omitempty"`
	// EPPQueue is the flow-control wait of the completed requests after
	// warm-up (ms), apart from the engine queue (Latency.Queue).
	EPPQueue Dist `json:"epp_queue_ms"`
}

// MaxFairnessRows bounds ClassSummary.ByFairnessID.
const MaxFairnessRows = 20

// ClassRow is one class's (or fairness ID's) requests and latency.
type ClassRow struct {
	// Objective and Priority name a class ("" is requests without an
	// objective); FairnessID names a fairness row.
	Objective  string `json:"objective,omitempty"`
	Priority   int    `json:"priority"`
	FairnessID string `json:"fairness_id,omitempty"`
	// Requests counts the requests after warm-up, Completed those that
	// completed; Rejected counts the rest by cause (Record.Cause):
	// legacy-saturated and fc-capacity are shed, fc-ttl-expired expired,
	// admit-denied denied by an Admit plugin, evicted revoked in flight.
	Requests  int            `json:"requests"`
	Completed int            `json:"completed"`
	Rejected  map[string]int `json:"rejected,omitempty"`
	// Latencies over the completed requests (ms): TTFT and E2E as the
	// client sees them, the flow-control wait in the EPP (EPPQueue) and
	// the engine queue (EngineQueue). FlowWaitRejectedMean is the mean
	// flow-control wait of the requests flow control shed or expired.
	TTFT                 Dist    `json:"ttft_ms"`
	E2E                  Dist    `json:"e2e_ms"`
	EPPQueue             Dist    `json:"epp_queue_ms"`
	EngineQueue          Dist    `json:"engine_queue_ms"`
	FlowWaitRejectedMean float64 `json:"flow_wait_rejected_mean_ms,omitempty"`
}

// classAcc accumulates one ClassRow.
type classAcc struct {
	row                   ClassRow
	ttft, e2e, epp, queue []float64
	rejWait               float64
	rejWaited             int
}

func (c *classAcc) add(r *sim.Record) {
	if r.Warmup {
		return
	}
	c.row.Requests++
	const ms = 1e6
	switch r.Outcome {
	case sim.Completed:
		c.row.Completed++
		c.ttft = append(c.ttft, float64(r.TTFT)/ms)
		c.e2e = append(c.e2e, float64(r.E2E)/ms)
		c.epp = append(c.epp, float64(r.FlowWait)/ms)
		c.queue = append(c.queue, float64(r.Queue)/ms)
	default:
		if c.row.Rejected == nil {
			c.row.Rejected = map[string]int{}
		}
		c.row.Rejected[causeOf(r)]++
		if r.FlowWait > 0 {
			c.rejWait += float64(r.FlowWait) / ms
			c.rejWaited++
		}
	}
}

func (c *classAcc) summary() ClassRow {
	row := c.row
	row.TTFT, row.E2E, row.EPPQueue, row.EngineQueue = dist(c.ttft), dist(c.e2e), dist(c.epp), dist(c.queue)
	if c.rejWaited > 0 {
		row.FlowWaitRejectedMean = c.rejWait / float64(c.rejWaited)
	}
	return row
}

// causeOf is a rejected record's cause ("rejected" when it has none).
func causeOf(r *sim.Record) string {
	if r.Cause != "" {
		return r.Cause
	}
	return "rejected"
}

// classAggregator is the Aggregator's per-class part.
type classAggregator struct {
	on        bool
	byClass   map[string]*classAcc
	byFlow    map[string]*classAcc
	rejected  map[string]int
	eppQueue  []float64
	triggered bool
}

func newClassAggregator() *classAggregator {
	return &classAggregator{byClass: map[string]*classAcc{}, byFlow: map[string]*classAcc{}, rejected: map[string]int{}}
}

// admissionCauses are the causes of the EPP's admission layer.
var admissionCauses = []string{"legacy-saturated", "fc-capacity", "fc-ttl-expired", "fc-no-endpoints", "fc-other", "admit-denied", "evicted"}

func (c *classAggregator) add(r *sim.Record) {
	if r.Objective != "" || r.Priority != 0 || (r.FairnessID != "" && r.FairnessID != "default-flow") || r.FlowWait > 0 ||
		slices.Contains(admissionCauses, r.Cause) {
		c.triggered = true
	}
	if r.Outcome != sim.Completed {
		c.rejected[causeOf(r)]++
	} else if !r.Warmup {
		c.eppQueue = append(c.eppQueue, float64(r.FlowWait)/1e6)
	}
	cls := c.byClass[r.Objective]
	if cls == nil {
		cls = &classAcc{row: ClassRow{Objective: r.Objective, Priority: r.Priority}}
		c.byClass[r.Objective] = cls
	}
	cls.add(r)
	fid := r.FairnessID
	if fid == "" {
		fid = "default-flow"
	}
	fl := c.byFlow[fid]
	if fl == nil {
		fl = &classAcc{row: ClassRow{FairnessID: fid}}
		c.byFlow[fid] = fl
	}
	fl.add(r)
}

func (c *classAggregator) summary() *ClassSummary {
	if !c.on && !c.triggered {
		return nil
	}
	s := &ClassSummary{EPPQueue: dist(c.eppQueue)}
	if len(c.rejected) > 0 {
		s.RejectedByCause = c.rejected
	}
	for _, a := range c.byClass {
		s.ByClass = append(s.ByClass, a.summary())
	}
	slices.SortFunc(s.ByClass, func(a, b ClassRow) int {
		if a.Priority != b.Priority {
			return b.Priority - a.Priority
		}
		return strings.Compare(a.Objective, b.Objective)
	})
	flows := slices.Collect(maps.Values(c.byFlow))
	slices.SortFunc(flows, func(a, b *classAcc) int {
		if a.row.Requests != b.row.Requests {
			return b.row.Requests - a.row.Requests
		}
		return strings.Compare(a.row.FairnessID, b.row.FairnessID)
	})
	if len(flows) > MaxFairnessRows {
		rest := &classAcc{}
		for _, f := range flows[MaxFairnessRows-1:] {
			rest.row.Requests += f.row.Requests
			rest.row.Completed += f.row.Completed
			for k, v := range f.row.Rejected {
				if rest.row.Rejected == nil {
					rest.row.Rejected = map[string]int{}
				}
				rest.row.Rejected[k] += v
			}
			rest.ttft = append(rest.ttft, f.ttft...)
			rest.e2e = append(rest.e2e, f.e2e...)
			rest.epp = append(rest.epp, f.epp...)
			rest.queue = append(rest.queue, f.queue...)
			rest.rejWait += f.rejWait
			rest.rejWaited += f.rejWaited
		}
		rest.row.FairnessID = "(" + strconv.Itoa(len(flows)-MaxFairnessRows+1) + " other fairness IDs)"
		flows = append(flows[:MaxFairnessRows-1], rest)
	}
	for _, f := range flows {
		s.ByFairnessID = append(s.ByFairnessID, f.summary())
	}
	return s
}

// ClassLabel names a class row: its objective with its priority.
func ClassLabel(r ClassRow) string {
	name := r.Objective
	if name == "" {
		name = "(no objective)"
	}
	return name + " (p " + strconv.Itoa(r.Priority) + ")"
}

// shed, expired and other rejections of a class row.
func (r ClassRow) shed() int    { return r.Rejected["legacy-saturated"] + r.Rejected["fc-capacity"] }
func (r ClassRow) expired() int { return r.Rejected["fc-ttl-expired"] + r.Rejected["fc-no-endpoints"] }
func (r ClassRow) evicted() int { return r.Rejected["evicted"] }
func (r ClassRow) otherRejected() int {
	n := 0
	for _, v := range r.Rejected {
		n += v
	}
	return n - r.shed() - r.expired() - r.evicted()
}

// rejections is the "shed / expired / evicted / other" cell of r.
func (r ClassRow) rejections() string {
	return strconv.Itoa(r.shed()) + " / " + strconv.Itoa(r.expired()) + " / " + strconv.Itoa(r.evicted()) + " / " + strconv.Itoa(r.otherRejected())
}

// classRows are the headline rows of the priority classes (added only when
// a run has a class summary): per class, TTFT p99, EPP queue p99 and the
// shed, expired and otherwise rejected requests.
func classRows(runs []NamedSummary, group func(string, ...rowDef)) {
	type key struct {
		obj  string
		prio int
	}
	var keys []key
	for _, ns := range runs {
		if ns.Summary == nil || ns.Summary.Classes == nil {
			continue
		}
		for _, r := range ns.Summary.Classes.ByClass {
			if k := (key{r.Objective, r.Priority}); !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	if len(keys) == 0 {
		return
	}
	slices.SortFunc(keys, func(a, b key) int {
		if a.prio != b.prio {
			return b.prio - a.prio
		}
		return cmp.Compare(a.obj, b.obj)
	})
	cell := func(k key, f func(ClassRow) string) func(*Summary) string {
		return func(s *Summary) string {
			if s.Classes == nil {
				return dash
			}
			for _, r := range s.Classes.ByClass {
				if r.Objective == k.obj && r.Priority == k.prio {
					return f(r)
				}
			}
			return dash
		}
	}
	group("admission (EPP)",
		rowDef{"EPP queue wait p99 (ms)", func(s *Summary) string {
			if s.Classes == nil {
				return dash
			}
			return fn(s.Classes.EPPQueue.P99, 1)
		}},
		rowDef{"shed / expired / evicted / other rejected", func(s *Summary) string {
			if s.Classes == nil {
				return dash
			}
			return ClassRow{Rejected: s.Classes.RejectedByCause}.rejections()
		}},
	)
	for _, k := range keys {
		label := ClassLabel(ClassRow{Objective: k.obj, Priority: k.prio})
		group("class "+label,
			rowDef{"completed / requests", cell(k, func(r ClassRow) string {
				return strconv.Itoa(r.Completed) + " / " + strconv.Itoa(r.Requests)
			})},
			rowDef{"TTFT p50 / p99 (ms)", cell(k, func(r ClassRow) string { return p50p99(r.TTFT, 1) })},
			rowDef{"EPP queue p50 / p99 (ms)", cell(k, func(r ClassRow) string { return p50p99(r.EPPQueue, 1) })},
			rowDef{"shed / expired / evicted / other rejected", cell(k, ClassRow.rejections)},
		)
	}
}

// classSentence is the finding of a run with classes: the highest class's
// p99 TTFT and the lowest class's shed, expired and evicted requests (a
// highest class that completed nothing has no p99: the sentence says so).
func classSentence(r NamedSummary) string {
	c := r.Summary.Classes
	if c == nil || len(c.ByClass) < 2 {
		return ""
	}
	hi, lo := c.ByClass[0], c.ByClass[len(c.ByClass)-1]
	top := "has p99 TTFT " + fn(hi.TTFT.P99, 0) + " ms (EPP queue p99 " + fn(hi.EPPQueue.P99, 0) + " ms)"
	if !hi.TTFT.P99.Defined() {
		top = "completed none of its " + strconv.Itoa(hi.Requests) + " requests after warm-up"
	}
	return r.Name + ": the highest class, " + ClassLabel(hi) + ", " + top + "; the lowest, " + ClassLabel(lo) + ", had " + strconv.Itoa(lo.shed()) + " of " +
		strconv.Itoa(lo.Requests) + " requests shed, " + strconv.Itoa(lo.expired()) + " expired in the EPP's queue and " +
		strconv.Itoa(lo.evicted()) + " evicted in flight."
}

// appendClassColumns appends rec's ClassColumns and the row's newline.
func appendClassColumns(b []byte, rec *sim.Record) []byte {
	b = append(b, ',')
	b = appendField(b, rec.Objective)
	b = append(b, ',')
	b = strconv.AppendInt(b, int64(rec.Priority), 10)
	b = append(b, ',')
	b = appendField(b, rec.FairnessID)
	b = append(b, ',')
	b = appendMillis(b, rec.FlowWait)
	b = append(b, ',')
	b = appendMillis(b, rec.ProducerWait)
	b = append(b, ',')
	if rec.HTTPStatus != 0 {
		b = strconv.AppendInt(b, int64(rec.HTTPStatus), 10)
	}
	b = append(b, ',')
	b = appendField(b, rec.Cause)
	return append(b, '\n')
}

// classSeries is one class's TTFTs (ms) of a run, for the per-class plot.
type classSeries struct {
	objective string
	priority  int
	ttft      []float32
}

func (r *runData) addClassTTFT(rec *sim.Record) {
	for i := range r.classTTFT {
		if c := &r.classTTFT[i]; c.objective == rec.Objective && c.priority == rec.Priority {
			c.ttft = append(c.ttft, float32(float64(rec.TTFT)/1e6))
			return
		}
	}
	r.classTTFT = append(r.classTTFT, classSeries{objective: rec.Objective, priority: rec.Priority,
		ttft: []float32{float32(float64(rec.TTFT) / 1e6)}})
}

// PlotTTFTByClass is the per-class TTFT plot, written when Meta.Classes is
// set.
const PlotTTFTByClass = "ttft_by_class"

// ttftByClassFigure: TTFT CDF per config and priority class (colour by
// config; solid for the highest class, dashed and dotted below).
func (o *Output) ttftByClassFigure() figure {
	c := newTTFTCDF("TTFT CDF per priority class (completed requests, after warm-up)")
	for i, r := range o.runs {
		series := slices.Clone(r.classTTFT)
		slices.SortFunc(series, func(a, b classSeries) int {
			if a.priority != b.priority {
				return b.priority - a.priority
			}
			return strings.Compare(a.objective, b.objective)
		})
		for k, cs := range series {
			ln := c.add(cs.ttft, i, r.name+", "+ClassLabel(ClassRow{Objective: cs.objective, Priority: cs.priority}))
			if ln == nil {
				continue
			}
			switch k % 3 {
			case 1:
				ln.LineStyle.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
			case 2:
				ln.LineStyle.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
			}
		}
	}
	return c.figure(figure{name: PlotTTFTByClass, title: "TTFT CDF per priority class", w: inches(7.5), h: inches(4.6)})
}

// classTable is the class table of report.md and report.html: per config
// and class, requests, shed, expired, evicted and other rejected, TTFT p50/p99,
// EPP queue p50/p99 and engine queue p99.
func classTable(runs []NamedSummary) (header []string, rows [][]string) {
	header = []string{"config", "class", "completed / requests", "shed", "expired", "evicted", "other rejected",
		"TTFT p50 (ms)", "TTFT p99 (ms)", "EPP queue p50 (ms)", "EPP queue p99 (ms)", "engine queue p99 (ms)"}
	for _, r := range runs {
		if r.Summary == nil || r.Summary.Classes == nil {
			continue
		}
		for _, c := range r.Summary.Classes.ByClass {
			rows = append(rows, []string{r.Name, ClassLabel(c), strconv.Itoa(c.Completed) + " / " + strconv.Itoa(c.Requests),
				strconv.Itoa(c.shed()), strconv.Itoa(c.expired()), strconv.Itoa(c.evicted()), strconv.Itoa(c.otherRejected()),
				fn(c.TTFT.P50, 1), fn(c.TTFT.P99, 1), fn(c.EPPQueue.P50, 1), fn(c.EPPQueue.P99, 1), fn(c.EngineQueue.P99, 1)})
		}
	}
	return header, rows
}

// classNote explains the class table.
const classNote = "One row per config and InferenceObjective (the priority class its requests named). Shed: rejected by the " +
	"legacy gate at saturation or by flow control at queue capacity (HTTP 429); expired: timed out in flow control's queue " +
	"(HTTP 429 or 503); evicted: revoked in flight by flow control's eviction (HTTP 429); other rejected: denied by an " +
	"Admit plugin (HTTP 500), or rejected after dispatch. The EPP queue is the flow-control wait, apart from the engine queue; both are inside TTFT."
