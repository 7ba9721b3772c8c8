package sweep

import (
	"errors"
	"fmt"
	"image/color"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette"
	"gonum.org/v1/plot/palette/moreland"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/eppsim/eppsim/report"
)

// Plot base names (each written as NAME.svg and NAME.png).
const (
	PlotHeatmap   = "heatmap"
	PlotObjective = "objective"
	PlotPareto    = "pareto"
)

var (
	frontColor     = color.RGBA{R: 255, G: 127, B: 14, A: 255}
	pointColor     = color.NRGBA{R: 31, G: 119, B: 180, A: 160}
	infeasibleTint = color.NRGBA{R: 214, G: 39, B: 40, A: 200}
	missingColor   = color.Gray{Y: 230}
)

// writePlots writes the heatmap (two or more dimensions), the objective
// line plot (one dimension) and the Pareto scatter (two objectives).
func (r *Results) writePlots(dir string, dpi int) error {
	type fig struct {
		name string
		w, h vg.Length
		draw func(draw.Canvas)
	}
	var figs []fig
	switch nd := len(r.Spec.Dims); {
	case nd >= 2:
		w, h, fn := r.heatmap()
		figs = append(figs, fig{PlotHeatmap, w, h, fn})
	case nd == 1:
		w, h, fn := r.linePlot()
		figs = append(figs, fig{PlotObjective, w, h, fn})
	}
	if len(r.Objectives) == 2 {
		w, h, fn := r.paretoPlot()
		figs = append(figs, fig{PlotPareto, w, h, fn})
	}
	written := map[string]bool{}
	for _, f := range figs {
		if err := report.SavePlot(dir, f.name, f.w, f.h, dpi, f.draw); err != nil {
			return err
		}
		written[f.name] = true
	}
	// A resumed sweep with other objectives leaves no stale plot behind.
	for _, name := range []string{PlotHeatmap, PlotObjective, PlotPareto} {
		for _, ext := range []string{".svg", ".png"} {
			if !written[name] {
				if err := os.Remove(filepath.Join(dir, name+ext)); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return fmt.Errorf("removing the stale %s%s: %w", name, ext, err)
				}
			}
		}
	}
	return nil
}

func inches(x float64) vg.Length { return vg.Length(x) * vg.Inch }

// newPlot returns a titled plot with a light grid.
func newPlot(title, xlabel, ylabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(12)
	p.Title.Padding = vg.Points(6)
	p.X.Label.Text, p.Y.Label.Text = xlabel, ylabel
	p.X.Tick.Marker, p.Y.Tick.Marker = report.PlainTicks{}, report.PlainTicks{}
	g := plotter.NewGrid()
	g.Vertical.Color = color.Gray{Y: 225}
	g.Horizontal.Color = color.Gray{Y: 225}
	p.Add(g)
	return p
}

// categoryTicks labels integer positions with names.
func categoryTicks(names []string) plot.ConstantTicks {
	t := make(plot.ConstantTicks, len(names))
	for i, n := range names {
		t[i] = plot.Tick{Value: float64(i), Label: n}
	}
	return t
}

