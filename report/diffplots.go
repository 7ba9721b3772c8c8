package report

// The --out directory of eppsim diff: plots comparing the two sides, the
// Markdown and JSON of the comparison, and a self-contained HTML page.

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"html"
	"image/color"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Files written by WriteDiffOutput; each plot as NAME.svg and NAME.png.
const (
	DiffMarkdownFile = "diff.md"
	DiffJSONFile     = "diff.json"
	DiffHTMLFile     = "diff.html"

	PlotDiffTTFT     = "diff_ttft_cdf"
	PlotDiffMetrics  = "diff_metrics"
	PlotDiffHitRatio = "diff_hit_ratio"
)

// DiffPlotNames lists the diff plots in the order the page shows them.
var DiffPlotNames = []string{PlotDiffTTFT, PlotDiffMetrics, PlotDiffHitRatio}

var diffPlotTitles = map[string]string{
	PlotDiffTTFT:     "TTFT distribution, baseline (dashed) vs current (solid)",
	PlotDiffMetrics:  "Checked metrics, with the threshold marked",
	PlotDiffHitRatio: "True hit ratio over time, baseline (dashed) vs current (solid)",
}

// sideData is what a side's CSV files (next to its summary.json) give the
// plots, per group name.
type sideData struct {
	ttft    map[string][]float32 // ms, completed non-warm-up requests, sorted
	byTime  map[string]*timeBins // cached and prompt tokens by arrival
	replica map[string]*series   // timeseries.csv: Σ replica hit ratios, count, per instant
}

// loadSideData reads, for the given runs (run → plot label), the
// requests.csv next to their summaries (TTFT samples, hit ratio by
// arrival) or, where there is none, the timeseries.csv (hit ratio per
// sample). Problems become notes: the plots fall back to the summaries.
func loadSideData(side string, labelOf map[*Run]string) (*sideData, []string) {
	d := &sideData{ttft: map[string][]float32{}, byTime: map[string]*timeBins{}, replica: map[string]*series{}}
	byDir := map[string]map[string]string{} // dir → CSV config name → label
	for r, label := range labelOf {
		if r.dir == "" {
			continue
		}
		if byDir[r.dir] == nil {
			byDir[r.dir] = map[string]string{}
		}
		byDir[r.dir][r.csvName] = label
	}
	var notes []string
	for _, dir := range slices.Sorted(maps.Keys(byDir)) {
		ok, err := d.readRequests(dir, byDir[dir])
		if err != nil {
			notes = append(notes, fmt.Sprintf("%s: %v; the plots use the summary only", side, err))
		}
		if ok {
			continue
		}
		if err := d.readTimeseries(dir, byDir[dir]); err != nil {
			notes = append(notes, fmt.Sprintf("%s: %v", side, err))
		}
	}
	for _, xs := range d.ttft {
		slices.Sort(xs)
	}
	return d, notes
}

// readRequests adds dir/requests.csv; ok is false when there is none or it
// could not be read (then nothing was added).
func (d *sideData) readRequests(dir string, labelOf map[string]string) (ok bool, err error) {
	ttft := map[string][]float32{}
	byTime := map[string]*timeBins{}
	err = readCSV(filepath.Join(dir, RequestsFile), []string{"config", "arrival_s", "prompt_tokens", "cached_tokens", "ttft_ms", "outcome", "warmup"}, func(col []string) error {
		g, ok := labelOf[col[0]]
		if !ok || col[5] != "completed" || col[6] == "true" {
			return nil
		}
		v, err1 := strconv.ParseFloat(col[4], 64)
		arr, err2 := strconv.ParseFloat(col[1], 64)
		prompt, err3 := strconv.ParseInt(col[2], 10, 64)
		cached, err4 := strconv.ParseInt(col[3], 10, 64)
		if err := errors.Join(err1, err2, err3, err4); err != nil {
			return err
		}
		ttft[g] = append(ttft[g], float32(v))
		tb := byTime[g]
		if tb == nil {
			tb = &timeBins{}
			byTime[g] = tb
		}
		tb.add(int64(arr*1e9), binVals{binCached: cached, binPrompt: prompt})
		return nil
	})
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for g, xs := range ttft {
		d.ttft[g] = append(d.ttft[g], xs...)
	}
	for g, tb := range byTime {
		if d.byTime[g] == nil {
			d.byTime[g] = tb
			continue
		}
		// Several runs (seeds) of one label: pool their tokens.
		for k, b := range tb.bins {
			d.byTime[g].add(int64(k)*tb.width, b)
		}
	}
	return true, nil
}

