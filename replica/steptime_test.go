package replica

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func decodeBatch(b, ctx int) []BatchEntry {
	out := make([]BatchEntry, b)
	for i := range out {
		out[i] = BatchEntry{NewTokens: 1, Context: ctx, Decode: true}
	}
	return out
}

// TestPresetsReproduceB3Table checks the presets against the figures of
// vllm-engine.md B.3 (decode steps at batch 1/32/128 with 1k/1k/2k context,
// and a 2048-token chunk without cache and after 6144 cached tokens), within
// 5%.
func TestPresetsReproduceB3Table(t *testing.T) {
	tests := []struct {
		preset string
		wantMs [5]float64 // B=1, B=32, B=128, chunk cold, chunk after 6144
	}{
		{"llama-3.1-8b-h100", [5]float64{7.3, 9.9, 27.8, 67.8, 82.7}},
		{"llama-3.1-8b-a100", [5]float64{11.3, 15.4, 44.6, 252, 307}},
		{"llama-3.1-70b-h100-tp4", [5]float64{18.2, 20.0, 31.7, 173, 192}},
	}
	for _, tc := range tests {
		t.Run(tc.preset, func(t *testing.T) {
			p, err := LookupPreset(tc.preset)
			if err != nil {
				t.Fatal(err)
			}
			p.StepModel = "roofline" // the B.3 model (presets default to calibrated)
			m, err := p.Model()
			if err != nil {
				t.Fatal(err)
			}
			batches := [5][]BatchEntry{
				decodeBatch(1, 1024), decodeBatch(32, 1024), decodeBatch(128, 2048),
				{{NewTokens: 2048}}, {{NewTokens: 2048, Context: 6144}},
			}
			for i, b := range batches {
				got := float64(m.StepTime(b)) / 1e6
				if math.Abs(got-tc.wantMs[i])/tc.wantMs[i] > 0.05 {
					t.Errorf("case %d: %.2f ms, want %.2f ms ±5%%", i, got, tc.wantMs[i])
				}
			}
		})
	}
}

func TestPresetKVCapacityAndDefaults(t *testing.T) {
	tests := []struct {
		preset          string
		minBlk, maxBlk  int
		tokens, maxSeqs int
	}{
		// vLLM-like capacity (docs/latency.md): the sampler's dummy run for
		// 1024 sequences × 128k vocabulary takes ~6 GiB on the H100 presets.
		{"llama-3.1-8b-h100", 25000, 25800, 8192, 1024},
		{"llama-3.1-8b-a100", 27600, 28400, 2048, 256},
		{"llama-3.1-70b-h100-tp4", 25400, 26200, 8192, 1024},
	}
	for _, tc := range tests {
		p, err := LookupPreset(tc.preset)
		if err != nil {
			t.Fatal(err)
		}
		e, err := p.EngineConfig()
		if err != nil {
			t.Fatal(err)
		}
		if e.NumGPUBlocks < tc.minBlk || e.NumGPUBlocks > tc.maxBlk || e.MaxNumBatchedTokens != tc.tokens || e.MaxNumSeqs != tc.maxSeqs ||
			e.BlockSize != 16 || e.MaxModelLen != 131072 || e.DisablePrefixCaching {
			t.Errorf("%s: engine %+v", tc.preset, e)
		}
	}
	if _, err := LookupPreset("nope"); err == nil || !strings.Contains(err.Error(), "llama-3.1-8b-h100") {
		t.Errorf("unknown preset: %v", err)
	}
}

