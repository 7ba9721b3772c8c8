// Package picker implements the EPP pickers of spec §3 (llm-d-router
// ebab687, pkg/epp/framework/plugins/scheduling/picker): max-score-picker,
// random-picker and weighted-random-picker.
//
// Every picker takes the parameter maxNumOfEndpoints (default 1; values ≤ 0
// fall back to 1). Upstream draws its randomness from one process-wide PCG
// seeded with the wall clock; eppsim gives each picker instance its own
// stream, Handle.Rand(name), taken once at construction, so a run with a fixed
// seed makes the same picks (spec §13) and one picker drawing more numbers
// never shifts another's sequence. There is no package-level state: the
// post-ebab687 round-robin counter lives in the picker instance.
package picker

import (
	"encoding/json"
	"math/rand/v2"

	"github.com/eppsim/eppsim/epp"
)

// Registered type strings (spec §1.4).
const (
	MaxScoreType       = "max-score-picker"
	RandomType         = "random-picker"
	WeightedRandomType = "weighted-random-picker"
)

// DefaultMaxNumOfEndpoints is the number of targets a picker returns when the
// parameter is absent or not positive (spec §3).
const DefaultMaxNumOfEndpoints = 1

// Params are the parameters shared by all pickers (upstream
// picker.PickerParameters).
type Params struct {
	MaxNumOfEndpoints int `json:"maxNumOfEndpoints"`
}

// Register adds the three picker types to r.
func Register(r *epp.Registry) {
	r.Register(MaxScoreType, func(name string, params json.RawMessage, h *epp.Handle) (epp.Plugin, error) {
		n, err := decode(MaxScoreType, name, params)
		if err != nil {
			return nil, err
		}
		return NewMaxScore(name, n, h.Rand(name)), nil
	})
	r.Register(RandomType, func(name string, params json.RawMessage, h *epp.Handle) (epp.Plugin, error) {
		n, err := decode(RandomType, name, params)
		if err != nil {
			return nil, err
		}
		return NewRandom(name, n, h.Rand(name)), nil
	})
	r.Register(WeightedRandomType, func(name string, params json.RawMessage, h *epp.Handle) (epp.Plugin, error) {
		n, err := decode(WeightedRandomType, name, params)
		if err != nil {
			return nil, err
		}
		return NewWeightedRandom(name, n, h.Rand(name)), nil
	})
}

func decode(typ, name string, params json.RawMessage) (int, error) {
	p := Params{MaxNumOfEndpoints: DefaultMaxNumOfEndpoints}
	if err := epp.DecodeParams(typ, name, params, &p); err != nil {
		return 0, err
	}
	return p.MaxNumOfEndpoints, nil
}

func normalizeMax(n int) int {
	if n <= 0 {
		return DefaultMaxNumOfEndpoints
	}
	return n
}

// shuffle is the Fisher–Yates shuffle of math/rand/v2, as upstream's
// ShuffleScoredEndpoints applies it.
func shuffle(rng *rand.Rand, s []epp.ScoredEndpoint) {
	rng.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
}

// targets returns the endpoints of the first min(k, len(s)) entries.
func targets(s []epp.ScoredEndpoint, k int) []*epp.Endpoint {
	k = min(k, len(s))
	out := make([]*epp.Endpoint, k)
	for i := range k {
		out[i] = s[i].Endpoint
	}
	return out
}
