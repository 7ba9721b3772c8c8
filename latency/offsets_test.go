package latency

import (
	"context"
	"math"
	"testing"

	"github.com/eppsim/eppsim/replica"
)

// TestOffsets: per deployment, the shrunk mean of log(measured ÷
// predicted ITL): two runs of Qwen2.5-7B at TP 1 measured at 0.9 and 0.8
// of their predictions give exp((ln 0.9 + ln 0.8)/3) = 0.72^(1/3) =
// 0.8963; one run at TP 2, 1.21 of its prediction, exp(ln 1.21 / 2) =
// 1.1; the overloaded run and the one served in FP8 (another deployment
// whose only run is overloaded) count for nothing.
func TestOffsets(t *testing.T) {
	f, err := Parse([]byte(miniFile), "mini.json")
	if err != nil {
		t.Fatal(err)
	}
	base := f.Experiments[0]
	mk := func(id string, tp int, precision string, overloaded bool, ratio float64) *Result {
		e := base
		e.ID, e.TP, e.Precision = id, tp, precision
		if overloaded {
			e.RegimeFlags = []string{"overloaded"}
		}
		a := e.MeasuredValues("summary")["itl_mean"]
		if !(a > 0) {
			t.Fatalf("%s: no measured ITL", id)
		}
		return &Result{Experiment: &e, Predicted: map[string]Values{"summary": {"itl_mean": a / ratio}}}
	}
	offs, err := Offsets([]*Result{
		mk("a1", 1, "", false, 0.9), mk("b1", 2, "", false, 1.21), mk("a2", 1, "", false, 0.8),
		mk("a3", 1, "", true, 0.1), mk("fp8", 1, "FP8", true, 0.5),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(offs) != 2 {
		t.Fatalf("offsets %+v, want two deployments", offs)
	}
	want := []struct {
		tp     int
		runs   int
		factor float64
	}{{1, 2, 0.8963}, {2, 1, 1.1}}
	for i, w := range want {
		o := offs[i]
		if o.TP != w.tp || o.Runs != w.runs || math.Abs(o.Factor-w.factor) > 1e-12 || o.Model != "Qwen/Qwen2.5-7B-Instruct" || o.GPU != "H100" || o.Engine != "vllm" {
			t.Errorf("offset %d: %+v, want TP %d, %d runs, factor %v", i, o, w.tp, w.runs, w.factor)
		}
	}
	// A fold's offsets: only its held-out runs' deployments, from its
	// training runs; none when they share none.
	c := replica.DefaultCalibration()
	c.Offsets = []replica.StepOffset{{Deployment: offs[0].Deployment, Runs: 9, Factor: 5}} // must not be used
	a1, b1 := mk("a1", 1, "", false, 1).Experiment, mk("b1", 2, "", false, 1).Experiment
	got, err := foldOffsets(context.Background(), c, []*Experiment{a1}, []*Experiment{b1}, Options{Seed: 1, StageLimit: 5}, 1)
	if err != nil || got != nil {
		t.Errorf("no shared deployment: %+v, %v", got, err)
	}
	got, err = foldOffsets(context.Background(), c, []*Experiment{a1, b1}, []*Experiment{mk("a2", 1, "", false, 1).Experiment}, Options{Seed: 1, StageLimit: 5}, 1)
	if err != nil || len(got) != 1 || got[0].TP != 1 || got[0].Runs != 1 || got[0].Factor == 5 {
		t.Errorf("shared deployment: %+v, %v", got, err)
	}
}
