package plugins_test

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/epp"
	"github.com/eppsim/eppsim/epp/config"
	"github.com/eppsim/eppsim/epp/plugins"
)

// specTypes are the type strings of spec §1.4 (multicluster variants aside)
// plus those the shipped configurations use.
var specTypes = []string{
	"single-profile-handler", "disagg-profile-handler", "pd-profile-handler", "data-parallel-profile-handler", "header-profile-handler",
	"max-score-picker", "random-picker", "weighted-random-picker",
	"queue-scorer", "kv-cache-utilization-scorer", "running-requests-size-scorer", "prefix-cache-scorer", "load-aware-scorer",
	"active-request-scorer", "token-load-scorer", "no-hit-lru-scorer", "lora-affinity-scorer", "context-length-aware",
	"session-affinity-scorer", "latency-scorer", "endpoint-attribute-scorer", "header-label-affinity-scorer",
	"topology-affinity-scorer", "mm-embeddings-cache-scorer", "precise-prefix-cache-scorer",
	"label-selector-filter", "by-label-selector", "by-label", "decode-filter", "prefill-filter", "encode-filter",
	"prefix-cache-affinity-filter", "slo-headroom-tier-filter", "session-affinity-filter", "endpoint-attribute-filter",
	"topology-affinity-filter", "utilization-filter", "utilization-detector", "concurrency-detector",
	"prefix-based-pd-decider", "always-disagg-pd-decider", "always-disagg-multimodal-decider",
	"token-producer", "tokenizer", "approx-prefix-cache-producer", "precise-prefix-cache-producer", "burst-prefix-cache-producer",
	"inflight-load-producer", "predicted-latency-producer", "mm-embeddings-cache-producer", "session-id-producer", "p2p-source-producer",
	"metrics-data-source", "core-metrics-extractor", "endpoint-notification-source", "k8s-notification-source",
	"models-data-source", "models-data-extractor", "dcgm-data-source", "dcgm-extractor", "topology-extractor",
	"openai-parser", "anthropic-parser", "vllmhttp-parser", "passthrough-parser", "vllmgrpc-parser", "sglanghttp-parser",
	"fcfs-ordering-policy", "global-strict-fairness-policy", "static-usage-limit-policy",
	"probabilistic-admitter", "program-aware-fairness", "soft-reflective-ceiling-policy",
}

func TestBuiltinRegistersSpecTypes(t *testing.T) {
	r := plugins.Builtin()
	for _, typ := range specTypes {
		if _, ok := r.Lookup(typ); !ok {
			t.Errorf("type %q not registered", typ)
		}
	}
}

// Every registered type instantiates with no parameters and is either
// simulated, infrastructure, or not simulated with a reason and fallback.
func TestBuiltinDefaults(t *testing.T) {
	r := plugins.Builtin()
	h := epp.NewHandle(1)
	for _, typ := range r.Types() {
		f, _ := r.Lookup(typ)
		p, err := f(typ, nil, h)
		if err != nil {
			// Some types require parameters (e.g. label selectors).
			continue
		}
		if p.Name() != typ {
			t.Errorf("%s: name %q", typ, p.Name())
		}
		if ns, ok := p.(epp.NotSimulated); ok && ns.NotSimulatedReason() == "" {
			t.Errorf("%s: empty not-simulated reason", typ)
		}
		if in, ok := p.(plugins.Infrastructure); ok && !strings.Contains(in.Infrastructure(), ":") {
			t.Errorf("%s: infrastructure note %q", typ, in.Infrastructure())
		}
	}
}

