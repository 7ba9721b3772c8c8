package latency

import (
	"context"
	"reflect"
	"testing"

	"github.com/eppsim/eppsim/replica"
)

// TestPoolSameResults: simulations that share their workloads through a
// pool (Options.Pool) predict what simulations reading their own do, to
// the last bit, for calibrations that differ, for a run near its knee (its
// draws read the pool at other seeds), a run far from it, a data-parallel
// run, and at two stage limits; the second pass reads the workloads the
// first one left in the pool.
func TestPoolSameResults(t *testing.T) {
	near := loadFixture(t, resultsFixtures[2])
	far := loadFixture(t, resultsFixtures[1])
	dp := &parseRuns(t, dpRun("dp2", 2, 16, 30, "")).Experiments[0]
	runs := []*Experiment{near, far, dp}
	slow := replica.DefaultCalibration()
	slow.Name = "slow"
	slow.Coefficients.StepUs *= 3
	pool := NewPool()
	defer pool.Close()
	for pass := range 2 {
		for _, c := range []replica.Calibration{replica.DefaultCalibration(), slow} {
			for _, limit := range []int{20, 40} {
				o := Options{Seed: 7, StageLimit: limit, Draws: 3}
				want, err := SimulateAll(context.Background(), runs, c, o, 2)
				if err != nil {
					t.Fatal(err)
				}
				o.Pool = pool
				got, err := SimulateAll(context.Background(), runs, c, o, 2)
				if err != nil {
					t.Fatal(err)
				}
				for i := range runs {
					if !reflect.DeepEqual(got[i], want[i]) {
						t.Errorf("pass %d, %s, stage limit %d, %s: pooled %+v, want %+v", pass, c.Name, limit, runs[i].ID, got[i].Predicted, want[i].Predicted)
					}
				}
			}
		}
	}
}

// BenchmarkObjectivePool is one evaluation of calibration's objective on
// the shared file's fitted runs (shortened to 150 s stages, one draw, two
// workers, the shipped calibration), with each simulation synthesizing its
// workload and with a pool that already holds them:
//
//	go test -run '^$' -bench ObjectivePool ./latency/
func BenchmarkObjectivePool(b *testing.B) {
	f, err := Load(sharedExperiments)
	if err != nil {
		b.Skipf("%s absent: %v", sharedExperiments, err)
	}
	runs := FitRuns(f)
	c := replica.DefaultCalibration()
	for _, pooled := range []bool{false, true} {
		name := "own-workloads"
		if pooled {
			name = "pool"
		}
		b.Run(name, func(b *testing.B) {
			o := Options{Seed: 1, StageLimit: 150, Draws: 1}
			if pooled {
				o.Pool = NewPool()
				defer o.Pool.Close()
				if _, err := Objective(context.Background(), runs, c, o, 2); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				if _, err := Objective(context.Background(), runs, c, o, 2); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
