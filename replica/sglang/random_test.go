package sglang

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/eppsim/eppsim/replica"
)

// randomRun drives an engine with n random multi-turn-ish requests
// (shared prefixes, salts, aborts), checking invariants after every step,
// and returns the records.
func randomRun(t testing.TB, seed uint64, cfg Config, n int) []string {
	r := rand.New(rand.NewPCG(seed, 7))
	e, _ := newTestEngine(t, cfg)
	var reqs []*replica.Request
	var bases [][]uint32
	for i := range 8 {
		b := make([]uint32, 20+r.IntN(300))
		for j := range b {
			b[j] = uint32(1 + (i*997+j)%50)
		}
		bases = append(bases, b)
	}
	now := int64(0)
	next := 0
	aborted := map[*replica.Request]bool{}
	for steps := 0; next < n || e.Busy(); steps++ {
		if steps > 200000 {
			t.Fatal("no progress")
		}
		for k := r.IntN(4); k > 0 && next < n; k-- {
			base := bases[r.IntN(len(bases))]
			p := slices.Clone(base[:1+r.IntN(len(base))])
			for range r.IntN(200) {
				p = append(p, uint32(r.IntN(60)))
			}
			q := &replica.Request{ID: int64(next), Prompt: p, OutputLen: 1 + r.IntN(60)}
			if r.IntN(5) == 0 {
				q.CacheSalt = fmt.Sprint("s", r.IntN(2))
			}
			if err := e.Add(q, now); err != nil {
				t.Fatalf("add %d: %v", next, err)
			}
			reqs = append(reqs, q)
			next++
		}
		if len(reqs) > 0 && r.IntN(30) == 0 {
			q := reqs[r.IntN(len(reqs))]
			aborted[q] = true
			e.Abort(q)
		}
		d, ok := e.BeginStep(now)
		if err := e.CheckInvariants(); err != nil {
			t.Fatalf("after BeginStep: %v", err)
		}
		if !ok {
			now += 1000
			continue
		}
		if r.IntN(20) == 0 && len(reqs) > 0 {
			q := reqs[r.IntN(len(reqs))]
			aborted[q] = true
			e.Abort(q)
		}
		now += d
		e.EndStep(now)
		if err := e.CheckInvariants(); err != nil {
			t.Fatalf("after EndStep: %v", err)
		}
		if p := reqs[r.IntN(len(reqs))].Prompt; len(p) > 1 {
			if h := e.CachedPrefixTokens(p, "", nil); h >= len(p) {
				t.Fatalf("hit %d of a %d-token prompt", h, len(p))
			}
		}
	}
	var out []string
	for _, q := range reqs {
		if q.Completed < 0 && !aborted[q] {
			t.Fatalf("request %d neither completed nor aborted", q.ID)
		}
		out = append(out, fmt.Sprint(q.ID, q.Arrived, q.FirstScheduled, q.FirstToken, q.Completed, q.NumCachedTokens, q.Preemptions))
	}
	out = append(out, fmt.Sprintf("%+v %d", e.Stats(), e.Evictions()))
	return out
}

func TestRandomEngineRuns(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Config)
	}{
		{"page1", func(*Config) {}},
		{"page16", func(c *Config) { c.PageSize = 16; c.MaxTotalNumTokens = 3200 }},
		{"lpm", func(c *Config) { c.SchedulePolicy = PolicyLPM }},
		{"mid2025-small-chunk", func(c *Config) { c.Mid2025 = true; c.ChunkedPrefillSize = 64 }},
		{"no-chunk-events", func(c *Config) { c.ChunkedPrefillSize = -1; c.KVEvents = true; c.PageSize = 4 }},
		{"cap4-fifo", func(c *Config) { c.MaxRunningRequests = 4; c.EvictionPolicy = PolicyFIFO }},
		{"mixed-chunk", func(c *Config) { c.EnableMixedChunk = true; c.ChunkedPrefillSize = 128 }},
		{"mixed-page8-mru", func(c *Config) { c.EnableMixedChunk = true; c.PageSize = 8; c.EvictionPolicy = PolicyMRU }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(2000)
			tc.mod(&cfg)
			a := randomRun(t, 1, cfg, 300)
			b := randomRun(t, 1, cfg, 300)
			if !slices.Equal(a, b) {
				t.Fatal("same input, different records")
			}
			t.Log(a[len(a)-1])
		})
	}
}
