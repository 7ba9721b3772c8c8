package plugins

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/eppsim/eppsim/epp"
)

// kind is the role a fallback entry plays.
type kind int

const (
	kPlain    kind = iota // no scheduling role
	kParser               // request parser (config.Parser)
	kFilter               // keeps every candidate
	kScorer               // scores every candidate 0
	kProducer             // produces its keys, writes nothing
	kHandler              // profile handler
)

// handlerMode selects a fallback profile handler's behaviour.
type handlerMode int

const (
	runOne handlerMode = iota // run one profile (decode, or the first)
	runAll                    // single-profile-handler semantics
)

// spec describes one fallback registration.
type spec struct {
	typ string
	// infra is the Infrastructure note; empty for not-simulated entries.
	infra string
	// reason is the NotSimulatedReason text.
	reason string
	kind   kind
	// keys are the accepted top-level parameter names; nil accepts any
	// object (eppsim does not interpret the parameters of that type).
	keys []string
	// check validates decoded parameters (optional).
	check func(params json.RawMessage) error
	// produces lists the keys a producer entry declares.
	produces func(name string) []epp.DataKey
	// consumes lists the dependencies the entry declares.
	consumes []epp.Dependency
	mode     handlerMode
	// profile picks the profile a runOne handler runs from its parameters.
	profile func(params json.RawMessage) string
}

const (
	nativeMetrics = "simulated natively: the simulator scrapes every replica's vLLM gauges each --refresh-metrics-interval (default 50 ms) into the EPP's metrics (spec §7.1)"
	nativeFleet   = "simulated natively: the endpoints are the simulated fleet, known to the EPP from the start"
)

func keyOf(typ string) func(name string) []epp.DataKey {
	return func(name string) []epp.DataKey { return []epp.DataKey{{Type: typ, Producer: name}} }
}

// fallbackSpecs lists every type this package can register (only those the
// sibling packages lack are registered).
func fallbackSpecs() []spec {
	return []spec{
		// Data layer and discovery: provided by the simulator (the parsers
		// are simulated by epp/parser).
		{typ: "metrics-data-source", infra: nativeMetrics},
		{typ: "core-metrics-extractor", infra: nativeMetrics},
		{typ: "endpoint-notification-source", infra: nativeFleet},
		{typ: "k8s-notification-source", infra: nativeFleet},
		{typ: "file-discovery", infra: nativeFleet},
		{typ: "models-data-source", infra: "simulated natively: every replica serves the workload's model"},
		{typ: "models-data-extractor", infra: "simulated natively: every replica serves the workload's model"},

		// Not simulated.
		{typ: "vllmgrpc-parser", kind: kParser,
			reason: "not simulated: vLLM gRPC requests (eppsim's requests are HTTP JSON bodies); fallback: never matches a request"},
		{typ: epp.LatencyProducer, kind: kProducer, produces: keyOf(epp.LatencyPredictionType),
			reason: "not simulated: needs the latency-predictor model sidecar; fallback: produces no predictions, so latency-scorer runs its composite fallback and slo-headroom-tier-filter keeps every endpoint"},
		{typ: "p2p-source-producer", kind: kProducer,
			reason: "not simulated: peer-to-peer KV source selection needs KV transfer between pods; fallback: produces nothing"},
		{typ: "slo-headroom-tier-filter", kind: kFilter, keys: []string{"epsilonExploreNeg"},
			reason: "not simulated: needs latency predictions; fallback: keeps every endpoint (upstream's no-prediction behaviour)"},
		{typ: "header-profile-handler", kind: kHandler, mode: runOne,
			reason: "not simulated (alpha): header-selected profiles; fallback: runs the first profile"},
	}
}

// factory builds the registry factory of s.
func (s spec) factory() epp.Factory {
	return func(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
		if err := checkKeys(params, s.keys); err != nil {
			return nil, fmt.Errorf("plugin %q (type %s): parameters: %w", name, s.typ, err)
		}
		if s.check != nil && len(params) > 0 {
			if err := s.check(params); err != nil {
				return nil, fmt.Errorf("plugin %q (type %s): parameters: %w", name, s.typ, err)
			}
		}
		b := base{TypedName: epp.TypedName{PluginType: s.typ, PluginName: name}, spec: s}
		b.deps = append([]epp.Dependency(nil), s.consumes...)
		if s.infra != "" {
			return &infra{b}, nil
		}
		ns := notSim{b}
		switch s.kind {
		case kParser:
			return &nsParser{ns}, nil
		case kFilter:
			return &nsFilter{ns}, nil
		case kScorer:
			return &nsScorer{ns}, nil
		case kProducer:
			var keys []epp.DataKey
			if s.produces != nil {
				keys = s.produces(name)
			}
			if len(s.consumes) > 0 {
				return &nsConsumingProducer{nsProducer{ns, keys}}, nil
			}
			return &nsProducer{ns, keys}, nil
		case kHandler:
			h := &nsHandler{notSim: ns, mode: s.mode}
			if s.profile != nil {
				h.profile = s.profile(params)
			}
			if len(s.consumes) > 0 {
				return &nsConsumingHandler{h}, nil
			}
			return h, nil
		}
		return &ns, nil
	}
}

