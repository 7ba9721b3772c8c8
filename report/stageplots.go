package report

import (
	"image/color"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// The per-stage plots, written when some config's traffic has more than
// one load stage (HasStages).
const (
	PlotStageTTFT       = "stage_ttft_p90"
	PlotStageThroughput = "stage_throughput"
	PlotStageLatency    = "stage_latency"
	PlotStageLoad       = "stage_load"
)

// StagePlotNames lists the per-stage plots in the order the reports show
// them.
var StagePlotNames = []string{PlotStageTTFT, PlotStageThroughput, PlotStageLatency, PlotStageLoad}

// maxStageLabels is the most stages whose boundaries the load plot labels.
const maxStageLabels = 24

// stagedRuns lists the runs whose traffic has stages.
func (o *Output) stagedRuns() []*runData {
	var out []*runData
	for _, r := range o.runs {
		if r.sum != nil && len(r.sum.Stages) > 0 {
			out = append(out, r)
		}
	}
	return out
}

// stageAxis is the x axis of the per-stage plots: the requested rate when
// every stage that sent requests declares one, else the measured req/s
// (OpenAI JSONL x_stage says no rate).
func stageAxis(runs []*runData) (string, func(StageSummary) Num) {
	for _, r := range runs {
		for _, st := range r.sum.Stages {
			if st.Requests > 0 && !st.RequestedRate.Defined() {
				return "measured rate (req/s: requests ÷ send span)", func(s StageSummary) Num { return s.RequestsPerS }
			}
		}
	}
	return "requested rate (req/s)", func(s StageSummary) Num { return s.RequestedRate }
}

// stageSegments are a run's (x, y) per stage where both are defined, in
// stage order, split wherever x does not increase: a ladder is one line,
// and a stage out of its order (a warm-up stage at a rate the ladder
// repeats later) a point of its own.
func stageSegments(r *runData, x, y func(StageSummary) Num) []plotter.XYs {
	var out []plotter.XYs
	var cur plotter.XYs
	for _, st := range r.sum.Stages {
		xv, yv := x(st), y(st)
		if !xv.Defined() || !yv.Defined() || math.IsInf(yv.Float(), 0) || math.IsInf(xv.Float(), 0) {
			continue
		}
		if len(cur) > 0 && xv.Float() <= cur[len(cur)-1].X {
			out, cur = append(out, cur), nil
		}
		cur = append(cur, plotter.XY{X: xv.Float(), Y: yv.Float()})
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// stageLines draws y against the stage axis, one line per config, on p;
// it returns the legend entries drawn and the largest y.
func stageLines(p *plot.Plot, l *plot.Legend, runs []*runData, x, y func(StageSummary) Num) (int, float64) {
	n, ymax := 0, 0.0
	for i, r := range runs {
		var legend []plot.Thumbnailer
		for _, seg := range stageSegments(r, x, y) {
			th := addLine(p, seg, lineStyle(i, vg.Points(1.6)))
			if legend == nil || len(th) > len(legend) {
				legend = th
			}
			for _, pt := range seg {
				ymax = math.Max(ymax, pt.Y)
			}
		}
		if legend != nil {
			if l != nil {
				l.Add(r.name, legend...)
			}
			n++
		}
	}
	return n, ymax
}

// stageRateFigure plots one per-stage metric against the rate, a line per
// config.
func (o *Output) stageRateFigure(name, short, title, ylabel string, y func(StageSummary) Num) figure {
	f := figure{name: name, title: short, w: inches(7.5), h: inches(4.4)}
	runs := o.stagedRuns()
	xlabel, x := stageAxis(runs)
	p := newPlot(title, xlabel, ylabel)
	l := newLegend()
	n, ymax := stageLines(p, &l, runs, x, y)
	if n == 0 {
		np := notePlot(title, "no stage with a measured value")
		f.draw = func(c draw.Canvas) { np.Draw(c) }
		return f
	}
	p.X.Min, p.Y.Min, p.Y.Max = 0, 0, math.Max(ymax*1.08, 1e-9)
	p.X.Tick.Marker, p.Y.Tick.Marker = PlainTicks{}, PlainTicks{}
	f.draw = func(c draw.Canvas) { withLegend(c, l, n, p.Draw) }
	return f
}

// stageTTFTFigure: TTFT p90 against the rate, a line per config.
func (o *Output) stageTTFTFigure() figure {
	return o.stageRateFigure(PlotStageTTFT, "TTFT p90 per stage", "TTFT p90 per load stage", "TTFT p90 (s)",
		func(s StageSummary) Num { return msToS(s.TTFT.P90) })
}

// stageThroughputFigure: output tokens/s against the rate, a line per
// config.
func (o *Output) stageThroughputFigure() figure {
	return o.stageRateFigure(PlotStageThroughput, "Throughput per stage", "Output tokens/s per load stage", "output tokens/s",
		func(s StageSummary) Num { return s.OutputTokensPerS })
}

// stageLatencyFigure: TTFT mean and ITL mean (TPOT) against the rate, a
// panel each, a line per config.
func (o *Output) stageLatencyFigure() figure {
	const title = "Latency per load stage"
	f := figure{name: PlotStageLatency, title: title, w: inches(11), h: inches(4.4)}
	runs := o.stagedRuns()
	xlabel, x := stageAxis(runs)
	l := newLegend()
	panels := []struct {
		title, ylabel string
		y             func(StageSummary) Num
	}{
		{"TTFT mean per stage", "TTFT mean (s)", func(s StageSummary) Num { return msToS(s.TTFT.Mean) }},
		{"ITL mean per stage (eppsim's TPOT)", "ITL mean (ms)", func(s StageSummary) Num { return s.ITLMean }},
	}
	row := make([]*plot.Plot, len(panels))
	entries := 0
	for k, pn := range panels {
		p := newPlot(pn.title, xlabel, pn.ylabel)
		p.Title.TextStyle.Font.Size = vg.Points(11)
		var lp *plot.Legend
		if k == 0 {
			lp = &l
		}
		n, ymax := stageLines(p, lp, runs, x, pn.y)
		if k == 0 {
			entries = n
		}
		p.X.Min, p.Y.Min, p.Y.Max = 0, 0, math.Max(ymax*1.08, 1e-9)
		p.X.Tick.Marker, p.Y.Tick.Marker = PlainTicks{}, PlainTicks{}
		row[k] = p
	}
	if entries == 0 {
		np := notePlot(title, "no stage with a completed request")
		f.w = inches(7)
		f.draw = func(c draw.Canvas) { np.Draw(c) }
		return f
	}
	plots := [][]*plot.Plot{row}
	f.draw = func(c draw.Canvas) {
		withLegend(c, l, entries, func(c draw.Canvas) { drawGrid(c, plots, vg.Points(18)) })
	}
	return f
}

// fleetLoad is a run's waiting requests and KV usage (%) per sample time
// bin, averaged over the replicas (from the time-series samples).
func (r *runData) fleetLoad() (waiting, kv plotter.XYs) {
	if len(r.load) == 0 {
		return nil, nil
	}
	n := math.MaxInt
	coarse := make([][]seriesBin, len(r.load))
	for i, s := range r.load {
		coarse[i] = coarsen(s.bins, maxLoadPoints)
		n = min(n, len(coarse[i]))
	}
	for k := range n {
		b0 := coarse[0][k]
		t := b0.t / float64(b0.n)
		var w, u float64
		for _, bins := range coarse {
			b := bins[k]
			w += b.a / float64(b.n)
			u += 100 * b.b / float64(b.n)
		}
		m := float64(len(coarse))
		waiting, kv = append(waiting, plotter.XY{X: t, Y: w / m}), append(kv, plotter.XY{X: t, Y: u / m})
	}
	return waiting, kv
}

// stageBoundaries are the first arrivals (s) of a run's stages, with a
// label each (the requested rate, or the stage's index).
func stageBoundaries(s *Summary) (xs []float64, labels []string) {
	for _, st := range s.Stages {
		if !st.FirstArrivalS.Defined() {
			continue
		}
		xs = append(xs, st.FirstArrivalS.Float())
		if st.RequestedRate.Defined() {
			labels = append(labels, rateLabel(st.RequestedRate)+"/s")
		} else {
			labels = append(labels, "stage "+strconv.Itoa(st.Stage))
		}
	}
	return xs, labels
}

var boundaryStyle = draw.LineStyle{Color: color.Gray{Y: 120}, Width: vg.Points(0.8), Dashes: []vg.Length{vg.Points(3), vg.Points(3)}}

// stageLoadFigure: the fleet's waiting requests and KV usage over time
// (mean per replica, from the time-series samples), a line per config,
// with the stages' boundaries (their first arrivals) marked.
func (o *Output) stageLoadFigure() figure {
	const title = "Waiting requests and KV usage over time, by load stage"
	f := figure{name: PlotStageLoad, title: "Load per stage over time", w: inches(10), h: inches(6.6)}
	runs := o.stagedRuns()
	l := newLegend()
	wp := newPlot("waiting requests (mean per replica)", "", "waiting requests")
	kp := newPlot("KV cache usage (mean per replica)", "simulated time (s)", "KV cache usage (%)")
	for _, p := range []*plot.Plot{wp, kp} {
		p.Title.TextStyle.Font.Size = vg.Points(11)
		p.X.Tick.Marker, p.Y.Tick.Marker = PlainTicks{}, PlainTicks{}
	}
	n, wmax, xmax := 0, 1.0, 0.0
	for i, r := range runs {
		w, kv := r.fleetLoad()
		if len(w) == 0 {
			continue
		}
		s := lineStyle(i, vg.Points(1.3))
		if th := addLine(wp, w, s); th != nil {
			l.Add(r.name, th...)
			n++
		}
		addLine(kp, kv, s)
		for _, pt := range w {
			wmax = math.Max(wmax, pt.Y)
		}
		xmax = math.Max(xmax, w[len(w)-1].X)
	}
	if n == 0 || len(runs) == 0 {
		np := notePlot(title, "no time-series samples in this run")
		f.w, f.h = inches(7), inches(4)
		f.draw = func(c draw.Canvas) { np.Draw(c) }
		return f
	}
	wmax = math.Ceil(wmax * 1.15)
	xs, labels := stageBoundaries(runs[0].sum)
	for _, x := range xs {
		xmax = math.Max(xmax, x)
		for _, pb := range []struct {
			p    *plot.Plot
			ymax float64
		}{{wp, wmax}, {kp, 100}} {
			if ln, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: pb.ymax}}); err == nil {
				ln.LineStyle = boundaryStyle
				pb.p.Add(ln)
			}
		}
	}
	if len(xs) > 0 && len(xs) <= maxStageLabels {
		pts := make(plotter.XYs, len(xs))
		for i, x := range xs {
			pts[i] = plotter.XY{X: x, Y: wmax}
		}
		if lb, err := plotter.NewLabels(plotter.XYLabels{XYs: pts, Labels: labels}); err == nil {
			for i := range lb.TextStyle {
				lb.TextStyle[i].Font.Size = vg.Points(7)
				lb.TextStyle[i].YAlign = draw.YTop
			}
			lb.Offset = vg.Point{X: vg.Points(2), Y: -vg.Points(1)}
			wp.Add(lb)
		}
	}
	wp.X.Min, wp.X.Max, wp.Y.Min, wp.Y.Max = 0, xmax*1.02, 0, wmax
	kp.X.Min, kp.X.Max, kp.Y.Min, kp.Y.Max = 0, xmax*1.02, 0, 100
	l.Add("")
	l.Add("dashed: a stage's")
	l.Add("  first arrival")
	plots := [][]*plot.Plot{{wp}, {kp}}
	f.draw = func(c draw.Canvas) { withLegend(c, l, n+3, func(c draw.Canvas) { drawGrid(c, plots, vg.Points(12)) }) }
	return f
}
