package sim

import (
	"testing"

	"github.com/eppsim/eppsim/arch"
	"github.com/eppsim/eppsim/replica"
)

// TestKVEventsDisableHybridKV: vLLM turns its hybrid KV cache manager off
// when KV events are on (vllm-engine.md A.7). gpt-oss-20b's blocks then
// hold all 24 layers' pages instead of a group of 12, so the same memory
// holds half as many (rounded down), and the KV events' engine gets those.
func TestKVEventsDisableHybridKV(t *testing.T) {
	m, err := arch.ResolveModel("gpt-oss-20b.json", "../arch/testdata")
	if err != nil {
		t.Fatal(err)
	}
	g, err := arch.DefaultGPUs().Lookup("H100")
	if err != nil {
		t.Fatal(err)
	}
	p, err := replica.NewPreset(m, g, 1)
	if err != nil {
		t.Fatal(err)
	}
	capacity, err := p.KVCapacity()
	if err != nil {
		t.Fatal(err)
	}
	spec := ReplicaSpec{Name: "default/r0", Address: "10.0.0.1:8000", Preset: p}
	blocks := func(kvEvents bool) int {
		_, cfg, err := newVLLMEngine(spec, engineEnv{seed: 1, kvEvents: kvEvents})
		if err != nil {
			t.Fatal(err)
		}
		return cfg.NumGPUBlocks
	}
	hybrid, full := blocks(false), blocks(true)
	if hybrid != capacity.Blocks {
		t.Errorf("without KV events %d blocks, want the hybrid count %d", hybrid, capacity.Blocks)
	}
	if want := int(capacity.Available / float64(2*capacity.BytesPerBlock)); full != want || full >= hybrid {
		t.Errorf("with KV events %d blocks, want %d (blocks of all 24 layers)", full, want)
	}
}
