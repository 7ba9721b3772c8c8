package picker

import (
	"math"
	"math/rand/v2"
	"sort"

	"github.com/eppsim/eppsim/epp"
)

// Random is random-picker (spec §3.2): shuffle, take the first
// maxNumOfEndpoints. Scores are ignored.
type Random struct {
	epp.TypedName
	maxNum int
	rng    *rand.Rand
}

// NewRandom returns a random-picker returning up to maxNum endpoints (≤ 0
// means 1).
func NewRandom(name string, maxNum int, rng *rand.Rand) *Random {
	return &Random{
		TypedName: epp.TypedName{PluginType: RandomType, PluginName: name},
		maxNum:    normalizeMax(maxNum),
		rng:       rng,
	}
}

// MaxNumOfEndpoints returns the effective maxNumOfEndpoints.
func (p *Random) MaxNumOfEndpoints() int { return p.maxNum }

// Pick implements epp.Picker. It reorders scored in place.
func (p *Random) Pick(_ *epp.Cycle, _ *epp.Request, scored []epp.ScoredEndpoint) []*epp.Endpoint {
	shuffle(p.rng, scored)
	return targets(scored, p.maxNum)
}

// WeightedRandom is weighted-random-picker (spec §3.3): A-Res reservoir
// sampling with key = u^(1/score), so an endpoint is drawn with probability
// proportional to its weighted total. When no endpoint scores above 0 it
// behaves as random-picker, drawing from the same stream.
type WeightedRandom struct {
	epp.TypedName
	maxNum int
	rng    *rand.Rand
	keys   []weighted // reused between picks
}

type weighted struct {
	se  epp.ScoredEndpoint
	key float64
}

// NewWeightedRandom returns a weighted-random-picker returning up to maxNum
// endpoints (≤ 0 means 1).
func NewWeightedRandom(name string, maxNum int, rng *rand.Rand) *WeightedRandom {
	return &WeightedRandom{
		TypedName: epp.TypedName{PluginType: WeightedRandomType, PluginName: name},
		maxNum:    normalizeMax(maxNum),
		rng:       rng,
	}
}

// MaxNumOfEndpoints returns the effective maxNumOfEndpoints.
func (p *WeightedRandom) MaxNumOfEndpoints() int { return p.maxNum }

// Pick implements epp.Picker. It reorders scored in place when delegating to
// the random behaviour.
func (p *WeightedRandom) Pick(_ *epp.Cycle, _ *epp.Request, scored []epp.ScoredEndpoint) []*epp.Endpoint {
	positive := false
	for _, s := range scored {
		if s.Score > 0 {
			positive = true
			break
		}
	}
	if !positive {
		// Upstream delegates to a random-picker with the same
		// maxNumOfEndpoints.
		shuffle(p.rng, scored)
		return targets(scored, p.maxNum)
	}
	keys := p.keys[:0]
	for _, s := range scored {
		if s.Score <= 0 {
			// Key 0 excludes the endpoint unless fewer than
			// maxNumOfEndpoints endpoints score above 0. No draw is made.
			keys = append(keys, weighted{se: s})
			continue
		}
		u := p.rng.Float64() // [0,1)
		if u == 0 {
			u = 1e-10
		}
		keys = append(keys, weighted{se: s, key: math.Pow(u, 1/s.Score)})
	}
	p.keys = keys
	// Upstream uses the unstable sort.Slice; Go's pdqsort is deterministic
	// for a given input, so the same draws give the same order.
	sort.Slice(keys, func(i, j int) bool { return keys[i].key > keys[j].key })
	k := min(p.maxNum, len(keys))
	out := make([]*epp.Endpoint, k)
	for i := range k {
		out[i] = keys[i].se.Endpoint
	}
	clear(p.keys) // drop endpoint references between picks
	return out
}
