package sweep

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eppsim/eppsim/sim"
)

// maxValuesPerDim bounds the values one --vary expands to.
const maxValuesPerDim = 10000

// dimKind is what a dimension addresses.
type dimKind int

const (
	kindWeight   dimKind = iota // plugin.weight: scorer weight in every profile
	kindParam                   // plugin.path: a key in the plugin's parameters
	kindInt                     // integer fleet knob
	kindUint                    // unsigned knob (seed)
	kindDuration                // duration environment knob
)

// knob describes one fleet or environment knob that --vary accepts.
type knob struct {
	kind dimKind
	// min is the smallest accepted value (integers; durations in ns);
	// max > 0 the largest (integers).
	min  int64
	help string
	max  int64
}

// knobNames lists the knobs in documentation order.
func knobNames() []string {
	return []string{"replicas", "num-gpu-blocks-override", "max-num-seqs", "max-num-batched-tokens", "block-size",
		"kv-event-lag", "refresh-metrics-interval", "epp-latency", "network-latency", "seed"}
}

// lookupKnob returns the knob called name.
func lookupKnob(name string) (knob, bool) {
	switch name {
	case "replicas":
		return knob{kind: kindInt, min: 1, help: "number of replicas (uniform fleet only)", max: sim.MaxReplicas}, true
	case "num-gpu-blocks-override", "kv-blocks": // kv-blocks: the flag's old name
		return knob{kind: kindInt, min: 2, help: "num_gpu_blocks_override of every replica (null block included)"}, true
	case "max-num-seqs":
		return knob{kind: kindInt, min: 1, help: "max_num_seqs of every replica"}, true
	case "max-num-batched-tokens", "max-batched-tokens": // max-batched-tokens: the flag's old name
		return knob{kind: kindInt, min: 1, help: "max_num_batched_tokens of every replica"}, true
	case "block-size":
		return knob{kind: kindInt, min: 1, help: "KV block size of every replica"}, true
	case "kv-event-lag":
		return knob{kind: kindDuration, min: 0, help: "KV event delivery lag to the EPP"}, true
	case "refresh-metrics-interval":
		return knob{kind: kindDuration, min: int64(time.Millisecond), help: "EPP metrics scrape period (at least 1ms, as --refresh-metrics-interval)"}, true
	case "epp-latency":
		return knob{kind: kindDuration, min: 0, help: "EPP decision latency"}, true
	case "network-latency":
		return knob{kind: kindDuration, min: 0, help: "network latency before the replica"}, true
	case "seed":
		return knob{kind: kindUint, min: 0, help: "run seed (workload synthesis and EPP randomness)"}, true
	}
	return knob{}, false
}

// Dim is one varied dimension: a parameter address and its values in the
// order they are swept. Values are canonical text (numbers in shortest
// decimal form, durations as time.Duration prints them).
type Dim struct {
	Name   string
	Values []string

	kind   dimKind
	plugin string   // weight, param
	path   []string // param: the key path inside the parameters
}

// String is the --vary form of d.
func (d Dim) String() string { return d.Name + "=" + strings.Join(d.Values, ",") }

// IsWeight reports whether d addresses a scorer weight.
func (d Dim) IsWeight() bool { return d.kind == kindWeight }

// Plugin returns the addressed plugin name ("" for knobs).
func (d Dim) Plugin() string { return d.plugin }

// ParseVary parses a --vary value NAME=VALUES. NAME is a knob (see
// docs/sweeps.md), PLUGIN.weight or PLUGIN.PARAM[.SUBKEY...]; VALUES is a
// comma-separated list of values and ranges FROM:TO:STEP (inclusive).
func ParseVary(s string) (Dim, error) {
	name, vals, ok := strings.Cut(s, "=")
	if !ok {
		return Dim{}, fmt.Errorf("--vary %q: want NAME=VALUES (e.g. prefix-cache-scorer.weight=0:5:1)", s)
	}
	d, err := parseName(strings.TrimSpace(name))
	if err != nil {
		return Dim{}, fmt.Errorf("--vary %q: %w", s, err)
	}
	if d.Values, err = d.expand(vals); err != nil {
		return Dim{}, fmt.Errorf("--vary %q: %w", s, err)
	}
	return d, nil
}