// readTimeseries adds dir/timeseries.csv: per sample instant, the mean of
// the replicas' hit ratios.
func (d *sideData) readTimeseries(dir string, labelOf map[string]string) error {
	type instant struct {
		t      string
		sum, n float64
		open   bool
	}
	cur := map[string]*instant{}
	got := map[string]*series{}
	flush := func(g string, in *instant) {
		if in.open && in.n > 0 {
			t, _ := strconv.ParseFloat(in.t, 64)
			s := got[g]
			if s == nil {
				s = &series{}
				got[g] = s
			}
			s.add(t, in.sum, in.n)
		}
		*in = instant{}
	}
	err := readCSV(filepath.Join(dir, TimeseriesFile), []string{"config", "time_s", "hit_ratio"}, func(col []string) error {
		g, ok := labelOf[col[0]]
		if !ok {
			return nil
		}
		in := cur[g]
		if in == nil {
			in = &instant{}
			cur[g] = in
		}
		if in.open && in.t != col[1] {
			flush(g, in)
		}
		in.t, in.open = col[1], true
		if col[2] != "" {
			v, err := strconv.ParseFloat(col[2], 64)
			if err != nil {
				return err
			}
			in.sum += v
			in.n++
		}
		return nil
	})
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, g := range slices.Sorted(maps.Keys(cur)) {
		flush(g, cur[g])
	}
	for g, s := range got {
		if d.replica[g] == nil {
			d.replica[g] = s // one run per label: several seeds use the first
		}
	}
	return nil
}

// readCSV streams path, calling row with the named columns of each row.
func readCSV(path string, cols []string, row func([]string) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := csv.NewReader(bufio.NewReaderSize(f, 1<<16))
	r.ReuseRecord = true
	header, err := r.Read()
	if err != nil {
		return fmt.Errorf("%s: reading the header: %w", path, err)
	}
	idx := make([]int, len(cols))
	for i, c := range cols {
		if idx[i] = slices.Index(header, c); idx[i] < 0 {
			return fmt.Errorf("%s: no %q column", path, c)
		}
	}
	vals := make([]string, len(cols))
	for {
		rec, err := r.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		for i, k := range idx {
			vals[i] = rec[k]
		}
		if err := row(vals); err != nil {
			line, _ := r.FieldPos(0)
			return fmt.Errorf("%s:%d: %w", path, line, err)
		}
	}
}