func TestPresetOverrides(t *testing.T) {
	p, _ := LookupPreset("llama-3.1-8b-h100")
	p.StepModel = "roofline"
	q, err := p.WithOverrides([]byte("engine:\n  num_gpu_blocks_override: 1000\n  max_num_seqs: 8\nroofline:\n  multiplier: 2\n"))
	if err != nil {
		t.Fatal(err)
	}
	e, err := q.EngineConfig()
	if err != nil {
		t.Fatal(err)
	}
	if e.NumGPUBlocks != 1000 || e.MaxNumSeqs != 8 || e.MaxNumBatchedTokens != 8192 || q.Roofline.Multiplier != 2 {
		t.Fatalf("overrides not applied field by field: %+v", e)
	}
	m1, _ := p.Model()
	m2, _ := q.Model()
	b := decodeBatch(1, 1024)
	if got, want := m2.StepTime(b), 2*m1.StepTime(b); got < want-2 || got > want+2 {
		t.Fatalf("multiplier 2: %d vs %d", got, want)
	}
	bad := []struct{ src, want string }{
		{"engine:\n  bogus: 1\n", `unknown field "bogus"`},
		{"engine:\n  num_gpu_blocks_override: 1\n", "num_gpu_blocks_override must be at least 2"},
		{"engine:\n  numGpuBlocks: 1000\n", `unknown field "numGpuBlocks"; did you mean num_gpu_blocks_override?`},
		{"engine:\n  max_num_seq: 8\n", `unknown field "max_num_seq"; did you mean max_num_seqs?`},
		{"step_model: [\n", "preset llama-3.1-8b-h100: "},
		{"gpu: TPU\n", `gpu: unknown GPU "TPU"`},
		{"tensor_parallel_size: 3\n", "tensor_parallel_size 3 does not divide num_attention_heads 32"},
		{"engine:\n  gpu_memory_utilization: 1.5\n", "gpu_memory_utilization must be in (0, 1]"},
	}
	for _, tc := range bad {
		if _, err := p.WithOverrides([]byte(tc.src)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("override %q: %v, want %q", tc.src, err, tc.want)
		}
	}
	q.StepModel = "quadratic"
	if _, err := q.Model(); err == nil {
		t.Error("unknown step model accepted")
	}
	// Changing the GPU or TP resolves again, and the capacity follows.
	r, err := p.WithOverrides([]byte("gpu: H200\n"))
	if err != nil {
		t.Fatal(err)
	}
	if r.GPU.Name != "H200" {
		t.Fatalf("gpu %s", r.GPU.Name)
	}
	e1, _ := p.EngineConfig()
	e2, _ := r.EngineConfig()
	if e2.NumGPUBlocks < 2*e1.NumGPUBlocks {
		t.Errorf("H200 %d blocks vs H100 %d", e2.NumGPUBlocks, e1.NumGPUBlocks)
	}
	// An engine override must not leak into the preset it came from.
	if _, err := p.WithOverrides([]byte("engine: {enable_prefix_caching: false}")); err != nil {
		t.Fatal(err)
	}
	if e, _ := p.EngineConfig(); e.DisablePrefixCaching {
		t.Error("override changed the original preset")
	}
}

func TestLinearModel(t *testing.T) {
	l := &Linear{StepUs: 100, PrefillTokenUs: 2, DecodeSeqUs: 10}
	// 100 + 2·50 + 10·3 = 230 µs
	got := l.StepTime([]BatchEntry{{NewTokens: 50}, {NewTokens: 1, Decode: true}, {NewTokens: 1, Decode: true}, {NewTokens: 1, Decode: true}})
	if got != 230_000 {
		t.Fatalf("linear step = %d ns, want 230000", got)
	}
	if l.StepTime(nil) != 0 {
		t.Fatal("empty batch has a duration")
	}
}

// legacyRoofline is the B.3 roofline as it was written before models came
// from config.json (ModelSpec/GPUSpec with the shapes and BLIS GPU figures
// inline). TestRooflineUnchanged holds the presets to it exactly.
func legacyRoofline(L, d, h, kvh, hd, ff, V int, tflops, bwT, mfuP, mfuD float64, tpI int, batch []BatchEntry) int64 {
	r := DefaultRoofline()
	tp := float64(max(tpI, 1))
	fL := float64(L)
	var nNew, kvTokens, attn float64
	prefill := false
	for _, e := range batch {
		n, c := float64(e.NewTokens), float64(e.Context)
		nNew += n
		kvTokens += c + n
		if e.Decode {
			attn += c
		} else {
			prefill = true
			attn += n * (c + n/2)
		}
	}
	B := float64(len(batch))
	fd, fV := float64(d), float64(V)
	dkv := float64(kvh * hd)
	pLin := fL * (fd*(2*fd+2*dkv) + 3*fd*float64(ff))
	bw := bwT * 1e12
	wBytes := (pLin + fd*fV) * 2 / tp
	kvbpt := float64(2 * L * kvh * hd * 2)
	tMem := wBytes/(bw*r.EtaWeights) + kvbpt/tp*kvTokens/(bw*r.EtaKV)
	mfu := mfuD
	if prefill {
		mfu = mfuP
	}
	flops := 2*pLin/tp*nNew + 2*fd*fV/tp*B + 4*fL*float64(h*hd)/tp*attn
	tCmp := flops / (tflops * 1e12 * mfu)
	sec := (r.LayerUs*fL+r.StepUs)*1e-6 + r.ReqUs*1e-6*B + max(tMem, tCmp)
	if tpI > 1 {
		sec += 2*fL*nNew*fd*2*2*(tp-1)/tp/(r.AllReduceBWRatio*bw) + 2*fL*r.AllReduceUs*1e-6
	}
	return int64(sec * 1e9)
}

