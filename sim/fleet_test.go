package sim

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/replica"
)

func TestParseFleet(t *testing.T) {
	src := `groups:
- name: big
  count: 2
  preset: llama-3.1-8b-h100
  labels: {llm-d.ai/role: decode}
- count: 1
  preset: llama-3.1-8b-a100
  overrides:
    engine: {num_gpu_blocks_override: 1000, max_num_seqs: 8}
`
	f, err := ParseFleet([]byte(src), "fleet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(f) != 3 || f[0].Name != "default/big-0" || f[1].Name != "default/big-1" || f[2].Name != "default/llama-3.1-8b-a100-0" {
		t.Fatalf("names %v %v %v", f[0].Name, f[1].Name, f[2].Name)
	}
	if f[2].Address != "10.0.0.3:8000" || f[1].Labels["llm-d.ai/role"] != "decode" || f[2].Labels != nil {
		t.Fatalf("replica %+v", f[2])
	}
	e, err := f[2].Preset.EngineConfig()
	if err != nil || e.NumGPUBlocks != 1000 || e.MaxNumSeqs != 8 || e.MaxNumBatchedTokens != 2048 {
		t.Fatalf("overrides: %+v %v", e, err)
	}
	if e, _ := f[0].Preset.EngineConfig(); e.MaxNumBatchedTokens != 8192 {
		t.Fatalf("h100 defaults lost: %+v", e)
	}
}

