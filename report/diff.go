package report

// Comparison of two run sets (eppsim diff): loading summary documents,
// thresholds, pairing runs, the apples-to-oranges check, multi-seed noise
// awareness, verdicts and the Markdown/JSON renderings. Plots and the HTML
// page are in diffplots.go.

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/eppsim/eppsim/replica"
)

// RunSet is one side of a comparison: the runs of one summary document.
type RunSet struct {
	// Path is the summary file read (comma-separated when merged).
	Path string
	// Dir is where requests.csv and timeseries.csv of these runs are
	// looked for: the --out directory, or the directory of a file named
	// summary.json; empty for other files (e.g. a saved `run --json`) and
	// for merged sets (each run keeps its own).
	Dir string
	// Document-level fields (summary.json and `run --json`).
	Version, Trace, Fleet string
	Seed                  uint64
	// Runs in name order.
	Runs []*Run
}

// Run is one config run of a RunSet.
type Run struct {
	Name    string
	Summary *Summary
	// tree is the run's summary as generic JSON, for metric look-up and
	// the field-by-field comparison.
	tree map[string]any
	// dir holds the run's CSV files (see RunSet.Dir), where its rows are
	// under csvName (its name in its own document).
	dir, csvName string
	// docSeed is the document seed, for runs without a config.
	docSeed uint64
}

// LoadRunSet reads a summary document: a summary.json written by
// `eppsim run --out` (path may be that directory), the document printed by
// `eppsim run --json`, or a single Summary object (one run, named "run").
func LoadRunSet(path string) (*RunSet, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	rs := &RunSet{Path: path}
	if st.IsDir() {
		rs.Dir = path
		rs.Path = filepath.Join(path, SummaryFile)
	} else if filepath.Base(path) == SummaryFile {
		rs.Dir = filepath.Dir(path)
	}
	data, err := os.ReadFile(rs.Path)
	if err != nil {
		return nil, err
	}
	if err := rs.parse(data); err != nil {
		return nil, fmt.Errorf("%s: %w", rs.Path, err)
	}
	return rs, nil
}

// parse decodes a summary document.
func (rs *RunSet) parse(data []byte) error {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return jsonError(data, err)
	}
	if top == nil {
		return errors.New("not an eppsim summary: the document is null")
	}
	var doc struct {
		Version string `json:"version"`
		Trace   string `json:"trace"`
		Seed    uint64 `json:"seed"`
		Fleet   string `json:"fleet"`
	}
	raws := map[string]json.RawMessage{}
	switch {
	case top["runs"] != nil:
		if err := json.Unmarshal(data, &doc); err != nil {
			return fmt.Errorf("not an eppsim summary: %w", err)
		}
		if err := json.Unmarshal(top["runs"], &raws); err != nil {
			return fmt.Errorf("\"runs\" is not an object of summaries: %w", err)
		}
	case top["latency_ms"] != nil || top["requests"] != nil:
		raws["run"] = data
	default:
		return errors.New(`not an eppsim summary: no "runs" object (want summary.json from eppsim run --out, or eppsim run --json output)`)
	}
	rs.Version, rs.Trace, rs.Seed, rs.Fleet = doc.Version, doc.Trace, doc.Seed, doc.Fleet
	if len(raws) == 0 {
		return errors.New(`"runs" is empty`)
	}
	for name, raw := range raws {
		r := &Run{Name: name}
		raw, err := upgradeLegacyEngineKeys(raw)
		if err != nil {
			return fmt.Errorf("run %q: %w", name, err)
		}
		if err := json.Unmarshal(raw, &r.Summary); err != nil {
			return fmt.Errorf("run %q: %w", name, err)
		}
		if err := json.Unmarshal(raw, &r.tree); err != nil {
			return fmt.Errorf("run %q: %w", name, err)
		}
		if r.Summary == nil || r.tree == nil {
			return fmt.Errorf("run %q: summary is null", name)
		}
		r.dir, r.csvName, r.docSeed = rs.Dir, name, doc.Seed
		rs.Runs = append(rs.Runs, r)
	}
	slices.SortFunc(rs.Runs, func(a, b *Run) int { return strings.Compare(a.Name, b.Name) })
	return nil
}

// upgradeLegacyEngineKeys rewrites the engine configs of a summary written
// before replica.Config took vLLM's snake_case names (blockSize,
// numGpuBlocks, ...; disablePrefixCaching became enable_prefix_caching,
// negated), so that old baselines still compare with new runs. Summaries
// without old keys are returned unchanged.
func upgradeLegacyEngineKeys(raw json.RawMessage) (json.RawMessage, error) {
	if !bytes.Contains(raw, []byte(`"numGpuBlocks"`)) && !bytes.Contains(raw, []byte(`"blockSize"`)) {
		return raw, nil
	}
	var run map[string]any
	if err := json.Unmarshal(raw, &run); err != nil {
		return raw, nil // reported by the caller's decoding
	}
	cfg, _ := run["config"].(map[string]any)
	fleet, _ := cfg["fleet"].([]any)
	changed := false
	for _, rep := range fleet {
		r, _ := rep.(map[string]any)
		eng, _ := r["engine"].(map[string]any)
		for old, cur := range replica.LegacyConfigKeys {
			v, ok := eng[old]
			if !ok {
				continue
			}
			delete(eng, old)
			if old == "disablePrefixCaching" {
				b, _ := v.(bool)
				v = !b
			}
			eng[cur] = v
			changed = true
		}
	}
	if !changed {
		return raw, nil
	}
	return json.Marshal(run)
}

// jsonError adds the line and column to a JSON syntax error.
func jsonError(data []byte, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off := min(int(se.Offset), len(data))
		line := 1 + bytes.Count(data[:off], []byte("\n"))
		// Offset counts the offending byte: it is at column off − (start of its line).
		col := off - (bytes.LastIndexByte(data[:off], '\n') + 1)
		return fmt.Errorf("line %d, column %d: %w", line, col, err)
	}
	return fmt.Errorf("not valid JSON: %w", err)
}

// seed is the run's seed (from its config, else its document's).
func (r *Run) seed() uint64 {
	if r.Summary.Config != nil {
		return r.Summary.Config.Seed
	}
	return r.docSeed
}

