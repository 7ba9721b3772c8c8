package arch

import (
	"fmt"
	"strings"
)

// Model is a decoder-only transformer as vLLM serves it, read from its
// Hugging Face config.json (ParseModel). Notation of vllm-engine.md B.1: L
// layers, d hidden, h heads, h_kv KV heads, d_h head dim, d_ff MLP width, V
// vocabulary.
type Model struct {
	// Name is the Hugging Face id of an embedded config, or the file it was
	// read from.
	Name string
	// Type is model_type (text_config's for multimodal wrappers).
	Type string

	Layers       int // L, num_hidden_layers
	Hidden       int // d, hidden_size
	Heads        int // h, num_attention_heads
	KVHeads      int // h_kv, num_key_value_heads (h without GQA)
	HeadDim      int // d_h, head_dim (hidden_size/num_attention_heads if absent)
	Intermediate int // d_ff of the dense layers (0 when every layer is MoE)
	DenseLayers  int // layers with a dense MLP; Layers-DenseLayers route to experts
	Vocab        int // V, vocab_size

	TiedEmbeddings        bool // lm_head shares the input embedding
	MaxPositionEmbeddings int  // max_position_embeddings (0 when absent)
	Dtype                 Dtype

	QKVBias    bool // q, k, v projections have biases (Qwen2, attention_bias)
	OutputBias bool // o_proj has a bias (attention_bias)
	MLPBias    bool // dense MLP projections have biases (mlp_bias)
	QKNorm     bool // per-head RMSNorm weights on q and k (Qwen3)

	// MLA is DeepSeek's multi-head latent attention (nil for standard
	// attention).
	MLA *MLA
	// MoE is the mixture-of-experts layout (nil for dense models).
	MoE *MoE
	// Quant is the checkpoint's weight quantisation (zero: none).
	Quant Quantization
	// SlidingLayers of the Layers attend only to the last SlidingWindow
	// tokens (0: every layer attends to the whole context).
	SlidingWindow, SlidingLayers int
	// VisionParams estimates a multimodal encoder's parameters (0: none).
	VisionParams int64
}

// MLA is multi-head latent attention (DeepSeek-V2/V3): K and V are
// compressed into one latent of KVLoraRank plus a shared RoPE key of
// QKRopeHeadDim per token and layer; that is all the KV cache holds.
type MLA struct {
	QLoraRank     int // 0: q is a full-rank projection
	KVLoraRank    int
	QKNopeHeadDim int
	QKRopeHeadDim int
	VHeadDim      int
}

// MoE is a mixture-of-experts layout: Layers layers route each token to
// ExpertsPerToken of Experts routed experts and run SharedExperts always.
type MoE struct {
	Layers             int // MoE layers; the model's other layers are dense
	Experts            int // routed experts per MoE layer
	ExpertsPerToken    int // top-k
	ExpertIntermediate int // one routed expert's d_ff
	SharedExperts      int // always-active experts per MoE layer
	SharedIntermediate int // one shared expert's d_ff
	SharedGate         bool
}

// Quantization is a checkpoint's weight format. Quantised checkpoints
// quantise the linear layers of the transformer blocks; embeddings,
// lm_head, norms, routers and multimodal encoders stay in the model dtype,
// as do attention projections when the ignore list names self_attn
// (RedHatAI's Llama-4 FP8 checkpoints, for example).
type Quantization struct {
	Method        string // quant_method: fp8, compressed-tensors, awq, gptq, mxfp4 ("" = none)
	WeightBits    int    // bits per quantised weight
	Float         bool   // floating-point weights (FP8, FP4) rather than integers
	KeepAttention bool   // attention projections left in the model dtype
	// ScaleBits is the shared scale each quantised weight carries, in bits:
	// MXFP4 stores one 8-bit (E8M0) scale per block of 32 4-bit weights,
	// 0.25 (OCP Microscaling Formats v1.0; vLLM's Mxfp4MoEMethod keeps
	// them as uint8 beside the packed weights). 0 where the scales are one
	// per channel or per 128×128 block, which this count leaves out.
	ScaleBits float64
	// ExpertsOnly: only the routed experts are quantised; every other
	// linear layer stays in the model dtype. vLLM's mxfp4 quantises its
	// FusedMoE layers alone and serves linear layers unquantised
	// (quantization/mxfp4.py, Mxfp4Config.get_quant_method).
	ExpertsOnly bool
	Ignore      []string
}

