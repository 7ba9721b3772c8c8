package report

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/sim"
)

// Findings are the sentences of "What this run shows" (report.md,
// report.html and the CLI): generated from the summaries' numbers only,
// comparing the configs with the first one and pointing at what explains
// the differences. Each kind of sentence has its own function below; which
// appear depends on thresholds stated there.
func Findings(runs []NamedSummary) []string {
	var rs []NamedSummary
	for _, r := range runs {
		if r.Summary != nil {
			rs = append(rs, r)
		}
	}
	var out []string
	// A run that measured nothing comes first: every other sentence
	// about it would be about an empty set.
	for _, r := range rs {
		if s := unmeasuredSentence(r); s != "" {
			out = append(out, s)
		}
	}
	if len(rs) > 1 {
		ref := rs[0]
		for _, x := range rs[1:] {
			if !Measured(x.Summary) || !Measured(ref.Summary) {
				continue
			}
			out = append(out, tradeOffSentence(x, ref))
			if s := queueSentence(x, ref); s != "" {
				out = append(out, s)
			}
		}
	}
	for _, r := range rs {
		if s := kneeSentence(r); s != "" {
			out = append(out, s)
		}
	}
	out = append(out, beyondSentences(rs)...)
	for _, r := range rs {
		if s := gatewaySentence(r); s != "" {
			out = append(out, s)
		}
	}
	for _, r := range rs {
		if s := compileSentence(r); s != "" {
			out = append(out, s)
		}
	}
	for _, r := range rs {
		if s := routingSentence(r); s != "" {
			out = append(out, s)
		}
	}
	for _, r := range rs {
		if s := pdSentence(r); s != "" {
			out = append(out, s)
		}
	}
	for _, r := range rs {
		if s := classSentence(r); s != "" {
			out = append(out, s)
		}
	}
	for _, r := range rs {
		if s := ladderSentence(r); s != "" {
			out = append(out, s)
		}
		if s := queueEffectSentence(r); s != "" {
			out = append(out, s)
		}
	}
	for _, r := range rs {
		for _, p := range producers {
			if pr := r.Summary.Prediction[p.key]; pr != nil {
				out = append(out, predictionSentence(r.Name, p.long, pr))
			}
		}
	}
	return out
}

// sameWithin is the relative difference below which two values are
// "about the same".
const sameWithin = 0.05

// ratioPhrase compares x with ref: "1.9× lower", "2.5× higher", "about
// the same", or "lower"/"higher" when ref or x is 0.
func ratioPhrase(x, ref float64) string {
	switch {
	case x == ref:
		return "the same"
	case x <= 0 || ref <= 0:
		if x < ref {
			return "lower"
		}
		return "higher"
	case x < ref && ref/x >= 1+sameWithin:
		return ff(ref/x, 1) + "× lower"
	case x > ref && x/ref >= 1+sameWithin:
		return ff(x/ref, 1) + "× higher"
	}
	return "about the same"
}

// tradeOffSentence: "round-robin: TTFT p50 1.9× lower than default (259.2
// vs 490.3 ms) at 3.0× lower true hit ratio (0.058 vs 0.176)."
func tradeOffSentence(x, ref NamedSummary) string {
	xs, rs := x.Summary, ref.Summary
	xt, rt := float64(xs.Latency.TTFT.P50), float64(rs.Latency.TTFT.P50)
	xh, rh := float64(xs.Cache.TrueHitRatio), float64(rs.Cache.TrueHitRatio)
	ttft := ratioPhrase(xt, rt)
	than := " than "
	if strings.HasSuffix(ttft, "same") {
		than = " as "
	}
	return x.Name + ": TTFT p50 " + ttft + than + ref.Name +
		" (" + ff(xt, 1) + " vs " + ff(rt, 1) + " ms) at " +
		ratioPhrase(xh, rh) + " true hit ratio (" + ff(xh, 3) + " vs " + ff(rh, 3) + ")."
}