// Every shipped configuration loads with the full registry and schedules
// a request (resumed after a burst window), except
// epp-mm-embeddings-cache-config.yaml, which upstream's strict parameter
// decoding rejects: it sets cacheSizeInMB, and the producer knows only
// cacheSizeInMBPerServer (flow-control.md §14.3). eppsim fails the same
// way, naming the field and its line.
func TestShippedConfigsLoadWithBuiltin(t *testing.T) {
	files, _ := filepath.Glob("../../testdata/shared/epp-configs/*.yaml")
	if len(files) == 0 {
		t.Skip("shared configs not found")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			l, err := config.LoadFile(f, config.Options{Registry: plugins.Builtin(), Seed: 1})
			if filepath.Base(f) == "epp-mm-embeddings-cache-config.yaml" {
				if err == nil || !strings.Contains(err.Error(), `epp-mm-embeddings-cache-config.yaml:14: plugins[4].parameters`) ||
					!strings.Contains(err.Error(), `unknown field "cacheSizeInMB"`) || !errors.Is(err, config.ErrPlugin) {
					t.Fatalf("error %v, want line 14's unknown field cacheSizeInMB", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			r := l.Router()
			r.AddEndpoint(epp.EndpointInfo{Name: "ns/a", Address: "10.0.0.1:8000", Labels: map[string]string{"llm-d.ai/role": "decode"}})
			r.AddEndpoint(epp.EndpointInfo{Name: "ns/b", Address: "10.0.0.2:8000", Labels: map[string]string{"llm-d.ai/role": "prefill-decode"}})
			req := &epp.Request{ID: "r", TargetModel: "m", Path: "/v1/completions", Body: []byte(`{"model":"m","prompt":"hello"}`), Headers: map[string]string{}}
			res, err := r.Schedule(&epp.Cycle{Now: 1}, req)
			var w *epp.WaitError
			if errors.As(err, &w) {
				res, err = r.Resume(&epp.Cycle{Now: w.Until}, req)
			}
			if err != nil {
				t.Fatalf("schedule: %v", err)
			}
			if res.Target() == nil {
				t.Error("no target")
			}
		})
	}
}

// The shipped P/D configurations run their disaggregation plugins
// (pd-offload.md A.2–A.3): nothing of them is reported as not simulated
// but the multimodal encode stage's decider.
func TestShippedDisaggConfigs(t *testing.T) {
	for file, want := range map[string][]string{
		"pd-epp-config.yaml":          nil,
		"sim-pd-epp-config.yaml":      nil,
		"sim-e-p-d-epp-config.yaml":   {"always-disagg-multimodal-decider"},
		"sim-e-pd-epp-config.yaml":    {"always-disagg-multimodal-decider"},
		"pd-topology-epp-config.yaml": nil,
	} {
		path := filepath.Join("../../testdata/shared/epp-configs", file)
		l, err := config.LoadFile(path, config.Options{Registry: plugins.Builtin(), Seed: 1})
		if err != nil {
			if strings.Contains(err.Error(), "no such file") {
				t.Skip("shared configs not found")
			}
			t.Fatal(err)
		}
		var got []string
		for _, n := range l.NotSimulated {
			got = append(got, n.Name)
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: not simulated %v, want %v", file, got, want)
		}
		if l.ProfileHandler != "disagg-profile-handler" {
			t.Errorf("%s: handler %q", file, l.ProfileHandler)
		}
	}
}

// The shipped default configuration (spec §1.2) with the real plugins.
func TestBuiltinDefaultConfig(t *testing.T) {
	l, err := config.Default(config.Options{Registry: plugins.Builtin()})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(l.AutoProducers, []string{"approx-prefix-cache-producer", "token-producer"}) ||
		!slices.Equal(l.Producers, []string{"token-producer", "approx-prefix-cache-producer"}) {
		t.Errorf("auto %v producers %v", l.AutoProducers, l.Producers)
	}
	if len(l.NotSimulated) != 0 {
		t.Errorf("not simulated %v", l.NotSimulated)
	}
}

func TestFallbackParameters(t *testing.T) {
	r := epp.NewRegistry()
	plugins.RegisterFallbacks(r)
	cases := []struct {
		typ, params, err string
	}{
		{"models-data-source", `{"port":8000,"interval":"1s"}`, ""},
		{"models-data-source", `[1,2]`, "want an object"},
		{"metrics-data-source", `null`, ""},
	}
	for _, c := range cases {
		f, ok := r.Lookup(c.typ)
		if !ok {
			t.Fatalf("%s not registered", c.typ)
		}
		_, err := f("p", json.RawMessage(c.params), epp.NewHandle(0))
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s %s: %v", c.typ, c.params, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s %s: err %v, want %q", c.typ, c.params, err, c.err)
		}
	}
}