// setMXFP4 makes q vLLM's MXFP4 format (parseQuant's mxfp4): 4-bit E2M1
// weights with one 8-bit E8M0 scale per 32 (OCP Microscaling Formats
// v1.0), on the routed experts only, attention kept in the model dtype.
func (q *Quantization) setMXFP4() {
	q.WeightBits, q.Float, q.ScaleBits, q.ExpertsOnly, q.KeepAttention = 4, true, 8.0/32, true, true
	if q.Method == "" {
		q.Method = "mxfp4"
	}
}

// Dtype is a checkpoint's torch_dtype.
type Dtype string

// The torch dtypes of Hugging Face checkpoints.
const (
	BF16 Dtype = "bfloat16"
	FP16 Dtype = "float16"
	FP32 Dtype = "float32"
)

// ParseDtype accepts torch dtype names and their common short forms.
func ParseDtype(s string) (Dtype, error) {
	switch strings.ToLower(s) {
	case "bfloat16", "bf16":
		return BF16, nil
	case "float16", "fp16", "half":
		return FP16, nil
	case "float32", "fp32", "float":
		return FP32, nil
	}
	return "", fmt.Errorf("unknown dtype %q (want bfloat16, float16 or float32)", s)
}

// ServingBytes is the bytes per element vLLM serves the model's
// unquantised weights and activations in with --dtype auto: 2, since vLLM
// casts float32 checkpoints to a 16-bit type.
func (Dtype) ServingBytes() int { return 2 }

// Params counts parameters by kind over the whole model (not per GPU).
type Params struct {
	Attention           int64 // q, k, v, o projections (MLA: its low-rank projections)
	DenseMLP            int64 // gate, up and down projections of the dense layers
	RoutedExperts       int64 // every routed expert of every MoE layer
	ActiveRoutedExperts int64 // the top-k routed experts one token runs
	SharedExperts       int64
	Router              int64 // router weights (and Qwen-MoE's shared-expert gate)
	Biases              int64
	Norms               int64
	Embedding           int64
	LMHead              int64 // 0 when tied to the embedding
	Vision              int64 // multimodal encoder (estimated)
}

// Total is every parameter the checkpoint holds.
func (p Params) Total() int64 {
	return p.Attention + p.DenseMLP + p.RoutedExperts + p.SharedExperts + p.Router +
		p.Biases + p.Norms + p.Embedding + p.LMHead + p.Vision
}

// Active is the parameters one text token uses: everything but the routed
// experts it is not sent to and the multimodal encoder (the "active"
// figure of MoE model cards, e.g. Mixtral-8x7B's 12.9B).
func (p Params) Active() int64 {
	return p.Total() - p.RoutedExperts + p.ActiveRoutedExperts - p.Vision
}

// attentionPerLayer is one layer's attention projection weights.
func (m *Model) attentionPerLayer() int64 {
	d, h := int64(m.Hidden), int64(m.Heads)
	if a := m.MLA; a != nil {
		qk := h * int64(a.QKNopeHeadDim+a.QKRopeHeadDim)
		q := d * qk
		if a.QLoraRank > 0 {
			q = d*int64(a.QLoraRank) + int64(a.QLoraRank)*qk
		}
		kvA := d * int64(a.KVLoraRank+a.QKRopeHeadDim)
		kvB := int64(a.KVLoraRank) * h * int64(a.QKNopeHeadDim+a.VHeadDim)
		o := h * int64(a.VHeadDim) * d
		return q + kvA + kvB + o
	}
	q := d * h * int64(m.HeadDim)
	kv := 2 * d * int64(m.KVHeads) * int64(m.HeadDim)
	return 2*q + kv // q and o are the same size
}

