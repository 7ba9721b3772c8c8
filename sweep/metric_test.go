package sweep

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestParseMetric(t *testing.T) {
	for _, tc := range []struct{ in, path string }{
		{"latency_ms.ttft.p99", "latency_ms.ttft.p99"},
		{"ttft_p99", "latency_ms.ttft.p99"},
		{"ttft_p99_ms", "latency_ms.ttft.p99"},
		{"e2e_mean", "latency_ms.e2e.mean"},
		{"queue_max", "latency_ms.queue.max"},
		{"throughput", "throughput.requests_per_s"},
		{"throughput.requests_per_s", "throughput.requests_per_s"},
		{"output_tps", "throughput.output_tokens_per_s"},
		{"true_hit_ratio", "cache.true_hit_ratio"},
		{"cache.true_hit_ratio", "cache.true_hit_ratio"},
		{"regret", "cache.regret_tokens"},
		{"mae", "prediction.approx-prefix-cache-producer.mae"},
		{"prediction.precise-prefix-cache-producer.phantom_rate", "prediction.precise-prefix-cache-producer.phantom_rate"},
		{"prediction.approx-prefix-cache-producer.error_by_cause.granularity", "prediction.approx-prefix-cache-producer.error_by_cause.granularity"},
		{"imbalance", "routing.load_imbalance"},
		{"routing.requests_per_replica.default/vllm-0", "routing.requests_per_replica.default/vllm-0"},
		{"requests.rejected_reasons.queue_full", "requests.rejected_reasons.queue_full"},
		{" completed ", "requests.completed"},
		{"sim.events", "sim.events"},
	} {
		m, err := ParseMetric(tc.in)
		if err != nil || m.Path != tc.path {
			t.Errorf("ParseMetric(%q) = %q, %v; want %q", tc.in, m.Path, err, tc.path)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"", "empty metric"},
		{"ttft_p98", "unknown metric"},
		{"latency_ms.ttft", "is not a number"},
		{"latency_ms.ttft.p99.x", "is not an object"},
		{"latency_ms..p99", "empty path element"},
		{"config.seed", "not a comparable metric"},
		{"sim.wall_s", "not a comparable metric"},
		{"prediction.approx-prefix-cache-producer.calibration", "is not a number"},
		{"cache.per_replica_hit_ratio.a.b", "is a number"},
		{"prediction.other-producer.mae", "unknown metric"},
	} {
		_, err := ParseMetric(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseMetric(%q): error %v, want %q", tc.in, err, tc.want)
		}
	}
}

func TestMetricValue(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal([]byte(`{"latency_ms":{"ttft":{"p99":123.5}},"requests":{"completed":40},
		"cache":{"per_replica_hit_ratio":{"default/vllm-1":0.25}}}`), &doc); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		metric string
		want   float64
	}{
		{"ttft_p99", 123.5}, {"completed", 40}, {"cache.per_replica_hit_ratio.default/vllm-1", 0.25},
		{"requests.rejected_reasons.queue_full", 0}, {"mae", math.NaN()}, {"cache.per_replica_hit_ratio.default/vllm-7", math.NaN()},
	} {
		m, err := ParseMetric(tc.metric)
		if err != nil {
			t.Fatal(err)
		}
		got := m.Value(doc)
		if got != tc.want && !(math.IsNaN(got) && math.IsNaN(tc.want)) {
			t.Errorf("%s = %v, want %v", tc.metric, got, tc.want)
		}
	}
}

func TestParseObjectiveConstraint(t *testing.T) {
	for _, tc := range []struct {
		in, str string
		max     bool
	}{
		{"ttft_p99", "latency_ms.ttft.p99", false},
		{"+ttft_p99", "latency_ms.ttft.p99", false},
		{"-throughput.requests_per_s", "-throughput.requests_per_s", true},
		{"-true_hit_ratio", "-cache.true_hit_ratio", true},
	} {
		o, err := ParseObjective(tc.in)
		if err != nil || o.String() != tc.str || o.Maximize != tc.max {
			t.Errorf("ParseObjective(%q) = %v (max %v), %v", tc.in, o, o.Maximize, err)
		}
	}
	if _, err := ParseObjective("-"); err == nil {
		t.Error(`ParseObjective("-") succeeded`)
	}
	if _, err := ParseObjectives([]string{"ttft_p99", "e2e_p99", "throughput"}); err == nil || !strings.Contains(err.Error(), "at most two") {
		t.Errorf("three objectives: %v", err)
	}
	if _, err := ParseObjectives([]string{"ttft_p99", "-latency_ms.ttft.p99"}); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("same objective twice: %v", err)
	}
	if os, err := ParseObjectives(nil); err != nil || len(os) != 1 || os[0].String() != DefaultObjective {
		t.Errorf("default objective: %v, %v", os, err)
	}
	for _, tc := range []struct {
		in, str string
		holds   map[float64]bool
	}{
		{"latency_ms.ttft.p99<2000", "latency_ms.ttft.p99<2000", map[float64]bool{1999: true, 2000: false}},
		{"ttft_p99 <= 2000", "latency_ms.ttft.p99<=2000", map[float64]bool{2000: true, 2001: false}},
		{"true_hit_ratio>0.5", "cache.true_hit_ratio>0.5", map[float64]bool{0.5: false, 0.6: true}},
		{"rejected>=0", "requests.rejected>=0", map[float64]bool{0: true, -1: false, math.NaN(): false}},
	} {
		c, err := ParseConstraint(tc.in)
		if err != nil || c.String() != tc.str {
			t.Errorf("ParseConstraint(%q) = %v, %v", tc.in, c, err)
			continue
		}
		for v, want := range tc.holds {
			if c.Holds(v) != want {
				t.Errorf("%s holds for %v: %v", c, v, !want)
			}
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"ttft_p99", "want METRIC<VALUE"},
		{"ttft_p99==2", `operator "=="`},
		{"ttft_p99!=2", `operator "!="`},
		{"ttft_p99<", "bound"},
		{"ttft_p99<abc", "bound"},
		{"ttft_p99<<2", "bound"},
		{"nope<2", "unknown metric"},
	} {
		_, err := ParseConstraint(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseConstraint(%q): error %v, want %q", tc.in, err, tc.want)
		}
	}
}

// FuzzParseObjective: no panic; a parsed objective round-trips.
func FuzzParseObjective(f *testing.F) {
	for _, s := range []string{"ttft_p99", "-throughput.requests_per_s", "+cache.true_hit_ratio", "--x", "a..b", "routing.requests_per_replica.x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := ParseObjective(s)
		if err != nil {
			return
		}
		o2, err := ParseObjective(o.String())
		if err != nil || o2.String() != o.String() || o2.Maximize != o.Maximize {
			t.Fatalf("%q → %q → %q, %v", s, o.String(), o2.String(), err)
		}
	})
}

// FuzzParseConstraint: no panic; a parsed constraint round-trips.
func FuzzParseConstraint(f *testing.F) {
	for _, s := range []string{"latency_ms.ttft.p99<2000", "ttft_p99 <= 1e3", "rejected>=0", "x<", "<", ">=", "a<=b<c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseConstraint(s)
		if err != nil {
			return
		}
		c2, err := ParseConstraint(c.String())
		if err != nil || c2.String() != c.String() {
			t.Fatalf("%q → %q → %v, %v", s, c.String(), c2, err)
		}
	})
}
