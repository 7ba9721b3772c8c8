package sweep

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/epp/config"
	"github.com/eppsim/eppsim/epp/plugins"
	"github.com/eppsim/eppsim/scenario"
)

func TestParseTuneParam(t *testing.T) {
	for _, tc := range []struct {
		in     string
		name   string
		lo, hi float64
	}{
		{"prefix-cache-scorer.weight", "prefix-cache-scorer.weight", 0, 10},
		{"queue-scorer.weight=0.5:4", "queue-scorer.weight", 0.5, 4},
		{"q.weight=-1:1", "q.weight", -1, 1},
	} {
		p, err := ParseTuneParam(tc.in)
		if err != nil || p.Name != tc.name || p.Lo != tc.lo || p.Hi != tc.hi {
			t.Errorf("%s: %+v, %v", tc.in, p, err)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"replicas", "tune optimises scorer weights"},
		{"approx-prefix-cache-producer.lruCapacityPerServer", "tune optimises scorer weights"},
		{"q.weight=1", "want LO:HI"},
		{"q.weight=2:1", "want LO < HI"},
		{"q.weight=a:1", "lower bound"},
		{"q.weight=0:inf", "upper bound"},
		{"nope", "unknown knob"},
	} {
		if _, err := ParseTuneParam(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.in, err, tc.want)
		}
	}
}

// TestTune: Nelder-Mead over two weights from the default config's
// weights (queue 2, prefix 3) within the budget; the start is evaluation
// 0, the best is no worse, best.yaml holds the best weights exactly, and
// the same run gives the same files.
func TestTune(t *testing.T) {
	params := func() []TuneParam {
		var ps []TuneParam
		for _, s := range []string{"prefix-cache-scorer.weight=0:4", "queue-scorer.weight"} {
			p, err := ParseTuneParam(s)
			if err != nil {
				t.Fatal(err)
			}
			ps = append(ps, p)
		}
		return ps
	}
	obj, _ := ParseObjective("regret")
	run := func(dir string, seeds int) *TuneResult {
		r, err := Tune(context.Background(), TuneSpec{Version: "test", Spec: testSpec(t, 30), Params: params(), Objective: obj,
			Budget: 8, Seeds: seeds, Workers: 2})
		if err != nil {
			t.Fatal(err)
		}
		if err := WriteTune(dir, r, testDPI); err != nil {
			t.Fatal(err)
		}
		return r
	}
	a, b := t.TempDir(), t.TempDir()
	r := run(a, 2)
	run(b, 2)
	sameFiles(t, a, b, TrajectoryFile, BestFile, TuneFile)
	if r.Start.N != 0 || r.Start.Weights[0] != 3 || r.Start.Weights[1] != 2 {
		t.Errorf("start %+v, want the default weights 3, 2", r.Start)
	}
	if len(r.Trajectory) > 8 || r.Evaluations > 8 || len(r.Trajectory) < 3 {
		t.Errorf("%d distinct evaluations, %d optimiser evaluations; budget 8", len(r.Trajectory), r.Evaluations)
	}
	if r.Best == nil || r.Best.Mean > r.Start.Mean || len(r.Best.Values) != 2 || math.IsNaN(float64(r.Best.Std)) {
		t.Fatalf("best %+v, start %+v", r.Best, r.Start)
	}
	if abs, _ := r.Improvement(); abs != float64(r.Start.Mean-r.Best.Mean) {
		t.Errorf("improvement %v", abs)
	}
	for _, e := range r.Trajectory {
		if e.Weights[0] < 0 || e.Weights[0] > 4 || e.Weights[1] < 0 || e.Weights[1] > 10 {
			t.Errorf("evaluation %d outside the bounds: %v", e.N, e.Weights)
		}
	}
	l, err := config.LoadFile(filepath.Join(a, BestFile), config.Options{Registry: plugins.Builtin()})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, s := range l.Profiles[0].Scorers {
		got[s.Name] = s.Weight
	}
	if got["prefix-cache-scorer"] != r.Best.Weights[0] || got["queue-scorer"] != r.Best.Weights[1] || got["kv-cache-utilization-scorer"] != 2 {
		t.Errorf("best.yaml weights %v, best %v", got, r.Best.Weights)
	}
	csv, _ := os.ReadFile(filepath.Join(a, TrajectoryFile))
	lines := strings.Split(strings.TrimSpace(string(csv)), "\n")
	if len(lines) != len(r.Trajectory)+1 || !strings.HasPrefix(lines[0], "n,prefix-cache-scorer.weight,queue-scorer.weight,objective_mean,objective_std") ||
		!strings.HasPrefix(lines[1], "0,3,2,") {
		t.Errorf("trajectory.csv:\n%s", csv)
	}
	if _, err := os.Stat(filepath.Join(a, PlotTrajectory+".png")); err != nil {
		t.Error(err)
	}

	// From a start without prefix affinity (weight 0) tuning finds a
	// weight with no routing regret.
	noPrefix := []byte(`apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: prefix-cache-scorer
- type: queue-scorer
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: prefix-cache-scorer
    weight: 0
  - pluginRef: queue-scorer
    weight: 1
`)
	r, err = Tune(context.Background(), TuneSpec{Spec: testSpec(t, 40), EPP: scenario.EPP{Name: "no-prefix", YAML: noPrefix},
		Params: params(), Objective: obj, Budget: 6})
	if err != nil {
		t.Fatal(err)
	}
	if r.Start.Weights[0] != 0 || !(r.Start.Mean > 0) || r.Best.Mean != 0 || r.Best.Weights[0] == 0 {
		t.Errorf("from prefix weight 0: start %+v, best %+v", r.Start, r.Best)
	}
	if abs, rel := r.Improvement(); abs != float64(r.Start.Mean) || rel != 1 {
		t.Errorf("improvement %v (%v), want all the start's regret", abs, rel)
	}

	// CMA-ES runs too, and tuning every scorer is the default.
	r, err = Tune(context.Background(), TuneSpec{Spec: testSpec(t, 20), Objective: obj, Budget: 4, Method: MethodCMAES})
	if err != nil || len(r.Params) != 3 || r.Best == nil {
		t.Fatalf("cmaes: %v", err)
	}
	var buf bytes.Buffer
	for _, tc := range []struct {
		ts   TuneSpec
		want string
	}{
		{TuneSpec{Budget: 3, Params: params()}, "--budget 3: nelder-mead over 2 weights needs at least 4"},
		{TuneSpec{Budget: 9, Method: "sgd"}, `--method "sgd"`},
		{TuneSpec{Budget: 9, Params: append(params(), params()[0])}, "given twice"},
		{TuneSpec{Budget: 9, Params: []TuneParam{{Name: "max-score-picker.weight", Lo: 0, Hi: 1, dim: Dim{Name: "max-score-picker.weight", kind: kindWeight, plugin: "max-score-picker"}}}},
			"not a scorer"},
	} {
		tc.ts.Spec, tc.ts.Progress = testSpec(t, 10), &buf
		if _, err := Tune(context.Background(), tc.ts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
}
