package arch

import (
	"strings"
	"testing"
)

// TestApplyPrecision: a run record's precision label sets the weight
// format of a config without quantization_config; the widths are the
// formats' own (MXFP4 4 + 8/32 bits on the routed experts only, NVFP4
// 4 + 8/16, INT4 4 + 16/128), and a config that has a format keeps it.
func TestApplyPrecision(t *testing.T) {
	const dense = `{"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
	  "num_key_value_heads": 2, "intermediate_size": 256, "vocab_size": 128, "torch_dtype": "bfloat16"}`
	tests := []struct {
		label, method string
		want          Quantization
		expertWidth   float64 // RoutedExpertWidth, bytes
		attnWidth     float64
	}{
		{"FP16", "", Quantization{}, 2, 2},
		{"bf16", "", Quantization{}, 2, 2},
		{"FP8", "compressed-tensors", Quantization{Method: "compressed-tensors", WeightBits: 8, Float: true}, 1, 1},
		{"fp8-dynamic", "", Quantization{Method: "fp8dynamic", WeightBits: 8, Float: true}, 1, 1},
		{"BF16", "mxfp4", Quantization{Method: "mxfp4", WeightBits: 4, Float: true, ScaleBits: 0.25, ExpertsOnly: true, KeepAttention: true}, 4.25 / 8, 2},
		{"MXFP4", "", Quantization{Method: "mxfp4", WeightBits: 4, Float: true, ScaleBits: 0.25, ExpertsOnly: true, KeepAttention: true}, 4.25 / 8, 2},
		{"NVFP4", "modelopt", Quantization{Method: "modelopt", WeightBits: 4, Float: true, ScaleBits: 0.5}, 4.5 / 8, 4.5 / 8},
		{"W8A8", "", Quantization{Method: "w8a8", WeightBits: 8}, 1, 1},
		{"INT4", "awq", Quantization{Method: "awq", WeightBits: 4, ScaleBits: 0.125}, 4.125 / 8, 4.125 / 8},
		{"FP8 (dynamic)", "", Quantization{Method: "fp8dynamic", WeightBits: 8, Float: true}, 1, 1},
		{"W8A8-FP8", "", Quantization{Method: "w8a8fp8", WeightBits: 8, Float: true}, 1, 1},
		{"INT4-AWQ", "", Quantization{Method: "int4awq", WeightBits: 4, ScaleBits: 0.125}, 4.125 / 8, 4.125 / 8},
		{"W8A16", "", Quantization{Method: "w8a16", WeightBits: 8}, 1, 1},
	}
	for _, tc := range tests {
		m, err := ParseModel([]byte(dense), "m.json")
		if err != nil {
			t.Fatal(err)
		}
		if err := m.ApplyPrecision(tc.label, tc.method); err != nil {
			t.Fatalf("%s/%s: %v", tc.label, tc.method, err)
		}
		q := m.Quant
		q.Ignore = nil
		if q.Method != tc.want.Method || q.WeightBits != tc.want.WeightBits || q.Float != tc.want.Float ||
			q.ScaleBits != tc.want.ScaleBits || q.ExpertsOnly != tc.want.ExpertsOnly || q.KeepAttention != tc.want.KeepAttention {
			t.Errorf("%s/%s: %+v, want %+v", tc.label, tc.method, q, tc.want)
		}
		if got := m.RoutedExpertWidth(); got != tc.expertWidth {
			t.Errorf("%s/%s: expert width %g, want %g", tc.label, tc.method, got, tc.expertWidth)
		}
		if got := m.attentionWidth(); got != tc.attnWidth {
			t.Errorf("%s/%s: attention width %g, want %g", tc.label, tc.method, got, tc.attnWidth)
		}
	}
	m, _ := ParseModel([]byte(dense), "m.json")
	if err := m.ApplyPrecision("FP7", ""); err == nil || !strings.Contains(err.Error(), `unknown "FP7"`) {
		t.Errorf("FP7: %v", err)
	}
	// A config with a quantization_config keeps its own format.
	g := mustModel(t, "gpt-oss-20b.json")
	before := g.Quant
	if err := g.ApplyPrecision("FP8", ""); err != nil || g.Quant.WeightBits != before.WeightBits || !g.Quant.ExpertsOnly {
		t.Errorf("gpt-oss after FP8: %+v, %v", g.Quant, err)
	}
}
