// Package epp re-implements the scheduling pipeline of the llm-d Endpoint
// Picker (EPP) at llm-d-router commit ebab687, as described in
// ../shared/spec/epp.md, for use inside the simulator.
//
// This package holds the framework: the endpoint and request views the EPP
// works on, the plugin interfaces (RequestParser, Filter, Scorer, Picker,
// DataProducer, ProfileHandler, PreRequest and response hooks), the plugin
// registry, and the Router that runs the director order of spec §2.1 — body
// parsing first: a body its parser rejects fails with a *BadRequestError
// before any plugin runs — and the scheduling loop of §2.2–2.3. The plugins
// themselves live in sub-packages (epp/parser, epp/picker, epp/scorer,
// epp/filter, epp/producer, ...); epp/config loads
// EndpointPickerConfig YAML and assembles a Router from a Registry.
//
// Boundary: epp never imports replica or sim. It sees endpoints only the way
// the real EPP does — scraped metrics, KV events, the request body and its
// own state — which is what keeps eppsim's approximate-vs-true comparison
// honest.
//
// Determinism conventions (spec §13): wherever upstream iterates a Go map,
// eppsim iterates candidates in fleet registration order; wherever upstream
// draws from a time-seeded RNG, eppsim draws from a per-plugin stream derived
// from the run seed and the plugin name (Handle.Rand).
package epp
