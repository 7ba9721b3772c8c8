// Package plugins assembles the registry of every EPP plugin type eppsim
// accepts (spec §1.4, llm-d-router ebab687 cmd/epp/runner/runner.go
// registerInTreePlugins).
//
// Builtin registers, in order, the simulated plugins of the sibling packages
// (epp/picker, epp/scorer, ...) and then, for every other type string of
// §1.4 and of the shipped configurations that none of them registered, an
// entry of one of two kinds:
//
//   - Infrastructure: pieces the simulator provides natively (metric
//     scraping, endpoint discovery). They accept their parameters and do
//     nothing; Infrastructure() says why.
//   - Not simulated: plugins that need an outside service or hardware
//     (the latency-predictor sidecar, a multimodal encoder). They
//     implement epp.NotSimulated with "not simulated: <reason>; fallback:
//     <what eppsim does instead>", and a fallback behaviour that never
//     silently changes routing beyond what the fallback says.
//
// Fallback entries are registered only for types still missing, so a
// sibling package that implements a type always wins. See docs/epp.md for
// the table.
package plugins

import (
	"github.com/eppsim/eppsim/epp"
	"github.com/eppsim/eppsim/epp/admitter"
	"github.com/eppsim/eppsim/epp/filter"
	"github.com/eppsim/eppsim/epp/flowcontrol"
	"github.com/eppsim/eppsim/epp/parser"
	"github.com/eppsim/eppsim/epp/picker"
	"github.com/eppsim/eppsim/epp/producer"
	"github.com/eppsim/eppsim/epp/profile"
	"github.com/eppsim/eppsim/epp/scorer"
)

// Builtin returns a new registry holding every plugin type eppsim accepts.
func Builtin() *epp.Registry {
	r := epp.NewRegistry()
	picker.Register(r)
	scorer.Register(r)
	filter.Register(r)
	parser.Register(r)
	profile.Register(r)
	producer.Register(r)
	flowcontrol.Register(r)
	admitter.Register(r)
	RegisterFallbacks(r)
	return r
}

// Infrastructure is implemented by accepted plugins whose function the
// simulator provides natively (or that are inert in eppsim's setting).
type Infrastructure interface {
	Infrastructure() string
}

// RegisterFallbacks adds the infrastructure and not-simulated entries of this
// package for every type r does not have yet.
func RegisterFallbacks(r *epp.Registry) {
	for _, s := range fallbackSpecs() {
		if _, ok := r.Lookup(s.typ); ok {
			continue
		}
		r.Register(s.typ, s.factory())
	}
	// Legacy alias of token-producer (spec §1.4).
	if f, ok := r.Lookup(epp.TokenProducer); ok {
		if _, dup := r.Lookup("tokenizer"); !dup {
			r.Register("tokenizer", f)
		}
	}
}