// Params counts the model's parameters (B.1, generalised): attention
// projections per layer are d·h·d_h (q) + 2·d·h_kv·d_h (k, v) + h·d_h·d
// (o); a dense MLP is 3·d·d_ff (gate, up, down: SwiGLU); an MoE layer has
// Experts routed and SharedExperts shared experts of that shape plus a d×E
// router; embedding and lm_head are V·d each (once when tied).
func (m *Model) Params() Params {
	var p Params
	L, d := int64(m.Layers), int64(m.Hidden)
	p.Attention = L * m.attentionPerLayer()
	p.DenseMLP = int64(m.DenseLayers) * 3 * d * int64(m.Intermediate)
	if e := m.MoE; e != nil {
		ml := int64(e.Layers)
		expert := 3 * d * int64(e.ExpertIntermediate)
		p.RoutedExperts = ml * int64(e.Experts) * expert
		p.ActiveRoutedExperts = ml * int64(e.ExpertsPerToken) * expert
		p.SharedExperts = ml * int64(e.SharedExperts) * 3 * d * int64(e.SharedIntermediate)
		p.Router = ml * d * int64(e.Experts)
		if e.SharedGate {
			p.Router += ml * d
		}
	}
	qdim := int64(m.Heads) * int64(m.HeadDim)
	if m.QKVBias {
		p.Biases += L * (qdim + 2*int64(m.KVHeads)*int64(m.HeadDim))
	}
	if m.OutputBias {
		p.Biases += L * d
	}
	if m.MLPBias {
		p.Biases += int64(m.DenseLayers) * (2*int64(m.Intermediate) + d)
	}
	p.Norms = L*2*d + d // input and post-attention norms, final norm
	if m.QKNorm {
		p.Norms += L * 2 * int64(m.HeadDim)
	}
	if a := m.MLA; a != nil {
		p.Norms += L * int64(a.QLoraRank+a.KVLoraRank)
	}
	p.Embedding = int64(m.Vocab) * d
	if !m.TiedEmbeddings {
		p.LMHead = p.Embedding
	}
	p.Vision = m.VisionParams
	return p
}

// LinearParams is P_lin of B.1 generalised to mixtures of experts: the
// matrix-multiply weights one token runs through (attention projections,
// dense MLP, its top-k routed experts, the shared experts and the router),
// lm_head excluded. For Llama-3.1-8B it is L·[d(2d + 2·d_kv) + 3·d·d_ff].
func (m *Model) LinearParams() int64 {
	p := m.Params()
	return p.Attention + p.DenseMLP + p.ActiveRoutedExperts + p.SharedExperts + p.Router
}

// LinearParamsTotal is the matrix-multiply weights of all layers, every
// routed expert included (what a large batch reads per step), lm_head
// excluded.
func (m *Model) LinearParamsTotal() int64 {
	p := m.Params()
	return p.Attention + p.DenseMLP + p.RoutedExperts + p.SharedExperts + p.Router
}

// LinearFLOPsPerToken is 2·LinearParams: the multiply-adds of the active
// linear layers for one new token (B.1 "Linear FLOPs per new token"). It
// counts active parameters only, so an MoE token costs its top-k experts.
func (m *Model) LinearFLOPsPerToken() float64 { return 2 * float64(m.LinearParams()) }

// LMHeadFLOPsPerToken is 2·d·V, paid once per sampled token (B.1).
func (m *Model) LMHeadFLOPsPerToken() float64 { return 2 * float64(m.Hidden) * float64(m.Vocab) }

// AttentionFLOPsPerPair is the attention FLOPs of one (query token, context
// token) pair over all layers: QKᵀ and PV are 2·h·d_h each, so 4·L·h·d_h
// (B.1). With MLA the query-key dimension (nope + rope) and the value
// dimension differ: 2·L·h·(d_qk + d_v).
func (m *Model) AttentionFLOPsPerPair() float64 {
	L, h := float64(m.Layers), float64(m.Heads)
	if a := m.MLA; a != nil {
		return 2 * L * h * float64(a.QKNopeHeadDim+a.QKRopeHeadDim+a.VHeadDim)
	}
	return 4 * L * float64(m.Heads*m.HeadDim)
}

// AttentionFLOPs is the causal attention cost of n new tokens after c
// context tokens: AttentionFLOPsPerPair·n·(c + n/2) (B.1; a decode is n = 1).
func (m *Model) AttentionFLOPs(n, c int) float64 {
	fn := float64(n)
	return m.AttentionFLOPsPerPair() * fn * (float64(c) + fn/2)
}

// LinearWeightBytes is the size of every layer's linear weights
// (LinearParamsTotal at their stored widths), lm_head excluded, over the
// whole model: what one forward pass streams from HBM when every expert is
// hit (B.1 "Weight bytes read once per step").
func (m *Model) LinearWeightBytes() float64 {
	p := m.Params()
	lin, attn := m.linearWidth(), m.attentionWidth()
	return float64(p.Attention)*attn + float64(p.DenseMLP+p.SharedExperts)*lin +
		float64(p.RoutedExperts)*m.RoutedExpertWidth() + float64(p.Router)*float64(m.Dtype.ServingBytes())
}

// LMHeadBytes is the size of the lm_head weights, d·V in the model dtype
// (the embedding's when tied), which every step reads.
func (m *Model) LMHeadBytes() float64 {
	return float64(m.Hidden) * float64(m.Vocab) * float64(m.Dtype.ServingBytes())
}

