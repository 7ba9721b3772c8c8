package report

import (
	"fmt"
	"strings"
)

// Knee is where the run's fleet stops keeping up with its traffic
// (docs/metrics.md, "The knee"): each replica's sustainable rate for the
// run's mean request (replica.SustainableRate: the rate at which its
// queue stops draining, and the limit that sets it), the fleet's sum of
// them, and how close the traffic came. Undefined (absent) for P/D runs,
// whose pods do not each prefill and decode, and for a run that measured
// nothing.
type Knee struct {
	// MaxRequestsPerS is the sum of the replicas' sustainable rates: the
	// fleet's when routing spreads the load in proportion to them.
	MaxRequestsPerS Num `json:"max_requests_per_s"`
	// Utilization is the offered load over MaxRequestsPerS: at the
	// traffic's busiest load stage when it runs in stages (an
	// inference-perf ladder), else over the whole run.
	Utilization Num `json:"utilization"`
	// BusiestReplica is the replica whose routed load came closest to its
	// own sustainable rate, BusiestUtilization that ratio and Binding the
	// limit that binds it there (max_num_seqs, kv_blocks,
	// max_num_batched_tokens or compute).
	BusiestReplica     string `json:"busiest_replica"`
	BusiestUtilization Num    `json:"busiest_utilization"`
	Binding            string `json:"binding"`
	// NearKnee is true when the busiest replica's utilization, with steps
	// as slow as the step-time interval allows, reaches 0.9: latencies
	// there change by orders of magnitude with a few per cent of step
	// time, and the intervals say how far.
	NearKnee bool `json:"near_knee"`
}

// LatencyIntervals are 90% intervals of the headline latencies (ms),
// each [low, high] (docs/latency.md, "Intervals").
type LatencyIntervals struct {
	// Basis says what they rest on: the calibration's out-of-sample error
	// factors, and near the knee also the run repeated with every step
	// at both ends of the step-time interval.
	Basis string `json:"basis"`
	// Beyond says, one sentence each, where the fleet is beyond what the
	// calibration was fitted on (a model, a TP size, a GPU it never saw) and what
	// the intervals take from that (replica.Calibration.IntervalsFor).
	Beyond  []string `json:"beyond_calibration,omitempty"`
	TTFTP50 [2]Num   `json:"ttft_p50"`
	TTFTP99 [2]Num   `json:"ttft_p99"`
	TPOTP50 [2]Num   `json:"tpot_p50"`
	E2EP99  [2]Num   `json:"e2e_p99"`
	// Scales are the step-time factors the knee simulations ran with
	// (absent when the run is not near its knee).
	Scales []Num `json:"step_scales,omitempty"`
}

// intervalCell renders an interval "low–high" with prec decimals (n/a
// when undefined).
func intervalCell(iv *LatencyIntervals, pick func(*LatencyIntervals) [2]Num, prec int) string {
	if iv == nil {
		return dash
	}
	b := pick(iv)
	if !b[0].Defined() || !b[1].Defined() {
		return na
	}
	return fn(b[0], prec) + "–" + fn(b[1], prec)
}

// kneeSentence says where a run stands against its knee, when it is near
// or past it: "default: near saturation: TTFT p99 between 0.4 s and 9.0
// s (90% interval); the busiest replica, vllm-3, runs at 93% of its
// sustainable rate, bound by max_num_seqs."
func kneeSentence(r NamedSummary) string {
	k := r.Summary.Knee
	if k == nil || !k.BusiestUtilization.Defined() {
		return ""
	}
	u := k.BusiestUtilization.Float()
	if !k.NearKnee && u < 1 {
		return ""
	}
	var b strings.Builder
	b.WriteString(r.Name + ": ")
	if u >= 1 {
		fmt.Fprintf(&b, "past its knee: the busiest replica, %s, is offered %.2f× its sustainable rate", k.BusiestReplica, u)
	} else {
		fmt.Fprintf(&b, "near saturation: the busiest replica, %s, runs at %.0f%% of its sustainable rate", k.BusiestReplica, 100*u)
	}
	fmt.Fprintf(&b, ", bound by %s", k.Binding)
	if iv := r.Summary.Intervals; u < 1 && iv != nil && len(iv.Scales) == 2 && iv.Scales[1].Defined() && iv.Scales[1] > 1 {
		// Why it counts as near: the rate a replica sustains falls as its
		// steps slow, so at the slow end of the step time's interval the
		// same load is that much nearer the knee.
		fmt.Fprintf(&b, " (about %.0f%% with every step ×%.3g, the slow end of the step time's interval)", 100*u*iv.Scales[1].Float(), iv.Scales[1].Float())
	}
	if iv := r.Summary.Intervals; iv != nil && iv.TTFTP99[0].Defined() && iv.TTFTP99[1].Defined() {
		fmt.Fprintf(&b, "; TTFT p99 between %s and %s (90%% interval)", seconds(iv.TTFTP99[0].Float()), seconds(iv.TTFTP99[1].Float()))
	}
	if k.Utilization.Defined() {
		fmt.Fprintf(&b, "; the fleet sustains about %s requests/s (%.0f%% used)", fn(k.MaxRequestsPerS, 2), 100*k.Utilization.Float())
	}
	return b.String() + "."
}

// seconds renders milliseconds as seconds with two significant digits
// ("0.42 s", "9.1 s", "120 s").
func seconds(ms float64) string {
	s := ms / 1000
	switch {
	case s < 1:
		return fmt.Sprintf("%.2f s", s)
	case s < 100:
		return fmt.Sprintf("%.1f s", s)
	}
	return fmt.Sprintf("%.0f s", s)
}
