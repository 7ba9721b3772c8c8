package config_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/epp"
	"github.com/eppsim/eppsim/epp/config"
)

const sharedConfigs = "../../testdata/shared/epp-configs"

func opts() config.Options { return config.Options{Registry: fakeRegistry(nil), Seed: 1} }

func sharedFiles(t *testing.T) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(sharedConfigs, "*.yaml"))
	if len(files) == 0 {
		t.Skip("shared configs not found at " + sharedConfigs)
	}
	return files
}

// mmConfig is the shipped config that does not load: it sets
// cacheSizeInMB, which the real mm-embeddings-cache-producer's strict
// parameters do not know (they have cacheSizeInMBPerServer), so upstream
// fails to load it and so does eppsim (flow-control.md §14.3).
const mmConfig = "epp-mm-embeddings-cache-config.yaml"

// mmFixed is mmConfig with the field its authors evidently meant, for the
// tests of what the rest of that config does.
func mmFixed(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(sharedConfigs, mmConfig))
	if err != nil {
		t.Skip("shared config missing: " + mmConfig)
	}
	return bytes.Replace(b, []byte("cacheSizeInMB:"), []byte("cacheSizeInMBPerServer:"), 1)
}

func loadShared(t *testing.T, name string) *config.Loaded {
	t.Helper()
	path := filepath.Join(sharedConfigs, name)
	if _, err := os.Stat(path); err != nil {
		t.Skip("shared config missing: " + path)
	}
	l, err := config.LoadFile(path, opts())
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	return l
}

type pluginRow struct {
	name   string
	origin config.Origin
}

func pluginRows(l *config.Loaded) []pluginRow {
	var out []pluginRow
	for _, p := range l.Plugins {
		out = append(out, pluginRow{p.Name, p.Origin})
	}
	return out
}

// The system defaults every config below gets, in registration order.
var flowAndParsers = []pluginRow{
	{"fcfs-ordering-policy", config.OriginSystemDefault},
	{"global-strict-fairness-policy", config.OriginSystemDefault},
	{"static-usage-limit-policy", config.OriginSystemDefault},
	{"openai-parser", config.OriginSystemDefault},
	{"anthropic-parser", config.OriginSystemDefault},
	{"vllmhttp-parser", config.OriginSystemDefault},
	{"passthrough-parser", config.OriginSystemDefault},
	{"utilization-detector", config.OriginSystemDefault},
}

