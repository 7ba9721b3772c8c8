package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/replica"
)

// testSummary is a hand-made run summary with a full config.
func testSummary(seed uint64, ttftP99 float64) *Summary {
	s := &Summary{}
	s.Requests.Total, s.Requests.Complete = 100, 100
	s.Latency.TTFT = Dist{Mean: 50, P50: 40, P90: 80, P95: 90, P99: Num(ttftP99), Max: Num(2 * ttftP99)}
	s.Latency.E2E = Dist{Mean: 500, P50: 400, P90: 800, P95: 900, P99: 1000, Max: 1200}
	s.Throughput.RequestsPerS = 10
	s.Cache.TrueHitRatio, s.Cache.OracleHitRatio = 0.5, 0.6
	s.Cache.PerReplica = map[string]float64{"r0": 0.4, "r1": 0.6}
	s.Prediction = map[string]*Prediction{approxProducer: {Requests: 100, MAE: 0.1}}
	s.Sim.WallSeconds, s.Sim.RequestsPerWallS = float64(seed)*0.37, 1234/float64(seed+1)
	s.Config = &RunConfig{
		Version: "0.1.0-test", Seed: seed,
		Workload:    WorkloadConfig{Trace: "builtin:chat", Format: "auto", Mode: "closed", MaxRequests: 100, Injected: 100},
		Environment: map[string]any{"kv_event_lag": "5ms"},
		Fleet:       []ReplicaInfo{{Name: "r0", Preset: "p"}, {Name: "r1", Preset: "p"}},
		EPP:         &EPPInfo{ProfileHandler: "single-profile-handler", Profiles: []EPPProfile{{Name: "default"}}},
	}
	return s
}

// clone deep-copies a summary through JSON.
func clone(t *testing.T, s *Summary) *Summary {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var c Summary
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return &c
}

