package replica

import "fmt"

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

// ModelSpec is a transformer's shape (vllm-engine.md B.1 notation).
type ModelSpec struct {
	Name       string `json:"name"`
	Layers     int    `json:"layers"`     // L
	Hidden     int    `json:"hidden"`     // d
	Heads      int    `json:"heads"`      // h
	KVHeads    int    `json:"kvHeads"`    // h_kv
	HeadDim    int    `json:"headDim"`    // d_h
	FFN        int    `json:"ffn"`        // d_ff
	Vocab      int    `json:"vocab"`      // V
	TiedEmbeds bool   `json:"tiedEmbeds"` // lm_head shares the input embedding
	MaxLen     int    `json:"maxModelLen"`
}

// LinearParams is P_lin = L·[d(2d + 2·d_kv) + 3·d·d_ff] (B.1).
func (m ModelSpec) LinearParams() float64 {
	d, dkv := float64(m.Hidden), float64(m.KVHeads*m.HeadDim)
	return float64(m.Layers) * (d*(2*d+2*dkv) + 3*d*float64(m.FFN))
}

// Params is the parameter count: linear layers plus embedding and lm_head.
func (m ModelSpec) Params() float64 {
	emb := float64(m.Hidden) * float64(m.Vocab)
	if m.TiedEmbeds {
		return m.LinearParams() + emb
	}
	return m.LinearParams() + 2*emb
}

// KVBytesPerToken is 2·L·h_kv·d_h·2 bytes (BF16 K and V), before TP (B.1).
func (m ModelSpec) KVBytesPerToken() float64 {
	return float64(2 * m.Layers * m.KVHeads * m.HeadDim * 2)
}

// GPUSpec is one accelerator class (B.2, BLIS hardware_config).
type GPUSpec struct {
	Name       string  `json:"name"`
	TFlops     float64 `json:"tflops"`     // peak BF16 TFLOP/s
	BandwidthT float64 `json:"bwTBs"`      // HBM TB/s
	MFUPrefill float64 `json:"mfuPrefill"` // MFU for steps with prefill tokens
	MFUDecode  float64 `json:"mfuDecode"`  // MFU for decode-only steps
	MemoryGiB  float64 `json:"memoryGiB"`
	// LargeClass selects vLLM's larger batch defaults: ≥70 GiB and not A100
	// (A.5).
	LargeClass bool `json:"largeClass"`
}

// Roofline is the recommended step-time model of B.3:
//
//	t_step = T0 + t_req·B + max(T_mem, T_cmp) + T_tp
//
// with the BLIS-derived constants below. All fields are data: presets set
// them and users may override any of them.
type Roofline struct {
	Model ModelSpec `json:"model"`
	GPU   GPUSpec   `json:"gpu"`
	TP    int       `json:"tp"`
	// T0 = LayerUs·L + StepUs (BLIS β5, β7).
	LayerUs float64 `json:"layerUs"`
	StepUs  float64 `json:"stepUs"`
	// ReqUs is t_req per scheduled sequence (BLIS β6).
	ReqUs float64 `json:"reqUs"`
	// Bandwidth efficiencies for weight and KV reads (1/β3, 1/β2b).
	EtaWeights float64 `json:"etaWeights"`
	EtaKV      float64 `json:"etaKV"`
	// TP all-reduce: bandwidth ratio NVLink/HBM and per-all-reduce latency.
	AllReduceBWRatio float64 `json:"allReduceBWRatio"`
	AllReduceUs      float64 `json:"allReduceUs"`
	// Multiplier scales the whole step (calibration knob; 1 = as modelled).
	Multiplier float64 `json:"multiplier"`
}

// StepTime implements StepModel (B.3).
func (r *Roofline) StepTime(batch []BatchEntry) int64 {
	if len(batch) == 0 {
		return 0
	}
	m := r.Model
	tp := float64(max(r.TP, 1))
	L := float64(m.Layers)
	var nNew, kvTokens, attn float64
	prefill := false
	for _, e := range batch {
		n, c := float64(e.NewTokens), float64(e.Context)
		nNew += n
		kvTokens += c + n // K: all KV touched this step
		if e.Decode {
			attn += c
		} else {
			prefill = true
			attn += n * (c + n/2)
		}
	}
	B := float64(len(batch))
	d, V := float64(m.Hidden), float64(m.Vocab)
	pLin := m.LinearParams()
	bw := r.GPU.BandwidthT * 1e12
	wBytes := (pLin + d*V) * 2 / tp
	tMem := wBytes/(bw*r.EtaWeights) + m.KVBytesPerToken()/tp*kvTokens/(bw*r.EtaKV)
	mfu := r.GPU.MFUDecode
	if prefill {
		mfu = r.GPU.MFUPrefill
	}
	flops := 2*pLin/tp*nNew + 2*d*V/tp*B + 4*L*float64(m.Heads*m.HeadDim)/tp*attn
	tCmp := flops / (r.GPU.TFlops * 1e12 * mfu)
	sec := (r.LayerUs*L+r.StepUs)*1e-6 + r.ReqUs*1e-6*B + max(tMem, tCmp)
	if r.TP > 1 {
		sec += 2*L*nNew*d*2*2*(tp-1)/tp/(r.AllReduceBWRatio*bw) + 2*L*r.AllReduceUs*1e-6
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
	StepUs         float64 `json:"stepUs"`
	PrefillTokenUs float64 `json:"prefillTokenUs"`
	DecodeSeqUs    float64 `json:"decodeSeqUs"`
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

// KVCapacityBlocks estimates num_gpu_blocks the way BLIS's CalculateKVBlocks
// does (B.3): memory·utilisation minus weights, activations (5.5 GiB for a
// dense model, split across TP ranks) and non-torch memory (0.15 GiB at TP1,
// 0.6 GiB per GPU at TP>1), divided by the bytes of one KV block per GPU.
func KVCapacityBlocks(m ModelSpec, g GPUSpec, tp, blockSize int, gpuMemUtil float64) (int, error) {
	if tp < 1 || blockSize < 1 {
		return 0, fmt.Errorf("kv capacity: tp %d and block size %d must be positive", tp, blockSize)
	}
	const gib = 1 << 30
	nonTorch := 0.15
	if tp > 1 {
		nonTorch = 0.6
	}
	free := g.MemoryGiB*gpuMemUtil*gib - m.Params()*2/float64(tp) - 5.5*gib/float64(tp) - nonTorch*gib
	perBlock := m.KVBytesPerToken() / float64(tp) * float64(blockSize)
	n := int(free / perBlock)
	if n < 2 {
		return 0, fmt.Errorf("kv capacity: model %s does not fit on %d×%s", m.Name, tp, g.Name)
	}
	return n, nil
}
