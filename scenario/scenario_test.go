package scenario

import (
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/eppsim/eppsim/epp/picker"
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

// TestVLLMDPLBBaseline runs vLLM's data-parallel load balancer in front of
// one replica's two data-parallel ranks: every request reaches a rank, the
// two share them, and the balancer's parameters reach its picker.
func TestVLLMDPLBBaseline(t *testing.T) {
	spec := testSpec(t, 60)
	p := spec.Fleet[0].Preset
	p.Engine.DataParallelSize = 2
	fleet, err := sim.ExpandDataParallel(sim.UniformFleet(1, p))
	if err != nil {
		t.Fatal(err)
	}
	spec.Fleet = fleet
	for _, e := range []EPP{ForSource("vllm-dp-lb"), {Name: "no-counts", Source: "vllm-dp-lb", DPLB: &picker.DPLBOptions{NoEngineCounts: true}}} {
		l, err := e.Load(1)
		if err != nil {
			t.Fatal(err)
		}
		r, err := l.router()
		if err != nil {
			t.Fatal(err)
		}
		lb, ok := r.Profiles[0].Picker.(*picker.VLLMDPLB)
		if !ok || lb.Options().NoEngineCounts != (e.DPLB != nil) {
			t.Fatalf("%s: picker %T %+v", e.Name, r.Profiles[0].Picker, lb)
		}
		s, err := Run(spec, e, Hooks{})
		if err != nil {
			t.Fatal(err)
		}
		a, b := s.Routing.PerReplica["default/vllm-0-rank-0"], s.Routing.PerReplica["default/vllm-0-rank-1"]
		if a+b != 60 || a < 20 || b < 20 {
			t.Errorf("%s: ranks got %d and %d of 60 requests (%v)", e.Name, a, b, s.Routing.PerReplica)
		}
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

// TestRunRejectsBadBodiesEveryBaseline: the EPP's request parsers run in
// every configuration (spec §2.1 step 0), so the default config and every
// baseline reject the same bodies, with the same reasons, and serve the
// rest.
func TestRunRejectsBadBodiesEveryBaseline(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "bad.jsonl")
	lines := `{"model":"m","messages":[{"role":"user","content":"hello"}],"x_arrival_ms":0}
{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"x","tool_calls":"x"}],"x_arrival_ms":10}
{"model":"m","prompt":"a prompt","max_tokens":5,"x_arrival_ms":20}
{"model":"m","messages":[{"role":"user","content":"hey"}],"stream":"yes","temperature":1E400,"x_arrival_ms":30}
{"model":"m","messages":[{"role":"user","content":"hello again"}],"stream":"yes","x_arrival_ms":40}
`
	if err := os.WriteFile(trace, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := testSpec(t, 0)
	spec.Trace = trace
	want := map[string]int{
		"bad request (HTTP 400 from openai-parser): chat-completions request: messages[1].tool_calls: got a string, want an array":    1,
		"bad request (HTTP 400 from openai-parser): chat-completions request: temperature: number 1E400 is outside the float64 range": 1,
	}
	for _, src := range []string{"default", "random", "least-queue", "round-robin", "oracle"} {
		s, err := Run(spec, ForSource(src), Hooks{})
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if s.Requests.Total != 5 || s.Requests.Rejected != 2 || s.Requests.Complete != 3 || !maps.Equal(s.Requests.Reasons, want) {
			t.Errorf("%s: requests %+v", src, s.Requests)
		}
	}
}
