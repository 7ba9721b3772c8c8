package sim

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/epp/config"
	"github.com/eppsim/eppsim/epp/plugins"
	"github.com/eppsim/eppsim/workload"
)

// checkLadder asserts the hit-rate ladder of every routed request: the
// three rungs are measured at the same instant (routing), so
// 0 <= routed <= oracle <= infinite <= the num_tokens-1 cap, whatever
// happens afterwards; routing regret (oracle - routed) is never negative.
// It returns Σ cached, Σ routed, Σ oracle, Σ infinite over completed
// requests.
func checkLadder(t *testing.T, recs []Record) (cached, routed, oracle, infinite int) {
	t.Helper()
	for _, r := range recs {
		if r.Replica < 0 {
			if r.RoutedCachedTokens != 0 {
				t.Fatalf("request %d was not routed but has routed %d", r.ID, r.RoutedCachedTokens)
			}
			continue
		}
		limit := max(r.PromptTokens-1, 0) / 16 * 16
		if r.RoutedCachedTokens < 0 || r.RoutedCachedTokens > r.OracleCachedTokens ||
			r.OracleCachedTokens > r.InfiniteCachedTokens || r.InfiniteCachedTokens > limit {
			t.Fatalf("request %d (replica %d, prompt %d): routed %d, oracle %d, infinite %d: the ladder is broken (regret %d)",
				r.ID, r.Replica, r.PromptTokens, r.RoutedCachedTokens, r.OracleCachedTokens, r.InfiniteCachedTokens,
				r.OracleCachedTokens-r.RoutedCachedTokens)
		}
		if r.Outcome == Completed {
			if r.CachedTokens < 0 || r.CachedTokens > limit {
				t.Fatalf("request %d: cached %d outside [0, %d]", r.ID, r.CachedTokens, limit)
			}
			cached += r.CachedTokens
			routed += r.RoutedCachedTokens
			oracle += r.OracleCachedTokens
			infinite += r.InfiniteCachedTokens
		}
	}
	return cached, routed, oracle, infinite
}

// sessionTraffic: sessions whose turns extend one another (turn k's prompt
// is turn k-1's plus 160 new tokens), all behind a shared 512-token system
// prompt, arriving every gap ns, turns of all sessions interleaved. Bodies
// are not materialized: for the test router only.
func sessionTraffic(sessions, turns int, gap int64) []*workload.Request {
	var out []*workload.Request
	id := int64(0)
	for k := range turns {
		for s := range sessions {
			prompt := tokens(0, 512)
			for j := 0; j <= k; j++ {
				prompt = append(prompt, tokens(100_000+s*10_000+j*160, 160)...)
			}
			out = append(out, req(id, id*gap, prompt, 40))
			id++
		}
	}
	return out
}

