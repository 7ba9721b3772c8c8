package report

import (
	"encoding/json"
	"fmt"
	"math"
)

// Num is a metric that can be undefined: a mean, percentile, ratio or
// rate of an empty set (no measured request, no prompt token, no measured
// time; docs/metrics.md says when for each field). An undefined Num is
// NaN in Go and null in JSON; a defined one is encoded exactly as a
// float64 would be, so that summaries of runs where everything is defined
// read as they always did. The zero value is a defined 0.
type Num float64

// Undefined returns the undefined Num.
func Undefined() Num { return Num(math.NaN()) }

// Defined reports whether n has a value.
func (n Num) Defined() bool { return !math.IsNaN(float64(n)) }

// Float is n as a float64, NaN when undefined.
func (n Num) Float() float64 { return float64(n) }

// ratio is num ÷ den, undefined when den is 0.
func ratio(num, den float64) Num {
	if den == 0 {
		return Undefined()
	}
	return Num(num / den)
}

// MarshalJSON encodes an undefined Num as null and a defined one as the
// float64 it holds.
func (n Num) MarshalJSON() ([]byte, error) {
	if !n.Defined() {
		return []byte("null"), nil
	}
	b, err := json.Marshal(float64(n))
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	return b, nil
}

// UnmarshalJSON reads null as undefined and a number as itself.
func (n *Num) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*n = Undefined()
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*n = Num(f)
	return nil
}

// na is the table cell of an undefined metric.
const na = "n/a"

// fn formats n with prec decimals, na when undefined.
func fn(n Num, prec int) string {
	if !n.Defined() {
		return na
	}
	return ff(float64(n), prec)
}

// p50p99 is a "p50 / p99" cell, na for an empty sample.
func p50p99(d Dist, prec int) string {
	if !d.P50.Defined() {
		return na
	}
	return fn(d.P50, prec) + " / " + fn(d.P99, prec)
}

// pctN formats a share as a percentage ("17.6%"), na when undefined.
func pctN(n Num) string {
	if !n.Defined() {
		return na
	}
	return pct(float64(n))
}
