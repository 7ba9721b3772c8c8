package scenario

import (
	"encoding/json"
	"sync"
	"testing"

	"github.com/eppsim/eppsim/report"
	"github.com/eppsim/eppsim/workload"
)

// strip is a summary without its wall-clock fields, as JSON.
func strip(t *testing.T, s *report.Summary) string {
	t.Helper()
	c := *s
	c.Sim.WallSeconds, c.Sim.RequestsPerWallS = 0, 0
	b, err := json.Marshal(&c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPoolSharesOneRead: runs of one workload through a pool give what
// their own runs give, concurrently or one after the other; a trace within
// the retain budget is read by one feed for all of them, and a pool
// without a budget opens a feed per round of runs.
func TestPoolSharesOneRead(t *testing.T) {
	spec := testSpec(t, 80)
	configs := []string{"default", "round-robin", "least-queue", "oracle"}
	want := map[string]string{}
	for _, c := range configs {
		s, err := Run(spec, ForSource(c), Hooks{})
		if err != nil {
			t.Fatal(err)
		}
		want[c] = strip(t, s)
	}
	for _, tc := range []struct {
		name   string
		retain int64
		feeds  int // distinct feeds the sequential runs read
	}{
		{"retained", 0, 1},
		{"windowed", -1, len(configs)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := NewPool(tc.retain)
			defer pool.Close()
			seen := map[*Feed]bool{}
			for _, c := range configs {
				s, err := pool.Run(t.Context(), spec, ForSource(c), Hooks{})
				if err != nil {
					t.Fatal(err)
				}
				if got := strip(t, s); got != want[c] {
					t.Errorf("%s through the pool differs:\n%s\nwant\n%s", c, got, want[c])
				}
				pool.mu.Lock()
				for _, f := range pool.feeds {
					seen[f] = true
				}
				pool.mu.Unlock()
			}
			if len(seen) != tc.feeds {
				t.Errorf("%d feeds, want %d", len(seen), tc.feeds)
			}
			// The same runs at once, and again with another seed.
			var wg sync.WaitGroup
			for _, seed := range []uint64{3, 4} {
				for _, c := range configs {
					wg.Go(func() {
						sp := *spec
						sp.Env.Seed, sp.Workload.Seed = seed, int64(seed)
						s, err := pool.Run(t.Context(), &sp, ForSource(c), Hooks{})
						if err != nil {
							t.Error(err)
							return
						}
						if got := strip(t, s); seed == 3 && got != want[c] {
							t.Errorf("%s at once differs", c)
						}
					})
				}
			}
			wg.Wait()
		})
	}
}

// TestKeepingPool: specs that name their Open (Spec.OpenKey) share a
// pool's reading as traces do; a keeping pool reads each of the workloads
// it keeps once however often the runs cycle through them, a plain pool
// once per run when they alternate, and a spec without an OpenKey is read
// by each of its runs. Every run gives what its own run gives.
func TestKeepingPool(t *testing.T) {
	seeds := []uint64{3, 4, 5}
	// The runs cycle twice through three workloads: seeds 3, 4, 5, 3, 4, 5.
	const cycles = 2
	base := testSpec(t, 40)
	want := map[uint64]string{}
	for _, seed := range seeds {
		sp := *base
		sp.Env.Seed, sp.Workload.Seed = seed, int64(seed)
		s, err := Run(&sp, ForSource("round-robin"), Hooks{})
		if err != nil {
			t.Fatal(err)
		}
		want[seed] = strip(t, s)
	}
	for _, tc := range []struct {
		name  string
		pool  func() *Pool
		key   string
		opens map[uint64]int // Open calls by workload over the six runs
	}{
		// Alternating workloads: each run closes the idle feed of the last.
		{"plain", func() *Pool { return NewPool(0) }, "default", map[uint64]int{3: 2, 4: 2, 5: 2}},
		// A budget above all three keeps all three.
		{"keeps-all", func() *Pool { return NewKeepingPool(0, 1<<30) }, "default", map[uint64]int{3: 1, 4: 1, 5: 1}},
		// A budget of one byte keeps the first feed only (it opened while
		// the kept feeds held nothing); the others are read each cycle.
		{"keeps-first", func() *Pool { return NewKeepingPool(0, 1) }, "default", map[uint64]int{3: 1, 4: 2, 5: 2}},
		// No OpenKey: every run opens its own workload, even when kept.
		{"unnamed", func() *Pool { return NewKeepingPool(0, 1<<30) }, "", map[uint64]int{3: 2, 4: 2, 5: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := tc.pool()
			defer pool.Close()
			var mu sync.Mutex
			opens := map[uint64]int{}
			for range cycles {
				for _, seed := range seeds {
					sp := *base
					sp.Env.Seed, sp.Workload.Seed = seed, int64(seed)
					wo := sp.Workload
					sp.Open = func() (*workload.Stream, error) {
						mu.Lock()
						opens[seed]++
						mu.Unlock()
						return workload.Open(base.Trace, wo)
					}
					sp.OpenKey = tc.key
					s, err := pool.Run(t.Context(), &sp, ForSource("round-robin"), Hooks{})
					if err != nil {
						t.Fatal(err)
					}
					if got := strip(t, s); got != want[seed] {
						t.Errorf("seed %d through the pool differs:\n%s\nwant\n%s", seed, got, want[seed])
					}
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for _, seed := range seeds {
				if opens[seed] != tc.opens[seed] {
					t.Errorf("seed %d: opened %d times, want %d", seed, opens[seed], tc.opens[seed])
				}
			}
		})
	}
}