// LoadRunSets loads one side from several documents (e.g. one eppsim run
// --out directory per seed) and merges their runs. A run name seen before
// gets the next free "#2", "#3", ... suffix, so the runs of one config
// from several documents form a multi-seed group. Each path may be a glob
// pattern (filepath.Match syntax) when no file has that literal name.
func LoadRunSets(paths ...string) (*RunSet, error) {
	var files []string
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil || !strings.ContainsAny(p, "*?[") {
			files = append(files, p)
			continue
		}
		m, err := filepath.Glob(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if len(m) == 0 {
			return nil, fmt.Errorf("%s: no file matches", p)
		}
		files = append(files, m...)
	}
	if len(files) == 0 {
		return nil, errors.New("no summary given")
	}
	var out *RunSet
	for _, f := range files {
		rs, err := LoadRunSet(f)
		if err != nil {
			return nil, err
		}
		if out == nil {
			out = rs
			continue
		}
		names := map[string]bool{}
		for _, r := range out.Runs {
			names[r.Name] = true
		}
		for _, r := range rs.Runs {
			name := r.Name
			for k := 2; names[name]; k++ {
				name = r.Name + "#" + strconv.Itoa(k)
			}
			r.Name, names[name] = name, true
			out.Runs = append(out.Runs, r)
		}
		out.Path += ", " + rs.Path
		out.Dir = ""
	}
	slices.SortFunc(out.Runs, func(a, b *Run) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// ---------------------------------------------------------------------
// Thresholds

// Threshold is one --fail-on rule: Metric moving in the bad direction by
// more than Value is a regression.
type Threshold struct {
	// Metric is the dotted path of a number in the Summary JSON, e.g.
	// latency_ms.ttft.p99 (producer aliases expanded).
	Metric string
	// Sign is +1 when an increase is bad, -1 when a decrease is.
	Sign int
	// Value is the allowed change: a fraction of the baseline value when
	// Relative (5% is 0.05), else in the metric's own unit.
	Value    float64
	Relative bool
	// Off disables the metric's threshold (METRIC:off).
	Off bool

	keys []string // the path resolved to JSON object keys
	num  string   // the number as written (for display)
}

// String is the threshold as --fail-on takes it.
func (t Threshold) String() string { return t.Metric + ":" + t.Spec() }

// Spec is the part after the colon: "+5%", "-0.02" or "off".
func (t Threshold) Spec() string {
	if t.Off {
		return "off"
	}
	s := "+"
	if t.Sign < 0 {
		s = "-"
	}
	if t.num != "" {
		if t.Relative {
			return s + t.num + "%"
		}
		return s + t.num
	}
	if t.Relative {
		return s + strconv.FormatFloat(t.Value*100, 'g', -1, 64) + "%"
	}
	return s + strconv.FormatFloat(t.Value, 'g', -1, 64)
}

// limit is the allowed change in the metric's unit for baseline value base.
func (t Threshold) limit(base float64) float64 {
	if t.Relative {
		return t.Value * math.Abs(base)
	}
	return t.Value
}

// DefaultThresholds are the checks eppsim diff applies unless told
// otherwise: tail latencies may not grow by more than 5%, throughput may
// not fall by more than 5%, the true hit ratio may not fall by more than
// 0.02, and the approximate producer's prediction MAE may not grow by more
// than 0.02 (when a run has that producer).
var DefaultThresholds = []string{
	"latency_ms.ttft.p99:+5%",
	"latency_ms.e2e.p99:+5%",
	"throughput.requests_per_s:-5%",
	"cache.true_hit_ratio:-0.02",
	"prediction.approx-prefix-cache-producer.mae:+0.02",
}

// infoMetrics are shown for context (no threshold) unless a threshold
// names them.
var infoMetrics = []string{
	"requests.completed",
	"requests.rejected",
	"latency_ms.ttft.p50",
	"latency_ms.tpot.p50",
	"cache.oracle_hit_ratio",
}

var numberRE = regexp.MustCompile(`^([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$`)

// thresholdSyntax is appended to parse errors.
const thresholdSyntax = "want METRIC:+N% (relative) or METRIC:-N (absolute), e.g. latency_ms.ttft.p99:+5% or cache.true_hit_ratio:-0.02; " +
	"+ means an increase beyond N is a regression, - a decrease"

// ParseThreshold parses a --fail-on value: METRIC:+N% or METRIC:-N% for a
// change relative to the baseline, METRIC:+N or METRIC:-N for an absolute
// one, or METRIC:off to drop a default. METRIC is the dotted path of a
// number in the summary JSON (see MetricPaths); prediction.approx and
// prediction.precise abbreviate the producer types.
func ParseThreshold(s string) (Threshold, error) {
	var t Threshold
	in := strings.TrimSpace(s)
	if in == "" {
		return t, errors.New("empty threshold; " + thresholdSyntax)
	}
	i := strings.LastIndexByte(in, ':')
	if i < 0 {
		return t, fmt.Errorf("threshold %q has no \":\"; %s", s, thresholdSyntax)
	}
	metric, spec := strings.TrimSpace(in[:i]), strings.TrimSpace(in[i+1:])
	if metric == "" {
		return t, fmt.Errorf("threshold %q names no metric before \":\"; %s", s, thresholdSyntax)
	}
	keys, canon, err := resolveMetric(metric)
	if err != nil {
		return t, fmt.Errorf("threshold %q: %w", s, err)
	}
	t.Metric, t.keys = canon, keys
	switch {
	case spec == "":
		return t, fmt.Errorf("threshold %q has nothing after \":\"; %s", s, thresholdSyntax)
	case strings.EqualFold(spec, "off"):
		t.Off = true
		return t, nil
	case spec[0] == '+':
		t.Sign = 1
	case spec[0] == '-':
		t.Sign = -1
	default:
		return t, fmt.Errorf("threshold %q: %q needs a sign: \"+\" if an increase is the regression, \"-\" if a decrease is", s, spec)
	}
	num := spec[1:]
	if strings.HasSuffix(num, "%") {
		t.Relative = true
		num = num[:len(num)-1]
	}
	if !numberRE.MatchString(num) {
		return t, fmt.Errorf("threshold %q: %q is not a non-negative decimal number; %s", s, num, thresholdSyntax)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsInf(v, 0) {
		return t, fmt.Errorf("threshold %q: %q is out of range", s, num)
	}
	if t.Relative {
		v /= 100
	}
	t.Value, t.num = v, num
	return t, nil
}

// MergeThresholds applies overrides to base: a threshold for a metric
// that base has replaces it (in place), a new metric is appended, and an
// "off" threshold removes the metric.
func MergeThresholds(base, overrides []Threshold) []Threshold {
	out := slices.Clone(base)
	for _, o := range overrides {
		i := slices.IndexFunc(out, func(t Threshold) bool { return t.Metric == o.Metric })
		switch {
		case i >= 0 && o.Off:
			out = slices.Delete(out, i, i+1)
		case i >= 0:
			out[i] = o
		case !o.Off:
			out = append(out, o)
		}
	}
	return out
}

// ParseThresholds parses each value (see ParseThreshold).
func ParseThresholds(specs []string) ([]Threshold, error) {
	out := make([]Threshold, 0, len(specs))
	var errs []error
	for _, s := range specs {
		t, err := ParseThreshold(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, t)
	}
	return out, errors.Join(errs...)
}

// Producer abbreviations accepted in metric paths.
var producerAliases = map[string]string{"approx": approxProducer, "precise": preciseProducer}

// wallClock are the Summary fields that measure the simulator, not the
// simulated system.
var wallClock = map[string]bool{"sim.wall_s": true, "sim.requests_per_wall_s": true}

// notCompared are the fields strict mode ignores: wall-clock time and the
// simulator's event count (bookkeeping that an optimisation may change
// without changing any simulated result).
var notCompared = map[string]bool{"sim.wall_s": true, "sim.requests_per_wall_s": true, "sim.events": true}

// resolveMetric checks a dotted metric path against the Summary type and
// returns its JSON keys (a map key may itself contain dots when it is the
// last element) and the canonical path.
func resolveMetric(metric string) ([]string, string, error) {
	segs := strings.Split(metric, ".")
	if slices.Contains(segs, "") {
		return nil, "", fmt.Errorf("metric %q has an empty path element", metric)
	}
	if segs[0] == "config" {
		return nil, "", fmt.Errorf("%q is the run's configuration, not a metric", metric)
	}
	t := reflect.TypeFor[Summary]()
	var keys []string
	for i := 0; i < len(segs); i++ {
		seg := segs[i]
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		prefix := strings.Join(keys, ".")
		switch t.Kind() {
		case reflect.Struct:
			f, ok := jsonField(t, seg)
			if !ok {
				return nil, "", fmt.Errorf("unknown metric %q: %q is not one of %s", metric, seg, fieldList(prefix, t))
			}
			keys = append(keys, seg)
			t = f.Type
		case reflect.Map:
			if prefix == "prediction" {
				if p, ok := producerAliases[seg]; ok {
					seg = p
				}
			}
			if isNumber(t.Elem()) {
				// The rest of the path is the key (replica names may hold dots).
				seg = strings.Join(segs[i:], ".")
				i = len(segs)
			}
			keys = append(keys, seg)
			t = t.Elem()
		default:
			return nil, "", fmt.Errorf("unknown metric %q: %s is a number, it has no %q", metric, prefix, seg)
		}
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	canon := strings.Join(keys, ".")
	switch {
	case wallClock[canon]:
		return nil, "", fmt.Errorf("%q is wall-clock time of the simulator itself, which differs between any two runs; it cannot be compared", metric)
	case isNumber(t):
		return keys, canon, nil
	case t.Kind() == reflect.Struct:
		return nil, "", fmt.Errorf("%q is a group, not a number: pick one of %s", metric, fieldList(canon, t))
	case t.Kind() == reflect.Map && canon == "prediction":
		return nil, "", fmt.Errorf("%q is a group: name a producer, e.g. prediction.approx.mae or prediction.precise.mae", metric)
	case t.Kind() == reflect.Map:
		return nil, "", fmt.Errorf("%q is a group: add a key, e.g. %s.NAME", metric, canon)
	case t.Kind() == reflect.Slice:
		return nil, "", fmt.Errorf("%q is a list, not a number", metric)
	default:
		return nil, "", fmt.Errorf("%q is not a number", metric)
	}
}

func isNumber(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

// jsonName is a struct field's JSON key ("" when not encoded).
func jsonName(f reflect.StructField) string {
	tag := f.Tag.Get("json")
	if tag == "-" || !f.IsExported() {
		return ""
	}
	if name, _, _ := strings.Cut(tag, ","); name != "" {
		return name
	}
	return f.Name
}

func jsonField(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		if f := t.Field(i); jsonName(f) == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// fieldList renders the metric fields of struct t under prefix as
// "prefix.{a, b, c}".
func fieldList(prefix string, t reflect.Type) string {
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		n := jsonName(f)
		if n == "" || (prefix == "" && n == "config") || wallClock[joinPath(prefix, n)] {
			continue
		}
		names = append(names, n)
	}
	if prefix == "" {
		return "{" + strings.Join(names, ", ") + "}"
	}
	return prefix + ".{" + strings.Join(names, ", ") + "}"
}

func joinPath(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// MetricPaths lists the numeric fields of a Summary that thresholds may
// name (map-valued groups as GROUP.KEY).
func MetricPaths() []string {
	var out []string
	var walk func(prefix string, t reflect.Type)
	walk = func(prefix string, t reflect.Type) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch {
		case isNumber(t):
			if !wallClock[prefix] {
				out = append(out, prefix)
			}
		case t.Kind() == reflect.Struct:
			for i := range t.NumField() {
				n := jsonName(t.Field(i))
				if n == "" || (prefix == "" && n == "config") {
					continue
				}
				walk(joinPath(prefix, n), t.Field(i).Type)
			}
		case t.Kind() == reflect.Map && prefix == "prediction":
			walk(prefix+".PRODUCER", t.Elem())
		case t.Kind() == reflect.Map:
			walk(prefix+".KEY", t.Elem())
		}
	}
	walk("", reflect.TypeFor[Summary]())
	return out
}

// lookup returns the number at keys in a run's JSON tree.
func lookup(tree map[string]any, keys []string) (float64, bool) {
	var cur any = tree
	for _, k := range keys {
		m, ok := cur.(map[string]any)
		if !ok {
			return 0, false
		}
		if cur, ok = m[k]; !ok {
			return 0, false
		}
	}
	v, ok := cur.(float64)
	return v, ok
}

// isNull reports whether keys name a null in a run's JSON tree: a metric
// the run has but could not measure (docs/metrics.md, undefined values).
func isNull(tree map[string]any, keys []string) bool {
	var cur any = tree
	for _, k := range keys {
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if cur, ok = m[k]; !ok {
			return false
		}
	}
	return cur == nil
}

// ---------------------------------------------------------------------
// Comparison

// Verdict is the outcome of one compared metric.
type Verdict string

// Verdicts.
const (
	// VerdictOK: within the threshold.
	VerdictOK Verdict = "ok"
	// VerdictRegression: beyond the threshold in the bad direction (and,
	// with several seeds, beyond the noise band).
	VerdictRegression Verdict = "regression"
	// VerdictImproved: beyond the threshold in the good direction (and
	// beyond the noise band).
	VerdictImproved Verdict = "improved"
	// VerdictNoise: beyond the threshold in the bad direction but within
	// the seed-to-seed noise band; not a regression.
	VerdictNoise Verdict = "noise"
	// VerdictMissing: the metric exists on one side only (e.g. the current
	// config dropped the approximate producer); not a regression.
	VerdictMissing Verdict = "missing"
	// VerdictInfo: shown for context; no threshold.
	VerdictInfo Verdict = "info"
	// VerdictNotComparable: the metric is undefined (null) on one side or
	// both, e.g. a latency of a run that completed no request after
	// warm-up. A checked metric the baseline has and the current run
	// cannot measure fails the comparison (DiffRow.Fails).
	VerdictNotComparable Verdict = "not-comparable"
)

// DiffOptions control Diff.
type DiffOptions struct {
	// Thresholds are the checks (e.g. DefaultThresholds merged with
	// --fail-on values). A threshold whose metric no run on either side
	// has is an error unless it is one of DefaultThresholds.
	Thresholds []Threshold
	// Tolerance > 0 turns on strict mode: every field of every run (the
	// run config included; wall-clock fields, sim.events and the eppsim
	// version excluded) must be equal, numbers within this relative
	// tolerance, or the comparison fails. The regression gate uses it.
	Tolerance float64
	// AllowMismatch reports different workloads, fleets or seeds as notes
	// instead of refusing the comparison.
	AllowMismatch bool
	// OnlyCommon compares the runs both sides have and notes the others
	// instead of refusing the comparison.
	OnlyCommon bool
}

// SideStat is one side's value of a metric: over several seeds, the mean
// and the sample standard deviation.
type SideStat struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean"`
	SD   float64 `json:"sd"`
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
}

func newSideStat(vs []float64) *SideStat {
	if len(vs) == 0 {
		return nil
	}
	s := &SideStat{N: len(vs), Min: math.Inf(1), Max: math.Inf(-1)}
	for _, v := range vs {
		s.Mean += v
		s.Min, s.Max = math.Min(s.Min, v), math.Max(s.Max, v)
	}
	s.Mean /= float64(len(vs))
	if len(vs) > 1 {
		var ss float64
		for _, v := range vs {
			ss += (v - s.Mean) * (v - s.Mean)
		}
		s.SD = math.Sqrt(ss / float64(len(vs)-1))
	}
	return s
}

// DiffRow is one compared metric of a pair of runs.
type DiffRow struct {
	Metric string `json:"metric"`
	// Threshold is the --fail-on spec ("+5%"); empty for info rows.
	Threshold string    `json:"threshold,omitempty"`
	Baseline  *SideStat `json:"baseline"`
	Current   *SideStat `json:"current"`
	// Change is current − baseline (means); RelChange divides it by
	// |baseline| (absent when the baseline is 0).
	Change    float64  `json:"change"`
	RelChange *float64 `json:"relative_change,omitempty"`
	// Limit is the threshold in the metric's unit.
	Limit float64 `json:"limit"`
	// Noise is the noise band (0 with one run per side).
	Noise   float64 `json:"noise"`
	Verdict Verdict `json:"verdict"`
	// BaselineNull and CurrentNull count the runs of each side where the
	// metric is null (undefined); such a side has no statistic (Baseline
	// or Current is nil) and the verdict is VerdictNotComparable.
	BaselineNull int `json:"baseline_null,omitempty"`
	CurrentNull  int `json:"current_null,omitempty"`
	// Fails: the row fails the comparison, a regression or a checked
	// metric the baseline measured and the current run could not.
	Fails bool `json:"fails,omitempty"`

	th *Threshold
	// bRuns, cRuns count the runs of each side that have the metric,
	// null or not.
	bRuns, cRuns int
}

// FieldChange is one field that differs in strict mode.
type FieldChange struct {
	Run      string `json:"run"`
	Field    string `json:"field"`
	Baseline string `json:"baseline"`
	Current  string `json:"current"`
	// Change is the relative change of a number ("" for other fields).
	Change string `json:"change,omitempty"`
}

// PairDiff compares one config of the baseline with its counterpart.
type PairDiff struct {
	// Baseline and Current name the compared configs; BaselineRuns and
	// CurrentRuns the runs (several when a config ran with several seeds).
	Baseline     string   `json:"baseline"`
	Current      string   `json:"current"`
	BaselineRuns []string `json:"baseline_runs"`
	CurrentRuns  []string `json:"current_runs"`
	Seeds        []uint64 `json:"seeds,omitempty"`
	// Paired: both sides ran the same seeds (two or more), so the noise
	// band comes from the per-seed differences.
	Paired  bool          `json:"paired,omitempty"`
	Rows    []DiffRow     `json:"metrics"`
	Changes []FieldChange `json:"changed_fields,omitempty"`

	base, cur *runGroup
}

// Label names the pair ("default", or "main → pr" when the names differ).
func (p *PairDiff) Label() string {
	if p.Baseline == p.Current {
		return p.Baseline
	}
	return p.Baseline + " → " + p.Current
}

// DiffResult is the outcome of Diff.
type DiffResult struct {
	Baseline   string     `json:"baseline"`
	Current    string     `json:"current"`
	Thresholds []string   `json:"thresholds"`
	Tolerance  float64    `json:"tolerance,omitempty"`
	Pairs      []PairDiff `json:"pairs"`
	Notes      []string   `json:"notes,omitempty"`
	// Regressions counts rows with VerdictRegression plus, in strict
	// mode, changed fields.
	Regressions int `json:"regressions"`
	// Verdict is "regression" or "ok".
	Verdict string `json:"verdict"`

	multiSeed       bool
	baseSet, curSet *RunSet
}

// IncomparableError says why two run sets cannot be compared (exit code 2
// of eppsim diff).
type IncomparableError struct {
	Reasons []string
}

func (e *IncomparableError) Error() string {
	if len(e.Reasons) == 1 {
		return "baseline and current are not comparable: " + e.Reasons[0]
	}
	return "baseline and current are not comparable:\n  - " + strings.Join(e.Reasons, "\n  - ")
}

// runGroup is one config of a side: its runs (several seeds, or repeats),
// ordered by seed then name.
type runGroup struct {
	name string
	runs []*Run
}

var replicaSuffix = regexp.MustCompile(`(#[0-9]+| \([0-9]+\)|[ @,;/]seed=[0-9]+)$`)

// baseName strips the suffixes that mark another run of the same config:
// "#2" (eppsim run), " (2)" (report.Output), " seed=3", "@seed=3".
func baseName(name string) string {
	for {
		b := replicaSuffix.ReplaceAllString(name, "")
		if b == name || b == "" {
			return name
		}
		name = b
	}
}

// configKey is a run's configuration without its seed, version and
// injected count: runs of one config with different seeds share it.
func configKey(r *Run) string {
	c, ok := r.tree["config"].(map[string]any)
	if !ok {
		return ""
	}
	m := make(map[string]any, len(c))
	for k, v := range c {
		if k != "seed" && k != "version" {
			m[k] = v
		}
	}
	// The number of requests injected may depend on the seed (a
	// synthesized workload cut by --duration).
	if w, ok := c["workload"].(map[string]any); ok {
		ww := make(map[string]any, len(w))
		for k, v := range w {
			if k != "injected" {
				ww[k] = v
			}
		}
		m["workload"] = ww
	}
	b, _ := json.Marshal(m) // sorted keys: deterministic
	return string(b)
}

// groups gathers a side's runs by config: runs whose names are equal up to
// a replicate suffix and whose configurations are equal apart from the
// seed form one group, named by the common name (a run alone keeps its
// own name).
func groups(rs *RunSet) []*runGroup {
	type key struct{ base, cfg string }
	idx := map[key]*runGroup{}
	var out []*runGroup
	for _, r := range rs.Runs {
		k := key{baseName(r.Name), configKey(r)}
		g := idx[k]
		if g == nil {
			g = &runGroup{name: k.base}
			idx[k] = g
			out = append(out, g)
		}
		g.runs = append(g.runs, r)
	}
	for _, g := range out {
		if len(g.runs) == 1 {
			g.name = g.runs[0].Name
		}
		slices.SortFunc(g.runs, func(a, b *Run) int {
			if c := cmp.Compare(a.seed(), b.seed()); c != 0 {
				return c
			}
			return strings.Compare(a.Name, b.Name)
		})
	}
	// Different configs whose runs share a base name: the later groups
	// are named after their first run.
	seen := map[string]bool{}
	for _, g := range out {
		if seen[g.name] {
			g.name = g.runs[0].Name
		}
		seen[g.name] = true
	}
	slices.SortFunc(out, func(a, b *runGroup) int { return strings.Compare(a.name, b.name) })
	return out
}

func (g *runGroup) names() []string {
	out := make([]string, len(g.runs))
	for i, r := range g.runs {
		out[i] = r.Name
	}
	return out
}

func (g *runGroup) seeds() []uint64 {
	out := make([]uint64, len(g.runs))
	for i, r := range g.runs {
		out[i] = r.seed()
	}
	return out
}

// nulls counts the group's runs where the metric is null.
func (g *runGroup) nulls(keys []string) int {
	n := 0
	for _, r := range g.runs {
		if isNull(r.tree, keys) {
			n++
		}
	}
	return n
}

// values returns the metric's values over the group's runs that have it
// (a null is not a value).
func (g *runGroup) values(keys []string) []float64 {
	var vs []float64
	for _, r := range g.runs {
		if v, ok := lookup(r.tree, keys); ok {
			vs = append(vs, v)
		}
	}
	return vs
}

// Diff compares current against baseline, config by config. Configs are
// paired by name; when each side has exactly one config they are paired
// whatever their names. Several runs of one config (names differing only
// by a replicate suffix such as "#2" or " seed=3", configurations equal
// apart from the seed) are compared by their means with a noise band (see
// DiffRow.Noise and docs/ci.md). An *IncomparableError reports different
// workloads, fleets or seeds, and configs without a counterpart.
func Diff(base, cur *RunSet, opts DiffOptions) (*DiffResult, error) {
	res := &DiffResult{Baseline: base.Path, Current: cur.Path, Tolerance: opts.Tolerance, baseSet: base, curSet: cur}
	for _, t := range opts.Thresholds {
		res.Thresholds = append(res.Thresholds, t.String())
	}
	bg, cg := groups(base), groups(cur)
	var reasons []string
	type pair struct{ b, c *runGroup }
	var pairs []pair
	if len(bg) == 1 && len(cg) == 1 {
		pairs = append(pairs, pair{bg[0], cg[0]})
	} else {
		cm := map[string]*runGroup{}
		for _, g := range cg {
			cm[g.name] = g
		}
		var onlyBase, onlyCur []string
		matched := map[string]bool{}
		for _, g := range bg {
			if c := cm[g.name]; c != nil {
				pairs = append(pairs, pair{g, c})
				matched[g.name] = true
			} else {
				onlyBase = append(onlyBase, g.name)
			}
		}
		for _, g := range cg {
			if !matched[g.name] {
				onlyCur = append(onlyCur, g.name)
			}
		}
		if len(onlyBase)+len(onlyCur) > 0 {
			msg := "configs without a counterpart:"
			if len(onlyBase) > 0 {
				msg += " only in baseline: " + strings.Join(onlyBase, ", ") + ";"
			}
			if len(onlyCur) > 0 {
				msg += " only in current: " + strings.Join(onlyCur, ", ") + ";"
			}
			msg = strings.TrimSuffix(msg, ";")
			if opts.OnlyCommon && len(pairs) > 0 {
				res.Notes = append(res.Notes, msg+" (not compared)")
			} else {
				reasons = append(reasons, msg+" (configs are paired by name; --only-common compares the configs both sides have)")
			}
		}
	}
	for _, p := range pairs {
		pd := PairDiff{Baseline: p.b.name, Current: p.c.name, BaselineRuns: p.b.names(), CurrentRuns: p.c.names(), base: p.b, cur: p.c}
		why, notes := comparable(base, cur, p.b, p.c)
		label := pd.Label()
		for _, w := range why {
			if opts.AllowMismatch {
				res.Notes = append(res.Notes, label+": "+w+" (compared anyway: --allow-mismatch)")
			} else {
				reasons = append(reasons, label+": "+w)
			}
		}
		for _, n := range notes {
			res.Notes = append(res.Notes, label+": "+n)
		}
		if len(p.b.runs) > 1 || len(p.c.runs) > 1 {
			res.multiSeed = true
			pd.Seeds = p.b.seeds()
			pd.Paired = len(p.b.runs) > 1 && slices.Equal(pd.Seeds, p.c.seeds())
		}
		res.Pairs = append(res.Pairs, pd)
	}
	if len(reasons) > 0 {
		return nil, &IncomparableError{Reasons: reasons}
	}
	thresholds := slices.DeleteFunc(slices.Clone(opts.Thresholds), func(t Threshold) bool { return t.Off })
	for _, t := range thresholds {
		if len(t.keys) == 0 {
			return nil, fmt.Errorf("threshold %s was not made by ParseThreshold", t)
		}
	}
	for i := range res.Pairs {
		pd := &res.Pairs[i]
		for j := range thresholds {
			if row, ok := compareMetric(pd, thresholds[j].keys, &thresholds[j]); ok {
				pd.Rows = append(pd.Rows, row)
			}
		}
		for _, m := range infoMetrics {
			if slices.ContainsFunc(thresholds, func(t Threshold) bool { return t.Metric == m }) {
				continue
			}
			keys, _, _ := resolveMetric(m)
			if row, ok := compareMetric(pd, keys, nil); ok {
				pd.Rows = append(pd.Rows, row)
			}
		}
		if opts.Tolerance > 0 {
			pd.Changes = fieldChanges(pd.base, pd.cur, opts.Tolerance)
		}
		for _, r := range pd.Rows {
			if r.Fails {
				res.Regressions++
			}
		}
		res.Regressions += len(pd.Changes)
	}
	// An explicit threshold that no run has is a mistake in the gate.
	defaults := map[string]bool{}
	for _, d := range DefaultThresholds {
		if t, err := ParseThreshold(d); err == nil {
			defaults[t.Metric] = true
		}
	}
	for _, t := range thresholds {
		found := false
		for _, pd := range res.Pairs {
			found = found || slices.ContainsFunc(pd.Rows, func(r DiffRow) bool { return r.th != nil && r.th.Metric == t.Metric })
		}
		if !found {
			if defaults[t.Metric] {
				res.Notes = append(res.Notes, fmt.Sprintf("%s: no run on either side has this metric; not checked", t.Metric))
			} else {
				return nil, fmt.Errorf("--fail-on %s: no run on either side has metric %s", t, t.Metric)
			}
		}
	}
	res.Verdict = "ok"
	if res.Regressions > 0 {
		res.Verdict = "regression"
	}
	return res, nil
}

// compareMetric compares one metric of a pair; ok is false when neither
// side has it. A side where the metric is null in any run has no
// statistic: the row is not comparable (a mean over the runs that
// measured something would hide the ones that did not), and it fails when
// the metric is checked and the baseline has a value.
func compareMetric(pd *PairDiff, keys []string, th *Threshold) (DiffRow, bool) {
	bv, cv := pd.base.values(keys), pd.cur.values(keys)
	row := DiffRow{Metric: strings.Join(keys, "."), BaselineNull: pd.base.nulls(keys), CurrentNull: pd.cur.nulls(keys), th: th}
	row.bRuns, row.cRuns = len(bv)+row.BaselineNull, len(cv)+row.CurrentNull
	if row.BaselineNull == 0 {
		row.Baseline = newSideStat(bv)
	}
	if row.CurrentNull == 0 {
		row.Current = newSideStat(cv)
	}
	if row.bRuns == 0 && row.cRuns == 0 {
		return row, false
	}
	if th != nil {
		row.Threshold = th.Spec()
	}
	if row.BaselineNull > 0 || row.CurrentNull > 0 {
		row.Verdict = VerdictNotComparable
		row.Fails = th != nil && row.Baseline != nil && row.CurrentNull > 0
		return row, true
	}
	if row.Baseline == nil || row.Current == nil {
		row.Verdict = VerdictMissing
		return row, true
	}
	b, c := row.Baseline, row.Current
	row.Change = c.Mean - b.Mean
	if b.Mean != 0 {
		rel := row.Change / math.Abs(b.Mean)
		row.RelChange = &rel
	}
	row.Noise = noiseBand(pd, keys, b, c)
	if th == nil {
		row.Verdict = VerdictInfo
		return row, true
	}
	row.Limit = th.limit(b.Mean)
	bad := float64(th.Sign) * row.Change
	switch {
	case bad > row.Limit && bad > row.Noise:
		row.Verdict, row.Fails = VerdictRegression, true
	case bad > row.Limit:
		row.Verdict = VerdictNoise
	case -bad > row.Limit && -bad > row.Noise:
		row.Verdict = VerdictImproved
	default:
		row.Verdict = VerdictOK
	}
	return row, true
}

// noiseBand is the change a metric may show by chance when a config ran
// with several seeds: with the same seeds on both sides (paired), twice
// the standard error of the per-seed differences, 2·sd(c_i − b_i)/√n;
// otherwise twice the standard error of the difference of the means,
// 2·√(sd_b²/n_b + sd_c²/n_c). It is 0 with one run per side.
func noiseBand(pd *PairDiff, keys []string, b, c *SideStat) float64 {
	if b.N < 2 && c.N < 2 {
		return 0
	}
	if pd.Paired {
		var d []float64
		for i, br := range pd.base.runs {
			bv, bok := lookup(br.tree, keys)
			cv, cok := lookup(pd.cur.runs[i].tree, keys)
			if !bok || !cok {
				d = nil
				break
			}
			d = append(d, cv-bv)
		}
		if len(d) > 1 {
			return 2 * newSideStat(d).SD / math.Sqrt(float64(len(d)))
		}
	}
	return 2 * math.Sqrt(b.SD*b.SD/float64(b.N)+c.SD*c.SD/float64(c.N))
}

// comparable checks that two configs ran the same traffic on the same
// fleet with the same seeds. why lists differences that make the
// comparison meaningless; notes lists differences worth mentioning.
func comparable(base, cur *RunSet, bg, cg *runGroup) (why, notes []string) {
	bs, cs := bg.seeds(), cg.seeds()
	if !slices.Equal(bs, cs) {
		if len(bs) == 1 && len(cs) == 1 {
			why = append(why, fmt.Sprintf("seed: baseline %d, current %d", bs[0], cs[0]))
		} else {
			why = append(why, fmt.Sprintf("seeds: baseline %v, current %v", bs, cs))
		}
	}
	br, cr := bg.runs[0], cg.runs[0]
	bc, cc := br.Summary.Config, cr.Summary.Config
	if bc == nil || cc == nil {
		which := "the baseline has"
		if bc != nil {
			which = "the current summary has"
		} else if cc == nil {
			which = "neither summary has a"
		}
		if bc == nil && cc == nil {
			notes = append(notes, which+" run config; only the trace, seed and fleet of the documents were checked")
		} else {
			notes = append(notes, which+" no run config; only the trace, seed and fleet of the documents were checked")
		}
		if base.Trace != cur.Trace {
			why = append(why, fmt.Sprintf("trace: baseline %q, current %q", base.Trace, cur.Trace))
		}
		if base.Fleet != cur.Fleet {
			why = append(why, fmt.Sprintf("fleet: baseline %q, current %q", base.Fleet, cur.Fleet))
		}
		return why, notes
	}
	bw, cw := bc.Workload, cc.Workload
	if !sameTrace(bw.Trace, cw.Trace) {
		why = append(why, fmt.Sprintf("workload.trace: baseline %q, current %q", bw.Trace, cw.Trace))
	} else if bw.Trace != cw.Trace {
		notes = append(notes, fmt.Sprintf("trace paths differ (%q, %q); same file name, assumed the same trace", bw.Trace, cw.Trace))
	}
	diff := func(field string, b, c any) {
		if b != c {
			why = append(why, fmt.Sprintf("workload.%s: baseline %v, current %v", field, show(b), show(c)))
		}
	}
	diff("format", bw.Format, cw.Format)
	diff("mode", bw.Mode, cw.Mode)
	diff("max_requests", bw.MaxRequests, cw.MaxRequests)
	diff("duration", bw.Duration, cw.Duration)
	diff("warmup", bw.Warmup, cw.Warmup)
	diff("injected", bw.Injected, cw.Injected)
	bf, _ := br.tree["config"].(map[string]any)
	cf, _ := cr.tree["config"].(map[string]any)
	if fd := leafDiffs(bf["fleet"], cf["fleet"], "fleet", 0); len(fd) > 0 {
		if len(bc.Fleet) != len(cc.Fleet) {
			why = append(why, fmt.Sprintf("fleet: baseline %d replicas, current %d", len(bc.Fleet), len(cc.Fleet)))
		} else {
			const maxShown = 4
			for i, d := range fd {
				if i == maxShown {
					why = append(why, fmt.Sprintf("fleet: %d more differences", len(fd)-maxShown))
					break
				}
				why = append(why, fmt.Sprintf("%s: baseline %s, current %s", d.path, d.b, d.c))
			}
		}
	}
	for _, d := range leafDiffs(bf["environment"], cf["environment"], "environment", 0) {
		notes = append(notes, fmt.Sprintf("%s: baseline %s, current %s", d.path, d.b, d.c))
	}
	if bc.Version != cc.Version {
		notes = append(notes, fmt.Sprintf("eppsim version: baseline %s, current %s", bc.Version, cc.Version))
	}
	return why, notes
}

func show(v any) string {
	if s, ok := v.(string); ok {
		if s == "" {
			return "(none)"
		}
		return strconv.Quote(s)
	}
	return fmt.Sprint(v)
}

// sameTrace: built-in workloads by name, files by file name (summaries
// record the path as given, and CI jobs may check out to different places).
func sameTrace(a, b string) bool {
	if strings.HasPrefix(a, "builtin:") || strings.HasPrefix(b, "builtin:") {
		return a == b
	}
	return filepath.Base(a) == filepath.Base(b)
}

// leafDiff is one differing leaf of two JSON trees.
type leafDiff struct {
	path string
	b, c string // JSON-encoded values, "(absent)" when missing
	// bn, cn are the numbers when both leaves are numbers.
	bn, cn  float64
	numbers bool
}

// leafDiffs lists the leaves where a and b differ, in path order; numbers
// differ when their relative difference exceeds tol.
func leafDiffs(a, b any, path string, tol float64) []leafDiff {
	var out []leafDiff
	var walk func(a, b any, path string, aok, bok bool)
	walk = func(a, b any, path string, aok, bok bool) {
		am, aIsMap := a.(map[string]any)
		bm, bIsMap := b.(map[string]any)
		if aIsMap && bIsMap {
			keys := make([]string, 0, len(am)+len(bm))
			for k := range am {
				keys = append(keys, k)
			}
			for k := range bm {
				if _, ok := am[k]; !ok {
					keys = append(keys, k)
				}
			}
			slices.Sort(keys)
			for _, k := range keys {
				av, aok := am[k]
				bv, bok := bm[k]
				walk(av, bv, joinPath(path, k), aok, bok)
			}
			return
		}
		al, aIsList := a.([]any)
		bl, bIsList := b.([]any)
		if aIsList && bIsList {
			for i := range max(len(al), len(bl)) {
				var av, bv any
				if i < len(al) {
					av = al[i]
				}
				if i < len(bl) {
					bv = bl[i]
				}
				walk(av, bv, path+"["+strconv.Itoa(i)+"]", i < len(al), i < len(bl))
			}
			return
		}
		if notCompared[path] {
			return
		}
		an, aNum := a.(float64)
		bn, bNum := b.(float64)
		if aok && bok && aNum && bNum {
			if an == bn || math.Abs(an-bn) <= tol*math.Max(math.Abs(an), math.Abs(bn)) {
				return
			}
			out = append(out, leafDiff{path: path, b: encodeLeaf(a, true), c: encodeLeaf(b, true), bn: an, cn: bn, numbers: true})
			return
		}
		ae, be := encodeLeaf(a, aok), encodeLeaf(b, bok)
		if ae != be {
			out = append(out, leafDiff{path: path, b: ae, c: be})
		}
	}
	walk(a, b, path, true, true)
	return out
}

func encodeLeaf(v any, ok bool) string {
	if !ok {
		return "(absent)"
	}
	if f, isNum := v.(float64); isNum {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	e, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(e)
}

// fieldChanges lists, run by run (lined up by seed), every field that
// differs beyond tol; wall-clock fields, sim.events and config.version are
// ignored.
func fieldChanges(bg, cg *runGroup, tol float64) []FieldChange {
	var out []FieldChange
	for i := range max(len(bg.runs), len(cg.runs)) {
		if i >= len(bg.runs) || i >= len(cg.runs) {
			break // different numbers of runs are reported as different seeds
		}
		br, cr := bg.runs[i], cg.runs[i]
		strip := func(t map[string]any) map[string]any {
			m := make(map[string]any, len(t))
			for k, v := range t {
				m[k] = v
			}
			if c, ok := t["config"].(map[string]any); ok {
				cc := make(map[string]any, len(c))
				for k, v := range c {
					if k != "version" {
						cc[k] = v
					}
				}
				m["config"] = cc
			}
			return m
		}
		name := br.Name
		if cr.Name != br.Name {
			name += " → " + cr.Name
		}
		for _, d := range leafDiffs(strip(br.tree), strip(cr.tree), "", tol) {
			fc := FieldChange{Run: name, Field: d.path, Baseline: d.b, Current: d.c}
			if d.numbers && d.bn != 0 {
				fc.Change = fmtPercent((d.cn - d.bn) / math.Abs(d.bn))
			}
			out = append(out, fc)
		}
	}
	return out
}

// ---------------------------------------------------------------------
// Rendering

// fmtValue formats a metric value compactly and deterministically.
func fmtValue(v float64) string {
	a := math.Abs(v)
	switch {
	case v == math.Trunc(v) && a < 1e15:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 3, 64)
	default:
		return strconv.FormatFloat(v, 'g', 4, 64)
	}
}

func signed(s string) string {
	if strings.HasPrefix(s, "-") {
		return s
	}
	return "+" + s
}

func fmtPercent(rel float64) string {
	p := rel * 100
	if p != 0 && math.Abs(p) < 0.01 {
		return signed(strconv.FormatFloat(p, 'g', 2, 64)) + "%"
	}
	if math.Abs(p) >= 10 {
		return signed(strconv.FormatFloat(p, 'f', 1, 64)) + "%"
	}
	return signed(strconv.FormatFloat(p, 'f', 2, 64)) + "%"
}

// cellValue renders one side ("–" when absent; mean ± sd over n runs).
func cellValue(s *SideStat) string {
	switch {
	case s == nil:
		return dash
	case s.N > 1:
		return fmtValue(s.Mean) + " ± " + fmtValue(s.SD) + " (n=" + strconv.Itoa(s.N) + ")"
	default:
		return fmtValue(s.Mean)
	}
}

// changeCell renders the change, relative change and noise band.
func (r *DiffRow) changeCell() string {
	if r.Baseline == nil || r.Current == nil {
		return dash
	}
	if r.Change == 0 && r.Noise == 0 {
		return "0"
	}
	s := signed(fmtValue(r.Change))
	if r.RelChange != nil {
		s += " (" + fmtPercent(*r.RelChange) + ")"
	} else if r.Change != 0 {
		s += " (from 0)"
	}
	if r.Noise > 0 {
		s += "; noise ±" + fmtValue(r.Noise)
	}
	return s
}

// sideCell renders one side of a row: its statistic, or "null" where
// the metric is undefined ("null in 2 of 5 runs").
func (r *DiffRow) sideCell(s *SideStat, nulls, runs int) string {
	switch {
	case nulls == 0:
		return cellValue(s)
	case nulls == runs && runs == 1:
		return "null"
	}
	return "null in " + strconv.Itoa(nulls) + " of " + strconv.Itoa(runs) + " runs"
}

func (r *DiffRow) baselineCell() string { return r.sideCell(r.Baseline, r.BaselineNull, r.bRuns) }
func (r *DiffRow) currentCell() string  { return r.sideCell(r.Current, r.CurrentNull, r.cRuns) }

// verdictCell is the verdict column; a row that is not comparable says
// which side is undefined, in capitals when that fails the comparison.
func (r *DiffRow) verdictCell() string {
	if r.Verdict != VerdictNotComparable {
		return verdictText(r.Verdict)
	}
	side := "undefined in baseline and current"
	switch {
	case r.BaselineNull == 0:
		side = "undefined in current"
	case r.CurrentNull == 0:
		side = "undefined in baseline"
	}
	if r.Fails {
		return "**NOT COMPARABLE**: " + side + ", the check cannot pass"
	}
	return "not comparable: " + side
}

func (r *DiffRow) thresholdCell() string {
	if r.Threshold == "" {
		return dash
	}
	return r.Threshold
}

func verdictText(v Verdict) string {
	switch v {
	case VerdictRegression:
		return "**REGRESSION**"
	case VerdictImproved:
		return "improved"
	case VerdictNoise:
		return "within noise"
	case VerdictInfo:
		return ""
	}
	return string(v)
}

// maxChangedRows bounds the changed-field rows per pair in the Markdown.
const maxChangedRows = 40

// headline is the one-word outcome: REGRESSION when a threshold is
// exceeded, CHANGED when only strict-mode fields differ.
func (r *DiffResult) headline() string {
	regressed, changed := false, false
	for i := range r.Pairs {
		regressed = regressed || r.Pairs[i].regressed()
		changed = changed || len(r.Pairs[i].Changes) > 0
	}
	switch {
	case regressed:
		return "REGRESSION"
	case changed:
		return "CHANGED"
	case r.Tolerance > 0:
		return "no change"
	}
	return "no regression"
}

func (p *PairDiff) regressed() bool {
	return slices.ContainsFunc(p.Rows, func(r DiffRow) bool { return r.Fails })
}

// Markdown renders the comparison for a CI job summary or PR comment.
func (r *DiffResult) Markdown() []byte {
	var b bytes.Buffer
	b.WriteString("## eppsim diff: " + r.headline() + "\n\n")
	b.WriteString("Baseline " + mdCode(r.Baseline) + ", current " + mdCode(r.Current) + ".")
	var nReg, nUndef, nChg int
	for _, p := range r.Pairs {
		for _, row := range p.Rows {
			switch {
			case row.Verdict == VerdictRegression:
				nReg++
			case row.Fails:
				nUndef++
			}
		}
		nChg += len(p.Changes)
	}
	if nReg > 0 {
		fmt.Fprintf(&b, " **%s beyond %s.**", plural(nReg, "metric"), map[bool]string{true: "its threshold", false: "their thresholds"}[nReg == 1])
	}
	if nUndef > 0 {
		fmt.Fprintf(&b, " **%s undefined (null) in current: nothing there to check.**", plural(nUndef, "checked metric"))
	}
	if nChg > 0 {
		fmt.Fprintf(&b, " **%s changed beyond the tolerance.**", plural(nChg, "field"))
	}
	b.WriteString("\n")
	for i := range r.Pairs {
		p := &r.Pairs[i]
		b.WriteString("\n### " + mdEscape(p.Label()))
		if len(p.BaselineRuns) > 1 || len(p.CurrentRuns) > 1 {
			fmt.Fprintf(&b, " (%d runs vs %d; seeds %s)", len(p.BaselineRuns), len(p.CurrentRuns), fmtSeeds(p.Seeds))
		}
		b.WriteString("\n\n")
		if r.Tolerance > 0 && len(p.Changes) == 0 && !p.regressed() {
			fmt.Fprintf(&b, "Every field matches within the tolerance (%g relative).\n", r.Tolerance)
			continue
		}
		b.WriteString("| metric | baseline | current | change | threshold | verdict |\n|---|---:|---:|---:|---:|---|\n")
		for j := range p.Rows {
			row := &p.Rows[j]
			b.WriteString("| " + mdCode(row.Metric) + " | " + row.baselineCell() + " | " + row.currentCell() + " | " +
				row.changeCell() + " | " + mdEscape(row.thresholdCell()) + " | " + row.verdictCell() + " |\n")
		}
		if len(p.Changes) > 0 {
			fmt.Fprintf(&b, "\n%d fields changed beyond the tolerance (%g relative):\n\n", len(p.Changes), r.Tolerance)
			b.WriteString("| run | field | baseline | current | change |\n|---|---|---:|---:|---:|\n")
			for k, c := range p.Changes {
				if k == maxChangedRows {
					fmt.Fprintf(&b, "| … | %d more (see diff.json) | | | |\n", len(p.Changes)-maxChangedRows)
					break
				}
				b.WriteString("| " + mdEscape(c.Run) + " | " + mdCode(c.Field) + " | " + mdEscape(clip(c.Baseline)) + " | " +
					mdEscape(clip(c.Current)) + " | " + c.Change + " |\n")
			}
		} else if r.Tolerance > 0 {
			fmt.Fprintf(&b, "\nEvery field matches within the tolerance (%g relative).\n", r.Tolerance)
		}
	}
	if len(r.Notes) > 0 {
		b.WriteString("\nNotes:\n\n")
		for _, n := range r.Notes {
			b.WriteString("- " + mdEscape(n) + "\n")
		}
	}
	b.WriteString("\nThresholds: `+` means an increase beyond the threshold is a regression, `-` a decrease; " +
		"`%` thresholds are relative to the baseline.")
	if r.multiSeed {
		b.WriteString(" Configs with several runs show mean ± standard deviation over the runs; a change beyond its threshold " +
			"is a regression only when it also exceeds the noise band: 2·sd(c_i − b_i)/√n over the per-seed differences " +
			"when both sides ran the same seeds, else 2·√(sd_b²/n_b + sd_c²/n_c).")
	}
	b.WriteString("\n")
	return b.Bytes()
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

func fmtSeeds(s []uint64) string {
	parts := make([]string, len(s))
	for i, v := range s {
		parts[i] = strconv.FormatUint(v, 10)
	}
	return strings.Join(parts, ", ")
}

// clip shortens long field values (whole configs) for the table.
func clip(s string) string {
	const maxLen = 80
	if r := []rune(s); len(r) > maxLen {
		return string(r[:maxLen-1]) + "…"
	}
	return s
}

// JSON renders the comparison as indented JSON (diff.json).
func (r *DiffResult) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("report: encoding diff: %w", err)
	}
	return append(b, '\n'), nil
}

// RegressedMetrics lists "run: metric" for each regression, for a one-line
// message.
func (r *DiffResult) RegressedMetrics() []string {
	var out []string
	for _, p := range r.Pairs {
		for _, row := range p.Rows {
			switch {
			case row.Verdict == VerdictRegression:
				out = append(out, p.Label()+": "+row.Metric)
			case row.Fails:
				out = append(out, p.Label()+": "+row.Metric+" (undefined in current)")
			}
		}
		for _, c := range p.Changes {
			out = append(out, c.Run+": "+c.Field)
		}
	}
	return out
}
