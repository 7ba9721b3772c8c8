package config_test

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/eppsim/eppsim/epp"
	"github.com/eppsim/eppsim/epp/admitter"
	"github.com/eppsim/eppsim/epp/flowcontrol"
	"github.com/eppsim/eppsim/epp/parser"
	"github.com/eppsim/eppsim/epp/plugins"
	"github.com/eppsim/eppsim/epp/producer"
	"github.com/eppsim/eppsim/epp/profile"
)

// The loader tests run against a registry of fake plugins that mirror the
// real ones' roles, parameters and data dependencies (spec §4, §5, §9), plus
// the fallback entries of epp/plugins. They test the loader alone, whatever
// state the real plugin packages are in; the disaggregation handlers and
// deciders are the real ones (epp/profile), since the loader resolves the
// deciders they reference, and so are the flow-control policies and the
// admitters (epp/flowcontrol, epp/admitter), since the loader builds the
// flow-control layer from them; and so are the DCGM data-layer plugins
// (epp/producer), whose wiring the assembler reads.

type fake struct {
	epp.TypedName
	deps []epp.Dependency
	keys []epp.DataKey
}

func (f *fake) Consumes() []epp.Dependency { return f.deps }

type fakeScorer struct {
	fake
	v float64
}

func (s *fakeScorer) Score(_ *epp.Cycle, _ *epp.Request, eps []*epp.Endpoint, scores []float64) {
	for i := range eps {
		scores[i] = s.v * float64(i+1)
	}
}

type fakeFilter struct{ fake }

func (*fakeFilter) Filter(_ *epp.Cycle, _ *epp.Request, eps []*epp.Endpoint) []*epp.Endpoint {
	return eps
}

type fakePicker struct{ fake }

func (*fakePicker) Pick(_ *epp.Cycle, _ *epp.Request, scored []epp.ScoredEndpoint) []*epp.Endpoint {
	best := 0
	for i, s := range scored {
		if s.Score > scored[best].Score {
			best = i
		}
	}
	return []*epp.Endpoint{scored[best].Endpoint}
}

type fakeHandler struct{ fake }

func (*fakeHandler) PickProfiles(_ *epp.Cycle, _ *epp.Request, profiles []*epp.Profile, results map[string]*epp.ProfileResult) []string {
	var out []string
	for _, p := range profiles {
		if _, ok := results[p.Name]; !ok {
			out = append(out, p.Name)
		}
	}
	return out
}

func (*fakeHandler) ProcessResults(_ *epp.Cycle, _ *epp.Request, results map[string]*epp.ProfileResult) (*epp.Result, error) {
	for name, r := range results {
		if r == nil {
			return nil, epp.ErrNoEndpoints
		}
		return &epp.Result{PrimaryProfile: name, Profiles: results}, nil
	}
	return nil, errors.New("no result")
}

type fakeProducer struct {
	fake
	log *[]string
}

func (p *fakeProducer) Produces() []epp.DataKey { return p.keys }
func (p *fakeProducer) Produce(*epp.Cycle, *epp.Request, []*epp.Endpoint) error {
	if p.log != nil {
		*p.log = append(*p.log, "produce:"+p.Name())
	}
	return nil
}
func (p *fakeProducer) PreRequest(*epp.Cycle, *epp.Request, *epp.Result) {
	if p.log != nil {
		*p.log = append(*p.log, "pre:"+p.Name())
	}
}

type fakeDetector struct{ fakeFilter }

func (*fakeDetector) Saturation([]*epp.Endpoint, int64) float64 { return 0 }

func tn(typ, name string) epp.TypedName { return epp.TypedName{PluginType: typ, PluginName: name} }

// decodeAny accepts any parameter object (for fakes whose schema the tests
// do not exercise).
func decodeAny(typ, name string, params json.RawMessage) error {
	var m map[string]any
	return epp.DecodeParams(typ, name, params, &m)
}

