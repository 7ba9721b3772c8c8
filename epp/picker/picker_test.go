package picker

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/epp"
)

func eps(n int) []*epp.Endpoint {
	out := make([]*epp.Endpoint, n)
	for i := range out {
		out[i] = &epp.Endpoint{EndpointInfo: &epp.EndpointInfo{Name: fmt.Sprintf("ns/p%d", i)}}
	}
	return out
}

func scoredOf(e []*epp.Endpoint, scores ...float64) []epp.ScoredEndpoint {
	out := make([]epp.ScoredEndpoint, len(e))
	for i := range e {
		out[i] = epp.ScoredEndpoint{Endpoint: e[i], Score: scores[i]}
	}
	return out
}

func build(t *testing.T, typ, params string, seed uint64) epp.Picker {
	t.Helper()
	r := epp.NewRegistry()
	Register(r)
	f, ok := r.Lookup(typ)
	if !ok {
		t.Fatalf("type %s not registered", typ)
	}
	var raw json.RawMessage
	if params != "" {
		raw = json.RawMessage(params)
	}
	p, err := f(typ, raw, epp.NewHandle(seed))
	if err != nil {
		t.Fatalf("factory %s(%s): %v", typ, params, err)
	}
	return p.(epp.Picker)
}

func TestRegisterTypes(t *testing.T) {
	r := epp.NewRegistry()
	Register(r)
	want := []string{MaxScoreType, RandomType, WeightedRandomType}
	slices.Sort(want)
	if got := r.Types(); !slices.Equal(got, want) {
		t.Fatalf("types = %v, want %v", got, want)
	}
}

func TestParams(t *testing.T) {
	for _, typ := range []string{MaxScoreType, RandomType, WeightedRandomType} {
		tests := []struct {
			params  string
			want    int
			wantErr string
		}{
			{"", 1, ""},
			{"null", 1, ""},
			{`{}`, 1, ""},
			{`{"maxNumOfEndpoints":3}`, 3, ""},
			{`{"maxNumOfEndpoints":0}`, 1, ""},
			{`{"maxNumOfEndpoints":-4}`, 1, ""},
			{`{"maxNumOfEndpoints":2,"bogus":1}`, 0, "unknown field"},
			{`{"maxNumOfEndpoints":"x"}`, 0, "cannot unmarshal"},
		}
		for _, tt := range tests {
			r := epp.NewRegistry()
			Register(r)
			f, _ := r.Lookup(typ)
			var raw json.RawMessage
			if tt.params != "" {
				raw = json.RawMessage(tt.params)
			}
			p, err := f("my-picker", raw, epp.NewHandle(1))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "my-picker") {
					t.Errorf("%s %s: err = %v, want containing %q and the plugin name", typ, tt.params, err, tt.wantErr)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s %s: %v", typ, tt.params, err)
				continue
			}
			if p.Type() != typ || p.Name() != "my-picker" {
				t.Errorf("typed name = %s/%s", p.Type(), p.Name())
			}
			got := p.(interface{ MaxNumOfEndpoints() int }).MaxNumOfEndpoints()
			if got != tt.want {
				t.Errorf("%s %s: maxNum = %d, want %d", typ, tt.params, got, tt.want)
			}
		}
	}
}

func TestMaxScorePicksHighest(t *testing.T) {
	e := eps(5)
	tests := []struct {
		name   string
		params string
		scores []float64
		want   []string
	}{
		{"single best", "", []float64{0.1, 2.5, 0.3, 2.4, 0}, []string{"ns/p1"}},
		{"top 2", `{"maxNumOfEndpoints":2}`, []float64{0.1, 2.5, 0.3, 2.4, 0}, []string{"ns/p1", "ns/p3"}},
		{"top 3 of order", `{"maxNumOfEndpoints":3}`, []float64{5, 4, 3, 2, 1}, []string{"ns/p0", "ns/p1", "ns/p2"}},
		{"more than candidates", `{"maxNumOfEndpoints":9}`, []float64{1, 3, 2, 5, 4}, []string{"ns/p3", "ns/p4", "ns/p1", "ns/p2", "ns/p0"}},
		{"negative scores", "", []float64{-1, -0.5, -3, -2, -0.6}, []string{"ns/p1"}},
	}
	for _, tt := range tests {
		for _, tb := range []TieBreak{TieBreakShuffle, TieBreakRoundRobin} {
			p := build(t, MaxScoreType, tt.params, 7).(*MaxScore)
			p.SetTieBreak(tb)
			got := epp.Names(p.Pick(&epp.Cycle{}, &epp.Request{}, scoredOf(e, tt.scores...)))
			if !slices.Equal(got, tt.want) {
				t.Errorf("%s (%v): got %v, want %v", tt.name, tb, got, tt.want)
			}
		}
	}
}

