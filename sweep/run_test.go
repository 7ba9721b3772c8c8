package sweep

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/epp/config"
	"github.com/eppsim/eppsim/epp/plugins"
)

func mustPlan(t testing.TB, sw Sweep) *Plan {
	t.Helper()
	if sw.Spec == nil {
		sw.Spec = testSpec(t, 40)
	}
	sw.Version = "test"
	p, err := NewPlan(sw)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustObjectives(t testing.TB, ss ...string) []Objective {
	t.Helper()
	o, err := ParseObjectives(ss)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// testDPI keeps PNG rendering cheap under the race detector.
const testDPI = 20

func runSweep(t testing.TB, p *Plan, opts Options) (*Results, RunStats) {
	t.Helper()
	opts.DPI = testDPI
	res, st, err := Run(context.Background(), p, opts)
	if err != nil {
		t.Fatal(err)
	}
	return res, st
}

// sameFiles fails unless the named files are byte-identical in a and b.
func sameFiles(t testing.TB, a, b string, names ...string) {
	t.Helper()
	for _, n := range names {
		x, err := os.ReadFile(filepath.Join(a, n))
		if err != nil {
			t.Fatal(err)
		}
		y, err := os.ReadFile(filepath.Join(b, n))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs between %s and %s:\n%s\n---\n%s", n, a, b, x, y)
		}
	}
}

// weightGrid is the 2×2 grid of the run tests: prefix-cache-scorer 0/1 ×
// queue-scorer 0/1.
func weightGrid(t testing.TB) Sweep {
	return Sweep{Dims: mustDims(t, "prefix-cache-scorer.weight=0,1", "queue-scorer.weight=0,1")}
}

// TestKnownBest: with the prefix scorer off (weight 0) the router ignores
// the cache and forgoes reuse some replica had (regret > 0); with it on
// and no queue scorer, every request goes where its prefix is (regret 0).
// The best point for minimal regret is therefore the first point with
// prefix weight 1 and queue weight 0: point 2.
func TestKnownBest(t *testing.T) {
	p := mustPlan(t, weightGrid(t))
	res, st := runSweep(t, p, Options{Out: t.TempDir(), Workers: 2, Objectives: mustObjectives(t, "regret")})
	if st.Ran != 4 || st.Skipped != 0 || len(res.Points) != 4 || !res.Complete() {
		t.Fatalf("stats %+v, %d points", st, len(res.Points))
	}
	if res.Best == nil || res.Best.Index != 2 || res.Best.Objectives[0] != 0 {
		t.Fatalf("best %+v, want point 2 with regret 0", res.Best)
	}
	for _, pt := range res.Points[:2] {
		if pt.Objectives[0] <= 0 {
			t.Errorf("point %d (prefix weight 0): regret %v, want > 0", pt.Index, pt.Objectives[0])
		}
	}
	// Maximising the true hit ratio picks a point with the prefix scorer on.
	res2, _ := runSweep(t, p, Options{Out: t.TempDir(), Objectives: mustObjectives(t, "-true_hit_ratio")})
	if res2.Best == nil || res2.Best.Values[0] != "1" {
		t.Errorf("best for hit ratio %+v", res2.Best)
	}
	// A constraint no point meets leaves no best point and no best.yaml.
	dir := t.TempDir()
	cons, err := ParseConstraints([]string{"completed>1000"})
	if err != nil {
		t.Fatal(err)
	}
	res3, _ := runSweep(t, p, Options{Out: dir, Constraints: cons})
	if res3.Best != nil || res3.Points[0].Feasible || res3.Points[0].Violated[0] != "requests.completed>1000" {
		t.Errorf("infeasible sweep: best %+v, point 0 %+v", res3.Best, res3.Points[0])
	}
	if _, err := os.Stat(filepath.Join(dir, BestFile)); !os.IsNotExist(err) {
		t.Errorf("best.yaml written without a feasible point: %v", err)
	}
}

// TestWorkersAndOutputs: the result files do not depend on --workers, and
// points.csv has a row per point with the headline columns.
func TestWorkersAndOutputs(t *testing.T) {
	p := mustPlan(t, weightGrid(t))
	one, three := t.TempDir(), t.TempDir()
	runSweep(t, p, Options{Out: one, Workers: 1})
	runSweep(t, p, Options{Out: three, Workers: 3})
	sameFiles(t, one, three, PointsFile, BestFile, SweepFile)
	csv, err := os.ReadFile(filepath.Join(one, PointsFile))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(csv)), "\n")
	wantHead := "index,prefix-cache-scorer.weight,queue-scorer.weight,ttft_p50_ms,ttft_p99_ms,e2e_p99_ms,tpot_p50_ms," +
		"throughput_rps,output_tokens_per_s,true_hit_ratio,oracle_hit_ratio,regret_tokens,prediction_mae,load_imbalance," +
		"completed,rejected,objective:latency_ms.ttft.p99,feasible,error"
	if len(lines) != 5 || lines[0] != wantHead {
		t.Fatalf("points.csv:\n%s", csv)
	}
	for i, l := range lines[1:] {
		f := strings.Split(l, ",")
		ttft, _ := strconv.ParseFloat(f[4], 64)
		obj, _ := strconv.ParseFloat(f[16], 64)
		if f[0] != strconv.Itoa(i) || f[14] != "40" || f[15] != "0" || f[17] != "true" || ttft <= 0 || ttft-obj > 0.0005 || obj-ttft > 0.0005 {
			t.Errorf("row %d: %s", i, l)
		}
	}
	for _, n := range []string{PlotHeatmap + ".svg", PlotHeatmap + ".png", LogFile} {
		if st, err := os.Stat(filepath.Join(one, n)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", n, err)
		}
	}
	var doc struct {
		Points   []json.RawMessage `json:"points"`
		Complete bool              `json:"complete"`
		Best     struct{ Index int }
	}
	b, _ := os.ReadFile(filepath.Join(one, SweepFile))
	if err := json.Unmarshal(b, &doc); err != nil || len(doc.Points) != 4 || !doc.Complete {
		t.Errorf("sweep.json: %v, %d points, complete %v", err, len(doc.Points), doc.Complete)
	}
}

