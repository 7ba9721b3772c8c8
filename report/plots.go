package report

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// renderedPlot is one plot in both formats.
type renderedPlot struct {
	name, title string
	svg, png    []byte
}

// figure is a plot ready to be drawn on any canvas.
type figure struct {
	name, title string
	w, h        vg.Length
	draw        func(draw.Canvas)
}

// maxCDFPoints bounds the points of one TTFT CDF curve.
const maxCDFPoints = 2000

// palette is Tableau 10: distinct, colour-blind-friendlier hues.
var palette = []color.RGBA{
	{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255}, {214, 39, 40, 255}, {148, 103, 189, 255},
	{140, 86, 75, 255}, {227, 119, 194, 255}, {127, 127, 127, 255}, {188, 189, 34, 255}, {23, 190, 207, 255},
}

// lineStyle gives series i a colour and, past the palette, a dash pattern.
func lineStyle(i int, width vg.Length) draw.LineStyle {
	s := draw.LineStyle{Color: palette[i%len(palette)], Width: width}
	switch (i / len(palette)) % 3 {
	case 1:
		s.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
	case 2:
		s.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
	}
	return s
}

// renderPlots draws every plot as SVG and PNG.
func (o *Output) renderPlots() ([]renderedPlot, error) {
	figs := []figure{o.ttftFigure(), o.predictedFigure(), o.hitRatioFigure(), o.loadFigure()}
	out := make([]renderedPlot, 0, len(figs))
	for _, f := range figs {
		rp, err := render(f, o.DPI)
		if err != nil {
			return nil, err
		}
		out = append(out, rp)
	}
	return out, nil
}

// render draws f on an SVG and a PNG canvas. gonum/plot panics on some
// degenerate inputs; a panic becomes an error naming the plot.
func render(f figure, dpi int) (rp renderedPlot, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("report: drawing %s: %v", f.name, p)
		}
	}()
	rp = renderedPlot{name: f.name, title: f.title}
	sc := vgsvg.New(f.w, f.h)
	f.draw(draw.New(sc))
	var sb bytes.Buffer
	if _, err := sc.WriteTo(&sb); err != nil {
		return rp, fmt.Errorf("report: writing %s.svg: %w", f.name, err)
	}
	if dpi <= 0 {
		dpi = 150
	}
	ic := vgimg.NewWith(vgimg.UseWH(f.w, f.h), vgimg.UseDPI(dpi))
	dc := draw.New(ic)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	f.draw(dc)
	var pb bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: ic}).WriteTo(&pb); err != nil {
		return rp, fmt.Errorf("report: writing %s.png: %w", f.name, err)
	}
	rp.svg, rp.png = sb.Bytes(), pb.Bytes()
	return rp, nil
}

// newPlot returns a plot with the house style: title, axis labels, grid.
func newPlot(title, xlabel, ylabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(13)
	p.Title.Padding = vg.Points(6)
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.X.Label.TextStyle.Font.Size = vg.Points(11)
	p.Y.Label.TextStyle.Font.Size = vg.Points(11)
	g := plotter.NewGrid()
	g.Vertical.Color = color.Gray{Y: 225}
	g.Horizontal.Color = color.Gray{Y: 225}
	p.Add(g)
	return p
}

// sparsePoints: lines with fewer points also get point markers, so that a
// lone point does not vanish.
const sparsePoints = 30

// addLine adds pts to p as a line in style s (with markers when sparse) and
// returns its legend thumbnails; nil when there is nothing to draw.
func addLine(p *plot.Plot, pts plotter.XYs, s draw.LineStyle) []plot.Thumbnailer {
	if len(pts) == 0 {
		return nil
	}
	ln, err := plotter.NewLine(pts)
	if err != nil {
		return nil
	}
	ln.LineStyle = s
	p.Add(ln)
	th := []plot.Thumbnailer{ln}
	if len(pts) < sparsePoints {
		if sc, err := plotter.NewScatter(pts); err == nil {
			sc.GlyphStyle = draw.GlyphStyle{Color: s.Color, Radius: s.Width + vg.Points(0.8), Shape: draw.CircleGlyph{}}
			p.Add(sc)
			th = append(th, sc)
		}
	}
	return th
}

