package sweep

import (
	"errors"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/sim"
)

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