// TestRooflineUnchanged: the presets' step times are bit-identical to the
// roofline before the model and GPU came from arch (regression baselines
// depend on it).
func TestRooflineUnchanged(t *testing.T) {
	type shape struct{ L, d, h, kvh, hd, ff, V int }
	l8, l70 := shape{32, 4096, 32, 8, 128, 14336, 128256}, shape{80, 8192, 64, 8, 128, 28672, 128256}
	tests := []struct {
		preset                 string
		s                      shape
		tflops, bw, mfuP, mfuD float64
		tp                     int
	}{
		{"llama-3.1-8b-h100", l8, 989.5, 3.35, 0.45, 0.30, 1},
		{"llama-3.1-8b-a100", l8, 312, 2.039, 0.38, 0.18, 1},
		{"llama-3.1-70b-h100-tp4", l70, 989.5, 3.35, 0.45, 0.30, 4},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range tests {
		p, err := LookupPreset(tc.preset)
		if err != nil {
			t.Fatal(err)
		}
		p.StepModel = "roofline"
		m, err := p.Model()
		if err != nil {
			t.Fatal(err)
		}
		for range 2000 {
			batch := make([]BatchEntry, 1+rng.IntN(64))
			for i := range batch {
				if rng.IntN(3) == 0 {
					batch[i] = BatchEntry{NewTokens: 1 + rng.IntN(4096), Context: rng.IntN(32768)}
				} else {
					batch[i] = BatchEntry{NewTokens: 1, Context: rng.IntN(32768), Decode: true}
				}
			}
			s := tc.s
			want := legacyRoofline(s.L, s.d, s.h, s.kvh, s.hd, s.ff, s.V, tc.tflops, tc.bw, tc.mfuP, tc.mfuD, tc.tp, batch)
			if got := m.StepTime(batch); got != want {
				t.Fatalf("%s: step %d ns, legacy roofline %d ns (batch %v)", tc.preset, got, want, batch)
			}
		}
	}
}

// TestPresetFilesRoundTrip: a preset written out as JSON (or YAML) and
// read back is the same replica: same engine, same step times.
func TestPresetFilesRoundTrip(t *testing.T) {
	for _, p := range Presets() {
		q, err := p.WithOverrides([]byte("engine: {kv_cache_dtype: fp8, enable_prefix_caching: false}\ngpu_overrides: {memory_gb: 94}\nroofline: {mfu_prefill: 0.5}\n"))
		if err != nil {
			t.Fatal(err)
		}
		for _, orig := range []Preset{p, q} {
			js, err := json.Marshal(orig)
			if err != nil {
				t.Fatal(err)
			}
			back, err := ParsePreset(js, orig.Name+".json", "", nil)
			if err != nil {
				t.Fatalf("%s: %v\n%s", orig.Name, err, js)
			}
			e1, err1 := orig.EngineConfig()
			e2, err2 := back.EngineConfig()
			if err1 != nil || err2 != nil || e1 != e2 || back.Name != orig.Name || back.GPU.MemoryGB != orig.GPU.MemoryGB {
				t.Fatalf("%s: %+v %v, read back %+v %v", orig.Name, e1, err1, e2, err2)
			}
			m1, _ := orig.Model()
			m2, _ := back.Model()
			for _, b := range [][]BatchEntry{decodeBatch(7, 3000), {{NewTokens: 1500, Context: 500}}} {
				if m1.StepTime(b) != m2.StepTime(b) {
					t.Fatalf("%s: step time changed by the round trip", orig.Name)
				}
			}
		}
	}
}
