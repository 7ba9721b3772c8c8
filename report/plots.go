package report

import (
	"bytes"
	"fmt"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"gonum.org/v1/plot"
	plotpalette "gonum.org/v1/plot/palette"
	"gonum.org/v1/plot/palette/moreland"
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
	build := []func() figure{o.ladderFigure, o.ttftFigure, o.predictedFigure, o.hitRatioFigure, o.loadFigure}
	if o.meta.Classes {
		build = append(build, o.ttftByClassFigure)
	}
	if len(o.stagedRuns()) > 0 {
		build = append(build, o.stageTTFTFigure, o.stageThroughputFigure, o.stageLatencyFigure, o.stageLoadFigure)
	}
	// Every image is drawn at once, one per core, the costliest first (the
	// heatmaps, then the scatter): each from a figure of its own, since
	// drawing a gonum plot writes to it. The figures are built here, one
	// after the other (milliseconds). The first error in figure order is
	// returned.
	type image struct {
		fig int
		svg bool
		f   figure
	}
	var images []image
	for i := len(build) - 1; i >= 0; i-- {
		images = append(images, image{i, false, build[i]()}, image{i, true, build[i]()})
	}
	out := make([]renderedPlot, len(build))
	errs := make([]error, 2*len(build))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for _, im := range images {
		out[im.fig].name, out[im.fig].title = im.f.name, im.f.title
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if im.svg {
				out[im.fig].svg, errs[2*im.fig] = renderSVG(im.f)
			} else {
				out[im.fig].png, errs[2*im.fig+1] = renderPNG(im.f, o.DPI)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// render draws f on an SVG and a PNG canvas. gonum/plot panics on some
// degenerate inputs; a panic becomes an error naming the plot.
func render(f figure, dpi int) (rp renderedPlot, err error) {
	rp = renderedPlot{name: f.name, title: f.title}
	if rp.svg, err = renderSVG(f); err != nil {
		return rp, err
	}
	rp.png, err = renderPNG(f, dpi)
	return rp, err
}

// renderSVG draws f as SVG; a panic becomes an error naming the plot.
func renderSVG(f figure) (svg []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("report: drawing %s: %v", f.name, p)
		}
	}()
	sc := vgsvg.New(f.w, f.h)
	f.draw(draw.New(sc))
	var sb bytes.Buffer
	if _, err := sc.WriteTo(&sb); err != nil {
		return nil, fmt.Errorf("report: writing %s.svg: %w", f.name, err)
	}
	return sb.Bytes(), nil
}

// renderPNG draws f as PNG at dpi (0: 150); a panic becomes an error
// naming the plot.
func renderPNG(f figure, dpi int) (data []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("report: drawing %s: %v", f.name, p)
		}
	}()
	if dpi <= 0 {
		dpi = 150
	}
	ic := vgimg.NewWith(vgimg.UseWH(f.w, f.h), vgimg.UseDPI(dpi))
	dc := draw.New(ic)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	f.draw(dc)
	// Compressed for speed: the default level took about half the time
	// of drawing the plots, for files only about 5% smaller (same pixels).
	var pb bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&pb, ic.Image()); err != nil {
		return nil, fmt.Errorf("report: writing %s.png: %w", f.name, err)
	}
	return pb.Bytes(), nil
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

// positiveSorted returns the positive finite values of vs, sorted (a log
// axis shows nothing else).
func positiveSorted(vs []float32) []float32 {
	xs := make([]float32, 0, len(vs))
	for _, v := range vs {
		if v > 0 && !math.IsInf(float64(v), 0) {
			xs = append(xs, v)
		}
	}
	slices.Sort(xs)
	return xs
}

// ttftCDF collects TTFT CDF lines on an x axis linear in log10(ms): the
// TTFT plot per config and the one per config and class.
type ttftCDF struct {
	title  string
	p      *plot.Plot
	l      plot.Legend
	n      int
	lo, hi float64
}

func newTTFTCDF(title string) *ttftCDF {
	return &ttftCDF{title: title, p: newPlot(title, "time to first token (ms, log scale)", "fraction of requests ≤ TTFT"),
		l: newLegend(), lo: math.Inf(1), hi: math.Inf(-1)}
}

