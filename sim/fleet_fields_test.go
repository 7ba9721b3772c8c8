package sim

import (
	"errors"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/replica"
)

// TestParseFleetIntegerFields: an integer field of a fleet file that is
// given must be a value vLLM takes: 0 is refused like a negative number
// (it used to read as "the default": max_num_seqs 0 ran as 256), naming
// the file, the group and the field. The zeros vLLM itself means stay.
func TestParseFleetIntegerFields(t *testing.T) {
	group := func(extra string) string {
		return "groups:\n- {count: 2, preset: llama-3.1-8b-h100" + extra + "}\n"
	}
	engine := func(kv string) string { return group(", overrides: {engine: {" + kv + "}}") }
	for _, tc := range []struct{ src, want string }{
		{group(", tp: 0"), "fleet.yaml: groups[0]: tp: must be at least 1, got 0"},
		{group(", tp: -2"), "fleet.yaml: groups[0]: tp: must be at least 1, got -2"},
		{group(", tensor_parallel_size: 0"), "fleet.yaml: groups[0]: tensor_parallel_size: must be at least 1, got 0"},
		{"groups:\n- {count: 0, preset: llama-3.1-8b-h100}\n", "fleet.yaml: groups[0]: count: must be in 1..10000, got 0"},
		{"groups:\n- {count: -3, preset: llama-3.1-8b-h100}\n", "fleet.yaml: groups[0]: count: must be in 1..10000, got -3"},
		{"groups:\n- {count: 6000, preset: llama-3.1-8b-h100}\n- {count: 5000, preset: llama-3.1-8b-h100, name: b}\n",
			"fleet.yaml: groups[1]: count: must be in 1..4000, got 5000"},
		{engine("max_num_seqs: 0"), "fleet.yaml: groups[0]: overrides: preset llama-3.1-8b-h100: engine.max_num_seqs: 0 is not a value vLLM accepts"},
		{engine("max_num_seqs: -7"), "fleet.yaml: groups[0]: overrides: preset llama-3.1-8b-h100: engine: max_num_seqs must be positive, got -7"},
		{engine("max_num_batched_tokens: 0"), "engine.max_num_batched_tokens: 0"},
		{engine("block_size: 0"), "engine.block_size: 0"},
		{engine("max_model_len: 0"), "engine.max_model_len: 0"},
		{engine("data_parallel_size: 0"), "engine.data_parallel_size: 0"},
		{engine("gpu_memory_utilization: 0"), "engine.gpu_memory_utilization: 0"},
		{engine("num_gpu_blocks_override: 0"), "engine.num_gpu_blocks_override: 0"},
		{engine("num_gpu_blocks_override: 1"), "num_gpu_blocks_override must be at least 2"},
		{engine("offload_pcie_gb_per_s: 0"), "engine.offload_pcie_gb_per_s: 0"},
	} {
		_, err := ParseFleet([]byte(tc.src), "fleet.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.src, err, tc.want)
		}
	}
	for _, src := range []string{
		engine("long_prefill_token_threshold: 0, kv_offloading_size: 0, offload_job_overhead_us: 0"),
		group(", tp: 1"),
		engine("max_num_seqs: 64, num_gpu_blocks_override: 5000"),
	} {
		if _, err := ParseFleet([]byte(src), "fleet.yaml"); err != nil {
			t.Errorf("%q: %v", src, err)
		}
	}
}

// TestCheckFleetMemory: the estimate is the replicas' MemoryBytes summed,
// a fleet past the bound is a *MemoryError naming the estimate, and
// RunContext refuses it before building an engine (issue #25 D8:
// --replicas 10000 died of OOM).
func TestCheckFleetMemory(t *testing.T) {
	p, err := replica.LookupPreset("llama-3.1-8b-h100")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := p.EngineConfig()
	if err != nil {
		t.Fatal(err)
	}
	fleet := UniformFleet(MaxReplicas, p)
	total, largest, blocks, err := FleetMemory(fleet)
	if err != nil || total != int64(MaxReplicas)*cfg.MemoryBytes() || largest != cfg.MemoryBytes() || blocks != cfg.NumGPUBlocks {
		t.Fatalf("FleetMemory = %d, %d, %d, %v", total, largest, blocks, err)
	}
	err = CheckFleetMemory(fleet, 0)
	var me *MemoryError
	if !errors.As(err, &me) || me.Estimate != total || me.Limit != DefaultMaxFleetBytes ||
		!strings.Contains(err.Error(), "the fleet needs an estimated 18.5 GiB of memory (10000 replicas; up to 1.9 MiB each for the pool and prefix cache of its 25402 KV blocks), more than the bound of 8.0 GiB") {
		t.Fatalf("CheckFleetMemory: %v", err)
	}
	if err := CheckFleetMemory(fleet, -1); err != nil {
		t.Errorf("no bound: %v", err)
	}
	if err := CheckFleetMemory(fleet[:4000], 0); err != nil {
		t.Errorf("4000 replicas: %v", err)
	}
	_, err = RunContext(t.Context(), nil, nil, fleet, Options{})
	var fe *FleetError
	if !errors.As(err, &fe) || !errors.As(err, &me) {
		t.Fatalf("RunContext: %v", err)
	}
}
