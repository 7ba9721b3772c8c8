package scenario

import (
	"math"
	"testing"

	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/report"
	"github.com/eppsim/eppsim/sim"
)

// TestRunKnee: a run's knee is every replica's sustainable rate for the
// run's mean request (replica.SustainableRate, recomputed here from the
// summary's own figures), summed over the fleet, with the busiest
// replica's routed share of the offered load over its own rate.
func TestRunKnee(t *testing.T) {
	spec := testSpec(t, 200)
	s, err := Run(spec, ForSource("round-robin"), Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	k := s.Knee
	if k == nil {
		t.Fatal("no knee")
	}
	p := spec.Fleet[0].Preset
	cfg, err := p.EngineConfig()
	if err != nil {
		t.Fatal(err)
	}
	m, err := p.Model()
	if err != nil {
		t.Fatal(err)
	}
	done := float64(s.Requests.Complete)
	prompt := float64(s.Cache.PromptTokens) / done
	mix := replica.Mix{PromptTokens: prompt, CachedTokens: prompt * s.Cache.TrueHitRatio.Float(),
		OutputTokens: s.Throughput.OutputTokensPerS.Float() / s.Throughput.RequestsPerS.Float()}
	one, err := replica.SustainableRate(cfg, m, mix)
	if err != nil {
		t.Fatal(err)
	}
	// Two identical replicas; round robin gives each half the load.
	if got := k.MaxRequestsPerS.Float(); math.Abs(got-2*one.MaxRate) > 1e-9*got {
		t.Errorf("fleet rate %v, want 2 × %v", got, one.MaxRate)
	}
	if want := s.OfferedLoad.RequestsPerS.Float() / (2 * one.MaxRate); math.Abs(k.Utilization.Float()-want) > 1e-12 {
		t.Errorf("utilization %v, want %v", k.Utilization, want)
	}
	busiest := 0
	for _, n := range s.Routing.PerReplica {
		busiest = max(busiest, n)
	}
	share := float64(busiest) / float64(s.Requests.Complete)
	if want := s.OfferedLoad.RequestsPerS.Float() * share / one.MaxRate; math.Abs(k.BusiestUtilization.Float()-want) > 1e-12 || k.Binding != one.Binding {
		t.Errorf("busiest %v bound by %s, want %v by %s", k.BusiestUtilization, k.Binding, want, one.Binding)
	}
	// Far below the knee: the intervals are the calibration's factors
	// alone (TTFT p99 takes ttft_p99's, TPOT p50 itl_mean's).
	if k.NearKnee {
		t.Errorf("near knee at utilization %v", k.BusiestUtilization)
	}
	f := p.Calibration.Intervals
	iv := s.Intervals
	if iv == nil || len(iv.Scales) != 0 {
		t.Fatalf("intervals %+v", iv)
	}
	for _, tc := range []struct {
		name   string
		got    [2]report.Num
		v      report.Num
		metric string
	}{
		{"TTFT p99", iv.TTFTP99, s.Latency.TTFT.P99, "ttft_p99"},
		{"TPOT p50", iv.TPOTP50, s.Latency.TPOT.P50, "itl_mean"},
		{"E2E p99", iv.E2EP99, s.Latency.E2E.P99, "e2e_p99"},
	} {
		want := [2]float64{tc.v.Float() * f[tc.metric].Low, tc.v.Float() * f[tc.metric].High}
		if math.Abs(tc.got[0].Float()-want[0]) > 1e-9*want[0] || math.Abs(tc.got[1].Float()-want[1]) > 1e-9*want[1] {
			t.Errorf("%s interval %v, want %v", tc.name, tc.got, want)
		}
	}
}

// TestWidenIntervals: an interval widens to what the fast and slow runs
// measured, never narrows, and records the scales.
func TestWidenIntervals(t *testing.T) {
	s, fast, slow := &report.Summary{}, &report.Summary{}, &report.Summary{}
	s.Intervals = &report.LatencyIntervals{Basis: "x",
		TTFTP50: [2]report.Num{10, 20}, TTFTP99: [2]report.Num{30, 60}, TPOTP50: [2]report.Num{5, 6}, E2EP99: [2]report.Num{100, 200}}
	fast.Latency.TTFT.P50, slow.Latency.TTFT.P50 = 12, 18  // inside: unchanged
	fast.Latency.TTFT.P99, slow.Latency.TTFT.P99 = 25, 900 // both ends widen
	fast.Latency.TPOT.P50, slow.Latency.TPOT.P50 = 4.5, 6.5
	fast.Latency.E2E.P99, slow.Latency.E2E.P99 = 90, report.Undefined() // an undefined end is ignored
	WidenIntervals(s, fast, slow, 0.9, 1.1)
	iv := s.Intervals
	for _, tc := range []struct {
		name string
		got  [2]report.Num
		want [2]report.Num
	}{
		{"TTFT p50", iv.TTFTP50, [2]report.Num{10, 20}},
		{"TTFT p99", iv.TTFTP99, [2]report.Num{25, 900}},
		{"TPOT p50", iv.TPOTP50, [2]report.Num{4.5, 6.5}},
		{"E2E p99", iv.E2EP99, [2]report.Num{90, 200}},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	if len(iv.Scales) != 2 || iv.Scales[0] != 0.9 || iv.Scales[1] != 1.1 {
		t.Errorf("scales %v", iv.Scales)
	}
}

// TestKneeConfigSGLang: an SGLang replica's knee takes its own limits in
// SustainableRate's terms — max_running_requests as the slots, the token
// pool as blocks of one page plus the null block the estimate leaves out,
// the step's prefill budget (chunked_prefill_size, at most
// max_prefill_tokens; max_prefill_tokens alone with chunking off) — not
// the vLLM engine arguments the preset also holds. The pools are capped
// with max_total_tokens well under what an 8B model leaves on an H100, so
// the cap is the pool: 160,000 tokens in pages of 16 are 10,000 blocks.
func TestKneeConfigSGLang(t *testing.T) {
	base, err := replica.LookupPreset("llama-3.1-8b-h100")
	if err != nil {
		t.Fatal(err)
	}
	vllm, err := base.EngineConfig()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		flags replica.SGLangFlags
		want  replica.Config
	}{
		{"chunked", replica.SGLangFlags{MaxRunningRequests: 64, PageSize: 16, ChunkedPrefillSize: 2048, MaxTotalTokens: 160_000},
			replica.Config{MaxNumSeqs: 64, MaxNumBatchedTokens: 2048, NumGPUBlocks: 10_001, BlockSize: 16}},
		{"chunk above the prefill cap", replica.SGLangFlags{MaxRunningRequests: 32, ChunkedPrefillSize: 8192, MaxPrefillTokens: 4096, MaxTotalTokens: 100_000},
			replica.Config{MaxNumSeqs: 32, MaxNumBatchedTokens: 4096, NumGPUBlocks: 100_001, BlockSize: 1}},
		{"chunking off", replica.SGLangFlags{MaxRunningRequests: 200, ChunkedPrefillSize: -1, MaxTotalTokens: 50_000},
			replica.Config{MaxNumSeqs: 200, MaxNumBatchedTokens: 16384, NumGPUBlocks: 50_001, BlockSize: 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := base
			p.EngineType, p.SGLang = replica.EngineSGLang, &c.flags
			got, err := kneeConfig(sim.ReplicaSpec{Name: "s", Preset: p})
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
	got, err := kneeConfig(sim.ReplicaSpec{Name: "v", Preset: base})
	if err != nil || got.MaxNumSeqs != vllm.MaxNumSeqs || got.NumGPUBlocks != vllm.NumGPUBlocks {
		t.Errorf("vLLM replica: %+v, %v; want its engine config %+v", got, err, vllm)
	}
}