func concat(parts ...[]pluginRow) []pluginRow {
	var out []pluginRow
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

var defaultParsers = []string{"openai-parser", "anthropic-parser", "vllmhttp-parser", "passthrough-parser"}

type want struct {
	plugins      []pluginRow
	profiles     []config.ProfileInfo
	handler      string
	auto         []string
	producers    []string
	notSimulated []string
	warnings     int
	dataSources  []string
}

func check(t *testing.T, l *config.Loaded, w want) {
	t.Helper()
	if got := pluginRows(l); !reflect.DeepEqual(got, w.plugins) {
		t.Errorf("plugins:\n got %v\nwant %v", got, w.plugins)
	}
	if !reflect.DeepEqual(l.Profiles, w.profiles) {
		t.Errorf("profiles:\n got %+v\nwant %+v", l.Profiles, w.profiles)
	}
	if l.ProfileHandler != w.handler {
		t.Errorf("handler %q, want %q", l.ProfileHandler, w.handler)
	}
	if !slices.Equal(l.AutoProducers, w.auto) {
		t.Errorf("auto producers %v, want %v", l.AutoProducers, w.auto)
	}
	if !slices.Equal(l.Producers, w.producers) {
		t.Errorf("producers %v, want %v", l.Producers, w.producers)
	}
	var ns []string
	for _, n := range l.NotSimulated {
		ns = append(ns, n.Name)
	}
	if !slices.Equal(ns, w.notSimulated) {
		t.Errorf("not simulated %v, want %v", ns, w.notSimulated)
	}
	if len(l.Warnings) != w.warnings {
		t.Errorf("warnings %q, want %d", l.Warnings, w.warnings)
	}
	if !slices.Equal(l.Parsers, defaultParsers) {
		t.Errorf("parsers %v", l.Parsers)
	}
	if l.SaturationDetector != "utilization-detector" {
		t.Errorf("saturation detector %q", l.SaturationDetector)
	}
	var srcs []string
	for _, s := range l.Config.DataLayer.Sources {
		srcs = append(srcs, s.PluginRef)
	}
	if !slices.Equal(srcs, w.dataSources) {
		t.Errorf("data sources %v, want %v", srcs, w.dataSources)
	}
}

// TestDefaultConfig derives spec §1.2 + §1.3 by hand: the three scorers with
// weights 2/2/3, single-profile-handler and max-score-picker added, and the
// approx producer pulling in the token producer.
func TestDefaultConfig(t *testing.T) {
	for _, input := range []string{"", "  \n"} {
		l, err := config.Load([]byte(input), opts())
		if err != nil {
			t.Fatal(err)
		}
		if !l.BuiltinDefault {
			t.Error("BuiltinDefault false")
		}
		check(t, l, want{
			plugins: concat([]pluginRow{
				{"queue-scorer", config.OriginConfig},
				{"kv-cache-utilization-scorer", config.OriginConfig},
				{"prefix-cache-scorer", config.OriginConfig},
				{"metrics-data-source", config.OriginConfig},
				{"core-metrics-extractor", config.OriginConfig},
				{"single-profile-handler", config.OriginSystemDefault},
				{"max-score-picker", config.OriginSystemDefault},
			}, flowAndParsers, []pluginRow{
				{"approx-prefix-cache-producer", config.OriginAutoProducer},
				{"token-producer", config.OriginAutoProducer},
			}),
			profiles: []config.ProfileInfo{{
				Name: "default",
				Scorers: []config.ScorerRef{
					{Name: "queue-scorer", Weight: 2},
					{Name: "kv-cache-utilization-scorer", Weight: 2},
					{Name: "prefix-cache-scorer", Weight: 3},
				},
				Picker: "max-score-picker",
			}},
			handler:     "single-profile-handler",
			auto:        []string{"approx-prefix-cache-producer", "token-producer"},
			producers:   []string{"token-producer", "approx-prefix-cache-producer"},
			dataSources: []string{"metrics-data-source"},
		})
		ap := l.Plugins[len(l.Plugins)-2]
		if ap.RequiredBy != "PrefixCacheMatchInfoDataKey/approx-prefix-cache-producer (required by prefix-cache-scorer)" {
			t.Errorf("RequiredBy = %q", ap.RequiredBy)
		}
	}
}

// TestShippedEffective checks three shipped configs against hand-derived
// effective configurations.
func TestShippedEffective(t *testing.T) {
	t.Run("epp-config", func(t *testing.T) {
		l := loadShared(t, "epp-config.yaml")
		check(t, l, want{
			plugins: concat([]pluginRow{
				{"prefix-cache-scorer", config.OriginConfig},
				{"decode-filter", config.OriginConfig},
				{"max-score-picker", config.OriginConfig},
				{"single-profile-handler", config.OriginConfig},
			}, flowAndParsers, []pluginRow{
				{"metrics-data-source", config.OriginSystemDefault},
				{"core-metrics-extractor", config.OriginSystemDefault},
				{"approx-prefix-cache-producer", config.OriginAutoProducer},
				{"token-producer", config.OriginAutoProducer},
			}),
			profiles: []config.ProfileInfo{{
				Name:    "default",
				Filters: []string{"decode-filter"},
				Scorers: []config.ScorerRef{{Name: "prefix-cache-scorer", Weight: 2}},
				Picker:  "max-score-picker",
			}},
			handler:     "single-profile-handler",
			auto:        []string{"approx-prefix-cache-producer", "token-producer"},
			producers:   []string{"token-producer", "approx-prefix-cache-producer"},
			dataSources: []string{"metrics-data-source"},
		})
	})
	t.Run("sim-epp-config", func(t *testing.T) {
		l := loadShared(t, "sim-epp-config.yaml")
		check(t, l, want{
			plugins: concat([]pluginRow{
				{"approx-prefix-cache-producer", config.OriginConfig},
				{"prefix-cache-scorer", config.OriginConfig},
				{"decode-filter", config.OriginConfig},
				{"max-score-picker", config.OriginConfig},
				{"single-profile-handler", config.OriginConfig},
			}, flowAndParsers, []pluginRow{
				{"metrics-data-source", config.OriginSystemDefault},
				{"core-metrics-extractor", config.OriginSystemDefault},
				{"token-producer", config.OriginAutoProducer},
			}),
			profiles: []config.ProfileInfo{{
				Name:    "default",
				Filters: []string{"decode-filter"},
				Scorers: []config.ScorerRef{{Name: "prefix-cache-scorer", Weight: 2}},
				Picker:  "max-score-picker",
			}},
			handler:     "single-profile-handler",
			auto:        []string{"token-producer"},
			producers:   []string{"token-producer", "approx-prefix-cache-producer"},
			dataSources: []string{"metrics-data-source"},
		})
		if got := string(l.Plugins[0].Parameters); got != `{"maxPrefixTokensToMatch":16384,"lruCapacityPerServer":31250}` {
			t.Errorf("approx parameters %s", got)
		}
	})
	t.Run("pd-epp-config", func(t *testing.T) {
		l := loadShared(t, "pd-epp-config.yaml")
		// The decider is instantiated before the handler that references it.
		check(t, l, want{
			plugins: concat([]pluginRow{
				{"approx-prefix-cache-producer", config.OriginConfig},
				{"prefix-cache-scorer", config.OriginConfig},
				{"queue-scorer", config.OriginConfig},
				{"prefill-filter", config.OriginConfig},
				{"decode-filter", config.OriginConfig},
				{"max-score-picker", config.OriginConfig},
				{"prefix-based-pd-decider", config.OriginConfig},
				{"disagg-profile-handler", config.OriginConfig},
			}, flowAndParsers, []pluginRow{
				{"metrics-data-source", config.OriginSystemDefault},
				{"core-metrics-extractor", config.OriginSystemDefault},
				{"token-producer", config.OriginAutoProducer},
			}),
			profiles: []config.ProfileInfo{
				{Name: "prefill", Filters: []string{"prefill-filter"}, Picker: "max-score-picker",
					Scorers: []config.ScorerRef{{Name: "prefix-cache-scorer", Weight: 2}, {Name: "queue-scorer", Weight: 1}}},
				{Name: "decode", Filters: []string{"decode-filter"}, Picker: "max-score-picker",
					Scorers: []config.ScorerRef{{Name: "prefix-cache-scorer", Weight: 2}, {Name: "queue-scorer", Weight: 1}}},
			},
			handler:     "disagg-profile-handler",
			auto:        []string{"token-producer"},
			producers:   []string{"token-producer", "approx-prefix-cache-producer"},
			dataSources: []string{"metrics-data-source"},
		})
	})
}

// TestAllShippedConfigsLoad loads every shipped configuration but
// mmConfig, which fails as upstream does, naming the field and its line.
func TestAllShippedConfigsLoad(t *testing.T) {
	for _, f := range sharedFiles(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			l, err := config.LoadFile(f, opts())
			if filepath.Base(f) == mmConfig {
				if err == nil || !errors.Is(err, config.ErrPlugin) ||
					!strings.Contains(err.Error(), mmConfig+`:14: plugins[4].parameters: invalid plugin: plugin "mm-embeddings-cache-producer"`) ||
					!strings.Contains(err.Error(), `unknown field "cacheSizeInMB"`) {
					t.Fatalf("error %v, want line 14's unknown field cacheSizeInMB", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(l.Profiles) == 0 || l.ProfileHandler == "" {
				t.Errorf("no profiles/handler: %+v", l.Profiles)
			}
			for _, p := range l.Profiles {
				if p.Picker == "" {
					t.Errorf("profile %s has no picker", p.Name)
				}
			}
		})
	}
}

func TestShippedNotSimulatedAndWarnings(t *testing.T) {
	l := loadShared(t, "sim-program-aware-config.yaml")
	if len(l.Warnings) != 1 || !strings.Contains(l.Warnings[0], "inference.networking.x-k8s.io/v1alpha1 is deprecated") {
		t.Errorf("warnings %q", l.Warnings)
	}
	if l.Config.APIVersion != config.APIVersion {
		t.Errorf("effective apiVersion %q", l.Config.APIVersion)
	}
	if !l.FeatureGates["flowControl"] {
		t.Error("flowControl gate off")
	}
	var names []string
	for _, n := range l.NotSimulated {
		names = append(names, n.Name)
		if !strings.HasPrefix(n.Reason, "not simulated") || !strings.Contains(n.Reason, "fallback:") {
			t.Errorf("reason %q", n.Reason)
		}
	}
	if len(names) != 0 {
		t.Errorf("not simulated %v", names)
	}
	// §15: band 0 copies defaultPriorityBand, so it runs program-aware
	// fairness with FCFS ordering, 1e9 bytes and 5000 requests; TTLs 60/60 s;
	// the static usage-limit policy.
	want := &config.FlowControlInfo{
		Bands:               []config.BandInfo{{Priority: 0, MaxBytes: 1e9, MaxRequests: 5000, FairnessPolicy: "program-aware-fairness", OrderingPolicy: "fcfs-ordering-policy"}},
		DefaultPriorityBand: config.BandInfo{Priority: 0, MaxBytes: 1e9, MaxRequests: 5000, FairnessPolicy: "program-aware-fairness", OrderingPolicy: "fcfs-ordering-policy"},
		DefaultRequestTTL:   "1m0s", NoEndpointRequestTTL: "1m0s", UsageLimitPolicy: "static-usage-limit-policy", SaturationDetector: "utilization-detector",
	}
	if !reflect.DeepEqual(l.FlowControl, want) {
		t.Errorf("flow control\n got %+v\nwant %+v", l.FlowControl, want)
	}
	sr := loadShared(t, "soft-reflective-ceiling-epp-config.yaml")
	if len(sr.NotSimulated) != 0 || sr.FlowControl == nil || sr.FlowControl.UsageLimitPolicy != "soft-reflective-ceiling-policy" ||
		len(sr.FlowControl.Bands) != 1 || sr.FlowControl.Bands[0].FairnessPolicy != "global-strict-fairness-policy" {
		t.Errorf("soft-reflective: not simulated %v, flow control %+v", sr.NotSimulated, sr.FlowControl)
	}
	// The probabilistic admitter's config leaves the gate off (§15 finding
	// 6): no flow-control layer, the neutered detector feeds the legacy gate.
	pa := loadShared(t, "probabilistic-admitter-epp-config.yaml")
	if pa.FlowControl != nil || len(pa.NotSimulated) != 0 || pa.SaturationDetector != "utilization-detector" || len(pa.Router().Admitters) != 1 {
		t.Errorf("probabilistic admitter: flow control %+v, not simulated %v, detector %q", pa.FlowControl, pa.NotSimulated, pa.SaturationDetector)
	}

	// The DCGM pair is simulated: the assembled router polls dcgm-source
	// every second (its interval) for its dcgm-extractor.
	g := loadShared(t, "sim-epp-gpu-config.yaml")
	if len(g.NotSimulated) != 0 {
		t.Errorf("gpu not simulated %v", g.NotSimulated)
	}
	if got := g.Router().GPUPolls; !slices.Equal(got, []epp.GPUPoll{{Source: "dcgm-source", Interval: 1e9}}) {
		t.Errorf("gpu polls %+v", got)
	}
	// The filter and scorer names are the configured ones.
	if p := g.Profiles[0]; !slices.Equal(p.Filters, []string{"decode-filter", "gpu-utilization-filter"}) ||
		p.Scorers[0] != (config.ScorerRef{Name: "gpu-utilization-scorer", Weight: 2}) {
		t.Errorf("gpu profile %+v", p)
	}

	mm, err := config.Load(mmFixed(t), opts())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(mm.AutoProducers, nil) {
		t.Errorf("mm auto producers %v", mm.AutoProducers)
	}
	// Both producers require the configured token-producer, which runs first.
	if !slices.Equal(mm.Producers, []string{"token-producer", "mm-embeddings-cache-producer", "precise-prefix-cache-producer"}) {
		t.Errorf("mm producers %v", mm.Producers)
	}

	noLRU := loadShared(t, "sim-epp-no-hit-lru.yaml")
	if !slices.Equal(noLRU.AutoProducers, []string{"token-producer"}) {
		t.Errorf("no-hit-lru auto %v", noLRU.AutoProducers)
	}

	sat := loadShared(t, "probabilistic-admitter-epp-config.yaml")
	if sat.SaturationDetector != "utilization-detector" || sat.Plugin("utilization-detector") == nil {
		t.Error("configured utilization-detector not used")
	}
	for _, p := range sat.Plugins {
		if p.Name == "utilization-detector" && p.Origin != config.OriginConfig {
			t.Errorf("utilization-detector origin %s", p.Origin)
		}
	}
}

func TestDeprecatedTopLevelFields(t *testing.T) {
	src := `
apiVersion: inference.networking.x-k8s.io/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: queue-scorer
- name: my-detector
  type: utilization-detector
- type: openai-parser
saturationDetector:
  pluginRef: my-detector
parser:
  pluginRef: openai-parser
`
	l, err := config.Load([]byte(src), opts())
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Warnings) != 4 {
		t.Fatalf("warnings %q", l.Warnings)
	}
	for i, w := range []string{"apiVersion inference.networking.x-k8s.io/v1alpha1 is deprecated", "top-level saturationDetector is deprecated", "top-level parser is deprecated", "no schedulingProfiles"} {
		if !strings.Contains(l.Warnings[i], w) {
			t.Errorf("warning %d = %q, want %q", i, l.Warnings[i], w)
		}
	}
	if l.SaturationDetector != "my-detector" || !slices.Equal(l.Parsers, []string{"openai-parser"}) {
		t.Errorf("moved fields: detector %q parsers %v", l.SaturationDetector, l.Parsers)
	}
	if l.Config.SaturationDetector != nil || l.Config.Parser != nil {
		t.Error("deprecated fields kept in the effective config")
	}
	// No profiles: "default" gets every filter/scorer/picker in config order;
	// the detector is a Filter, as upstream.
	want := config.ProfileInfo{Name: "default", Filters: []string{"my-detector"},
		Scorers: []config.ScorerRef{{Name: "queue-scorer", Weight: 1}}, Picker: "max-score-picker"}
	if !reflect.DeepEqual(l.Profiles, []config.ProfileInfo{want}) {
		t.Errorf("profiles %+v", l.Profiles)
	}
}

func TestInjectDefaultsFalse(t *testing.T) {
	src := `
apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: queue-scorer
dataLayer:
  injectDefaults: false
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: queue-scorer
`
	l, err := config.Load([]byte(src), opts())
	if err != nil {
		t.Fatal(err)
	}
	if l.Plugin("metrics-data-source") != nil || len(l.Config.DataLayer.Sources) != 0 {
		t.Error("metrics source injected despite injectDefaults: false")
	}
}

// TestInvalidConfigs: each invalid config gives its specific error, class
// and location.
func TestInvalidConfigs(t *testing.T) {
	head := "apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\n"
	cases := []struct {
		name  string
		src   string
		class error
		msg   string // full message
	}{
		{"unknown top-level field", head + "plugins: []\nschedulingProfile: []\n", config.ErrUnknownField,
			`t.yaml:4: unknown field "schedulingProfile"`},
		{"unknown profile field", head + "plugins:\n- type: queue-scorer\nschedulingProfiles:\n- name: a\n  plugins:\n  - pluginRef: queue-scorer\n    wieght: 2\n", config.ErrUnknownField,
			`t.yaml:9: schedulingProfiles[0].plugins[0]: unknown field "wieght"`},
		{"unknown plugin field", head + "plugins:\n- type: queue-scorer\n  params: {}\n", config.ErrUnknownField,
			`t.yaml:5: plugins[0]: unknown field "params"`},
		{"duplicate key", head + "plugins: []\nplugins: []\n", config.ErrDuplicateField,
			`t.yaml:4: duplicate field "plugins"`},
		{"bad weight type", head + "plugins:\n- type: queue-scorer\nschedulingProfiles:\n- name: a\n  plugins:\n  - pluginRef: queue-scorer\n    weight: high\n", config.ErrSyntax,
			"t.yaml:9: schedulingProfiles[0].plugins[0].weight: invalid YAML: cannot unmarshal !!str `high` into float64"},
		{"weight out of range", head + "plugins:\n- type: queue-scorer\nschedulingProfiles:\n- name: a\n  plugins:\n  - pluginRef: queue-scorer\n    weight: 1e309\n", config.ErrSyntax,
			"t.yaml:9: schedulingProfiles[0].plugins[0].weight: invalid YAML: 1e309 is out of range for a float64 (at most 1.7976931348623157e+308)"},
		{"weight of 400 digits", head + "plugins:\n- type: queue-scorer\nschedulingProfiles:\n- name: a\n  plugins:\n  - pluginRef: queue-scorer\n    weight: " + strings.Repeat("9", 400) + "\n", config.ErrSyntax,
			// The error is cut to a readable length (D14), its start and end kept.
			"t.yaml:9: schedulingProfiles[0].plugins[0].weight: invalid YAML: " + strings.Repeat("9", 100)},
		{"weight of 400 digits, its end", head + "plugins:\n- type: queue-scorer\nschedulingProfiles:\n- name: a\n  plugins:\n  - pluginRef: queue-scorer\n    weight: " + strings.Repeat("9", 400) + "\n", config.ErrSyntax,
			"9 is out of range for a float64 (at most 1.7976931348623157e+308)"},
		{"quoted weight", head + "plugins:\n- type: queue-scorer\nschedulingProfiles:\n- name: a\n  plugins:\n  - pluginRef: queue-scorer\n    weight: \"1e309\"\n", config.ErrSyntax,
			"t.yaml:9: schedulingProfiles[0].plugins[0].weight: invalid YAML: cannot unmarshal !!str `1e309` into float64"},
		{"parameter out of range", head + "plugins:\n- type: prefix-cache-scorer\n  parameters:\n    matchLengthWeight: -1_000e306\n", config.ErrSyntax,
			"t.yaml:6: plugins[0].parameters.matchLengthWeight: invalid YAML: -1_000e306 is out of range for a float64 (at most 1.7976931348623157e+308)"},
		{"flow parameter out of range", head + "plugins:\n- type: queue-scorer\n  parameters: {weights: [1, 2.5E+400]}\n", config.ErrSyntax,
			"t.yaml:5: plugins[0].parameters.weights[1]: invalid YAML: 2.5E+400 is out of range for a float64 (at most 1.7976931348623157e+308)"},
		{"yaml syntax", head + "plugins:\n- type: [\n", config.ErrSyntax, "t.yaml:4: plugins[0].type: invalid YAML: did not find expected node content"},
		{"missing apiVersion", "kind: EndpointPickerConfig\nplugins: []\n", config.ErrAPIVersion,
			"t.yaml: apiVersion: unsupported apiVersion/kind: apiVersion is missing (want llm-d.ai/v1alpha1)"},
		{"wrong apiVersion", "apiVersion: v1\nkind: EndpointPickerConfig\n", config.ErrAPIVersion,
			`t.yaml:1: apiVersion: unsupported apiVersion/kind: apiVersion "v1" (want llm-d.ai/v1alpha1 or the deprecated inference.networking.x-k8s.io/v1alpha1)`},
		{"wrong kind", "apiVersion: llm-d.ai/v1alpha1\nkind: Pod\n", config.ErrAPIVersion,
			`t.yaml:2: kind: unsupported apiVersion/kind: kind "Pod" (want EndpointPickerConfig)`},
		{"unknown feature gate", head + "featureGates: [flowControl, fastPath]\nplugins: []\n", config.ErrFeatureGate,
			`t.yaml:3: featureGates[1]: invalid feature gate: unknown feature gate "fastPath" (known: flowControl, haPopulateNonLeaderDatastore)`},
		{"bad gate value", head + "featureGates:\n- flowControl=maybe\nplugins: []\n", config.ErrFeatureGate,
			`t.yaml:4: featureGates[0]: invalid feature gate: "flowControl=maybe": value "maybe" is not a boolean`},
		{"plugin without type", head + "plugins:\n- name: x\n", config.ErrPlugin,
			`t.yaml:4: plugins[0]: invalid plugin: plugin "x" has no type`},
		{"duplicate plugin name", head + "plugins:\n- type: queue-scorer\n- type: queue-scorer\n", config.ErrPlugin,
			`t.yaml:5: plugins[1]: invalid plugin: duplicate plugin name "queue-scorer" (also plugins[0]) (the name defaults to the type: give one of them a name)`},
		{"unregistered type", head + "plugins:\n- type: queue-scorrer\n", config.ErrPlugin,
			`t.yaml:4: plugins[0].type: invalid plugin: plugin "queue-scorrer": type "queue-scorrer" is not registered (did you mean "queue-scorer"?)`},
		{"unknown plugin parameter", head + "plugins:\n- type: prefix-cache-scorer\n  parameters:\n    matchLenghtWeight: 0.5\n", config.ErrPlugin,
			`t.yaml:5: plugins[0].parameters: invalid plugin: plugin "prefix-cache-scorer" (type prefix-cache-scorer): parameters: json: unknown field "matchLenghtWeight"`},
		{"factory validation", head + "plugins:\n- name: p\n  type: prefix-cache-scorer\n  parameters:\n    matchLengthWeight: 1.5\n", config.ErrPlugin,
			`t.yaml:6: plugins[0].parameters: invalid plugin: plugin "p" (type prefix-cache-scorer): matchLengthWeight must be in [0,1], got 1.5`},
		{"factory error", head + "plugins:\n- type: failing-plugin\n", config.ErrPlugin,
			`t.yaml:4: plugins[0]: invalid plugin: plugin "failing-plugin" (type failing-plugin): boom`},
		{"decider undefined", head + "plugins:\n- type: disagg-profile-handler\n  parameters:\n    deciders:\n      prefill: my-decider\n", config.ErrReference,
			`t.yaml:7: plugins[0].parameters.deciders.prefill: invalid reference: plugin "disagg-profile-handler" references undefined plugin "my-decider"`},
		{"profile without name", head + "plugins:\n- type: queue-scorer\nschedulingProfiles:\n- plugins:\n  - pluginRef: queue-scorer\n", config.ErrProfile,
			`t.yaml:6: schedulingProfiles[0]: invalid scheduling profile: schedulingProfiles[0] has no name`},
		{"duplicate profile", head + "plugins:\n- type: queue-scorer\n- type: single-profile-handler\nschedulingProfiles:\n- name: a\n  plugins: []\n- name: a\n  plugins: []\n", config.ErrProfile,
			`t.yaml:9: schedulingProfiles[1].name: invalid scheduling profile: duplicate profile name "a" (also schedulingProfiles[0])`},
		{"missing pluginRef", head + "plugins:\n- type: queue-scorer\nschedulingProfiles:\n- name: a\n  plugins:\n  - weight: 2\n", config.ErrProfile,
			`t.yaml:8: schedulingProfiles[0].plugins[0]: invalid scheduling profile: profile "a": plugin entry has no pluginRef`},
		{"undefined pluginRef", head + "plugins:\n- type: queue-scorer\nschedulingProfiles:\n- name: a\n  plugins:\n  - pluginRef: kv-scorer\n", config.ErrReference,
			`t.yaml:8: schedulingProfiles[0].plugins[0].pluginRef: invalid reference: profile "a" references undefined plugin "kv-scorer"`},
		{"two pickers", head + "plugins:\n- type: max-score-picker\n- type: random-picker\nschedulingProfiles:\n- name: a\n  plugins:\n  - pluginRef: max-score-picker\n  - pluginRef: random-picker\n", config.ErrProfile,
			`t.yaml:10: schedulingProfiles[0].plugins[1].pluginRef: invalid scheduling profile: profile "a": cannot add picker "random-picker": already have picker "max-score-picker"`},
		{"no profile handler", head + "plugins:\n- type: queue-scorer\nschedulingProfiles:\n- name: a\n  plugins: []\n- name: b\n  plugins: []\n", config.ErrScheduler,
			`t.yaml:3: plugins: invalid scheduler: no profile handler: with 2 scheduling profiles one must be configured (e.g. disagg-profile-handler)`},
		{"two profile handlers", head + "plugins:\n- type: single-profile-handler\n- type: data-parallel-profile-handler\n", config.ErrScheduler,
			`t.yaml:3: plugins: invalid scheduler: multiple profile handlers ("single-profile-handler", "data-parallel-profile-handler"); exactly one is allowed`},
		{"single handler, two profiles", head + "plugins:\n- type: single-profile-handler\nschedulingProfiles:\n- name: a\n  plugins: []\n- name: b\n  plugins: []\n", config.ErrScheduler,
			`t.yaml:5: schedulingProfiles: invalid scheduler: single-profile-handler "single-profile-handler" cannot run 2 scheduling profiles`},
		{"undefined saturation detector", head + "plugins: []\nflowControl:\n  saturationDetector:\n    pluginRef: my-detector\n", config.ErrReference,
			`t.yaml:6: flowControl.saturationDetector.pluginRef: invalid reference: saturation detector references undefined plugin "my-detector"`},
		{"not a saturation detector", head + "plugins:\n- type: queue-scorer\nflowControl:\n  saturationDetector:\n    pluginRef: queue-scorer\n", config.ErrReference,
			`t.yaml:7: flowControl.saturationDetector.pluginRef: invalid reference: saturation detector "queue-scorer" (type queue-scorer) is not a saturation detector`},
		{"undefined parser", head + "plugins: []\nrequestHandler:\n  parsers:\n  - pluginRef: grpc\n", config.ErrReference,
			`t.yaml:6: requestHandler.parsers[0].pluginRef: invalid reference: parser "grpc" is neither a defined plugin nor a registered plugin type`},
		{"not a parser", head + "plugins:\n- type: queue-scorer\nrequestHandler:\n  parsers:\n  - pluginRef: queue-scorer\n", config.ErrReference,
			`t.yaml:7: requestHandler.parsers[0].pluginRef: invalid reference: plugin "queue-scorer" (type queue-scorer) is not a parser`},
		{"undefined data source", head + "plugins: []\ndataLayer:\n  sources:\n  - pluginRef: prom\n    extractors: []\n", config.ErrReference,
			`t.yaml:6: dataLayer.sources[0].pluginRef: invalid reference: data source references undefined plugin "prom"`},
		{"undefined extractor", head + "plugins:\n- type: metrics-data-source\ndataLayer:\n  sources:\n  - pluginRef: metrics-data-source\n    extractors:\n    - pluginRef: ext\n", config.ErrReference,
			`t.yaml:9: dataLayer.sources[0].extractors[0].pluginRef: invalid reference: data extractor references undefined plugin "ext"`},
		{"undefined fairness policy", head + "featureGates: [flowControl]\nplugins: []\nflowControl:\n  defaultPriorityBand:\n    fairnessPolicyRef: fair\n", config.ErrReference,
			`t.yaml:7: flowControl.defaultPriorityBand.fairnessPolicyRef: invalid reference: fairness policy references undefined plugin "fair"`},
		{"non-finite weight", head + "plugins:\n- type: queue-scorer\nschedulingProfiles:\n- name: a\n  plugins:\n  - pluginRef: queue-scorer\n    weight: .nan\n", config.ErrProfile,
			`t.yaml:9: schedulingProfiles[0].plugins[0].weight: invalid scheduling profile: profile "a": weight of "queue-scorer" is not a finite number`},
		{"no default producer", head + "plugins:\n- type: prefix-cache-scorer\n  parameters:\n    prefixMatchInfoProducerName: foo\n", config.ErrDataDependency,
			`t.yaml:4: plugins[0]: invalid data dependencies: plugin "prefix-cache-scorer" requires data key "PrefixCacheMatchInfoDataKey/foo", which no plugin produces and which has no default producer (configure a producer named "foo")`},
		{"orphan data key", head + "plugins:\n- type: orphan-consumer\n", config.ErrDataDependency,
			`t.yaml:4: plugins[0]: invalid data dependencies: plugin "orphan-consumer" requires data key "Foo/bar", which no plugin produces and which has no default producer`},
		{"producer cycle", head + "plugins:\n- type: cyc-a\n- type: cyc-b\n", config.ErrDataDependency,
			`t.yaml:3: plugins: invalid data dependencies: data producers depend on each other in a cycle: cyc-a, cyc-b`},
		{"default name taken", head + "plugins:\n- name: max-score-picker\n  type: queue-scorer\n", config.ErrPlugin,
			`t.yaml:3: plugins: invalid plugin: cannot add default plugin "max-score-picker" (no picker configured): the name is taken by a plugin of type "queue-scorer"`},
		{"bad quantity", head + "plugins: []\nflowControl:\n  maxBytes: 1Qi\n", config.ErrSyntax, `invalid quantity "1Qi"`},
		{"bad duration", head + "plugins: []\nflowControl:\n  defaultRequestTTL: soon\n", config.ErrSyntax, `invalid duration "soon"`},
		{"decider parameter", head + "plugins:\n- type: prefix-based-pd-decider\n  parameters:\n    nonCachedToken: 16\n", config.ErrPlugin,
			`t.yaml:5: plugins[0].parameters: invalid plugin: plugin "prefix-based-pd-decider" (type prefix-based-pd-decider): parameters: json: unknown field "nonCachedToken"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := opts()
			o.File = "t.yaml"
			_, err := config.Load([]byte(c.src), o)
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, c.class) {
				t.Errorf("error %q is not %v", err, c.class)
			}
			if !strings.Contains(err.Error(), c.msg) {
				t.Errorf("error\n got %s\nwant %s", err, c.msg)
			}
			var ce *config.Error
			if !errors.As(err, &ce) {
				t.Errorf("error %T is not a *config.Error", err)
			}
		})
	}
}

// TestRoundTrip: the effective config written as YAML loads to the same
// effective config (a fixed point), for the default and every shipped config.
func TestRoundTrip(t *testing.T) {
	inputs := map[string][]byte{"builtin-default": nil}
	files, _ := filepath.Glob(filepath.Join(sharedConfigs, "*.yaml"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(f) == mmConfig {
			b = mmFixed(t)
		}
		inputs[filepath.Base(f)] = b
	}
	for name, src := range inputs {
		t.Run(name, func(t *testing.T) {
			l1, err := config.Load(src, opts())
			if err != nil {
				t.Fatal(err)
			}
			y1, err := l1.YAML()
			if err != nil {
				t.Fatal(err)
			}
			l2, err := config.Load(y1, opts())
			if err != nil {
				t.Fatalf("reload: %v\n%s", err, y1)
			}
			y2, err := config.Marshal(l2.Config)
			if err != nil {
				t.Fatal(err)
			}
			b1, _ := config.Marshal(l1.Config)
			if string(b1) != string(y2) {
				t.Errorf("round trip differs:\n%s\n----\n%s", b1, y2)
			}
			if !reflect.DeepEqual(l1.Profiles, l2.Profiles) || !slices.Equal(l1.Producers, l2.Producers) {
				t.Errorf("profiles/producers differ: %+v %v / %+v %v", l1.Profiles, l1.Producers, l2.Profiles, l2.Producers)
			}
			if len(l2.AutoProducers) != 0 {
				t.Errorf("reloaded config still auto-creates %v", l2.AutoProducers)
			}
			for i := range l1.Plugins {
				a, b := l1.Plugins[i], l2.Plugins[i]
				if a.Name != b.Name || a.Type != b.Type || string(a.Parameters) != string(b.Parameters) {
					t.Errorf("plugin %d: %s/%s %s vs %s/%s %s", i, a.Name, a.Type, a.Parameters, b.Name, b.Type, b.Parameters)
				}
			}
		})
	}
}

func TestRouterAssembly(t *testing.T) {
	var log []string
	o := opts()
	o.Registry = fakeRegistry(&log)
	l, err := config.Load(nil, o)
	if err != nil {
		t.Fatal(err)
	}
	r := l.Router()
	if len(r.Profiles) != 1 || r.Handler == nil || r.Handler.Name() != "single-profile-handler" {
		t.Fatalf("router %+v", r)
	}
	p := r.Profiles[0]
	if len(p.Scorers) != 3 || p.Scorers[2].Weight != 3 || p.Picker.Name() != "max-score-picker" {
		t.Errorf("profile %+v", p)
	}
	r.AddEndpoint(epp.EndpointInfo{Name: "a"})
	r.AddEndpoint(epp.EndpointInfo{Name: "b"})
	// The default parsers, in requestHandler.parsers order (spec §1.3).
	var parsers []string
	for _, p := range r.Parsers {
		parsers = append(parsers, p.Name())
	}
	if !slices.Equal(parsers, defaultParsers) {
		t.Errorf("parsers %v, want %v", parsers, defaultParsers)
	}
	// A body the parser rejects runs no plugin (spec §2.1 step 0).
	_, err = r.Schedule(&epp.Cycle{}, &epp.Request{ID: "r0", Path: "/v1/completions", Body: []byte(`{"prompt":5}`)})
	if !errors.Is(err, epp.ErrBadRequest) || len(log) != 0 {
		t.Fatalf("bad body: err %v, plugin calls %v", err, log)
	}
	res, err := r.Schedule(&epp.Cycle{}, &epp.Request{ID: "r1", Path: "/v1/completions", Body: []byte(`{"prompt":"x"}`)})
	if err != nil {
		t.Fatal(err)
	}
	// Fake scorers grow with candidate index, so "b" wins.
	if res.Target().Name != "b" {
		t.Errorf("target %s", res.Target().Name)
	}
	want := []string{"produce:token-producer", "produce:approx-prefix-cache-producer",
		"pre:approx-prefix-cache-producer", "pre:token-producer"}
	if !slices.Equal(log, want) {
		t.Errorf("call order %v, want %v", log, want)
	}
	// Reload gives fresh instances.
	l2, err := l.Reload(2)
	if err != nil {
		t.Fatal(err)
	}
	if l2.Plugin("queue-scorer") == l.Plugin("queue-scorer") {
		t.Error("Reload shares instances")
	}
}

func TestParseQuantity(t *testing.T) {
	cases := map[string]int64{"100": 100, "1k": 1000, "1Ki": 1024, "1Gi": 1 << 30, "1.5M": 1500000, "1e3": 1000, "500m": 1, "0": 0}
	for s, w := range cases {
		if v, err := config.ParseQuantity(s); err != nil || v != w {
			t.Errorf("ParseQuantity(%q) = %d, %v; want %d", s, v, err, w)
		}
	}
	for _, s := range []string{"", "abc", "1Qi", "-5", "0x10", "NaN", "Inf"} {
		if _, err := config.ParseQuantity(s); err == nil {
			t.Errorf("ParseQuantity(%q) accepted", s)
		}
	}
}

func TestWarnings(t *testing.T) {
	head := "apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\n"
	cases := []struct{ name, src, want string }{
		{"deprecated type", head + "plugins:\n- type: data-parallel-profile-handler\n", `plugin "data-parallel-profile-handler": type data-parallel-profile-handler is deprecated`},
		{"flow control off", head + "plugins: []\nflowControl:\n  maxRequests: 100\n", "flowControl settings other than saturationDetector are ignored: featureGates flowControl is off"},
		{"weight on non-scorer", head + "plugins:\n- type: decode-filter\nschedulingProfiles:\n- name: a\n  plugins:\n  - pluginRef: decode-filter\n    weight: 3\n",
			`schedulingProfiles[0].plugins[0]: weight on "decode-filter" (type decode-filter) ignored: it is not a scorer`},
		{"not slotted", head + "plugins:\n- type: metrics-data-source\nschedulingProfiles:\n- name: a\n  plugins:\n  - pluginRef: metrics-data-source\n",
			`profile "a": plugin "metrics-data-source" (type metrics-data-source) is not a filter, scorer or picker; ignored in the profile (as upstream)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, err := config.Load([]byte(c.src), opts())
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(l.Warnings, func(w string) bool { return strings.Contains(w, c.want) }) {
				t.Errorf("warnings %q lack %q", l.Warnings, c.want)
			}
		})
	}
}

