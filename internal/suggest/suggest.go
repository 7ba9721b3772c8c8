// Package suggest finds the name a user probably meant: edit distance over
// a list of names, and "did you mean" hints for the unknown-field errors of
// strict JSON decoding. It knows nothing of eppsim's domain; replica, sim
// and epp/config share it.
package suggest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// Closest returns the first of names closest to s by edit distance
// (Levenshtein), or "" when none is within maxDist.
func Closest(s string, names []string, maxDist int) string {
	best, bestD := "", maxDist+1
	for _, n := range names {
		if d := editDistance(s, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 1 << 30
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := 1
			if a[i-1] == b[j-1] {
				c = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+c)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// UnknownField improves encoding/json's `json: unknown field "X"` error
// (DisallowUnknownFields) with a suggestion: renames[X] when X is a known
// old spelling, else the closest JSON field name of v's type (searched
// recursively through nested structs, slices and maps). Other errors are
// returned unchanged.
func UnknownField(err error, v any, renames map[string]string) error {
	if err == nil {
		return nil
	}
	const prefix = `json: unknown field "`
	msg := err.Error()
	if !strings.HasPrefix(msg, prefix) || !strings.HasSuffix(msg, `"`) {
		return err
	}
	field := strings.TrimSuffix(strings.TrimPrefix(msg, prefix), `"`)
	if to, ok := renames[field]; ok {
		return fmt.Errorf("unknown field %q; did you mean %s? (renamed)", field, to)
	}
	names := FieldNames(reflect.TypeOf(v))
	if s := Closest(field, names, max(2, len(field)/3)); s != "" {
		return fmt.Errorf("unknown field %q; did you mean %s?", field, s)
	}
	return errors.New(strings.TrimPrefix(msg, "json: "))
}

// FieldNames lists the JSON names of t's fields and of every struct type
// reachable from it, sorted and without duplicates.
func FieldNames(t reflect.Type) []string {
	seen := map[reflect.Type]bool{}
	var out []string
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t != nil && (t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map) {
			t = t.Elem()
		}
		if t == nil || t.Kind() != reflect.Struct || seen[t] {
			return
		}
		seen[t] = true
		for f := range t.Fields() {
			tag := f.Tag.Get("json")
			name, _, _ := strings.Cut(tag, ",")
			if name == "-" || (!f.IsExported() && !f.Anonymous) {
				continue
			}
			if f.Anonymous && name == "" {
				walk(f.Type)
				continue
			}
			if name == "" {
				name = f.Name
			}
			out = append(out, name)
			walk(f.Type)
		}
	}
	walk(t)
	slices.Sort(out)
	return slices.Compact(out)
}