// newDim rebuilds a dimension from its name and canonical values (as
// stored in a points file).
func newDim(name string, values []string) (Dim, error) {
	d, err := parseName(name)
	if err != nil {
		return Dim{}, err
	}
	d.Values = slices.Clone(values)
	return d, nil
}

// parseName classifies a dimension name.
func parseName(name string) (Dim, error) {
	d := Dim{Name: name}
	if name == "" {
		return d, errors.New("empty name")
	}
	if strings.ContainsAny(name, " \t\n\r,=:\"") {
		return d, fmt.Errorf("name %q: invalid character", name)
	}
	plugin, rest, dotted := strings.Cut(name, ".")
	if !dotted {
		k, ok := lookupKnob(name)
		if !ok {
			return d, fmt.Errorf("unknown knob %q (knobs: %s; plugin parameters are PLUGIN.weight or PLUGIN.PARAM)",
				name, strings.Join(knobNames(), ", "))
		}
		d.kind = k.kind
		return d, nil
	}
	if plugin == "" {
		return d, fmt.Errorf("name %q: empty plugin name", name)
	}
	path := strings.Split(rest, ".")
	for _, p := range path {
		if p == "" {
			return d, fmt.Errorf("name %q: empty parameter name", name)
		}
	}
	d.plugin, d.path = plugin, path
	d.kind = kindParam
	if len(path) == 1 && path[0] == "weight" {
		d.kind = kindWeight
	}
	return d, nil
}

// expand parses a comma-separated value list with ranges.
func (d Dim) expand(list string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for item := range strings.SplitSeq(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			return nil, errors.New("empty value (want a comma-separated list of values or FROM:TO:STEP ranges)")
		}
		var vals []string
		var err error
		if strings.Count(item, ":") == 2 && !strings.HasPrefix(item, `"`) {
			vals, err = d.expandRange(item)
		} else {
			var v string
			v, err = d.scalar(item)
			vals = []string{v}
		}
		if err != nil {
			return nil, err
		}
		for _, v := range vals {
			if seen[v] {
				return nil, fmt.Errorf("value %s given twice", v)
			}
			seen[v] = true
			out = append(out, v)
			if len(out) > maxValuesPerDim {
				return nil, fmt.Errorf("more than %d values", maxValuesPerDim)
			}
		}
	}
	return out, nil
}

// scalar validates one value and returns its canonical text.
func (d Dim) scalar(s string) (string, error) {
	switch d.kind {
	case kindWeight:
		f, err := parseNumber(s)
		if err != nil {
			return "", fmt.Errorf("weight %q: %w", s, err)
		}
		return formatNum(f), nil
	case kindParam:
		if f, err := parseNumber(s); err == nil {
			return formatNum(f), nil
		}
		if strings.ContainsAny(s[:1], "{[") || strings.HasPrefix(s, `"`) {
			var v any
			if err := json.Unmarshal([]byte(s), &v); err != nil {
				return "", fmt.Errorf("value %s: invalid JSON: %w", s, err)
			}
			if s[0] == '"' {
				return s, nil
			}
			b, err := json.Marshal(v)
			if err != nil {
				return "", fmt.Errorf("value %s: %w", s, err)
			}
			return string(b), nil
		}
		return s, nil // true, false, null or a bare string
	case kindInt:
		k, _ := lookupKnob(d.Name)
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return "", fmt.Errorf("%s %q: not an integer", d.Name, s)
		}
		if v < k.min {
			return "", fmt.Errorf("%s %d: must be at least %d", d.Name, v, k.min)
		}
		if k.max > 0 && v > k.max {
			return "", fmt.Errorf("%s %d: at most %d", d.Name, v, k.max)
		}
		if v > math.MaxInt32 {
			return "", fmt.Errorf("%s %d: too large", d.Name, v)
		}
		return strconv.FormatInt(v, 10), nil
	case kindUint:
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return "", fmt.Errorf("%s %q: not a non-negative integer", d.Name, s)
		}
		return strconv.FormatUint(v, 10), nil
	case kindDuration:
		v, err := parseDuration(s)
		if err != nil {
			return "", fmt.Errorf("%s %q: %w", d.Name, s, err)
		}
		k, _ := lookupKnob(d.Name)
		if int64(v) < k.min {
			if k.min > 0 {
				return "", fmt.Errorf("%s %s: must be at least %s", d.Name, v, time.Duration(k.min))
			}
			return "", fmt.Errorf("%s %s: must not be negative", d.Name, v)
		}
		return v.String(), nil
	}
	return "", fmt.Errorf("%s: unsupported value %q", d.Name, s)
}