func TestSetWeight(t *testing.T) {
	l, err := config.Load(nil, opts())
	if err != nil {
		t.Fatal(err)
	}
	if err := config.SetWeight(l.Config, "default", "prefix-cache-scorer", 5.5); err != nil {
		t.Fatal(err)
	}
	y, err := config.Marshal(l.Config)
	if err != nil {
		t.Fatal(err)
	}
	l2, err := config.Load(y, opts())
	if err != nil {
		t.Fatal(err)
	}
	if w := l2.Profiles[0].Scorers[2]; w != (config.ScorerRef{Name: "prefix-cache-scorer", Weight: 5.5}) {
		t.Errorf("scorer %+v", w)
	}
	for _, bad := range [][2]string{{"nope", "queue-scorer"}, {"default", "nope"}} {
		if err := config.SetWeight(l.Config, bad[0], bad[1], 1); err == nil {
			t.Errorf("SetWeight(%v) accepted", bad)
		}
	}
}

func TestLineIndexFlowAndBlockScalars(t *testing.T) {
	src := "apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\nplugins:\n  - name: a\n    type: queue-scorer\n    parameters:\n      note: |\n        text: that looks like a key\n        more: text\n  - type: kv-cache-utilization-scorer\nschedulingProfiles:\n  - name: p\n    plugins:\n      - pluginRef: a\n      - {pluginRef: kv-cache-utilization-scorer, wieght: 1}\n"
	o := opts()
	o.File = "f.yaml"
	_, err := config.Load([]byte(src), o)
	if err == nil || !strings.Contains(err.Error(), `f.yaml:15: schedulingProfiles[0].plugins[1]: unknown field "wieght"`) {
		t.Errorf("err %v", err)
	}
}