func TestPickersEmptyAndSingle(t *testing.T) {
	for _, typ := range []string{MaxScoreType, RandomType, WeightedRandomType} {
		p := build(t, typ, `{"maxNumOfEndpoints":2}`, 3)
		if got := p.Pick(&epp.Cycle{}, &epp.Request{}, nil); len(got) != 0 {
			t.Errorf("%s: empty input picked %v", typ, got)
		}
		e := eps(1)
		for _, s := range []float64{0, 1, 7} {
			got := epp.Names(p.Pick(&epp.Cycle{}, &epp.Request{}, scoredOf(e, s)))
			if !slices.Equal(got, []string{"ns/p0"}) {
				t.Errorf("%s: single candidate (score %v) picked %v", typ, s, got)
			}
		}
	}
}

// Ties are broken over all tied endpoints, uniformly, and never pick a lower
// score.
func TestMaxScoreTieBreakUniform(t *testing.T) {
	e := eps(6)
	p := build(t, MaxScoreType, "", 42)
	counts := map[string]int{}
	const draws = 6000
	for range draws {
		// p1, p2, p4, p5 tie at the top.
		got := p.Pick(&epp.Cycle{}, &epp.Request{}, scoredOf(e, 0.5, 1, 1, 0.99, 1, 1))
		counts[got[0].Name]++
	}
	if counts["ns/p0"]+counts["ns/p3"] != 0 {
		t.Fatalf("picked a non-top endpoint: %v", counts)
	}
	for _, n := range []string{"ns/p1", "ns/p2", "ns/p4", "ns/p5"} {
		// Expected 1500 each; a binomial sd is ~34, so ±200 is ~6 sd.
		if c := counts[n]; c < 1300 || c > 1700 {
			t.Errorf("%s picked %d times of %d, want ≈1500: %v", n, c, draws, counts)
		}
	}
}

func TestPickerDeterminism(t *testing.T) {
	e := eps(8)
	scores := []float64{1, 1, 1, 0.5, 1, 0.2, 1, 1}
	for _, typ := range []string{MaxScoreType, RandomType, WeightedRandomType} {
		seq := func(seed uint64) []string {
			p := build(t, typ, `{"maxNumOfEndpoints":2}`, seed)
			var out []string
			for range 50 {
				out = append(out, strings.Join(epp.Names(p.Pick(&epp.Cycle{}, &epp.Request{}, scoredOf(e, scores...))), ","))
			}
			return out
		}
		a, b, c := seq(11), seq(11), seq(12)
		if !slices.Equal(a, b) {
			t.Errorf("%s: same seed gave different picks", typ)
		}
		if slices.Equal(a, c) {
			t.Errorf("%s: seeds 11 and 12 gave identical 50-pick sequences", typ)
		}
	}
}

// The stream is per plugin name: two pickers with different names draw
// independent sequences from one handle.
func TestPickerStreamPerName(t *testing.T) {
	h := epp.NewHandle(5)
	a := NewMaxScore("a", 1, h.Rand("a"))
	a2 := NewMaxScore("a", 1, h.Rand("a"))
	b := NewMaxScore("b", 1, h.Rand("b"))
	e := eps(10)
	var sa, sa2, sb []string
	for range 30 {
		s := make([]float64, 10)
		sa = append(sa, a.Pick(nil, nil, scoredOf(e, s...))[0].Name)
		sa2 = append(sa2, a2.Pick(nil, nil, scoredOf(e, s...))[0].Name)
		sb = append(sb, b.Pick(nil, nil, scoredOf(e, s...))[0].Name)
	}
	if !slices.Equal(sa, sa2) {
		t.Error("same name, same seed: different sequences")
	}
	if slices.Equal(sa, sb) {
		t.Error("different names gave identical sequences")
	}
}