// add draws the CDF of vs's positive finite values in config i's colour,
// labelled name with its p99, and returns the line for further styling
// (nil when vs has no such value).
func (c *ttftCDF) add(vs []float32, i int, name string) *plotter.Line {
	xs := positiveSorted(vs)
	if len(xs) == 0 {
		return nil
	}
	c.lo, c.hi = math.Min(c.lo, float64(xs[0])), math.Max(c.hi, float64(xs[len(xs)-1]))
	ln, err := plotter.NewLine(cdfPoints(xs))
	if err != nil {
		return nil
	}
	ln.StepStyle = plotter.PostStep
	ln.LineStyle = lineStyle(i, vg.Points(1.6))
	c.p.Add(ln)
	p99 := xs[min(max(int(math.Ceil(0.99*float64(len(xs))))-1, 0), len(xs)-1)]
	c.l.Add(name+" (p99 "+fmtMillis(float64(p99))+" ms)", ln)
	c.n++
	return ln
}

// figure sets f's drawing: the lines with their legend, or a note when
// there is none.
func (c *ttftCDF) figure(f figure) figure {
	if c.n == 0 {
		np := notePlot(c.title, "no completed requests")
		f.draw = func(dc draw.Canvas) { np.Draw(dc) }
		return f
	}
	// The x axis is linear in log10(ms) with ticks labelled in ms
	// (plot.LogScale mis-pads the axis label).
	c.p.X.Tick.Marker = log10Ticks{}
	c.p.X.Min, c.p.X.Max = math.Log10(c.lo)-0.05, math.Log10(c.hi)+0.05
	c.p.Y.Min, c.p.Y.Max = 0, 1
	c.p.Y.Tick.Marker = plot.ConstantTicks(fractionTicks())
	f.draw = func(dc draw.Canvas) { withLegend(dc, c.l, c.n, c.p.Draw) }
	return f
}

// ttftFigure: TTFT CDF per config, log x axis.
func (o *Output) ttftFigure() figure {
	c := newTTFTCDF("TTFT CDF (completed requests, after warm-up)")
	for i, r := range o.runs {
		c.add(r.ttft, i, r.name)
	}
	return c.figure(figure{name: PlotTTFTCDF, title: "TTFT CDF", w: inches(7), h: inches(4.2)})
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

// measureDashes are the dash patterns of the hit-ratio measures: true
// solid, routed dashed, best replica dotted.
var measureDashes = map[string][]vg.Length{
	"true":         nil,
	"routed":       {vg.Points(6), vg.Points(3)},
	"best replica": {vg.Points(1.5), vg.Points(2.5)},
}

// hitRatioFigure: per config and arrival-time bin, the token-weighted
// true, routed and best-replica (oracle) hit ratios, one line each; the
// infinite-cache bound once (per config only where it differs).
func (o *Output) hitRatioFigure() figure {
	const title = "Hit ratio by arrival time (token-weighted)"
	f := figure{name: PlotHitRatio, title: "Hit ratio over time", w: inches(8), h: inches(4.4)}
	p := newPlot(title, "arrival time (simulated s)", "share of prompt tokens")
	l := newLegend()
	n := 0
	ymax := 0.0
	var prevInf plotter.XYs
	for i, r := range o.runs {
		bins, width := r.arrival.coarsened(maxTrendPoints)
		w := float64(width) / 1e9
		series := map[int]plotter.XYs{}
		for k, b := range bins {
			if b[binPrompt] == 0 {
				continue
			}
			x := (float64(k) + 0.5) * w
			for _, m := range []int{binCached, binRouted, binOracle, binInfinite} {
				y := float64(b[m]) / float64(b[binPrompt])
				series[m] = append(series[m], plotter.XY{X: x, Y: y})
				ymax = math.Max(ymax, y)
			}
		}
		col := palette[i%len(palette)]
		for _, m := range []struct {
			bin  int
			name string
		}{{binCached, "true"}, {binRouted, "routed"}, {binOracle, "best replica"}} {
			s := draw.LineStyle{Color: col, Width: vg.Points(1.5), Dashes: measureDashes[m.name]}
			if th := addLine(p, series[m.bin], s); th != nil {
				l.Add(r.name+" · "+m.name, th...)
				n++
			}
		}
		if inf := series[binInfinite]; len(inf) > 0 && !slices.Equal(inf, prevInf) {
			label := "infinite cache"
			if i > 0 {
				label += " · " + r.name
			}
			s := draw.LineStyle{Color: color.Gray{Y: 110}, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(8), vg.Points(2), vg.Points(2), vg.Points(2)}}
			if th := addLine(p, inf, s); th != nil {
				l.Add(label, th...)
				n++
			}
			prevInf = inf
		}
	}
	if n == 0 {
		np := notePlot(title, "no completed requests")
		f.draw = func(c draw.Canvas) { np.Draw(c) }
		return f
	}
	for _, line := range []string{"", "per arrival-time bin:", "Σ rung tokens ÷ Σ prompt", "true: reused at first step", "routed: chosen replica", "  at routing", "best replica: oracle", "  at routing"} {
		l.Add(line)
		n++
	}
	ratioAxes(p, ymax)
	f.draw = func(c draw.Canvas) { withLegend(c, l, n, p.Draw) }
	return f
}

