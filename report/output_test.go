package report

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/sim"
)

// fixture is a two-config run set: "a" names its replicas at StartRun (rows
// stream straight to the CSV files), "b" only at EndRun (rows are spooled).
type fixture struct {
	name      string
	startWith []string // replica names given to StartRun
	endWith   []string // replica names given to EndRun
	records   []sim.Record
	samples   []sim.Sample
}

var fixtures = []fixture{
	{
		name: "a", startWith: []string{"r0", "r1"}, endWith: []string{"r0", "r1"},
		records: []sim.Record{
			{ID: 1, Session: "s1", Arrival: 1.5e9, Replica: 0, PromptTokens: 100, OutputTokens: 10, CachedTokens: 64,
				OracleCachedTokens: 80, RoutedCachedTokens: 64, InfiniteCachedTokens: 96, Predicted: 0.5, HasPredicted: true, Tied: true, TTFT: 12.5e6, E2E: 100e6, Queue: 2e6,
				Completion: 1.6e9, Outcome: sim.Completed},
			{ID: 2, Session: `s,"2"`, Turn: 1, Arrival: 2e9, Replica: 1, PromptTokens: 200, OutputTokens: 1,
				OracleCachedTokens: 128, InfiniteCachedTokens: 192, Predicted: 0.25, HasPredicted: true, PredictedPrecise: 0.125, HasPrecise: true,
				TTFT: 3.25e6, E2E: 3.25e6, Completion: 2.00325e9, Preemptions: 1, Outcome: sim.Completed},
			{ID: 3, Arrival: 2.5e9, Replica: -1, PromptTokens: 50, OutputTokens: 5, Outcome: sim.Rejected,
				Reason: "no endpoints, all filtered"},
		},
		samples: []sim.Sample{
			{Time: 0, Replica: 0}, {Time: 0, Replica: 1},
			{Time: 1e9, Replica: 0, Waiting: 1, Running: 2, KVUsage: 0.125, PrefixQueries: 100, PrefixHits: 64},
			{Time: 1e9, Replica: 1},
			{Time: 2e9, Replica: 0, Running: 1, KVUsage: 0.0625, PrefixQueries: 100, PrefixHits: 64},
			{Time: 2e9, Replica: 1, Running: 3, KVUsage: 0.5, PrefixQueries: 200, PrefixHits: 50},
		},
	},
	{
		name: "b", endWith: []string{"x0", "x1"},
		records: []sim.Record{
			{ID: 1, Session: "s1", Arrival: 0.25e9, Replica: 1, PromptTokens: 30, OutputTokens: 4, CachedTokens: 16,
				OracleCachedTokens: 16, RoutedCachedTokens: 16, InfiniteCachedTokens: 16, TTFT: 1e6, E2E: 5e6, Queue: 0.5e6, Completion: 0.255e9, Outcome: sim.Completed, Warmup: true},
			// 16 tokens computed while it waited: routed 16, true 32.
			{ID: 2, Session: "s1", Turn: 1, Arrival: 0.5e9, Replica: 2, PromptTokens: 40, OutputTokens: 2, CachedTokens: 32,
				OracleCachedTokens: 32, RoutedCachedTokens: 16, InfiniteCachedTokens: 32, TTFT: 2e6, E2E: 4e6, Completion: 0.504e9, Outcome: sim.Completed},
		},
		samples: []sim.Sample{
			{Time: 0, Replica: 0},
			{Time: 1.5e9, Replica: 0, Running: 1, KVUsage: 0.25, PrefixQueries: 40, PrefixHits: 10},
		},
	},
}

var testMeta = Meta{Version: "0.1.0-test", Trace: "builtin:chat", Seed: 7, Fleet: "2 × test-preset", Command: "eppsim run --out x"}

// summaryOf aggregates a fixture's records as the lead's run does.
func summaryOf(f fixture) *Summary {
	a := NewAggregator()
	for i := range f.records {
		a.Add(&f.records[i])
	}
	res := &sim.Result{}
	for _, n := range f.endWith {
		res.Replicas = append(res.Replicas, sim.ReplicaResult{Name: n})
	}
	return a.Summary(res)
}