func TestFallbackBehaviour(t *testing.T) {
	r := epp.NewRegistry()
	plugins.RegisterFallbacks(r)
	mk := func(typ, params string) epp.Plugin {
		f, _ := r.Lookup(typ)
		var raw json.RawMessage
		if params != "" {
			raw = json.RawMessage(params)
		}
		p, err := f(typ, raw, epp.NewHandle(0))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	eps := []*epp.Endpoint{{EndpointInfo: &epp.EndpointInfo{Name: "a"}}, {EndpointInfo: &epp.EndpointInfo{Name: "b"}}}
	if got := mk("slo-headroom-tier-filter", "").(epp.Filter).Filter(nil, nil, eps); len(got) != 2 {
		t.Errorf("filter kept %d", len(got))
	}
	lp := mk("predicted-latency-producer", "").(epp.DataProducer)
	if k := lp.Produces(); len(k) != 1 || k[0] != (epp.DataKey{Type: epp.LatencyPredictionType, Producer: "predicted-latency-producer"}) {
		t.Errorf("produces %v", k)
	}
	if _, ok := mk("vllmgrpc-parser", "").(config.Parser); !ok {
		t.Error("vllmgrpc-parser is not a config.Parser")
	}
	if _, ok := mk("vllmgrpc-parser", "").(epp.RequestParser); ok {
		t.Error("vllmgrpc-parser fallback parses requests")
	}
}

// The request parsers of epp/parser are simulated: config.Parser and
// epp.RequestParser, neither infrastructure nor not simulated.
func TestParsersSimulated(t *testing.T) {
	r := plugins.Builtin()
	for _, typ := range []string{"openai-parser", "anthropic-parser", "vllmhttp-parser", "passthrough-parser"} {
		f, _ := r.Lookup(typ)
		p, err := f(typ, nil, epp.NewHandle(0))
		if err != nil {
			t.Fatal(err)
		}
		_, cp := p.(config.Parser)
		_, rp := p.(epp.RequestParser)
		_, ns := p.(epp.NotSimulated)
		_, in := p.(plugins.Infrastructure)
		if !cp || !rp || ns || in {
			t.Errorf("%s: config.Parser %v, epp.RequestParser %v, not simulated %v, infrastructure %v", typ, cp, rp, ns, in)
		}
	}
}

// A sibling package's registration wins over the fallback.
func TestFallbacksDoNotOverride(t *testing.T) {
	r := epp.NewRegistry()
	r.Register("topology-affinity-filter", func(name string, _ json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
		return &epp.TypedName{PluginType: "mine", PluginName: name}, nil
	})
	plugins.RegisterFallbacks(r)
	f, _ := r.Lookup("topology-affinity-filter")
	p, _ := f("x", nil, nil)
	if p.Type() != "mine" {
		t.Errorf("fallback replaced the registered factory")
	}
}

// The saturation detectors of epp/filter satisfy config.SaturationDetector,
// the interface the simulator's admission uses.
func TestDetectorsImplementInterface(t *testing.T) {
	r := plugins.Builtin()
	for _, typ := range []string{"utilization-detector", "concurrency-detector"} {
		f, _ := r.Lookup(typ)
		p, err := f(typ, nil, epp.NewHandle(0))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := p.(config.SaturationDetector); !ok {
			t.Errorf("%s does not implement config.SaturationDetector", typ)
		}
	}
}