// Colours of the ladder's rungs.
var rungColors = []color.Color{
	color.RGBA{R: 160, G: 160, B: 160, A: 255}, // infinite
	color.RGBA{R: 31, G: 119, B: 180, A: 255},  // oracle
	color.RGBA{R: 255, G: 127, B: 14, A: 255},  // routed
	color.RGBA{R: 44, G: 160, B: 44, A: 255},   // true
}

// ladderFigure: the hit-rate ladder, one group of four bars per config.
func (o *Output) ladderFigure() figure {
	const title = "Hit-rate ladder (share of prompt tokens)"
	f := figure{name: PlotHitLadder, title: "Hit-rate ladder"}
	var runs []*runData
	for _, r := range o.runs {
		if r.sum != nil && r.sum.Cache.PromptTokens > 0 {
			runs = append(runs, r)
		}
	}
	if len(runs) == 0 {
		f.w, f.h = inches(6), inches(4)
		np := notePlot(title, "no completed requests")
		f.draw = func(c draw.Canvas) { np.Draw(c) }
		return f
	}
	p := newPlot(title, "", "share of prompt tokens")
	l := newLegend()
	rungs := []struct {
		name string
		v    func(*Summary) float64
	}{
		{"infinite cache (trace bound)", func(s *Summary) float64 { return s.Cache.InfiniteHitRatio.Float() }},
		{"oracle: best replica at routing", func(s *Summary) float64 { return s.Cache.OracleHitRatio.Float() }},
		{"routed: chosen replica at routing", func(s *Summary) float64 { return s.Cache.RoutedHitRatio.Float() }},
		{"true: reused at first step", func(s *Summary) float64 { return s.Cache.TrueHitRatio.Float() }},
	}
	const step, half = 0.21, 0.095
	ymax := 0.0
	var xys plotter.XYs
	var labels []string
	var names []string
	for i, r := range runs {
		names = append(names, r.name)
		for k, rung := range rungs {
			v := rung.v(r.sum)
			x := float64(i) + (float64(k)-1.5)*step
			bc, err := plotter.NewBarChart(plotter.Values{v}, vg.Points(1))
			if err != nil {
				continue
			}
			bc.XMin, bc.Color, bc.LineStyle.Width = x, rungColors[k], 0
			p.Add(&barWidth{bc, half})
			if i == 0 {
				l.Add(rung.name, bc)
			}
			xys = append(xys, plotter.XY{X: x, Y: v})
			labels = append(labels, ff(100*v, 1))
			ymax = math.Max(ymax, v)
		}
	}
	if lb, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: labels}); err == nil {
		for i := range lb.TextStyle {
			lb.TextStyle[i].XAlign = draw.XCenter
			lb.TextStyle[i].Font.Size = vg.Points(7.5)
		}
		lb.Offset = vg.Point{Y: vg.Points(2)}
		p.Add(lb)
	}
	for _, line := range []string{"", "labels: percent", "infinite − oracle:", "  cache capacity", "oracle − routed:", "  routing (regret)", "true − routed:", "  queue effect"} {
		l.Add(line)
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.6, float64(len(runs))-0.4
	p.Y.Min, p.Y.Max = 0, math.Min(1, math.Max(0.05, ymax*1.15))
	p.Y.Tick.Marker = PlainTicks{}
	f.w = inches(math.Min(16, 4.2+1.5*float64(len(runs))))
	f.h = inches(4.2)
	f.draw = func(c draw.Canvas) { withLegend(c, l, len(rungs)+8, p.Draw) }
	return f
}

