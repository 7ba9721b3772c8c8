package sweep

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/plot"
)

func TestPairedNoise(t *testing.T) {
	// Per-seed improvements 10, 30, 20: mean 20, sd 10, band 2·10/√3.
	n := pairedNoise([]float64{10, 30, 20}, "the start", "ms", "hint")
	if n.Seeds != 3 || n.Mean != 20 || n.Std != 10 || n.Min != 10 || n.Max != 30 || math.Abs(float64(n.Band)-20/math.Sqrt(3)) > 1e-12 || !n.Verified {
		t.Fatalf("%+v", n)
	}
	want := "improvement over the start, paired by seed over 3 seeds: 20 ± 10 ms (sd; per seed 10 to 30), beyond the seed noise band 2·sd/√n = 11.55: verified"
	if n.Note != want {
		t.Fatalf("note %q\nwant %q", n.Note, want)
	}
	// 10, -5, 4: mean 3, sd √57 = 7.55, band 8.72: not verified.
	n = pairedNoise([]float64{10, -5, 4}, "the start", "ms", "hint")
	if n.Mean != 3 || math.Abs(float64(n.Std)-math.Sqrt(57)) > 1e-12 || n.Verified ||
		!strings.HasSuffix(n.Note, "within the seed noise band 2·sd/√n = 8.718: not distinguishable from seed noise") {
		t.Fatalf("%+v", n)
	}
	// One seed: never verified, and the note says how to measure it.
	n = pairedNoise([]float64{22}, "the start", "ms", "rerun with --seeds 3")
	if n.Verified || n.Seeds != 1 || n.Note != "improvement over the start: 22 ms on one seed; unverified against seed noise: rerun with --seeds 3" {
		t.Fatalf("%+v", n)
	}
}

