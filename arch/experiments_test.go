package arch

import (
	"encoding/json"
	"os"
	"testing"
)

// experimentsFile is the measured vLLM runs of ../shared (see DESIGN.md).
const experimentsFile = "../../shared/latency/experiments.json"

// experiment is the part of one measured run these tests read.
type experiment struct {
	ID       string `json:"id"`
	Model    string `json:"model"`
	Hardware string `json:"hardware"`
	TP       int    `json:"tp"`
	Arch     struct {
		Layers  int    `json:"num_hidden_layers"`
		Hidden  int    `json:"hidden_size"`
		Heads   int    `json:"num_attention_heads"`
		KVHeads int    `json:"num_key_value_heads"`
		HeadDim int    `json:"head_dim"`
		Inter   int    `json:"intermediate_size"`
		Vocab   int    `json:"vocab_size"`
		Experts int    `json:"num_local_experts"`
		TopK    int    `json:"num_experts_per_tok"`
		MaxPos  int    `json:"max_position_embeddings"`
		Dtype   string `json:"torch_dtype"`
	} `json:"model_arch"`
}

// loadExperiments reads the runs, skipping the test without ../shared.
func loadExperiments(t *testing.T) []experiment {
	t.Helper()
	data, err := os.ReadFile(experimentsFile)
	if os.IsNotExist(err) {
		t.Skipf("%s not present", experimentsFile)
	}
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Experiments []experiment `json:"experiments"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Experiments
}
