package sim

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/internal/memo"
	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/workload"
)

// TestNewEngineVLLM: the vLLM branch builds a replica.Engine with the
// fleet's seed and the KV-event switch, which has the kvMover part, and
// returns its configuration (the preset's 16-token blocks; 100 blocks
// from the override).
func TestNewEngineVLLM(t *testing.T) {
	spec := testFleet(t, 1, 100)[0]
	for _, engineType := range []string{"", replica.EngineVLLM} {
		spec.Preset.EngineType = engineType
		eng, cfg, err := newEngine(spec, engineEnv{seed: 7, kvEvents: true})
		if err != nil {
			t.Fatalf("%q: %v", engineType, err)
		}
		v, ok := eng.(*replica.Engine)
		if !ok {
			t.Fatalf("%q: engine is %T, want *replica.Engine", engineType, eng)
		}
		if _, ok := eng.(kvMover); !ok {
			t.Errorf("%q: the vLLM engine has no kvMover", engineType)
		}
		if cfg == nil || cfg.BlockSize != 16 || cfg.HashSeed != 7 || !cfg.KVEvents || cfg.NumGPUBlocks != 100 || cfg.KVTransfer != nil {
			t.Errorf("%q: config %+v", engineType, cfg)
		}
		if got := v.Config(); cfg != nil && !reflect.DeepEqual(got, *cfg) {
			t.Errorf("%q: returned config %+v, engine's %+v", engineType, *cfg, got)
		}
	}
	// With P/D the engine gets the NIXL read's cost.
	_, cfg, err := newEngine(spec, engineEnv{seed: 7, disagg: true, pd: DefaultPD()})
	if err != nil || cfg.KVTransfer == nil || cfg.KVTransfer.BandwidthGBps != DefaultPD().TransferGBps {
		t.Errorf("P/D: %v, %+v", err, cfg)
	}
}

// TestNewEngineRefusals: an SGLang replica in a P/D fleet or with a CPU
// tier, an SGLang replica whose pool gets no memory, and an engine type no
// one knows are refused as fleet errors naming the replica.
func TestNewEngineRefusals(t *testing.T) {
	base := testFleet(t, 1, 100)[0]
	base.Name = "default/sg-0"
	sglang := base
	sglang.Preset.EngineType = replica.EngineSGLang
	offload := sglang
	offload.Preset.Engine.KVOffloadingSize = 4
	starved := sglang
	starved.Preset.SGLang = &replica.SGLangFlags{MemFractionStatic: 0.1} // 8 GiB: less than the 8B model's 15 GiB of weights
	unknown := base
	unknown.Preset.EngineType = "tgi"
	for _, c := range []struct {
		name string
		spec ReplicaSpec
		env  engineEnv
		want string
	}{
		{"sglang with P/D", sglang, engineEnv{disagg: true, pd: DefaultPD()}, "replica default/sg-0: engine sglang: P/D disaggregation is modelled for vLLM only"},
		{"sglang with a CPU tier", offload, engineEnv{}, "replica default/sg-0: engine sglang: kv_offloading_size is vLLM's CPU KV tier"},
		{"sglang without memory", starved, engineEnv{}, "replica default/sg-0: sglang config: preset llama-3.1-8b-h100: not enough memory for the KV pool"},
		{"unknown engine", unknown, engineEnv{}, `replica default/sg-0: engine_type: unknown engine "tgi" (have vllm, sglang)`},
	} {
		eng, cfg, err := newEngine(c.spec, c.env)
		var fe *FleetError
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || !errors.As(err, &fe) || eng != nil || cfg != nil {
			t.Errorf("%s: got %v (%T), want a FleetError starting %q", c.name, err, err, c.want)
		}
	}
}