// fmtShort formats a value with about four significant digits.
func fmtShort(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

// grid is the heatmap's cell values.
type grid struct {
	z          [][]float64 // [row][col]
	cols, rows int
}

func (g grid) Dims() (c, r int)        { return g.cols, g.rows }
func (g grid) Z(c, r int) float64      { return g.z[r][c] }
func (g grid) X(c int) float64         { return float64(c) }
func (g grid) Y(r int) float64         { return float64(r) }
func (g grid) Min() (v float64)        { return g.extreme(math.Min, math.Inf(1)) }
func (g grid) Max() (v float64)        { return g.extreme(math.Max, math.Inf(-1)) }
func (g grid) finite() bool            { return !math.IsInf(g.Min(), 0) }
func (g grid) at(c, r int) float64     { return g.z[r][c] }
func (g grid) set(c, r int, v float64) { g.z[r][c] = v }
func (g grid) extreme(f func(a, b float64) float64, init float64) float64 {
	v := init
	for _, row := range g.z {
		for _, x := range row {
			if !math.IsNaN(x) {
				v = f(v, x)
			}
		}
	}
	return v
}

// heatmap: the first objective over the first two dimensions (x: the
// first, y: the second); with more dimensions each cell shows the best
// feasible value over the others.
func (r *Results) heatmap() (vg.Length, vg.Length, func(draw.Canvas)) {
	dx, dy := r.Spec.Dims[0], r.Spec.Dims[1]
	o := r.Objectives[0]
	g := grid{cols: len(dx.Values), rows: len(dy.Values)}
	run := make([][]bool, g.rows)
	for i := range g.rows {
		g.z = append(g.z, slices.Repeat([]float64{math.NaN()}, g.cols))
		run[i] = make([]bool, g.cols)
	}
	var bestC, bestR = -1, -1
	for _, p := range r.Points {
		c, rw := slices.Index(dx.Values, p.Values[0]), slices.Index(dy.Values, p.Values[1])
		if c < 0 || rw < 0 {
			continue
		}
		run[rw][c] = true
		if !p.Feasible {
			continue
		}
		if cur := g.at(c, rw); math.IsNaN(cur) || o.signed(p.Objectives[0]) < o.signed(cur) {
			g.set(c, rw, p.Objectives[0])
		}
		if r.Best != nil && p.Index == r.Best.Index {
			bestC, bestR = c, rw
		}
	}
	title := o.Label()
	if len(r.Spec.Dims) > 2 {
		title += " (best over the other dimensions)"
	}
	p := newPlot(title, dx.Name, dy.Name)
	p.X.Tick.Marker = categoryTicks(dx.Values)
	p.Y.Tick.Marker = categoryTicks(dy.Values)
	w := inches(math.Min(14, math.Max(6.5, 2.8+0.75*float64(g.cols))))
	h := inches(math.Min(12, math.Max(4.5, 1.6+0.55*float64(g.rows))))
	if !g.finite() {
		p.Add(noteLabel(float64(g.cols-1)/2, float64(g.rows-1)/2, "no feasible point"))
		p.X.Min, p.X.Max = -0.5, float64(g.cols)-0.5
		p.Y.Min, p.Y.Max = -0.5, float64(g.rows)-0.5
		return w, h, func(c draw.Canvas) { p.Draw(c) }
	}
	lo, hi := g.Min(), g.Max()
	if hi <= lo {
		lo, hi = lo-math.Max(1, math.Abs(lo))*0.01, hi+math.Max(1, math.Abs(hi))*0.01
	}
	var cm palette.ColorMap = moreland.SmoothBlueRed()
	if o.Maximize {
		cm = palette.Reverse(cm) // blue is good either way
	}
	cm.SetMin(lo)
	cm.SetMax(hi)
	hm := plotter.NewHeatMap(g, cm.Palette(255))
	hm.Min, hm.Max = lo, hi
	hm.NaN = missingColor
	p.Add(hm)
	var xys plotter.XYs
	var labels []string
	var colors []color.Color
	for rw := range g.rows {
		for c := range g.cols {
			v := g.at(c, rw)
			switch {
			case !math.IsNaN(v):
				labels = append(labels, fmtShort(v))
				col, _ := cm.At(v)
				colors = append(colors, textOn(col))
			case run[rw][c]:
				labels = append(labels, "infeasible")
				colors = append(colors, color.Gray{Y: 90})
			default:
				continue
			}
			xys = append(xys, plotter.XY{X: float64(c), Y: float64(rw)})
		}
	}
	if lb, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: labels}); err == nil {
		for i := range lb.TextStyle {
			lb.TextStyle[i].XAlign, lb.TextStyle[i].YAlign = draw.XCenter, draw.YCenter
			lb.TextStyle[i].Font.Size = vg.Points(8)
			lb.TextStyle[i].Color = colors[i]
		}
		p.Add(lb)
	}
	if bestC >= 0 {
		if sc, err := plotter.NewScatter(plotter.XYs{{X: float64(bestC), Y: float64(bestR)}}); err == nil {
			sc.GlyphStyle = draw.GlyphStyle{Color: color.Black, Radius: vg.Points(14), Shape: draw.RingGlyph{}}
			p.Add(sc)
		}
	}
	p.X.Min, p.X.Max = -0.5, float64(g.cols)-0.5
	p.Y.Min, p.Y.Max = -0.5, float64(g.rows)-0.5
	bar := plot.New()
	bar.HideX()
	bar.Y.Label.Text = o.Metric.Path
	bar.Y.Padding = 0
	bar.Title.Text = " "
	bar.Add(&plotter.ColorBar{ColorMap: cm, Vertical: true})
	bar.Y.Min, bar.Y.Max = lo, hi
	return w, h, func(c draw.Canvas) {
		barW := vg.Points(110)
		p.Draw(draw.Crop(c, 0, -barW, 0, 0))
		bar.Draw(draw.Crop(c, c.Size().X-barW+vg.Points(24), -vg.Points(30), vg.Points(34), 0))
	}
}