// TestNotSimulatedItemString: a note says each thing once: no "not
// simulated:" prefix (the list it is in says so), no "(type)" equal to
// the name, no name repeated at the start of the reason.
func TestNotSimulatedItemString(t *testing.T) {
	for _, c := range []struct {
		item config.NotSimulatedItem
		want string
	}{
		{config.NotSimulatedItem{"prefix-based-pd-decider", "prefix-based-pd-decider", "not simulated: prefix-based-pd-decider decides X"},
			"prefix-based-pd-decider decides X"},
		{config.NotSimulatedItem{"dcgm-source", "dcgm-data-source", "not simulated: DCGM telemetry needs GPUs; fallback: none"},
			"dcgm-source (dcgm-data-source): DCGM telemetry needs GPUs; fallback: none"},
		{config.NotSimulatedItem{"flow", "flow", "Not Simulated: queueing"}, "flow: queueing"},
		{config.NotSimulatedItem{"x", "", "reason"}, "x: reason"},
	} {
		if got := c.item.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.item, got, c.want)
		}
	}
}

// TestGPUPollWiring: the assembled router polls a dcgm-data-source only
// when dataLayer.sources wires a dcgm-extractor to it, with the source's
// interval (0 without one), whatever the plugins' names.
func TestGPUPollWiring(t *testing.T) {
	head := "apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\nplugins:\n- type: queue-scorer\n"
	tail := "schedulingProfiles:\n- name: default\n  plugins:\n  - pluginRef: queue-scorer\n"
	for _, c := range []struct {
		name, plugins, sources string
		want                   []epp.GPUPoll
	}{
		{"wired", "- type: dcgm-data-source\n  name: src\n  parameters: {interval: 250ms}\n- type: dcgm-extractor\n  name: ex\n",
			"  - pluginRef: src\n    extractors:\n    - pluginRef: ex\n", []epp.GPUPoll{{Source: "src", Interval: 250e6}}},
		{"no interval", "- type: dcgm-data-source\n- type: dcgm-extractor\n",
			"  - pluginRef: dcgm-data-source\n    extractors:\n    - pluginRef: dcgm-extractor\n", []epp.GPUPoll{{Source: "dcgm-data-source"}}},
		{"two sources", "- type: dcgm-data-source\n  name: a\n- type: dcgm-data-source\n  name: b\n  parameters: {interval: 2s}\n- type: dcgm-extractor\n",
			"  - pluginRef: a\n    extractors:\n    - pluginRef: dcgm-extractor\n  - pluginRef: b\n    extractors:\n    - pluginRef: dcgm-extractor\n",
			[]epp.GPUPoll{{Source: "a"}, {Source: "b", Interval: 2e9}}},
		{"source without extractor", "- type: dcgm-data-source\n- type: dcgm-extractor\n",
			"  - pluginRef: dcgm-data-source\n    extractors: []\n", nil},
		{"extractor on the metrics source", "- type: metrics-data-source\n- type: core-metrics-extractor\n- type: dcgm-extractor\n",
			"  - pluginRef: metrics-data-source\n    extractors:\n    - pluginRef: core-metrics-extractor\n    - pluginRef: dcgm-extractor\n", nil},
		{"not in the data layer", "- type: dcgm-data-source\n- type: dcgm-extractor\n", "", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := head + c.plugins + tail
			if c.sources != "" {
				src += "dataLayer:\n  sources:\n" + c.sources
			}
			l, err := config.Load([]byte(src), opts())
			if err != nil {
				t.Fatal(err)
			}
			if got := l.Router().GPUPolls; !slices.Equal(got, c.want) {
				t.Errorf("polls %+v, want %+v", got, c.want)
			}
			if len(l.NotSimulated) != 0 {
				t.Errorf("not simulated %v", l.NotSimulated)
			}
		})
	}
}