// TestRunMixedFleet: a fleet of one vLLM and one SGLang replica behind
// round-robin. The same 1,024-token prompt four times: requests 0 and 2
// go to the vLLM replica, which reuses ⌊1023/16⌋·16 = 1,008 tokens of the
// repeat (vllm-engine.md A.2); 1 and 3 to the SGLang replica, whose radix
// cache reuses N − 1 = 1,023 (sglang-engine.md A.3, D2). The oracle of
// request 1 sees request 0 on the vLLM replica only (1,008); from request
// 2 on both replicas hold the prompt, the SGLang one's 1,023 the larger;
// the infinite-cache bound follows the finer engine: 1,023 from request 1
// on. The SGLang endpoint carries llm-d.ai/engine-type.
func TestRunMixedFleet(t *testing.T) {
	fleet := testFleet(t, 2, 2000)
	fleet[1].Preset.EngineType = replica.EngineSGLang
	p := tokens(0, 1024)
	var reqs []*workload.Request
	for i := range 4 {
		reqs = append(reqs, req(int64(i), int64(i)*5*second, p, 5))
	}
	recs, res := run(t, reqs, fleet, Options{Seed: 1})
	if res.Completed != 4 || len(recs) != 4 {
		t.Fatalf("result %+v", res)
	}
	want := []struct{ replica, cached, oracle, bound int }{{0, 0, 0, 0}, {1, 0, 1008, 1023}, {0, 1008, 1023, 1023}, {1, 1023, 1023, 1023}}
	for i, w := range want {
		r := recs[i]
		if r.Replica != w.replica || r.CachedTokens != w.cached || r.OracleCachedTokens != w.oracle || r.InfiniteCachedTokens != w.bound {
			t.Errorf("request %d: replica %d cached %d oracle %d bound %d, want %+v", i, r.Replica, r.CachedTokens, r.OracleCachedTokens, r.InfiniteCachedTokens, w)
		}
	}
	if l, err := EngineLabels(fleet[1]); err != nil || l[EngineTypeLabel] != replica.EngineSGLang {
		t.Errorf("SGLang endpoint labels %v (%v)", l, err)
	}
}

// TestSGLangGauges: what a scrape reads of an SGLang replica is what the
// EPP extracts from an SGLang pod (sglang-engine.md A.12): no
// cache_config_info (block size and block count 0), token_usage rounded
// to two decimals.
func TestSGLangGauges(t *testing.T) {
	spec := testFleet(t, 1, 2000)[0]
	spec.Preset.EngineType = replica.EngineSGLang
	spec.Preset.SGLang = &replica.SGLangFlags{MaxTotalTokens: 3000}
	eng, cfg, err := newEngine(spec, engineEnv{seed: 1})
	if err != nil || cfg != nil {
		t.Fatalf("newEngine: %v (vLLM config %v)", err, cfg)
	}
	rr := &replica.Request{ID: 1, Prompt: tokens(0, 1000), OutputLen: 3}
	if err := eng.Add(rr, 0); err != nil {
		t.Fatal(err)
	}
	d, ok := eng.BeginStep(0)
	if !ok {
		t.Fatal("nothing scheduled")
	}
	eng.EndStep(d)
	g := eng.Gauges()
	// After the prefill batch the request holds its 1,000 prompt tokens
	// (inserted and locked) of the pool's 3,000, and no decode slot yet:
	// 1000/3000 = 0.333… → 0.33.
	if g.BlockSize != 0 || g.NumGPUBlocks != 0 || g.KVCacheUsagePerc != 0.33 || g.NumRequestsWaiting != 0 {
		t.Errorf("gauges %+v, want no cache_config_info and token usage 0.33", g)
	}
}

// TestChainBlockSize: the prompt chain takes the first vLLM replica's
// block size, whatever engines come before it; with no vLLM replica, vLLM's
// default of 16 tokens.
func TestChainBlockSize(t *testing.T) {
	vllm32 := testFleet(t, 1, 100)[0]
	vllm32.Preset.Engine.BlockSize = 32
	sg := testFleet(t, 1, 100)[0]
	sg.Preset.EngineType = replica.EngineSGLang
	sg.Preset.Engine.BlockSize = 64 // a vLLM argument: not the SGLang replica's
	for _, c := range []struct {
		name  string
		fleet []ReplicaSpec
		want  int
	}{
		{"vLLM only", []ReplicaSpec{vllm32}, 32},
		{"SGLang first", []ReplicaSpec{sg, vllm32}, 32},
		{"SGLang only", []ReplicaSpec{sg, sg}, DefaultChainBlockSize},
	} {
		if got, err := chainBlockSize(c.fleet); err != nil || got != c.want {
			t.Errorf("%s: %d, %v; want %d", c.name, got, err, c.want)
		}
	}
	if DefaultChainBlockSize != 16 {
		t.Errorf("DefaultChainBlockSize %d, want vLLM's 16", DefaultChainBlockSize)
	}
	// NewPreparer memoizes the same chain.
	prep, err := NewPreparer([]ReplicaSpec{sg, vllm32}, 3)
	if err != nil {
		t.Fatal(err)
	}
	wr := &workload.Request{PromptTokens: make([]uint32, 70), PromptLen: 70, Memo: &memo.Memo{}}
	prep(wr)
	if !wr.Memo.Has(chainKey{32, 3}) || wr.Memo.Len() != 1 {
		t.Errorf("the preparer did not memoize the 32-token chain of seed 3")
	}
}

