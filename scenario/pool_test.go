package scenario

import (
	"encoding/json"
	"sync"
	"testing"

	"github.com/eppsim/eppsim/report"
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
