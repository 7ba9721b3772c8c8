package latency

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
)

// The files of an inference-perf results directory that eppsim reads
// (inference-perf's report names; storage.local_storage.report_file_prefix,
// when set, comes before each).
const (
	// ConfigFile is the resolved config inference-perf writes beside its
	// reports.
	ConfigFile = "config.yaml"
	// SummaryFile is the whole run's request-lifecycle report.
	SummaryFile = "summary_lifecycle_metrics.json"
)

// StageFile is the name of load stage k's request-lifecycle report.
func StageFile(k int) string { return fmt.Sprintf("stage_%d_lifecycle_metrics.json", k) }

// maxLatencySeconds bounds a latency in a lifecycle report (a year).
const maxLatencySeconds = 365 * 24 * 3600

// maxLifecycleBytes bounds a lifecycle report: real ones are a few
// kilobytes (the per-request report, which is not read, is the big one).
const maxLifecycleBytes = 16 << 20

// Lifecycle is what eppsim reads of one inference-perf request-lifecycle
// report (summary_lifecycle_metrics.json or stage_N_lifecycle_metrics.json).
// Latencies are in seconds, as inference-perf writes them.
type Lifecycle struct {
	// E2E is successes.latency.request_latency and TTFT
	// successes.latency.time_to_first_token: the mean (required) and the
	// p90 and p99 (NaN when the report has none: inference-perf writes
	// the percentiles of report.request_lifecycle.percentiles, and builds
	// before it wrote no p99).
	E2E, TTFT Distribution
	// Successes and Failures are successes.count and failures.count (-1
	// when absent).
	Successes, Failures int
	// RequestedRate is load_summary.requested_rate, which stage reports
	// carry (NaN when absent).
	RequestedRate float64
}

// Measurement converts the report's latencies to a Measurement (ms).
func (l *Lifecycle) Measurement() Measurement {
	ms := func(d Distribution) Distribution {
		return Distribution{Mean: d.Mean * 1000, P90: d.P90 * 1000, P99: d.P99 * 1000}
	}
	return Measurement{E2E: ms(l.E2E), TTFT: ms(l.TTFT)}
}

// ParseLifecycle reads an inference-perf request-lifecycle report. It
// checks what it reads: the latency sections are objects with a positive
// mean, percentiles that are numbers in order (min ≤ p90 ≤ p99 ≤ max),
// and the mean TTFT is at most the mean request latency. Python writes
// NaN and Infinity as bare words, which are not JSON; they are read, and
// refused where a latency is needed. Errors name the file and the field:
// "results/summary_lifecycle_metrics.json:
// successes.latency.time_to_first_token.mean: missing".
func ParseLifecycle(data []byte, name string) (*Lifecycle, error) {
	p := jsonPath{file: name}
	dec := json.NewDecoder(bytes.NewReader(pythonNonFinite(data)))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: empty file (want an inference-perf lifecycle report)", name)
		}
		return nil, fmt.Errorf("%s: invalid JSON: %w", name, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: invalid JSON: more than one value", name)
	}
	top, err := p.object(root, "")
	if err != nil {
		return nil, err
	}
	l := &Lifecycle{Successes: -1, Failures: -1, RequestedRate: math.NaN()}
	succ, err := p.memberObject(top, "", "successes")
	if err != nil {
		return nil, err
	}
	if l.Successes, err = p.optCount(succ, "successes", "count"); err != nil {
		return nil, err
	}
	lat, err := p.memberObject(succ, "successes", "latency")
	if err != nil {
		return nil, err
	}
	if l.E2E, err = p.distribution(lat, "successes.latency", "request_latency",
		"null: no request succeeded"); err != nil {
		return nil, err
	}
	if l.TTFT, err = p.distribution(lat, "successes.latency", "time_to_first_token",
		"null: no streamed response with two or more tokens (inference-perf measures TTFT on streamed responses only: api.streaming must be true)"); err != nil {
		return nil, err
	}
	if l.TTFT.Mean > l.E2E.Mean*(1+1e-9) {
		return nil, p.errf("successes.latency.time_to_first_token.mean", "%g s exceeds successes.latency.request_latency.mean %g s; not an inference-perf report", l.TTFT.Mean, l.E2E.Mean)
	}
	if v, ok := top["failures"]; ok && v != nil {
		fail, err := p.object(v, "failures")
		if err != nil {
			return nil, err
		}
		if l.Failures, err = p.optCount(fail, "failures", "count"); err != nil {
			return nil, err
		}
	}
	if v, ok := top["load_summary"]; ok && v != nil {
		ls, err := p.object(v, "load_summary")
		if err != nil {
			return nil, err
		}
		if r, ok := ls["requested_rate"]; ok && r != nil {
			if l.RequestedRate, err = p.number(r, "load_summary.requested_rate"); err != nil {
				return nil, err
			}
		}
	}
	return l, nil
}

// jsonPath names a JSON file in errors.
type jsonPath struct{ file string }

func (p jsonPath) errf(field, format string, args ...any) error {
	if field == "" {
		return fmt.Errorf("%s: %s", p.file, fmt.Sprintf(format, args...))
	}
	return fmt.Errorf("%s: %s: %s", p.file, field, fmt.Sprintf(format, args...))
}

func joinField(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// describeJSON names a decoded value's kind for errors.
func describeJSON(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		if x == pyNaN || x == pyInf || x == pyNegInf {
			return x
		}
		s := x
		if len(s) > 40 {
			s = s[:40] + "…"
		}
		return strconv.Quote(s)
	case bool:
		return strconv.FormatBool(x)
	case json.Number:
		return x.String()
	}
	return fmt.Sprintf("%T", v)
}