// WriteDiffOutput writes the comparison to dir (created if needed):
// diff.md, diff.json, diff.html and the plots as SVG and PNG (dpi: the PNG
// resolution, 150 when ≤ 0). Every file goes to a temporary name first and
// is renamed into place only when all are complete. Problems reading the
// sides' CSV files become notes of res.
func WriteDiffOutput(dir string, res *DiffResult, dpi int) (err error) {
	if res.baseSet == nil || res.curSet == nil {
		return errors.New("report: WriteDiffOutput needs a result of Diff")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("report: creating output directory: %w", err)
	}
	bOf, cOf := map[*Run]string{}, map[*Run]string{}
	for _, p := range res.Pairs {
		for _, r := range p.base.runs {
			bOf[r] = p.Label()
		}
		for _, r := range p.cur.runs {
			cOf[r] = p.Label()
		}
	}
	bd, bn := loadSideData("baseline", bOf)
	cd, cn := loadSideData("current", cOf)
	res.Notes = append(res.Notes, append(bn, cn...)...)

	figs := []figure{diffTTFTFigure(res, bd, cd), diffMetricsFigure(res), diffHitFigure(res, bd, cd)}
	var plots []renderedPlot
	for _, f := range figs {
		rp, err := render(f, dpi)
		if err != nil {
			return err
		}
		plots = append(plots, rp)
	}
	js, err := res.JSON()
	if err != nil {
		return err
	}
	type namedFile struct {
		name string
		data []byte
	}
	files := []namedFile{{DiffMarkdownFile, res.Markdown()}, {DiffJSONFile, js}, {DiffHTMLFile, res.html(plots, dpi)}}
	for _, p := range plots {
		files = append(files, namedFile{p.name + ".svg", p.svg}, namedFile{p.name + ".png", p.png})
	}
	var pending []pendingFile
	defer func() {
		if err != nil {
			for _, p := range pending {
				os.Remove(p.tmp)
			}
		}
	}()
	for _, f := range files {
		tmp, err := writeTemp(dir, f.name, f.data)
		if err != nil {
			return err
		}
		pending = append(pending, pendingFile{tmp: tmp, name: f.name})
	}
	for i, p := range pending {
		if err := os.Rename(p.tmp, filepath.Join(dir, p.name)); err != nil {
			pending = pending[i:]
			return fmt.Errorf("report: writing %s: %w", p.name, err)
		}
	}
	pending = nil
	return nil
}

var (
	dashedStyle = []vg.Length{vg.Points(5), vg.Points(3)}
	regressRed  = color.RGBA{R: 214, G: 39, B: 40, A: 255}
	improvedGrn = color.RGBA{R: 44, G: 160, B: 44, A: 255}
	currentBlue = color.RGBA{R: 31, G: 119, B: 180, A: 255}
	noiseAmber  = color.RGBA{R: 230, G: 159, B: 0, A: 255}
	baseGrey    = color.RGBA{R: 170, G: 170, B: 170, A: 255}
)

// verdictColor is the colour of a current-side bar: one colour per
// verdict, each explained in the legend.
func verdictColor(v Verdict) color.Color {
	switch v {
	case VerdictRegression:
		return regressRed
	case VerdictImproved:
		return improvedGrn
	case VerdictNoise:
		return noiseAmber
	}
	return currentBlue
}

// MetricUnit is the unit of a summary metric path, for axis labels and
// panel titles: "ms", "req/s", "tokens/s", "tokens", "s", "share" (a
// fraction in [0, 1]), "requests", ... ("" when unknown).
func MetricUnit(path string) string {
	leaf := path[strings.LastIndexByte(path, '.')+1:]
	if strings.HasPrefix(path, "pd.") {
		if u := pdUnit(path, leaf); u != "" {
			return u
		}
	}
	switch {
	case path == "staged_gauges.gauge_samples":
		return "samples"
	case path == "kernel_compiles":
		return "compiles"
	case strings.HasPrefix(path, "staged_gauges.waiting."):
		return "requests"
	case strings.HasPrefix(path, "staged_gauges.kv_usage."):
		return "share"
	case strings.HasPrefix(path, "classes.") && strings.Contains(path, "_ms."):
		return "ms"
	case strings.HasPrefix(path, "classes.rejected_by_cause."):
		return "requests"
	}
	switch {
	case strings.HasPrefix(path, "latency_ms.") || strings.HasSuffix(leaf, "_ms"):
		return "ms"
	case leaf == "cpu_hit_requests" || leaf == "final_requests":
		return "requests"
	case leaf == "cpu_loads":
		return "loads"
	case leaf == "cpu_loaded_blocks" || leaf == "cpu_stored_blocks" || leaf == "cpu_evictions":
		return "blocks"
	case strings.Contains(path, ".by_tier.") && strings.HasSuffix(leaf, "_tokens"):
		return "tokens"
	case strings.HasSuffix(leaf, "requests_per_s") || leaf == "requests_per_wall_s":
		return "req/s"
	case strings.HasSuffix(leaf, "tokens_per_s"):
		return "tokens/s"
	case strings.HasSuffix(leaf, "_s"):
		return "s"
	case leaf == "predicted_tokens" || leaf == "true_tokens" || strings.HasSuffix(leaf, "_tokens") && strings.HasPrefix(path, "cache."):
		return "tokens"
	case strings.HasSuffix(leaf, "_ratio") || strings.HasSuffix(leaf, "_rate") || strings.HasSuffix(leaf, "_share") ||
		strings.HasSuffix(leaf, "_fraction") || leaf == "mae" || leaf == "bias" || leaf == "over_predicted_tokens" ||
		leaf == "under_predicted_tokens" || strings.HasPrefix(path, "cache.per_replica_hit_ratio."):
		return "share"
	case leaf == "load_imbalance":
		return "max/mean"
	case leaf == "utilization" || leaf == "busiest_utilization":
		return "offered/sustainable"
	case strings.Contains(path, "_by_cause."):
		return "share"
	case strings.HasPrefix(path, "requests.") || strings.HasPrefix(path, "routing.requests_per_replica.") ||
		strings.HasPrefix(path, "prediction.") && leaf == "requests":
		return "requests"
	case leaf == "replicas" || leaf == "idle_replicas":
		return "replicas"
	case leaf == "evictions":
		return "blocks"
	case leaf == "preemptions" || leaf == "events":
		return leaf
	}
	return ""
}