// writeDoc writes runs as a summary.json document into a new directory
// and returns the directory.
func writeDoc(t *testing.T, runs map[string]*Summary) string {
	t.Helper()
	dir := t.TempDir()
	b, err := json.MarshalIndent(summaryDoc{Version: "0.1.0-test", Trace: "builtin:chat", Seed: 1, Fleet: "2 × p", Runs: runs}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, SummaryFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func load(t *testing.T, path string) *RunSet {
	t.Helper()
	rs, err := LoadRunSet(path)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func defaultThresholds(t *testing.T, extra ...string) []Threshold {
	t.Helper()
	d, err := ParseThresholds(DefaultThresholds)
	if err != nil {
		t.Fatal(err)
	}
	x, err := ParseThresholds(extra)
	if err != nil {
		t.Fatal(err)
	}
	return MergeThresholds(d, x)
}

func diffDirs(t *testing.T, base, cur string, opts DiffOptions) (*DiffResult, error) {
	t.Helper()
	if opts.Thresholds == nil {
		opts.Thresholds = defaultThresholds(t)
	}
	return Diff(load(t, base), load(t, cur), opts)
}

func row(t *testing.T, res *DiffResult, pair int, metric string) DiffRow {
	t.Helper()
	for _, r := range res.Pairs[pair].Rows {
		if r.Metric == metric {
			return r
		}
	}
	t.Fatalf("pair %d has no row %s", pair, metric)
	return DiffRow{}
}

func TestDiffIdenticalIsClean(t *testing.T) {
	runs := map[string]*Summary{"default": testSummary(1, 100), "round-robin": testSummary(1, 120)}
	a := writeDoc(t, runs)
	// The same runs again, with different wall-clock fields.
	runs2 := map[string]*Summary{"default": clone(t, runs["default"]), "round-robin": clone(t, runs["round-robin"])}
	runs2["default"].Sim.WallSeconds = 99
	b := writeDoc(t, runs2)
	res, err := diffDirs(t, a, b, DiffOptions{Tolerance: 1e-9})
	if err != nil {
		t.Fatal(err)
	}
	if res.Regressions != 0 || res.Verdict != "ok" || len(res.Pairs) != 2 {
		t.Fatalf("identical summaries: %d regressions, verdict %s, %d pairs", res.Regressions, res.Verdict, len(res.Pairs))
	}
	if res.Pairs[0].Baseline != "default" || res.Pairs[1].Baseline != "round-robin" {
		t.Fatalf("pairs %s, %s", res.Pairs[0].Baseline, res.Pairs[1].Baseline)
	}
	for _, p := range res.Pairs {
		for _, r := range p.Rows {
			if r.Verdict != VerdictOK && r.Verdict != VerdictInfo {
				t.Errorf("%s %s: verdict %s", p.Baseline, r.Metric, r.Verdict)
			}
		}
	}
	md := string(res.Markdown())
	if !strings.Contains(md, "no change") || strings.Contains(md, "REGRESSION") {
		t.Fatalf("markdown:\n%s", md)
	}
}

func TestDiffDoctoredTTFTRegresses(t *testing.T) {
	base := testSummary(1, 100)
	cur := clone(t, base)
	cur.Latency.TTFT.P99 *= 1.5
	cur.Cache.TrueHitRatio += 0.03 // an improvement beyond -0.02
	res, err := diffDirs(t, writeDoc(t, map[string]*Summary{"default": base}), writeDoc(t, map[string]*Summary{"default": cur}), DiffOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Regressions != 1 || res.Verdict != "regression" {
		t.Fatalf("regressions %d, verdict %s", res.Regressions, res.Verdict)
	}
	r := row(t, res, 0, "latency_ms.ttft.p99")
	if r.Verdict != VerdictRegression || r.Change != 50 || r.RelChange == nil || *r.RelChange != 0.5 || r.Limit != 5 {
		t.Fatalf("ttft row %+v", r)
	}
	if v := row(t, res, 0, "cache.true_hit_ratio").Verdict; v != VerdictImproved {
		t.Fatalf("hit ratio verdict %s, want improved", v)
	}
	md := string(res.Markdown())
	for _, want := range []string{"## eppsim diff: REGRESSION", "| `latency_ms.ttft.p99` | 100 | 150 | +50 (+50.0%) | +5% | **REGRESSION** |", "1 metric beyond its threshold"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if got := res.RegressedMetrics(); !slices.Equal(got, []string{"default: latency_ms.ttft.p99"}) {
		t.Fatalf("RegressedMetrics %v", got)
	}
	// Within a 60% threshold it passes; the absolute threshold form too.
	res, err = diffDirs(t, writeDoc(t, map[string]*Summary{"default": base}), writeDoc(t, map[string]*Summary{"default": cur}),
		DiffOptions{Thresholds: defaultThresholds(t, "latency_ms.ttft.p99:+60%")})
	if err != nil || res.Regressions != 0 {
		t.Fatalf("+60%%: %v, %d regressions", err, res.Regressions)
	}
	res, err = diffDirs(t, writeDoc(t, map[string]*Summary{"default": base}), writeDoc(t, map[string]*Summary{"default": cur}),
		DiffOptions{Thresholds: defaultThresholds(t, "latency_ms.ttft.p99:+49.9")})
	if err != nil || res.Regressions != 1 {
		t.Fatalf("+49.9 absolute: %v, %d regressions", err, res.Regressions)
	}
}

// TestDiffSingleRunsPairedWhateverTheirNames: one config per side is
// compared even when named differently (main.yaml vs pr.yaml).
func TestDiffSingleRunsPairedWhateverTheirNames(t *testing.T) {
	res, err := diffDirs(t, writeDoc(t, map[string]*Summary{"main": testSummary(1, 100)}), writeDoc(t, map[string]*Summary{"pr": testSummary(1, 100)}), DiffOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Pairs) != 1 || res.Pairs[0].Label() != "main → pr" {
		t.Fatalf("pairs %+v", res.Pairs)
	}
}

func TestDiffIncomparable(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Summary)
		want   string
	}{
		{"trace", func(s *Summary) { s.Config.Workload.Trace = "builtin:rag" }, `workload.trace: baseline "builtin:chat", current "builtin:rag"`},
		{"max requests", func(s *Summary) { s.Config.Workload.MaxRequests = 200 }, "workload.max_requests: baseline 100, current 200"},
		{"mode", func(s *Summary) { s.Config.Workload.Mode = "open" }, `workload.mode: baseline "closed", current "open"`},
		{"injected", func(s *Summary) { s.Config.Workload.Injected = 99 }, "workload.injected: baseline 100, current 99"},
		{"seed", func(s *Summary) { s.Config.Seed = 2 }, "seed: baseline 1, current 2"},
		{"replica count", func(s *Summary) { s.Config.Fleet = s.Config.Fleet[:1] }, "fleet: baseline 2 replicas, current 1"},
		{"preset", func(s *Summary) { s.Config.Fleet[1].Preset = "q" }, `fleet[1].preset: baseline "p", current "q"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cur := testSummary(1, 100)
			tc.change(cur)
			a, b := writeDoc(t, map[string]*Summary{"default": testSummary(1, 100)}), writeDoc(t, map[string]*Summary{"default": cur})
			_, err := diffDirs(t, a, b, DiffOptions{})
			var ie *IncomparableError
			if !errors.As(err, &ie) {
				t.Fatalf("err %v, want IncomparableError", err)
			}
			if !strings.Contains(err.Error(), "default: "+tc.want) {
				t.Fatalf("error %q lacks %q", err, tc.want)
			}
			res, err := diffDirs(t, a, b, DiffOptions{AllowMismatch: true})
			if err != nil || !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.Contains(n, tc.want) }) {
				t.Fatalf("--allow-mismatch: %v, notes %v", err, res)
			}
		})
	}
	// The same trace file under another directory is the same trace (noted).
	cur := testSummary(1, 100)
	base := testSummary(1, 100)
	base.Config.Workload.Trace, cur.Config.Workload.Trace = "/ci/a/trace.jsonl", "../shared/trace.jsonl"
	res, err := diffDirs(t, writeDoc(t, map[string]*Summary{"x": base}), writeDoc(t, map[string]*Summary{"x": cur}), DiffOptions{})
	if err != nil || len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "trace paths differ") {
		t.Fatalf("same trace name: %v %v", err, res)
	}
	// Configs without counterpart.
	a := writeDoc(t, map[string]*Summary{"default": testSummary(1, 100), "oracle": testSummary(1, 100)})
	b := writeDoc(t, map[string]*Summary{"default": testSummary(1, 100), "pr": testSummary(1, 100)})
	_, err = diffDirs(t, a, b, DiffOptions{})
	if err == nil || !strings.Contains(err.Error(), "only in baseline: oracle; only in current: pr") {
		t.Fatalf("unmatched configs: %v", err)
	}
	res, err = diffDirs(t, a, b, DiffOptions{OnlyCommon: true})
	if err != nil || len(res.Pairs) != 1 || res.Pairs[0].Baseline != "default" {
		t.Fatalf("--only-common: %v %+v", err, res)
	}
}

func TestParseThreshold(t *testing.T) {
	for _, tc := range []struct {
		in       string
		metric   string
		sign     int
		value    float64
		relative bool
		off      bool
	}{
		{"latency_ms.ttft.p99:+5%", "latency_ms.ttft.p99", 1, 0.05, true, false},
		{" cache.true_hit_ratio : -0.02 ", "cache.true_hit_ratio", -1, 0.02, false, false},
		{"throughput.requests_per_s:-5%", "throughput.requests_per_s", -1, 0.05, true, false},
		{"prediction.approx.mae:+0.02", "prediction.approx-prefix-cache-producer.mae", 1, 0.02, false, false},
		{"prediction.precise.phantom_rate:+.5e-1", "prediction.precise-prefix-cache-producer.phantom_rate", 1, 0.05, false, false},
		{"cache.per_replica_hit_ratio.pool/vllm-0.x:-10%", "cache.per_replica_hit_ratio.pool/vllm-0.x", -1, 0.1, true, false},
		{"requests.rejected:+0", "requests.rejected", 1, 0, false, false},
		{"latency_ms.e2e.p99:off", "latency_ms.e2e.p99", 0, 0, false, true},
	} {
		th, err := ParseThreshold(tc.in)
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if th.Metric != tc.metric || th.Sign != tc.sign || math.Abs(th.Value-tc.value) > 1e-15 || th.Relative != tc.relative || th.Off != tc.off {
			t.Errorf("%q: got %+v", tc.in, th)
		}
		again, err := ParseThreshold(th.String())
		if err != nil || again.String() != th.String() {
			t.Errorf("%q: String %q does not round-trip: %v", tc.in, th.String(), err)
		}
	}
}

func TestParseThresholdErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "empty threshold; want METRIC:+N%"},
		{"latency_ms.ttft.p99", `threshold "latency_ms.ttft.p99" has no ":"`},
		{":+5%", "names no metric"},
		{"latency_ms.ttft.p99:", "has nothing after"},
		{"latency_ms.ttft.p99:5%", `"5%" needs a sign: "+" if an increase is the regression, "-" if a decrease is`},
		{"latency_ms.ttft.p99:+", `"" is not a non-negative decimal number`},
		{"latency_ms.ttft.p99:+%", `"" is not a non-negative decimal number`},
		{"latency_ms.ttft.p99:+-5%", `"-5" is not a non-negative decimal number`},
		{"latency_ms.ttft.p99:++5", `"+5" is not a non-negative decimal number`},
		{"latency_ms.ttft.p99:+five%", `"five" is not a non-negative decimal number`},
		{"latency_ms.ttft.p99:+5%%", `"5%" is not a non-negative decimal number`},
		{"latency_ms.ttft.p99:+NaN", `"NaN" is not a non-negative decimal number`},
		{"latency_ms.ttft.p99:+Inf", `"Inf" is not a non-negative decimal number`},
		{"latency_ms.ttft.p99:+0x1p3", `"0x1p3" is not a non-negative decimal number`},
		{"latency_ms.ttft.p99:+1e999", `"1e999" is out of range`},
		{"latency_ms.ttfx.p99:+5%", `unknown metric "latency_ms.ttfx.p99": "ttfx" is not one of latency_ms.{ttft, tpot, e2e, queue}`},
		{"latency.ttft.p99:+5%", `"latency" is not one of {requests, latency_ms, offered_load, throughput, cache, prediction, pd, classes, routing, sim, kernel_compiles, knee, latency_intervals_ms, stages, staged_gauges, stopped_early}`},
		{"latency_ms.ttft:+5%", `"latency_ms.ttft" is a group, not a number: pick one of latency_ms.ttft.{mean, p50, p90, p95, p99, max}`},
		{"latency_ms.ttft.p99.x:+5%", `latency_ms.ttft.p99 is a number, it has no "x"`},
		{"latency_ms..p99:+5%", "has an empty path element"},
		{"sim.wall_s:+5%", "is wall-clock time of the simulator itself"},
		{"sim:+5%", "sim.{events, simulated_s}"},
		{"config.seed:+1", "is the run's configuration, not a metric"},
		{"prediction:+1", "name a producer, e.g. prediction.approx.mae"},
		{"prediction.approx.calibration:+1", "is a list, not a number"},
		{"cache.per_replica_hit_ratio:-0.1", "add a key, e.g. cache.per_replica_hit_ratio.NAME"},
	} {
		_, err := ParseThreshold(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to contain %q", tc.in, err, tc.want)
		}
	}
	// ParseThresholds reports every bad value.
	_, err := ParseThresholds([]string{"a:+1", "latency_ms.ttft.p99:+5%", "b"})
	if err == nil || !strings.Contains(err.Error(), `"a:+1"`) || !strings.Contains(err.Error(), `"b"`) {
		t.Fatalf("ParseThresholds: %v", err)
	}
}

func FuzzParseThreshold(f *testing.F) {
	for _, s := range append(slices.Clone(DefaultThresholds), "", ":", "x:+", "a.b:-1e3%", "cache.per_replica_hit_ratio.a:b:-1", "latency_ms.ttft.p99:off") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		th, err := ParseThreshold(s)
		if err != nil {
			return
		}
		if th.Metric == "" || (!th.Off && (th.Sign == 0 || th.Value < 0 || math.IsNaN(th.Value) || math.IsInf(th.Value, 0))) {
			t.Fatalf("%q parsed to %+v", s, th)
		}
		again, err := ParseThreshold(th.String())
		if err != nil || again.Metric != th.Metric || again.Sign != th.Sign || again.Relative != th.Relative || again.Off != th.Off {
			t.Fatalf("%q: %q does not round-trip: %+v, %v", s, th.String(), again, err)
		}
	})
}

func TestMergeThresholds(t *testing.T) {
	got := defaultThresholds(t, "latency_ms.ttft.p99:+10%", "latency_ms.e2e.p99:off", "latency_ms.queue.p50:+1")
	var specs []string
	for _, th := range got {
		specs = append(specs, th.String())
	}
	want := []string{"latency_ms.ttft.p99:+10%", "throughput.requests_per_s:-5%", "cache.true_hit_ratio:-0.02",
		"prediction.approx-prefix-cache-producer.mae:+0.02", "latency_ms.queue.p50:+1"}
	if !slices.Equal(specs, want) {
		t.Fatalf("merged %v\nwant   %v", specs, want)
	}
}

func TestMetricPaths(t *testing.T) {
	ps := MetricPaths()
	for _, want := range []string{"latency_ms.ttft.p99", "cache.true_hit_ratio", "prediction.PRODUCER.mae", "cache.per_replica_hit_ratio.KEY", "sim.events"} {
		if !slices.Contains(ps, want) {
			t.Errorf("MetricPaths lacks %s", want)
		}
	}
	for _, p := range ps {
		if strings.HasPrefix(p, "config") || p == "sim.wall_s" {
			t.Errorf("MetricPaths lists %s", p)
		}
		if _, err := ParseThreshold(strings.NewReplacer("PRODUCER", "approx", "KEY", "k").Replace(p) + ":+1"); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}

// multiSeed builds a config's runs over seeds 1..len(p99) named default,
// default#2, ...
func multiSeed(t *testing.T, p99 []float64) map[string]*Summary {
	t.Helper()
	runs := map[string]*Summary{}
	for i, v := range p99 {
		name := "default"
		if i > 0 {
			name += "#" + string(rune('1'+i))
		}
		runs[name] = testSummary(uint64(i+1), v)
	}
	return runs
}

// TestDiffNoiseRule: with several seeds, the means are compared and a
// change beyond the threshold fails only when it also exceeds the noise
// band.
func TestDiffNoiseRule(t *testing.T) {
	base := []float64{100, 120, 80}
	for _, tc := range []struct {
		name  string
		cur   []float64
		want  Verdict
		noise float64
	}{
		// Every seed +10: the mean moves +10% and the per-seed differences
		// agree exactly, so the band is 0: a regression.
		{"consistent shift", []float64{110, 130, 90}, VerdictRegression, 0},
		// Mean +10% but the per-seed differences are +40, -20, +10:
		// sd 30, band 2·30/√3 ≈ 34.6 > 10: noise, not a regression.
		{"noisy shift", []float64{140, 100, 90}, VerdictNoise, 2 * 30 / math.Sqrt(3)},
		// Within the threshold.
		{"small", []float64{102, 122, 82}, VerdictOK, 0},
		// Every seed -20: improved.
		{"improved", []float64{80, 100, 60}, VerdictImproved, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := diffDirs(t, writeDoc(t, multiSeed(t, base)), writeDoc(t, multiSeed(t, tc.cur)), DiffOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Pairs) != 1 || !res.Pairs[0].Paired || !slices.Equal(res.Pairs[0].Seeds, []uint64{1, 2, 3}) ||
				!slices.Equal(res.Pairs[0].BaselineRuns, []string{"default", "default#2", "default#3"}) {
				t.Fatalf("pair %+v", res.Pairs)
			}
			r := row(t, res, 0, "latency_ms.ttft.p99")
			if r.Verdict != tc.want || math.Abs(r.Noise-tc.noise) > 1e-9 || r.Baseline.N != 3 || r.Baseline.Mean != 100 || r.Baseline.SD != 20 {
				t.Fatalf("row %+v (baseline %+v), want %s with noise %g", r, r.Baseline, tc.want, tc.noise)
			}
			if (res.Regressions > 0) != (tc.want == VerdictRegression) {
				t.Fatalf("regressions %d", res.Regressions)
			}
			md := string(res.Markdown())
			if !strings.Contains(md, "100 ± 20 (n=3)") || !strings.Contains(md, "noise band") {
				t.Fatalf("markdown:\n%s", md)
			}
		})
	}
	// Unpaired (different seeds, allowed): the band is 2·√(sd_b²/n_b + sd_c²/n_c).
	cur := map[string]*Summary{}
	for i, v := range []float64{140, 100, 90} {
		s := testSummary(uint64(i+11), v)
		cur["default seed="+string(rune('1'+i))] = s
	}
	res, err := diffDirs(t, writeDoc(t, multiSeed(t, base)), writeDoc(t, cur), DiffOptions{AllowMismatch: true})
	if err != nil {
		t.Fatal(err)
	}
	r := row(t, res, 0, "latency_ms.ttft.p99")
	wantBand := 2 * math.Sqrt(20*20/3.0+math.Pow(newSideStat([]float64{140, 100, 90}).SD, 2)/3)
	if res.Pairs[0].Paired || math.Abs(r.Noise-wantBand) > 1e-9 || r.Verdict != VerdictNoise {
		t.Fatalf("unpaired: %+v, want band %g", r, wantBand)
	}
}

func TestGroupsByReplicateSuffixAndConfig(t *testing.T) {
	other := testSummary(1, 100)
	other.Config.EPP = &EPPInfo{EffectiveConfig: "different: true\n"}
	rs := &RunSet{}
	for name, s := range map[string]*Summary{
		"default": testSummary(1, 1), "default#2": testSummary(2, 1), "x seed=3": testSummary(3, 1), "x seed=4": testSummary(4, 1),
		"y": testSummary(1, 1), "y (2)": other, "z@seed=5": testSummary(5, 1),
	} {
		b, _ := json.Marshal(s)
		r := &Run{Name: name, Summary: s}
		json.Unmarshal(b, &r.tree)
		rs.Runs = append(rs.Runs, r)
	}
	slices.SortFunc(rs.Runs, func(a, b *Run) int { return strings.Compare(a.Name, b.Name) })
	var got []string
	for _, g := range groups(rs) {
		got = append(got, g.name+"="+strings.Join(g.names(), "+"))
	}
	want := []string{"default=default+default#2", "x=x seed=3+x seed=4", "y=y", "y (2)=y (2)", "z@seed=5=z@seed=5"}
	if !slices.Equal(got, want) {
		t.Fatalf("groups %v\nwant   %v", got, want)
	}
}

func TestLoadRunSetForms(t *testing.T) {
	dir := t.TempDir()
	s := testSummary(1, 100)
	sj, _ := json.Marshal(s)
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// run --json output: no siblings are looked for.
	rs := load(t, write("pr.json", `{"version":"v","trace":"builtin:chat","seed":1,"runs":{"b":`+string(sj)+`,"a":`+string(sj)+`}}`))
	if rs.Dir != "" || len(rs.Runs) != 2 || rs.Runs[0].Name != "a" || rs.Runs[1].Summary.Latency.TTFT.P99 != 100 {
		t.Fatalf("run --json: %+v", rs)
	}
	// A bare summary.
	rs = load(t, write("point.json", string(sj)))
	if len(rs.Runs) != 1 || rs.Runs[0].Name != "run" {
		t.Fatalf("bare summary: %+v", rs.Runs)
	}
	// summary.json: its directory holds the CSV files.
	write(SummaryFile, `{"runs":{"a":`+string(sj)+`}}`)
	if rs = load(t, filepath.Join(dir, SummaryFile)); rs.Dir != dir {
		t.Fatalf("summary.json: dir %q", rs.Dir)
	}
	if rs = load(t, dir); rs.Dir != dir || rs.Path != filepath.Join(dir, SummaryFile) {
		t.Fatalf("directory: %+v", rs)
	}
	for _, tc := range []struct{ path, want string }{
		{filepath.Join(dir, "missing.json"), "missing.json: no such file"},
		{t.TempDir(), "summary.json: no such file"},
		{write("bad.json", "{\n  \"runs\": {\n    \"a\": [1,,]\n"), "bad.json: line 3, column 13: invalid character ','"},
		{write("other.json", `{"hello": 1}`), `other.json: not an eppsim summary: no "runs" object`},
		{write("null.json", `null`), "null.json: not an eppsim summary"},
		{write("empty.json", `{"runs": {}}`), `empty.json: "runs" is empty`},
		{write("nullrun.json", `{"runs": {"a": null}}`), `nullrun.json: run "a": summary is null`},
		{write("typed.json", `{"runs": {"a": {"latency_ms": "fast"}}}`), `typed.json: run "a": json: cannot unmarshal`},
	} {
		_, err := LoadRunSet(tc.path)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", filepath.Base(tc.path), err, tc.want)
		}
	}
}

// TestDiffStrictMode: --tolerance reports every changed field (configs
// included) and ignores wall-clock fields, the eppsim version and float
// formatting noise.
func TestDiffStrictMode(t *testing.T) {
	base := testSummary(1, 100)
	cur := clone(t, base)
	cur.Sim.WallSeconds, cur.Config.Version = 12345, "0.2.0"
	cur.Latency.TTFT.Mean *= 1 + 1e-12 // formatting noise
	a := writeDoc(t, map[string]*Summary{"default": base})
	res, err := diffDirs(t, a, writeDoc(t, map[string]*Summary{"default": cur}), DiffOptions{Tolerance: 1e-9})
	if err != nil || res.Regressions != 0 {
		t.Fatalf("noise only: %v, %+v", err, res)
	}
	cur.Cache.Evictions = 3
	cur.Latency.Queue.P50 = 1e-6
	cur.Config.EPP = &EPPInfo{ProfileHandler: "single-profile-handler", Profiles: []EPPProfile{{Name: "other"}}}
	cur.Prediction = nil
	res, err = diffDirs(t, a, writeDoc(t, map[string]*Summary{"default": cur}), DiffOptions{Tolerance: 1e-9})
	if err != nil {
		t.Fatal(err)
	}
	var fields []string
	for _, c := range res.Pairs[0].Changes {
		fields = append(fields, c.Field+": "+c.Baseline+" → "+c.Current)
	}
	want := []string{"cache.evictions: 0 → 3", `config.epp.profiles[0].name: "default" → "other"`, "latency_ms.queue.p50: 0 → 1e-06",
		`prediction: {"approx-prefix-cache-producer":{"bias":0,"calibration":null,"mae":0.1,"mean_predicted_fraction":0,` +
			`"mean_true_fraction":0,"missed_rate":0,"over_predicted_tokens":0,"overpredicted_rate":0,"phantom_rate":0,"predicted_tokens":0,` +
			`"requests":100,"true_tokens":0,"under_predicted_tokens":0,"underpredicted_rate":0}} → (absent)`}
	if !slices.Equal(fields, want) {
		t.Fatalf("changes:\n%s\nwant:\n%s", strings.Join(fields, "\n"), strings.Join(want, "\n"))
	}
	if res.Regressions != 4 || row(t, res, 0, "prediction.approx-prefix-cache-producer.mae").Verdict != VerdictMissing {
		t.Fatalf("regressions %d", res.Regressions)
	}
	if md := string(res.Markdown()); !strings.Contains(md, "## eppsim diff: CHANGED") || !strings.Contains(md, "| default | `cache.evictions` | 0 | 3 |  |") {
		t.Fatalf("markdown:\n%s", md)
	}
}

// TestDiffExplicitThresholdMissingEverywhere: a --fail-on metric that no
// run has is an error; a default one (the approximate producer's MAE) is a
// note.
func TestDiffExplicitThresholdMissingEverywhere(t *testing.T) {
	s := testSummary(1, 100)
	s.Prediction = nil
	a, b := writeDoc(t, map[string]*Summary{"d": s}), writeDoc(t, map[string]*Summary{"d": s})
	res, err := diffDirs(t, a, b, DiffOptions{})
	if err != nil || len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "prediction.approx-prefix-cache-producer.mae: no run on either side") {
		t.Fatalf("default threshold: %v %+v", err, res)
	}
	_, err = diffDirs(t, a, b, DiffOptions{Thresholds: defaultThresholds(t, "prediction.precise.mae:+0.01")})
	if err == nil || !strings.Contains(err.Error(), "no run on either side has metric prediction.precise-prefix-cache-producer.mae") {
		t.Fatalf("explicit threshold: %v", err)
	}
}

// TestWriteDiffOutput: the plots, Markdown, JSON and HTML are written,
// non-empty and deterministic, from --out directories (full CDFs from
// requests.csv) and from bare documents (percentile CDFs).
func TestWriteDiffOutput(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	if err := writeFixtures(t, a, 40).Close(); err != nil {
		t.Fatal(err)
	}
	if err := writeFixtures(t, b, 40).Close(); err != nil {
		t.Fatal(err)
	}
	// Doctor the current side's summary: run "a" got slower.
	sp := filepath.Join(b, SummaryFile)
	var doc map[string]any
	if err := json.Unmarshal([]byte(readFile(t, sp)), &doc); err != nil {
		t.Fatal(err)
	}
	ttft := doc["runs"].(map[string]any)["a"].(map[string]any)["latency_ms"].(map[string]any)["ttft"].(map[string]any)
	ttft["p99"] = ttft["p99"].(float64) * 1.5
	nb, _ := json.Marshal(doc)
	if err := os.WriteFile(sp, nb, 0o644); err != nil {
		t.Fatal(err)
	}
	var outs [2]string
	for i := range outs {
		res, err := diffDirs(t, a, b, DiffOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Regressions != 1 {
			t.Fatalf("regressions %d", res.Regressions)
		}
		// The fixtures' summaries have no run config.
		if len(res.Notes) != 2 || !strings.Contains(res.Notes[0], "a: neither summary has a run config") {
			t.Fatalf("notes %q", res.Notes)
		}
		outs[i] = t.TempDir()
		if err := WriteDiffOutput(outs[i], res, 20); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{DiffHTMLFile, DiffJSONFile, DiffMarkdownFile}
	for _, p := range DiffPlotNames {
		want = append(want, p+".png", p+".svg")
	}
	slices.Sort(want)
	if got := listDir(t, outs[0]); !slices.Equal(got, want) {
		t.Fatalf("files %v\nwant  %v", got, want)
	}
	for _, name := range want {
		x, y := readFile(t, filepath.Join(outs[0], name)), readFile(t, filepath.Join(outs[1], name))
		if len(x) < 200 {
			t.Errorf("%s: %d bytes", name, len(x))
		}
		if x != y {
			t.Errorf("%s differs between two identical diffs", name)
		}
		if strings.HasSuffix(name, ".png") && !strings.HasPrefix(x, "\x89PNG") {
			t.Errorf("%s is not a PNG", name)
		}
	}
	html := readFile(t, filepath.Join(outs[0], DiffHTMLFile))
	if strings.Count(html, `src="data:image/png;base64,`) != 3 || !strings.Contains(html, "REGRESSION: a: latency_ms.ttft.p99") {
		t.Fatalf("html: %d inline PNG images", strings.Count(html, `src="data:image/png;base64,`))
	}
	// The TTFT plot used requests.csv (no "(percentiles)" legend); the
	// hit-ratio plot drew lines.
	if svg := readFile(t, filepath.Join(outs[0], PlotDiffTTFT+".svg")); strings.Contains(svg, "percentiles") || !strings.Contains(svg, "a baseline") {
		t.Fatal("TTFT plot: want full CDFs from requests.csv")
	}
	if svg := readFile(t, filepath.Join(outs[0], PlotDiffHitRatio+".svg")); strings.Contains(svg, "no time series") {
		t.Fatal("hit-ratio plot has no data")
	}
	// The checked-metrics bars: every panel titled with its unit, every
	// colour in the legend (used here or not).
	svg := readFile(t, filepath.Join(outs[0], PlotDiffMetrics+".svg"))
	for _, want := range []string{">latency_ms.ttft.p99 (ms)<", ">throughput.requests_per_s (req/s)<", ">cache.true_hit_ratio (share)<",
		">baseline<", ">current: within threshold<", ">current: regression<", ">current: improved<", ">current: beyond threshold,<",
		">  within seed noise<", ">threshold (worst allowed)<"} {
		if !strings.Contains(svg, want) {
			t.Errorf("%s.svg lacks %q", PlotDiffMetrics, want)
		}
	}
	var js DiffResult
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(outs[0], DiffJSONFile))), &js); err != nil || js.Verdict != "regression" {
		t.Fatalf("diff.json: %v %+v", err, js)
	}
	for _, n := range listDir(t, outs[0]) {
		if strings.HasSuffix(n, ".tmp") {
			t.Errorf("temporary file %s left", n)
		}
	}

	// Bare documents: percentile CDFs and a note in the hit-ratio plot.
	s := testSummary(1, 100)
	res, err := Diff(load(t, writeJSON(t, s)), load(t, writeJSON(t, s)), DiffOptions{Thresholds: defaultThresholds(t)})
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if err := WriteDiffOutput(out, res, 20); err != nil {
		t.Fatal(err)
	}
	if svg := readFile(t, filepath.Join(out, PlotDiffTTFT+".svg")); !strings.Contains(svg, "percentiles") {
		t.Fatal("TTFT plot: want percentile CDFs")
	}
	if svg := readFile(t, filepath.Join(out, PlotDiffHitRatio+".svg")); !strings.Contains(svg, "no time series") {
		t.Fatal("hit-ratio plot: want the no-data note")
	}
}

// writeJSON writes s as a bare summary file (not named summary.json).
func writeJSON(t *testing.T, s *Summary) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "run.json")
	b, _ := json.Marshal(s)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDiffMarkdownDeterministic: two renderings of one comparison are
