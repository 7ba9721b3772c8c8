package scenario

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/eppsim/eppsim/sim"
	"github.com/eppsim/eppsim/workload"
)

// runRecords runs the configs at once on one feed and returns, per config,
// its records and summary as JSON (wall-clock fields cleared).
func runRecords(t *testing.T, spec *Spec, configs []string, opts FeedOptions) []string {
	t.Helper()
	feed := NewFeed(SpecOpener(spec), opts)
	defer feed.Close()
	readers := make([]*FeedReader, len(configs))
	for i := range configs {
		rd, err := feed.Join(nil)
		if err != nil {
			t.Fatal(err)
		}
		readers[i] = rd
	}
	out := make([]string, len(configs))
	var wg sync.WaitGroup
	for i, c := range configs {
		wg.Go(func() {
			var recs []sim.Record
			s, err := RunReader(t.Context(), spec, ForSource(c), Hooks{OnRecord: func(r *sim.Record) { recs = append(recs, *r) }}, readers[i])
			if err != nil {
				t.Errorf("%s: %v", c, err)
				return
			}
			s.Sim.WallSeconds, s.Sim.RequestsPerWallS = 0, 0
			b, err := json.Marshal(struct {
				Records []sim.Record
				Summary any
			}{recs, s})
			if err != nil {
				t.Error(err)
			}
			out[i] = string(b)
		})
	}
	wg.Wait()
	return out
}

// TestPreparedRunsMatch is the differential test of what the runs of one
// feed share: every configuration that applies, run together on requests
// whose memo a Preparer filled on the feed's goroutine (the body check,
// estimate tokens, approximate prefix hashes, precise block keys and engine hash chains
// computed once, and the precise indexer's keys of KV events whose tokens
// are a routed prompt's, taken from the memo instead of hashed again),
// must give exactly the records and summary of the same configuration
// computing everything itself (no memo), on builtin chat, an OpenAI trace
// and synthesized Mooncake and Alibaba hash-id traces.
func TestPreparedRunsMatch(t *testing.T) {
	dir := t.TempDir()
	mooncake := filepath.Join(dir, "mooncake.jsonl")
	writeHashIDTrace(t, mooncake, hashIDTrace{Format: "mooncake", Requests: 150, Sessions: 10, RatePerS: 3,
		BlockSize: 512, MaxPrompt: 12000, SystemPrompts: 3, Seed: 7})
	alibaba := filepath.Join(dir, "alibaba.jsonl")
	writeHashIDTrace(t, alibaba, hashIDTrace{Format: "alibaba", Requests: 150, Sessions: 10, RatePerS: 3,
		BlockSize: 16, MaxPrompt: 4000, SystemPrompts: 3, Seed: 8})
	configs := []string{"default", "round-robin", "least-queue", "oracle", "../testdata/regress/precise-prefix-cache.yaml"}
	configs = append(configs, loadableShipped()...)
	for _, tr := range []struct{ name, trace string }{
		{"builtin-chat", workload.DefaultWorkload},
		{"openai", "../workload/testdata/openai.jsonl"},
		{"mooncake", mooncake},
		{"alibaba", alibaba},
	} {
		t.Run(tr.name, func(t *testing.T) {
			spec := testSpec(t, 150)
			spec.Trace = tr.trace
			epps := make([]EPP, len(configs))
			for i, c := range configs {
				epps[i] = ForSource(c)
			}
			want := runRecords(t, spec, configs, FeedOptions{noMemo: true})
			prep := Preparer(spec, epps)
			var prepared []*workload.Request
			got := runRecords(t, spec, configs, FeedOptions{Prepare: func(wr *workload.Request) {
				prep(wr)
				prepared = append(prepared, wr)
			}})
			// Every request holds the chain, the body check, the default
			// config's tokens (and their mark) and hashes, at least.
			for _, wr := range prepared {
				if n := wr.Memo.Len(); n < 5 {
					t.Fatalf("request %d: %d memoized values, want at least 5", wr.ID, n)
				}
			}
			for i, c := range configs {
				if got[i] != want[i] {
					t.Errorf("%s: the prepared run differs from the reference:\n%s", c, firstDiff(got[i], want[i]))
				}
			}
		})
	}
}

// firstDiff shows where two strings first differ.
func firstDiff(a, b string) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	lo := max(0, i-80)
	return fmt.Sprintf("got  …%s…\nwant …%s…", a[lo:min(len(a), i+80)], b[lo:min(len(b), i+80)])
}
