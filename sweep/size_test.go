package sweep

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eppsim/eppsim/scenario"
	"github.com/eppsim/eppsim/sim"
)

// TestPlanSizeBound: a sweep past the points bound is refused before
// anything is loaded (the base config here does not even exist), with a
// message naming the size, the dimensions and the flags; MaxPoints raises
// the bound up to MaxPoints (issue #25 D4).
func TestPlanSizeBound(t *testing.T) {
	million := mustDims(t, "prefix-cache-scorer.weight=0:999:1", "queue-scorer.weight=0:999:1")
	for _, tc := range []struct {
		name string
		sw   Sweep
		want string
	}{
		{"a million points", Sweep{Dims: million, EPP: scenario.ForSource("/nonexistent/epp.yaml")},
			"the grid has 1,000,000 points (prefix-cache-scorer.weight 1000 × queue-scorer.weight 1000), more than the bound of 100,000 (--max-points): raise --max-points or pass --yes"},
		{"past an explicit bound", Sweep{Dims: mustDims(t, "queue-scorer.weight=0:9:1"), MaxPoints: 5},
			"the grid has 10 points (queue-scorer.weight 10), more than the bound of 5"},
		{"random past the bound", Sweep{Dims: million, Random: 200_000}, "--random 200000, more than the bound of 100,000"},
		{"beyond any bound", Sweep{Dims: mustDims(t, "prefix-cache-scorer.weight=0:9999:1", "queue-scorer.weight=0:9999:1"), MaxPoints: MaxPoints},
			"at most 10,000,000 points can run at all; sample it with --random N"},
		{"a bound past MaxPoints", Sweep{Dims: million, MaxPoints: MaxPoints + 1}, "--max-points 10000001: must be in 1..10000000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sw := tc.sw
			sw.Spec = testSpec(t, 10)
			_, err := NewPlan(sw)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if strings.Contains(tc.want, "the bound of") && !errors.Is(err, ErrTooManyPoints) {
				t.Errorf("%v does not wrap ErrTooManyPoints", err)
			}
		})
	}

	// Raised, the million-point plan is built at once (each weight is
	// checked once, no point is loaded) and its points on demand.
	p, err := NewPlan(Sweep{Spec: testSpec(t, 10), Dims: million, MaxPoints: MaxPoints})
	if err != nil {
		t.Fatal(err)
	}
	if p.Len() != 1_000_000 {
		t.Fatalf("%d points", p.Len())
	}
	_, e, err := p.Point(999_999)
	if err != nil || !strings.Contains(string(e.YAML), "weight: 999") {
		t.Fatalf("last point: %v\n%s", err, e.YAML)
	}
}

// TestMillionPointSweepInterrupted: a million-point sweep answers its
// context at once: Run does not load every point's configuration before
// the first simulation (it took minutes, and no signal stopped it).
func TestMillionPointSweepInterrupted(t *testing.T) {
	p := mustPlan(t, Sweep{Spec: testSpec(t, 5), MaxPoints: MaxPoints,
		Dims: mustDims(t, "prefix-cache-scorer.weight=0:999:1", "queue-scorer.weight=0:999:1")})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, _, err := Run(ctx, p, Options{Out: filepath.Join(t.TempDir(), "out"), Workers: 2, DPI: testDPI})
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, ErrInterrupted) {
			t.Fatalf("error %v, want ErrInterrupted", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("still running 30 s after the cancellation")
	}
}

// TestPlanValuesCancelled: the per-value checks of plugin parameters stop
// when the context is cancelled.
func TestPlanValuesCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := NewPlanContext(ctx, Sweep{Spec: testSpec(t, 10), Dims: mustDims(t, "approx-prefix-cache-producer.lruCapacityPerServer=1000:9000:1000")})
	if !errors.Is(err, ErrInterrupted) {
		t.Fatalf("error %v, want ErrInterrupted", err)
	}
}

// TestPlanFleetBounds: --vary replicas is bounded like --replicas, and
// the largest fleet the knobs make must fit the memory bound (issue #25
// D8).
func TestPlanFleetBounds(t *testing.T) {
	if _, err := ParseVary("replicas=1,10001"); err == nil || !strings.Contains(err.Error(), "replicas 10001: at most 10000") {
		t.Errorf("replicas 10001: %v", err)
	}
	for _, tc := range []struct {
		vary []string
		want string
	}{
		{[]string{"replicas=1,8000"}, "--vary replicas=8000: the fleet needs an estimated 14.8 GiB of memory (8000 replicas; up to 1.9 MiB each for the pool and prefix cache of its 25402 KV blocks), more than the bound of 8.0 GiB"},
		{[]string{"replicas=2,500", "num-gpu-blocks-override=1000,400000"}, "--vary replicas=500 num-gpu-blocks-override=400000: the fleet needs"},
		{[]string{"num-gpu-blocks-override=1000,100000000", "queue-scorer.weight=1,2"}, "--vary num-gpu-blocks-override=100000000: the fleet needs"},
	} {
		_, err := NewPlan(Sweep{Spec: testSpec(t, 10), Dims: mustDims(t, tc.vary...)})
		var me *sim.MemoryError
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.As(err, &me) {
			t.Errorf("%v: error %v, want %q", tc.vary, err, tc.want)
		}
	}
	// Within the bound, and with the bound raised.
	if _, err := NewPlan(Sweep{Spec: testSpec(t, 10), Dims: mustDims(t, "replicas=1,2000")}); err != nil {
		t.Error(err)
	}
	spec := testSpec(t, 10)
	spec.Env.MaxFleetBytes = 16 << 30
	if _, err := NewPlan(Sweep{Spec: spec, Dims: mustDims(t, "replicas=1,8000")}); err != nil {
		t.Error(err)
	}
}