// newLegend returns a legend drawn outside the plots, top-left aligned.
func newLegend() plot.Legend {
	l := plot.NewLegend()
	l.Top, l.Left = true, true
	l.TextStyle.Font.Size = vg.Points(10)
	l.ThumbnailWidth = vg.Points(22)
	l.Padding = vg.Points(2)
	return l
}

// withLegend draws body on the left of c and legend l in a strip on the
// right, its top aligned below a title line.
func withLegend(c draw.Canvas, l plot.Legend, entries int, body func(draw.Canvas)) {
	if entries == 0 {
		body(c)
		return
	}
	r := l.Rectangle(c)
	w := r.Max.X - r.Min.X + vg.Points(14)
	body(draw.Crop(c, 0, -w, 0, 0))
	lc := draw.Crop(c, c.Size().X-w+vg.Points(6), 0, 0, -vg.Points(30))
	l.Draw(lc)
}

// notePlot is a titled, axis-less plot that shows msg in its middle.
func notePlot(title, msg string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(13)
	p.HideAxes()
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, 1, 0, 1
	lb, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: 0.5, Y: 0.5}}, Labels: []string{msg}})
	if err == nil {
		for i := range lb.TextStyle {
			lb.TextStyle[i].XAlign = draw.XCenter
			lb.TextStyle[i].Font.Size = vg.Points(12)
		}
		p.Add(lb)
	}
	return p
}

func inches(x float64) vg.Length { return vg.Length(x) * vg.Inch }

// ttftFigure: TTFT CDF per config, log x axis.
func (o *Output) ttftFigure() figure {
	const title = "TTFT CDF (completed requests, after warm-up)"
	f := figure{name: PlotTTFTCDF, title: "TTFT CDF", w: inches(7), h: inches(4.2)}
	p := newPlot(title, "time to first token (ms, log scale)", "fraction of requests ≤ TTFT")
	l := newLegend()
	n := 0
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, r := range o.runs {
		xs := make([]float32, 0, len(r.ttft))
		for _, v := range r.ttft {
			if v > 0 && !math.IsInf(float64(v), 0) {
				xs = append(xs, v)
			}
		}
		if len(xs) == 0 {
			continue
		}
		slices.Sort(xs)
		lo, hi = math.Min(lo, float64(xs[0])), math.Max(hi, float64(xs[len(xs)-1]))
		ln, err := plotter.NewLine(cdfPoints(xs))
		if err != nil {
			continue
		}
		ln.StepStyle = plotter.PostStep
		ln.LineStyle = lineStyle(i, vg.Points(1.6))
		p.Add(ln)
		p99 := xs[min(max(int(math.Ceil(0.99*float64(len(xs))))-1, 0), len(xs)-1)]
		l.Add(r.name+" (p99 "+fmtMillis(float64(p99))+" ms)", ln)
		n++
	}
	if n == 0 {
		np := notePlot(title, "no completed requests")
		f.draw = func(c draw.Canvas) { np.Draw(c) }
		return f
	}
	// The x axis is linear in log10(ms) with ticks labelled in ms
	// (plot.LogScale mis-pads the axis label).
	p.X.Tick.Marker = log10Ticks{}
	p.X.Min, p.X.Max = math.Log10(lo)-0.05, math.Log10(hi)+0.05
	p.Y.Min, p.Y.Max = 0, 1
	p.Y.Tick.Marker = plot.ConstantTicks(fractionTicks())
	f.draw = func(c draw.Canvas) { withLegend(c, l, n, p.Draw) }
	return f
}

