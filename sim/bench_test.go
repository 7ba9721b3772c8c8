package sim

import (
	"fmt"
	"os"
	"testing"

	"github.com/eppsim/eppsim/epp/config"
	"github.com/eppsim/eppsim/epp/plugins"
	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/workload"
)

// mooncakeTrace is the shared one-hour Mooncake conversation trace (DESIGN.md
// "Reference documents"); benchmarks skip when it is absent.
const mooncakeTrace = "../../shared/traces/mooncake_conversation_trace.jsonl"

// BenchmarkMooncakeFleet is the performance target of DESIGN.md
// ("Performance"): the whole Mooncake conversation trace (12,031 requests,
// mean prompt 12k tokens) on 16 replicas of Llama-3.1-8B on H100 behind the
// EPP's default config, as `eppsim run --trace ... --replicas 16` runs it.
// It reports simulated requests per wall second and the process's peak
// resident memory. Run it with -benchtime 1x (make bench does): one
// iteration is a whole one-hour trace.
func BenchmarkMooncakeFleet(b *testing.B) { benchMooncakeFleet(b, replica.EngineVLLM) }

// BenchmarkMooncakeFleetSGLang is BenchmarkMooncakeFleet on SGLang
// replicas (replica/sglang, page size 1: the radix tree matches and
// inserts token by token), the same fleet otherwise.
func BenchmarkMooncakeFleetSGLang(b *testing.B) { benchMooncakeFleet(b, replica.EngineSGLang) }

func benchMooncakeFleet(b *testing.B, engineType string) {
	if _, err := os.Stat(mooncakeTrace); err != nil {
		b.Skipf("shared trace not available: %v", err)
	}
	preset, err := replica.LookupPreset("llama-3.1-8b-h100")
	if err != nil {
		b.Fatal(err)
	}
	preset.EngineType = engineType
	fleet := make([]ReplicaSpec, 16)
	for i := range fleet {
		fleet[i] = ReplicaSpec{
			Name:    fmt.Sprintf("default/%s-%d", engineType, i),
			Address: fmt.Sprintf("10.0.%d.%d:8000", i/250, i%250+1),
			Preset:  preset,
		}
	}
	b.ReportAllocs()
	requests := 0
	for b.Loop() {
		loaded, err := config.Default(config.Options{Registry: plugins.Builtin(), Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		src, err := workload.Open(mooncakeTrace, workload.Options{Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		router := loaded.Router()
		router.Record = true // as `eppsim run` does: scorer traces feed the tie share
		completed := 0
		res, err := Run(src, router, fleet, Options{Seed: 1, OnRecord: func(rec *Record) {
			if rec.Outcome == Completed {
				completed++
			}
		}})
		src.Close()
		if err != nil {
			b.Fatal(err)
		}
		if res.Injected != 12031 || completed != res.Injected {
			b.Fatalf("injected %d, completed %d: want all 12031 requests completed", res.Injected, completed)
		}
		requests += res.Injected
	}
	b.ReportMetric(float64(requests)/b.Elapsed().Seconds(), "requests/s")
	if rss := peakRSSBytes(); rss > 0 {
		b.ReportMetric(rss/(1<<20), "peak-RSS-MiB")
	}
}
