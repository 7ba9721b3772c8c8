//go:build ignore

// pdplots.go draws the P/D figures of docs/pd-offload.md from the
// summaries of the runs listed there (eppsim run --out DIR):
//
//	go run docs/pd-offload/pdplots.go -out docs/pd-offload -base out/pd/base \
//	  -threshold out/pd/threshold -pods 2=out/pd/p2,4=out/pd/p4,6=out/pd/p6,8=out/pd/p8
//
// pd_threshold.png plots, against prefix-based-pd-decider's
// nonCachedTokens, the share of requests disaggregated, TTFT p50 and TPOT
// p50 of the P/D runs of -threshold (configs pd-epp-config and pd-ncN),
// with the aggregated runs of -base (default, agg-epp-config) as dashed
// lines. pd_prefill_pods.png plots TTFT p50, TTFT p99 and TPOT p50
// against the number of prefill pods (of 16) for pd-epp-config and
// pd-nc4096 in each -pods run.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"image/color"
	"log"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/eppsim/eppsim/report"
)

var (
	blue   = color.RGBA{31, 119, 180, 255}
	orange = color.RGBA{255, 127, 14, 255}
	grey   = color.RGBA{90, 90, 90, 255}
	green  = color.RGBA{44, 160, 44, 255}
)

func load(dir string) map[string]*report.Summary {
	data, err := os.ReadFile(filepath.Join(dir, report.SummaryFile))
	if err != nil {
		log.Fatal(err)
	}
	var doc struct {
		Runs map[string]*report.Summary `json:"runs"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		log.Fatalf("%s: %v", dir, err)
	}
	return doc.Runs
}

func main() {
	out := flag.String("out", ".", "directory for the PNG files")
	base := flag.String("base", "", "run with the aggregated configs default and agg-epp-config")
	threshold := flag.String("threshold", "", "run with pd-epp-config and pd-ncN configs")
	pods := flag.String("pods", "", "N=DIR,...: runs with N prefill pods")
	flag.Parse()
	agg := load(*base)
	th := load(*threshold)
	// Threshold: pd-epp-config is nonCachedTokens 16.
	type point struct {
		x float64
		s *report.Summary
	}
	var tp []point
	for name, s := range th {
		n := 16
		if v, ok := strings.CutPrefix(name, "pd-nc"); ok {
			var err error
			if n, err = strconv.Atoi(v); err != nil {
				log.Fatalf("config %q: %v", name, err)
			}
		} else if name != "pd-epp-config" {
			continue
		}
		tp = append(tp, point{float64(n), s})
	}
	sort.Slice(tp, func(i, j int) bool { return tp[i].x < tp[j].x })
	series := func(f func(*report.Summary) float64) plotter.XYs {
		var xy plotter.XYs
		for _, p := range tp {
			xy = append(xy, plotter.XY{X: math.Log2(p.x), Y: f(p.s)})
		}
		return xy
	}
	ttft := func(s *report.Summary) float64 { return s.Latency.TTFT.P50.Float() }
	tpot := func(s *report.Summary) float64 { return s.Latency.TPOT.P50.Float() }
	var ticks plot.ConstantTicks
	for _, p := range tp {
		ticks = append(ticks, plot.Tick{Value: math.Log2(p.x), Label: strconv.Itoa(int(p.x))})
	}
	share := panel("Requests disaggregated", "nonCachedTokens", "%")
	line(share, series(func(s *report.Summary) float64 { return 100 * s.PD.DisaggregatedShare }), blue, false, "P/D, 4 prefill + 12 decode")
	lat := panel("TTFT p50", "nonCachedTokens", "ms")
	line(lat, series(ttft), blue, false, "P/D, 4 + 12")
	refs(lat, tp[0].x, tp[len(tp)-1].x, agg, ttft)
	dec := panel("TPOT p50", "nonCachedTokens", "ms")
	line(dec, series(tpot), blue, false, "P/D, 4 + 12")
	refs(dec, tp[0].x, tp[len(tp)-1].x, agg, tpot)
	for _, p := range []*plot.Plot{share, lat, dec} {
		p.X.Tick.Marker = ticks
		headroom(p)
	}
	if err := saveRow(filepath.Join(*out, "pd_threshold.png"), share, lat, dec); err != nil {
		log.Fatal(err)
	}

	// Prefill pods.
	type podRun struct {
		n    float64
		runs map[string]*report.Summary
	}
	var pr []podRun
	for _, kv := range strings.Split(*pods, ",") {
		k, dir, ok := strings.Cut(kv, "=")
		if !ok {
			log.Fatalf("-pods %q: want N=DIR", kv)
		}
		n, err := strconv.Atoi(k)
		if err != nil {
			log.Fatalf("-pods %q: %v", kv, err)
		}
		pr = append(pr, podRun{float64(n), load(dir)})
	}
	sort.Slice(pr, func(i, j int) bool { return pr[i].n < pr[j].n })
	podSeries := func(config string, f func(*report.Summary) float64) plotter.XYs {
		var xy plotter.XYs
		for _, p := range pr {
			if s := p.runs[config]; s != nil {
				xy = append(xy, plotter.XY{X: p.n, Y: f(s)})
			}
		}
		return xy
	}
	ttft99 := func(s *report.Summary) float64 { return s.Latency.TTFT.P99.Float() }
	var panels []*plot.Plot
	for _, m := range []struct {
		title string
		f     func(*report.Summary) float64
	}{{"TTFT p50", ttft}, {"TTFT p99", ttft99}, {"TPOT p50", tpot}} {
		p := panel(m.title, "prefill pods (of 16)", "ms")
		line(p, podSeries("pd-epp-config", m.f), blue, false, "nonCachedTokens 16")
		line(p, podSeries("pd-nc4096", m.f), orange, false, "nonCachedTokens 4096")
		refs(p, pr[0].n, pr[len(pr)-1].n, agg, m.f)
		headroom(p)
		panels = append(panels, p)
	}
	if err := saveRow(filepath.Join(*out, "pd_prefill_pods.png"), panels...); err != nil {
		log.Fatal(err)
	}
}

// headroom starts the y axis at 0 and leaves the top third for the
// legend.
func headroom(p *plot.Plot) {
	p.Y.Min = 0
	p.Y.Max *= 1.5
}

func panel(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	return p
}

func line(p *plot.Plot, xy plotter.XYs, c color.Color, dashed bool, label string) {
	l, s, err := plotter.NewLinePoints(xy)
	if err != nil {
		log.Fatal(err)
	}
	l.Color, s.Color = c, c
	if dashed {
		l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
	}
	p.Add(l, s)
	p.Legend.Add(label, l)
}

// refs draws the aggregated runs' values as dashed horizontal lines from
// x0 to x1 (in the plot's x units: log₂ for the threshold panels).
func refs(p *plot.Plot, x0, x1 float64, agg map[string]*report.Summary, f func(*report.Summary) float64) {
	if p.X.Label.Text == "nonCachedTokens" {
		x0, x1 = math.Log2(x0), math.Log2(x1)
	}
	for _, r := range []struct {
		config, label string
		c             color.Color
	}{{"default", "aggregated 16, default config", grey}, {"agg-epp-config", "aggregated 16, P/D config's scorers", green}} {
		s := agg[r.config]
		if s == nil {
			continue
		}
		v := f(s)
		l, err := plotter.NewLine(plotter.XYs{{X: x0, Y: v}, {X: x1, Y: v}})
		if err != nil {
			log.Fatal(err)
		}
		l.Color, l.Dashes = r.c, []vg.Length{vg.Points(5), vg.Points(3)}
		p.Add(l)
		p.Legend.Add(r.label, l)
	}
}

func saveRow(path string, panels ...*plot.Plot) error {
	w, h := vg.Length(len(panels))*4*vg.Inch, 3.6*vg.Inch
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: len(panels), PadX: vg.Points(8), PadTop: vg.Points(4), PadBottom: vg.Points(4)}
	canvases := plot.Align([][]*plot.Plot{panels}, tiles, dc)
	for i, p := range panels {
		p.Draw(canvases[0][i])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}
