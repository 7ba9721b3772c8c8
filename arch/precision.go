package arch

import (
	"fmt"
	"strings"
)

// ApplyPrecision sets the weight format of a model whose config carries no
// quantization_config from a run record's precision label (FP16, BF16,
// FP8, MXFP4, NVFP4, INT8, INT4 and their usual spellings) and its
// quantisation method name, where one is recorded (the experiments
// schema's model_arch.quantization, e.g. "compressed-tensors", "mxfp4").
// A model that already has a format, or a 16/32-bit label without an
// MXFP4 method, is left as it is.
//
// What each label stands for is the common checkpoint of its kind, as vLLM
// loads it (docs/latency.md "Models"):
//   - FP8: 8-bit float weights in every linear layer of the transformer
//     blocks, attention included (FP8-dynamic and FP8 block checkpoints;
//     lm_head, embeddings, routers and norms stay 16-bit), computed on the
//     FP8 tensor cores;
//   - MXFP4 (or FP4 with the mxfp4 method): the routed experts only, at
//     4.25 bits (parseQuant's mxfp4);
//   - NVFP4 (FP4 otherwise): 4-bit float weights in every linear layer with
//     one FP8 scale per 16 weights, 4.5 bits (NVIDIA ModelOpt's format);
//   - INT8 (W8A8, W8A16): 8-bit integers in every linear layer;
//   - INT4 (W4A16, AWQ, GPTQ): 4-bit integers in every linear layer with
//     one 16-bit scale per group of 128 weights, the common group size,
//     4.125 bits.
func (m *Model) ApplyPrecision(label, method string) error {
	if m.Quant.Method != "" {
		return nil
	}
	norm := strings.NewReplacer("-", "", "_", "", " ", "", "(", "", ")", "", ".", "", "/", "").Replace(strings.ToUpper(label))
	meth := strings.ToLower(strings.TrimSpace(method))
	q := Quantization{Method: meth}
	// The label's format, by the first of these it names: spellings vary
	// ("FP8-dynamic", "W8A8-FP8", "FP8 (E4M3)", "INT4-AWQ").
	has := func(subs ...string) bool {
		for _, sub := range subs {
			if strings.Contains(norm, sub) {
				return true
			}
		}
		return false
	}
	switch {
	case norm == "" || norm == "AUTO" || has("FP16", "BF16", "FP32", "FLOAT16", "FLOAT32", "HALF"):
		if meth != "mxfp4" {
			return nil
		}
		q.setMXFP4()
	case has("MXFP4") || (has("FP4") && meth == "mxfp4"):
		q.setMXFP4()
	case has("NVFP4", "FP4"):
		q.WeightBits, q.Float, q.ScaleBits = 4, true, 8.0/16
	case has("FP8", "E4M3"):
		q.WeightBits, q.Float = 8, true
	case has("INT4", "W4A", "AWQ", "GPTQ"):
		q.WeightBits, q.ScaleBits = 4, 16.0/128
	case has("INT8", "W8A"):
		q.WeightBits = 8
	default:
		return fmt.Errorf("unknown %q (want FP16, BF16, FP8, MXFP4, NVFP4, INT8 or INT4)", label)
	}
	if q.Method == "" {
		q.Method = strings.ToLower(norm)
	}
	m.Quant = q
	return nil
}
