package workload

import (
	"math/rand/v2"
	"strings"
)

// Builtin opens an embedded workload ("chat", "agentic", "rag", with or
// without the "builtin:" prefix) with the given seed and default options.
func Builtin(name string, seed int64) (*Stream, error) {
	if !strings.HasPrefix(name, BuiltinPrefix) {
		name = BuiltinPrefix + name
	}
	return Open(name, Options{Seed: seed})
}

// openBuiltin runs the named preset through the synthesizer, seeded from
// o.Seed.
func openBuiltin(name string, o Options, userModel string) (*Stream, error) {
	spec, err := PresetSpec(name)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(uint64(o.Seed), 0x6275696c74696e))
	return newSynthStream(BuiltinPrefix+name, spec, rng, o, userModel)
}
