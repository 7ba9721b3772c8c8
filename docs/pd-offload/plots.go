//go:build ignore

// plots.go draws the figures of docs/pd-offload.md from the summaries of
// the runs listed there (eppsim run --out DIR):
//
//	go run docs/pd-offload/plots.go -out docs/pd-offload NAME=DIR ...
//
// tiers.png stacks each run's true hit ratio by tier (GPU, CPU) under its
// oracle hit ratio; approx.png shows, for the approximate producer, the
// share of CPU-tier hits it did not predict on the chosen replica and the
// routing regret (oracle − true, % of prompt tokens). Both read the
// "default" config of each summary.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"image/color"
	"log"
	"os"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/eppsim/eppsim/report"
)

type run struct {
	name string
	s    *report.Summary
}

var (
	blue   = color.RGBA{31, 119, 180, 255}
	orange = color.RGBA{255, 127, 14, 255}
	grey   = color.RGBA{90, 90, 90, 255}
)

func main() {
	out := flag.String("out", ".", "directory for the PNG files")
	config := flag.String("config", "default", "config of each summary to plot")
	flag.Parse()
	var runs []run
	for _, arg := range flag.Args() {
		name, dir, ok := strings.Cut(arg, "=")
		if !ok {
			log.Fatalf("%q: want NAME=DIR", arg)
		}
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
		s := doc.Runs[*config]
		if s == nil {
			log.Fatalf("%s: no config %q", dir, *config)
		}
		runs = append(runs, run{name, s})
	}
	if len(runs) == 0 {
		log.Fatal("no runs")
	}
	if err := save(tiers(runs), *out, "tiers"); err != nil {
		log.Fatal(err)
	}
	if err := save(approx(runs), *out, "approx"); err != nil {
		log.Fatal(err)
	}
}

func names(runs []run) []string {
	var out []string
	for _, r := range runs {
		out = append(out, r.name)
	}
	return out
}

// tiers stacks GPU and CPU tier hit ratios, with the oracle as a marker.
func tiers(runs []run) *plot.Plot {
	p := plot.New()
	p.Title.Text = "True hit ratio by tier, and the oracle"
	p.Y.Label.Text = "Σ cached ÷ Σ prompt tokens"
	var gpu, cpu plotter.Values
	var oracle plotter.XYs
	for i, r := range runs {
		g, c := r.s.Cache.TrueHitRatio.Float(), 0.0
		if o := r.s.Cache.Offload; o != nil {
			g, c = o.GPUHitRatio.Float(), o.CPUHitRatio.Float()
		}
		gpu, cpu = append(gpu, g), append(cpu, c)
		oracle = append(oracle, plotter.XY{X: float64(i), Y: r.s.Cache.OracleHitRatio.Float()})
	}
	w := vg.Points(28)
	gb, _ := plotter.NewBarChart(gpu, w)
	gb.Color, gb.LineStyle.Width = blue, 0
	cb, _ := plotter.NewBarChart(cpu, w)
	cb.Color, cb.LineStyle.Width = orange, 0
	cb.StackOn(gb)
	sc, _ := plotter.NewScatter(oracle)
	sc.GlyphStyle = draw.GlyphStyle{Color: grey, Radius: vg.Points(4), Shape: draw.PyramidGlyph{}}
	p.Add(gb, cb, sc, plotter.NewGrid())
	p.Legend.Add("GPU tier", gb)
	p.Legend.Add("CPU tier", cb)
	p.Legend.Add("oracle", sc)
	p.Legend.Top, p.Legend.Left = true, true
	p.NominalX(names(runs)...)
	p.Y.Min, p.Y.Max = 0, 1.35*maxOf(oracle)
	return p
}

func maxOf(xys plotter.XYs) float64 {
	m := 0.0
	for _, p := range xys {
		m = max(m, p.Y)
	}
	return m
}

// approx shows the approximate producer's CPU-tier under-prediction and
// the routing regret, both in percent.
func approx(runs []run) *plot.Plot {
	p := plot.New()
	p.Title.Text = "Approximate producer: CPU-tier hits missed, and routing regret"
	p.Y.Label.Text = "%"
	var missed, regret plotter.Values
	for _, r := range runs {
		m := 0.0
		if pr := r.s.Prediction["approx-prefix-cache-producer"]; pr != nil && pr.ByTier != nil {
			m = 100 * pr.ByTier.CPU.UnderpredictedShare.Float()
		}
		missed = append(missed, m)
		regret = append(regret, 100*(r.s.Cache.OracleHitRatio-r.s.Cache.TrueHitRatio).Float())
	}
	w := vg.Points(18)
	mb, _ := plotter.NewBarChart(missed, w)
	mb.Color, mb.LineStyle.Width, mb.Offset = orange, 0, -w/2
	rb, _ := plotter.NewBarChart(regret, w)
	rb.Color, rb.LineStyle.Width, rb.Offset = grey, 0, w/2
	p.Add(mb, rb, plotter.NewGrid())
	p.Legend.Add("CPU-tier hit tokens not predicted (% of CPU-tier hits)", mb)
	p.Legend.Add("regret: oracle − true (% of prompt tokens)", rb)
	p.Legend.Top, p.Legend.Left = true, true
	p.NominalX(names(runs)...)
	top := 0.0
	for i := range missed {
		top = max(top, missed[i], regret[i])
	}
	p.Y.Min, p.Y.Max = 0, 1.4*top
	return p
}

func save(p *plot.Plot, dir, name string) error {
	path := filepath.Join(dir, name+".png")
	if err := p.Save(7*vg.Inch, 4*vg.Inch, path); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
