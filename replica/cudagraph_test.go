package replica

import (
	"math"
	"testing"

	"github.com/eppsim/eppsim/arch"
)

// TestVLLMCUDAGraphSizes: the largest captured size of vLLM's default
// list, [1, 2, 4] + range(8, min(cap+1, 256), 8) + range(256, cap+1, 16)
// with cap = min(2·max_num_seqs, 512, max_num_batched_tokens), worked by
// hand, and the size each step runs as.
func TestVLLMCUDAGraphSizes(t *testing.T) {
	for _, tc := range []struct {
		seqs, tokens, largest int
	}{
		{128, 2048, 256},  // cap 256: ..., 248, 256
		{1024, 8192, 512}, // cap 512: 256, 272, ..., 512
		{256, 300, 288},   // cap 300: 256, 272, 288
		{60, 2048, 120},   // cap 120: 8, 16, ..., 120
		{62, 2048, 120},   // cap 124: range(8, 125, 8) ends at 120
		{2, 2048, 4},      // cap 4: 1, 2, 4
		{1, 2048, 2},      // cap 2: 1, 2
		{128, 1, 1},       // cap 1: 1
	} {
		if got := vllmCUDAGraphSizes(tc.seqs, tc.tokens).largest; got != tc.largest {
			t.Errorf("max_num_seqs %d, max_num_batched_tokens %d: largest captured size %d, want %d", tc.seqs, tc.tokens, got, tc.largest)
		}
	}
	g := vllmCUDAGraphSizes(128, 2048) // largest 256
	for n, want := range map[int]int{0: 0, 1: 1, 2: 2, 3: 4, 4: 4, 5: 8, 8: 8, 9: 16, 17: 24, 248: 248, 249: 256, 256: 256, 257: 257, 2048: 2048} {
		if got := g.padded(n); got != want {
			t.Errorf("largest 256: %d tokens run as %d, want %d", n, got, want)
		}
	}
	big := vllmCUDAGraphSizes(1024, 8192) // largest 512
	for n, want := range map[int]int{257: 272, 272: 272, 273: 288, 500: 512, 512: 512, 513: 513} {
		if got := big.padded(n); got != want {
			t.Errorf("largest 512: %d tokens run as %d, want %d", n, got, want)
		}
	}
	if got := (cudaGraphSizes{}).padded(7); got != 7 {
		t.Errorf("no graphs: 7 tokens run as %d, want 7", got)
	}
}