// TestEngineLabels: an SGLang replica's endpoint carries
// llm-d.ai/engine-type: sglang (its spec's map untouched); a vLLM one
// stays unlabelled; a label naming another engine is refused.
func TestEngineLabels(t *testing.T) {
	spec := testFleet(t, 1, 100)[0]
	spec.Labels = map[string]string{RoleLabel: "decode"}
	if l, err := EngineLabels(spec); err != nil || !reflect.DeepEqual(l, map[string]string{RoleLabel: "decode"}) {
		t.Errorf("vllm: %v, %v", l, err)
	}
	spec.Preset.EngineType = replica.EngineSGLang
	l, err := EngineLabels(spec)
	if want := map[string]string{RoleLabel: "decode", EngineTypeLabel: "sglang"}; err != nil || !reflect.DeepEqual(l, want) {
		t.Errorf("sglang: %v, %v; want %v", l, err, want)
	}
	if len(spec.Labels) != 1 {
		t.Errorf("the spec's labels changed: %v", spec.Labels)
	}
	spec.Labels = nil
	if l, err := EngineLabels(spec); err != nil || !reflect.DeepEqual(l, map[string]string{EngineTypeLabel: "sglang"}) {
		t.Errorf("sglang without labels: %v, %v", l, err)
	}
	spec.Labels = map[string]string{EngineTypeLabel: "vllm"}
	if _, err := EngineLabels(spec); err == nil || err.Error() != `replica default/r0: label llm-d.ai/engine-type "vllm", but the replica's engine is sglang` {
		t.Errorf("contradicting label: %v", err)
	}
	fleet := testFleet(t, 2, 100)
	fleet[1].Preset.EngineType = replica.EngineSGLang
	if err := LabelEngines(fleet); err != nil || fleet[0].Labels != nil || fleet[1].Labels[EngineTypeLabel] != "sglang" {
		t.Errorf("LabelEngines: %v, %v, %v", err, fleet[0].Labels, fleet[1].Labels)
	}
}

// TestChainSize: the fleet's chain takes the first vLLM replica's block
// size; another engine's replicas, wherever they are, neither set nor
// break it; a second vLLM size is refused naming the replica.
func TestChainSize(t *testing.T) {
	var c chainSize
	if c.size() != 16 {
		t.Errorf("empty: %d, want 16", c.size())
	}
	v16, v32 := &replica.Config{BlockSize: 16}, &replica.Config{BlockSize: 32}
	for _, step := range []struct {
		name string
		cfg  *replica.Config
	}{{"sg-0", nil}, {"v-0", v32}, {"sg-1", nil}, {"v-1", v32}} {
		if err := c.add(step.name, step.cfg); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
	}
	if c.size() != 32 {
		t.Errorf("size %d, want 32", c.size())
	}
	if err := c.add("v-2", v16); err == nil || err.Error() != "replica v-2: block size 16 differs from the fleet's 32" {
		t.Errorf("mismatch: %v", err)
	}
	// Run refuses it the same way.
	fleet := testFleet(t, 2, 100)
	fleet[1].Preset.Engine.BlockSize = 32
	if _, err := Run(&sliceSource{}, testRouter(), fleet, Options{Seed: 1}); err == nil || err.Error() != "replica default/r1: block size 32 differs from the fleet's 16" {
		t.Errorf("Run: %v", err)
	}
}

// TestSGLangRefusesDataParallel: vLLM's data_parallel_size on an SGLang
// replica is refused, naming the replica (SGLang's DP is not modelled).
func TestSGLangRefusesDataParallel(t *testing.T) {
	fleet := testFleet(t, 1, 100)
	fleet[0].Preset.EngineType = replica.EngineSGLang
	fleet[0].Preset.Engine.DataParallelSize = 2
	_, err := ExpandDataParallel(fleet)
	if err == nil || !strings.HasPrefix(err.Error(), "replica default/r0: engine sglang: data_parallel_size 2") {
		t.Errorf("got %v", err)
	}
}
