package replica

import "github.com/eppsim/eppsim/arch"

// BatchEntry describes one scheduled request of a step for the step-time
// model: NewTokens computed this step after Context tokens already in the
// KV cache (cached prefix plus earlier chunks). Decode is true for a
// one-token generation step.
type BatchEntry struct {
	NewTokens int
	Context   int
	Decode    bool
}

// StepModel gives the duration of one engine step (forward pass) in ns.
type StepModel interface {
	StepTime(batch []BatchEntry) int64
}

// Roofline is the recommended step-time model of B.3:
//
//	t_step = T0 + t_req·B + max(T_mem, T_cmp) + T_tp
//
// with the BLIS-derived constants of DefaultRoofline. The coefficients are
// data: presets set them and users may override any of them. The replica
// it models (model, GPU, TP, KV dtype) comes from the preset
// (Preset.Model binds it).
type Roofline struct {
	// T0 = LayerUs·L + StepUs (BLIS β5, β7).
	LayerUs float64 `json:"layer_us"`
	StepUs  float64 `json:"step_us"`
	// ReqUs is t_req per scheduled sequence (BLIS β6).
	ReqUs float64 `json:"req_us"`
	// Bandwidth efficiencies for weight and KV reads (1/β3, 1/β2b).
	EtaWeights float64 `json:"eta_weights"`
	EtaKV      float64 `json:"eta_kv"`
	// MFU of steps with prefill tokens and of decode-only steps; 0 takes
	// the GPU's BLIS-calibrated value (DefaultMFU).
	MFUPrefill float64 `json:"mfu_prefill,omitempty"`
	MFUDecode  float64 `json:"mfu_decode,omitempty"`
	// TP all-reduce: bandwidth ratio NVLink/HBM and per-all-reduce latency.
	AllReduceBWRatio float64 `json:"all_reduce_bw_ratio"`
	AllReduceUs      float64 `json:"all_reduce_us"`
	// Multiplier scales the whole step (calibration knob; 1 = as modelled).
	Multiplier float64 `json:"multiplier"`

	c rooflineConsts // set by Bind
}

// rooflineConsts are the per-replica quantities of B.3, computed once.
type rooflineConsts struct {
	bound                 bool
	layers, hidden, tp    float64
	wBytes                float64 // weight bytes read per step per GPU
	kvPerToken            float64 // KV bytes per token per GPU
	linFlops, lmHeadFlops float64 // per new token, per sequence (per GPU)
	attnFlops             float64 // per (query, context) token pair (per GPU)
	bw, peakFlops         float64 // bytes/s, FLOP/s
	mfuPrefill, mfuDecode float64
}

// DefaultRoofline returns the BLIS trained-physics constants (B.2/B.3): β5
// 32.09546717 µs/layer, β7 126.024825 µs/step, β6 4.41684444 µs/request,
// η_w = 1/β3, η_kv = 1/β2b; all-reduce at 0.27 of HBM bandwidth plus an
// estimated 8 µs latency each.
func DefaultRoofline() Roofline {
	return Roofline{
		LayerUs: 32.09546717, StepUs: 126.024825, ReqUs: 4.41684444,
		EtaWeights: 1 / 1.36252915, EtaKV: 1 / 1.94710771,
		AllReduceBWRatio: 0.27, AllReduceUs: 8,
		Multiplier: 1,
	}
}

// DefaultMFU returns the roofline's MFU for a GPU of the catalogue (BLIS
// hardware_config.json, B.2: mfuPrefill, mfuDecode); GPUs BLIS did not
// calibrate take the H100's.
func DefaultMFU(g *arch.GPU) (prefill, decode float64) {
	switch g.Name {
	case "A100-80GB", "A100-40GB":
		return 0.38, 0.18
	case "L40S":
		return 0.32, 0.08
	}
	return 0.45, 0.30
}

