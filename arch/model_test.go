package arch

import (
	"math"
	"os"
	"strings"
	"testing"
)

func mustModel(t testing.TB, ref string) *Model {
	t.Helper()
	m, err := ResolveModel(ref, "testdata")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestParams checks parameter counts against hand derivations (B.1 shapes:
// attention L·(2·d·h·d_h + 2·d·h_kv·d_h), MLP L·3·d·d_ff, norms L·2·d + d,
// embedding and lm_head V·d each) and the published totals.
func TestParams(t *testing.T) {
	tests := []struct {
		model         string
		total, active int64 // exact, or when approx the model card's rounded figures
		approx        bool  // (total within 0.5%, active within 2%: "37B" is 36.5–37.5B)
		linear        int64 // LinearParams (exact), 0 to skip
	}{
		// 8,030,261,248 is the count Hugging Face reports.
		{"meta-llama/Llama-3.1-8B-Instruct", 8_030_261_248, 8_030_261_248, false, 6_979_321_856},
		{"meta-llama/Llama-3.1-70B-Instruct", 70_553_706_496, 70_553_706_496, false, 68_451_041_280},
		{"meta-llama/Llama-2-7b-hf", 6_738_415_616, 6_738_415_616, false, 6_476_005_376},
		{"meta-llama/Llama-2-70b-hf", 68_976_648_192, 68_976_648_192, false, 68_451_041_280},
		{"codellama/CodeLlama-34b-Instruct-hf", 33_743_970_304, 33_743_970_304, false, 0},
		{"01-ai/Yi-34B", 34_388_917_248, 34_388_917_248, false, 0},
		// Mistral-Nemo: head_dim 128 × 32 heads = 4096 ≠ hidden 5120.
		{"mistralai/Mistral-Nemo-Instruct-2407", 12_247_782_400, 12_247_782_400, false, 10_905_190_400},
		// Qwen2: q, k, v biases (L·(h·d_h + 2·h_kv·d_h) = 28·4608).
		{"Qwen/Qwen2.5-7B-Instruct", 7_615_616_512, 7_615_616_512, false, 6_525_288_448},
		// Qwen3: per-head q/k norms (L·2·d_h).
		{"Qwen/Qwen3-14B", 14_768_307_200, 14_768_307_200, false, 13_212_057_600},
		// Qwen3-32B (by hand): per layer q 5120·8192 + k, v 5120·1024 each + o
		// 8192·5120 + MLP 3·5120·25600 = 487,587,840 linear, + q/k norms 256 +
		// layer norms 10,240; 64 layers, embeddings and lm_head 151936·5120 each,
		// final norm 5120.
		{"Qwen/Qwen3-32B", 32_762_123_264, 32_762_123_264, false, 31_205_621_760},
		// Mixtral-8x7B: 46.7B total, 12.9B active (8 experts, top-2, d×8 routers).
		{"mistralai/Mixtral-8x7B-v0.1", 46_702_792_704, 12_879_925_248, false, 12_617_515_008},
		// Llama-4 Scout: "109B total, 17B active" (16 routed experts top-1
		// plus one shared, all 48 layers MoE; the vision tower estimated).
		{"RedHatAI/Llama-4-Scout-17B-16E-Instruct-FP8-dynamic", 109e9, 17e9, true, 0},
		// Qwen1.5-MoE-A2.7B: 14.3B total, 2.7B active (60 experts top-4 and
		// a 5632-wide shared expert with its gate).
		{"Qwen1.5-MoE-A2.7B.json", 14.3e9, 2.7e9, true, 0},
		// DeepSeek-V3: 671B total, 37B active (MLA; 3 dense layers, then
		// 256 routed experts top-8 and one shared expert).
		{"DeepSeek-V3.json", 671e9, 37e9, true, 0},
		// Qwen3-235B-A22B: 235B total, 22B active.
		{"Qwen3-235B-A22B-FP8.json", 235e9, 22e9, true, 0},
	}
	for _, tc := range tests {
		t.Run(tc.model, func(t *testing.T) {
			m := mustModel(t, tc.model)
			p := m.Params()
			check := func(what string, got, want int64) {
				t.Helper()
				if tc.approx {
					tol := 0.005
					if what == "active" {
						tol = 0.02
					}
					if math.Abs(float64(got-want))/float64(want) > tol {
						t.Errorf("%s = %.4gB, want %.4gB ±%g%%", what, float64(got)/1e9, float64(want)/1e9, 100*tol)
					}
				} else if got != want {
					t.Errorf("%s = %d, want %d", what, got, want)
				}
			}
			check("total", p.Total(), tc.total)
			check("active", p.Active(), tc.active)
			if tc.linear != 0 && m.LinearParams() != tc.linear {
				t.Errorf("LinearParams = %d, want %d", m.LinearParams(), tc.linear)
			}
			if m.MoE == nil && (m.LinearParams() != m.LinearParamsTotal() || p.Total() != p.Active()) {
				t.Error("dense model with inactive parameters")
			}
		})
	}
}

func TestMoELayouts(t *testing.T) {
	tests := []struct {
		model                    string
		moeLayers, dense, shared int
		expertFF, denseFF        int
	}{
		{"mistralai/Mixtral-8x7B-v0.1", 32, 0, 0, 14336, 0},
		{"RedHatAI/Llama-4-Scout-17B-16E-Instruct-FP8-dynamic", 48, 0, 1, 8192, 0},
		{"DeepSeek-V3.json", 58, 3, 1, 2048, 18432},
		{"Qwen1.5-MoE-A2.7B.json", 24, 0, 1, 1408, 0},
	}
	for _, tc := range tests {
		m := mustModel(t, tc.model)
		e := m.MoE
		if e == nil || e.Layers != tc.moeLayers || m.DenseLayers != tc.dense || e.SharedExperts != tc.shared ||
			e.ExpertIntermediate != tc.expertFF || m.Intermediate != tc.denseFF {
			t.Errorf("%s: moe %+v, dense layers %d of width %d", tc.model, e, m.DenseLayers, m.Intermediate)
		}
	}
	// Llama-4 Maverick interleaves: every second layer is MoE, the others
	// use intermediate_size_mlp.
	mav := `{"model_type": "llama4", "text_config": {"model_type": "llama4_text", "num_hidden_layers": 48,
	  "hidden_size": 5120, "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
	  "vocab_size": 202048, "intermediate_size": 8192, "intermediate_size_mlp": 16384,
	  "num_local_experts": 128, "num_experts_per_tok": 1, "interleave_moe_layer_step": 2}}`
	m, err := ParseModel([]byte(mav), "maverick.json")
	if err != nil {
		t.Fatal(err)
	}
	if m.MoE.Layers != 24 || m.DenseLayers != 24 || m.Intermediate != 16384 || m.TiedEmbeddings {
		t.Errorf("maverick: moe %+v, dense %d × %d", m.MoE, m.DenseLayers, m.Intermediate)
	}
	// ~400B total, 17B active.
	if p := m.Params(); math.Abs(float64(p.Total())/400e9-1) > 0.02 || math.Abs(float64(p.Active())/17e9-1) > 0.03 {
		t.Errorf("maverick: %.1fB total, %.1fB active", float64(p.Total())/1e9, float64(p.Active())/1e9)
	}
	// Qwen-MoE's mlp_only_layers and decoder_sparse_step make dense layers.
	q := `{"model_type": "qwen3_moe", "num_hidden_layers": 8, "hidden_size": 64, "num_attention_heads": 4,
	  "vocab_size": 100, "intermediate_size": 256, "moe_intermediate_size": 32, "num_experts": 8,
	  "num_experts_per_tok": 2, "decoder_sparse_step": 2, "mlp_only_layers": [3]}`
	if m, err = ParseModel([]byte(q), "q.json"); err != nil {
		t.Fatal(err)
	}
	if m.MoE.Layers != 3 || m.DenseLayers != 5 { // layers 1, 5, 7
		t.Errorf("sparse step: %d MoE, %d dense", m.MoE.Layers, m.DenseLayers)
	}
}

func TestKVBytes(t *testing.T) {
	const kib = 1024
	tests := []struct {
		model    string
		kv       string
		tp       int
		perToken int64
	}{
		{"meta-llama/Llama-3.1-8B-Instruct", "auto", 1, 128 * kib}, // B.1
		{"meta-llama/Llama-3.1-8B-Instruct", "fp8", 1, 64 * kib},
		{"meta-llama/Llama-3.1-70B-Instruct", "auto", 4, 80 * kib},    // 320 KiB / 4
		{"meta-llama/Llama-2-7b-hf", "auto", 1, 512 * kib},            // MHA: 32 KV heads
		{"Qwen/Qwen2.5-7B-Instruct", "auto", 1, 56 * kib},             // B.1
		{"Qwen/Qwen2.5-7B-Instruct", "auto", 8, 28 * 2 * 1 * 128 * 2}, // 4 KV heads replicated to 1 per rank
		{"mistralai/Mixtral-8x7B-v0.1", "auto", 2, 64 * kib},
		{"DeepSeek-V3.json", "auto", 8, 61 * (512 + 64) * 2}, // MLA latent, not split by TP
	}
	for _, tc := range tests {
		m := mustModel(t, tc.model)
		e, err := m.KVElementBytes(tc.kv)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.KVBytesPerToken(e, tc.tp); got != tc.perToken {
			t.Errorf("%s %s TP%d: %d B/token, want %d", tc.model, tc.kv, tc.tp, got, tc.perToken)
		}
	}
	m := mustModel(t, "meta-llama/Llama-3.1-8B-Instruct")
	if _, err := m.KVElementBytes("int4"); err == nil || !strings.Contains(err.Error(), "kv_cache_dtype") {
		t.Errorf("bad kv dtype: %v", err)
	}
}

// TestWeightBytes: BF16 weights are 2 bytes per parameter split TP ways;
// an FP8 checkpoint stores its quantised linear layers in 1 byte and keeps
// the rest (embeddings, lm_head, router, norms, and for Scout attention
// and the vision tower) in BF16.
func TestWeightBytes(t *testing.T) {
	l8 := mustModel(t, "meta-llama/Llama-3.1-8B-Instruct")
	if got := l8.WeightBytes(1); got != 2*8_030_261_248 {
		t.Errorf("8B weights %d, want %d", got, 2*8_030_261_248)
	}
	l70 := mustModel(t, "meta-llama/Llama-3.1-70B-Instruct")
	p := l70.Params()
	// Norms are replicated on every rank; everything else is split.
	want := (2*(p.Total()-p.Norms))/4 + 2*p.Norms
	if got := l70.WeightBytes(4); got != want {
		t.Errorf("70B TP4 weights %d, want %d", got, want)
	}
	scout := mustModel(t, "RedHatAI/Llama-4-Scout-17B-16E-Instruct-FP8-dynamic")
	if q := scout.Quant; q.WeightBits != 8 || !q.Float || !q.KeepAttention || q.Method != "compressed-tensors" {
		t.Fatalf("scout quantisation %+v", q)
	}
	sp := scout.Params()
	fp8 := sp.RoutedExperts + sp.SharedExperts
	bf16 := sp.Attention + sp.Embedding + sp.LMHead + sp.Vision + sp.Biases
	want = fp8/2 + 2*bf16/2 + 2*(sp.Router+sp.Norms)
	if got := scout.WeightBytes(2); math.Abs(float64(got-want)) > 2 {
		t.Errorf("scout TP2 weights %d, want %d", got, want)
	}
	// FP8 block quantisation (DeepSeek-V3, Qwen3-235B) quantises attention too.
	q3 := mustModel(t, "Qwen3-235B-A22B-FP8.json")
	if q3.Quant.KeepAttention || q3.Quant.WeightBits != 8 {
		t.Errorf("qwen3-235b quantisation %+v", q3.Quant)
	}
	if got := q3.LinearWeightBytes(); got != float64(q3.LinearParamsTotal()-q3.Params().Router)+2*float64(q3.Params().Router) {
		t.Errorf("qwen3-235b linear bytes %g", got)
	}
}

// TestMXFP4Weights: gpt-oss-20b's MXFP4 checkpoint as vLLM loads it. Only
// the routed experts are MXFP4, at 4 bits plus one 8-bit scale per 32
// weights (4.25 bits); attention, router, embedding and lm_head stay BF16.
// The shapes give 20.9B parameters, the model card's total.
func TestMXFP4Weights(t *testing.T) {
	m := mustModel(t, "gpt-oss-20b.json")
	q := m.Quant
	if q.Method != "mxfp4" || q.WeightBits != 4 || !q.Float || q.ScaleBits != 0.25 || !q.ExpertsOnly || !q.KeepAttention {
		t.Fatalf("quantisation %+v", q)
	}
	p := m.Params()
	// Attention per layer: q and o 2880×4096 each, k and v 2880×512 each.
	if want := int64(24 * (2*2880*4096 + 2*2880*512)); p.Attention != want {
		t.Errorf("attention %d, want %d", p.Attention, want)
	}
	// 32 experts of 3·2880·2880 in each of 24 layers.
	if want := int64(24 * 32 * 3 * 2880 * 2880); p.RoutedExperts != want {
		t.Errorf("routed experts %d, want %d", p.RoutedExperts, want)
	}
	if total := float64(p.Total()); math.Abs(total/20.9e9-1) > 0.01 {
		t.Errorf("%.2fB parameters, want about 20.9B", total/1e9)
	}
	// Routed experts at 4.25/8 bytes, everything else at 2; the vocabulary
	// (201088, a multiple of 64) needs no padding.
	want := float64(p.RoutedExperts)*4.25/8 + 2*float64(p.Attention+p.Router+p.Norms+p.Biases+p.Embedding+p.LMHead)
	if got := float64(m.WeightBytes(1)); math.Abs(got-want) > 2 {
		t.Errorf("TP1 weights %.0f, want %.0f", got, want)
	}
	if got, want := m.LinearWeightBytes(), float64(p.Attention)*2+float64(p.RoutedExperts)*4.25/8+float64(p.Router)*2; got != want {
		t.Errorf("linear weight bytes %g, want %g", got, want)
	}
	if !strings.Contains(m.String(), "4-bit weights (mxfp4, routed experts only)") {
		t.Errorf("summary %q", m.String())
	}
}

// TestFLOPs: B.1 gives 13.96 GFLOP per token for Llama-3.1-8B and 136.9
// for 70B; a Mixtral token costs its two experts, not eight.
func TestFLOPs(t *testing.T) {
	tests := []struct {
		model  string
		gflops float64
	}{
		{"meta-llama/Llama-3.1-8B-Instruct", 13.96},
		{"meta-llama/Llama-3.1-70B-Instruct", 136.9},
		{"mistralai/Mixtral-8x7B-v0.1", 25.24},
	}
	for _, tc := range tests {
		m := mustModel(t, tc.model)
		if got := m.LinearFLOPsPerToken() / 1e9; math.Abs(got-tc.gflops) > 0.01 {
			t.Errorf("%s: %.3f GFLOP/token, want %.2f", tc.model, got, tc.gflops)
		}
	}
	m := mustModel(t, "meta-llama/Llama-3.1-8B-Instruct")
	// 4·L·h·d_h·n·(c + n/2): a 2048-token chunk after 6144 cached tokens.
	if got, want := m.AttentionFLOPs(2048, 6144), 4.0*32*32*128*2048*(6144+1024); got != want {
		t.Errorf("attention FLOPs %g, want %g", got, want)
	}
	if got := m.LMHeadFLOPsPerToken(); got != 2*4096*128256 {
		t.Errorf("lm_head FLOPs %g", got)
	}
	ds := mustModel(t, "DeepSeek-V3.json")
	if got := ds.AttentionFLOPsPerPair(); got != 2*61*128*(128+64+128) {
		t.Errorf("MLA attention FLOPs per pair %g", got)
	}
}

func TestCheckTP(t *testing.T) {
	m := mustModel(t, "Qwen/Qwen2.5-7B-Instruct") // 28 heads, 4 KV heads
	for tp, ok := range map[int]bool{1: true, 2: true, 4: true, 7: false, 3: false, 0: false} {
		if err := m.CheckTP(tp); (err == nil) != ok {
			t.Errorf("TP%d: %v", tp, err)
		}
	}
	if err := mustModel(t, "meta-llama/Llama-2-7b-hf").CheckTP(8); err != nil {
		t.Errorf("Llama-2-7b TP8: %v", err)
	}
}

func TestParseErrors(t *testing.T) {
	base := `"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 100, "intermediate_size": 128`
	tests := []struct{ src, want string }{
		{`{` + base + `, "num_attention_heads": 0}`, "config.json: num_attention_heads: must be > 0, got 0"},
		{`{"hidden_size": 64, "num_attention_heads": 4, "vocab_size": 100, "intermediate_size": 128}`, "config.json: num_hidden_layers: required"},
		{`{` + base + `, "hidden_size": "64"}`, "config.json: hidden_size: want an integer, got a string"},
		{`{` + base + `, "hidden_size": 64.5}`, "config.json: hidden_size: want an integer below 2^31, got 64.5"},
		{`{` + base + `, "num_key_value_heads": 3}`, "config.json: num_key_value_heads: 3 does not divide num_attention_heads 4"},
		{`{` + base + `, "hidden_size": 65}`, "config.json: head_dim: required: hidden_size 65 is not a multiple of num_attention_heads 4"},
		{`{` + base + `, "torch_dtype": "int8"}`, `config.json: torch_dtype: unknown dtype "int8"`},
		{`{` + base + `, "tie_word_embeddings": "yes"}`, "config.json: tie_word_embeddings: want true or false, got a string"},
		{`{` + base + `, "num_local_experts": 8, "num_experts_per_tok": 9}`, "config.json: num_experts_per_tok: 9 exceeds num_local_experts 8"},
		{`{` + base + `, "num_experts": 8, "num_experts_per_tok": 2}`, "config.json: moe_intermediate_size: required"},
		{`{` + base + `, "mlp_only_layers": [1, "x"], "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 8}`, "config.json: mlp_only_layers[1]: want an integer"},
		{`{` + base + `, "quantization_config": {"quant_method": "bitsandbytes"}}`, `config.json: quantization_config.quant_method: unsupported "bitsandbytes"`},
		{`{` + base + `, "quantization_config": {"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {"num_bits": 0}}}}}`, "config.json: quantization_config.config_groups.g.weights.num_bits: must be in 1..16, got 0"},
		{`{"model_type": "llama4", "text_config": {` + base + `, "vocab_size": -1}}`, "config.json: text_config.vocab_size: must be > 0, got -1"},
		{`{"text_config": [1]}`, "config.json: text_config: want an object"},
		{`{` + base + `, "kv_lora_rank": 512}`, "config.json: qk_nope_head_dim: required"},
		{`{` + base + `, "hidden_size": 2000000000, "num_hidden_layers": 60000}`, "implausibly large"},
		{"{\n  \"hidden_size\": 64,\n  oops\n}", "config.json: line 3, column 3"},
		// A UTF-8 byte order mark is skipped, and lines still count from it.
		{"\xef\xbb\xbf{\n  \"hidden_size\": 64,\n  oops\n}", "config.json: line 3, column 3"},
		{"\xef\xbb\xbf{" + base + `, "num_attention_heads": 0}`, "config.json: num_attention_heads: must be > 0, got 0"},
		{`[]`, "config.json:"},
		{`null`, "config.json: not a JSON object"},
	}
	for _, tc := range tests {
		_, err := ParseModel([]byte(tc.src), "config.json")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n got %v\nwant %q", tc.src, err, tc.want)
		}
	}
}

func TestParseDefaults(t *testing.T) {
	// No head_dim, no num_key_value_heads, no dtype: d/h, MHA, bfloat16.
	m, err := ParseModel([]byte(`{"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64,
	  "num_attention_heads": 4, "vocab_size": 100, "intermediate_size": 128, "unknown_key": {"x": [1, 2]}}`), "c.json")
	if err != nil {
		t.Fatal(err)
	}
	if m.HeadDim != 16 || m.KVHeads != 4 || m.Dtype != BF16 || m.TiedEmbeddings || m.MoE != nil {
		t.Errorf("defaults %+v", m)
	}
	// Unknown families tie embeddings by default, as transformers does;
	// "dtype" is the newer spelling of torch_dtype.
	m, err = ParseModel([]byte(`{"model_type": "gemma", "num_hidden_layers": 2, "hidden_size": 64, "head_dim": 32,
	  "num_attention_heads": 4, "num_key_value_heads": 1, "vocab_size": 100, "intermediate_size": 128, "dtype": "float16"}`), "c.json")
	if err != nil {
		t.Fatal(err)
	}
	if !m.TiedEmbeddings || m.Dtype != FP16 || m.HeadDim != 32 || m.Params().LMHead != 0 {
		t.Errorf("gemma-like %+v", m)
	}
}

// TestEmbeddedModelsMatchExperiments checks every embedded config against
// the architecture the measured runs recorded (../shared/latency).
func TestEmbeddedModelsMatchExperiments(t *testing.T) {
	runs := loadExperiments(t)
	seen := map[string]bool{}
	for _, r := range runs {
		if seen[r.Model] {
			continue
		}
		seen[r.Model] = true
		m, err := LookupModel(r.Model)
		if err != nil {
			t.Errorf("%s: %v", r.Model, err)
			continue
		}
		a := r.Arch
		got := map[string]int{"num_hidden_layers": m.Layers, "hidden_size": m.Hidden, "num_attention_heads": m.Heads,
			"num_key_value_heads": m.KVHeads, "vocab_size": m.Vocab, "max_position_embeddings": m.MaxPositionEmbeddings, "head_dim": m.HeadDim}
		want := map[string]int{"num_hidden_layers": a.Layers, "hidden_size": a.Hidden, "num_attention_heads": a.Heads,
			"num_key_value_heads": a.KVHeads, "vocab_size": a.Vocab, "max_position_embeddings": a.MaxPos, "head_dim": a.HeadDim}
		if m.MoE != nil {
			got["num_local_experts"], got["num_experts_per_tok"], got["intermediate_size"] = m.MoE.Experts, m.MoE.ExpertsPerToken, m.MoE.ExpertIntermediate
			want["num_local_experts"], want["num_experts_per_tok"], want["intermediate_size"] = a.Experts, a.TopK, a.Inter
		} else {
			got["intermediate_size"], want["intermediate_size"] = m.Intermediate, a.Inter
		}
		for k, w := range want {
			if w != 0 && got[k] != w {
				t.Errorf("%s: %s = %d, experiments.json says %d", r.Model, k, got[k], w)
			}
		}
		if a.Dtype != "" && string(m.Dtype) != a.Dtype {
			t.Errorf("%s: dtype %s, experiments.json says %s", r.Model, m.Dtype, a.Dtype)
		}
	}
	if len(seen) < 10 {
		t.Errorf("only %d models in experiments.json", len(seen))
	}
}

func TestModelsListAndLookup(t *testing.T) {
	ids := Models()
	if len(ids) < 11 {
		t.Fatalf("embedded models %v", ids)
	}
	for _, id := range ids {
		if _, err := LookupModel(id); err != nil {
			t.Errorf("%s: %v", id, err)
		}
	}
	if m, err := LookupModel("META-LLAMA/llama-3.1-8b-instruct"); err != nil || m.Name != "meta-llama/Llama-3.1-8B-Instruct" {
		t.Errorf("case-insensitive lookup: %v %v", m, err)
	}
	if _, err := LookupModel("nope/nope"); err == nil || !strings.Contains(err.Error(), "meta-llama/Llama-3.1-8B-Instruct") {
		t.Errorf("unknown model error %v", err)
	}
	// A file path wins over an id; a directory means its config.json.
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/config.json", []byte(`{"num_hidden_layers": 1, "hidden_size": 8, "num_attention_heads": 2, "vocab_size": 10, "intermediate_size": 16}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if m, err := ResolveModel(dir, ""); err != nil || m.Hidden != 8 {
		t.Errorf("directory: %v %v", m, err)
	}
	if m, err := ResolveModel("config.json", dir); err != nil || m.Hidden != 8 {
		t.Errorf("relative file: %v %v", m, err)
	}
}

