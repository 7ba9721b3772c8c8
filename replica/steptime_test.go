package replica

import (
	"math"
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
		minBlk, maxBlk  int // B.3: 8B/H100 ≈26.3k, 70B TP4 ≈30k
		tokens, maxSeqs int
	}{
		{"llama-3.1-8b-h100", 26000, 26600, 8192, 1024},
		{"llama-3.1-8b-a100", 26000, 26600, 2048, 256},
		{"llama-3.1-70b-h100-tp4", 29500, 30900, 8192, 1024},
	}
	for _, tc := range tests {
		p, err := LookupPreset(tc.preset)
		if err != nil {
			t.Fatal(err)
		}
		e := p.Engine
		if e.NumGPUBlocks < tc.minBlk || e.NumGPUBlocks > tc.maxBlk || e.MaxNumBatchedTokens != tc.tokens || e.MaxNumSeqs != tc.maxSeqs || e.BlockSize != 16 {
			t.Errorf("%s: engine %+v", tc.preset, e)
		}
	}
	if _, err := LookupPreset("nope"); err == nil {
		t.Error("unknown preset accepted")
	}
}

func TestPresetOverrides(t *testing.T) {
	p, _ := LookupPreset("llama-3.1-8b-h100")
	q, err := p.WithOverrides([]byte("engine:\n  numGpuBlocks: 1000\n  maxNumSeqs: 8\nroofline:\n  multiplier: 2\n"))
	if err != nil {
		t.Fatal(err)
	}
	if q.Engine.NumGPUBlocks != 1000 || q.Engine.MaxNumSeqs != 8 || q.Engine.MaxNumBatchedTokens != 8192 || q.Roofline.Multiplier != 2 {
		t.Fatalf("overrides not applied field by field: %+v", q.Engine)
	}
	m1, _ := p.Model()
	m2, _ := q.Model()
	b := decodeBatch(1, 1024)
	if got, want := m2.StepTime(b), 2*m1.StepTime(b); got < want-2 || got > want+2 {
		t.Fatalf("multiplier 2: %d vs %d", got, want)
	}
	for _, bad := range []string{"engine:\n  bogus: 1\n", "engine:\n  numGpuBlocks: 1\n", "stepModel: [\n"} {
		if _, err := p.WithOverrides([]byte(bad)); err == nil {
			t.Errorf("override %q accepted", bad)
		}
	}
	q.StepModel = "quadratic"
	if _, err := q.Model(); err == nil {
		t.Error("unknown step model accepted")
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
