package config

import (
	"strings"
	"testing"
)

func TestOverflowsFloat(t *testing.T) {
	for _, tt := range []struct {
		s    string
		want bool
	}{
		{"1e309", true}, {"-1e309", true}, {"+1E+309", true}, {"9.9e308", true}, {"1_000e306", true},
		{".5e310", true}, {"5.e310", true}, {strings.Repeat("9", 309), true}, {"1" + strings.Repeat("0", 210) + "e99", true},
		{"1e308", false}, {"1e-400", false}, {"1.7976931348623157e308", false}, {"0x1p2000", false}, {"inf", false},
		{"1e309x", false}, {"--1e309", false}, {"e309", false}, {".e309", false}, {"1e", false}, {"", false}, {"1e3_09", true},
	} {
		if got := overflowsFloat(tt.s); got != tt.want {
			t.Errorf("overflowsFloat(%q) = %v", tt.s, got)
		}
		if tt.want && !mayOverflow([]byte("w: "+tt.s+"\n")) {
			t.Errorf("mayOverflow misses %q", tt.s)
		}
	}
	if mayOverflow([]byte("weight: 1e99\nx: 123456789.5e-12\nname: e1000\n")) {
		t.Error("mayOverflow: a document without a large number")
	}
}

// FuzzOverflowFilter: the cheap filter never misses a number that
// overflows, so checkNumbers skips no document it would reject.
func FuzzOverflowFilter(f *testing.F) {
	for _, s := range []string{"1e309", "9.9e308", "1_0e3_08", strings.Repeat("9", 309), "1e-400", "0x1p2000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if overflowsFloat(s) && !mayOverflow([]byte(s)) {
			t.Fatalf("mayOverflow misses %q", s)
		}
	})
}