// queueSentence says where the slower of two configs (by TTFT p50, when
// they differ by at least 5%) loses its time, among what the summaries
// measure: a longer replica queue wait (p50, at least 5% and 0.1 ms
// longer), slower engine steps (TPOT p50 at least 5% higher) and a less
// even load (max/mean at least 5% higher, with its idle replicas). ""
// when none differs.
func queueSentence(x, ref NamedSummary) string {
	slow, fast := x, ref
	if slow.Summary.Latency.TTFT.P50 < fast.Summary.Latency.TTFT.P50 {
		slow, fast = fast, slow
	}
	ss, fs := slow.Summary, fast.Summary
	if st, ft := float64(ss.Latency.TTFT.P50), float64(fs.Latency.TTFT.P50); !(st > 0) || !(st >= ft*(1+sameWithin)) {
		return ""
	}
	var parts []string
	if sq, fq := float64(ss.Latency.Queue.P50), float64(fs.Latency.Queue.P50); sq >= fq*(1+sameWithin) && sq-fq >= 0.1 {
		parts = append(parts, "requests wait "+ff(sq, 1)+" ms (p50) in a replica queue before their first step, against "+
			ff(fq, 1)+" ms under "+fast.Name)
	}
	// TPOT is undefined when every request had one output token: NaN
	// fails every comparison here.
	if sp, fp := float64(ss.Latency.TPOT.P50), float64(fs.Latency.TPOT.P50); fp > 0 && sp >= fp*(1+sameWithin) {
		parts = append(parts, "its replicas' steps are slower: TPOT p50 "+ff(sp, 2)+" ms against "+ff(fp, 2)+" ms")
	}
	if si, fi := float64(ss.Routing.Imbalance), float64(fs.Routing.Imbalance); si > 0 && fi > 0 && si >= fi*(1+sameWithin) {
		p := "the load is less even: the busiest replica gets " + ff(si, 2) + "× the mean request count against " + ff(fi, 2) + "×"
		if ss.Routing.IdleReplicas > fs.Routing.IdleReplicas {
			p += ", and " + fn(ss.Routing.IdleReplicas, 0) + " of " + strconv.Itoa(ss.Routing.Replicas) + " replicas get none"
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return ""
	}
	return "Under " + slow.Name + ", " + strings.Join(parts, "; ") + "."
}

// tieShareWorthSaying is the tie-break share from which the routing
// sentence mentions it.
const tieShareWorthSaying = 0.10

// routingSentence: "default decides 61.4% of requests by tie-break and
// leaves 6 of 16 replicas idle; the busiest, default/vllm-9, received
// 10.9% of the requests (1.74× the mean)." "" when nothing is worth
// saying (no idle replica and few ties) or the fleet has one replica.
func routingSentence(r NamedSummary) string {
	rt := r.Summary.Routing
	if !rt.IdleReplicas.Defined() {
		// Nothing measured: every replica would read as idle.
		return ""
	}
	var parts []string
	if rt.TieShare >= tieShareWorthSaying {
		parts = append(parts, "decides "+pctN(rt.TieShare)+" of requests by tie-break")
	}
	if rt.IdleReplicas > 0 {
		parts = append(parts, "leaves "+fn(rt.IdleReplicas, 0)+" of "+strconv.Itoa(rt.Replicas)+" replicas idle")
	}
	if len(parts) == 0 || rt.Replicas < 2 {
		return ""
	}
	s := r.Name + " " + strings.Join(parts, " and ")
	if rt.BusiestReplica != "" {
		s += "; the busiest, " + rt.BusiestReplica + ", received " + pctN(rt.BusiestShare) + " of the requests (" +
			fn(rt.Imbalance, 2) + "× the mean)"
	}
	return s + "."
}

// points formats a difference of two shares in percentage points.
func points(v float64) string { return ff(100*v, 1) + " points" }

// ladderSentence: "default: infinite cache 37.4% → best replica 17.8% →
// chosen replica 17.6% → reused 17.6% of prompt tokens; the fleet's cache
// capacity costs 19.6 points, routing 0.2 points (regret 0.322 M tokens)."
// "" without measured prompt tokens (the ladder is undefined).
func ladderSentence(r NamedSummary) string {
	c := r.Summary.Cache
	if !c.TrueHitRatio.Defined() || !c.InfiniteHitRatio.Defined() || !c.OracleHitRatio.Defined() || !c.RoutedHitRatio.Defined() {
		return ""
	}
	inf, orc, rtd := float64(c.InfiniteHitRatio), float64(c.OracleHitRatio), float64(c.RoutedHitRatio)
	return r.Name + ": infinite cache " + pct(inf) + " → best replica " + pct(orc) +
		" → chosen replica " + pct(rtd) + " → reused " + pctN(c.TrueHitRatio) + " of prompt tokens; the fleet's cache capacity costs " +
		points(inf-orc) + ", routing " + points(orc-rtd) + " (regret " + MTokens(c.RegretTokens) + " M tokens)."
}

// queueEffectWorthSaying is the queue effect (share of prompt tokens) from
// which it gets its own sentence.
const queueEffectWorthSaying = 0.005

// queueEffectSentence explains a reused share away from the routed one:
// "oracle: reused 64.6% of prompt tokens, 16.1 points above the chosen
// replica's share at routing time: prefixes computed while requests waited
// in the replica queue (+12.3 M tokens) outweigh evictions meanwhile
// (−0.5 M tokens); this is why it exceeds the best replica's 48.5%." ""
// when the effect is under half a point of the prompt tokens.
func queueEffectSentence(r NamedSummary) string {
	c := r.Summary.Cache
	if c.PromptTokens <= 0 {
		return ""
	}
	eff := float64(c.QueueEffectTokens) / float64(c.PromptTokens)
	if math.Abs(eff) < queueEffectWorthSaying {
		return ""
	}
	gained := "prefixes computed while requests waited in the replica queue (+" + MTokens(c.QueueGainedTokens) + " M tokens)"
	lost := "evictions while requests waited in the replica queue (−" + MTokens(c.QueueLostTokens) + " M tokens)"
	s := r.Name + ": reused " + pctN(c.TrueHitRatio) + " of prompt tokens, " + points(math.Abs(eff))
	if eff > 0 {
		s += " above the chosen replica's share at routing time: " + gained
		if c.QueueLostTokens > 0 {
			s += " outweigh evictions meanwhile (−" + MTokens(c.QueueLostTokens) + " M tokens)"
		}
		if c.TrueHitRatio > c.OracleHitRatio {
			s += "; this is why it exceeds the best replica's " + pctN(c.OracleHitRatio)
		}
	} else {
		s += " below the chosen replica's share at routing time: " + lost
		if c.QueueGainedTokens > 0 {
			s += " outweigh prefixes computed meanwhile (+" + MTokens(c.QueueGainedTokens) + " M tokens)"
		}
	}
	return s + "."
}

// overCauseText and underCauseText describe the causes of over- and
// under-prediction.
var (
	overCauseText = map[string]string{
		CauseEvictionUnseen:   "evictions the index did not see",
		CauseGranularity:      "block granularity (router blocks vs engine blocks)",
		CauseIndexMissed:      "blocks the index did not know",
		CauseSchedulingChange: "evictions while the request waited",
	}
	underCauseText = map[string]string{
		CauseEvictionUnseen:   "evictions the index did not see",
		CauseGranularity:      "block granularity (router blocks vs engine blocks)",
		CauseIndexMissed:      "cached blocks the index never learned (answers' decode blocks, index capacity, lag)",
		CauseSchedulingChange: "prefixes computed while the request waited",
	}
)

// topCause is the largest share of a cause map (ties: the first cause by
// name); ok is false for an empty map.
func topCause(m map[string]float64) (cause string, share float64, ok bool) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !ok || m[k] > share {
			cause, share, ok = k, m[k], true
		}
	}
	return cause, share, ok
}

