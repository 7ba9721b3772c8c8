package report

import "testing"

// TestKneeSentence: a run near or past its knee says so, with the busiest
// replica, the binding limit, the TTFT p99 interval and the fleet's
// sustainable rate; a run well below it says nothing.
func TestKneeSentence(t *testing.T) {
	mk := func(u float64, near bool) NamedSummary {
		s := &Summary{Knee: &Knee{MaxRequestsPerS: 22.2, Utilization: Num(u * 0.9), BusiestReplica: "vllm-3",
			BusiestUtilization: Num(u), Binding: "max_num_seqs", NearKnee: near}}
		s.Intervals = &LatencyIntervals{TTFTP99: [2]Num{420, 9100}}
		return NamedSummary{Name: "default", Summary: s}
	}
	for _, tc := range []struct {
		u    float64
		near bool
		want string
	}{
		{0.93, true, "default: near saturation: the busiest replica, vllm-3, runs at 93% of its sustainable rate, bound by max_num_seqs; TTFT p99 between 0.42 s and 9.1 s (90% interval); the fleet sustains about 22.20 requests/s (84% used)."},
		{1.25, false, "default: past its knee: the busiest replica, vllm-3, is offered 1.25× its sustainable rate, bound by max_num_seqs; TTFT p99 between 0.42 s and 9.1 s (90% interval); the fleet sustains about 22.20 requests/s (112% used)."},
		{0.5, false, ""},
	} {
		if got := kneeSentence(mk(tc.u, tc.near)); got != tc.want {
			t.Errorf("utilization %v: %q, want %q", tc.u, got, tc.want)
		}
	}
	// With the knee simulations' scales: 0.77 × 1.52 = 1.17, so 117%.
	r := mk(0.77, true)
	r.Summary.Intervals.Scales = []Num{0.725, 1.5227}
	want := "default: near saturation: the busiest replica, vllm-3, runs at 77% of its sustainable rate, bound by max_num_seqs (about 117% with every step ×1.52, the slow end of the step time's interval); TTFT p99 between 0.42 s and 9.1 s (90% interval); the fleet sustains about 22.20 requests/s (69% used)."
	if got := kneeSentence(r); got != want {
		t.Errorf("with scales: %q, want %q", got, want)
	}
}
