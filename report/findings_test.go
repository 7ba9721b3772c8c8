package report

import (
	"slices"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/sim"
)

// fixedSummary is a summary with only what the findings read, shaped like
// the default config on the shared Mooncake trace and 16 replicas.
func fixedSummary(ttftP50, queueP50, trueRatio, imbalance float64, idle int) *Summary {
	s := &Summary{}
	s.Latency.TTFT.P50, s.Latency.Queue.P50, s.Latency.TPOT.P50 = Num(ttftP50), Num(queueP50), 8
	if idle > 0 {
		s.Latency.TPOT.P50 = 10.03
	}
	s.Cache.TrueHitRatio = Num(trueRatio)
	s.Routing.Imbalance, s.Routing.IdleReplicas, s.Routing.Replicas = Num(imbalance), Num(idle), 16
	return s
}

func TestRatioPhrase(t *testing.T) {
	for _, tc := range []struct {
		x, ref float64
		want   string
	}{
		{259.2, 490.3, "1.9× lower"},
		{490.3, 196.1, "2.5× higher"},
		{100, 104, "about the same"},
		{104, 100, "about the same"},
		{0.2, 0.2, "the same"},
		{0, 0.176, "lower"},
		{0.05, 0, "higher"},
	} {
		if got := ratioPhrase(tc.x, tc.ref); got != tc.want {
			t.Errorf("ratioPhrase(%v, %v) = %q, want %q", tc.x, tc.ref, got, tc.want)
		}
	}
}

