package report

// maxSeriesBins bounds the points a time series keeps; beyond it adjacent
// bins are merged (and each new bin takes twice as many samples), so memory
// is bounded whatever the run's length and sample interval.
const maxSeriesBins = 1024

// series is a time series of sample instants, binned by count: each bin
// sums `per` consecutive instants' time and two values.
type series struct {
	per  int
	bins []seriesBin
}

type seriesBin struct {
	t, a, b float64 // sums
	n       int
}

func (s *series) add(t, a, b float64) {
	if s.per == 0 {
		s.per = 1
	}
	if n := len(s.bins); n > 0 && s.bins[n-1].n < s.per {
		last := &s.bins[n-1]
		last.t += t
		last.a += a
		last.b += b
		last.n++
		return
	}
	if len(s.bins) == maxSeriesBins {
		for i := range len(s.bins) / 2 {
			x, y := s.bins[2*i], s.bins[2*i+1]
			s.bins[i] = seriesBin{t: x.t + y.t, a: x.a + y.a, b: x.b + y.b, n: x.n + y.n}
		}
		s.bins = s.bins[:len(s.bins)/2]
		s.per *= 2
	}
	s.bins = append(s.bins, seriesBin{t: t, a: a, b: b, n: 1})
}

// maxTimeBins bounds the arrival-time bins of a run.
const maxTimeBins = 512

// The token sums of a time bin.
const (
	binCached   = iota // true reuse (cached tokens)
	binOracle          // best replica at routing
	binPrompt          // prompt tokens
	binRouted          // chosen replica at routing
	binInfinite        // infinite cache
	nBinVals
)

// binVals are the token sums of one bin (indexed by bin*).
type binVals [nBinVals]int64

// timeBins sums token counts of records by arrival time in bins of a fixed
// width (starting at 100 ms) that doubles whenever a record falls beyond
// the last bin, so records may arrive in any order.
type timeBins struct {
	width int64
	bins  []binVals
}

func (tb *timeBins) add(t int64, v binVals) {
	if tb.width == 0 {
		tb.width = 100_000_000
	}
	t = max(t, 0)
	k := t / tb.width
	for k >= maxTimeBins {
		for i := range (len(tb.bins) + 1) / 2 {
			var m binVals
			for j := 2 * i; j < min(2*i+2, len(tb.bins)); j++ {
				for c := range m {
					m[c] += tb.bins[j][c]
				}
			}
			tb.bins[i] = m
		}
		tb.bins = tb.bins[:(len(tb.bins)+1)/2]
		tb.width *= 2
		k = t / tb.width
	}
	for int64(len(tb.bins)) <= k {
		tb.bins = append(tb.bins, binVals{})
	}
	for c := range v {
		tb.bins[k][c] += v[c]
	}
}

// coarsen merges consecutive bins in groups so that at most maxPts remain
// (for plotting: per-interval ratios of short intervals are mostly noise).
func coarsen(bins []seriesBin, maxPts int) []seriesBin {
	k := (len(bins) + maxPts - 1) / max(maxPts, 1)
	if k <= 1 {
		return bins
	}
	out := make([]seriesBin, 0, (len(bins)+k-1)/k)
	for i := 0; i < len(bins); i += k {
		var m seriesBin
		for _, b := range bins[i:min(i+k, len(bins))] {
			m.t += b.t
			m.a += b.a
			m.b += b.b
			m.n += b.n
		}
		out = append(out, m)
	}
	return out
}

// coarsened returns the bins merged in groups of k (so that at most maxPts
// remain) and the merged bin width in ns.
func (tb *timeBins) coarsened(maxPts int) ([]binVals, int64) {
	k := (len(tb.bins) + maxPts - 1) / max(maxPts, 1)
	if k <= 1 {
		return tb.bins, tb.width
	}
	out := make([]binVals, 0, (len(tb.bins)+k-1)/k)
	for i := 0; i < len(tb.bins); i += k {
		var m binVals
		for _, b := range tb.bins[i:min(i+k, len(tb.bins))] {
			for c := range m {
				m[c] += b[c]
			}
		}
		out = append(out, m)
	}
	return out, tb.width * int64(k)
}
