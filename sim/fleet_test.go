package sim

import (
	"strings"
	"testing"
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

func TestParseFleetErrors(t *testing.T) {
	tests := []struct{ src, want string }{
		{"groups: []", "fleet.yaml: groups: at least one group is required"},
		{"groups:\n- count: 0\n  preset: llama-3.1-8b-h100\n", "fleet.yaml: groups[0]: count: must be in 1..10000, got 0"},
		{"groups:\n- count: 1\n", "fleet.yaml: groups[0]: preset: required"},
		{"groups:\n- count: 1\n  preset: nope\n", `fleet.yaml: groups[0]: preset: unknown replica preset "nope"`},
		{"groups:\n- count: 1\n  presett: x\n", `fleet.yaml: json: unknown field "presett"`},
		{"groups:\n- count: 1\n  preset: llama-3.1-8b-h100\n  overrides: {engine: {bogus: 1}}\n", "fleet.yaml: groups[0]: overrides:"},
		{"groups:\n- count: 1\n  preset: llama-3.1-8b-h100\n  overrides: {engine: {numGpuBlocks: 20000}}\n",
			`unknown field "numGpuBlocks"; did you mean num_gpu_blocks_override?`},
		{"groups:\n- {count: 1, preset: llama-3.1-8b-h100, name: a}\n- {count: 1, preset: llama-3.1-8b-h100, name: a}\n", `replica name "default/a-0" appears twice`},
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
	f.Fuzz(func(t *testing.T, data []byte) {
		fleet, err := ParseFleet(data, "f")
		if err == nil && len(fleet) == 0 {
			t.Fatal("no error and no replicas")
		}
	})
}