// TestBOM: a UTF-8 byte order mark before a configuration is not content:
// the configuration loads as without it, its errors on the same lines, and
// a mark alone is an empty file (the default configuration).
func TestBOM(t *testing.T) {
	const bom = "\xef\xbb\xbf"
	head := "apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\n"
	src := head + "plugins:\n- type: queue-scorer\nschedulingProfiles:\n- name: a\n  plugins:\n  - pluginRef: queue-scorer\n    weight: 2\n"
	o := opts()
	o.File = "t.yaml"
	want, err := config.Load([]byte(src), o)
	if err != nil {
		t.Fatal(err)
	}
	got, err := config.Load([]byte(bom+src), o)
	if err != nil {
		t.Fatal(err)
	}
	wy, _ := want.YAML()
	gy, _ := got.YAML()
	if !bytes.Equal(wy, gy) {
		t.Errorf("with a byte order mark:\n%s\nwithout:\n%s", gy, wy)
	}
	for _, c := range []struct{ src, msg string }{
		{bom + "apiVersion: v1\nkind: EndpointPickerConfig\n",
			`t.yaml:1: apiVersion: unsupported apiVersion/kind: apiVersion "v1" (want llm-d.ai/v1alpha1 or the deprecated inference.networking.x-k8s.io/v1alpha1)`},
		{bom + head + "plugins: []\nschedulingProfile: []\n", `t.yaml:4: unknown field "schedulingProfile"`},
	} {
		if _, err := config.Load([]byte(c.src), o); err == nil || err.Error() != c.msg {
			t.Errorf("error %v\nwant  %s", err, c.msg)
		}
	}
	l, err := config.Load([]byte(bom+"\n"), o)
	if err != nil || !l.BuiltinDefault {
		t.Errorf("a byte order mark alone: %v", err)
	}
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte(bom+src), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := config.LoadFile(path, opts()); err != nil {
		t.Errorf("file with a byte order mark: %v", err)
	}
}