// writeFixtures runs every fixture through a new Output in dir.
func writeFixtures(t *testing.T, dir string, dpi int) *Output {
	t.Helper()
	o, err := NewOutput(dir, testMeta)
	if err != nil {
		t.Fatal(err)
	}
	o.DPI = dpi
	o.AddNote("run-set note")
	for _, f := range fixtures {
		o.StartRun(f.name, f.startWith...)
		if f.name == "b" {
			o.AddNote("plugin x (some-type): not simulated")
		}
		for i := range f.records {
			o.AddRecord(&f.records[i])
		}
		for i := range f.samples {
			o.AddSample(&f.samples[i])
		}
		o.EndRun(summaryOf(f), f.endWith)
	}
	return o
}

var outputFiles = []string{
	"hit_ladder.png", "hit_ladder.svg", "hit_ratio_over_time.png", "hit_ratio_over_time.svg", "metrics.md",
	"predicted_vs_true.png", "predicted_vs_true.svg", "replica_load.png", "replica_load.svg", "report.html", "report.md",
	"requests.csv", "summary.json", "timeseries.csv", "ttft_cdf.png", "ttft_cdf.svg",
}

func listDir(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestOutputWritesEveryFile(t *testing.T) {
	dir := t.TempDir()
	o := writeFixtures(t, dir, 40)
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if got := listDir(t, dir); !slices.Equal(got, outputFiles) {
		t.Fatalf("files = %v\nwant %v", got, outputFiles)
	}

	t.Run("requests.csv", func(t *testing.T) {
		want := RequestsHeader + "\n" +
			"a,1,s1,0,1.500000,r0,100,10,64,80,64,96,0.500000,,12.500,100.000,2.000,0,true,completed,,false\n" +
			`a,2,"s,""2""",1,2.000000,r1,200,1,0,128,0,192,0.250000,0.125000,3.250,3.250,0.000,1,false,completed,,false` + "\n" +
			`a,3,,0,2.500000,,50,5,0,0,0,0,,,,,,0,false,rejected,"no endpoints, all filtered",false` + "\n" +
			"b,1,s1,0,0.250000,x1,30,4,16,16,16,16,,,1.000,5.000,0.500,0,false,completed,,true\n" +
			"b,2,s1,1,0.500000,replica-2,40,2,32,32,16,32,,,2.000,4.000,0.000,0,false,completed,,false\n"
		if got := readFile(t, filepath.Join(dir, RequestsFile)); got != want {
			t.Fatalf("requests.csv:\n%s\nwant:\n%s", got, want)
		}
	})

	t.Run("timeseries.csv", func(t *testing.T) {
		// hit_ratio is Δhits/Δqueries since the replica's previous sample:
		// r0 at 1 s: 64/100; at 2 s nothing new; r1 at 2 s: 50/200;
		// b's x0 at 1.5 s: 10/40.
		want := TimeseriesHeader + "\n" +
			"a,0.000000,r0,0,0,0.000000,\n" +
			"a,0.000000,r1,0,0,0.000000,\n" +
			"a,1.000000,r0,1,2,0.125000,0.640000\n" +
			"a,1.000000,r1,0,0,0.000000,\n" +
			"a,2.000000,r0,0,1,0.062500,\n" +
			"a,2.000000,r1,0,3,0.500000,0.250000\n" +
			"b,0.000000,x0,0,0,0.000000,\n" +
			"b,1.500000,x0,0,1,0.250000,0.250000\n"
		if got := readFile(t, filepath.Join(dir, TimeseriesFile)); got != want {
			t.Fatalf("timeseries.csv:\n%s\nwant:\n%s", got, want)
		}
	})

	t.Run("summary.json", func(t *testing.T) {
		raw := readFile(t, filepath.Join(dir, SummaryFile))
		if !strings.HasPrefix(raw, "{\n  \"version\": \"0.1.0-test\",\n  \"trace\": \"builtin:chat\",\n  \"seed\": 7,\n") {
			t.Fatalf("summary.json header:\n%.200s", raw)
		}
		var doc struct {
			Version, Trace, Fleet, Command string
			Seed                           uint64
			Runs                           map[string]*Summary
			Notes                          []string
			NotSimulated                   map[string][]string `json:"not_simulated"`
		}
		if err := json.Unmarshal([]byte(raw), &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Version != testMeta.Version || doc.Seed != 7 || doc.Fleet != testMeta.Fleet || doc.Command != testMeta.Command {
			t.Fatalf("meta %+v", doc)
		}
		for _, f := range fixtures {
			// Compared as JSON: an undefined metric is NaN in Go, and NaN
			// is not equal to itself.
			got, err := json.Marshal(doc.Runs[f.name])
			if err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(summaryOf(f))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("run %s round-trip:\n got %s\nwant %s", f.name, got, want)
			}
		}
		if !slices.Equal(doc.Notes, []string{"run-set note"}) || !slices.Equal(doc.NotSimulated["b"], []string{"plugin x (some-type): not simulated"}) {
			t.Fatalf("notes %v, not simulated %v", doc.Notes, doc.NotSimulated)
		}
	})

	t.Run("plots", func(t *testing.T) {
		for _, name := range PlotNames {
			svg := readFile(t, filepath.Join(dir, name+".svg"))
			if !strings.HasPrefix(svg, "<?xml") && !strings.HasPrefix(svg, "<svg") || !strings.Contains(svg, "</svg>") {
				t.Errorf("%s.svg is not an SVG document (%d bytes)", name, len(svg))
			}
			png := readFile(t, filepath.Join(dir, name+".png"))
			if !strings.HasPrefix(png, "\x89PNG\r\n\x1a\n") || len(png) < 1000 {
				t.Errorf("%s.png is not a PNG image (%d bytes)", name, len(png))
			}
		}
	})

	t.Run("report.md", func(t *testing.T) {
		md := readFile(t, filepath.Join(dir, MarkdownFile))
		for _, want := range []string{
			"- trace: `builtin:chat`\n", "- fleet: 2 × test-preset\n", "- seed: 7\n", "- eppsim version: 0.1.0-test\n",
			"## What this run shows\n\n- b: TTFT p50 1.6× lower than a (2.0 vs 3.2 ms) at 3.8× higher true hit ratio (0.800 vs 0.213).\n",
			"[metrics.md](metrics.md)",
			"| metric | a | b |\n|---|---:|---:|\n",
			"| **requests** | | |\n| completed / total | 2 / 3 | 2 / 2 |\n",
			"| rejected | 1 | 0 |\n",
			// a: TTFT 12.5 and 3.25 ms; nearest-rank p50 = 3.25.
			"| TTFT p50 | 3.2 | 2.0 |\n",
			"| TTFT p99 | 12.5 | 2.0 |\n",
			// a: Σ prompt 300; infinite 96 + 192, oracle 80 + 128, routed
			// and true 64. b (after warm-up): 40 prompt tokens, routed 16,
			// true 32.
			"| **hit-rate ladder (share of prompt tokens)** | | |\n",
			"| infinite-cache bound | 0.960 | 0.800 |\n",
			"| oracle: best replica at routing | 0.693 | 0.800 |\n",
			"| routed: chosen replica at routing | 0.213 | 0.400 |\n",
			"| true: reused (routed + queue effect) | 0.213 | 0.800 |\n",
			"| regret: oracle − routed (M tokens) | 0.000144 | 0.000016 |\n",
			"| queue effect: true − routed (M tokens) | 0 | 0.000016 |\n",
			// a's predictions: 0.5 vs 0.64 and 0.25 vs 0 → MAE 0.195, bias
			// 0.375 − 0.32; Σ predicted 50 + 50 tokens of which 50 (the
			// second) not cached; Σ true 64 of which 14 not predicted.
			"| bias (mean predicted − true fraction) | +0.055 | – |\n",
			"| MAE (per request) | 0.195 | – |\n",
			"| over-predicted (share of predicted tokens) | 0.500 | – |\n",
			"| under-predicted (share of true tokens) | 0.219 | – |\n",
			"| **prediction, precise producer** | | |\n| bias (mean predicted − true fraction) | +0.125 | – |\n",
			// b's only measured request went to replica index 2, outside its
			// two-replica fleet: x0 and x1 are idle.
			"| idle replicas | 0 of 2 | 2 of 3 |\n",
			"| busiest replica's share | 50.0% | 100.0% |\n",
			"## Prediction error by cause\n",
			"| cause | a (approx) over | a (approx) under | a (precise) over | a (precise) under |\n",
			// The precise producer's one request reused nothing (Σ T = 0):
			// its under-predicted share is undefined.
			"| share of predicted (over) / true (under) tokens | 0.500 | 0.219 | 1.000 | n/a |\n",
			"| per-request rate | a (approx) | a (precise) |\n|---|---:|---:|\n",
			"| phantom hit rate (predicted &gt; 0, nothing reused) | 0.500 | 1.000 |\n",
			"- b: 2 of 3 replicas received no requests (x0, x1); the busiest, replica-2, received 100.0% of them (3.00× the mean).\n",
			"| replica (requests) | a | b |\n|---|---:|---:|\n| r0 | 1 | – |\n",
			"| x0 | – | 0 |\n",
			"![Hit-rate ladder per config](hit_ladder.png)",
			"- run-set note\n", "- b: plugin x (some-type): not simulated\n",
			"![TTFT CDF per config](ttft_cdf.png)",
		} {
			if !strings.Contains(md, want) {
				t.Errorf("report.md lacks %q", want)
			}
		}
	})

	t.Run("report.html", func(t *testing.T) {
		h := readFile(t, filepath.Join(dir, HTMLFile))
		for _, want := range []string{
			"<table>", "<thead><tr><th>metric</th><th>a</th><th>b</th></tr></thead>",
			"<tr class=\"group\"><td colspan=\"3\">requests</td></tr>",
			"<tr><td>completed / total</td><td>2 / 3</td><td>2 / 2</td></tr>",
			"<h2 id=\"what-this-run-shows\">What this run shows</h2>",
			"<a href=\"metrics.md\">",
			"<li>b: plugin x (some-type): not simulated</li>",
		} {
			if !strings.Contains(h, want) {
				t.Errorf("report.html lacks %q", want)
			}
		}
		// Every plot is an image inlined as a PNG data: URL, displayed at
		// its size in CSS pixels (PNG pixels × 96 / DPI).
		imgs := regexp.MustCompile(`<img alt="[^"]*" width="(\d+)" height="(\d+)" src="data:image/png;base64,([A-Za-z0-9+/=]+)">`).FindAllStringSubmatch(h, -1)
		if len(imgs) != len(PlotNames) || strings.Count(h, "<img") != len(PlotNames) {
			t.Fatalf("report.html has %d inline PNG images (%d <img>), want %d", len(imgs), strings.Count(h, "<img"), len(PlotNames))
		}
		for i, m := range imgs {
			data, err := base64.StdEncoding.DecodeString(m[3])
			if err != nil {
				t.Fatalf("image %d: %v", i, err)
			}
			cfg, err := png.DecodeConfig(bytes.NewReader(data))
			if err != nil {
				t.Fatalf("image %d: %v", i, err)
			}
			if w, h := strconv.Itoa(cfg.Width*96/40), strconv.Itoa(cfg.Height*96/40); m[1] != w || m[2] != h {
				t.Errorf("image %d is %sx%s CSS px, want %sx%s", i, m[1], m[2], w, h)
			}
			if want := readFile(t, filepath.Join(dir, PlotNames[i]+".png")); string(data) != want {
				t.Errorf("image %d is not %s.png", i, PlotNames[i])
			}
		}
		if i := strings.Index(h, "http"); i >= 0 {
			t.Errorf("report.html references an external resource: %q", h[max(i-40, 0):min(i+40, len(h))])
		}
		if strings.Count(h, " src=") != len(PlotNames) || strings.Contains(h, "<link") || strings.Contains(h, "<script") {
			t.Error("report.html loads a resource")
		}
	})
}

func TestOutputTimeSeriesState(t *testing.T) {
	o := writeFixtures(t, t.TempDir(), 40)
	defer o.Abort()
	a := o.runs[0]
	// Per replica: waiting requests and KV usage per sample.
	wantLoad := []seriesBin{{t: 0, n: 1}, {t: 1, a: 1, b: 0.125, n: 1}, {t: 2, a: 0, b: 0.0625, n: 1}}
	if len(a.load) != 2 || !slices.Equal(a.load[0].bins, wantLoad) {
		t.Errorf("replica 0 load %+v, want %+v", a.load, wantLoad)
	}
	if b := o.runs[1].load; len(b) != 1 || !slices.Equal(b[0].bins, []seriesBin{{t: 0, n: 1}, {t: 1.5, b: 0.25, n: 1}}) {
		t.Errorf("run b load %+v", b)
	}
	// Arrival bins (100 ms): a's completed requests at 1.5 s and 2 s.
	if b := a.arrival.bins; len(b) != 21 || b[15] != (binVals{binCached: 64, binOracle: 80, binPrompt: 100, binRouted: 64, binInfinite: 96}) ||
		b[20] != (binVals{binOracle: 128, binPrompt: 200, binInfinite: 192}) {
		t.Errorf("arrival bins %v", b)
	}
	// TTFT of completed, non-warm-up requests only.
	if !slices.Equal(a.ttft, []float32{12.5, 3.25}) || !slices.Equal(o.runs[1].ttft, []float32{2}) {
		t.Errorf("ttft a %v b %v", a.ttft, o.runs[1].ttft)
	}
	if a.approx.seen != 2 || a.approx.calib[5].n != 1 || a.approx.calib[2].n != 1 || a.approx.calib[2].sumTrue != 0 ||
		a.approx.calib[5].sumTrue != 0.64 || a.precise.seen != 1 {
		t.Errorf("prediction state approx %+v precise seen %d", a.approx.calib, a.precise.seen)
	}
}

func TestOutputDeterministic(t *testing.T) {
	d1, d2 := t.TempDir(), t.TempDir()
	for _, d := range []string{d1, d2} {
		// A low PNG resolution keeps the test fast under -race.
		if err := writeFixtures(t, d, 40).Close(); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range outputFiles {
		if a, b := readFile(t, filepath.Join(d1, name)), readFile(t, filepath.Join(d2, name)); a != b {
			t.Errorf("%s differs between identical runs", name)
		}
	}
}

// TestOutputConcurrentRuns: runs recorded at the same time from their own
// goroutines through RunWriters — the later ones ending first, so that
// their spooled rows wait for the earlier — give exactly the files of the
// same runs recorded one after the other.
func TestOutputConcurrentRuns(t *testing.T) {
	runs := append(slices.Clone(fixtures), fixtures[0])
	runs[2].name = "c"
	record := func(w *RunWriter, f fixture) {
		for i := range f.records {
			w.AddRecord(&f.records[i])
		}
		for i := range f.samples {
			w.AddSample(&f.samples[i])
		}
	}
	seq, conc := t.TempDir(), t.TempDir()
	o, err := NewOutput(seq, testMeta)
	if err != nil {
		t.Fatal(err)
	}
	o.DPI = 20
	for _, f := range runs {
		w := o.BeginRun(f.name, f.startWith...)
		record(w, f)
		w.End(summaryOf(f), f.endWith)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}

	o, err = NewOutput(conc, testMeta)
	if err != nil {
		t.Fatal(err)
	}
	o.DPI = 20
	ws := make([]*RunWriter, len(runs))
	for i, f := range runs {
		ws[i] = o.BeginRun(f.name, f.startWith...)
	}
	var ended [3]chan struct{}
	for i := range runs {
		ended[i] = make(chan struct{})
	}
	for i, f := range runs {
		go func() {
			record(ws[i], f)
			if i+1 < len(runs) {
				<-ended[i+1] // end in reverse order
			}
			ws[i].End(summaryOf(f), f.endWith)
			close(ended[i])
		}()
	}
	<-ended[0]
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range outputFiles {
		if a, b := readFile(t, filepath.Join(seq, name)), readFile(t, filepath.Join(conc, name)); a != b {
			t.Errorf("%s differs between concurrent and sequential recording", name)
		}
	}
	if got := listDir(t, conc); !slices.Equal(got, outputFiles) {
		t.Errorf("files %v, want %v (no spool left behind)", got, outputFiles)
	}
}

func TestOutputTempFilesCleanedUp(t *testing.T) {
	t.Run("abort", func(t *testing.T) {
		dir := t.TempDir()
		o, err := NewOutput(dir, testMeta)
		if err != nil {
			t.Fatal(err)
		}
		o.StartRun("b") // spooled
		o.AddRecord(&fixtures[1].records[0])
		if n := len(listDir(t, dir)); n != 4 {
			t.Fatalf("%d temporary files while running, want 4 (2 CSV + 2 spools)", n)
		}
		o.Abort()
		o.Abort()
		if got := listDir(t, dir); len(got) != 0 {
			t.Fatalf("Abort left %v", got)
		}
		if err := o.Close(); err == nil {
			t.Fatal("Close after Abort succeeded")
		}
	})
	t.Run("failed rename", func(t *testing.T) {
		dir := t.TempDir()
		// report.html is a non-empty directory: its rename must fail.
		if err := os.MkdirAll(filepath.Join(dir, HTMLFile, "x"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "keep.txt"), []byte("mine"), 0o644); err != nil {
			t.Fatal(err)
		}
		err := writeFixtures(t, dir, 40).Close()
		if err == nil || !strings.Contains(err.Error(), HTMLFile) {
			t.Fatalf("Close error %v, want one naming %s", err, HTMLFile)
		}
		for _, n := range listDir(t, dir) {
			if strings.HasSuffix(n, ".tmp") {
				t.Errorf("temporary file %s left behind", n)
			}
		}
		if readFile(t, filepath.Join(dir, "keep.txt")) != "mine" {
			t.Error("unrelated file changed")
		}
	})
	t.Run("misuse", func(t *testing.T) {
		dir := t.TempDir()
		o, err := NewOutput(dir, testMeta)
		if err != nil {
			t.Fatal(err)
		}
		o.AddRecord(&fixtures[0].records[0])
		o.StartRun("a")
		if err := o.Close(); err == nil || !strings.Contains(err.Error(), "AddRecord outside a run") {
			t.Fatalf("Close error %v", err)
		}
		if got := listDir(t, dir); len(got) != 0 {
			t.Fatalf("failed Close left %v", got)
		}
	})
	t.Run("unended run", func(t *testing.T) {
		dir := t.TempDir()
		o, err := NewOutput(dir, testMeta)
		if err != nil {
			t.Fatal(err)
		}
		o.StartRun("a", "r0")
		if err := o.Close(); err == nil || !strings.Contains(err.Error(), `run "a" was not ended`) {
			t.Fatalf("Close error %v", err)
		}
		if got := listDir(t, dir); len(got) != 0 {
			t.Fatalf("failed Close left %v", got)
		}
	})
}

func TestOutputEmptyRunSet(t *testing.T) {
	// No runs, no records: every file still exists and plots say why
	// they are empty.
	dir := t.TempDir()
	o, err := NewOutput(filepath.Join(dir, "new", "sub"), testMeta)
	if err != nil {
		t.Fatal(err)
	}
	o.DPI = 40
	o.StartRun("only")
	o.EndRun(nil, nil)
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if got := listDir(t, filepath.Join(dir, "new", "sub")); !slices.Equal(got, outputFiles) {
		t.Fatalf("files = %v", got)
	}
	if svg := readFile(t, filepath.Join(dir, "new", "sub", PlotTTFTCDF+".svg")); !strings.Contains(svg, "no completed requests") {
		t.Error("empty TTFT plot lacks its note")
	}
}

func TestOutputDuplicateRunNames(t *testing.T) {
	o, err := NewOutput(t.TempDir(), testMeta)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Abort()
	for range 3 {
		o.StartRun("x", "r0")
		o.EndRun(nil, nil)
	}
	var got []string
	for _, r := range o.runs {
		got = append(got, r.name)
	}
	if want := []string{"x", "x (2)", "x (3)"}; !slices.Equal(got, want) {
		t.Fatalf("names %v, want %v", got, want)
	}
}

func TestReservoirBoundedAndDeterministic(t *testing.T) {
	sample := func() *runData {
		o, err := NewOutput(t.TempDir(), testMeta)
		if err != nil {
			t.Fatal(err)
		}
		defer o.Abort()
		o.StartRun("a", "r0")
		for i := range 12000 {
			rec := sim.Record{ID: int64(i), Replica: 0, PromptTokens: 1000, CachedTokens: i % 1000, HasPredicted: true,
				Predicted: float64(i) / 12000, TTFT: int64(i+1) * 1e3, Outcome: sim.Completed}
			o.AddRecord(&rec)
		}
		o.EndRun(nil, nil)
		return o.runs[0]
	}
	r1, r2 := sample(), sample()
	if len(r1.approx.pairs) != maxScatter || r1.approx.seen != 12000 {
		t.Fatalf("kept %d pairs of %d", len(r1.approx.pairs), r1.approx.seen)
	}
	if !slices.Equal(r1.approx.pairs, r2.approx.pairs) {
		t.Fatal("reservoir differs between identical runs")
	}
	// Calibration covers every record, not just the sample: 1,200 per bin.
	for k, b := range r1.approx.calib {
		if b.n != 1200 {
			t.Errorf("bucket %d has %d records, want 1200", k, b.n)
		}
	}
	// The sample is spread over the whole run, not its first 5,000
	// records: about 7/12 of it comes from records 5,000 and later.
	late := 0
	for _, p := range r1.approx.pairs {
		if p.pred*12000 >= 5000 {
			late++
		}
	}
	if late < 2500 || late > 3300 {
		t.Fatalf("%d of %d sampled pairs come from records ≥ 5000, want about 2917", late, maxScatter)
	}
}

func BenchmarkAddRecord(b *testing.B) {
	for _, spooled := range []bool{false, true} {
		name := "direct"
		if spooled {
			name = "spooled"
		}
		b.Run(name, func(b *testing.B) {
			o, err := NewOutput(b.TempDir(), testMeta)
			if err != nil {
				b.Fatal(err)
			}
			defer o.Abort()
			if spooled {
				o.StartRun("a")
			} else {
				o.StartRun("a", "default/vllm-0", "default/vllm-1")
			}
			rec := fixtures[0].records[0]
			b.ReportAllocs()
			for i := range b.N {
				rec.ID = int64(i)
				o.AddRecord(&rec)
			}
			o.EndRun(nil, nil)
		})
	}
}

// TestOutputBeginRunAfterClose: a run begun after Close records nothing and
// leaves no file behind.
func TestOutputBeginRunAfterClose(t *testing.T) {
	dir := t.TempDir()
	o := writeFixtures(t, dir, 20)
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	before := listDir(t, dir)
	w := o.BeginRun("late") // no replica names: its rows would be spooled
	w.AddRecord(&fixtures[0].records[0])
	w.AddSample(&fixtures[0].samples[0])
	w.End(summaryOf(fixtures[0]), nil)
	if got := listDir(t, dir); !slices.Equal(got, before) {
		t.Fatalf("files %v after a late run, want %v", got, before)
	}
	if o.err == nil {
		t.Fatal("no error recorded for BeginRun after Close")
	}
}

// TestReplicaHeatmapScales: the per-replica plot is a replica × time
// heatmap per config whose rows grow with the fleet, so it stays
// readable at 64 replicas (one row of panels per config; at most
// maxReplicaLabels names on the axis).
func TestReplicaHeatmapScales(t *testing.T) {
	for _, replicas := range []int{16, 64} {
		o, err := NewOutput(t.TempDir(), testMeta)
		if err != nil {
			t.Fatal(err)
		}
		o.DPI = 20
		var names []string
		for i := range replicas {
			names = append(names, "default/vllm-"+strconv.Itoa(i))
		}
		for _, cfg := range []string{"a", "b", "c"} {
			o.StartRun(cfg, names...)
			for k := range 50 {
				for i := range replicas {
					// Replica i is idle in config b when i is even.
					busy := cfg != "b" || i%2 == 1
					s := sim.Sample{Time: int64(k) * 1e9, Replica: i}
					if busy {
						s.Waiting, s.Running, s.KVUsage = k%5, 2, float64(i%10)/10
					}
					o.AddSample(&s)
				}
			}
			o.EndRun(&Summary{}, names)
		}
		f := o.loadFigure()
		// 0.4 + 0.9 in of margins and colour bars, then per config 1.6 in
		// plus 0.04 in per replica.
		if want := inches(1.3 + 3*(1.6+0.04*float64(replicas))); f.w != inches(11) || math.Abs(float64(f.h-want)) > 1e-9 {
			t.Fatalf("%d replicas: figure %v × %v, want 11in × %v", replicas, f.w, f.h, want)
		}
		kv, q, ok := o.runs[1].grids()
		if !ok || len(kv.z) != replicas || kv.z[0][10] != 0 || kv.z[1][10] != 10 || q.z[1][12] != 2 || q.max != 4 {
			t.Fatalf("%d replicas: grids %v", replicas, ok)
		}
		if ts := replicaTicks(names, replicas); len(ts) != replicas || ts[0].Label != "vllm-0" || (replicas == 64 && (ts[1].Label != "" || ts[4].Label != "vllm-4")) {
			t.Fatalf("%d replicas: ticks %v", replicas, ts[:5])
		}
		if _, err := render(f, 20); err != nil {
			t.Fatal(err)
		}
		o.Abort()
	}
}

// TestLadderAndHitRatioPlotLabels: the ladder chart has its four rungs in
// the legend and each bar's percentage; the hit ratio over time has one
// "CONFIG · MEASURE" line per config and measure — a config named
// "oracle" gives "oracle · best replica", never "oracle oracle".
func TestLadderAndHitRatioPlotLabels(t *testing.T) {
	dir := t.TempDir()
	o, err := NewOutput(dir, testMeta)
	if err != nil {
		t.Fatal(err)
	}
	o.DPI = 20
	for _, name := range []string{"default", "oracle"} {
		o.StartRun(name, "r0", "r1")
		for i := range fixtures[0].records {
			o.AddRecord(&fixtures[0].records[i])
		}
		o.EndRun(summaryOf(fixtures[0]), []string{"r0", "r1"})
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	ladder := readFile(t, filepath.Join(dir, PlotHitLadder+".svg"))
	// Fixture a: infinite 288/300, oracle 208/300, routed and true 64/300.
	for _, want := range []string{">infinite cache (trace bound)<", ">oracle: best replica at routing<", ">routed: chosen replica at routing<",
		">true: reused at first step<", ">96.0<", ">69.3<", ">21.3<", ">default<", ">oracle<"} {
		if !strings.Contains(ladder, want) {
			t.Errorf("%s.svg lacks %q", PlotHitLadder, want)
		}
	}
	hit := readFile(t, filepath.Join(dir, PlotHitRatio+".svg"))
	for _, want := range []string{">default · true<", ">default · routed<", ">default · best replica<", ">oracle · true<",
		">oracle · routed<", ">oracle · best replica<", ">infinite cache<"} {
		if !strings.Contains(hit, want) {
			t.Errorf("%s.svg lacks %q", PlotHitRatio, want)
		}
	}
	// Identical infinite-cache lines are drawn once.
	if strings.Contains(hit, "oracle oracle") || strings.Count(hit, ">infinite cache") != 1 {
		t.Errorf("%s.svg: legend has 'oracle oracle' or a repeated infinite-cache line", PlotHitRatio)
	}
}