// textOn picks black or white text for a background.
func textOn(bg color.Color) color.Color {
	r, g, b, _ := bg.RGBA()
	if 0.299*float64(r)+0.587*float64(g)+0.114*float64(b) < 0.5*0xffff {
		return color.White
	}
	return color.Black
}

// noteLabel is a centred text at (x, y).
func noteLabel(x, y float64, msg string) plot.Plotter {
	lb, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: x, Y: y}}, Labels: []string{msg}})
	if err != nil {
		return plotter.NewGrid()
	}
	lb.TextStyle[0].XAlign = draw.XCenter
	lb.TextStyle[0].Font.Size = vg.Points(12)
	return lb
}

// numeric returns the values as numbers when they all are (durations in
// ms).
func numeric(values []string) ([]float64, bool) {
	out := make([]float64, len(values))
	for i, v := range values {
		if f, err := parseNumber(v); err == nil {
			out[i] = f
			continue
		}
		d, err := parseDuration(v)
		if err != nil {
			return nil, false
		}
		out[i] = float64(d) / 1e6
	}
	return out, true
}

// linePlot: the first objective against the only dimension; infeasible
// points (with a value) as red crosses.
func (r *Results) linePlot() (vg.Length, vg.Length, func(draw.Canvas)) {
	d := r.Spec.Dims[0]
	o := r.Objectives[0]
	p := newPlot(o.Label()+" by "+d.Name, d.Name, o.Metric.Path)
	xs, isNum := numeric(d.Values)
	if !isNum {
		p.X.Tick.Marker = categoryTicks(d.Values)
	}
	x := func(v string) float64 {
		i := slices.Index(d.Values, v)
		if isNum && i >= 0 {
			return xs[i]
		}
		return float64(i)
	}
	var ok, bad plotter.XYs
	for _, pt := range r.Points {
		if pt.Error != "" || len(pt.Objectives) == 0 || math.IsNaN(pt.Objectives[0]) {
			continue
		}
		xy := plotter.XY{X: x(pt.Values[0]), Y: pt.Objectives[0]}
		if pt.Feasible {
			ok = append(ok, xy)
		} else {
			bad = append(bad, xy)
		}
	}
	slices.SortFunc(ok, func(a, b plotter.XY) int { return cmpFloat(a.X, b.X) })
	if len(ok) > 0 {
		if ln, sc, err := plotter.NewLinePoints(ok); err == nil {
			ln.LineStyle = draw.LineStyle{Color: pointColor, Width: vg.Points(1.6)}
			sc.GlyphStyle = draw.GlyphStyle{Color: pointColor, Radius: vg.Points(3), Shape: draw.CircleGlyph{}}
			p.Add(ln, sc)
			p.Legend.Add("feasible", ln, sc)
		}
	}
	if len(bad) > 0 {
		if sc, err := plotter.NewScatter(bad); err == nil {
			sc.GlyphStyle = draw.GlyphStyle{Color: infeasibleTint, Radius: vg.Points(3.5), Shape: draw.CrossGlyph{}}
			p.Add(sc)
			p.Legend.Add("infeasible", sc)
		}
	}
	if r.Best != nil {
		if sc, err := plotter.NewScatter(plotter.XYs{{X: x(r.Best.Values[0]), Y: r.Best.Objectives[0]}}); err == nil {
			sc.GlyphStyle = draw.GlyphStyle{Color: color.Black, Radius: vg.Points(7), Shape: draw.RingGlyph{}}
			p.Add(sc)
			p.Legend.Add(fmt.Sprintf("best (point %d)", r.Best.Index), sc)
		}
	}
	p.Legend.Top = true
	pad(p)
	if len(ok)+len(bad) == 0 {
		p.Add(noteLabel(0.5, 0.5, "no point with a value"))
	}
	return inches(7), inches(4.2), func(c draw.Canvas) { p.Draw(c) }
}