// TestCalibratedCUDAGraphPadding: a step's padded rows reach experts and
// cost linear FLOPs and all-reduce bytes, but no attention. Llama-4-Scout
// (top-1 of 16) on 2×H100, a decode of 9 sequences, runs as 16 rows: by
// hand, the expected experts reached rise from 16·(1 − (15/16)^9) = 7.05
// to 16·(1 − (15/16)^16) = 10.30 per MoE layer, and the step's weight
// read by that many experts' bytes.
func TestCalibratedCUDAGraphPadding(t *testing.T) {
	m, g := mustModel(t, "RedHatAI/Llama-4-Scout-17B-16E-Instruct-FP8-dynamic"), mustGPU(t, "H100")
	c := bareCoefficients()
	plain, err := NewCalibratedModel(c, m, &g, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	padded, _ := NewCalibratedModel(c, m, &g, 2, 1)
	padded.padToCUDAGraphs(vllmCUDAGraphSizes(128, 2048))

	reached := func(n float64) float64 { return 16 * (1 - math.Pow(15.0/16, n)) }
	if math.Abs(reached(9)-7.049) > 0.001 || math.Abs(reached(16)-10.303) > 0.005 {
		t.Fatalf("hand figures: %.3f, %.3f", reached(9), reached(16))
	}
	// Memory-bound (9 decodes, no context): the linear term is the weight
	// read, and only the all-reduce's payload grows besides it.
	lin := func(cm *CalibratedModel, rows float64) float64 {
		w := cm.denseBytes + cm.moeLayers*reached(rows)*cm.expertBytes
		return blend(w/(cm.bw*c.EtaWeights), (rows*cm.linFlops+9*cm.lmFlops)/(cm.peak*c.MFU), c.RooflineExponent)
	}
	ar := func(cm *CalibratedModel, rows float64) float64 {
		return 2 * cm.layers * cm.group.seconds(rows*cm.hidden*2, 0, c.EtaLink)
	}
	if got, want := plain.seconds(9, 9, 0, 0), lin(plain, 9)+ar(plain, 9); math.Abs(got-want) > 1e-12 {
		t.Errorf("unpadded: %.9f s, want %.9f s", got, want)
	}
	if got, want := padded.seconds(9, 9, 0, 0), lin(padded, 16)+ar(padded, 16); math.Abs(got-want) > 1e-12 {
		t.Errorf("padded to 16: %.9f s, want %.9f s", got, want)
	}
	// The padding adds (10.30 − 7.05) experts' bytes in each MoE layer.
	extra := padded.moeLayers * (reached(16) - reached(9)) * padded.expertBytes
	if d := padded.seconds(9, 9, 0, 0) - plain.seconds(9, 9, 0, 0); d < 0.9*extra/(padded.bw*c.EtaWeights) {
		t.Errorf("padding adds %.6f s, less than the extra experts' read %.6f s", d, extra/(padded.bw*c.EtaWeights))
	}
	// Attention does not see the padded rows: the KV term is the same.
	kvPlain := plain.seconds(9, 9, 9*1000, 9*1000) - plain.seconds(9, 9, 0, 0)
	kvPadded := padded.seconds(9, 9, 9*1000, 9*1000) - padded.seconds(9, 9, 0, 0)
	if math.Abs(kvPlain-kvPadded) > 1e-12 {
		t.Errorf("attention: %.9f s padded, %.9f s unpadded", kvPadded, kvPlain)
	}
	// Above the largest captured size (256) a step runs unpadded.
	if a, b := padded.seconds(1, 2048, 0, 0), plain.seconds(1, 2048, 0, 0); a != b {
		t.Errorf("a 2,048-token chunk: %.9f s padded, %.9f s unpadded", a, b)
	}
}

// TestPresetPadsVLLMSteps: a vLLM replica pads its steps to the capture
// list of its own max_num_seqs and max_num_batched_tokens; an SGLang
// replica does not (its buckets are its own, cudagraph.go). Llama-4-Scout
// on 2×H100, nine decodes: the difference between the two is exactly the
// padding's, 9 rows against 16 (both run the custom all-reduce at TP 2).
func TestPresetPadsVLLMSteps(t *testing.T) {
	vllm := mustPreset(t, "RedHatAI/Llama-4-Scout-17B-16E-Instruct-FP8-dynamic", "H100", 2)
	vllm.Engine.MaxNumSeqs, vllm.Engine.MaxNumBatchedTokens = 128, 2048
	bare := *vllm.Calibration
	bare.Offsets = nil // the vLLM deployment's step offset is not the padding
	vllm = vllm.WithCalibration(bare, "bare")
	a, b := vllmAndSGLangModels(t, vllm)
	m, g := vllm.Arch, vllm.GPU
	elem, err := m.KVElementBytes(vllm.Engine.KVCacheDtype)
	if err != nil {
		t.Fatal(err)
	}
	co := vllm.Calibration.Coefficients
	plain, _ := NewCalibratedModel(co, m, &g, 2, elem)
	padded, _ := NewCalibratedModel(co, m, &g, 2, elem)
	padded.padToCUDAGraphs(cudaGraphSizes{largest: 256})
	batch := repeat(BatchEntry{NewTokens: 1, Context: 1000, Decode: true}, 9)
	want := padded.StepTime(batch) - plain.StepTime(batch)
	if want <= 0 {
		t.Fatalf("padding 9 rows to 16 adds %d ns", want)
	}
	if got := a.StepTime(batch) - b.StepTime(batch); got != want {
		t.Errorf("vLLM's step is %d ns slower than SGLang's, want %d ns (the padding)", got, want)
	}
}

// TestCalibratedMXFP4: gpt-oss-20b's routed experts are read at 4.25 bits
// a weight (MXFP4 and its scales), one expert of one layer at TP 1 being
// 3·2880·2880·4.25/8 = 13,219,200 bytes; attention, router and lm_head at
// 2 bytes; and its matrix multiplies run at the BF16 peak, as vLLM's
// Hopper MXFP4 kernels compute in BF16 (w4a16), not at FP8's.
func TestCalibratedMXFP4(t *testing.T) {
	m, err := arch.ResolveModel("gpt-oss-20b.json", "../arch/testdata")
	if err != nil {
		t.Fatal(err)
	}
	g := mustGPU(t, "H100")
	c, err := NewCalibratedModel(testCoefficients(), m, &g, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if c.expertBytes != 13_219_200 {
		t.Errorf("one expert %.0f bytes, want 13219200", c.expertBytes)
	}
	p := m.Params()
	if want := 2 * float64(p.Attention+p.Router+p.LMHead); c.denseBytes != want {
		t.Errorf("dense bytes %.0f, want %.0f", c.denseBytes, want)
	}
	if c.peak != g.TFLOPS(false)*1e12 || g.TFLOPS(false) == g.TFLOPS(true) {
		t.Errorf("peak %.3g FLOP/s, want the BF16 %.3g", c.peak, g.TFLOPS(false)*1e12)
	}
}

// TestSlidingWindowKV: gpt-oss-20b, 12 of its 24 layers on a 128-token
// window. A vLLM block is the hybrid manager's group of 12 layers, 2 B ×
// 2 (K and V) × 8 heads × 64 × 12 layers × 16 tokens = 393,216 bytes (the
// whole model's would be twice that); a decode at context 1,000 reads
// half its KV as 1,001 tokens and half as 129, and attends 1,001 and 128
// pairs.
func TestSlidingWindowKV(t *testing.T) {
	m, err := arch.ResolveModel("gpt-oss-20b.json", "../arch/testdata")
	if err != nil {
		t.Fatal(err)
	}
	g := mustGPU(t, "H100")
	capacity, err := ComputeKVCapacity(m, &g, 1, EngineArgs{MaxNumSeqs: 128, MaxNumBatchedTokens: 2048})
	if err != nil {
		t.Fatal(err)
	}
	if capacity.BytesPerBlock != 393_216 || capacity.BytesPerToken != 2*2*8*64*24 {
		t.Errorf("block %d bytes, token %d bytes; want 393216 and %d", capacity.BytesPerBlock, capacity.BytesPerToken, 2*2*8*64*24)
	}
	// --disable-hybrid-kv-cache-manager (and KV events, vllm-engine.md
	// A.7): blocks of all 24 layers.
	full, err := ComputeKVCapacity(m, &g, 1, EngineArgs{MaxNumSeqs: 128, MaxNumBatchedTokens: 2048, DisableHybridKVCacheManager: true})
	if err != nil || full.BytesPerBlock != 2*393_216 {
		t.Errorf("without the hybrid manager: block %d bytes (%v), want %d", full.BytesPerBlock, err, 2*393_216)
	}
	c, err := NewCalibratedModel(testCoefficients(), m, &g, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	got := c.StepTime([]BatchEntry{{NewTokens: 1, Context: 1000, Decode: true}})
	want := int64(c.seconds(1, 1, 0.5*1001+0.5*129, 0.5*1001+0.5*128)*1e9 + 0.5)
	if got != want {
		t.Errorf("decode at 1000: %d ns, want %d ns", got, want)
	}
	// Within the window nothing changes.
	got = c.StepTime([]BatchEntry{{NewTokens: 1, Context: 100, Decode: true}})
	if want := int64(c.seconds(1, 1, 101, 101)*1e9 + 0.5); got != want {
		t.Errorf("decode at 100: %d ns, want %d ns", got, want)
	}
	// A 512-token chunk after 1,000: full layers read 1,512 tokens and
	// attend 512·(1000 + 256.5) pairs; sliding ones read 128 + 512 and
	// attend at most 128 back, 512·128.
	got = c.StepTime([]BatchEntry{{NewTokens: 512, Context: 1000}})
	if want := int64(c.seconds(1, 512, 0.5*1512+0.5*640, 0.5*512*1256.5+0.5*512*128)*1e9 + 0.5); got != want {
		t.Errorf("chunk after 1000: %d ns, want %d ns", got, want)
	}
}