// TestParseFleetModelGPUTP: groups built from a model on a GPU with a
// tensor-parallel degree, without a preset or replacing the preset's.
func TestParseFleetModelGPUTP(t *testing.T) {
	dir := t.TempDir()
	cfg := `{"model_type": "llama", "num_hidden_layers": 4, "hidden_size": 512, "num_attention_heads": 8,
	  "num_key_value_heads": 4, "vocab_size": 1000, "intermediate_size": 1024, "max_position_embeddings": 2048}`
	if err := os.MkdirAll(filepath.Join(dir, "tiny"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tiny", "config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "gpus.yaml"), []byte("gpus:\n- {name: H100-NVL, base: H100, memory_gb: 94, device_memory_mib: 95830}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := `gpu_catalogue: gpus.yaml
groups:
- name: qwen
  count: 2
  model: Qwen/Qwen3-14B
  gpu: A100-SXM4-80GB
  tp: 2
- name: tiny
  count: 1
  model: tiny              # a directory holding config.json, next to the fleet file
  gpu: L40S
  gpu_overrides: {memory_bandwidth_tbps: 1.0}
- name: big
  count: 1
  preset: llama-3.1-8b-h100
  gpu: H100-NVL
  tensor_parallel_size: 2
`
	path := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := LoadFleet(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(f) != 4 {
		t.Fatalf("%d replicas", len(f))
	}
	q := f[0].Preset
	if q.Arch.Name != "Qwen/Qwen3-14B" || q.GPU.Name != "A100-80GB" || q.TensorParallelSize != 2 || q.Name != "qwen3-14b-a100-80gb-tp2" {
		t.Errorf("qwen group: %s %s TP%d %s", q.Arch.Name, q.GPU.Name, q.TensorParallelSize, q.Name)
	}
	if e, err := q.EngineConfig(); err != nil || e.MaxNumBatchedTokens != 2048 || e.MaxModelLen != 40960 {
		t.Errorf("qwen engine %+v %v", e, err)
	}
	tiny := f[2].Preset
	if tiny.Arch.Layers != 4 || tiny.GPU.Name != "L40S" || tiny.GPU.MemoryBandwidthTBps != 1.0 || tiny.TensorParallelSize != 1 {
		t.Errorf("tiny group: %+v on %+v", tiny.Arch, tiny.GPU)
	}
	big := f[3].Preset
	if big.GPU.Name != "H100-NVL" || big.TensorParallelSize != 2 || big.Arch.Name != "meta-llama/Llama-3.1-8B-Instruct" || f[3].Name != "default/big-0" {
		t.Errorf("big group: %s TP%d %s", big.GPU.Name, big.TensorParallelSize, big.Arch.Name)
	}
	// TP2 on 94 GB: more KV per GPU than the 8B preset on one 80 GB H100.
	one, _ := ParseFleet([]byte("groups: [{count: 1, preset: llama-3.1-8b-h100}]"), "f")
	e1, _ := one[0].Preset.EngineConfig()
	e2, _ := big.EngineConfig()
	if e2.NumGPUBlocks <= 2*e1.NumGPUBlocks {
		t.Errorf("TP2 H100-NVL %d blocks, TP1 H100 %d", e2.NumGPUBlocks, e1.NumGPUBlocks)
	}
}

func TestParseFleetErrors(t *testing.T) {
	tests := []struct{ src, want string }{
		{"groups: []", "fleet.yaml: groups: at least one group is required"},
		{"groups:\n- count: 0\n  preset: llama-3.1-8b-h100\n", "fleet.yaml: groups[0]: count: must be in 1..10000, got 0"},
		{"groups:\n- count: 1\n", "fleet.yaml: groups[0]: preset or model: one is required"},
		{"groups:\n- count: 1\n  preset: nope\n", `fleet.yaml: groups[0]: preset: unknown replica preset "nope"`},
		{"groups:\n- count: 1\n  presett: x\n", `fleet.yaml: unknown field "presett"; did you mean preset?`},
		{"groups:\n- count: 1\n  preset: llama-3.1-8b-h100\n  overrides: {engine: {bogus: 1}}\n", "fleet.yaml: groups[0]: overrides:"},
		// The old camelCase keys name their replacements.
		{"groups:\n- count: 1\n  preset: llama-3.1-8b-h100\n  overrides: {engine: {numGpuBlocks: 20000}}\n",
			`unknown field "numGpuBlocks"; did you mean num_gpu_blocks_override?`},
		{"groups:\n- count: 1\n  preset: llama-3.1-8b-h100\n  overrides: {stepModel: linear}\n", `unknown field "stepModel"; did you mean step_model?`},
		{"groups:\n- {count: 1, preset: llama-3.1-8b-h100, name: a}\n- {count: 1, preset: llama-3.1-8b-h100, name: a}\n", `replica name "default/a-0" appears twice`},
		{"groups:\n- {count: 1, model: Qwen/Qwen3-14B}\n", "groups[0]: gpu: required with model"},
		{"groups:\n- {count: 1, model: nope/nope, gpu: H100}\n", `groups[0]: model: unknown model "nope/nope"`},
		{"groups:\n- {count: 1, model: Qwen/Qwen3-14B, gpu: TPU}\n", `groups[0]: gpu: unknown GPU "TPU"`},
		{"groups:\n- {count: 1, model: Qwen/Qwen3-14B, gpu: H100, tp: 3}\n", "tensor_parallel_size 3 does not divide num_attention_heads 40"},
		{"groups:\n- {count: 1, preset: llama-3.1-8b-h100, tp: 2, tensor_parallel_size: 4}\n", "tp 2 and tensor_parallel_size 4 disagree"},
		{"groups:\n- {count: 1, model: meta-llama/Llama-3.1-70B-Instruct, gpu: L40S}\n", "does not fit on 1×L40S"},
		{"groups:\n- {count: 1, preset: llama-3.1-8b-h100, gpu_overrides: {memory_gb: -1, device_memory_mib: 0}}\n", "memory_gb: must be > 0"},
		{"gpu_catalogue: missing.yaml\ngroups:\n- {count: 1, preset: llama-3.1-8b-h100}\n", "fleet.yaml: gpu_catalogue:"},
		// The engine: its type and SGLang's flags, checked as in a preset.
		{"groups:\n- {count: 1, preset: llama-3.1-8b-h100, engine_type: tgi}\n",
			`fleet.yaml: groups[0]: preset llama-3.1-8b-h100: engine_type: unknown engine "tgi" (have vllm, sglang)`},
		{"groups:\n- {count: 1, preset: llama-3.1-8b-h100, engine: sglang}\n", `fleet.yaml: unknown field "engine"; did you mean engine_type?`},
		{"groups:\n- {count: 1, preset: llama-3.1-8b-h100, engine_type: sglang, sglang: {page_size: -1}}\n",
			"fleet.yaml: groups[0]: preset llama-3.1-8b-h100: sglang.page_size: must be at least 1"},
		{"groups:\n- {count: 1, preset: llama-3.1-8b-h100, sglang: {pagesize: 16}}\n", `unknown field "pagesize"; did you mean page_size?`},
		{"groups:\n- {count: 1, preset: llama-3.1-8b-h100, engine_type: sglang, labels: {llm-d.ai/engine-type: vllm}}\n",
			`fleet.yaml: groups[0]: labels: replica default/llama-3.1-8b-h100-0: label llm-d.ai/engine-type "vllm", but the replica's engine is sglang`},
		// A misspelt role would silently leave the pod out of both the
		// prefill and the decode profile.
		{"groups:\n- {count: 1, preset: llama-3.1-8b-h100, labels: {llm-d.ai/role: prefil}}\n",
			`fleet.yaml: groups[0]: labels: llm-d.ai/role "prefil" is not one of llm-d's roles (decode, prefill, encode, prefill-decode, encode-prefill, encode-prefill-decode, both); did you mean "prefill"?`},
	}
	for _, tc := range tests {
		_, err := ParseFleet([]byte(tc.src), "fleet.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.src, err, tc.want)
		}
	}
}

func FuzzParseFleet(f *testing.F) {
	f.Add([]byte("groups:\n- count: 2\n  preset: llama-3.1-8b-h100\n"))
	f.Add([]byte("groups: [{count: 1, preset: x, overrides: {engine: {num_gpu_blocks_override: -1}}}]"))
	f.Add([]byte("groups: [{count: 1, model: Qwen/Qwen3-14B, gpu: A100, tp: 2, gpu_overrides: {memory_gb: 40}}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fleet, err := ParseFleet(data, "f")
		if err == nil && len(fleet) == 0 {
			t.Fatal("no error and no replicas")
		}
	})
}

// TestExpandDataParallel: a replica with data_parallel_size 3 becomes
// three rank endpoints on consecutive ports with its labels; others stay.
func TestExpandDataParallel(t *testing.T) {
	p, err := replica.LookupPreset("llama-3.1-8b-h100")
	if err != nil {
		t.Fatal(err)
	}
	dp := p
	dp.Engine.DataParallelSize = 3
	fleet := []ReplicaSpec{
		{Name: "default/a", Address: "10.0.0.1:8000", Preset: p},
		{Name: "default/b", Address: "10.0.0.2:8000", Labels: map[string]string{"llm-d.ai/role": "decode"}, Preset: dp},
	}
	out, err := ExpandDataParallel(fleet)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ name, addr string }{{"default/a", "10.0.0.1:8000"}, {"default/b-rank-0", "10.0.0.2:8000"},
		{"default/b-rank-1", "10.0.0.2:8001"}, {"default/b-rank-2", "10.0.0.2:8002"}}
	if len(out) != len(want) {
		t.Fatalf("%d replicas", len(out))
	}
	for i, w := range want {
		r := out[i]
		if r.Name != w.name || r.Address != w.addr || r.Preset.Engine.DataParallelSize > 1 {
			t.Errorf("replica %d: %s %s dp %d, want %s %s", i, r.Name, r.Address, r.Preset.Engine.DataParallelSize, w.name, w.addr)
		}
		if i > 0 && r.Labels["llm-d.ai/role"] != "decode" {
			t.Errorf("replica %d labels %v", i, r.Labels)
		}
	}
	out[1].Labels["x"] = "y"
	if out[2].Labels["x"] == "y" || fleet[1].Labels["x"] == "y" {
		t.Error("ranks share a label map")
	}
	bad := dp
	bad.Engine.DataParallelSize = 10
	if _, err := ExpandDataParallel([]ReplicaSpec{{Name: "x", Address: "10.0.0.1:65530", Preset: bad}}); err == nil {
		t.Error("ranks past port 65535 accepted")
	}
}