// pdUnit is the unit of a P/D summary path ("" to fall back on the
// general rules).
func pdUnit(path, leaf string) string {
	switch {
	case strings.Contains(path, "_ms."):
		return "ms"
	case strings.Contains(path, ".mib_per_rank."):
		return "MiB"
	case leaf == "total_gib_per_rank":
		return "GiB"
	case strings.Contains(path, ".pulled_blocks."):
		return "blocks"
	case strings.HasPrefix(path, "pd.decider."):
		return "tokens"
	case leaf == "requests" || leaf == "disaggregated" || strings.HasPrefix(path, "pd.reasons.") ||
		leaf == "prefill_legs" || leaf == "decode_legs" || leaf == "mean_waiting" || leaf == "mean_running":
		return "requests"
	case leaf == "mean_kv_usage" || leaf == "peak_kv_usage":
		return "share"
	}
	return ""
}

// percentileCDF is the step CDF known from a summary: at p50, p90, p95,
// p99 and max (means over the group's runs), on a log10 x axis.
func percentileCDF(g *runGroup) plotter.XYs {
	var pts plotter.XYs
	for _, q := range []struct {
		key string
		f   float64
	}{{"p50", 0.5}, {"p90", 0.9}, {"p95", 0.95}, {"p99", 0.99}, {"max", 1}} {
		s := newSideStat(g.values([]string{"latency_ms", "ttft", q.key}))
		if s == nil || !(s.Mean > 0) {
			continue
		}
		pts = append(pts, plotter.XY{X: math.Log10(s.Mean), Y: q.f})
	}
	return pts
}