// TestResume: a sweep directory with some points done (and a line cut
// short by an interruption) runs only the rest and ends with the files a
// fresh sweep writes; a different sweep is refused.
func TestResume(t *testing.T) {
	p := mustPlan(t, weightGrid(t))
	ref := t.TempDir()
	runSweep(t, p, Options{Out: ref})

	dir := t.TempDir()
	if _, st := runSweep(t, p, Options{Out: dir, Shard: Shard{0, 2}}); st.Ran != 2 {
		t.Fatalf("first half: %+v", st)
	}
	f, err := os.OpenFile(filepath.Join(dir, LogFile), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"index":1,"values":["0","1"],"summ`)
	f.Close()
	res, st := runSweep(t, p, Options{Out: dir})
	if st.Skipped != 2 || st.Ran != 2 || len(res.Points) != 4 {
		t.Errorf("resume: %+v, %d points", st, len(res.Points))
	}
	sameFiles(t, ref, dir, PointsFile, BestFile, SweepFile)
	// Everything done: nothing runs again.
	if _, st := runSweep(t, p, Options{Out: dir}); st.Skipped != 4 || st.Ran != 0 {
		t.Errorf("second resume: %+v", st)
	}

	other := mustPlan(t, Sweep{Dims: mustDims(t, "prefix-cache-scorer.weight=0,2", "queue-scorer.weight=0,1")})
	if _, _, err := Run(context.Background(), other, Options{Out: dir}); err == nil || !strings.Contains(err.Error(), "holds a different sweep") {
		t.Errorf("different sweep in the same --out: %v", err)
	}

	// An interrupted run (cancelled before it starts) says how to resume;
	// running again finishes it.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cut := t.TempDir()
	if _, _, err := Run(ctx, p, Options{Out: cut, Workers: 1}); err == nil || !strings.Contains(err.Error(), "run the same command again to resume") {
		t.Errorf("cancelled run: %v", err)
	}
	runSweep(t, p, Options{Out: cut})
	sameFiles(t, ref, cut, PointsFile, BestFile, SweepFile)
}

// TestShardMerge: the shards of a sweep merged give byte-identical files
// to the unsharded sweep.
func TestShardMerge(t *testing.T) {
	p := mustPlan(t, Sweep{Dims: mustDims(t, "prefix-cache-scorer.weight=0,2", "queue-scorer.weight=0,1", "kv-event-lag=0,50ms")})
	objs := mustObjectives(t, "ttft_p99", "-true_hit_ratio")
	ref := t.TempDir()
	runSweep(t, p, Options{Out: ref, Objectives: objs})
	var dirs []string
	for i := range 3 {
		d := t.TempDir()
		res, st := runSweep(t, p, Options{Out: d, Shard: Shard{i, 3}, Objectives: objs})
		if st.Selected != []int{3, 3, 2}[i] || res.Complete() {
			t.Fatalf("shard %d/3: %+v", i, st)
		}
		dirs = append(dirs, d)
	}
	out := filepath.Join(t.TempDir(), "merged")
	res, err := Merge(dirs, out, MergeOptions{DPI: testDPI})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Complete() || len(res.Pareto) == 0 {
		t.Errorf("merged: %d points, Pareto %v", len(res.Points), res.Pareto)
	}
	sameFiles(t, ref, out, PointsFile, BestFile, SweepFile)
	for _, n := range []string{PlotHeatmap + ".svg", PlotPareto + ".svg", PlotPareto + ".png"} {
		if _, err := os.Stat(filepath.Join(out, n)); err != nil {
			t.Error(err)
		}
	}
	// The merged points.jsonl is itself a complete sweep directory.
	if _, st := runSweep(t, p, Options{Out: out, Objectives: objs}); st.Ran != 0 || st.Skipped != 8 {
		t.Errorf("re-running in the merged directory: %+v", st)
	}
	if _, err := Merge(dirs[:2], t.TempDir(), MergeOptions{DPI: testDPI}); err == nil || !strings.Contains(err.Error(), "2 of 8 points missing (first: 2, 5)") {
		t.Errorf("merge without a shard: %v", err)
	}
	if res, err := Merge(dirs[:2], t.TempDir(), MergeOptions{AllowPartial: true, DPI: testDPI}); err != nil || len(res.Points) != 6 {
		t.Errorf("partial merge: %v", err)
	}
	other := t.TempDir()
	runSweep(t, mustPlan(t, weightGrid(t)), Options{Out: other, Shard: Shard{0, 4}})
	if _, err := Merge(append(dirs, other), t.TempDir(), MergeOptions{DPI: testDPI}); err == nil || !strings.Contains(err.Error(), "holds a different sweep") {
		t.Errorf("merging two sweeps: %v", err)
	}
	// Objectives given to merge replace the recorded ones.
	res, err = Merge(dirs, t.TempDir(), MergeOptions{Objectives: mustObjectives(t, "regret"), DPI: testDPI})
	if err != nil || len(res.Objectives) != 1 || res.Objectives[0].String() != "cache.regret_tokens" || res.Pareto != nil {
		t.Errorf("merge with --objective: %v", err)
	}
}

// TestBestYAMLRoundTrip: best.yaml loads with the config loader and holds
// exactly the best point's weights and parameter values.
func TestBestYAMLRoundTrip(t *testing.T) {
	p := mustPlan(t, Sweep{Dims: mustDims(t, "prefix-cache-scorer.weight=2.5,0", "queue-scorer.weight=0.125",
		"approx-prefix-cache-producer.lruCapacityPerServer=5000")})
	dir := t.TempDir()
	res, _ := runSweep(t, p, Options{Out: dir, Objectives: mustObjectives(t, "-true_hit_ratio")})
	if res.Best == nil || res.Best.Values[0] != "2.5" {
		t.Fatalf("best %+v", res.Best)
	}
	l, err := config.LoadFile(filepath.Join(dir, BestFile), config.Options{Registry: plugins.Builtin()})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, s := range l.Profiles[0].Scorers {
		got[s.Name] = s.Weight
	}
	if got["prefix-cache-scorer"] != 2.5 || got["queue-scorer"] != 0.125 || got["kv-cache-utilization-scorer"] != 2 || len(got) != 3 {
		t.Errorf("best.yaml weights %v", got)
	}
	var params struct{ LRUCapacityPerServer int }
	for _, in := range l.Plugins {
		if in.Name == "approx-prefix-cache-producer" {
			if err := json.Unmarshal(in.Parameters, &params); err != nil {
				t.Fatal(err)
			}
		}
	}
	if params.LRUCapacityPerServer != 5000 {
		t.Errorf("best.yaml lruCapacityPerServer %d, want 5000", params.LRUCapacityPerServer)
	}
	b, _ := os.ReadFile(filepath.Join(dir, BestFile))
	if !bytes.HasPrefix(b, []byte("# eppsim sweep: best feasible point 0 of 2; maximise cache.true_hit_ratio = ")) {
		t.Errorf("best.yaml header:\n%.300s", b)
	}
	// One dimension: a line plot.
	q := mustPlan(t, Sweep{Dims: mustDims(t, "kv-event-lag=0,20ms,1s")})
	dir = t.TempDir()
	runSweep(t, q, Options{Out: dir})
	if _, err := os.Stat(filepath.Join(dir, PlotObjective+".png")); err != nil {
		t.Error(err)
	}
}

// TestEvaluate: feasibility, best point and Pareto front on hand-made
// summaries.
func TestEvaluate(t *testing.T) {
	h := &logHeader{Spec: SpecDoc{Points: 7, Dims: []DimDoc{{Name: "x", Values: []string{"0", "1", "2", "3", "4", "5", "6"}}}}}
	// (ttft p99, throughput): maximise throughput, minimise ttft.
	data := [][2]float64{{100, 10}, {90, 8}, {120, 12}, {90, 9}, {200, 12}, {80, 5}, {90, 9}}
	var recs []Record
	for i, d := range data {
		recs = append(recs, Record{Index: i, Values: []string{strconv.Itoa(i)},
			Summary: json.RawMessage(`{"latency_ms":{"ttft":{"p99":` + strconv.FormatFloat(d[0], 'f', -1, 64) +
				`}},"throughput":{"requests_per_s":` + strconv.FormatFloat(d[1], 'f', -1, 64) + `},"requests":{"completed":` + strconv.Itoa(i) + `}}`)})
	}
	recs = append(recs[:5], Record{Index: 5, Values: []string{"5"}, Error: "boom"}, recs[6])
	cons, _ := ParseConstraints([]string{"completed>=1"})
	r, err := evaluate(h, recs, mustObjectives(t, "ttft_p99", "-throughput"), cons)
	if err != nil {
		t.Fatal(err)
	}
	// Point 0 violates the constraint, point 5 failed; of the rest the
	// front is 1? no: 3 and 6 (90, 9) dominate 1 (90, 8); 2 (120, 12)
	// dominates 4 (200, 12).
	if got := r.Pareto; len(got) != 3 || got[0] != 3 || got[1] != 6 || got[2] != 2 {
		t.Errorf("Pareto front %v, want [3 6 2]", got)
	}
	if r.Best == nil || r.Best.Index != 3 {
		t.Errorf("best %+v, want point 3 (ttft 90, then higher throughput, then lower index)", r.Best)
	}
	if r.Points[0].Feasible || r.Points[5].Feasible || r.Failed() != 1 {
		t.Errorf("feasibility: %+v %+v", r.Points[0], r.Points[5])
	}
}

// TestPlotsDegenerate: sweeps whose points all failed or share one value
// still write every file.
func TestPlotsDegenerate(t *testing.T) {
	one := []DimDoc{{Name: "queue-scorer.weight", Values: []string{"1", "2"}}}
	two := append(one, DimDoc{Name: "kv-event-lag", Values: []string{"0s"}})
	same := json.RawMessage(`{"latency_ms":{"ttft":{"p99":5}},"throughput":{"requests_per_s":2}}`)
	for _, tc := range []struct {
		name string
		dims []DimDoc
		recs []Record
	}{
		{"failed, one dim", one, []Record{{Index: 0, Values: []string{"1"}, Error: "x"}, {Index: 1, Values: []string{"2"}, Error: "y"}}},
		{"failed, two dims", two, []Record{{Index: 0, Values: []string{"1", "0s"}, Error: "x"}}},
		{"equal values, one dim", one, []Record{{Index: 0, Values: []string{"1"}, Summary: same}, {Index: 1, Values: []string{"2"}, Summary: same}}},
		{"equal values, two dims", two, []Record{{Index: 0, Values: []string{"1", "0s"}, Summary: same}, {Index: 1, Values: []string{"2", "0s"}, Summary: same}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := newBase(config.DefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			h := &logHeader{Spec: SpecDoc{Points: 2, Dims: tc.dims, BaseEPP: string(b.yaml)}}
			dir := t.TempDir()
			r, err := finalize(dir, h, tc.recs, mustObjectives(t, "ttft_p99", "-throughput"), nil, testDPI)
			if err != nil {
				t.Fatal(err)
			}
			plot := PlotHeatmap
			if len(tc.dims) == 1 {
				plot = PlotObjective
			}
			for _, f := range []string{PointsFile, SweepFile, plot + ".png", PlotPareto + ".svg"} {
				if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
					t.Error(err)
				}
			}
			if (r.Best != nil) != (tc.recs[0].Error == "") {
				t.Errorf("best %+v", r.Best)
			}
		})
	}
}