// TestParseFleetEngine: a group's engine_type and sglang block reach its
// replicas' presets (the block merged into the preset's), and its SGLang
// replicas carry llm-d.ai/engine-type: sglang beside their own labels; a
// vLLM group stays unlabelled.
func TestParseFleetEngine(t *testing.T) {
	src := `groups:
- {name: v, count: 1, preset: llama-3.1-8b-h100}
- name: s
  count: 2
  preset: llama-3.1-8b-h100
  engine_type: sglang
  sglang: {page_size: 16, schedule_policy: lpm}
  overrides: {sglang: {mem_fraction_static: 0.9}}
  labels: {llm-d.ai/role: decode}
`
	fleet, err := ParseFleet([]byte(src), "fleet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(fleet) != 3 || fleet[0].Preset.EngineTypeOf() != replica.EngineVLLM || fleet[0].Labels != nil || fleet[0].Preset.SGLang != nil {
		t.Fatalf("vLLM group: %+v", fleet[0])
	}
	want := replica.SGLangFlags{PageSize: 16, SchedulePolicy: "lpm", MemFractionStatic: 0.9}
	for _, r := range fleet[1:] {
		if r.Preset.EngineType != replica.EngineSGLang || r.Preset.SGLang == nil || *r.Preset.SGLang != want {
			t.Errorf("%s: engine %q flags %+v", r.Name, r.Preset.EngineType, r.Preset.SGLang)
		}
		if wantL := map[string]string{RoleLabel: "decode", EngineTypeLabel: "sglang"}; !reflect.DeepEqual(r.Labels, wantL) {
			t.Errorf("%s: labels %v, want %v", r.Name, r.Labels, wantL)
		}
	}
}