// RoutedExpertWidth is the bytes one routed-expert weight takes as vLLM
// loads it: the quantised width with its share of block scales, or the
// serving dtype's for an unquantised checkpoint.
func (m *Model) RoutedExpertWidth() float64 {
	if m.Quant.WeightBits > 0 {
		return (float64(m.Quant.WeightBits) + m.Quant.ScaleBits) / 8
	}
	return float64(m.Dtype.ServingBytes())
}

// linearWidth is the bytes per weight of the dense MLP and shared
// experts: quantised like the routed experts unless only those are.
func (m *Model) linearWidth() float64 {
	if m.Quant.ExpertsOnly {
		return float64(m.Dtype.ServingBytes())
	}
	return m.RoutedExpertWidth()
}

func (m *Model) attentionWidth() float64 {
	if m.Quant.KeepAttention || m.Quant.ExpertsOnly {
		return float64(m.Dtype.ServingBytes())
	}
	return m.linearWidth()
}

// MultiHeadKV reports whether the model's attention keeps a key and a
// value per query head (multi-head attention, h_kv = h, as Llama-2-7B):
// not grouped-query attention (h_kv < h) and not MLA's one latent per
// token. Its KV reads are per token h/h_kv times a grouped-query model's
// of the same width, which the calibration's KV efficiency tells apart
// (replica.Coefficients.EtaKVMHA).
func (m *Model) MultiHeadKV() bool {
	return m.MLA == nil && m.KVHeads == m.Heads
}

// KVHeadsPerGPU is the KV heads one tensor-parallel rank holds: h_kv/TP,
// or one replicated head when TP exceeds h_kv (vLLM replicates KV heads).
func (m *Model) KVHeadsPerGPU(tp int) int {
	return max(1, m.KVHeads/max(tp, 1))
}

// WeightBytes is the weight memory of one GPU at tensor-parallel degree
// tp, as vLLM loads it: attention, MLP and expert weights are split TP
// ways (experts along their d_ff), as are the embedding and lm_head (the
// vocabulary padded to a multiple of 64); k/v projections are replicated
// when TP exceeds h_kv, MLA's down-projections, routers and norms on every
// rank. Quantised layers take WeightBits/8 bytes per weight; everything
// else the serving dtype's 2. Block scales of small blocks count
// (Quantization.ScaleBits: MXFP4's one per 32 weights); scales of one per
// channel or per 128×128 block (< 0.1% of the weights) do not.
func (m *Model) WeightBytes(tp int) int64 { return m.WeightBytesWithExperts(tp, 1) }

// WeightBytesWithExperts is WeightBytes when a mixture of experts' routed
// experts are split over experts·tp GPUs rather than tp: vLLM's data
// parallelism for MoE models, whose expert layers form a DP×TP group
// (vLLM docs/serving/data_parallel_deployment.md) while the rest of each
// rank's weights stay split over its own tp GPUs. experts ≤ 1, or a dense
// model, gives WeightBytes.
func (m *Model) WeightBytesWithExperts(tp, experts int) int64 {
	tp = max(tp, 1)
	t := float64(tp)
	p := m.Params()
	b16 := float64(m.Dtype.ServingBytes())
	lin, attnW := m.linearWidth(), m.attentionWidth()
	L, d := float64(m.Layers), float64(m.Hidden)
	var attn float64
	if a := m.MLA; a != nil {
		h := float64(m.Heads)
		qk := h * float64(a.QKNopeHeadDim+a.QKRopeHeadDim)
		replicated := d * float64(a.KVLoraRank+a.QKRopeHeadDim)
		sharded := float64(a.KVLoraRank)*h*float64(a.QKNopeHeadDim+a.VHeadDim) + h*float64(a.VHeadDim)*d
		if a.QLoraRank > 0 {
			replicated += d * float64(a.QLoraRank)
			sharded += float64(a.QLoraRank) * qk
		} else {
			sharded += d * qk
		}
		attn = L * (replicated + sharded/t)
	} else {
		qo := 2 * d * float64(m.Heads*m.HeadDim)
		kv := 2 * d * float64(m.KVHeadsPerGPU(tp)*m.HeadDim)
		attn = L * (qo/t + kv)
	}
	bytes := attn*attnW +
		float64(p.DenseMLP+p.SharedExperts)*lin/t + float64(p.RoutedExperts)*m.RoutedExpertWidth()/(t*float64(max(experts, 1))) +
		float64(p.Router+p.Norms)*b16 + float64(p.Biases)*b16/t +
		float64(p.Vision)*b16/t
	vocab := float64((m.Vocab + 63) / 64 * 64)
	tables := 2.0
	if m.TiedEmbeddings {
		tables = 1
	}
	bytes += tables * vocab * d * b16 / t
	return int64(bytes + 0.5)
}

