package scenario

import (
	"path/filepath"
	"testing"

	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/sim"
	"github.com/eppsim/eppsim/workload"
)

func testSpec(t *testing.T, n int) *Spec {
	t.Helper()
	p, err := replica.LookupPreset("llama-3.1-8b-h100")
	if err != nil {
		t.Fatal(err)
	}
	return &Spec{Version: "test", Trace: workload.DefaultWorkload, Workload: workload.Options{Seed: 3},
		Fleet: sim.UniformFleet(2, p), Env: sim.Options{Seed: 3, MaxRequests: n}}
}

func TestRunBaselinesAndInline(t *testing.T) {
	spec := testSpec(t, 50)
	// Inline YAML equal to the least-queue baseline gives the same result.
	inline := EPP{Name: "inline", YAML: []byte(baselines["least-queue"])}
	a, err := Run(spec, inline, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Run(spec, ForSource("least-queue"), Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Cache.TrueHitRatio != b.Cache.TrueHitRatio || a.Latency != b.Latency {
		t.Fatalf("inline and baseline differ: %+v vs %+v", a.Cache, b.Cache)
	}
	// Round-robin spreads 50 requests 25/25 over two replicas.
	rr, err := Run(spec, ForSource("round-robin"), Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	if got := rr.Routing.PerReplica; got["default/vllm-0"] != 25 || got["default/vllm-1"] != 25 {
		t.Fatalf("round-robin routing %v", got)
	}
	// The oracle runs the precise producer with zero event lag.
	o, err := Run(spec, ForSource("oracle"), Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	if o.Prediction["precise-prefix-cache-producer"] == nil || o.Config.Environment["kv_event_lag"] != "0s" {
		t.Fatalf("oracle: prediction %v, environment %v", o.Prediction, o.Config.Environment)
	}
	if o.Config.Workload.Injected != 50 || len(o.Config.Fleet) != 2 || o.Config.Version != "test" {
		t.Fatalf("config %+v", o.Config)
	}
}

func TestRunInputErrors(t *testing.T) {
	spec := testSpec(t, 5)
	for _, e := range []EPP{
		ForSource(filepath.Join(t.TempDir(), "missing.yaml")),
		{Name: "bad", YAML: []byte("apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\nplugins: [{type: nope}]\n")},
	} {
		if _, err := Run(spec, e, Hooks{}); !IsInputError(err) {
			t.Errorf("%s: error %v is not an input error", e.Name, err)
		}
	}
	bad := *spec
	bad.Trace = filepath.Join(t.TempDir(), "missing.jsonl")
	if _, err := Run(&bad, ForSource("default"), Hooks{}); !IsInputError(err) {
		t.Errorf("missing trace: %v", err)
	}
}

func TestForSource(t *testing.T) {
	for src, want := range map[string]string{"default": "default", "oracle": "oracle", "/x/y/my-config.yaml": "my-config"} {
		if got := ForSource(src).Name; got != want {
			t.Errorf("ForSource(%q).Name = %q, want %q", src, got, want)
		}
	}
	if !IsBuiltin("random") || IsBuiltin("x.yaml") {
		t.Error("IsBuiltin")
	}
}
