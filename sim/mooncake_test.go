package sim

import (
	"io"
	"os"
	"testing"

	"github.com/eppsim/eppsim/epp/config"
	"github.com/eppsim/eppsim/epp/picker"
	"github.com/eppsim/eppsim/epp/plugins"
	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/workload"
)

const sharedMooncake = "../../shared/traces/mooncake_conversation_trace.jsonl"

// limit passes on the first n requests of a source.
type limit struct {
	src workload.Source
	n   int
}

func (l *limit) Next() (*workload.Request, error) {
	if l.n == 0 {
		return nil, io.EOF
	}
	l.n--
	return l.src.Next()
}

func openMooncake(t *testing.T, opts workload.Options) *workload.Stream {
	t.Helper()
	if _, err := os.Stat(sharedMooncake); err != nil {
		t.Skip("shared Mooncake trace not present")
	}
	s, err := workload.Open(sharedMooncake, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// mooncakeRun runs the first n Mooncake requests (timestamps stretched by
// scale) through the default EPP on fleet and returns the records.
func mooncakeRun(t *testing.T, n int, scale float64, fleet []ReplicaSpec, roundRobin bool) []Record {
	t.Helper()
	l, err := config.Default(config.Options{Registry: plugins.Builtin(), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	router := l.Router()
	if roundRobin {
		router.Profiles[0].Picker = picker.NewRoundRobin("rr")
	}
	var recs []Record
	_, err = Run(openMooncake(t, workload.Options{TimeScale: scale}), router, fleet, Options{Seed: 1, MaxRequests: n,
		OnRecord: func(r *Record) { recs = append(recs, *r) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != n {
		t.Fatalf("%d records for %d requests", len(recs), n)
	}
	return recs
}

func hitRatio(recs []Record) (trueRatio, oracle float64) {
	var cached, orc, prompt int
	for _, r := range recs {
		cached += r.CachedTokens
		orc += r.OracleCachedTokens
		prompt += r.PromptTokens
	}
	return float64(cached) / float64(prompt), float64(orc) / float64(prompt)
}

// TestOneReplicaMatchesInfiniteCache: one replica whose cache holds the
// whole slice reuses what `trace inspect` calls the infinite-cache hit
// ratio (16-token blocks, num_tokens-1 rule). The only allowed shortfall
// is concurrency: a request that arrives while the request it extends is
// still in chunked prefill can reuse only the chunks already scheduled.
// With timestamps stretched 20× such overlaps are rare; the tolerance is
// half a percentage point, and the simulated ratio can never be higher.
func TestOneReplicaMatchesInfiniteCache(t *testing.T) {
	const n = 600
	sum, err := workload.Inspect(&limit{src: openMooncake(t, workload.Options{}), n: n}, 16)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := replica.LookupPreset("llama-3.1-8b-h100")
	p.Engine.NumGPUBlocksOverride = 600_000 // > 600 × 12k tokens / 16 + output blocks
	recs := mooncakeRun(t, n, 20, UniformFleet(1, p), false)
	// The infinite-cache rung of the ladder is the same quantity, summed
	// per request in routing order (the trace's order, open loop).
	_, _, _, infinite := checkLadder(t, recs)
	if int64(infinite) != sum.HitTokens {
		t.Fatalf("Σ infinite-cache tokens of the records %d, trace inspect %d", infinite, sum.HitTokens)
	}
	got, _ := hitRatio(recs)
	if got > sum.HitRatio+1e-12 || sum.HitRatio-got > 0.005 {
		t.Fatalf("one-replica true hit ratio %.4f, infinite-cache ratio %.4f", got, sum.HitRatio)
	}
	t.Logf("true %.4f vs infinite-cache %.4f", got, sum.HitRatio)
}

// TestPrefixAwareBeatsRoundRobin: on the shared trace the default config
// (prefix-cache-scorer 3, queue 2, kv 2) reuses more than round-robin, and
// every request's ladder holds (no negative regret).
func TestPrefixAwareBeatsRoundRobin(t *testing.T) {
	n := 1500
	if testing.Short() {
		n = 500 // make test; make test-long runs 1500
	}
	p, _ := replica.LookupPreset("llama-3.1-8b-h100")
	aware := mooncakeRun(t, n, 1, UniformFleet(8, p), false)
	rr := mooncakeRun(t, n, 1, UniformFleet(8, p), true)
	for _, recs := range [][]Record{aware, rr} {
		// Every request: routed <= oracle <= infinite at routing time.
		checkLadder(t, recs)
	}
	ta, oa := hitRatio(aware)
	tr, or := hitRatio(rr)
	if ta <= tr || oa < ta || or < tr {
		t.Fatalf("prefix-aware true %.4f (oracle %.4f) vs round-robin %.4f (oracle %.4f)", ta, oa, tr, or)
	}
	t.Logf("prefix-aware %.4f, round-robin %.4f", ta, tr)
}
