package latency

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sameDist compares distributions bit for bit, NaN equal to NaN.
func sameDist(a, b Distribution) bool {
	eq := func(x, y float64) bool { return x == y || (math.IsNaN(x) && math.IsNaN(y)) }
	return eq(a.Mean, b.Mean) && eq(a.P90, b.P90) && eq(a.P99, b.P99)
}

// lifecycleJSON is a report with the given latency sections.
func lifecycleJSON(e2e, ttft string) string {
	return `{"load_summary": {"count": 10, "requested_rate": 2.0}, "successes": {"count": 9, "latency": {"request_latency": ` + e2e +
		`, "time_to_first_token": ` + ttft + `}}, "failures": {"count": 1, "request_latency": null}}`
}

func TestParseLifecycle(t *testing.T) {
	const e2e = `{"mean": 2.0, "min": 1.0, "p90": 2.5, "p99": 2.9, "max": 3.0}`
	const ttft = `{"mean": 0.05, "min": 0.01, "p90": 0.08, "p99": 0.1, "max": 0.2}`
	cases := []struct {
		name, data string
		want       Lifecycle // checked when err is ""
		err        string
	}{
		{"whole", lifecycleJSON(e2e, ttft), Lifecycle{E2E: Distribution{2, 2.5, 2.9}, TTFT: Distribution{0.05, 0.08, 0.1}, Successes: 9, Failures: 1, RequestedRate: 2}, ""},
		// Builds of mid-2025 wrote mean, min, p10, p50, p90 and max only.
		{"no p99", lifecycleJSON(`{"mean": 2.0, "min": 1.0, "p10": 1.2, "p50": 1.9, "p90": 2.5, "max": 3.0}`, ttft),
			Lifecycle{E2E: Distribution{2, 2.5, math.NaN()}, TTFT: Distribution{0.05, 0.08, 0.1}, Successes: 9, Failures: 1, RequestedRate: 2}, ""},
		{"mean only", `{"successes": {"latency": {"request_latency": {"mean": 1}, "time_to_first_token": {"mean": 0.5}}}}`,
			Lifecycle{E2E: Distribution{1, math.NaN(), math.NaN()}, TTFT: Distribution{0.5, math.NaN(), math.NaN()}, Successes: -1, Failures: -1, RequestedRate: math.NaN()}, ""},
		{"NaN elsewhere is fine", strings.Replace(lifecycleJSON(e2e, ttft), `"failures"`, `"throughput": {"x": NaN, "y": -Infinity, "z": "NaN in a string"}, "failures"`, 1),
			Lifecycle{E2E: Distribution{2, 2.5, 2.9}, TTFT: Distribution{0.05, 0.08, 0.1}, Successes: 9, Failures: 1, RequestedRate: 2}, ""},
		{"ttft above e2e", lifecycleJSON(`{"mean": 0.04}`, ttft), Lifecycle{}, "successes.latency.time_to_first_token.mean: 0.05 s exceeds successes.latency.request_latency.mean 0.04 s"},
		{"mean zero", lifecycleJSON(e2e, `{"mean": 0}`), Lifecycle{}, "time_to_first_token.mean: 0: must be > 0 seconds"},
		{"mean null", lifecycleJSON(e2e, `{"mean": null}`), Lifecycle{}, "time_to_first_token.mean: null"},
		{"mean Infinity", lifecycleJSON(e2e, `{"mean": Infinity}`), Lifecycle{}, "time_to_first_token.mean: expected a number, got Infinity"},
		{"mean huge", lifecycleJSON(e2e, `{"mean": 1e999}`), Lifecycle{}, "time_to_first_token.mean: 1e999 is out of range"},
		{"mean a century", lifecycleJSON(`{"mean": 3.2e9}`, ttft), Lifecycle{}, "request_latency.mean: 3.2e+09 seconds is not a request's latency"},
		{"mean outside min and max", lifecycleJSON(`{"mean": 5, "min": 1, "max": 3}`, ttft), Lifecycle{}, "request_latency.mean: 5 is outside [min, max] = [1, 3]"},
		{"p90 below min", lifecycleJSON(`{"mean": 2, "min": 1, "p90": 0.5}`, ttft), Lifecycle{}, "request_latency.p90: 0.5 is less than min 1"},
		{"latency a list", lifecycleJSON(`[2.0]`, ttft), Lifecycle{}, "successes.latency.request_latency: expected an object, got an array"},
		{"no latency", `{"successes": {"count": 3}}`, Lifecycle{}, "successes.latency: missing (have count)"},
		{"successes null", `{"successes": null}`, Lifecycle{}, "successes: expected an object, got null"},
		{"empty object", `{}`, Lifecycle{}, "successes: missing (the object is empty)"},
		{"count fractional", strings.Replace(lifecycleJSON(e2e, ttft), `"count": 9`, `"count": 9.5`, 1), Lifecycle{}, "successes.count: expected a count, got 9.5"},
		{"rate a string", strings.Replace(lifecycleJSON(e2e, ttft), `"requested_rate": 2.0`, `"requested_rate": "2/s"`, 1), Lifecycle{}, "load_summary.requested_rate: expected a number, got \"2/s\""},
		{"two values", lifecycleJSON(e2e, ttft) + "{}", Lifecycle{}, "more than one value"},
		{"truncated", lifecycleJSON(e2e, ttft)[:40], Lifecycle{}, "invalid JSON"},
		{"whitespace", "  \n", Lifecycle{}, "empty file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseLifecycle([]byte(c.data), "r/summary_lifecycle_metrics.json")
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || !strings.HasPrefix(err.Error(), "r/summary_lifecycle_metrics.json: ") {
					t.Fatalf("error %v, want one naming the file and saying %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			eq := func(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }
			if !sameDist(got.E2E, c.want.E2E) || !sameDist(got.TTFT, c.want.TTFT) || got.Successes != c.want.Successes ||
				got.Failures != c.want.Failures || !eq(got.RequestedRate, c.want.RequestedRate) {
				t.Errorf("got %+v, want %+v", *got, c.want)
			}
		})
	}
}

func TestLifecycleMeasurementInMS(t *testing.T) {
	l := Lifecycle{E2E: Distribution{2.5, 3, math.NaN()}, TTFT: Distribution{0.025, 0.03, 0.04}}
	m := l.Measurement()
	if !sameDist(m.E2E, Distribution{2500, 3000, math.NaN()}) || !sameDist(m.TTFT, Distribution{25, 30, 40}) {
		t.Errorf("%+v", m)
	}
}

func TestPythonNonFinite(t *testing.T) {
	cases := map[string]string{
		`{"a": NaN, "b": [Infinity, -Infinity]}`: `{"a": "NaN", "b": ["Infinity", "-Infinity"]}`,
		`{"a": "NaN \" Infinity", "b": 1}`:       `{"a": "NaN \" Infinity", "b": 1}`,
		`{"a\\": NaN}`:                           `{"a\\": "NaN"}`,
		`{"a": 1}`:                               `{"a": 1}`,
	}
	for in, want := range cases {
		if got := string(pythonNonFinite([]byte(in))); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
}

// FuzzParseLifecycle: any input is read or refused, never a panic; what is
// read is a latency summary.
func FuzzParseLifecycle(f *testing.F) {
	reports, _ := filepath.Glob(filepath.Join("testdata", "results", "*", "*_lifecycle_metrics.json"))
	for _, path := range reports {
		if data, err := os.ReadFile(path); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(lifecycleJSON(`{"mean": 2, "p90": 3}`, `{"mean": 0.1, "p99": NaN}`)))
	f.Add([]byte(`{"successes": {"latency": {"request_latency": {"mean": 1e308}, "time_to_first_token": {"mean": 5e-324}}}}`))
	f.Add([]byte(`{"successes": {"latency": null}}`))
	f.Add([]byte(`[{"a": -Infinity}, "\u0000", 1e999]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := ParseLifecycle(data, "f.json")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.json: ") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		for _, d := range []Distribution{l.E2E, l.TTFT} {
			if !(d.Mean > 0) || math.IsInf(d.Mean, 0) {
				t.Fatalf("mean %v", d.Mean)
			}
			if !math.IsNaN(d.P90) && !math.IsNaN(d.P99) && d.P99 < d.P90*(1-1e-9) {
				t.Fatalf("p99 %v < p90 %v", d.P99, d.P90)
			}
		}
		if l.TTFT.Mean > l.E2E.Mean*(1+1e-9) {
			t.Fatalf("TTFT %v > E2E %v", l.TTFT.Mean, l.E2E.Mean)
		}
		m := l.Measurement()
		for _, v := range []float64{m.E2E.Mean, m.E2E.P90, m.E2E.P99, m.TTFT.Mean, m.TTFT.P90, m.TTFT.P99} {
			if math.IsInf(v, 0) {
				t.Fatalf("measurement %+v", m)
			}
		}
	})
}
