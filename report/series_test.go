package report

import (
	"math"
	"slices"
	"testing"

	"gonum.org/v1/plot"
)

func TestSeriesCoarsensBeyondMaxBins(t *testing.T) {
	tests := []struct {
		n        int // instants added, instant i has t = i, a = 1, b = i
		wantBins int
		wantPer  int
	}{
		{1, 1, 1},
		{maxSeriesBins, maxSeriesBins, 1},
		// One more: pairs merge (512 bins of 2) and a new bin starts.
		{maxSeriesBins + 1, maxSeriesBins/2 + 1, 2},
		{2 * maxSeriesBins, maxSeriesBins, 2},
		{2*maxSeriesBins + 1, maxSeriesBins/2 + 1, 4},
	}
	for _, tc := range tests {
		var s series
		for i := range tc.n {
			s.add(float64(i), 1, float64(i))
		}
		if len(s.bins) != tc.wantBins || s.per != tc.wantPer {
			t.Errorf("n=%d: %d bins of %d, want %d of %d", tc.n, len(s.bins), s.per, tc.wantBins, tc.wantPer)
			continue
		}
		// Nothing is lost, and bin k holds instants [k·per, (k+1)·per).
		var n int
		var sumA, sumB float64
		for _, b := range s.bins {
			n += b.n
			sumA += b.a
			sumB += b.b
		}
		if n != tc.n || sumA != float64(tc.n) || sumB != float64(tc.n*(tc.n-1)/2) {
			t.Errorf("n=%d: bins hold n=%d a=%v b=%v", tc.n, n, sumA, sumB)
		}
		if b := s.bins[0]; b.n != tc.wantPer && tc.n >= tc.wantPer || b.t != float64(b.n*(b.n-1)/2) {
			t.Errorf("n=%d: first bin %+v", tc.n, b)
		}
	}
}

func TestCoarsen(t *testing.T) {
	bins := []seriesBin{{1, 1, 10, 1}, {2, 2, 20, 1}, {3, 3, 30, 1}, {4, 4, 40, 1}, {5, 5, 50, 1}}
	tests := []struct {
		max  int
		want []seriesBin
	}{
		{5, bins},
		{10, bins},
		{3, []seriesBin{{3, 3, 30, 2}, {7, 7, 70, 2}, {5, 5, 50, 1}}},
		{2, []seriesBin{{6, 6, 60, 3}, {9, 9, 90, 2}}},
		{1, []seriesBin{{15, 15, 150, 5}}},
	}
	for _, tc := range tests {
		if got := coarsen(bins, tc.max); !slices.Equal(got, tc.want) {
			t.Errorf("coarsen(%d) = %v, want %v", tc.max, got, tc.want)
		}
	}
}

func TestTimeBinsDoubleWidth(t *testing.T) {
	// v is a bin with the cached, oracle and prompt sums (the other rungs
	// follow the same arithmetic; the last one checks that they are summed
	// too).
	v := func(c, o, p int64) binVals {
		return binVals{binCached: c, binOracle: o, binPrompt: p, binInfinite: c + o}
	}
	var tb timeBins
	tb.add(0, v(1, 2, 3))
	tb.add(250e6, v(10, 20, 30)) // bin 2 of 100 ms
	if tb.width != 100e6 || len(tb.bins) != 3 || tb.bins[2] != v(10, 20, 30) {
		t.Fatalf("width %d bins %v", tb.width, tb.bins)
	}
	// 60 s needs bin 600 of 100 ms: the width doubles to 200 ms (bin 300)
	// and earlier bins merge pairwise.
	tb.add(60e9, v(100, 200, 300))
	if tb.width != 200e6 || len(tb.bins) != 301 || tb.bins[0] != v(1, 2, 3) || tb.bins[1] != v(10, 20, 30) ||
		tb.bins[300] != v(100, 200, 300) {
		t.Fatalf("width %d, %d bins, first %v", tb.width, len(tb.bins), tb.bins[:2])
	}
	// Out of order is fine.
	tb.add(0.1e9, v(1, 1, 1))
	if tb.bins[0] != v(2, 3, 4) {
		t.Fatalf("bin 0 = %v", tb.bins[0])
	}
	got, w := tb.coarsened(100)
	if w != 800e6 || len(got) != 76 || got[0] != v(12, 23, 34) || got[75] != v(100, 200, 300) {
		t.Fatalf("coarsened: width %d, %d bins, %v … %v", w, len(got), got[0], got[len(got)-1])
	}
}

func TestAppendField(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"plain", "plain"},
		{"a,b", `"a,b"`},
		{`say "hi"`, `"say ""hi"""`},
		{"two\nlines", "\"two\nlines\""},
		{" lead", `" lead"`},
		{"default/vllm-0", "default/vllm-0"},
	}
	for _, tc := range tests {
		if got := string(appendField(nil, tc.in)); got != tc.want {
			t.Errorf("appendField(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestLog10Ticks(t *testing.T) {
	labels := func(ts []plot.Tick) []string {
		var out []string
		for _, tk := range ts {
			if tk.Label != "" {
				out = append(out, tk.Label)
			}
		}
		return out
	}
	tests := []struct {
		lo, hi float64 // in ms
		want   []string
	}{
		{20, 300, []string{"20", "50", "100", "200"}},
		{2, 9, []string{"2", "3", "5"}},
		{25, 30000, []string{"100", "1000", "10000"}},
	}
	for _, tc := range tests {
		ts := log10Ticks{}.Ticks(log10(tc.lo), log10(tc.hi))
		if got := labels(ts); !slices.Equal(got, tc.want) {
			t.Errorf("ticks %v–%v: labels %v, want %v", tc.lo, tc.hi, got, tc.want)
		}
	}
	if ts := (log10Ticks{}).Ticks(1, 1); ts != nil {
		t.Errorf("empty range gave %v", ts)
	}
}

func log10(x float64) float64 { return math.Log10(x) }