// Round-robin (PR #2515/#2709): with 3 tied at the top, successive picks
// rotate through them; the counter is per instance.
func TestMaxScoreRoundRobin(t *testing.T) {
	e := eps(4)
	p := NewMaxScore("rr", 1, rand.New(rand.NewPCG(1, 2)))
	p.SetTieBreak(TieBreakRoundRobin)
	var got []string
	for range 7 {
		got = append(got, p.Pick(nil, nil, scoredOf(e, 0.1, 0.9, 0.9, 0.9))[0].Name)
	}
	want := []string{"ns/p1", "ns/p2", "ns/p3", "ns/p1", "ns/p2", "ns/p3", "ns/p1"}
	if !slices.Equal(got, want) {
		t.Fatalf("round-robin picks %v, want %v", got, want)
	}
	// A second instance starts its own counter at 0.
	q := NewMaxScore("rr2", 1, rand.New(rand.NewPCG(1, 2)))
	q.SetTieBreak(TieBreakRoundRobin)
	if n := q.Pick(nil, nil, scoredOf(e, 0.1, 0.9, 0.9, 0.9))[0].Name; n != "ns/p1" {
		t.Fatalf("fresh instance picked %s, want ns/p1", n)
	}
}

// Round-robin with maxNumOfEndpoints 3 and scores [5,5,3,3,3,1]: the first
// run (len 2) starts at 0 and the second (len 3) starts at 2 < 3, so both
// rotate, sharing the counter (upstream semantics).
func TestMaxScoreRoundRobinRuns(t *testing.T) {
	e := eps(6)
	p := NewMaxScore("rr", 3, nil)
	p.SetTieBreak(TieBreakRoundRobin)
	pick := func() string {
		return strings.Join(epp.Names(p.Pick(nil, nil, scoredOf(e, 5, 5, 3, 3, 3, 1))), ",")
	}
	// Call 1: run A rotation 0 (counter→1), run B rotation 1%3=1 (counter→2).
	if got, want := pick(), "ns/p0,ns/p1,ns/p3"; got != want {
		t.Fatalf("call 1: %s, want %s", got, want)
	}
	// Call 2: run A rotation 2%2=0, counter→3≥2→0; run B rotation 0, counter→1.
	if got, want := pick(), "ns/p0,ns/p1,ns/p2"; got != want {
		t.Fatalf("call 2: %s, want %s", got, want)
	}
	// Call 3: run A rotation 1 (counter→2≥2→0); run B rotation 0 (counter→1).
	if got, want := pick(), "ns/p1,ns/p0,ns/p2"; got != want {
		t.Fatalf("call 3: %s, want %s", got, want)
	}
}

func TestParseTieBreak(t *testing.T) {
	for s, want := range map[string]TieBreak{"": TieBreakShuffle, "shuffle": TieBreakShuffle, "round-robin": TieBreakRoundRobin} {
		got, err := ParseTieBreak(s)
		if err != nil || got != want {
			t.Errorf("ParseTieBreak(%q) = %v, %v", s, got, err)
		}
		if s != "" && got.String() != s {
			t.Errorf("String() = %q, want %q", got.String(), s)
		}
	}
	if _, err := ParseTieBreak("fifo"); err == nil {
		t.Error("ParseTieBreak(fifo) accepted")
	}
}

func TestRandomPickerUniformAndDistinct(t *testing.T) {
	e := eps(4)
	p := build(t, RandomType, `{"maxNumOfEndpoints":2}`, 9)
	counts := map[string]int{}
	for range 4000 {
		got := p.Pick(nil, nil, scoredOf(e, 100, 0, 0, 0))
		if len(got) != 2 || got[0] == got[1] {
			t.Fatalf("picked %v", epp.Names(got))
		}
		counts[got[0].Name]++
	}
	// Scores are ignored: each endpoint first ≈1000 times (sd ≈ 27).
	for _, n := range epp.Names(e) {
		if c := counts[n]; c < 850 || c > 1150 {
			t.Errorf("%s first %d times, want ≈1000: %v", n, c, counts)
		}
	}
}

// A-Res: the first pick is drawn with probability proportional to score.
func TestWeightedRandomFrequencies(t *testing.T) {
	e := eps(4)
	p := build(t, WeightedRandomType, "", 2024)
	counts := map[string]int{}
	const draws = 20000
	for range draws {
		got := p.Pick(nil, nil, scoredOf(e, 1, 2, 3, 4))
		counts[got[0].Name]++
	}
	for i, w := range []float64{0.1, 0.2, 0.3, 0.4} {
		n := fmt.Sprintf("ns/p%d", i)
		frac := float64(counts[n]) / draws
		// sd of a proportion at n=20000 is ≤ 0.0035; ±0.02 is > 5 sd but
		// far tighter than the gaps between the weights.
		if frac < w-0.02 || frac > w+0.02 {
			t.Errorf("%s frequency %.4f, want %.2f±0.02 (%v)", n, frac, w, counts)
		}
	}
}

