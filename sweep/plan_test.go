package sweep

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eppsim/eppsim/epp/config"
	"github.com/eppsim/eppsim/epp/plugins"
	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/scenario"
	"github.com/eppsim/eppsim/sim"
	"github.com/eppsim/eppsim/workload"
)

// testSpec is a tiny scenario: the embedded chat workload, maxRequests
// requests, two replicas.
func testSpec(t testing.TB, maxRequests int) *scenario.Spec {
	t.Helper()
	p, err := replica.LookupPreset("llama-3.1-8b-h100")
	if err != nil {
		t.Fatal(err)
	}
	s := &scenario.Spec{Version: "test", Trace: "builtin:chat", Fleet: sim.UniformFleet(2, p),
		Env: sim.Options{Seed: 1, ScrapeInterval: int64(50 * time.Millisecond), KVEventLag: int64(5 * time.Millisecond), MaxRequests: maxRequests}}
	s.Workload.Seed = 1
	return s
}

func mustDims(t testing.TB, vary ...string) []Dim {
	t.Helper()
	var out []Dim
	for _, v := range vary {
		d, err := ParseVary(v)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

func TestPlanNumbering(t *testing.T) {
	p, err := NewPlan(Sweep{Spec: testSpec(t, 10), Dims: mustDims(t, "prefix-cache-scorer.weight=0:2:1", "queue-scorer.weight=0,5")})
	if err != nil {
		t.Fatal(err)
	}
	if p.Len() != 6 {
		t.Fatalf("Len %d, want 6", p.Len())
	}
	var got []string
	for i := range p.Len() {
		got = append(got, strings.Join(p.Values(i), "/"))
	}
	// Row-major: the last dimension varies fastest.
	if want := []string{"0/0", "0/5", "1/0", "1/5", "2/0", "2/5"}; !slices.Equal(got, want) {
		t.Errorf("grid order %v, want %v", got, want)
	}

	// Random: distinct points of the grid, the same sequence for the same
	// seed, another for another seed.
	sample := func(seed uint64) []string {
		p, err := NewPlan(Sweep{Spec: testSpec(t, 10), Dims: mustDims(t, "prefix-cache-scorer.weight=0:9:1", "queue-scorer.weight=0:9:1"),
			Random: 20, RandomSeed: seed})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for i := range p.Len() {
			out = append(out, strings.Join(p.Values(i), "/"))
		}
		return out
	}
	a, b, c := sample(1), sample(1), sample(2)
	if len(a) != 20 || !slices.Equal(a, b) || slices.Equal(a, c) {
		t.Errorf("random samples: seed 1 %v, again %v, seed 2 %v", a, b, c)
	}
	if s := slices.Clone(a); len(slices.Compact(slices.Sorted(slices.Values(s)))) != 20 {
		t.Errorf("random sample has repeats: %v", a)
	}
	// The whole space as a random sample is a permutation of the grid.
	p, err = NewPlan(Sweep{Spec: testSpec(t, 10), Dims: mustDims(t, "prefix-cache-scorer.weight=0:2:1", "queue-scorer.weight=0,5"), Random: 6})
	if err != nil {
		t.Fatal(err)
	}
	var perm []string
	for i := range p.Len() {
		perm = append(perm, strings.Join(p.Values(i), "/"))
	}
	slices.Sort(perm)
	if !slices.Equal(perm, got) {
		t.Errorf("random 6 of 6 = %v, want a permutation of %v", perm, got)
	}
}

func TestPlanErrors(t *testing.T) {
	hetero := testSpec(t, 10)
	hetero.Fleet[1].Labels = map[string]string{"zone": "b"}
	for _, tc := range []struct {
		name string
		sw   Sweep
		want string
	}{
		{"no dims", Sweep{}, "nothing to vary"},
		{"unknown plugin", Sweep{Dims: mustDims(t, "prefix-cache-scorr.weight=1")},
			`unknown plugin "prefix-cache-scorr" (did you mean "prefix-cache-scorer"?)`},
		{"unknown plugin param", Sweep{Dims: mustDims(t, "nope.lruCapacityPerServer=1")}, `unknown plugin "nope"`},
		{"weight of a non-scorer", Sweep{Dims: mustDims(t, "max-score-picker.weight=1")},
			`plugin "max-score-picker" is not a scorer in any scheduling profile`},
		{"unknown parameter", Sweep{Dims: mustDims(t, "approx-prefix-cache-producer.lruCapacity=5000")},
			`--vary approx-prefix-cache-producer.lruCapacity: value 5000: `},
		{"unknown parameter is the strict decoder's", Sweep{Dims: mustDims(t, "approx-prefix-cache-producer.lruCapacity=5000")},
			`unknown field "lruCapacity"`},
		{"invalid parameter value", Sweep{Dims: mustDims(t, "approx-prefix-cache-producer.maxPrefixBlocksToMatch=-1,5")},
			"maxPrefixBlocksToMatch must be >= 0"},
		{"wrong parameter type", Sweep{Dims: mustDims(t, "approx-prefix-cache-producer.lruCapacityPerServer=many")},
			`value many: `},
		{"object for a number", Sweep{Dims: mustDims(t, "approx-prefix-cache-producer.lruCapacityPerServer.x=1")},
			"--vary approx-prefix-cache-producer.lruCapacityPerServer.x: value 1: "},
		{"twice", Sweep{Dims: mustDims(t, "queue-scorer.weight=1", "queue-scorer.weight=2")}, "given twice"},
		{"round-robin", Sweep{EPP: scenario.ForSource("round-robin"), Dims: mustDims(t, "max-score-picker.x=1")},
			"the round-robin baseline has no configurable plugins"},
		{"replicas on a non-uniform fleet", Sweep{Spec: hetero, Dims: mustDims(t, "replicas=2,4")}, "needs a uniform fleet"},
		{"random beyond the grid", Sweep{Dims: mustDims(t, "queue-scorer.weight=1,2"), Random: 3}, "only 2 points"},
		{"missing config file", Sweep{EPP: scenario.ForSource("/nonexistent/epp.yaml"), Dims: mustDims(t, "queue-scorer.weight=1")}, "--epp-config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sw := tc.sw
			if sw.Spec == nil {
				sw.Spec = testSpec(t, 10)
			}
			_, err := NewPlan(sw)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestPointAddressing: a point's scenario and EPP config carry exactly its
// values: weights in every profile that uses the scorer, parameters
// (dotted paths too), fleet and environment knobs.
func TestPointAddressing(t *testing.T) {
	yaml := []byte(`apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: prefix-cache-scorer
- type: queue-scorer
- type: approx-prefix-cache-producer
  parameters:
    blockSizeTokens: 64
    autoTune: false
- type: disagg-profile-handler
  parameters:
    deciders:
      prefill: prefix-based-pd-decider
- type: prefix-based-pd-decider
schedulingProfiles:
- name: decode
  plugins:
  - pluginRef: prefix-cache-scorer
    weight: 3
  - pluginRef: queue-scorer
- name: prefill
  plugins:
  - pluginRef: prefix-cache-scorer
`)
	p, err := NewPlan(Sweep{Spec: testSpec(t, 10), EPP: scenario.EPP{Name: "inline", YAML: yaml},
		Dims: mustDims(t, "prefix-cache-scorer.weight=0.5,7", "approx-prefix-cache-producer.lruCapacityPerServer=5000",
			"approx-prefix-cache-producer.blockSizeTokens=16,32", "replicas=3", "kv-blocks=999", "kv-event-lag=20ms", "seed=42",
			"refresh-metrics-interval=10ms", "max-num-seqs=7", "max-batched-tokens=4096")})
	if err != nil {
		t.Fatal(err)
	}
	spec, e, err := p.Point(3) // 7, 5000, 32, ...
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Values(3)[:3]; !slices.Equal(got, []string{"7", "5000", "32"}) {
		t.Fatalf("point 3 values %v", got)
	}
	if len(spec.Fleet) != 3 || spec.Fleet[2].Preset.Engine.NumGPUBlocksOverride != 999 || spec.Fleet[0].Preset.Engine.MaxNumSeqs != 7 ||
		spec.Fleet[1].Preset.Engine.MaxNumBatchedTokens != 4096 {
		t.Errorf("fleet %d replicas, engine %+v", len(spec.Fleet), spec.Fleet[len(spec.Fleet)-1].Preset.Engine)
	}
	if spec.Env.KVEventLag != int64(20*time.Millisecond) || spec.Env.Seed != 42 || spec.Workload.Seed != 42 ||
		spec.Env.ScrapeInterval != int64(10*time.Millisecond) {
		t.Errorf("env %+v, workload seed %d", spec.Env, spec.Workload.Seed)
	}
	if len(p.spec.Fleet) != 2 || p.spec.Fleet[0].Preset.Engine.NumGPUBlocksOverride == 999 {
		t.Error("a point changed the base fleet")
	}
	l, err := config.Load(e.YAML, config.Options{Registry: plugins.Builtin()})
	if err != nil {
		t.Fatal(err)
	}
	weights := map[string]float64{}
	for _, prof := range l.Profiles {
		for _, s := range prof.Scorers {
			weights[prof.Name+"/"+s.Name] = s.Weight
		}
	}
	if want := map[string]float64{"decode/prefix-cache-scorer": 7, "decode/queue-scorer": 1, "prefill/prefix-cache-scorer": 7}; fmt.Sprint(weights) != fmt.Sprint(want) {
		t.Errorf("weights %v, want %v", weights, want)
	}
	found := false
	for _, in := range l.Plugins {
		if in.Name == "approx-prefix-cache-producer" {
			found = true
			// The existing keys keep their order; the new one is appended.
			if got := string(in.Parameters); got != `{"blockSizeTokens":32,"autoTune":false,"lruCapacityPerServer":5000}` {
				t.Errorf("parameters %s", got)
			}
		}
	}
	if !found {
		t.Error("no approx-prefix-cache-producer in the point's config")
	}
}

func TestSetJSONPath(t *testing.T) {
	for _, tc := range []struct {
		raw, val, want string
		path           []string
	}{
		{"", "5", `{"a":5}`, []string{"a"}},
		{"null", "5", `{"a":5}`, []string{"a"}},
		{`{"b":1,"a":2}`, "5", `{"b":1,"a":5}`, []string{"a"}},
		{`{"b":1}`, `"x"`, `{"b":1,"t":{"c":"x"}}`, []string{"t", "c"}},
		{`{"t":{"c":1,"d":2}}`, "9", `{"t":{"c":1,"d":9}}`, []string{"t", "d"}},
		{`{"t": {"c": [1, 2]}}`, "true", `{"t":{"c":[1,2],"e":true}}`, []string{"t", "e"}},
	} {
		got, err := setJSONPath(json.RawMessage(tc.raw), tc.path, json.RawMessage(tc.val))
		if err != nil || string(got) != tc.want {
			t.Errorf("set %v=%s in %s: %s, %v; want %s", tc.path, tc.val, tc.raw, got, err, tc.want)
		}
	}
	if _, err := setJSONPath(json.RawMessage(`{"t":5}`), []string{"t", "x"}, json.RawMessage("1")); err == nil ||
		!strings.Contains(err.Error(), `parameter "t" is 5, not an object`) {
		t.Errorf("path through a number: %v", err)
	}
	if _, err := setJSONPath(json.RawMessage(`[1]`), []string{"t"}, json.RawMessage("1")); err == nil {
		t.Error("parameters that are an array accepted")
	}
}

func TestHashIgnoresPaths(t *testing.T) {
	d := SpecDoc{Trace: "/a/trace.jsonl", TraceSHA256: "abc", EPPConfig: "/x/epp.yaml", Fleet: "2 × p", BaseEPP: "cfg", Points: 4}
	e := d
	e.Trace, e.EPPConfig, e.Fleet = "/b/trace.jsonl", "/y/epp.yaml", "two"
	if d.Hash() != e.Hash() {
		t.Error("hash depends on file paths")
	}
	e.Points = 5
	if d.Hash() == e.Hash() {
		t.Error("hash ignores the number of points")
	}
	e = d
	e.BaseEPP = "other"
	if d.Hash() == e.Hash() {
		t.Error("hash ignores the base config")
	}
}

// TestPlanInferencePerfTrace: an inference-perf config as the trace is
// identified by the content of the config file.
func TestPlanInferencePerfTrace(t *testing.T) {
	const path = "../workload/testdata/inference-perf/codegen.yaml"
	spec := testSpec(t, 10)
	spec.Trace = workload.InferencePerfPrefix + path
	p, err := NewPlan(Sweep{Spec: spec, Dims: mustDims(t, "replicas=1,2")})
	if err != nil {
		t.Fatal(err)
	}
	want, err := fileSHA256(path)
	if err != nil {
		t.Fatal(err)
	}
	if d := p.Doc(); d.Trace != spec.Trace || d.TraceSHA256 != want {
		t.Errorf("trace %q sha256 %q, want %q", d.Trace, d.TraceSHA256, want)
	}
}

// TestTrafficDocGatewayLimit: the gateway's limit is part of what a
// sweep's (and a capacity search's) simulations depend on; without one the
// document is the one of a plan written before the limit existed (no
// key), so earlier sweeps keep their hash.
func TestTrafficDocGatewayLimit(t *testing.T) {
	spec := testSpec(t, 10)
	none, err := TrafficDoc(spec)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(none.Environment)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "gateway") {
		t.Errorf("environment without a limit: %s", b)
	}
	spec.Env.GatewayMaxRequests = 1024
	with, err := TrafficDoc(spec)
	if err != nil {
		t.Fatal(err)
	}
	if with.Environment.GatewayMaxRequests != 1024 || with.Hash() == none.Hash() {
		t.Errorf("limit 1024: environment %+v, hash unchanged %v", with.Environment, with.Hash() == none.Hash())
	}
}
