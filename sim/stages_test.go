package sim

import (
	"math"
	"slices"
	"testing"

	"github.com/eppsim/eppsim/workload"
)

// TestRunStages: each stage counts its arrivals after the warm-up, and
// every scrape from the warm-up's end on belongs to the stage of the latest
// arrival before it. Samples taken at the scrapes' instants (the same
// interval, scheduled after them) see the same gauges, so the stages'
// distributions are checked against them.
func TestRunStages(t *testing.T) {
	const ms = second / 1000
	reqs := func() []*workload.Request {
		var out []*workload.Request
		for i, at := range []int64{50, 300, 600, 1050, 1200} {
			r := req(int64(i), at*ms, tokens(i*5000, 1024), 200)
			if at > 1000 {
				r.Stage = 1
			}
			out = append(out, r)
		}
		return out
	}
	for _, warmup := range []int64{0, 500 * ms} {
		var samples []Sample
		opts := Options{ScrapeInterval: 100 * ms, SampleInterval: 100 * ms, Warmup: warmup,
			OnSample: func(s *Sample) { samples = append(samples, *s) }}
		_, res := run(t, reqs(), testFleet(t, 2, 2000), opts)
		if len(res.Stages) != 2 || res.Stages[0].Stage != 0 || res.Stages[1].Stage != 1 {
			t.Fatalf("warm-up %v: stages %+v", warmup, res.Stages)
		}
		wantArrivals := [2]int{3, 2}
		if warmup > 0 {
			wantArrivals[0] = 1 // the requests at 50 and 300 ms are warm-up
		}
		var n [2]int64
		var wait, kv [2]float64
		var waitMax, kvMax [2]float64
		for _, s := range samples {
			if s.Time < 50*ms || s.Time < warmup {
				continue
			}
			k := 0
			if s.Time > 1050*ms {
				k = 1
			}
			n[k]++
			wait[k] += float64(s.Waiting)
			kv[k] += s.KVUsage
			waitMax[k], kvMax[k] = math.Max(waitMax[k], float64(s.Waiting)), math.Max(kvMax[k], s.KVUsage)
		}
		// Stage 0 holds the scrapes at 0.1 … 1.0 s (from 0.5 s with the
		// warm-up), on both replicas.
		if want := int64(2 * 10); warmup == 0 && n[0] != want || warmup > 0 && n[0] != 2*6 {
			t.Errorf("warm-up %v: %d samples in stage 0", warmup, n[0])
		}
		for k, st := range res.Stages {
			if st.Arrivals != wantArrivals[k] {
				t.Errorf("warm-up %v: stage %d: %d arrivals, want %d", warmup, k, st.Arrivals, wantArrivals[k])
			}
			if st.Waiting.Samples() != n[k] || st.KVUsage.Samples() != n[k] || n[k] == 0 {
				t.Errorf("warm-up %v: stage %d: %d/%d samples, want %d", warmup, k, st.Waiting.Samples(), st.KVUsage.Samples(), n[k])
			}
			if st.Waiting.Sum() != wait[k] || math.Abs(st.KVUsage.Sum()-kv[k]) > 1e-9 || st.Waiting.Max() != waitMax[k] || st.KVUsage.Max() != kvMax[k] {
				t.Errorf("warm-up %v: stage %d: waiting Σ %g max %g, KV Σ %g max %g; samples give %g %g %g %g", warmup, k,
					st.Waiting.Sum(), st.Waiting.Max(), st.KVUsage.Sum(), st.KVUsage.Max(), wait[k], waitMax[k], kv[k], kvMax[k])
			}
			if kvMax[k] == 0 {
				t.Errorf("stage %d: the replicas held no KV blocks", k)
			}
		}
	}
}

func TestGaugeDist(t *testing.T) {
	var g GaugeDist
	for _, v := range []float64{3, 1, 3, math.NaN(), 0, 3} {
		g.Add(v)
	}
	vals, counts := g.Values()
	if g.Samples() != 5 || g.Sum() != 10 || g.Max() != 3 || len(vals) != 3 || vals[0] != 0 || vals[1] != 1 || vals[2] != 3 ||
		counts[0] != 1 || counts[1] != 1 || counts[2] != 3 {
		t.Fatalf("samples %d sum %g max %g values %v counts %v", g.Samples(), g.Sum(), g.Max(), vals, counts)
	}
}

// TestGaugeDistMerge: merging is the distribution of all the samples
// together. {1, 3, 3} and {0, 3, 7, 7}: 7 samples, sum 24, max 7, and
// the values 0×1, 1×1, 3×3, 7×2; merging an empty one changes nothing,
// and merging into an empty one copies.
func TestGaugeDistMerge(t *testing.T) {
	dist := func(vs ...float64) *GaugeDist {
		var g GaugeDist
		for _, v := range vs {
			g.Add(v)
		}
		return &g
	}
	check := func(name string, g *GaugeDist, n int64, sum, max float64, vals []float64, counts []int64) {
		t.Helper()
		v, c := g.Values()
		if g.Samples() != n || g.Sum() != sum || g.Max() != max || !slices.Equal(v, vals) || !slices.Equal(c, counts) {
			t.Errorf("%s: n %d sum %g max %g values %v counts %v", name, g.Samples(), g.Sum(), g.Max(), v, c)
		}
	}
	a := dist(1, 3, 3)
	a.Merge(dist(0, 3, 7, 7))
	check("merged", a, 7, 24, 7, []float64{0, 1, 3, 7}, []int64{1, 1, 3, 2})
	a.Merge(dist())
	check("with an empty one", a, 7, 24, 7, []float64{0, 1, 3, 7}, []int64{1, 1, 3, 2})
	var e GaugeDist
	e.Merge(dist(2, 2, 5))
	check("into an empty one", &e, 3, 9, 5, []float64{2, 5}, []int64{2, 1})
	// Adding after a merge keeps counting into the merged values.
	e.Add(5)
	e.Add(1)
	check("added after", &e, 5, 15, 5, []float64{1, 2, 5}, []int64{1, 2, 2})
}
