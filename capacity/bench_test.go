package capacity

import (
	"context"
	"os"
	"testing"

	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/scenario"
	"github.com/eppsim/eppsim/sim"
	"github.com/eppsim/eppsim/workload"
)

const mooncakeTrace = "../../shared/traces/mooncake_conversation_trace.jsonl"

// benchConfigs are scenario's BenchmarkMooncakeShared configurations.
var benchConfigs = []string{"default", "round-robin", "least-queue", "../testdata/shared/epp-configs/epp-estimate-prefix-cache-config.yaml"}

// benchSLO holds at the trace's own rate for every benchConfigs entry on
// 16 replicas and fails a few times higher (a TTFT p99 of 2 s fails even
// unloaded: Mooncake's longest prompts take longer than that to prefill).
var benchSLO = []string{"ttft_p99<=10s"}

// BenchmarkMooncakeCapacity is issue #20's cost target: a max-rate search
// of the four benchConfigs on the shared Mooncake trace, 16 replicas,
// default tolerance, costs at most 15 single runs' CPU seconds. It reports
// the search's CPU seconds, a single full run's (the mean of the four
// configurations at the trace's rate, each read on its own, as `eppsim run`
// runs one), their ratio (single-runs), the same search with every
// simulation run to its end, and the early stop's saving (1 − with ÷
// without). Skipped without ../shared.
func BenchmarkMooncakeCapacity(b *testing.B) {
	if _, err := os.Stat(mooncakeTrace); err != nil {
		b.Skipf("shared trace not available: %v", err)
	}
	p, err := replica.LookupPreset("llama-3.1-8b-h100")
	if err != nil {
		b.Fatal(err)
	}
	spec := &scenario.Spec{Version: "bench", Trace: mooncakeTrace, Workload: workload.Options{Seed: 1},
		Fleet: sim.UniformFleet(16, p), Env: sim.Options{Seed: 1, KVEventLag: 5_000_000}}
	var epps []scenario.EPP
	for _, c := range benchConfigs {
		epps = append(epps, scenario.ForSource(c))
	}
	terms, err := ParseSLO(benchSLO)
	if err != nil {
		b.Fatal(err)
	}
	var single, search, full float64
	var sims, stopped int
	for b.Loop() {
		t0 := cpuSeconds()
		for _, e := range epps {
			if _, err := scenario.Run(spec, e, scenario.Hooks{}); err != nil {
				b.Fatal(err)
			}
		}
		single += (cpuSeconds() - t0) / float64(len(epps))
		for _, noStop := range []bool{false, true} {
			t0 = cpuSeconds()
			res, err := Do(context.Background(), Search{Spec: spec, EPPs: epps, SLO: terms, NoEarlyStop: noStop})
			if err != nil {
				b.Fatal(err)
			}
			d := cpuSeconds() - t0
			if noStop {
				full += d
				continue
			}
			search += d
			sims, stopped = res.Stats.Full+res.Stats.Stopped, res.Stats.Stopped
			for _, c := range res.Configs {
				if !c.Found {
					b.Errorf("%s: no answer (%s)", c.Name, c.Note)
				}
				b.Logf("%s: %.3f req/s (×%.3f), next %.3f, binding %s, limit %s", c.Name, c.MaxRate, c.MaxMultiplier, c.NextRate, c.Binding, c.BindingLimit)
			}
		}
	}
	n := float64(b.N)
	b.ReportMetric(single/n, "single-run-cpu-s")
	b.ReportMetric(search/n, "search-cpu-s")
	b.ReportMetric(search/single, "single-runs")
	b.ReportMetric(full/n, "no-early-stop-cpu-s")
	b.ReportMetric(1-search/full, "early-stop-saving")
	b.ReportMetric(float64(sims), "simulations")
	b.ReportMetric(float64(stopped), "stopped-early")
}