// cdfPoints is the empirical CDF of sorted positive values as points
// (log10 x, fraction ≤ x) for a post-step line, at most maxCDFPoints
// steps. The curve starts at 0 below the smallest value, so that even a
// single value draws a visible step.
func cdfPoints(xs []float32) plotter.XYs {
	m := min(len(xs), maxCDFPoints)
	pts := make(plotter.XYs, m+1)
	pts[0] = plotter.XY{X: math.Log10(float64(xs[0]))}
	for k := range m {
		idx := k
		if m < len(xs) {
			idx = int(math.Round(float64(k) * float64(len(xs)-1) / float64(m-1)))
		}
		pts[k+1] = plotter.XY{X: math.Log10(float64(xs[idx])), Y: float64(idx+1) / float64(len(xs))}
	}
	return pts
}

// fmtMillis formats a latency with three or so significant digits.
func fmtMillis(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

func fractionTicks() []plot.Tick {
	var t []plot.Tick
	for i := 0; i <= 10; i++ {
		v := float64(i) / 10
		lbl := ""
		if i%2 == 0 {
			lbl = strconv.FormatFloat(v, 'f', 1, 64)
		}
		t = append(t, plot.Tick{Value: v, Label: lbl})
	}
	return t
}

var (
	scatterColor = color.NRGBA{R: 31, G: 119, B: 180, A: 70}
	calibColor   = color.RGBA{R: 214, G: 39, B: 40, A: 255}
)

// Producer type names, as Summary.Prediction keys them.
const (
	approxProducer  = "approx-prefix-cache-producer"
	preciseProducer = "precise-prefix-cache-producer"
)

// predPanel is one predicted-vs-true panel: a config and a producer.
type predPanel struct {
	run      *runData
	producer string
	ps       *predSample
}

func (o *Output) predPanels() []predPanel {
	var out []predPanel
	for _, r := range o.runs {
		if r.approx.seen > 0 {
			out = append(out, predPanel{r, approxProducer, &r.approx})
		}
		if r.precise.seen > 0 {
			out = append(out, predPanel{r, preciseProducer, &r.precise})
		}
	}
	return out
}

// predictedFigure: per config (and prefix producer), predicted vs true
// reused fraction of the prompt with the calibration curve, one panel each.
func (o *Output) predictedFigure() figure {
	f := figure{name: PlotPredictedVsTrue, title: "Predicted vs true prefix reuse"}
	panels := o.predPanels()
	if len(panels) == 0 {
		f.w, f.h = inches(6), inches(4)
		np := notePlot("Predicted vs true prefix reuse", "no config has a prefix-cache producer")
		f.draw = func(c draw.Canvas) { np.Draw(c) }
		return f
	}
	cols := min(len(panels), 3)
	rows := (len(panels) + cols - 1) / cols
	l := newLegend()
	plots := make([][]*plot.Plot, rows)
	for i := range plots {
		plots[i] = make([]*plot.Plot, cols)
	}
	for i, pp := range panels {
		title := pp.run.name
		xlabel := "predicted fraction of prompt (approx. producer)"
		if pp.producer == preciseProducer {
			title += " · precise"
			xlabel = "predicted fraction of prompt (precise producer)"
		}
		if s := pp.run.sum; s != nil && s.Prediction[pp.producer] != nil {
			title += " (MAE " + strconv.FormatFloat(s.Prediction[pp.producer].MAE, 'f', 3, 64) + ")"
		}
		p := newPlot(title, xlabel, "true fraction of prompt reused")
		p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = -0.02, 1.02, -0.02, 1.02
		p.X.Tick.Marker = plot.ConstantTicks(fractionTicks())
		p.Y.Tick.Marker = plot.ConstantTicks(fractionTicks())
		diag, _ := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 1}})
		diag.LineStyle = draw.LineStyle{Color: color.Gray{Y: 90}, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(4), vg.Points(3)}}
		pts := make(plotter.XYs, len(pp.ps.pairs))
		for k, pr := range pp.ps.pairs {
			pts[k] = plotter.XY{X: float64(pr.pred), Y: float64(pr.true32)}
		}
		sc, err := plotter.NewScatter(pts)
		if err != nil {
			continue
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: scatterColor, Radius: vg.Points(1.6), Shape: draw.CircleGlyph{}}
		var cal plotter.XYs
		for _, b := range pp.ps.calib {
			if b.n > 0 {
				cal = append(cal, plotter.XY{X: b.sumPred / float64(b.n), Y: b.sumTrue / float64(b.n)})
			}
		}
		p.Add(sc, diag)
		var cl *plotter.Line
		var cp *plotter.Scatter
		if len(cal) > 0 {
			cl, cp, err = plotter.NewLinePoints(cal)
			if err == nil {
				cl.LineStyle = draw.LineStyle{Color: calibColor, Width: vg.Points(2)}
				cp.GlyphStyle = draw.GlyphStyle{Color: calibColor, Radius: vg.Points(3), Shape: draw.CircleGlyph{}}
				p.Add(cl, cp)
			}
		}
		if i == 0 {
			l.Add("requests (≤ "+strconv.Itoa(maxScatter)+" sampled", sc)
			l.Add("  per panel)")
			if cl != nil && cp != nil {
				l.Add("calibration: mean true", cl, cp)
				l.Add("  per 0.1 predicted bin")
			}
			l.Add("perfect calibration", diag)
		}
		plots[i/cols][i%cols] = p
	}
	f.w = inches(4.3*float64(cols) + 2.2)
	f.h = inches(4.3 * float64(rows))
	f.draw = func(c draw.Canvas) {
		withLegend(c, l, 5, func(c draw.Canvas) {
			drawGrid(c, plots, vg.Points(12))
		})
	}
	return f
}