func TestTradeOffSentence(t *testing.T) {
	def := NamedSummary{"default", fixedSummary(490.3, 230.4, 0.1756, 1.74, 6)}
	rr := NamedSummary{"round-robin", fixedSummary(196.1, 12.0, 0.0585, 1.00, 0)}
	// 490.3 / 196.1 = 2.50; 0.1756 / 0.0585 = 3.00.
	want := "round-robin: TTFT p50 2.5× lower than default (196.1 vs 490.3 ms) at 3.0× lower true hit ratio (0.059 vs 0.176)."
	if got := tradeOffSentence(rr, def); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	// Within 5%: "about the same as".
	orc := NamedSummary{"oracle", fixedSummary(500.1, 230.4, 0.1683, 1.75, 5)}
	want = "oracle: TTFT p50 about the same as default (500.1 vs 490.3 ms) at about the same true hit ratio (0.168 vs 0.176)."
	if got := tradeOffSentence(orc, def); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestQueueSentence(t *testing.T) {
	def := NamedSummary{"default", fixedSummary(490.3, 230.4, 0.1756, 1.74, 6)}
	rr := NamedSummary{"round-robin", fixedSummary(196.1, 12.0, 0.0585, 1.00, 0)}
	want := "Under default, requests wait 230.4 ms (p50) in a replica queue before their first step, against 12.0 ms under round-robin; " +
		"its replicas' steps are slower: TPOT p50 10.03 ms against 8.00 ms; the load is less even: the busiest replica gets 1.74× the mean request count against 1.00×, and 6 of 16 replicas get none."
	// The slower config is named first whichever way round they come.
	for _, pair := range [][2]NamedSummary{{rr, def}, {def, rr}} {
		if got := queueSentence(pair[0], pair[1]); got != want {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
	}
	// Same queue wait, same balance: nothing measured explains it.
	a := NamedSummary{"a", fixedSummary(300, 10, 0.2, 1.2, 0)}
	b := NamedSummary{"b", fixedSummary(200, 10, 0.2, 1.2, 0)}
	if got := queueSentence(a, b); got != "" {
		t.Fatalf("no difference to report, got %q", got)
	}
	// TTFT within 5%: nothing to explain.
	c := NamedSummary{"c", fixedSummary(204, 100, 0.2, 2, 3)}
	if got := queueSentence(c, b); got != "" {
		t.Fatalf("TTFT about the same, got %q", got)
	}
	// Only the queue differs.
	d := NamedSummary{"d", fixedSummary(400, 150, 0.2, 1.2, 0)}
	if got, want := queueSentence(b, d), "Under d, requests wait 150.0 ms (p50) in a replica queue before their first step, against 10.0 ms under b."; got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestRoutingSentence(t *testing.T) {
	s := fixedSummary(490.3, 230.4, 0.1756, 1.74, 6)
	s.Routing.TieShare, s.Routing.BusiestReplica, s.Routing.BusiestShare = 0.5612, "default/vllm-9", 0.10875
	want := "default decides 56.1% of requests by tie-break and leaves 6 of 16 replicas idle; the busiest, default/vllm-9, " +
		"received 10.9% of the requests (1.74× the mean)."
	if got := routingSentence(NamedSummary{"default", s}); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	// Ties below 10% are not mentioned; with neither ties nor idle
	// replicas there is no sentence.
	s.Routing.TieShare = 0.05
	if got, want := routingSentence(NamedSummary{"default", s}), "default leaves 6 of 16 replicas idle; the busiest, default/vllm-9, received 10.9% of the requests (1.74× the mean)."; got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	s.Routing.IdleReplicas = 0
	if got := routingSentence(NamedSummary{"default", s}); got != "" {
		t.Fatalf("nothing to say, got %q", got)
	}
}

func TestLadderSentence(t *testing.T) {
	s := &Summary{}
	s.Cache.InfiniteHitRatio, s.Cache.OracleHitRatio, s.Cache.RoutedHitRatio, s.Cache.TrueHitRatio = 0.374, 0.178, 0.176, 0.1756
	s.Cache.RegretTokens = 322160
	want := "default: infinite cache 37.4% → best replica 17.8% → chosen replica 17.6% → reused 17.6% of prompt tokens; " +
		"the fleet's cache capacity costs 19.6 points, routing 0.2 points (regret 0.322 M tokens)."
	if got := ladderSentence(NamedSummary{"default", s}); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestQueueEffectSentence(t *testing.T) {
	// The overloaded replica: true 0.646 above oracle 0.485.
	s := &Summary{}
	s.Cache.PromptTokens = 100_000_000
	s.Cache.OracleHitRatio, s.Cache.RoutedHitRatio, s.Cache.TrueHitRatio = 0.485, 0.480, 0.646
	s.Cache.QueueGainedTokens, s.Cache.QueueLostTokens = 17_100_000, 500_000
	s.Cache.QueueEffectTokens = 16_600_000
	want := "overloaded: reused 64.6% of prompt tokens, 16.6 points above the chosen replica's share at routing time: " +
		"prefixes computed while requests waited in the replica queue (+17.1 M tokens) outweigh evictions meanwhile (−0.5 M tokens); " +
		"this is why it exceeds the best replica's 48.5%."
	if got := queueEffectSentence(NamedSummary{"overloaded", s}); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	// Evictions dominate.
	s.Cache.QueueGainedTokens, s.Cache.QueueLostTokens, s.Cache.QueueEffectTokens = 0, 2_000_000, -2_000_000
	s.Cache.TrueHitRatio = 0.46
	want = "overloaded: reused 46.0% of prompt tokens, 2.0 points below the chosen replica's share at routing time: " +
		"evictions while requests waited in the replica queue (−2 M tokens)."
	if got := queueEffectSentence(NamedSummary{"overloaded", s}); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	// Under half a point: nothing to say.
	s.Cache.QueueEffectTokens = -400_000
	if got := queueEffectSentence(NamedSummary{"overloaded", s}); got != "" {
		t.Fatalf("small effect, got %q", got)
	}
}

func TestPredictionSentence(t *testing.T) {
	p := &Prediction{OverPredictedTokens: 0.3124, UnderPredictedTokens: 0.0204,
		OverByCause:  map[string]float64{CauseEvictionUnseen: 0.978, CauseGranularity: 0.012, CauseSchedulingChange: 0.010},
		UnderByCause: map[string]float64{CauseIndexMissed: 0.7, CauseSchedulingChange: 0.3}}
	want := "default, approximate producer: 31.2% of its predicted tokens were not in the cache (over-prediction) and 2.0% of the true reuse " +
		"was not predicted; 97.8% of the over-prediction: evictions the index did not see."
	if got := predictionSentence("default", "approximate producer", p); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	// From 5% under-predicted, its main cause is named too.
	p.UnderPredictedTokens = 0.08
	want = "default, approximate producer: 31.2% of its predicted tokens were not in the cache (over-prediction) and 8.0% of the true reuse " +
		"was not predicted; 97.8% of the over-prediction: evictions the index did not see; 70.0% of the under-prediction: cached blocks the " +
		"index never learned (answers' decode blocks, index capacity, lag)."
	if got := predictionSentence("default", "approximate producer", p); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// TestFindingsOrder: comparisons with the first config, then routing, then
// each config's ladder (and queue effect), then the producers.
func TestFindingsOrder(t *testing.T) {
	def := fixedSummary(490.3, 230.4, 0.1756, 1.74, 6)
	def.Prediction = map[string]*Prediction{approxProducer: {OverPredictedTokens: 0.3}}
	rr := fixedSummary(196.1, 12.0, 0.0585, 1.00, 0)
	runs := []NamedSummary{{"default", def}, {"round-robin", rr}, {"missing", nil}}
	want := []string{
		tradeOffSentence(runs[1], runs[0]),
		queueSentence(runs[1], runs[0]),
		routingSentence(runs[0]),
		ladderSentence(runs[0]),
		ladderSentence(runs[1]),
		predictionSentence("default", "approximate producer", def.Prediction[approxProducer]),
	}
	if got := Findings(runs); !slices.Equal(got, want) {
		t.Fatalf("got\n%q\nwant\n%q", got, want)
	}
	if Findings(nil) != nil {
		t.Fatal("findings without runs")
	}
}

func TestMTokens(t *testing.T) {
	for _, tc := range []struct {
		tokens int64
		want   string
	}{{0, "0"}, {24_510_000, "24.5"}, {322_160, "0.322"}, {144, "0.000144"}, {16, "0.000016"}, {-9_500_000, "-9.5"}, {7_457_378, "7.46"}, {1_234_567_890, "1230"}} {
		if got := MTokens(tc.tokens); got != tc.want {
			t.Errorf("MTokens(%d) = %q, want %q", tc.tokens, got, tc.want)
		}
	}
}

// TestBeyondSentences: where the fleets are beyond their calibration,
// each sentence comes once, led by the configs it concerns unless it
// concerns them all; configs without intervals say nothing.
func TestBeyondSentences(t *testing.T) {
	const tp8 = "TP 8 is outside the calibration's TP sizes (1, 2, 4); the intervals include its leave-one-TP-size-out errors"
	const h200 = "H200 is outside the calibration's GPUs (H100); no leave-one-GPU-out errors measure it (too few runs held out, or the protocol was not run), so the intervals leave it out"
	mk := func(name string, beyond ...string) NamedSummary {
		s := &Summary{Intervals: &LatencyIntervals{Beyond: beyond}}
		return NamedSummary{Name: name, Summary: s}
	}
	for _, tc := range []struct {
		name string
		runs []NamedSummary
		want []string
	}{
		{"all alike", []NamedSummary{mk("a", tp8), mk("b", tp8)}, []string{"Beyond the calibration: " + tp8 + "."}},
		{"some", []NamedSummary{mk("a", tp8), mk("b", tp8, h200), mk("c")}, []string{"a, b: beyond the calibration: " + tp8 + ".", "b: beyond the calibration: " + h200 + "."}},
		{"none", []NamedSummary{mk("a"), {Name: "b", Summary: &Summary{}}}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := beyondSentences(tc.runs); !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestGatewaySentence: 3 of 8 requests after warm-up refused by the
// gateway's circuit breaker (a warm-up refusal and an engine refusal are
// not counted): 3 of 8 is 37.5%; the limit comes from the run's
// environment, as an int (a run) or a float64 (a summary read from JSON).
func TestGatewaySentence(t *testing.T) {
	for _, limit := range []any{1024, float64(1024)} {
		a := NewAggregator()
		a.Add(&sim.Record{ID: 99, Replica: -1, Warmup: true, Outcome: sim.Rejected, Cause: sim.CauseGatewayOverflow})
		for i := range 8 {
			r := &sim.Record{ID: int64(i), Replica: i % 2, Arrival: int64(i) * 1e9, PromptTokens: 100, OutputTokens: 5,
				TTFT: 1e8, E2E: 5e8, Completion: int64(i)*1e9 + 5e8, Outcome: sim.Completed}
			switch i {
			case 1, 4, 6:
				*r = sim.Record{ID: int64(i), Replica: -1, Arrival: int64(i) * 1e9, PromptTokens: 100, OutputTokens: 5,
					Outcome: sim.Rejected, HTTPStatus: 500, Cause: sim.CauseGatewayOverflow}
			case 7:
				*r = sim.Record{ID: int64(i), Replica: -1, Arrival: int64(i) * 1e9, PromptTokens: 100, OutputTokens: 5,
					Outcome: sim.Rejected, HTTPStatus: 400, Cause: sim.CauseEngineRejected}
			}
			a.Add(r)
		}
		s := a.Summary(fleet4())
		s.Config = &RunConfig{Environment: map[string]any{"gateway_max_requests": limit}}
		want := "default: the gateway refused 3 of 8 requests (37.5%) with HTTP 500 (gateway-overflow): its circuit breaker lets 1024 requests through at once (--gateway-max-requests); latency and throughput are over the requests it let through."
		f := Findings([]NamedSummary{{Name: "default", Summary: s}})
		if !slices.Contains(f, want) {
			t.Errorf("limit %T: findings %q\nwant %q", limit, f, want)
		}
	}
	// Without a limit: more in flight at once than Envoy's default (1025
	// and more) is said, 1024 is not.
	for _, tc := range []struct {
		peak int
		want bool
	}{{1025, true}, {1024, false}} {
		a := NewAggregator()
		a.Add(&sim.Record{ID: 0, Replica: 0, TTFT: 1e8, E2E: 5e8, OutputTokens: 5, Outcome: sim.Completed})
		s := a.Summary(fleet4())
		s.Config = &RunConfig{Environment: map[string]any{"epp_latency": "0s"}}
		s.Requests.PeakInFlight = tc.peak
		want := "default: up to 1025 requests were in flight at once, more than the 1024 that an Envoy-based gateway with its default circuit breaker lets through to the EPP; behind such a gateway the rest would get HTTP 500 (--gateway-max-requests 1024 simulates it; docs/flow-control.md)."
		if got := slices.Contains(Findings([]NamedSummary{{Name: "default", Summary: s}}), want); got != tc.want {
			t.Errorf("peak %d: sentence %v, want %v", tc.peak, got, tc.want)
		}
	}
	// None refused: no sentence.
	a := NewAggregator()
	a.Add(&sim.Record{ID: 0, Replica: 0, TTFT: 1e8, E2E: 5e8, OutputTokens: 5, Outcome: sim.Completed})
	for _, s := range Findings([]NamedSummary{{Name: "default", Summary: a.Summary(fleet4())}}) {
		if strings.Contains(s, "gateway") {
			t.Errorf("finding %q without a refusal", s)
		}
	}
}

// TestCompileSentence: a run whose engines compiled fused-MoE kernels
// says how often and how long (2 × replica.MoEKernelCompileMs = 1.2 s),
// in the singular for one; a run without compiles says nothing.
func TestCompileSentence(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, ""},
		{1, "mixtral: its engines stopped 1 time, 1.2 s each, to compile vLLM's fused MoE kernel"},
		{6, "mixtral: its engines stopped 6 times, 1.2 s each, to compile vLLM's fused MoE kernel"},
	} {
		s := fixedSummary(100, 10, 0.5, 1, 0)
		s.KernelCompiles = tc.n
		got := compileSentence(NamedSummary{Name: "mixtral", Summary: s})
		if (tc.want == "") != (got == "") || !strings.HasPrefix(got, tc.want) {
			t.Errorf("%d compiles: %q, want it to start %q", tc.n, got, tc.want)
		}
		if tc.n > 0 && !slices.Contains(Findings([]NamedSummary{{Name: "mixtral", Summary: s}}), got) {
			t.Errorf("%d compiles: not among the findings", tc.n)
		}
	}
}
