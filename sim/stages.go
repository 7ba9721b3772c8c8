package sim

import (
	"cmp"
	"math"
	"slices"
)

// StageResult is what a run observed of one load stage (Record.Stage)
// beyond its requests' records: how many of its requests reached the EPP
// after the warm-up, those still in flight at the end included (they have
// no record), and the replicas' scraped gauges over the stage's part of the
// run.
//
// A scrape belongs to the stage of the latest request that reached the EPP
// at or before it: stage k's part of the run runs from its first arrival
// to the next stage's first arrival (for the last stage, to the run's last
// scrape), so the stages of a ladder split the run's scrapes between them.
// Scrapes before the first arrival or before the warm-up's end belong to
// none.
type StageResult struct {
	Stage    int
	Arrivals int
	// Waiting and KVUsage hold every replica's vllm:num_requests_waiting
	// and vllm:kv_cache_usage_perc (a share of its blocks) at each of the
	// stage's scrapes: the gauges the EPP reads, sampled every
	// ScrapeInterval, so each sample stands for the same span of time.
	Waiting, KVUsage GaugeDist
}

// GaugeDist is the exact distribution of a gauge's samples: each distinct
// value with how many samples had it, so that any percentile is exact
// without keeping the samples. A gauge takes few distinct values (request
// counts, used blocks over a replica's blocks), so it stays small.
type GaugeDist struct {
	index  map[float64]int // value -> position in vals
	last   int             // position of the latest sample's value: replicas and scrapes often repeat it
	vals   []float64
	counts []int64
	n      int64
	sum    float64
	max    float64
}

// Add accounts one sample; a value that is not a number (KV usage of an
// engine without blocks) is not a sample.
func (g *GaugeDist) Add(v float64) {
	if math.IsNaN(v) {
		return
	}
	if g.n == 0 || g.vals[g.last] != v {
		if g.index == nil {
			g.index = map[float64]int{}
		}
		i, ok := g.index[v]
		if !ok {
			i = len(g.vals)
			g.index[v] = i
			g.vals = append(g.vals, v)
			g.counts = append(g.counts, 0)
		}
		g.last = i
	}
	g.counts[g.last]++
	if g.n == 0 || v > g.max {
		g.max = v
	}
	g.n++
	g.sum += v
}

// Merge adds every sample of o to g: the distribution of the two sets of
// samples together (the stages' parts of a run, for the whole run).
func (g *GaugeDist) Merge(o *GaugeDist) {
	for i, v := range o.vals {
		c := o.counts[i]
		if c == 0 {
			continue
		}
		j, ok := g.index[v]
		if !ok {
			if g.index == nil {
				g.index = map[float64]int{}
			}
			j = len(g.vals)
			g.index[v] = j
			g.vals = append(g.vals, v)
			g.counts = append(g.counts, 0)
		}
		g.counts[j] += c
	}
	if o.n > 0 && (g.n == 0 || o.max > g.max) {
		g.max = o.max
	}
	g.n += o.n
	g.sum += o.sum
}

// Samples is the number of samples.
func (g *GaugeDist) Samples() int64 { return g.n }

// Sum is the sum of the samples.
func (g *GaugeDist) Sum() float64 { return g.sum }

// Max is the largest sample (0 without samples).
func (g *GaugeDist) Max() float64 { return g.max }

// Values returns the distinct values in ascending order and how many
// samples had each.
func (g *GaugeDist) Values() (vals []float64, counts []int64) {
	order := make([]int, len(g.vals))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(g.vals[a], g.vals[b]) })
	vals, counts = make([]float64, len(order)), make([]int64, len(order))
	for k, i := range order {
		vals[k], counts[k] = g.vals[i], g.counts[i]
	}
	return vals, counts
}

// stageTracker follows the load stage of the run's latest arrival.
type stageTracker struct {
	by  map[int]*StageResult
	cur *StageResult // the stage of the latest arrival (nil before any)
}

// arrive accounts a request reaching the EPP.
func (t *stageTracker) arrive(stage int, warmup bool) {
	if t.cur == nil || t.cur.Stage != stage {
		if t.by == nil {
			t.by = map[int]*StageResult{}
		}
		st := t.by[stage]
		if st == nil {
			st = &StageResult{Stage: stage}
			t.by[stage] = st
		}
		t.cur = st
	}
	if !warmup {
		t.cur.Arrivals++
	}
}

// results lists the stages in stage order.
func (t *stageTracker) results() []StageResult {
	out := make([]StageResult, 0, len(t.by))
	for _, st := range t.by {
		out = append(out, *st)
	}
	slices.SortFunc(out, func(a, b StageResult) int { return cmp.Compare(a.Stage, b.Stage) })
	return out
}