func TestWeightedRandomZeroScoresExcluded(t *testing.T) {
	e := eps(4)
	p := build(t, WeightedRandomType, "", 5)
	for range 2000 {
		got := p.Pick(nil, nil, scoredOf(e, 0, 0.3, -1, 0))
		if got[0].Name != "ns/p1" {
			t.Fatalf("picked %s; only ns/p1 scores above 0", got[0].Name)
		}
	}
	// With maxNumOfEndpoints above the positive count, key-0 endpoints fill
	// the remaining slots.
	p2 := build(t, WeightedRandomType, `{"maxNumOfEndpoints":3}`, 5)
	got := p2.Pick(nil, nil, scoredOf(e, 0, 0.3, -1, 0))
	if len(got) != 3 || got[0].Name != "ns/p1" {
		t.Fatalf("picked %v", epp.Names(got))
	}
}

// No endpoint above 0: behaves as random-picker (uniform over all).
func TestWeightedRandomAllZeroDelegates(t *testing.T) {
	e := eps(3)
	p := build(t, WeightedRandomType, "", 77)
	counts := map[string]int{}
	for range 3000 {
		counts[p.Pick(nil, nil, scoredOf(e, 0, 0, -2))[0].Name]++
	}
	for _, n := range epp.Names(e) {
		if c := counts[n]; c < 850 || c > 1150 {
			t.Errorf("%s picked %d times, want ≈1000: %v", n, c, counts)
		}
	}
	// And it consumes the stream exactly as random-picker of the same name
	// and seed does.
	w := NewWeightedRandom("x", 1, epp.NewHandle(3).Rand("x"))
	r := NewRandom("x", 1, epp.NewHandle(3).Rand("x"))
	for range 20 {
		a := w.Pick(nil, nil, scoredOf(e, 0, 0, 0))[0].Name
		b := r.Pick(nil, nil, scoredOf(e, 0, 0, 0))[0].Name
		if a != b {
			t.Fatal("weighted-random with all-zero scores diverged from random-picker")
		}
	}
}

func BenchmarkMaxScore64(b *testing.B) {
	e := eps(64)
	p := NewMaxScore("m", 1, rand.New(rand.NewPCG(1, 1)))
	scores := make([]float64, 64)
	for i := range scores {
		scores[i] = float64(i%7) / 7
	}
	s := scoredOf(e, scores...)
	b.ReportAllocs()
	for b.Loop() {
		p.Pick(nil, nil, s)
	}
}

// The O(n·k) selection path returns exactly the first k of shuffle + stable
// sort (spec §3.1) for every k and ties of every shape.
func TestMaxScoreTopKMatchesStableSort(t *testing.T) {
	gen := rand.New(rand.NewPCG(7, 7))
	for trial := range 3000 {
		n := 1 + gen.IntN(24)
		k := 1 + gen.IntN(10)
		e := eps(n)
		scores := make([]float64, n)
		for i := range scores {
			scores[i] = float64(gen.IntN(4)) / 2 // many ties
		}
		seed := gen.Uint64()
		p := NewMaxScore("m", k, rand.New(rand.NewPCG(seed, 1)))
		got := epp.Names(p.Pick(nil, nil, scoredOf(e, scores...)))

		ref := scoredOf(e, scores...)
		shuffle(rand.New(rand.NewPCG(seed, 1)), ref)
		slices.SortStableFunc(ref, func(a, b epp.ScoredEndpoint) int {
			switch {
			case a.Score > b.Score:
				return -1
			case a.Score < b.Score:
				return 1
			}
			return 0
		})
		want := epp.Names(targets(ref, k))
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d n=%d k=%d scores %v: got %v, want %v", trial, n, k, scores, got, want)
		}
	}
}

func TestRoundRobinCycles(t *testing.T) {
	p := NewRoundRobin("rr")
	eps := []*epp.Endpoint{{EndpointInfo: &epp.EndpointInfo{Name: "a"}}, {EndpointInfo: &epp.EndpointInfo{Name: "b"}}, {EndpointInfo: &epp.EndpointInfo{Name: "c"}}}
	var got []string
	for range 7 {
		scored := []epp.ScoredEndpoint{{Endpoint: eps[0], Score: 1}, {Endpoint: eps[1]}, {Endpoint: eps[2]}}
		got = append(got, p.Pick(nil, nil, scored)[0].Name)
	}
	if want := "a b c a b c a"; strings.Join(got, " ") != want {
		t.Fatalf("picks %v, want %s", got, want)
	}
	if p.Pick(nil, nil, nil) != nil {
		t.Fatal("pick from no candidates")
	}
}
