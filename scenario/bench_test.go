package scenario

import (
	"os"
	"testing"

	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/sim"
	"github.com/eppsim/eppsim/workload"
)

// BenchmarkMooncakePrecise runs the whole Mooncake conversation trace on 16
// replicas (as sim's BenchmarkMooncakeFleet) behind the configs whose
// precise prefix producer follows every KV event of the fleet: the oracle
// baseline (16-token keys, zero lag) and llm-d's shipped precise config
// (64-token keys, 5 ms lag, as `eppsim run` defaults). It reports simulated
// requests per wall second. Run it with -benchtime 1x (make bench does).
func BenchmarkMooncakePrecise(b *testing.B) {
	const trace = "../../shared/traces/mooncake_conversation_trace.jsonl"
	if _, err := os.Stat(trace); err != nil {
		b.Skipf("shared trace not available: %v", err)
	}
	p, err := replica.LookupPreset("llama-3.1-8b-h100")
	if err != nil {
		b.Fatal(err)
	}
	for _, src := range []string{"oracle", "../../shared/epp-configs/epp-precise-prefix-cache-config.yaml"} {
		e := ForSource(src)
		b.Run(e.Name, func(b *testing.B) {
			spec := &Spec{Version: "bench", Trace: trace, Workload: workload.Options{Seed: 1},
				Fleet: sim.UniformFleet(16, p), Env: sim.Options{Seed: 1, KVEventLag: 5_000_000}}
			requests := 0
			for b.Loop() {
				s, err := Run(spec, e, Hooks{})
				if err != nil {
					b.Fatal(err)
				}
				if s.Requests.Complete != 12031 {
					b.Fatalf("%s: %d of 12031 requests completed", e.Name, s.Requests.Complete)
				}
				requests += s.Requests.Complete
			}
			b.ReportMetric(float64(requests)/b.Elapsed().Seconds(), "requests/s")
		})
	}
}
