package picker

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/eppsim/eppsim/epp"
)

// TieBreak selects how max-score-picker orders endpoints of equal score.
type TieBreak int

const (
	// TieBreakShuffle is the behaviour at ebab687 (spec §3.1): Fisher–Yates
	// shuffle, then a stable sort by score, so ties are broken uniformly at
	// random. The default.
	TieBreakShuffle TieBreak = iota
	// TieBreakRoundRobin is the post-ebab687 behaviour of llm-d-router PR
	// #2515 refined by #2709: no shuffle; stable sort; each run of equal
	// scores that starts within the first maxNumOfEndpoints positions is
	// rotated left by counter mod runLength, the counter advancing by one per
	// rotation and resetting to 0 when it reaches the run length. Upstream's
	// counter is process-global; eppsim keeps one per picker instance.
	TieBreakRoundRobin
)

// String returns the option name ParseTieBreak accepts.
func (t TieBreak) String() string {
	switch t {
	case TieBreakShuffle:
		return "shuffle"
	case TieBreakRoundRobin:
		return "round-robin"
	}
	return fmt.Sprintf("TieBreak(%d)", int(t))
}

// ParseTieBreak parses an eppsim option value: "shuffle" (ebab687, default)
// or "round-robin" (PR #2515/#2709).
func ParseTieBreak(s string) (TieBreak, error) {
	switch s {
	case "", "shuffle", "random":
		return TieBreakShuffle, nil
	case "round-robin", "roundrobin", "pr2709":
		return TieBreakRoundRobin, nil
	}
	return 0, fmt.Errorf("unknown max-score-picker tie-break %q (want shuffle or round-robin)", s)
}

// MaxScore is max-score-picker (spec §3.1): the endpoint(s) with the highest
// weighted total.
//
// The tie-break is not an upstream parameter (upstream parameters are decoded
// strictly, so a new field would reject valid configs); the config layer sets
// it after construction with SetTieBreak from an eppsim run option.
type MaxScore struct {
	epp.TypedName
	maxNum   int
	rng      *rand.Rand
	tieBreak TieBreak
	counter  int   // round-robin counter (TieBreakRoundRobin only)
	best     []int // topK scratch
}

// topKLimit bounds maxNumOfEndpoints for the O(n·k) selection path.
const topKLimit = 8

// NewMaxScore returns a max-score-picker returning up to maxNum endpoints
// (≤ 0 means 1) and drawing its shuffles from rng.
func NewMaxScore(name string, maxNum int, rng *rand.Rand) *MaxScore {
	return &MaxScore{
		TypedName: epp.TypedName{PluginType: MaxScoreType, PluginName: name},
		maxNum:    normalizeMax(maxNum),
		rng:       rng,
	}
}

// SetTieBreak selects the tie-break behaviour; see TieBreak.
func (p *MaxScore) SetTieBreak(t TieBreak) { p.tieBreak = t }

// TieBreak returns the configured tie-break behaviour.
func (p *MaxScore) TieBreak() TieBreak { return p.tieBreak }

// MaxNumOfEndpoints returns the effective maxNumOfEndpoints.
func (p *MaxScore) MaxNumOfEndpoints() int { return p.maxNum }

// Pick implements epp.Picker. It reorders scored in place.
func (p *MaxScore) Pick(_ *epp.Cycle, _ *epp.Request, scored []epp.ScoredEndpoint) []*epp.Endpoint {
	if p.tieBreak == TieBreakShuffle {
		shuffle(p.rng, scored)
		if p.maxNum <= topKLimit && p.maxNum < len(scored) {
			return p.topK(scored)
		}
	}
	// Highest score first; exact float equality is a tie and keeps order.
	slices.SortStableFunc(scored, func(a, b epp.ScoredEndpoint) int {
		switch {
		case a.Score > b.Score:
			return -1
		case a.Score < b.Score:
			return 1
		}
		return 0
	})
	if p.tieBreak == TieBreakRoundRobin {
		for start := 0; start < len(scored) && start < p.maxNum; {
			end := start + 1
			for end < len(scored) && scored[end].Score == scored[start].Score {
				end++
			}
			if end-start > 1 {
				p.rotate(scored[start:end])
			}
			start = end
		}
	}
	return targets(scored, p.maxNum)
}

// rotate rotates a run of equal scores left by counter mod len(run), then
// advances the counter, resetting it at the run length (PR #2709).
func (p *MaxScore) rotate(run []epp.ScoredEndpoint) {
	n := len(run)
	r := p.counter % n
	p.counter++
	if p.counter >= n {
		p.counter = 0
	}
	if r > 0 {
		slices.Reverse(run[:r])
		slices.Reverse(run[r:])
		slices.Reverse(run)
	}
}

// topK returns the first maxNum entries of the stable sort by descending
// score without sorting: the best maxNum under (score desc, position asc),
// which is exactly what the stable sort puts first.
func (p *MaxScore) topK(scored []epp.ScoredEndpoint) []*epp.Endpoint {
	k := p.maxNum
	best := p.best[:0]
	for i := range scored {
		sc := scored[i].Score
		if len(best) == k && !(sc > scored[best[k-1]].Score) {
			continue
		}
		// Later positions lose ties, so i goes after every entry with a
		// score ≥ its own.
		j := len(best)
		for j > 0 && sc > scored[best[j-1]].Score {
			j--
		}
		if len(best) < k {
			best = append(best, 0)
		}
		copy(best[j+1:], best[j:len(best)-1])
		best[j] = i
	}
	p.best = best
	out := make([]*epp.Endpoint, len(best))
	for i, b := range best {
		out[i] = scored[b].Endpoint
	}
	return out
}