// checkKeys requires params to be a JSON object (or absent) whose keys are
// in keys; nil keys accept any object.
func checkKeys(params json.RawMessage, keys []string) error {
	if len(params) == 0 || string(params) == "null" {
		return nil
	}
	var m map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(params))
	if err := dec.Decode(&m); err != nil {
		return fmt.Errorf("want an object: %w", err)
	}
	if keys == nil {
		return nil
	}
	var unknown []string
	for k := range m {
		if !slices.Contains(keys, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return fmt.Errorf("unknown field %q (known: %s)", unknown[0], strings.Join(keys, ", "))
	}
	return nil
}

// base is what every fallback plugin carries.
type base struct {
	epp.TypedName
	spec spec
	deps []epp.Dependency
}

// infra is an accepted, inert infrastructure plugin.
type infra struct{ base }

// Infrastructure implements Infrastructure.
func (p *infra) Infrastructure() string { return p.spec.infra }

// notSim is an accepted plugin that eppsim does not simulate.
type notSim struct{ base }

// NotSimulatedReason implements epp.NotSimulated.
func (p *notSim) NotSimulatedReason() string { return p.spec.reason }

type nsParser struct{ notSim }

// RequestParser marks a parser (config.Parser).
func (*nsParser) RequestParser() {}

// nsFilter keeps every candidate.
type nsFilter struct{ notSim }

// Filter implements epp.Filter.
func (*nsFilter) Filter(_ *epp.Cycle, _ *epp.Request, eps []*epp.Endpoint) []*epp.Endpoint {
	return eps
}

// nsScorer scores every candidate 0.
type nsScorer struct{ notSim }

// Score implements epp.Scorer (scores are zeroed by the caller).
func (*nsScorer) Score(*epp.Cycle, *epp.Request, []*epp.Endpoint, []float64) {}

// nsProducer declares its keys and writes nothing.
type nsProducer struct {
	notSim
	keys []epp.DataKey
}

// Produces implements epp.DataProducer.
func (p *nsProducer) Produces() []epp.DataKey { return p.keys }

// Produce implements epp.DataProducer: nothing is produced.
func (*nsProducer) Produce(*epp.Cycle, *epp.Request, []*epp.Endpoint) error { return nil }

type nsConsumingProducer struct{ nsProducer }

// Consumes implements epp.DataConsumer.
func (p *nsConsumingProducer) Consumes() []epp.Dependency { return p.deps }

// nsHandler is a fallback profile handler: runOne runs one profile (the
// configured decode profile if present, else the first); runAll behaves as
// single-profile-handler.
type nsHandler struct {
	notSim
	mode    handlerMode
	profile string
}

// PickProfiles implements epp.ProfileHandler.
func (h *nsHandler) PickProfiles(_ *epp.Cycle, _ *epp.Request, profiles []*epp.Profile, results map[string]*epp.ProfileResult) []string {
	if h.mode == runAll {
		var out []string
		for _, p := range profiles {
			if _, ran := results[p.Name]; !ran {
				out = append(out, p.Name)
			}
		}
		return out
	}
	name := h.target(profiles)
	if _, ran := results[name]; ran || name == "" {
		return nil
	}
	return []string{name}
}

func (h *nsHandler) target(profiles []*epp.Profile) string {
	for _, p := range profiles {
		if p.Name == h.profile {
			return p.Name
		}
	}
	if len(profiles) > 0 {
		return profiles[0].Name
	}
	return ""
}

// ProcessResults implements epp.ProfileHandler: exactly one profile ran; a
// failed run is an error.
func (h *nsHandler) ProcessResults(_ *epp.Cycle, _ *epp.Request, results map[string]*epp.ProfileResult) (*epp.Result, error) {
	if len(results) != 1 {
		return nil, fmt.Errorf("profile handler %q: expected one profile result, got %d", h.Name(), len(results))
	}
	for name, r := range results {
		if r == nil {
			return nil, fmt.Errorf("profile handler %q: profile %q: %w", h.Name(), name, epp.ErrNoEndpoints)
		}
		return &epp.Result{PrimaryProfile: name, Profiles: results}, nil
	}
	return nil, errors.New("unreachable")
}

type nsConsumingHandler struct{ *nsHandler }

// Consumes implements epp.DataConsumer.
func (h *nsConsumingHandler) Consumes() []epp.Dependency { return h.deps }
