package sim

import (
	"testing"

	"github.com/eppsim/eppsim/epp/config"
	"github.com/eppsim/eppsim/epp/plugins"
	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/workload"
)

// TestMicroScenarios replays testdata/micro_mooncake.jsonl — A (hash ids
// 1,2), B (3,4), A again, 10 s apart, 1,024 tokens each, one output token —
// on one replica behind the EPP's default config. The step model is linear
// (1 ms per step + 1 µs per computed prompt token) with no ingest delay, so
// TTFT = 1 ms + uncached tokens × 1 µs.
func TestMicroScenarios(t *testing.T) {
	tests := []struct {
		name      string
		kvBlocks  int
		cached    [3]int
		predicted [3]float64
		ttftUs    [3]int64
	}{
		// Roomy cache: A's repeat reuses floor(1023/16)·16 = 1,008 tokens;
		// the approximate index (16 router blocks of 64 pseudo-tokens)
		// predicts all of it.
		{"large cache", 10_000, [3]int{0, 0, 1008}, [3]float64{0, 0, 1}, [3]int64{2024, 2024, 1016}},
		// 69 usable blocks: after A the free queue is [65..69, 64, 63, ..., 1]
		// (tail first). B needs 64 blocks: 65..69 and A's 64..6. A's repeat
		// reuses its first 5 blocks (80 tokens) while the index, which never
		// saw the evictions, still predicts the whole prompt.
		{"tiny cache evicts", 70, [3]int{0, 0, 80}, [3]float64{0, 0, 1}, [3]int64{2024, 2024, 1944}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := replica.LookupPreset("llama-3.1-8b-h100")
			p.Engine.NumGPUBlocksOverride = tc.kvBlocks
			p.Engine.CheckInvariants = true
			p.StepModel = "linear"
			p.Linear = replica.Linear{StepUs: 1000, PrefillTokenUs: 1}
			p.IngestUs, p.PerOutputTokenUs = 0, 0
			src, err := workload.Open("testdata/micro_mooncake.jsonl", workload.Options{Format: workload.FormatMooncake})
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			l, err := config.Default(config.Options{Registry: plugins.Builtin(), Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			var recs []Record
			if _, err := Run(src, l.Router(), UniformFleet(1, p), Options{OnRecord: func(r *Record) { recs = append(recs, *r) }}); err != nil {
				t.Fatal(err)
			}
			for i, r := range recs {
				if r.CachedTokens != tc.cached[i] || r.Predicted != tc.predicted[i] || !r.HasPredicted || r.TTFT != tc.ttftUs[i]*1000 {
					t.Errorf("request %d: cached %d predicted %v TTFT %dns; want %d, %v, %dµs",
						i, r.CachedTokens, r.Predicted, r.TTFT, tc.cached[i], tc.predicted[i], tc.ttftUs[i])
				}
			}
		})
	}
}
