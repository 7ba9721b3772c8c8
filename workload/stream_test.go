package workload

import (
	"strings"
	"testing"
)

func TestTimeScaleAndRate(t *testing.T) {
	base := readFile(t, "testdata/mooncake.jsonl", Options{Mode: ModeClosedLoop, NoTokens: true})
	half := readFile(t, "testdata/mooncake.jsonl", Options{Mode: ModeClosedLoop, NoTokens: true, TimeScale: 0.5})
	for i := range base {
		if half[i].Arrival != base[i].Arrival/2 || half[i].ThinkTime != base[i].ThinkTime/2 {
			t.Errorf("request %d: %d/%d vs %d/%d", i, half[i].Arrival, half[i].ThinkTime, base[i].Arrival, base[i].ThinkTime)
		}
	}
	checkInvariants(t, half)
	// The fixture has 6 requests over 4 s: a rate of 5/4 = 1.25 req/s
	// between first and last. Asking for 2.5 req/s halves every time.
	fast := readFile(t, "testdata/mooncake.jsonl", Options{NoTokens: true, Rate: 2.5})
	if last := fast[len(fast)-1].Arrival; last != 2e9 {
		t.Errorf("last arrival %d, want 2e9", last)
	}
	if _, err := Open("testdata/mooncake.jsonl", opts(Options{Rate: 1, TimeScale: 2})); err == nil {
		t.Error("rate with time scale accepted")
	}
	if _, err := NewSource(strings.NewReader(""), "x", opts(Options{Format: FormatMooncake, Rate: 1})); err == nil {
		t.Error("rate on a reader accepted")
	}
	if _, err := NewSource(strings.NewReader(""), "x", opts(Options{TimeScale: -1})); err == nil {
		t.Error("negative time scale accepted")
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open("testdata/missing.jsonl", opts(Options{})); err == nil {
		t.Error("missing file opened")
	}
	_, err := NewSource(strings.NewReader("hello\n"), "x.txt", opts(Options{}))
	if err == nil || !IsInputError(err) || !strings.HasPrefix(err.Error(), "x.txt:1: cannot detect the trace format") {
		t.Errorf("undetectable input: %v", err)
	}
}

func TestParseTime(t *testing.T) {
	tests := []struct {
		in   string
		unit int64
		want int64
		ok   bool
	}{
		{"0", 1e6, 0, true},
		{"1500.5", 1e6, 1500500000, true},
		{"1500.000001", 1e6, 1500000001, true},
		{"4.000001", 1e9, 4000001000, true},
		{"0.1234567891234", 1e9, 123456789, true},
		{"1.5e3", 1e6, 1500e6, true},
		{"-0", 1e6, 0, true},
		{"-1", 1e6, 0, false},
		{"1e400", 1e6, 0, false},
		{"99999999999999999999", 1e6, 0, false},
		{"1.x", 1e6, 0, false},
	}
	for _, tt := range tests {
		got, err := parseTime(tt.in, tt.unit)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseTime(%q) = %d, %v", tt.in, got, err)
		}
	}
	for _, ns := range []int64{0, 1, 999999, 1e6, 1500500000, 123456789012} {
		back, err := parseTime(formatMillis(ns), 1e6)
		if err != nil || back != ns {
			t.Errorf("formatMillis(%d) = %s -> %d", ns, formatMillis(ns), back)
		}
	}
}

func TestSessionTableBounded(t *testing.T) {
	st := newSessionTable[int](100, 5)
	for i := range 1000 {
		st.put(i, turnRef{id: int64(i), arrival: int64(i)})
		if st.len() > 5 || len(st.q)-st.head > 10 {
			t.Fatalf("after %d puts: %d entries, queue %d", i, st.len(), len(st.q)-st.head)
		}
	}
	if _, ok := st.get(999, 999); !ok {
		t.Error("latest entry evicted")
	}
	if _, ok := st.get(994, 999); ok {
		t.Error("entry beyond the cap kept")
	}
	wide := newSessionTable[int](10, 100)
	wide.put(1, turnRef{id: 1, arrival: 0})
	if _, ok := wide.get(1, 11); ok {
		t.Error("entry outside the window returned")
	}
}