// diffTTFTFigure overlays the two sides' TTFT CDFs per pair: the full
// empirical CDF when requests.csv is next to the summary, else the
// percentile points of the summary as a step CDF (a lower bound).
func diffTTFTFigure(res *DiffResult, bd, cd *sideData) figure {
	const title = "TTFT CDF: baseline (dashed) vs current (solid)"
	f := figure{name: PlotDiffTTFT, title: "TTFT CDF", w: inches(7.5), h: inches(4.4)}
	p := newPlot(title, "time to first token (ms, log scale)", "fraction of requests ≤ TTFT")
	l := newLegend()
	n := 0
	lo, hi := math.Inf(1), math.Inf(-1)
	pctOnly := false
	for i := range res.Pairs {
		pr := &res.Pairs[i]
		for _, side := range []struct {
			name string
			g    *runGroup
			d    *sideData
		}{{"baseline", pr.base, bd}, {"current", pr.cur, cd}} {
			var pts plotter.XYs
			label := pr.Label() + " " + side.name
			if xs := positive(side.d.ttft[pr.Label()]); len(xs) > 0 {
				pts = cdfPoints(xs)
			} else {
				pts = percentileCDF(side.g)
				label += " (percentiles)"
				pctOnly = pctOnly || len(pts) > 0
			}
			if len(pts) == 0 {
				continue
			}
			for _, pt := range pts {
				lo, hi = math.Min(lo, pt.X), math.Max(hi, pt.X)
			}
			s := draw.LineStyle{Color: palette[i%len(palette)], Width: vg.Points(1.6)}
			if side.name == "baseline" {
				s.Dashes = dashedStyle
				s.Width = vg.Points(1.3)
			}
			ln, err := plotter.NewLine(pts)
			if err != nil {
				continue
			}
			ln.StepStyle = plotter.PostStep
			ln.LineStyle = s
			p.Add(ln)
			th := []plot.Thumbnailer{ln}
			if len(pts) < sparsePoints {
				if sc, err := plotter.NewScatter(pts); err == nil {
					sc.GlyphStyle = draw.GlyphStyle{Color: s.Color, Radius: vg.Points(2.4), Shape: draw.CircleGlyph{}}
					p.Add(sc)
					th = append(th, sc)
				}
			}
			l.Add(label, th...)
			n++
		}
	}
	if n == 0 {
		np := notePlot(title, "no TTFT data on either side")
		f.draw = func(c draw.Canvas) { np.Draw(c) }
		return f
	}
	if pctOnly {
		l.Add("(percentiles: p50, p90, p95,")
		l.Add("  p99, max of the summary)")
		n += 2
	}
	if hi-lo < 0.1 {
		lo, hi = lo-0.5, hi+0.5
	}
	p.X.Tick.Marker = log10Ticks{}
	p.X.Min, p.X.Max = lo-0.05, hi+0.05
	p.Y.Min, p.Y.Max = 0, 1
	p.Y.Tick.Marker = plot.ConstantTicks(fractionTicks())
	f.draw = func(c draw.Canvas) { withLegend(c, l, n, p.Draw) }
	return f
}

func positive(xs []float32) []float32 {
	i := 0
	for i < len(xs) && !(xs[i] > 0) {
		i++
	}
	return xs[i:]
}