func (p jsonPath) object(v any, field string) (map[string]any, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, p.errf(field, "expected an object, got %s", describeJSON(v))
	}
	return m, nil
}

// memberObject is the object m[key]; absent and null are errors.
func (p jsonPath) memberObject(m map[string]any, path, key string) (map[string]any, error) {
	f := joinField(path, key)
	v, ok := m[key]
	if !ok {
		return nil, p.errf(f, "missing%s", p.keysHint(m))
	}
	return p.object(v, f)
}

// keysHint lists an object's keys when a needed one is missing (a file of
// another shape says what it is).
func (p jsonPath) keysHint(m map[string]any) string {
	if len(m) == 0 {
		return " (the object is empty)"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) > 8 {
		keys = append(keys[:8], "…")
	}
	return " (have " + strings.Join(keys, ", ") + ")"
}

// number is a finite JSON number.
func (p jsonPath) number(v any, field string) (float64, error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, p.errf(field, "expected a number, got %s", describeJSON(v))
	}
	f, err := strconv.ParseFloat(n.String(), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, p.errf(field, "%s is out of range", n.String())
	}
	return f, nil
}

// optCount is a non-negative whole number m[key], -1 when absent or null.
func (p jsonPath) optCount(m map[string]any, path, key string) (int, error) {
	v, ok := m[key]
	if !ok || v == nil {
		return -1, nil
	}
	f := joinField(path, key)
	x, err := p.number(v, f)
	if err != nil {
		return 0, err
	}
	if x < 0 || x != math.Trunc(x) || x > math.MaxInt32 {
		return 0, p.errf(f, "expected a count, got %s", describeJSON(v))
	}
	return int(x), nil
}

// distribution reads the latency summary m[key] (seconds): mean required
// and positive; p90, p99 optional; min ≤ p90 ≤ p99 ≤ max and min ≤ mean
// ≤ max where present. ifNull explains a null summary.
func (p jsonPath) distribution(m map[string]any, path, key, ifNull string) (Distribution, error) {
	d := Distribution{Mean: math.NaN(), P90: math.NaN(), P99: math.NaN()}
	f := joinField(path, key)
	v, ok := m[key]
	switch {
	case !ok:
		return d, p.errf(f, "missing%s", p.keysHint(m))
	case v == nil:
		return d, p.errf(f, "%s", ifNull)
	}
	s, err := p.object(v, f)
	if err != nil {
		return d, err
	}
	get := func(k string, required bool) (float64, error) {
		x, ok := s[k]
		if !ok || x == nil {
			if required {
				if !ok {
					return 0, p.errf(joinField(f, k), "missing%s", p.keysHint(s))
				}
				return 0, p.errf(joinField(f, k), "null")
			}
			return math.NaN(), nil
		}
		y, err := p.number(x, joinField(f, k))
		if err != nil {
			return 0, err
		}
		if y < 0 {
			return 0, p.errf(joinField(f, k), "%g: a latency cannot be negative", y)
		}
		if y > maxLatencySeconds {
			return 0, p.errf(joinField(f, k), "%g seconds is not a request's latency", y)
		}
		return y, nil
	}
	if d.Mean, err = get("mean", true); err != nil {
		return d, err
	}
	if !(d.Mean > 0) {
		return d, p.errf(joinField(f, "mean"), "%g: must be > 0 seconds", d.Mean)
	}
	if d.P90, err = get("p90", false); err != nil {
		return d, err
	}
	if d.P99, err = get("p99", false); err != nil {
		return d, err
	}
	lo, err := get("min", false)
	if err != nil {
		return d, err
	}
	hi, err := get("max", false)
	if err != nil {
		return d, err
	}
	// In order, with room for rounding: numpy's percentiles of the same
	// samples are monotone, the mean lies between min and max.
	order := []struct {
		name string
		v    float64
	}{{"min", lo}, {"p90", d.P90}, {"p99", d.P99}, {"max", hi}}
	prev, prevName := math.NaN(), ""
	for _, x := range order {
		if math.IsNaN(x.v) {
			continue
		}
		if !math.IsNaN(prev) && x.v < prev*(1-1e-9) {
			return d, p.errf(joinField(f, x.name), "%g is less than %s %g; not a latency summary", x.v, prevName, prev)
		}
		prev, prevName = x.v, x.name
	}
	if (!math.IsNaN(lo) && d.Mean < lo*(1-1e-9)) || (!math.IsNaN(hi) && d.Mean > hi*(1+1e-9)) {
		return d, p.errf(joinField(f, "mean"), "%g is outside [min, max] = [%g, %g]; not a latency summary", d.Mean, lo, hi)
	}
	return d, nil
}

// Python's json module writes non-finite floats as bare NaN, Infinity and
// -Infinity; pythonNonFinite turns each (outside strings) into a string
// of that name, so that the file decodes and a field holding one is
// refused by name.
const (
	pyNaN    = "NaN"
	pyInf    = "Infinity"
	pyNegInf = "-Infinity"
)

func pythonNonFinite(data []byte) []byte {
	if !bytes.Contains(data, []byte(pyNaN)) && !bytes.Contains(data, []byte(pyInf)) {
		return data
	}
	out := make([]byte, 0, len(data)+16)
	inString, escaped := false, false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if inString {
			out = append(out, c)
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		if c == '"' {
			inString = true
			out = append(out, c)
			continue
		}
		replaced := false
		for _, w := range []string{pyNegInf, pyInf, pyNaN} {
			if bytes.HasPrefix(data[i:], []byte(w)) {
				out = append(out, '"')
				out = append(out, w...)
				out = append(out, '"')
				i += len(w) - 1
				replaced = true
				break
			}
		}
		if !replaced {
			out = append(out, c)
		}
	}
	return out
}
