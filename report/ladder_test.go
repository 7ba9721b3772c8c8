package report_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/report"
	"github.com/eppsim/eppsim/scenario"
	"github.com/eppsim/eppsim/sim"
	"github.com/eppsim/eppsim/workload"
)

// sessionsTrace writes a Mooncake-format trace: sessions of growing
// prompts (512-token blocks: block 1 shared by all, one more block of its
// session per turn), turns of all sessions interleaved every gapMs.
func sessionsTrace(t *testing.T, sessions, turns, gapMs int) string {
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
	return path
}

// TestSummaryLadderOneOverloadedReplica runs the case through the
// whole pipeline (scenario → records → Aggregator → summary → findings):
// one replica of four runs one request at a time with a small KV cache,
// the default config keeps sending sessions to it, and queued requests
// reuse prefixes computed while they wait. The true hit ratio then exceeds
// the oracle's, yet every request's regret (oracle − routed, both at
// routing time) is ≥ 0 and so is the summary's; the summary's sums equal
// those of the records, and "What this run shows" explains the gap.
func TestSummaryLadderOneOverloadedReplica(t *testing.T) {
	p, err := replica.LookupPreset("llama-3.1-8b-h100")
	if err != nil {
		t.Fatal(err)
	}
	fleet := sim.UniformFleet(4, p)
	slow := p
	slow.Engine.MaxNumSeqs, slow.Engine.NumGPUBlocksOverride = 1, 400
	fleet[0].Preset = slow
	spec := &scenario.Spec{Version: "test", Trace: sessionsTrace(t, 12, 10, 5),
		Workload: workload.Options{Format: workload.FormatMooncake, Seed: 3}, Fleet: fleet, Env: sim.Options{Seed: 3}}
	for _, src := range []string{"default", "round-robin", "oracle"} {
		var regret, queue, prompt, oracle, cached int64
		hooks := scenario.Hooks{OnRecord: func(r *sim.Record) {
			if r.Replica >= 0 && (r.RoutedCachedTokens > r.OracleCachedTokens || r.OracleCachedTokens > r.InfiniteCachedTokens) {
				t.Errorf("%s: request %d: routed %d, oracle %d, infinite %d", src, r.ID, r.RoutedCachedTokens, r.OracleCachedTokens, r.InfiniteCachedTokens)
			}
			if r.Outcome == sim.Completed && !r.Warmup {
				regret += int64(r.OracleCachedTokens - r.RoutedCachedTokens)
				queue += int64(r.CachedTokens - r.RoutedCachedTokens)
				prompt += int64(r.PromptTokens)
				oracle += int64(r.OracleCachedTokens)
				cached += int64(r.CachedTokens)
			}
		}}
		s, err := scenario.Run(spec, scenario.ForSource(src), hooks)
		if err != nil {
			t.Fatal(err)
		}
		c := s.Cache
		if c.RegretTokens < 0 || c.RegretTokens != regret || c.QueueEffectTokens != queue || c.PromptTokens != prompt {
			t.Fatalf("%s: summary %+v; records: regret %d, queue effect %d, prompt %d", src, c, regret, queue, prompt)
		}
		if !(c.InfiniteHitRatio >= c.OracleHitRatio && c.OracleHitRatio >= c.RoutedHitRatio) {
			t.Fatalf("%s: ladder %+v", src, c)
		}
		t.Logf("%s: infinite %.3f oracle %.3f routed %.3f true %.3f, regret %d, queue effect %d", src,
			c.InfiniteHitRatio, c.OracleHitRatio, c.RoutedHitRatio, c.TrueHitRatio, c.RegretTokens, c.QueueEffectTokens)
		if src != "default" {
			continue
		}
		// The symptom, which the old regret (oracle − true) turned
		// into a negative number.
		if cached <= oracle || c.TrueHitRatio <= c.OracleHitRatio {
			t.Fatalf("the scenario no longer has true > oracle: %+v", c)
		}
		found := false
		for _, f := range report.Findings([]report.NamedSummary{{Name: src, Summary: s}}) {
			found = found || strings.Contains(f, "this is why it exceeds the best replica's")
		}
		if !found {
			t.Fatalf("no finding explains true > oracle: %q", report.Findings([]report.NamedSummary{{Name: src, Summary: s}}))
		}
	}
}