// diffMetricsFigure: one panel per checked metric, a pair of bars
// (baseline grey, current coloured by verdict) per config, standard
// deviations as error bars, the threshold as a red dashed line.
func diffMetricsFigure(res *DiffResult) figure {
	const title = "Checked metrics"
	f := figure{name: PlotDiffMetrics, title: title}
	var metrics []string
	for _, p := range res.Pairs {
		for _, r := range p.Rows {
			if r.th != nil && r.Baseline != nil && r.Current != nil && !slices.Contains(metrics, r.Metric) {
				metrics = append(metrics, r.Metric)
			}
		}
	}
	if len(metrics) == 0 {
		f.w, f.h = inches(6), inches(3.5)
		np := notePlot(title, "no metric with a threshold on both sides")
		f.draw = func(c draw.Canvas) { np.Draw(c) }
		return f
	}
	cols := min(len(metrics), 3)
	rows := (len(metrics) + cols - 1) / cols
	plots := make([][]*plot.Plot, rows)
	for i := range plots {
		plots[i] = make([]*plot.Plot, cols)
	}
	l := newLegend()
	for k, m := range metrics {
		var names []string
		title, unit := shortMetric(m), MetricUnit(m)
		if unit != "" {
			title += " (" + unit + ")"
		}
		p := newPlot(title, "", unit)
		p.Title.TextStyle.Font.Size = vg.Points(11)
		x := 0
		ymin, ymax := 0.0, 0.0
		for _, pr := range res.Pairs {
			i := slices.IndexFunc(pr.Rows, func(r DiffRow) bool { return r.Metric == m && r.th != nil })
			if i < 0 || pr.Rows[i].Baseline == nil || pr.Rows[i].Current == nil {
				continue
			}
			r := pr.Rows[i]
			names = append(names, pr.Label())
			cc := verdictColor(r.Verdict)
			const off, half = 0.2, 0.17
			for _, b := range []struct {
				s   *SideStat
				pos float64
				col color.Color
			}{{r.Baseline, float64(x) - off, baseGrey}, {r.Current, float64(x) + off, cc}} {
				bc, err := plotter.NewBarChart(plotter.Values{b.s.Mean}, vg.Points(1))
				if err != nil {
					continue
				}
				bc.XMin, bc.Color, bc.LineStyle.Width = b.pos, b.col, 0
				bc.Width = 0 // set when drawing, from the panel width (see barWidth)
				p.Add(&barWidth{bc, half})
				ymin, ymax = math.Min(ymin, b.s.Mean-b.s.SD), math.Max(ymax, b.s.Mean+b.s.SD)
				if b.s.N > 1 && b.s.SD > 0 {
					eb, err := plotter.NewYErrorBars(errPoints{{b.pos, b.s.Mean, b.s.SD}})
					if err == nil {
						eb.LineStyle.Width = vg.Points(1.2)
						p.Add(eb)
					}
				}
			}
			lim := r.Baseline.Mean + float64(r.th.Sign)*r.Limit
			ymin, ymax = math.Min(ymin, lim), math.Max(ymax, lim)
			ln, err := plotter.NewLine(plotter.XYs{{X: float64(x) - 0.45, Y: lim}, {X: float64(x) + 0.45, Y: lim}})
			if err == nil {
				ln.LineStyle = draw.LineStyle{Color: regressRed, Width: vg.Points(1.5), Dashes: []vg.Length{vg.Points(4), vg.Points(2)}}
				p.Add(ln)

			}
			x++
		}
		p.NominalX(names...)
		p.X.Min, p.X.Max = -0.6, float64(x)-0.4
		pad := 0.08 * (ymax - ymin)
		if pad == 0 {
			pad = 1
		}
		p.Y.Min, p.Y.Max = ymin, ymax+pad
		if ymin < 0 {
			p.Y.Min = ymin - pad
		}
		p.Y.Tick.Marker = PlainTicks{}
		plots[k/cols][k%cols] = p
	}
	// Every colour of the bars, whether or not this comparison uses it.
	for _, e := range []struct {
		label string
		col   color.Color
	}{{"baseline", baseGrey}, {"current: within threshold", currentBlue}, {"current: regression", regressRed},
		{"current: improved", improvedGrn}, {"current: beyond threshold,", noiseAmber}} {
		if bc, err := plotter.NewBarChart(plotter.Values{1}, vg.Points(8)); err == nil {
			bc.Color, bc.LineStyle.Width = e.col, 0
			l.Add(e.label, bc)
		}
	}
	l.Add("  within seed noise")
	if th, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 0}}); err == nil {
		th.LineStyle = draw.LineStyle{Color: regressRed, Width: vg.Points(1.5), Dashes: []vg.Length{vg.Points(4), vg.Points(2)}}
		l.Add("threshold (worst allowed)", th)
	}
	if res.multiSeed {
		l.Add("error bars: ± sd over seeds")
	}
	l.Add("panel title: metric (unit)")
	f.w = inches(3.4*float64(cols) + 2.6)
	f.h = inches(math.Max(3.2*float64(rows), 3.4))
	f.draw = func(c draw.Canvas) {
		withLegend(c, l, 10, func(c draw.Canvas) {
			drawGrid(c, plots, vg.Points(14))
		})
	}
	return f
}

// barWidth draws a one-bar chart whose width is a fraction (half-width
// half, in x data units) of the panel, so bars fit however many configs
// share a panel.
type barWidth struct {
	*plotter.BarChart
	half float64
}