// underWorthSaying is the under-predicted share from which its cause is
// named.
const underWorthSaying = 0.05

// predictionSentence: "default, approximate producer: 31.2% of its
// predicted tokens were not in the cache (over-prediction) and 2.0% of the
// true reuse was not predicted; 98.6% of the over-prediction: evictions the
// index did not see."
// The shares are undefined when the producer predicted nothing (Σ P = 0)
// or nothing was reused (Σ T = 0); the sentence says so instead.
func predictionSentence(name, producer string, p *Prediction) string {
	s := name + ", " + producer + ": "
	if p.OverPredictedTokens.Defined() {
		s += pct(float64(p.OverPredictedTokens)) + " of its predicted tokens were not in the cache (over-prediction)"
	} else {
		s += "it predicted no cached token"
	}
	if p.UnderPredictedTokens.Defined() {
		s += " and " + pct(float64(p.UnderPredictedTokens)) + " of the true reuse was not predicted"
	} else {
		s += " and no token was reused"
	}
	if c, share, ok := topCause(p.OverByCause); ok && p.OverPredictedTokens > 0 {
		s += "; " + pct(share) + " of the over-prediction: " + overCauseText[c]
	}
	if c, share, ok := topCause(p.UnderByCause); ok && p.UnderPredictedTokens >= underWorthSaying {
		s += "; " + pct(share) + " of the under-prediction: " + underCauseText[c]
	}
	return s + "."
}