// drawGrid draws a grid of panels (rows of plots, nil = empty cell) with
// aligned axes, padX apart horizontally.
func drawGrid(c draw.Canvas, plots [][]*plot.Plot, padX vg.Length) {
	tiles := draw.Tiles{Rows: len(plots), Cols: len(plots[0]), PadX: padX, PadY: vg.Points(12),
		PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(4)}
	cs := plot.Align(plots, tiles, c)
	for j := range plots {
		for i, p := range plots[j] {
			if p != nil {
				p.Draw(cs[j][i])
			}
		}
	}
}

// hitRatioFigure: fleet-wide true hit ratio per sample interval (solid)
// and oracle hit ratio by arrival time (dashed), per config.
func (o *Output) hitRatioFigure() figure {
	const title = "Fleet prefix-cache hit ratio over time (token-weighted)"
	f := figure{name: PlotHitRatio, title: "Hit ratio over time", w: inches(7.5), h: inches(4.2)}
	p := newPlot(title, "simulated time (s)", "hit ratio (cached ÷ prompt tokens)")
	l := newLegend()
	n := 0
	ymax := 0.0
	for i, r := range o.runs {
		var truePts, oraclePts plotter.XYs
		trueLabel := r.name + " true"
		if r.hasSamples {
			for _, b := range coarsen(r.fleetHit.bins, maxTrendPoints) {
				if b.b > 0 {
					truePts = append(truePts, plotter.XY{X: b.t / float64(b.n), Y: b.a / b.b})
				}
			}
		} else {
			trueLabel += " (by arrival)"
		}
		bins, width := r.arrival.coarsened(maxTrendPoints)
		w := float64(width) / 1e9
		for k, b := range bins {
			if b[2] == 0 {
				continue
			}
			x := (float64(k) + 0.5) * w
			oraclePts = append(oraclePts, plotter.XY{X: x, Y: float64(b[1]) / float64(b[2])})
			if !r.hasSamples {
				truePts = append(truePts, plotter.XY{X: x, Y: float64(b[0]) / float64(b[2])})
			}
		}
		for _, pts := range []plotter.XYs{truePts, oraclePts} {
			for _, pt := range pts {
				ymax = math.Max(ymax, pt.Y)
			}
		}
		if th := addLine(p, truePts, draw.LineStyle{Color: palette[i%len(palette)], Width: vg.Points(1.6)}); th != nil {
			l.Add(trueLabel, th...)
			n++
		}
		oracleStyle := draw.LineStyle{Color: palette[i%len(palette)], Width: vg.Points(1.2), Dashes: dashedStyle}
		if th := addLine(p, oraclePts, oracleStyle); th != nil {
			l.Add(r.name+" oracle", th...)
			n++
		}
	}
	if n == 0 {
		np := notePlot(title, "no hit-ratio data (no samples, no completed requests)")
		f.draw = func(c draw.Canvas) { np.Draw(c) }
		return f
	}
	l.Add("true: Σ Δhits ÷ Σ Δqueries")
	l.Add("  of the replicas' counters")
	l.Add("oracle: best replica at")
	l.Add("  routing, by arrival")
	n += 4
	ratioAxes(p, ymax)
	f.draw = func(c draw.Canvas) { withLegend(c, l, n, p.Draw) }
	return f
}

