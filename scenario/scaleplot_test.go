package scenario

import (
	"bytes"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// writeScale writes BenchmarkScale's results to dir: scale.csv and a
// two-by-two plot (requests per wall second and peak RSS, against fleet
// size and against trace length) as scale.svg and scale.png.
func writeScale(dir string, rs []scaleResult) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var csv bytes.Buffer
	csv.WriteString("series,replicas,requests,completed,wall_s,cpu_s,requests_per_wall_s,requests_per_cpu_s,peak_rss_mib\n")
	var fleet, length []scaleResult
	for i, r := range rs {
		series := "fleet"
		if i >= len(scaleFleets) {
			series = "length"
			length = append(length, r)
		} else {
			fleet = append(fleet, r)
		}
		fmt.Fprintf(&csv, "%s,%d,%d,%d,%.3f,%.3f,%.0f,%.0f,%.0f\n", series, r.Replicas, r.Requests, r.Completed,
			r.WallSeconds, r.CPUSeconds, float64(r.Completed)/r.WallSeconds, float64(r.Completed)/r.CPUSeconds, r.PeakRSSMiB)
	}
	if err := os.WriteFile(filepath.Join(dir, "scale.csv"), csv.Bytes(), 0o644); err != nil {
		return err
	}
	blue := color.RGBA{R: 31, G: 119, B: 180, A: 255}
	orange := color.RGBA{R: 255, G: 127, B: 14, A: 255}
	type line struct {
		name  string
		color color.Color
		y     func(scaleResult) float64
	}
	panel := func(title, xlabel, ylabel string, rs []scaleResult, x func(scaleResult) float64, lines ...line) *plot.Plot {
		p := plot.New()
		p.Title.Text = title
		p.X.Label.Text, p.Y.Label.Text = xlabel, ylabel
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, powTicks{}
		p.Y.Tick.Marker = intTicks{}
		p.Add(plotter.NewGrid())
		for _, ln := range lines {
			pts := make(plotter.XYs, len(rs))
			for i, r := range rs {
				pts[i] = plotter.XY{X: x(r), Y: ln.y(r)}
			}
			l, s, err := plotter.NewLinePoints(pts)
			if err != nil {
				continue
			}
			l.Color, s.Color = ln.color, ln.color
			p.Add(l, s)
			if len(lines) > 1 {
				p.Legend.Add(ln.name, l, s)
			}
		}
		p.Legend.Top = true
		p.Y.Min = 0
		return p
	}
	perWall := line{"per wall second", blue, func(r scaleResult) float64 { return float64(r.Completed) / r.WallSeconds }}
	perCPU := line{"per CPU second", orange, func(r scaleResult) float64 { return float64(r.Completed) / r.CPUSeconds }}
	rss := line{"peak RSS", blue, func(r scaleResult) float64 { return r.PeakRSSMiB }}
	reps := func(r scaleResult) float64 { return float64(r.Replicas) }
	reqs := func(r scaleResult) float64 { return float64(r.Requests) }
	plots := [][]*plot.Plot{
		{panel("speed vs fleet size (0.5 req/s per replica, 15 min)", "replicas", "simulated requests", fleet, reps, perWall, perCPU),
			panel("memory vs fleet size", "replicas", "peak RSS (MiB)", fleet, reps, rss)},
		{panel("speed vs trace length (64 replicas)", "requests", "simulated requests", length, reqs, perWall, perCPU),
			panel("memory vs trace length (64 replicas)", "requests", "peak RSS (MiB)", length, reqs, rss)},
	}
	w, h := 10*vg.Inch, 7*vg.Inch
	drawAll := func(c draw.Canvas) {
		tiles := draw.Tiles{Rows: 2, Cols: 2, PadX: vg.Points(12), PadY: vg.Points(12), PadTop: vg.Points(6), PadBottom: vg.Points(6), PadLeft: vg.Points(6), PadRight: vg.Points(6)}
		cs := plot.Align(plots, tiles, c)
		for i := range plots {
			for j := range plots[i] {
				plots[i][j].Draw(cs[i][j])
			}
		}
	}
	sc := vgsvg.New(w, h)
	drawAll(draw.New(sc))
	var sb bytes.Buffer
	if _, err := sc.WriteTo(&sb); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "scale.svg"), sb.Bytes(), 0o644); err != nil {
		return err
	}
	ic := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(100))
	dc := draw.New(ic)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	drawAll(dc)
	var pb bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: ic}).WriteTo(&pb); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "scale.png"), pb.Bytes(), 0o644)
}

// intTicks is gonum's default tick marker with whole-number labels.
type intTicks struct{}

func (intTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'f', 0, 64)
		}
	}
	return ts
}

// powTicks labels a log axis at 1, 2, 5 times the powers of ten and at the
// powers of two that fleet sizes take.
type powTicks struct{}

func (powTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for _, v := range []float64{4, 8, 16, 32, 64, 128, 256, 512, 1e4, 3e4, 1e5, 3e5, 1e6} {
		if v >= lo && v <= hi {
			label := strconv.FormatFloat(v, 'f', -1, 64)
			switch {
			case v >= 1e6:
				label = strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
			case v >= 1e4:
				label = strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
			}
			ts = append(ts, plot.Tick{Value: v, Label: label})
		}
	}
	return ts
}
