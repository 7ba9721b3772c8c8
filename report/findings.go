package report

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
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
	if len(rs) > 1 {
		ref := rs[0]
		for _, x := range rs[1:] {
			out = append(out, tradeOffSentence(x, ref))
			if s := queueSentence(x, ref); s != "" {
				out = append(out, s)
			}
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
		out = append(out, ladderSentence(r))
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
	ttft := ratioPhrase(xs.Latency.TTFT.P50, rs.Latency.TTFT.P50)
	than := " than "
	if strings.HasSuffix(ttft, "same") {
		than = " as "
	}
	return x.Name + ": TTFT p50 " + ttft + than + ref.Name +
		" (" + ff(xs.Latency.TTFT.P50, 1) + " vs " + ff(rs.Latency.TTFT.P50, 1) + " ms) at " +
		ratioPhrase(xs.Cache.TrueHitRatio, rs.Cache.TrueHitRatio) + " true hit ratio (" +
		ff(xs.Cache.TrueHitRatio, 3) + " vs " + ff(rs.Cache.TrueHitRatio, 3) + ")."
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
	if st, ft := ss.Latency.TTFT.P50, fs.Latency.TTFT.P50; !(st > 0) || st < ft*(1+sameWithin) {
		return ""
	}
	var parts []string
	if sq, fq := ss.Latency.Queue.P50, fs.Latency.Queue.P50; sq >= fq*(1+sameWithin) && sq-fq >= 0.1 {
		parts = append(parts, "requests wait "+ff(sq, 1)+" ms (p50) in a replica queue before their first step, against "+
			ff(fq, 1)+" ms under "+fast.Name)
	}
	if sp, fp := ss.Latency.TPOT.P50, fs.Latency.TPOT.P50; fp > 0 && sp >= fp*(1+sameWithin) {
		parts = append(parts, "its replicas' steps are slower: TPOT p50 "+ff(sp, 2)+" ms against "+ff(fp, 2)+" ms")
	}
	if si, fi := ss.Routing.Imbalance, fs.Routing.Imbalance; si > 0 && fi > 0 && si >= fi*(1+sameWithin) {
		p := "the load is less even: the busiest replica gets " + ff(si, 2) + "× the mean request count against " + ff(fi, 2) + "×"
		if ss.Routing.IdleReplicas > fs.Routing.IdleReplicas {
			p += ", and " + strconv.Itoa(ss.Routing.IdleReplicas) + " of " + strconv.Itoa(ss.Routing.Replicas) + " replicas get none"
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
	var parts []string
	if rt.TieShare >= tieShareWorthSaying {
		parts = append(parts, "decides "+pct(rt.TieShare)+" of requests by tie-break")
	}
	if rt.IdleReplicas > 0 {
		parts = append(parts, "leaves "+strconv.Itoa(rt.IdleReplicas)+" of "+strconv.Itoa(rt.Replicas)+" replicas idle")
	}
	if len(parts) == 0 || rt.Replicas < 2 {
		return ""
	}
	s := r.Name + " " + strings.Join(parts, " and ")
	if rt.BusiestReplica != "" {
		s += "; the busiest, " + rt.BusiestReplica + ", received " + pct(rt.BusiestShare) + " of the requests (" +
			ff(rt.Imbalance, 2) + "× the mean)"
	}
	return s + "."
}

// points formats a difference of two shares in percentage points.
func points(v float64) string { return ff(100*v, 1) + " points" }

// ladderSentence: "default: infinite cache 37.4% → best replica 17.8% →
// chosen replica 17.6% → reused 17.6% of prompt tokens; the fleet's cache
// capacity costs 19.6 points, routing 0.2 points (regret 0.322 M tokens)."
func ladderSentence(r NamedSummary) string {
	c := r.Summary.Cache
	return r.Name + ": infinite cache " + pct(c.InfiniteHitRatio) + " → best replica " + pct(c.OracleHitRatio) +
		" → chosen replica " + pct(c.RoutedHitRatio) + " → reused " + pct(c.TrueHitRatio) + " of prompt tokens; the fleet's cache capacity costs " +
		points(c.InfiniteHitRatio-c.OracleHitRatio) + ", routing " + points(c.OracleHitRatio-c.RoutedHitRatio) +
		" (regret " + MTokens(c.RegretTokens) + " M tokens)."
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
	s := r.Name + ": reused " + pct(c.TrueHitRatio) + " of prompt tokens, " + points(math.Abs(eff))
	if eff > 0 {
		s += " above the chosen replica's share at routing time: " + gained
		if c.QueueLostTokens > 0 {
			s += " outweigh evictions meanwhile (−" + MTokens(c.QueueLostTokens) + " M tokens)"
		}
		if c.TrueHitRatio > c.OracleHitRatio {
			s += "; this is why it exceeds the best replica's " + pct(c.OracleHitRatio)
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
func predictionSentence(name, producer string, p *Prediction) string {
	s := name + ", " + producer + ": " + pct(p.OverPredictedTokens) + " of its predicted tokens were not in the cache (over-prediction) and " +
		pct(p.UnderPredictedTokens) + " of the true reuse was not predicted"
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
		s += "; a KV read moves " + ff(pd.Transfer.MiBPerRank.P50, 0) + " MiB per rank in " + ff(pd.Transfer.TimeMs.P50, 1) +
			" ms (p50), and the decode pods already held " + pct(pd.Transfer.DecodeHitShare) + " of those prompts"
	}
	if p := pd.Pools["prefill"]; p != nil && p.PrefillLegs > 0 {
		s += "; prefill legs wait " + ff(p.QueueMs.P50, 1) + " ms and take " + ff(p.PrefillLegMs.P50, 1) + " ms (p50) on " +
			strconv.Itoa(p.Replicas) + " prefill pods at " + pct(p.MeanKVUsage) + " mean KV usage"
	}
	if d := pd.Pools["decode"]; d != nil && d.DecodeLegs > 0 {
		s += "; decode legs reach their first token in " + ff(d.DecodeLegMs.P50, 1) + " ms (p50) on " + strconv.Itoa(d.Replicas) +
			" decode pods (load imbalance " + ff(d.LoadImbalance, 2) + ")"
	}
	return s + "."
}