// maxTrendPoints and maxLoadPoints bound the points per line of the
// time-series plots.
const (
	maxTrendPoints = 90
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

// maxHeatmapRuns is the most configs the replica heatmaps show.
const maxHeatmapRuns = 6

// maxReplicaLabels is the most replica names on a heatmap's axis.
const maxReplicaLabels = 16

// replicaGrid is one run's per-replica series as a heat-map grid: columns
// are time bins, rows replicas.
type replicaGrid struct {
	t   []float64   // bin mid times (s)
	z   [][]float64 // [replica][bin]
	max float64
}

func (g *replicaGrid) Dims() (c, r int)   { return len(g.t), len(g.z) }
func (g *replicaGrid) Z(c, r int) float64 { return g.z[r][c] }
func (g *replicaGrid) X(c int) float64    { return g.t[c] }
func (g *replicaGrid) Y(r int) float64    { return float64(r) }

// grids builds a run's KV-usage (%) and waiting-requests grids, or false
// when the run has too few samples.
func (r *runData) grids() (kv, queue *replicaGrid, ok bool) {
	if len(r.load) == 0 {
		return nil, nil, false
	}
	n := math.MaxInt
	coarse := make([][]seriesBin, len(r.load))
	for i, s := range r.load {
		coarse[i] = coarsen(s.bins, maxLoadPoints)
		n = min(n, len(coarse[i]))
	}
	if n < 2 {
		return nil, nil, false
	}
	kv, queue = &replicaGrid{}, &replicaGrid{}
	for k := range n {
		b := coarse[0][k]
		kv.t = append(kv.t, b.t/float64(b.n))
	}
	queue.t = kv.t
	for _, bins := range coarse {
		kr, qr := make([]float64, n), make([]float64, n)
		for k := range n {
			b := bins[k]
			qr[k], kr[k] = b.a/float64(b.n), 100*b.b/float64(b.n)
			queue.max, kv.max = math.Max(queue.max, qr[k]), math.Max(kv.max, kr[k])
		}
		kv.z, queue.z = append(kv.z, kr), append(queue.z, qr)
	}
	return kv, queue, true
}

// heatColors is the colour map of the heatmaps: white for 0 through
// yellow and red to black at the maximum.
func heatColors(lo, hi float64) plotpalette.ColorMap {
	cm := plotpalette.Reverse(moreland.BlackBody())
	cm.SetMin(lo)
	cm.SetMax(hi)
	return cm
}

// replicaTicks labels rows with the replicas' short names (after the last
// "/"), every k-th row beyond maxReplicaLabels.
func replicaTicks(names []string, n int) plot.ConstantTicks {
	every := (n + maxReplicaLabels - 1) / maxReplicaLabels
	var ts plot.ConstantTicks
	for i := range n {
		t := plot.Tick{Value: float64(i)}
		if i%every == 0 {
			name := replicaName(names, i)
			if j := strings.LastIndexByte(name, '/'); j >= 0 {
				name = name[j+1:]
			}
			t.Label = name
		}
		ts = append(ts, t)
	}
	return ts
}

// loadFigure: per config (up to maxHeatmapRuns), a replica × time heatmap
// of KV cache usage and one of waiting requests, on scales shared by all
// configs, with a colour bar under each column. Idle replicas are white
// rows.
func (o *Output) loadFigure() figure {
	const title = "Replica KV usage and queue over time"
	f := figure{name: PlotReplicaLoad, title: "Replica load"}
	type panelData struct {
		name      string
		names     []string
		kv, queue *replicaGrid
	}
	var data []panelData
	qmax := 1.0
	replicas := 0
	for _, r := range o.runs {
		if len(data) == maxHeatmapRuns {
			break
		}
		kv, q, ok := r.grids()
		if !ok {
			continue
		}
		data = append(data, panelData{r.name, r.replicas, kv, q})
		qmax = math.Max(qmax, q.max)
		replicas = max(replicas, len(kv.z))
	}
	if len(data) == 0 {
		f.w, f.h = inches(6), inches(4)
		np := notePlot(title, "no time-series samples in this run")
		f.draw = func(c draw.Canvas) { np.Draw(c) }
		return f
	}
	qmax = math.Ceil(qmax)
	kvMap, qMap := heatColors(0, 100), heatColors(0, qmax)
	plots := make([][]*plot.Plot, len(data))
	xmax := 0.0
	for i, d := range data {
		xmax = math.Max(xmax, d.kv.t[len(d.kv.t)-1])
		for j, g := range []struct {
			grid  *replicaGrid
			cm    plotpalette.ColorMap
			label string
		}{{d.kv, kvMap, "KV cache usage (%)"}, {d.queue, qMap, "waiting requests"}} {
			xlabel := ""
			if i == len(data)-1 {
				xlabel = "simulated time (s)"
			}
			ylabel := ""
			if j == 0 {
				ylabel = "replica"
			}
			p := newPlot(d.name+" · "+g.label, xlabel, ylabel)
			p.Title.TextStyle.Font.Size = vg.Points(11)
			hm := plotter.NewHeatMap(g.grid, g.cm.Palette(255))
			hm.Min, hm.Max = g.cm.Min(), g.cm.Max()
			hm.Rasterized = true
			p.Add(hm)
			p.Y.Tick.Marker = replicaTicks(d.names, len(g.grid.z))
			p.Y.Tick.Label.Font.Size = vg.Points(7)
			p.X.Tick.Marker = PlainTicks{}
			plots[i] = append(plots[i], p)
		}
	}
	for _, row := range plots {
		for _, p := range row {
			p.X.Min, p.X.Max = 0, xmax
			p.Y.Min, p.Y.Max = -0.5, float64(replicas)-0.5
		}
	}
	bars := make([]*plot.Plot, 2)
	for j, cb := range []struct {
		cm    plotpalette.ColorMap
		label string
	}{{kvMap, "KV cache usage (%) — white: empty or idle"}, {qMap, "waiting requests (mean per time bin)"}} {
		bp := plot.New()
		bp.HideY()
		bp.X.Label.Text = cb.label
		bp.X.Label.TextStyle.Font.Size = vg.Points(10)
		bp.X.Tick.Marker = PlainTicks{}
		bp.Add(&plotter.ColorBar{ColorMap: cb.cm})
		bp.X.Min, bp.X.Max = cb.cm.Min(), cb.cm.Max()
		bars[j] = bp
	}
	// A panel row needs about 1.1 in for its title, ticks and labels.
	rowH := 1.6 + 0.04*float64(replicas)
	f.w = inches(11)
	f.h = inches(0.4 + 0.9 + rowH*float64(len(data)))
	f.draw = func(c draw.Canvas) {
		barH := vg.Points(62)
		head := vg.Points(22)
		top := draw.Crop(c, 0, 0, barH, -head)
		drawGrid(top, plots, vg.Points(18))
		hc := draw.Crop(c, 0, 0, c.Size().Y-head, 0)
		hp := notePlot("", "")
		hp.Title.Text = title
		hp.Title.TextStyle.Font.Size = vg.Points(13)
		hp.Draw(hc)
		bc := draw.Crop(c, 0, 0, 0, -(c.Size().Y - barH))
		half := bc.Size().X / 2
		bars[0].Draw(draw.Crop(bc, vg.Points(40), -half-vg.Points(10), vg.Points(4), -vg.Points(8)))
		bars[1].Draw(draw.Crop(bc, half+vg.Points(40), -vg.Points(10), vg.Points(4), -vg.Points(8)))
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