// maxTrendPoints and maxLoadPoints bound the points per line of the
// time-series plots.
const (
	maxTrendPoints = 150
	maxLoadPoints  = 300
)

// PlainTicks is plot.DefaultTicks with labels in the shortest form
// ("2.5", not "2.50"); sweeps' plots use it too.
type PlainTicks struct{}

// Ticks implements plot.Ticker.
func (PlainTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'g', 6, 64)
		}
	}
	return ts
}

// log10Ticks marks an axis whose values are log10(x): labels (in x) at
// 1-2-5 steps, or only at decades when it spans more than three, and minor
// ticks at every integer multiple.
type log10Ticks struct{}

// Ticks implements plot.Ticker.
func (log10Ticks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		return nil
	}
	e0, e1 := int(math.Floor(lo)), int(math.Ceil(hi))
	labelled := map[int]bool{1: true, 2: true, 5: true}
	switch {
	case e1-e0 > 3:
		labelled = map[int]bool{1: true}
	case e1-e0 <= 1:
		labelled[3] = true
	}
	var ts []plot.Tick
	for e := e0; e <= e1; e++ {
		for m := 1; m <= 9; m++ {
			v := float64(m) * math.Pow10(e)
			lv := math.Log10(v)
			if lv < lo-1e-9 || lv > hi+1e-9 {
				continue
			}
			t := plot.Tick{Value: lv}
			if labelled[m] {
				t.Label = strconv.FormatFloat(v, 'g', -1, 64)
			}
			ts = append(ts, t)
		}
	}
	return ts
}

// maxLegendReplicas is the most replicas named in the replica_load legend.
const maxLegendReplicas = 16

