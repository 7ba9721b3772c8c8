package latency

import (
	"math"
	"testing"
)

// TestDecodeRises: a two-stage run measured at 10 then 15 ms per token
// and predicted at 10 then 12 rises ×1.5 measured, ×1.2 predicted: an
// error of 1.2/1.5 − 1 = −20%. A one-stage run, an overloaded run and a
// run without a prediction of its last stage count for nothing. Mean and
// median of |error| over −20%, +10% and +40%: 23.3% and 20%.
func TestDecodeRises(t *testing.T) {
	mk := func(id string, a0, a1, p0, p1 float64, stages int, overloaded bool) *Result {
		e := &Experiment{ID: id, Measured: map[string]Measurement{"summary": {}}}
		e.NominalOutputLen = 101
		pred := map[string]Values{}
		for i, v := range []float64{a0, a1}[:stages] {
			scope := []string{"stage_0", "stage_1"}[i]
			e.Workload.Stages = append(e.Workload.Stages, Stage{RateRPS: 1, DurationS: 600})
			// itl_mean = (E2E mean − TTFT mean) / (output_len − 1).
			e.Measured[scope] = Measurement{E2E: Distribution{Mean: 100*v + 50}, TTFT: Distribution{Mean: 50}}
			pred[scope] = Values{"itl_mean": []float64{p0, p1}[i]}
		}
		if overloaded {
			e.RegimeFlags = []string{"overloaded"}
		}
		return &Result{Experiment: e, Predicted: pred}
	}
	noLast := mk("nolast", 10, 20, 10, 20, 2, false)
	delete(noLast.Predicted, "stage_1")
	rs := DecodeRises([]*Result{
		mk("a", 10, 15, 10, 12, 2, false),
		mk("one", 10, 15, 10, 12, 1, false),
		mk("over", 10, 15, 10, 12, 2, true),
		noLast,
		mk("b", 10, 20, 10, 22, 2, false),
		mk("c", 10, 10, 10, 14, 2, false),
	})
	if len(rs) != 3 || rs[0].ID != "a" || rs[1].ID != "b" || rs[2].ID != "c" {
		t.Fatalf("rises %+v, want a, b, c", rs)
	}
	if math.Abs(rs[0].Measured-1.5) > 1e-9 || math.Abs(rs[0].Predicted-1.2) > 1e-9 || math.Abs(rs[0].Error()+0.2) > 1e-9 {
		t.Errorf("a: %+v (error %v), want ×1.5, ×1.2, −20%%", rs[0], rs[0].Error())
	}
	mean, median, worst := RiseErrors(rs)
	if math.Abs(mean-70.0/3) > 1e-9 || math.Abs(median-20) > 1e-9 || worst.ID != "c" {
		t.Errorf("mean %v, median %v, worst %s; want 23.33, 20, c", mean, median, worst.ID)
	}
	if m, _, _ := RiseErrors(nil); !math.IsNaN(m) {
		t.Errorf("no rises: mean %v, want NaN", m)
	}
}