func FuzzParseModel(f *testing.F) {
	for _, id := range Models() {
		data, _ := modelFS.ReadFile("models/" + id + ".json")
		f.Add(data)
	}
	for _, name := range []string{"DeepSeek-V3.json", "Qwen1.5-MoE-A2.7B.json"} {
		data, _ := os.ReadFile("testdata/" + name)
		f.Add(data)
	}
	f.Add([]byte(`{"text_config": {"num_hidden_layers": 1}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseModel(data, "f.json")
		if err != nil {
			return
		}
		p := m.Params()
		if m.Layers <= 0 || m.HeadDim <= 0 || m.KVHeads <= 0 || p.Total() <= 0 || p.Active() <= 0 || p.Active() > p.Total() {
			t.Fatalf("accepted an inconsistent model %+v (params %+v)", m, p)
		}
		for _, tp := range []int{1, 2, 8} {
			if m.WeightBytes(tp) <= 0 || m.KVBytesPerToken(2, tp) <= 0 {
				t.Fatalf("TP%d: non-positive sizes for %+v", tp, m)
			}
		}
		if m.LinearParams() > m.LinearParamsTotal() || m.LinearFLOPsPerToken() <= 0 {
			t.Fatalf("linear params %d > total %d", m.LinearParams(), m.LinearParamsTotal())
		}
		_ = m.String()
	})
}

// TestMultiHeadKV: a key and a value per query head (Llama-2-7B, 32 of
// 32) is multi-head attention; grouped-query (Llama-3.1-8B, 8 of 32;
// Mixtral, 8 of 32) is not, nor is DeepSeek-V3's MLA latent, whose
// config states as many KV heads as query heads.
func TestMultiHeadKV(t *testing.T) {
	for model, want := range map[string]bool{
		"meta-llama/Llama-2-7b-hf":         true,
		"meta-llama/Llama-3.1-8B-Instruct": false,
		"mistralai/Mixtral-8x7B-v0.1":      false,
		"DeepSeek-V3.json":                 false,
	} {
		if got := mustModel(t, model).MultiHeadKV(); got != want {
			t.Errorf("%s: multi-head KV %v, want %v", model, got, want)
		}
	}
}
