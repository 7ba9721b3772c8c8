package capacity

import (
	"image/color"
	"math"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/eppsim/eppsim/report"
)

// plotName is a term's plot file name (without extension).
func plotName(t Term) string {
	return "slo-" + strings.NewReplacer(":", "-").Replace(t.Key())
}

var lineColors = []color.Color{
	color.RGBA{31, 119, 180, 255}, color.RGBA{255, 127, 14, 255}, color.RGBA{44, 160, 44, 255},
	color.RGBA{214, 39, 40, 255}, color.RGBA{148, 103, 189, 255}, color.RGBA{140, 86, 75, 255},
	color.RGBA{227, 119, 194, 255}, color.RGBA{127, 127, 127, 255},
}

// writePlots draws each SLO term's metric against rate (or replicas), per
// configuration (the mean over seeds, the seeds' range as error bars where
// there are several), the bound as a dashed line and the found point
// ringed; and replicas against rate.
func (r *Result) writePlots(dir string, dpi int) error {
	for _, t := range r.terms() {
		p := r.termPlot(t)
		if err := report.SavePlot(dir, plotName(t), inches(7), inches(4.5), dpi, p.Draw); err != nil {
			return err
		}
	}
	p := r.replicaPlot()
	return report.SavePlot(dir, PlotReplica, inches(7), inches(4.5), dpi, p.Draw)
}

// stoppedBy reports whether one of a point's runs stopped early on term t.
func stoppedBy(p *Point, t Term) bool {
	for _, r := range p.Runs {
		if r.StoppedEarly != "" && slices.Contains(r.Violated, t.Text) {
			return true
		}
	}
	return false
}

// fade is col at a third of its opacity.
func fade(col color.Color) color.Color {
	r, g, b, _ := col.RGBA()
	return color.NRGBA{R: uint8(r >> 8), G: uint8(g >> 8), B: uint8(b >> 8), A: 90}
}

func inches(x float64) vg.Length { return vg.Length(x) * vg.Inch }

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text, p.Y.Label.Text = x, y
	p.X.Tick.Marker, p.Y.Tick.Marker = report.PlainTicks{}, report.PlainTicks{}
	g := plotter.NewGrid()
	g.Vertical.Color, g.Horizontal.Color = color.Gray{Y: 225}, color.Gray{Y: 225}
	p.Add(g)
	p.Legend.Top = true
	return p
}

func (r *Result) xOf(p *Point) float64 {
	if r.replicaSearch() {
		return float64(p.Replicas)
	}
	return p.Rate
}