// pad widens p's axes by 6% of their span on each side, so that markers
// at the extremes are not cut.
func pad(p *plot.Plot) {
	for _, ax := range []*plot.Axis{&p.X, &p.Y} {
		if math.IsInf(ax.Min, 0) || math.IsInf(ax.Max, 0) || math.IsNaN(ax.Min) || math.IsNaN(ax.Max) {
			continue
		}
		span := ax.Max - ax.Min
		if span <= 0 {
			span = math.Max(1, math.Abs(ax.Max))
		}
		ax.Min -= 0.06 * span
		ax.Max += 0.06 * span
	}
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// paretoPlot: every feasible point on the two objectives, the Pareto
// front highlighted and joined, the best point ringed.
func (r *Results) paretoPlot() (vg.Length, vg.Length, func(draw.Canvas)) {
	o0, o1 := r.Objectives[0], r.Objectives[1]
	p := newPlot("Pareto front: "+o0.Label()+", "+o1.Label(), o0.Metric.Path, o1.Metric.Path)
	var all, bad, front plotter.XYs
	onFront := map[int]bool{}
	for _, i := range r.Pareto {
		onFront[i] = true
	}
	for _, pt := range r.Points {
		if pt.Error != "" || math.IsNaN(pt.Objectives[0]) || math.IsNaN(pt.Objectives[1]) {
			continue
		}
		xy := plotter.XY{X: pt.Objectives[0], Y: pt.Objectives[1]}
		switch {
		case !pt.Feasible:
			bad = append(bad, xy)
		case onFront[pt.Index]:
			front = append(front, xy)
		default:
			all = append(all, xy)
		}
	}
	slices.SortFunc(front, func(a, b plotter.XY) int { return cmpFloat(a.X, b.X) })
	if len(all) > 0 {
		if sc, err := plotter.NewScatter(all); err == nil {
			sc.GlyphStyle = draw.GlyphStyle{Color: pointColor, Radius: vg.Points(2.5), Shape: draw.CircleGlyph{}}
			p.Add(sc)
			p.Legend.Add("dominated", sc)
		}
	}
	if len(bad) > 0 {
		if sc, err := plotter.NewScatter(bad); err == nil {
			sc.GlyphStyle = draw.GlyphStyle{Color: infeasibleTint, Radius: vg.Points(3), Shape: draw.CrossGlyph{}}
			p.Add(sc)
			p.Legend.Add("infeasible", sc)
		}
	}
	if len(front) > 0 {
		if ln, sc, err := plotter.NewLinePoints(front); err == nil {
			ln.LineStyle = draw.LineStyle{Color: frontColor, Width: vg.Points(1.5)}
			sc.GlyphStyle = draw.GlyphStyle{Color: frontColor, Radius: vg.Points(3.5), Shape: draw.CircleGlyph{}}
			p.Add(ln, sc)
			p.Legend.Add(fmt.Sprintf("Pareto front (%d)", len(front)), ln, sc)
		}
	}
	if r.Best != nil {
		if sc, err := plotter.NewScatter(plotter.XYs{{X: r.Best.Objectives[0], Y: r.Best.Objectives[1]}}); err == nil {
			sc.GlyphStyle = draw.GlyphStyle{Color: color.Black, Radius: vg.Points(7), Shape: draw.RingGlyph{}}
			p.Add(sc)
			p.Legend.Add("best", sc)
		}
	}
	p.Legend.Top = true
	pad(p)
	if len(all)+len(bad)+len(front) == 0 {
		p.Add(noteLabel(0.5, 0.5, "no point with both objective values"))
	}
	return inches(7), inches(5), func(c draw.Canvas) { p.Draw(c) }
}

// IntegerTicks marks an axis of counts (evaluations): ticks only at
// integers, labelled at steps of 1, 2, 5, 10, 20, ... so that at most
// about eight labels show; minor ticks at the other integers when there
// are few enough.
type IntegerTicks struct{}

// Ticks implements plot.Ticker.
func (IntegerTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi >= lo) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		return nil
	}
	first, last := int(math.Ceil(lo)), int(math.Floor(hi))
	step := 1
	for _, s := range []int{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000} {
		step = s
		if (last-first)/s+1 <= 8 {
			break
		}
	}
	var ts []plot.Tick
	for v := first; v <= last; v++ {
		switch {
		case v%step == 0:
			ts = append(ts, plot.Tick{Value: float64(v), Label: strconv.Itoa(v)})
		case last-first <= 100:
			ts = append(ts, plot.Tick{Value: float64(v)})
		}
	}
	return ts
}