// byte-identical (map iteration never leaks into the output).
func TestDiffMarkdownDeterministic(t *testing.T) {
	runs := map[string]*Summary{}
	for _, n := range []string{"a", "b", "c", "d"} {
		runs[n] = testSummary(1, 100)
	}
	a := writeDoc(t, runs)
	var prev []byte
	for range 5 {
		res, err := diffDirs(t, a, a, DiffOptions{Tolerance: 1e-9})
		if err != nil {
			t.Fatal(err)
		}
		md := res.Markdown()
		if prev != nil && !bytes.Equal(md, prev) {
			t.Fatal("markdown differs between renderings")
		}
		prev = md
	}
}

// TestLoadRunSetsMergesSeeds: one document per seed (a glob) becomes one
// side whose config has several runs.
func TestLoadRunSetsMergesSeeds(t *testing.T) {
	root := t.TempDir()
	for i, p99 := range []float64{100, 120, 80} {
		dir := filepath.Join(root, "main-seed"+string(rune('1'+i)))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(summaryDoc{Runs: map[string]*Summary{"default": testSummary(uint64(i+1), p99)}})
		if err := os.WriteFile(filepath.Join(dir, SummaryFile), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rs, err := LoadRunSets(filepath.Join(root, "main-seed*"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rs.Runs {
		names = append(names, r.Name)
	}
	if !slices.Equal(names, []string{"default", "default#2", "default#3"}) || rs.Dir != "" || rs.Runs[1].dir != filepath.Join(root, "main-seed2") {
		t.Fatalf("merged runs %v, dir %q", names, rs.Dir)
	}
	res, err := Diff(rs, rs, DiffOptions{Thresholds: defaultThresholds(t)})
	if err != nil {
		t.Fatal(err)
	}
	if r := row(t, res, 0, "latency_ms.ttft.p99"); r.Baseline.N != 3 || r.Baseline.Mean != 100 || !res.Pairs[0].Paired {
		t.Fatalf("row %+v", r)
	}
	if _, err := LoadRunSets(filepath.Join(root, "nothing*")); err == nil || !strings.Contains(err.Error(), "no file matches") {
		t.Fatalf("empty glob: %v", err)
	}
}

// TestDiffReadsLegacyEngineKeys: a baseline written before the engine
// config took vLLM's snake_case names compares field by field with a new
// run of the same fleet (strict mode finds no change).
func TestDiffReadsLegacyEngineKeys(t *testing.T) {
	s := testSummary(1, 100)
	for i := range s.Config.Fleet {
		s.Config.Fleet[i].Engine = &replica.Config{BlockSize: 16, NumGPUBlocks: 1500, MaxNumBatchedTokens: 8192, MaxNumSeqs: 1024, MaxModelLen: 131072}
	}
	cur := writeDoc(t, map[string]*Summary{"default": s})
	data, err := os.ReadFile(filepath.Join(cur, SummaryFile))
	if err != nil {
		t.Fatal(err)
	}
	legacy := string(data)
	for old, key := range replica.LegacyConfigKeys {
		if old == "disablePrefixCaching" {
			legacy = strings.ReplaceAll(legacy, `"enable_prefix_caching": true`, `"disablePrefixCaching": false`)
			continue
		}
		legacy = strings.ReplaceAll(legacy, `"`+key+`"`, `"`+old+`"`)
	}
	if !strings.Contains(legacy, `"numGpuBlocks": 1500`) || !strings.Contains(legacy, `"disablePrefixCaching": false`) {
		t.Fatalf("legacy document not written: %s", legacy)
	}
	base := t.TempDir()
	if err := os.WriteFile(filepath.Join(base, SummaryFile), []byte(legacy), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := diffDirs(t, base, cur, DiffOptions{Tolerance: 1e-9})
	if err != nil {
		t.Fatal(err)
	}
	if res.Regressions != 0 || len(res.Pairs) != 1 || len(res.Pairs[0].Changes) != 0 {
		t.Fatalf("legacy baseline differs: %+v", res.Pairs[0].Changes)
	}
	if e := load(t, base).Runs[0].Summary.Config.Fleet[0].Engine; e.NumGPUBlocks != 1500 || e.DisablePrefixCaching {
		t.Errorf("legacy engine decoded as %+v", e)
	}
}

func TestMetricUnit(t *testing.T) {
	for path, want := range map[string]string{
		"latency_ms.ttft.p99":                                           "ms",
		"throughput.requests_per_s":                                     "req/s",
		"throughput.output_tokens_per_s":                                "tokens/s",
		"offered_load.prompt_tokens_per_s":                              "tokens/s",
		"offered_load.arrival_span_s":                                   "s",
		"sim.simulated_s":                                               "s",
		"cache.true_hit_ratio":                                          "share",
		"cache.infinite_cache_hit_ratio":                                "share",
		"cache.regret_tokens":                                           "tokens",
		"cache.queue_effect_tokens":                                     "tokens",
		"cache.per_replica_hit_ratio.default/vllm-0":                    "share",
		"prediction.approx-prefix-cache-producer.mae":                   "share",
		"prediction.approx-prefix-cache-producer.over_predicted_tokens": "share",
		"prediction.approx-prefix-cache-producer.true_tokens":           "tokens",
		"prediction.approx-prefix-cache-producer.phantom_rate":          "share",
		"routing.load_imbalance":                                        "max/mean",
		"knee.busiest_utilization":                                      "offered/sustainable",
		"knee.max_requests_per_s":                                       "req/s",
		"routing.busiest_replica_share":                                 "share",
		"routing.idle_replicas":                                         "replicas",
		"routing.requests_per_replica.default/vllm-0":                   "requests",
		"requests.rejected":                                             "requests",
		"cache.evictions":                                               "blocks",
		"cache.preemptions":                                             "preemptions",
		"staged_gauges.gauge_samples":                                   "samples",
		"kernel_compiles":                                               "compiles",
		"staged_gauges.waiting.p90":                                     "requests",
		"staged_gauges.kv_usage.mean":                                   "share",
	} {
		if got := MetricUnit(path); got != want {
			t.Errorf("MetricUnit(%q) = %q, want %q", path, got, want)
		}
	}
	// Every metric a threshold may name has a unit.
	for _, path := range MetricPaths() {
		if MetricUnit(path) == "" {
			t.Errorf("%s has no unit", path)
		}
	}
}