// Plot implements plot.Plotter.
func (b *barWidth) Plot(c draw.Canvas, p *plot.Plot) {
	tr, _ := p.Transforms(&c)
	b.Width = max(tr(b.XMin+b.half)-tr(b.XMin-b.half), vg.Points(1))
	b.BarChart.Plot(c, p)
}

// DataRange implements plot.DataRanger.
func (b *barWidth) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax, ymin, ymax = b.BarChart.DataRange()
	return xmin - b.half, xmax + b.half, ymin, ymax
}

// errPoints are error bars: x, y, ± error.
type errPoints [][3]float64

func (e errPoints) Len() int                        { return len(e) }
func (e errPoints) XY(i int) (float64, float64)     { return e[i][0], e[i][1] }
func (e errPoints) YError(i int) (float64, float64) { return e[i][2], e[i][2] }

// shortMetric shortens the producer names in a panel title.
func shortMetric(m string) string {
	return strings.NewReplacer(approxProducer, "approx", preciseProducer, "precise").Replace(m)
}

// diffHitFigure overlays the true hit ratio over time per pair: token
// weighted by arrival time from requests.csv, or, with timeseries.csv
// only, the mean of the replicas' hit ratios per sample.
func diffHitFigure(res *DiffResult, bd, cd *sideData) figure {
	const title = "True prefix-cache hit ratio over time"
	f := figure{name: PlotDiffHitRatio, title: "Hit ratio over time", w: inches(7.5), h: inches(4.2)}
	p := newPlot(title, "simulated time (s)", "hit ratio")
	l := newLegend()
	n := 0
	ymax := 0.0
	usedReplicaMean := false
	const maxPts = 60
	for i := range res.Pairs {
		pr := &res.Pairs[i]
		for _, side := range []struct {
			name string
			d    *sideData
		}{{"baseline", bd}, {"current", cd}} {
			var pts plotter.XYs
			label := pr.Label() + " " + side.name
			if tb := side.d.byTime[pr.Label()]; tb != nil {
				bins, width := tb.coarsened(maxPts)
				w := float64(width) / 1e9
				for k, b := range bins {
					if b[binPrompt] > 0 {
						pts = append(pts, plotter.XY{X: (float64(k) + 0.5) * w, Y: float64(b[binCached]) / float64(b[binPrompt])})
					}
				}
			} else if s := side.d.replica[pr.Label()]; s != nil {
				for _, b := range coarsen(s.bins, maxPts) {
					if b.b > 0 {
						pts = append(pts, plotter.XY{X: b.t / float64(b.n), Y: b.a / b.b})
					}
				}
				label += " (replica mean)"
				usedReplicaMean = true
			}
			for _, pt := range pts {
				ymax = math.Max(ymax, pt.Y)
			}
			s := draw.LineStyle{Color: palette[i%len(palette)], Width: vg.Points(1.6)}
			if side.name == "baseline" {
				s.Dashes, s.Width = dashedStyle, vg.Points(1.3)
			}
			if th := addLine(p, pts, s); th != nil {
				l.Add(label, th...)
				n++
			}
		}
	}
	if n == 0 {
		np := notePlot(title, "no time series: needs requests.csv or timeseries.csv next to summary.json")
		f.draw = func(c draw.Canvas) { np.Draw(c) }
		return f
	}
	l.Add("Σ cached ÷ Σ prompt tokens")
	l.Add("  by arrival time")
	n += 2
	if usedReplicaMean {
		l.Add("replica mean: mean of the")
		l.Add("  replicas' ratios per sample")
		n += 2
	}
	ratioAxes(p, ymax)
	f.draw = func(c draw.Canvas) { withLegend(c, l, n, p.Draw) }
	return f
}

const diffStyle = `td.regression,td.fails{color:#b00;font-weight:700}td.improved{color:#070}td.noise{color:#a60}
.banner{padding:.6em 1em;border-radius:4px;font-weight:600}.banner.bad{background:#fde2e2;color:#900}.banner.good{background:#e3f4e3;color:#060}
`

