package sim

import (
	"hash/fnv"
	"math/rand/v2"
)

// Streams hands out independent random streams derived from one run seed.
// A component's stream depends only on the seed and the component's name, so
// one component drawing more numbers never shifts another's sequence.
type Streams struct {
	seed uint64
}

// NewStreams returns the stream factory for seed.
func NewStreams(seed uint64) Streams { return Streams{seed: seed} }

// Seed returns the run seed.
func (s Streams) Seed() uint64 { return s.seed }

// Stream returns a new PCG stream for the named component. Calling it twice
// with the same name returns two generators with the same sequence.
func (s Streams) Stream(name string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(name))
	return rand.New(rand.NewPCG(s.seed, h.Sum64()))
}