func minimiseTTFT(t *testing.T) Objective {
	t.Helper()
	o, err := ParseObjective("ttft_p99")
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestSweepNoise(t *testing.T) {
	o := minimiseTTFT(t)
	pt := func(i int, obj float64, vals ...string) PointResult {
		return PointResult{Index: i, Values: vals, Objectives: []float64{obj}, Feasible: true}
	}
	// One seed per point: the best (80 ms, prefix weight 0) beats the next
	// (100 ms) by 20 ms, unverified; it switches the prefix scorer off.
	r := &Results{Objectives: []Objective{o}, Spec: SpecDoc{Dims: []DimDoc{{Name: "prefix-cache-scorer.weight", Values: []string{"3", "0"}}}},
		Points: []PointResult{pt(0, 100, "3"), pt(1, 80, "0")}}
	r.Best = &r.Points[1]
	n := r.sweepNoise()
	if n.Seeds != 1 || n.Verified || n.Note != "improvement over the next best point (0): 20 ms on one seed; unverified against seed noise: "+
		"every point ran one seed; add --vary seed=1,2,3 to measure it" {
		t.Fatalf("%+v", n)
	}
	// Exact ties with the best (80 ms): points 2 and 3 reach it too; the
	// best, point 1, is first among them by index. With one tied point the
	// note says "point".
	tied := &Results{Objectives: []Objective{o}, Spec: r.Spec,
		Points: []PointResult{pt(0, 100, "3"), pt(1, 80, "0"), pt(2, 80, "1"), pt(3, 80, "2"), {Index: 4, Objectives: []float64{80}}}}
	tied.Best = &tied.Points[1]
	if n := tied.sweepNoise(); n.Mean != 0 || n.Note != "no improvement: points 2, 3 reach the same latency_ms.ttft.p99 (80 ms) on one seed; "+
		"the best is first among them by the lowest index" {
		t.Fatalf("ties: %+v", n)
	}
	tied.Points = tied.Points[:3]
	if n := tied.sweepNoise(); n.Note != "no improvement: point 2 reaches the same latency_ms.ttft.p99 (80 ms) on one seed; "+
		"the best is first among them by the lowest index" {
		t.Fatalf("one tie: %+v", n)
	}
	if got := switchedOff(r.Spec.Dims, r.Best.Values); !slices.Equal(got, []string{"prefix-cache-scorer"}) {
		t.Fatalf("switched off %v", got)
	}
	if got := switchedOffNote([]string{"prefix-cache-scorer"}); got != "the best point switches off prefix-cache-scorer (weight 0): it routes without that scorer" {
		t.Fatal(got)
	}

	// With a seed dimension: weight 3 averages (80+95)/2, weight 0
	// (100+110)/2; per seed, 3 is better by 20 and 15: mean 17.5, sd
	// 3.536, band 5: verified. Weight 5 is infeasible on seed 2.
	r = &Results{Objectives: []Objective{o}, Spec: SpecDoc{Dims: []DimDoc{
		{Name: "prefix-cache-scorer.weight", Values: []string{"0", "3", "5"}}, {Name: "seed", Values: []string{"1", "2"}}}},
		Points: []PointResult{pt(0, 100, "0", "1"), pt(1, 110, "0", "2"), pt(2, 80, "3", "1"), pt(3, 95, "3", "2"),
			pt(4, 10, "5", "1"), {Index: 5, Values: []string{"5", "2"}, Objectives: []float64{1}}}}
	r.Best = &r.Points[4]
	n = r.sweepNoise()
	if n.Seeds != 2 || n.Mean != 17.5 || math.Abs(float64(n.Std)-math.Sqrt(12.5)) > 1e-12 || !n.Verified {
		t.Fatalf("%+v", n)
	}
	if !strings.HasPrefix(n.Note, "best setting over 2 seeds: prefix-cache-scorer.weight=3; improvement over the next best setting "+
		"(prefix-cache-scorer.weight=0), paired by seed over 2 seeds: 17.5 ± 3.536 ms") {
		t.Fatalf("note %q", n.Note)
	}
}

func TestTuneNoise(t *testing.T) {
	o := minimiseTTFT(t)
	r := &TuneResult{Objective: o, Params: []TuneParam{{Name: "prefix-cache-scorer.weight"}, {Name: "queue-scorer.weight"}},
		Start: &TuneEval{Weights: []float64{3, 2}, Values: []jsonFloat{100, 120}, Feasible: true},
		Best:  &TuneEval{Weights: []float64{2.5, 0}, Values: []jsonFloat{90, 118}, Feasible: true}}
	// Per seed 10 and 2: mean 6, sd 5.657, band 8: not verified.
	n := r.Noise()
	if n.Seeds != 2 || n.Mean != 6 || n.Verified || math.Abs(float64(n.Band)-8) > 1e-12 {
		t.Fatalf("%+v", n)
	}
	if got := r.SwitchedOff(); !slices.Equal(got, []string{"queue-scorer"}) {
		t.Fatalf("switched off %v", got)
	}
	r.Start.Values, r.Best.Values = []jsonFloat{100}, []jsonFloat{90}
	if n := r.Noise(); n.Verified || !strings.HasSuffix(n.Note, "unverified against seed noise: every evaluation ran one seed (--seeds 1); rerun with --seeds 3 or more to measure it") {
		t.Fatalf("%+v", n)
	}
}

func TestIntegerTicks(t *testing.T) {
	labels := func(ts []plot.Tick) []string {
		var out []string
		for _, tk := range ts {
			if tk.Value != math.Trunc(tk.Value) {
				t.Fatalf("tick at %v", tk.Value)
			}
			if tk.Label != "" {
				out = append(out, tk.Label)
			}
		}
		return out
	}
	for _, tc := range []struct {
		lo, hi float64
		want   []string
	}{
		{-0.3, 2.4, []string{"0", "1", "2"}},
		{0, 7, []string{"0", "1", "2", "3", "4", "5", "6", "7"}},
		{-1.8, 39.8, []string{"0", "10", "20", "30"}},
		{0, 35, []string{"0", "5", "10", "15", "20", "25", "30", "35"}},
		{0, 150, []string{"0", "20", "40", "60", "80", "100", "120", "140"}},
	} {
		if got := labels(IntegerTicks{}.Ticks(tc.lo, tc.hi)); !slices.Equal(got, tc.want) {
			t.Errorf("ticks %v–%v: %v, want %v", tc.lo, tc.hi, got, tc.want)
		}
	}
}

// TestSweepJSONStatesNoiseAndSwitchedOff: evaluating a finished sweep
// whose best point sets the prefix scorer's weight to 0 says so in
// sweep.json, with the seed-noise statement.
func TestSweepJSONStatesNoiseAndSwitchedOff(t *testing.T) {
	h := &logHeader{Spec: SpecDoc{Points: 2, Dims: []DimDoc{{Name: "prefix-cache-scorer.weight", Values: []string{"3", "0"}}}}}
	recs := []Record{
		{Index: 0, Values: []string{"3"}, Summary: []byte(`{"latency_ms":{"ttft":{"p99":100}}}`)},
		{Index: 1, Values: []string{"0"}, Summary: []byte(`{"latency_ms":{"ttft":{"p99":80}}}`)},
	}
	r, err := evaluate(h, recs, []Objective{minimiseTTFT(t)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Best == nil || r.Best.Index != 1 || !slices.Equal(r.SwitchedOff, []string{"prefix-cache-scorer"}) {
		t.Fatalf("best %+v, switched off %v", r.Best, r.SwitchedOff)
	}
	b, err := r.sweepJSON()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Noise struct {
			Seeds    int    `json:"seeds"`
			Verified bool   `json:"verified"`
			Note     string `json:"note"`
		} `json:"noise"`
		BestSwitchesOff []string `json:"best_switches_off"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Noise.Seeds != 1 || doc.Noise.Verified || !strings.Contains(doc.Noise.Note, "unverified against seed noise") ||
		!slices.Equal(doc.BestSwitchesOff, []string{"prefix-cache-scorer"}) {
		t.Fatalf("sweep.json %+v", doc)
	}
}