// html renders diff.html: self-contained, plots inline as SVG.
func (r *DiffResult) html(plots []renderedPlot, dpi int) []byte {
	var b bytes.Buffer
	esc := html.EscapeString
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>eppsim diff</title>\n<style>\n")
	b.WriteString(htmlStyle)
	b.WriteString(diffStyle)
	b.WriteString("</style>\n</head>\n<body>\n<h1>eppsim diff</h1>\n")
	if r.Regressions > 0 {
		b.WriteString("<p class=\"banner bad\">" + esc(r.headline()) + ": " + esc(strings.Join(r.RegressedMetrics(), "; ")) + "</p>\n")
	} else {
		b.WriteString("<p class=\"banner good\">" + esc(r.headline()) + "</p>\n")
	}
	b.WriteString("<dl>\n<dt>baseline</dt><dd><code>" + esc(r.Baseline) + "</code></dd>\n<dt>current</dt><dd><code>" +
		esc(r.Current) + "</code></dd>\n<dt>thresholds</dt><dd><code>" + esc(strings.Join(r.Thresholds, " ")) + "</code></dd>\n")
	if r.Tolerance > 0 {
		b.WriteString("<dt>tolerance</dt><dd>" + strconv.FormatFloat(r.Tolerance, 'g', -1, 64) + " (every field)</dd>\n")
	}
	b.WriteString("</dl>\n")
	for _, p := range r.Pairs {
		b.WriteString("<h2>" + esc(p.Label()) + "</h2>\n<table>\n<thead><tr><th>metric</th><th>baseline</th><th>current</th>" +
			"<th>change</th><th>threshold</th><th>verdict</th></tr></thead>\n<tbody>\n")
		for _, row := range p.Rows {
			class := string(row.Verdict)
			if row.Fails && row.Verdict != VerdictRegression {
				class += " fails"
			}
			b.WriteString("<tr><td><code>" + esc(row.Metric) + "</code></td><td>" + esc(row.baselineCell()) + "</td><td>" +
				esc(row.currentCell()) + "</td><td>" + esc(row.changeCell()) + "</td><td>" + esc(row.thresholdCell()) +
				"</td><td class=\"" + class + "\">" + esc(strings.ReplaceAll(row.verdictCell(), "**", "")) + "</td></tr>\n")
		}
		b.WriteString("</tbody>\n</table>\n")
		if len(p.Changes) > 0 {
			b.WriteString("<p>" + strconv.Itoa(len(p.Changes)) + " fields changed beyond the tolerance:</p>\n<table>\n" +
				"<thead><tr><th>run</th><th>field</th><th>baseline</th><th>current</th><th>change</th></tr></thead>\n<tbody>\n")
			for _, c := range p.Changes {
				b.WriteString("<tr><td>" + esc(c.Run) + "</td><td><code>" + esc(c.Field) + "</code></td><td>" + esc(clip(c.Baseline)) +
					"</td><td>" + esc(clip(c.Current)) + "</td><td>" + esc(c.Change) + "</td></tr>\n")
			}
			b.WriteString("</tbody>\n</table>\n")
		}
	}
	if len(r.Notes) > 0 {
		b.WriteString("<h2>Notes</h2>\n<ul>\n")
		for _, n := range r.Notes {
			b.WriteString("<li>" + esc(n) + "</li>\n")
		}
		b.WriteString("</ul>\n")
	}
	b.WriteString("<p class=\"note\">Thresholds: + means an increase beyond the threshold is a regression, - a decrease; " +
		"% thresholds are relative to the baseline. Configs with several runs show mean ± standard deviation and fail only " +
		"when the change also exceeds the noise band: 2·sd(c_i − b_i)/√n over the per-seed differences when both sides ran " +
		"the same seeds, else 2·√(sd_b²/n_b + sd_c²/n_c).</p>\n<h2>Plots</h2>\n")
	for _, p := range plots {
		writeFigure(&b, p, diffPlotTitles[p.name], dpi)
	}
	b.WriteString("</body>\n</html>\n")
	return b.Bytes()
}