// expandRange expands FROM:TO:STEP (inclusive of TO when the steps land
// on it).
func (d Dim) expandRange(item string) ([]string, error) {
	parts := strings.Split(item, ":")
	bad := func(err error) ([]string, error) {
		return nil, fmt.Errorf("range %q: %w", item, err)
	}
	var a, b, step float64
	var conv func(float64) (string, error)
	switch d.kind {
	case kindDuration:
		var ds [3]time.Duration
		for i, p := range parts {
			v, err := parseDuration(strings.TrimSpace(p))
			if err != nil {
				return bad(err)
			}
			ds[i] = v
		}
		a, b, step = float64(ds[0]), float64(ds[1]), float64(ds[2])
		conv = func(f float64) (string, error) { return d.scalar(time.Duration(math.Round(f)).String()) }
	case kindInt, kindUint:
		var is [3]int64
		for i, p := range parts {
			v, err := strconv.ParseInt(strings.TrimSpace(p), 10, 64)
			if err != nil {
				return bad(fmt.Errorf("%q is not an integer", p))
			}
			if v > math.MaxInt32 || v < -math.MaxInt32 {
				return bad(fmt.Errorf("%d is too large", v))
			}
			is[i] = v
		}
		a, b, step = float64(is[0]), float64(is[1]), float64(is[2])
		conv = func(f float64) (string, error) { return d.scalar(strconv.FormatInt(int64(math.Round(f)), 10)) }
	default:
		var fs [3]float64
		for i, p := range parts {
			v, err := parseNumber(strings.TrimSpace(p))
			if err != nil {
				return bad(err)
			}
			fs[i] = v
		}
		a, b, step = fs[0], fs[1], fs[2]
		conv = func(f float64) (string, error) { return d.scalar(formatNum(f)) }
	}
	if step == 0 {
		return bad(errors.New("step must not be zero"))
	}
	span := (b - a) / step
	if span < -1e-9 || math.IsNaN(span) {
		return bad(errors.New("empty: the step goes away from TO"))
	}
	n := math.Floor(span*(1+1e-12)+1e-9) + 1
	if n > maxValuesPerDim {
		return bad(fmt.Errorf("more than %d values", maxValuesPerDim))
	}
	out := make([]string, 0, int(n))
	for i := range int(n) {
		v := a + float64(i)*step
		// Shed float noise (0.1*3 = 0.30000000000000004).
		v, _ = strconv.ParseFloat(strconv.FormatFloat(v, 'g', 12, 64), 64)
		s, err := conv(v)
		if err != nil {
			return bad(err)
		}
		out = append(out, s)
	}
	return out, nil
}

// parseNumber parses a finite decimal number.
func parseNumber(s string) (float64, error) {
	if s == "" || strings.ContainsAny(s, "xX_pP") {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%q is not a finite number", s)
	}
	return f, nil
}

// parseDuration accepts Go durations and a bare 0.
func parseDuration(s string) (time.Duration, error) {
	if s == "0" {
		return 0, nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("not a duration (e.g. 5ms, 1s): %w", err)
	}
	return v, nil
}

// formatNum formats f as its shortest decimal that is also a JSON number
// (no exponent in the usual range, so that integers decode into int
// parameters).
func formatNum(f float64) string {
	if f == 0 {
		return "0"
	}
	if a := math.Abs(f); a < 1e-6 || a >= 1e21 {
		return strconv.FormatFloat(f, 'e', -1, 64)
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// paramJSON is the JSON value a parameter value stands for: numbers,
// true/false/null and JSON literals as themselves, anything else as a
// string.
func paramJSON(v string) json.RawMessage {
	if json.Valid([]byte(v)) {
		return json.RawMessage(v)
	}
	b, _ := json.Marshal(v)
	return b
}