// pdSentence summarises a P/D run (pd-offload.md A): how many requests
// were disaggregated and why not the others, what a KV read cost, and the
// legs' p50 in the prefill and decode pools. Nothing without P/D.
func pdSentence(r NamedSummary) string {
	pd := r.Summary.PD
	if pd == nil {
		return ""
	}
	s := r.Name + " disaggregates " + pct(pd.DisaggregatedShare) + " of requests"
	if pd.Disaggregated < pd.Requests {
		s += " (decode-only: " + reasonCells(pd) + ")"
	}
	if pd.Disaggregated > 0 {
		s += "; a KV read moves " + fn(pd.Transfer.MiBPerRank.P50, 0) + " MiB per rank in " + fn(pd.Transfer.TimeMs.P50, 1) +
			" ms (p50), and the decode pods already held " + pctN(pd.Transfer.DecodeHitShare) + " of those prompts"
	}
	if p := pd.Pools["prefill"]; p != nil && p.PrefillLegs > 0 {
		s += "; prefill legs wait " + fn(p.QueueMs.P50, 1) + " ms and take " + fn(p.PrefillLegMs.P50, 1) + " ms (p50) on " +
			strconv.Itoa(p.Replicas) + " prefill pods at " + pct(p.MeanKVUsage) + " mean KV usage"
	}
	if d := pd.Pools["decode"]; d != nil && d.DecodeLegs > 0 {
		s += "; decode legs reach their first token in " + fn(d.DecodeLegMs.P50, 1) + " ms (p50) on " + strconv.Itoa(d.Replicas) +
			" decode pods (load imbalance " + fn(d.LoadImbalance, 2) + ")"
	}
	return s + "."
}

// Measured reports whether a summary has a measured request: a request
// after warm-up that completed. Without one every latency, throughput,
// hit ratio and routing share is undefined.
func Measured(s *Summary) bool { return s != nil && s.Latency.E2E.Mean.Defined() }