// fakeRegistry returns the fake registry; log (optional) records producer
// and hook calls.
func fakeRegistry(log *[]string) *epp.Registry {
	r := epp.NewRegistry()
	scorerType := func(typ string) {
		r.Register(typ, func(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
			return &fakeScorer{fake: fake{TypedName: tn(typ, name)}, v: 0.1}, nil
		})
	}
	for _, t := range []string{"queue-scorer", "kv-cache-utilization-scorer", "running-requests-size-scorer"} {
		scorerType(t)
	}
	r.Register("load-aware-scorer", func(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
		var p struct {
			Threshold int `json:"threshold"`
		}
		if err := epp.DecodeParams("load-aware-scorer", name, params, &p); err != nil {
			return nil, err
		}
		return &fakeScorer{fake: fake{TypedName: tn("load-aware-scorer", name)}}, nil
	})
	prefixKey := func(producer string) epp.DataKey {
		if producer == "" {
			producer = epp.ApproxPrefixProducer
		}
		return epp.DataKey{Type: epp.PrefixCacheMatchInfoType, Producer: producer}
	}
	r.Register("prefix-cache-scorer", func(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
		var p struct {
			PrefixMatchInfoProducerName string  `json:"prefixMatchInfoProducerName"`
			MatchLengthWeight           float64 `json:"matchLengthWeight"`
			MatchLengthScaleTokens      int     `json:"matchLengthScaleTokens"`
		}
		if err := epp.DecodeParams("prefix-cache-scorer", name, params, &p); err != nil {
			return nil, err
		}
		if p.MatchLengthWeight < 0 || p.MatchLengthWeight > 1 {
			return nil, fmt.Errorf("matchLengthWeight must be in [0,1], got %v", p.MatchLengthWeight)
		}
		return &fakeScorer{fake: fake{TypedName: tn("prefix-cache-scorer", name),
			deps: []epp.Dependency{{Key: prefixKey(p.PrefixMatchInfoProducerName), Required: true}}}, v: 0.3}, nil
	})
	r.Register("no-hit-lru-scorer", func(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
		var p struct {
			LRUSize                     int    `json:"lruSize"`
			PrefixMatchInfoProducerName string `json:"prefixMatchInfoProducerName"`
		}
		if err := epp.DecodeParams("no-hit-lru-scorer", name, params, &p); err != nil {
			return nil, err
		}
		return &fakeScorer{fake: fake{TypedName: tn("no-hit-lru-scorer", name),
			deps: []epp.Dependency{{Key: prefixKey(p.PrefixMatchInfoProducerName)}}}}, nil
	})
	r.Register("mm-embeddings-cache-scorer", func(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
		return &fakeScorer{fake: fake{TypedName: tn("mm-embeddings-cache-scorer", name),
			deps: []epp.Dependency{{Key: epp.DataKey{Type: epp.EncoderCacheMatchInfoType, Producer: epp.MMEmbeddingsProducer}, Required: true}}}}, nil
	})
	r.Register("endpoint-attribute-scorer", func(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
		if err := decodeAny("endpoint-attribute-scorer", name, params); err != nil {
			return nil, err
		}
		return &fakeScorer{fake: fake{TypedName: tn("endpoint-attribute-scorer", name)}}, nil
	})
	r.Register("topology-affinity-scorer", func(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
		if err := decodeAny("topology-affinity-scorer", name, params); err != nil {
			return nil, err
		}
		return &fakeScorer{fake: fake{TypedName: tn("topology-affinity-scorer", name)}}, nil
	})
	r.Register("topology-extractor", func(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
		if err := decodeAny("topology-extractor", name, params); err != nil {
			return nil, err
		}
		return &fake{TypedName: tn("topology-extractor", name)}, nil
	})
	for _, t := range []string{"decode-filter", "prefill-filter", "encode-filter", "endpoint-attribute-filter", "topology-affinity-filter"} {
		r.Register(t, func(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
			if err := decodeAny(t, name, params); err != nil {
				return nil, err
			}
			return &fakeFilter{fake{TypedName: tn(t, name)}}, nil
		})
	}
	for _, t := range []string{"max-score-picker", "random-picker"} {
		r.Register(t, func(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
			var p struct {
				MaxNumOfEndpoints int `json:"maxNumOfEndpoints"`
			}
			if err := epp.DecodeParams(t, name, params, &p); err != nil {
				return nil, err
			}
			return &fakePicker{fake{TypedName: tn(t, name)}}, nil
		})
	}
	r.Register("single-profile-handler", func(name string, _ json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
		return &fakeHandler{fake{TypedName: tn("single-profile-handler", name)}}, nil
	})
	r.Register("utilization-detector", func(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
		var p struct {
			QueueDepthThreshold       int     `json:"queueDepthThreshold"`
			KVCacheUtilThreshold      float64 `json:"kvCacheUtilThreshold"`
			MetricsStalenessThreshold string  `json:"metricsStalenessThreshold"`
			Headroom                  float64 `json:"headroom"`
		}
		if err := epp.DecodeParams("utilization-detector", name, params, &p); err != nil {
			return nil, err
		}
		return &fakeDetector{fakeFilter{fake{TypedName: tn("utilization-detector", name)}}}, nil
	})
	tokenDep := epp.Dependency{Key: epp.DataKey{Type: epp.TokenizedPromptType, Producer: epp.TokenProducer}, Required: true}
	producerType := func(typ, dataType string, deps ...epp.Dependency) {
		r.Register(typ, func(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
			if err := decodeAny(typ, name, params); err != nil {
				return nil, err
			}
			return &fakeProducer{fake: fake{TypedName: tn(typ, name), deps: deps,
				keys: []epp.DataKey{{Type: dataType, Producer: name}}}, log: log}, nil
		})
	}
	producerType("token-producer", epp.TokenizedPromptType)
	producerType("approx-prefix-cache-producer", epp.PrefixCacheMatchInfoType, tokenDep)
	producerType("precise-prefix-cache-producer", epp.PrefixCacheMatchInfoType, tokenDep)
	producerType("burst-prefix-cache-producer", epp.PrefixCacheMatchInfoType, tokenDep)
	r.Register("mm-embeddings-cache-producer", func(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
		var p struct {
			CacheSizeInMBPerServer int `json:"cacheSizeInMBPerServer"`
		}
		if err := epp.DecodeParams("mm-embeddings-cache-producer", name, params, &p); err != nil {
			return nil, err
		}
		return &fakeProducer{fake: fake{TypedName: tn("mm-embeddings-cache-producer", name), deps: []epp.Dependency{tokenDep},
			keys: []epp.DataKey{{Type: epp.EncoderCacheMatchInfoType, Producer: name}}}, log: log}, nil
	})
	producerType("inflight-load-producer", epp.InFlightLoadType,
		epp.Dependency{Key: epp.DataKey{Type: epp.PrefixCacheMatchInfoType, Producer: epp.ApproxPrefixProducer}})
	// Test-only types.
	producerType("cyc-a", "A", epp.Dependency{Key: epp.DataKey{Type: "B", Producer: "cyc-b"}, Required: true})
	producerType("cyc-b", "B", epp.Dependency{Key: epp.DataKey{Type: "A", Producer: "cyc-a"}, Required: true})
	r.Register("orphan-consumer", func(name string, _ json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
		return &fakeScorer{fake: fake{TypedName: tn("orphan-consumer", name),
			deps: []epp.Dependency{{Key: epp.DataKey{Type: "Foo", Producer: "bar"}, Required: true}}}}, nil
	})
	r.Register("failing-plugin", func(name string, _ json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
		return nil, errors.New("boom")
	})
	parser.Register(r)
	profile.RegisterDisagg(r)
	profile.RegisterDataParallel(r)
	producer.RegisterDCGM(r)
	flowcontrol.Register(r)
	admitter.Register(r)
	plugins.RegisterFallbacks(r)
	return r
}