func (r *Result) termPlot(t Term) *plot.Plot {
	x := "rate (requests/s)"
	if r.replicaSearch() {
		x = "replicas"
	}
	unit := " (ms)"
	if t.Metric == "success" {
		unit = " (share)"
	}
	title := t.Label() + " against " + strings.TrimSuffix(x, " (requests/s)")
	p := newPlot(title, x, t.Key()+unit)
	xmin, xmax := math.Inf(1), math.Inf(-1)
	anyInterval := false
	for i := range r.Configs {
		c := &r.Configs[i]
		col := lineColors[i%len(lineColors)]
		var xys plotter.XYs
		var bars plotter.YErrors
		var stopped plotter.XYs
		var found plotter.XYs
		var ivs plotter.XYs
		var ivBars plotter.YErrors
		for _, pt := range c.Points {
			xv := r.xOf(&pt)
			xmin, xmax = math.Min(xmin, xv), math.Max(xmax, xv)
			lo, mean, hi, n, st := pointStat(&pt, t)
			if n == 0 {
				if st > 0 && stoppedBy(&pt, t) {
					stopped = append(stopped, plotter.XY{X: xv, Y: t.Bound})
				}
				continue
			}
			xys = append(xys, plotter.XY{X: xv, Y: mean})
			if l, h, ok := pointInterval(&pt, t); ok {
				ivs = append(ivs, plotter.XY{X: xv, Y: mean})
				ivBars = append(ivBars, struct{ Low, High float64 }{math.Max(mean-l, 0), math.Max(h-mean, 0)})
			}
			bars = append(bars, struct{ Low, High float64 }{mean - lo, hi - mean})
			if c.Found && ((r.replicaSearch() && pt.Replicas == c.MinReplicas) || (!r.replicaSearch() && pt.Multiplier == c.MaxMultiplier)) {
				found = append(found, plotter.XY{X: xv, Y: mean})
			}
		}
		if len(ivs) > 0 {
			if eb, err := plotter.NewYErrorBars(struct {
				plotter.XYs
				plotter.YErrors
			}{ivs, ivBars}); err == nil {
				eb.Color = fade(col)
				eb.Width = vg.Points(2)
				p.Add(eb)
				anyInterval = true
			}
		}
		if len(xys) > 0 {
			l, s, err := plotter.NewLinePoints(xys)
			if err == nil {
				l.Color, s.Color = col, col
				s.Shape = draw.CircleGlyph{}
				p.Add(l, s)
				p.Legend.Add(c.Name, l, s)
				if len(r.Seeds) > 1 {
					if eb, err := plotter.NewYErrorBars(struct {
						plotter.XYs
						plotter.YErrors
					}{xys, bars}); err == nil {
						eb.Color = col
						p.Add(eb)
					}
				}
			}
		}
		if len(stopped) > 0 {
			if s, err := plotter.NewScatter(stopped); err == nil {
				s.Color, s.Shape, s.Radius = col, draw.CrossGlyph{}, vg.Points(4)
				p.Add(s)
			}
		}
		if len(found) > 0 {
			if s, err := plotter.NewScatter(found); err == nil {
				s.Color, s.Shape, s.Radius = col, draw.CircleGlyph{}, vg.Points(7)
				s.Shape = draw.RingGlyph{}
				p.Add(s)
			}
		}
	}
	if xmin <= xmax {
		// Room for the legend beyond the bound, on the side the SLO
		// allows, and a margin on both sides of the points.
		pad := math.Max((xmax-xmin)*0.04, math.Abs(xmax)*0.02)
		p.X.Min, p.X.Max = xmin-pad, xmax+pad
		if t.upper() {
			p.Legend.Top = true
			p.Y.Max = math.Max(p.Y.Max, t.Bound) * 1.45
		} else {
			p.Legend.Top = false
			lo := math.Min(p.Y.Min, t.Bound)
			p.Y.Min = lo - 0.3*math.Max(math.Abs(lo), 1e-3)
		}
		bound := plotter.XYs{{X: xmin, Y: t.Bound}, {X: xmax, Y: t.Bound}}
		if l, err := plotter.NewLine(bound); err == nil {
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			l.Color = color.Gray{Y: 80}
			p.Add(l)
			note := " (×: stopped early by this term, ring: found"
			if anyInterval {
				note += ", pale bars: 90% interval"
			}
			p.Legend.Add("SLO "+t.boundText()+note+")", l)
		}
	}
	return p
}

// replicaPlot draws each configuration's answer as replicas against rate,
// with the line through the origin that linear scaling would give.
func (r *Result) replicaPlot() *plot.Plot {
	p := newPlot("replicas against rate (dashed: linear scaling through the answer)", "rate (requests/s)", "replicas")
	p.Legend.Left = true
	p.Y.Tick.Marker = plot.DefaultTicks{}
	for i := range r.Configs {
		c := &r.Configs[i]
		if !c.Found {
			continue
		}
		col := lineColors[i%len(lineColors)]
		var pt plotter.XY
		if r.replicaSearch() {
			pt = plotter.XY{X: r.Rate, Y: float64(c.MinReplicas)}
		} else {
			pt = plotter.XY{X: c.MaxRate, Y: float64(r.Replicas)}
		}
		s, err := plotter.NewScatter(plotter.XYs{pt})
		if err != nil {
			continue
		}
		s.Color, s.Shape, s.Radius = col, draw.CircleGlyph{}, vg.Points(4)
		l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 2 * pt.X, Y: 2 * pt.Y}})
		if err != nil {
			continue
		}
		l.Color, l.Dashes = col, []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(l, s)
		p.Legend.Add(c.Name, l, s)
	}
	return p
}