// sessionTrace writes the same shape of traffic as a Mooncake hash-id trace
// (512-token blocks: block 1 is the shared system prompt, each turn adds
// one block of its session) and opens it, so that requests carry the
// bodies the EPP's producers read.
func sessionTrace(t *testing.T, sessions, turns int, gapMs int) workload.Source {
	t.Helper()
	var b strings.Builder
	n := 0
	for k := range turns {
		for s := range sessions {
			ids := []string{"1"}
			for j := 0; j <= k; j++ {
				ids = append(ids, strconv.Itoa(1000*(s+1)+j))
			}
			fmt.Fprintf(&b, "{\"timestamp\": %d, \"input_length\": %d, \"output_length\": 40, \"hash_ids\": [%s]}\n",
				n*gapMs, 512*len(ids)-100, strings.Join(ids, ", "))
			n++
		}
	}
	path := filepath.Join(t.TempDir(), "sessions.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := workload.Open(path, workload.Options{Format: workload.FormatMooncake})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	return src
}

// runDefault runs src on fleet behind the EPP's default config.
func runDefault(t *testing.T, src workload.Source, fleet []ReplicaSpec) []Record {
	t.Helper()
	l, err := config.Default(config.Options{Registry: plugins.Builtin(), Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	var recs []Record
	_, err = Run(src, l.Router(), fleet, Options{Seed: 3, OnRecord: func(r *Record) { recs = append(recs, *r) }})
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// TestLadderOneOverloadedReplica is the issue-13 case: one replica of four
// can run one request at a time with a small KV cache. The default config's
// approximate index believes in blocks as soon as it routes a request, so
// it keeps sending a session's turns to the replica where the previous
// turn is still queued; those turns reuse prefixes computed while they
// waited, so the fleet's true hit ratio exceeds what the best replica held
// at routing time. Measured at the same instant, routed <= oracle still
// holds for every request; the difference lies in the queue effect.
func TestLadderOneOverloadedReplica(t *testing.T) {
	fleet := testFleet(t, 4, 4000)
	// The step times this scenario was built on: the B.3 roofline with
	// vLLM's synchronous scheduler.
	off := false
	for i := range fleet {
		fleet[i].Preset.StepModel = "roofline"
		fleet[i].Preset.Engine.AsyncScheduling = &off
	}
	slow := fleet[0].Preset
	slow.Engine.MaxNumSeqs = 1
	slow.Engine.NumGPUBlocksOverride = 400
	fleet[0].Preset = slow
	recs := runDefault(t, sessionTrace(t, 12, 10, 5), fleet)
	cached, routed, oracle, infinite := checkLadder(t, recs)
	gained, lost := 0, 0
	for _, r := range recs {
		if r.Outcome != Completed {
			continue
		}
		switch {
		case r.CachedTokens > r.RoutedCachedTokens:
			gained++
		case r.CachedTokens < r.RoutedCachedTokens:
			lost++
		}
	}
	t.Logf("Σ cached %d, routed %d, oracle %d, infinite %d; %d requests gained while queued, %d lost", cached, routed, oracle, infinite, gained, lost)
	if cached <= oracle {
		t.Fatalf("the scenario no longer shows the queue effect that made true exceed oracle (cached %d, oracle %d)", cached, oracle)
	}
	if gained == 0 {
		t.Fatal("no request reused blocks computed while it waited")
	}
}

// TestLadderOneReplica: with one replica the chosen replica is the best
// one, so regret is exactly 0 for every request.
func TestLadderOneReplica(t *testing.T) {
	recs := runDefault(t, sessionTrace(t, 6, 6, 30), testFleet(t, 1, 3000))
	checkLadder(t, recs)
	for _, r := range recs {
		if r.RoutedCachedTokens != r.OracleCachedTokens {
			t.Fatalf("request %d: one replica, routed %d != oracle %d", r.ID, r.RoutedCachedTokens, r.OracleCachedTokens)
		}
	}
}

// TestLadderInfiniteByHand checks the infinite-cache rung on a sequence
// small enough to work out: 1,024 tokens; the same again (1,008 = 63
// blocks: the last token is always recomputed); an extension to 1,536
// tokens (all 64 earlier blocks); an unrelated prompt (0).
func TestLadderInfiniteByHand(t *testing.T) {
	reqs := []*workload.Request{
		req(0, 0, tokens(0, 1024), 4), req(1, second, tokens(0, 1024), 4),
		req(2, 2*second, tokens(0, 1536), 4), req(3, 3*second, tokens(50_000, 700), 4),
	}
	recs, _ := run(t, reqs, testFleet(t, 2, 2000), Options{})
	checkLadder(t, recs)
	want := []int{0, 1008, 1024, 0}
	for i, r := range recs {
		if r.InfiniteCachedTokens != want[r.ID] {
			t.Fatalf("record %d (request %d): infinite %d, want %d", i, r.ID, r.InfiniteCachedTokens, want[r.ID])
		}
	}
}

// TestLadderRoundRobinTinyCaches: round-robin on replicas too small for
// the sessions keeps the ladder under heavy eviction.
func TestLadderRoundRobinTinyCaches(t *testing.T) {
	recs, _ := run(t, sessionTraffic(8, 8, 15_000_000), testFleet(t, 3, 250), Options{Seed: 5})
	_, routed, oracle, infinite := checkLadder(t, recs)
	if !(routed < oracle && oracle < infinite) {
		t.Fatalf("expected a strict ladder under round-robin and eviction: routed %d, oracle %d, infinite %d", routed, oracle, infinite)
	}
}
