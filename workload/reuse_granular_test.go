package workload

import (
	"math/rand/v2"
	"testing"
)

// TestPrefixReuseGranular checks the granular infinite cache against a
// naive one: a request's hit is the longest common prefix of its prompt
// with any earlier prompt or earlier prompt + output but its last token,
// capped at the prompt's length − 1 and floored to the granularity
// (sglang-engine.md A.3). The prompts share random prefixes of random
// lengths (not multiples of the 16-token block), from a small alphabet so
// that tails often agree for a few tokens by chance.
func TestPrefixReuseGranular(t *testing.T) {
	lcp := func(a, b []uint32) int {
		m := 0
		for m < len(a) && m < len(b) && a[m] == b[m] {
			m++
		}
		return m
	}
	for _, g := range []int{1, 4, 16} {
		rng := rand.New(rand.NewPCG(uint64(g), 7))
		p := NewPrefixReuseGranular(16, g)
		var seen [][]uint32
		bases := [][]uint32{}
		for i := range 400 {
			var prompt []uint32
			if len(bases) > 0 && rng.IntN(4) > 0 {
				b := bases[rng.IntN(len(bases))]
				prompt = append(prompt, b[:rng.IntN(len(b)+1)]...)
			}
			for range 1 + rng.IntN(60) {
				prompt = append(prompt, uint32(rng.IntN(3)))
			}
			var out []uint32
			for range rng.IntN(30) {
				out = append(out, uint32(rng.IntN(3)))
			}
			r := &Request{ID: int64(i), PromptTokens: prompt, PromptLen: len(prompt), OutputTokenIDs: out}
			want := 0
			for _, s := range seen {
				want = max(want, lcp(prompt, s))
			}
			want = max(min(want, len(prompt)-1), 0) / g * g
			st, err := p.Add(r)
			if err != nil {
				t.Fatal(err)
			}
			if int(st.Hit) != want && g < 16 {
				t.Fatalf("granularity %d, request %d (%d tokens): hit %d, want %d", g, i, len(prompt), st.Hit, want)
			}
			if g == 16 && int(st.Hit) > want {
				t.Fatalf("whole blocks: request %d hit %d, more than the naive %d", i, st.Hit, want)
			}
			seen = append(seen, prompt)
			if len(out) > 1 {
				seen = append(seen, append(append([]uint32(nil), prompt...), out[:len(out)-1]...))
			}
			bases = append(bases, append(append([]uint32(nil), prompt...), out...))
		}
	}
}