// Warnings are the sentences of the runs that measured nothing (the first
// findings too), for stderr: such a run exits 0 — "this fleet serves
// nothing" is an answer — but none of its metrics has a value.
func Warnings(runs []NamedSummary) []string {
	var out []string
	for _, r := range runs {
		if r.Summary != nil {
			if s := unmeasuredSentence(r); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// rejectionText describes the rejection causes (Record.Cause) in the
// finding of a run that measured nothing.
var rejectionText = map[string]string{
	"engine-rejected":   "refused by the engine",
	"no-endpoints":      "left without an endpoint by the EPP's filters",
	"legacy-saturated":  "shed by the EPP's saturation gate",
	"fc-capacity":       "shed at flow control's queue capacity",
	"fc-ttl-expired":    "expired in flow control's queue",
	"fc-no-endpoints":   "left without an endpoint by flow control",
	"fc-other":          "rejected by flow control",
	"admit-denied":      "denied by an Admit plugin",
	"evicted":           "evicted in flight",
	"bad-request":       "refused as a bad request",
	"scheduling-failed": "failed in the scheduler",
	"client-timeout":    "aborted by the client's timeout",
	"gateway-overflow":  "refused by the gateway's circuit breaker",
}

// maxRejectionCauses bounds the causes a finding lists.
const maxRejectionCauses = 3

// unmeasuredSentence explains a run without a measured request: "default:
// every request was rejected (50 of 50): 50 refused by the engine
// (engine-rejected), e.g. “request 0: 608 prompt + 217 output tokens exceed
// the engine's maximum sequence length 10 (max_model_len)”; nothing is
// measured, so latency, throughput, the hit-rate ladder and the routing
// shares are undefined (null in summary.json, n/a in the tables)." ""
// for a run that measured something.
func unmeasuredSentence(r NamedSummary) string {
	s := r.Summary
	if Measured(s) {
		return ""
	}
	req := s.Requests
	warmup := ""
	if s.Config != nil {
		warmup = s.Config.Workload.Warmup
	}
	// Requests after warm-up that ended (rejected: none completed);
	// without the aggregator's account (a summary read from JSON), the
	// rejections of the whole run.
	rejected, known := 0, s.rejections != nil
	for _, x := range s.rejections {
		rejected += x.requests
	}
	if !known {
		rejected = req.Rejected
	}
	after := ""
	if warmup != "" {
		after = " after the warm-up"
	}
	var out string
	switch {
	case req.Total == 0 && req.InFlight == 0:
		out = r.Name + ": the workload injected no request"
	case !s.OfferedLoad.ArrivalSpanS.Defined() && req.InFlight == 0:
		// No request after warm-up reached the EPP.
		out = r.Name + ": all " + strconv.Itoa(req.Total) + " requests arrived during the warm-up"
		if warmup != "" {
			out += " (--warmup " + warmup + ")"
		}
		out += ", which every metric leaves out"
	case req.InFlight == 0:
		out = r.Name + ": every request" + after + " was rejected (" + strconv.Itoa(rejected) + " of " + strconv.Itoa(rejected) + ")"
	default:
		out = r.Name + ": no request" + after + " completed: " + strconv.Itoa(rejected) + " rejected, " +
			strconv.Itoa(req.InFlight) + " still in flight at the end (a replica could never schedule them)"
	}
	if rejected > 0 {
		var parts []string
		for i, x := range s.rejections {
			if i == maxRejectionCauses {
				parts = append(parts, "…")
				break
			}
			p := strconv.Itoa(x.requests) + " " + cmp.Or(rejectionText[x.cause], "rejected") + " (" + x.cause + ")"
			if x.example != "" {
				p += ", e.g. “" + x.example + "”"
			}
			parts = append(parts, p)
		}
		if !known && len(req.Reasons) > 0 {
			parts = append(parts, "e.g. “"+slices.Sorted(maps.Keys(req.Reasons))[0]+"”")
		}
		if len(parts) > 0 {
			out += ": " + strings.Join(parts, "; ")
		}
	}
	return out + "; nothing is measured, so latency, throughput, the hit-rate ladder and the routing shares are undefined " +
		"(null in summary.json, n/a in the tables)."
}

// beyondSentences say where the configs' fleets are beyond what their
// step-time calibration was fitted on (LatencyIntervals.Beyond), each
// sentence once, led by the configs it concerns unless it concerns all:
// "Beyond the calibration: TP 8 is outside the calibration's TP sizes
// (1, 2, 4); the intervals include its leave-one-TP-size-out errors."
func beyondSentences(rs []NamedSummary) []string {
	var notes []string
	who := map[string][]string{}
	for _, r := range rs {
		iv := r.Summary.Intervals
		if iv == nil {
			continue
		}
		for _, n := range iv.Beyond {
			if _, ok := who[n]; !ok {
				notes = append(notes, n)
			}
			who[n] = append(who[n], r.Name)
		}
	}
	out := make([]string, 0, len(notes))
	for _, n := range notes {
		if len(who[n]) == len(rs) {
			out = append(out, BeyondSentence(n))
		} else {
			out = append(out, strings.Join(who[n], ", ")+": beyond the calibration: "+n+".")
		}
	}
	return out
}

// BeyondSentence is the finding of one LatencyIntervals.Beyond note, as
// every output that lists them words it.
func BeyondSentence(note string) string { return "Beyond the calibration: " + note + "." }

// RejectedAfterWarmup is how many requests after warm-up were rejected
// with cause (sim.Record.Cause): counted by the aggregator, so 0 for a
// summary read back from JSON.
func (s *Summary) RejectedAfterWarmup(cause string) int {
	for _, x := range s.rejections {
		if x.cause == cause {
			return x.requests
		}
	}
	return 0
}

// gatewaySentence says how many requests the gateway's circuit breaker
// refused (sim.Options.GatewayMaxRequests), since every other figure is
// over the requests it let through, or, without a limit, that more
// requests were in flight at once than Envoy's default lets through: "default: the gateway refused 3884
// of 17084 requests (22.7%) with HTTP 500 (gateway-overflow): its
// circuit breaker lets 1024 requests through at once
// (--gateway-max-requests); latency and throughput are over the requests
// it let through." "" when it refused none.
func gatewaySentence(r NamedSummary) string {
	s := r.Summary
	refused := s.RejectedAfterWarmup(sim.CauseGatewayOverflow)
	limit := ""
	if s.Config != nil {
		switch v := s.Config.Environment["gateway_max_requests"].(type) {
		case int:
			limit = " " + strconv.Itoa(v)
		case float64:
			limit = " " + strconv.FormatFloat(v, 'f', -1, 64)
		}
	}
	if limit == "" && s.Requests.PeakInFlight > sim.DefaultEnvoyMaxRequests {
		return fmt.Sprintf("%s: up to %d requests were in flight at once, more than the %d that an Envoy-based gateway with its default circuit breaker lets through to the EPP; behind such a gateway the rest would get HTTP 500 (--gateway-max-requests %d simulates it; docs/flow-control.md).",
			r.Name, s.Requests.PeakInFlight, sim.DefaultEnvoyMaxRequests, sim.DefaultEnvoyMaxRequests)
	}
	if refused == 0 || s.offered == 0 {
		return ""
	}
	return fmt.Sprintf("%s: the gateway refused %d of %d requests (%.1f%%) with HTTP 500 (%s): its circuit breaker lets%s requests through at once (--gateway-max-requests); latency and throughput are over the requests it let through.",
		r.Name, refused, s.offered, 100*float64(refused)/float64(s.offered), sim.CauseGatewayOverflow, limit)
}

// compileSentence says how often the run's engines stopped to compile a
// fused-MoE kernel at first use: "default: its engines stopped 6 times,
// 1.2 s each, to compile vLLM's fused MoE kernel for step shapes their
// start-up had not run, as freshly started engines do; the requests that
// arrived meanwhile make the first minutes' TTFT tail (docs/latency.md,
// "Tails"; kernel_cache_warm: true models pods that keep their Triton
// cache)." "" when none did.
func compileSentence(r NamedSummary) string {
	n := r.Summary.KernelCompiles
	if n == 0 {
		return ""
	}
	times := "times"
	if n == 1 {
		times = "time"
	}
	return fmt.Sprintf("%s: its engines stopped %d %s, %s s each, to compile vLLM's fused MoE kernel for step shapes their start-up had not run, as freshly started engines do; the requests that arrived meanwhile make the first minutes' TTFT tail (docs/latency.md, \"Tails\"; kernel_cache_warm: true models pods that keep their Triton cache).",
		r.Name, n, times, strconv.FormatFloat(2*replica.MoEKernelCompileMs/1000.0, 'f', -1, 64))
}