// loadFigure: the first config's per-replica running+waiting requests and
// KV usage over time, two aligned panels.
func (o *Output) loadFigure() figure {
	f := figure{name: PlotReplicaLoad, title: "Replica load", w: inches(8), h: inches(6)}
	if len(o.runs) == 0 || len(o.runs[0].load) == 0 {
		f.w, f.h = inches(6), inches(4)
		title := "Replica load over time"
		if len(o.runs) > 0 {
			title += " — " + o.runs[0].name
		}
		np := notePlot(title, "no time-series samples in this run")
		f.draw = func(c draw.Canvas) { np.Draw(c) }
		return f
	}
	r := o.runs[0]
	top := newPlot("Replica load over time — "+r.name, "", "running + waiting requests")
	bot := newPlot("", "simulated time (s)", "KV cache usage (%)")
	l := newLegend()
	entries := 0
	named := len(r.load) <= maxLegendReplicas
	width := vg.Points(1.2)
	if len(r.load) > 8 {
		width = vg.Points(0.8)
	}
	var meanQ, meanKV plotter.XYs
	kvMax := 0.0
	for i, s := range r.load {
		bins := coarsen(s.bins, maxLoadPoints)
		q := make(plotter.XYs, len(bins))
		kv := make(plotter.XYs, len(bins))
		for k, b := range bins {
			t := b.t / float64(b.n)
			q[k] = plotter.XY{X: t, Y: b.a / float64(b.n)}
			kv[k] = plotter.XY{X: t, Y: 100 * b.b / float64(b.n)}
			if k >= len(meanQ) {
				meanQ = append(meanQ, plotter.XY{X: t})
				meanKV = append(meanKV, plotter.XY{X: t})
			}
			kvMax = math.Max(kvMax, kv[k].Y)
			meanQ[k].Y += q[k].Y / float64(len(r.load))
			meanKV[k].Y += kv[k].Y / float64(len(r.load))
		}
		th := addLine(top, q, lineStyle(i, width))
		addLine(bot, kv, lineStyle(i, width))
		if named && th != nil {
			l.Add(replicaName(r.replicas, i), th...)
			entries++
		}
	}
	if !named {
		l.Add(strconv.Itoa(len(r.load)) + " replicas, one line each")
		entries++
	}
	mean := draw.LineStyle{Color: color.Black, Width: vg.Points(2.2)}
	if th := addLine(top, meanQ, mean); th != nil {
		l.Add("fleet mean", th...)
		entries++
	}
	addLine(bot, meanKV, mean)
	top.Y.Min = 0
	// KV usage on its own scale: a lightly loaded fleet uses a few percent.
	bot.Y.Min, bot.Y.Max = 0, math.Min(100, math.Max(kvMax*1.1, 1))
	top.Y.Tick.Marker = PlainTicks{}
	bot.Y.Tick.Marker = PlainTicks{}
	top.X.Tick.Marker = PlainTicks{}
	bot.X.Tick.Marker = PlainTicks{}
	top.X.Min, bot.X.Min = 0, 0
	// Share the x range so the panels line up.
	xmax := math.Max(top.X.Max, bot.X.Max)
	top.X.Max, bot.X.Max = xmax, xmax
	plots := [][]*plot.Plot{{top}, {bot}}
	f.draw = func(c draw.Canvas) {
		withLegend(c, l, entries, func(c draw.Canvas) {
			tiles := draw.Tiles{Rows: 2, Cols: 1, PadY: vg.Points(10), PadTop: vg.Points(4), PadBottom: vg.Points(4),
				PadLeft: vg.Points(4), PadRight: vg.Points(4)}
			cs := plot.Align(plots, tiles, c)
			top.Draw(cs[0][0])
			bot.Draw(cs[1][0])
		})
	}
	return f
}

// SavePlot draws fn on a w×h canvas and writes dir/name.svg and
// dir/name.png (dpi ≤ 0: 150), each through a temporary file renamed into
// place. Other packages' plots (sweeps) use it to share the output
// conventions.
func SavePlot(dir, name string, w, h vg.Length, dpi int, fn func(draw.Canvas)) error {
	rp, err := render(figure{name: name, title: name, w: w, h: h, draw: fn}, dpi)
	if err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{name + ".svg", rp.svg}, {name + ".png", rp.png}} {
		tmp, err := writeTemp(dir, f.name, f.data)
		if err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(dir, f.name)); err != nil {
			os.Remove(tmp)
			return fmt.Errorf("report: writing %s: %w", f.name, err)
		}
	}
	return nil
}

// ratioAxes sets the axes of a hit ratio over time: time from 0, the ratio
// from 0 to the next tenth above ymax (at most 1), plain tick labels.
func ratioAxes(p *plot.Plot, ymax float64) {
	p.Y.Min, p.Y.Max = 0, math.Min(1, math.Ceil(ymax*10+0.5)/10)
	p.Y.Tick.Marker = PlainTicks{}
	p.X.Min = 0
	p.X.Tick.Marker = PlainTicks{}
}