// Bind sets the replica the model describes: model m on tensor-parallel
// GPUs g with kvElem bytes per cached K or V element. B.1's quantities:
// weights read per step (LinearWeightBytes + lm_head, all experts: a batch
// touches most of them), KV bytes per token per GPU, linear FLOPs of the
// active parameters per new token, lm_head FLOPs per sequence, attention
// FLOPs per token pair. GEMMs run at the FP8 peak for FP8 checkpoints.
func (r *Roofline) Bind(m *arch.Model, g *arch.GPU, tp, kvElem int) {
	t := float64(max(tp, 1))
	d, V := float64(m.Hidden), float64(m.Vocab)
	r.c = rooflineConsts{
		bound:  true,
		layers: float64(m.Layers), hidden: d, tp: t,
		wBytes:      (m.LinearWeightBytes() + m.LMHeadBytes()) / t,
		kvPerToken:  float64(m.KVBytesPerToken(kvElem, tp)),
		linFlops:    2 * float64(m.LinearParams()) / t,
		lmHeadFlops: 2 * d * V / t,
		attnFlops:   m.AttentionFLOPsPerPair() / t,
		bw:          g.MemoryBandwidthTBps * 1e12,
		peakFlops:   g.TFLOPS(m.Quant.Float && m.Quant.WeightBits == 8) * 1e12,
	}
	r.c.mfuPrefill, r.c.mfuDecode = DefaultMFU(g)
	if r.MFUPrefill > 0 {
		r.c.mfuPrefill = r.MFUPrefill
	}
	if r.MFUDecode > 0 {
		r.c.mfuDecode = r.MFUDecode
	}
}

// StepTime implements StepModel (B.3). The roofline must be bound (Bind).
func (r *Roofline) StepTime(batch []BatchEntry) int64 {
	if len(batch) == 0 {
		return 0
	}
	c := &r.c
	if !c.bound {
		panic("replica: Roofline.StepTime before Bind")
	}
	var nNew, kvTokens, attn float64
	prefill := false
	for _, e := range batch {
		n, ctx := float64(e.NewTokens), float64(e.Context)
		nNew += n
		kvTokens += ctx + n // K: all KV touched this step
		if e.Decode {
			attn += ctx
		} else {
			prefill = true
			attn += n * (ctx + n/2)
		}
	}
	B := float64(len(batch))
	L, d, tp := c.layers, c.hidden, c.tp
	tMem := c.wBytes/(c.bw*r.EtaWeights) + c.kvPerToken*kvTokens/(c.bw*r.EtaKV)
	mfu := c.mfuDecode
	if prefill {
		mfu = c.mfuPrefill
	}
	flops := c.linFlops*nNew + c.lmHeadFlops*B + c.attnFlops*attn
	tCmp := flops / (c.peakFlops * mfu)
	sec := (r.LayerUs*L+r.StepUs)*1e-6 + r.ReqUs*1e-6*B + max(tMem, tCmp)
	if tp > 1 {
		sec += 2*L*nNew*d*2*2*(tp-1)/tp/(r.AllReduceBWRatio*c.bw) + 2*L*r.AllReduceUs*1e-6
	}
	mult := r.Multiplier
	if mult == 0 {
		mult = 1
	}
	return int64(sec * mult * 1e9)
}

// Linear is the simple model for users with their own calibration:
// a fixed overhead per step, a cost per uncached prompt token computed and a
// cost per decoding sequence.
type Linear struct {
	StepUs         float64 `json:"step_us"`
	PrefillTokenUs float64 `json:"prefill_token_us"`
	DecodeSeqUs    float64 `json:"decode_seq_us"`
}

// StepTime implements StepModel.
func (l *Linear) StepTime(batch []BatchEntry) int64 {
	if len(batch) == 0 {
		return 0
	}
	us := l.StepUs
	for _, e := range batch {
		if e.Decode {
			us += l.DecodeSeqUs
		} else {
			us += l.PrefillTokenUs * float64(e.NewTokens)
		}
	}
	return int64(us * 1e3)
}
