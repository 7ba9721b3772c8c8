package main

import (
	"strings"
	"testing"
)

// TestParseMetricWeights: calibrate's --metric-weight values, good and bad.
func TestParseMetricWeights(t *testing.T) {
	w, err := parseMetricWeights([]string{"ttft_p99=3", "itl_mean=0.5", "ttft_p99=2"})
	if err != nil {
		t.Fatal(err)
	}
	if len(w) != 2 || w["ttft_p99"] != 2 || w["itl_mean"] != 0.5 {
		t.Errorf("weights %v, want ttft_p99=2 (the last one), itl_mean=0.5", w)
	}
	if w, err := parseMetricWeights(nil); err != nil || w != nil {
		t.Errorf("no flag: %v, %v", w, err)
	}
	for _, tc := range []struct{ in, want string }{
		{"ttft_p99", "want METRIC=W"},
		{"ttft_p98=3", `unknown metric "ttft_p98"`},
		{"ttft_p99=0", "must be a number > 0"},
		{"ttft_p99=-1", "must be a number > 0"},
		{"ttft_p99=x", "must be a number > 0"},
		{"ttft_p99=NaN", "must be a number > 0"},
		{"ttft_p99=+Inf", "must be a number > 0"},
	} {
		_, err := parseMetricWeights([]string{tc.in})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--metric-weight") {
			t.Errorf("%q: error %v, want one naming --metric-weight and %q", tc.in, err, tc.want)
		}
	}
}