// KVElementBytes is the bytes of one cached K or V element for vLLM's
// --kv-cache-dtype: "auto" (or "") is the model's serving dtype; bfloat16
// and float16 are 2; fp8, fp8_e4m3, fp8_e5m2 and fp8_inc are 1.
func (m *Model) KVElementBytes(kvCacheDtype string) (int, error) {
	switch strings.ToLower(kvCacheDtype) {
	case "", "auto":
		return m.Dtype.ServingBytes(), nil
	case "bfloat16", "float16", "half":
		return 2, nil
	case "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc":
		return 1, nil
	}
	return 0, fmt.Errorf("kv_cache_dtype: unknown %q (want auto, bfloat16, fp8, fp8_e4m3 or fp8_e5m2)", kvCacheDtype)
}

// KVBytesPerToken is the KV cache one token takes on one GPU at
// tensor-parallel degree tp with elem bytes per element: L·2·(h_kv/TP)·d_h
// ·elem (B.1: 128 KiB for Llama-3.1-8B in BF16, 80 KiB per GPU for
// Llama-3.1-70B at TP4). With MLA it is L·(kv_lora_rank + qk_rope_head_dim)
// ·elem on every rank: the latent is not split across TP.
func (m *Model) KVBytesPerToken(elem, tp int) int64 {
	L, e := int64(m.Layers), int64(elem)
	if a := m.MLA; a != nil {
		return L * int64(a.KVLoraRank+a.QKRopeHeadDim) * e
	}
	return L * 2 * int64(m.KVHeadsPerGPU(tp)) * int64(m.HeadDim) * e
}

// KVBlockLayers is the layers whose KV pages one vLLM block holds. With
// one attention type it is every layer. A hybrid model (full and
// sliding-window layers) is split by vLLM's hybrid KV cache manager into
// groups of equal size, each with its own block table over one shared
// pool; the group size is the smaller of the two layer counts, or the
// larger when it is under 1.5 times the smaller (v1/core/kv_cache_utils.py,
// _get_kv_cache_groups_uniform_page_size), and a block is that many
// layers' pages. gpt-oss-120b's 18 + 18 layers make blocks of 18 layers,
// Gemma-3-27B's 10 full and 52 sliding blocks of 10.
func (m *Model) KVBlockLayers() int {
	s := m.SlidingLayers
	if s <= 0 || s >= m.Layers {
		return m.Layers
	}
	lo, hi := min(s, m.Layers-s), max(s, m.Layers-s)
	if float64(hi) < 1.5*float64(lo) {
		return hi
	}
	return lo
}

// CheckTP reports whether vLLM can split the model tp ways: the attention
// heads must divide evenly, and the KV heads must either divide evenly or
// be replicated a whole number of times.
func (m *Model) CheckTP(tp int) error {
	switch {
	case tp < 1:
		return fmt.Errorf("tensor_parallel_size must be at least 1, got %d", tp)
	case m.Heads%tp != 0:
		return fmt.Errorf("tensor_parallel_size %d does not divide num_attention_heads %d", tp, m.Heads)
	case m.MLA == nil && m.KVHeads%tp != 0 && tp%m.KVHeads != 0:
		return fmt.Errorf("tensor_parallel_size %d and num_key_value_heads %d: neither divides the other", tp, m.KVHeads)
	}
	return nil
}

// String summarises the model: name, size, shape.
func (m *Model) String() string {
	p := m.Params()
	s := fmt.Sprintf("%s: %.2fB params", m.Name, float64(p.Total())/1e9)
	if m.MoE != nil {
		s += fmt.Sprintf(" (%.2fB active, %d of %d experts)", float64(p.Active())/1e9, m.MoE.ExpertsPerToken, m.MoE.Experts)
	}
	s += fmt.Sprintf(", %d layers, d=%d, %d heads (%d KV) × %d", m.Layers, m.Hidden, m.Heads, m.KVHeads, m.HeadDim)
	if m.Quant.Method != "" {
		s += fmt.Sprintf(", %d-bit weights (%s)", m.Quant.WeightBits, m.Quant.Method)
		if m.Quant.ExpertsOnly {
			s = s[:len(s)-1] + ", routed experts only)"
		}
	}
	return s
}
