package latency

import (
	"strings"
	"testing"
)

// TestModelArchPrecision: a run whose model is known only by model_arch,
// without quantization_config, is stored as its precision says. An FP8
// run of a dense model holds its linear layers in one byte a weight, so
// its weights per GPU are those of the FP16 run less one byte for each
// linear weight; the method recorded as model_arch.quantization names it.
// (The model_arch here has Llama-3.1-8B's shapes, so the embedded config
// of that model has the same linear weights.)
func TestModelArchPrecision(t *testing.T) {
	const run = `{"experiments": [{"id": "r", "model": "someorg/unseen-8b", "precision": %P%, "hardware": "H100", "tp": 1,
	  "model_arch": {"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
	    "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256, "torch_dtype": "bfloat16", "quantization": %Q%},
	  "engine": {"total_gpu_kv_blocks": 20000},
	  "workload": {"shared_prefix_requested": {"system_prompt_len": 10, "question_len": 40, "output_len": 20},
	   "stages": [{"rate_rps": 1, "duration_s": 5}]}}]}`
	model := func(precision, method string) (int64, int64, string, error) {
		doc := strings.ReplaceAll(strings.ReplaceAll(run, "%P%", precision), "%Q%", method)
		f, err := Parse([]byte(doc), "runs.json")
		if err != nil {
			return 0, 0, "", err
		}
		m, err := f.Experiments[0].ArchModel()
		if err != nil {
			return 0, 0, "", err
		}
		return m.WeightBytes(1), m.LinearParamsTotal(), m.Quant.Method, nil
	}
	fp16, lin, _, err := model(`"FP16"`, "null")
	if err != nil {
		t.Fatal(err)
	}
	fp8, _, method, err := model(`"FP8"`, `"compressed-tensors"`)
	if err != nil {
		t.Fatal(err)
	}
	if fp16-fp8 != lin || method != "compressed-tensors" {
		t.Errorf("FP8 weights %d, FP16 %d: differ by %d, want the %d linear weights (method %q)", fp8, fp16, fp16-fp8, lin, method)
	}
	// An embedded BF16 config served at FP8 is vLLM's online quantisation
	// of it (--quantization fp8): the same rule.
	embedded := func(precision string) int64 {
		doc := strings.ReplaceAll(strings.ReplaceAll(strings.ReplaceAll(run, "someorg/unseen-8b", "meta-llama/Llama-3.1-8B-Instruct"), "%P%", precision), "%Q%", "null")
		f, err := Parse([]byte(doc), "runs.json")
		if err != nil {
			t.Fatal(err)
		}
		m, err := f.Experiments[0].ArchModel()
		if err != nil {
			t.Fatal(err)
		}
		return m.WeightBytes(1)
	}
	if b16, b8 := embedded(`"BF16"`), embedded(`"FP8"`); b16 != 2*8_030_261_248 || b16-b8 != lin {
		t.Errorf("embedded Llama-3.1-8B: BF16 %d bytes, FP8 %d: want %d and %d less", b16, b8, 2*8_030_261_248, lin)
	}
	const want = `runs.json: experiments[0] (r): precision: unknown "FP5"`
	if _, _, _, err := model(`"FP5"`, "null"); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("FP5: %v", err)
	}
}
