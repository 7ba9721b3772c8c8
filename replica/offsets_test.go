package replica

import (
	"math"
	"strings"
	"testing"
)

// TestShrunkOffset: exp(Σ log-ratios / (n + 1)), worked by hand.
func TestShrunkOffset(t *testing.T) {
	for _, tc := range []struct {
		name string
		logs []float64
		want float64
	}{
		{"no runs", nil, 1},
		{"one run at 0.9: half its log", []float64{math.Log(0.9)}, math.Sqrt(0.9)},
		{"four runs at 0.8: four fifths", []float64{math.Log(0.8), math.Log(0.8), math.Log(0.8), math.Log(0.8)}, math.Pow(0.8, 0.8)},
		{"0.9 and 1/0.9 cancel", []float64{math.Log(0.9), -math.Log(0.9)}, 1},
	} {
		if got := ShrunkOffset(tc.logs); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestPresetStepOffset: a preset of a deployment its calibration has an
// offset for runs every step × the factor (times StepScale when set), and
// says so in its step model's id; any other deployment (another TP size,
// GPU, engine or weights), or another step model, is untouched; the
// model id matches without regard to case.
func TestPresetStepOffset(t *testing.T) {
	batch := []BatchEntry{{NewTokens: 1, Context: 900, Decode: true}, {NewTokens: 300}}
	mk := func(model, gpu string, tp int) Preset {
		t.Helper()
		p, err := NewPreset(mustModel(t, model), mustGPU(t, gpu), tp)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	stepOf := func(p Preset) int64 {
		t.Helper()
		m, err := p.Model()
		if err != nil {
			t.Fatal(err)
		}
		return m.StepTime(batch)
	}
	bare := DefaultCalibration()
	bare.Offsets = nil
	mk0 := mk
	mk = func(model, gpu string, tp int) Preset { return mk0(model, gpu, tp).WithCalibration(bare, "bare") }
	plain := mk("meta-llama/Llama-2-7b-hf", "H100", 1)
	d := DeploymentOf(&plain)
	if d.Model != "meta-llama/Llama-2-7b-hf" || d.GPU != "H100" || d.TP != 1 || d.Engine != "vllm" || d.Weights != "float16" {
		t.Fatalf("deployment %+v", d)
	}
	cal := DefaultCalibration()
	d.Model = strings.ToUpper(d.Model)
	cal.Offsets = []StepOffset{{Deployment: d, Runs: 4, Factor: 0.9}}
	base := stepOf(plain)
	with := func(p Preset) Preset { return p.WithCalibration(cal, "x") }
	if got, want := stepOf(with(plain)), int64(float64(base)*0.9+0.5); got != want {
		t.Errorf("offset step %d, want %d (%d × 0.9)", got, want, base)
	}
	scaled := with(plain)
	scaled.StepScale = 1.1
	if got, want := stepOf(scaled), int64(float64(base)*0.9*1.1+0.5); got != want {
		t.Errorf("offset and StepScale: %d, want %d", got, want)
	}
	if id := scaled.StepModelID(); !strings.HasSuffix(id, " ×0.99") {
		t.Errorf("step model id %q, want the combined ×0.99", id)
	}
	others := map[string]Preset{"TP 2": mk("meta-llama/Llama-2-7b-hf", "H100", 2), "A100": mk("meta-llama/Llama-2-7b-hf", "A100-80GB", 1)}
	sg := plain
	sg.EngineType = EngineSGLang
	others["SGLang"] = sg
	for name, p := range others {
		if got, want := stepOf(with(p)), stepOf(p); got != want {
			t.Errorf("%s: step %d with the calibration's offsets, %d without", name, got, want)
		}
	}
	roof := with(plain)
	roof.StepModel = "roofline"
	if roof.stepScale() != 1 {
		t.Errorf("the roofline step model takes the calibration's offset")
	}
}

// TestParseCalibrationOffsets: offsets' errors name the field.
func TestParseCalibrationOffsets(t *testing.T) {
	const head = "name: x\ncoefficients: {step_us: 100, layer_us: 1, seq_us: 1, eta_weights: 0.7, eta_kv: 0.7, mfu: 0.5, roofline_exponent: 3, all_reduce_us: 5, eta_link: 0.8, ingest_us: 1000, ingest_jitter: 0.3}\n"
	const ok = "{model: a/b, gpu: H100, tp: 1, engine: vllm, weights: bfloat16, runs: 2, factor: 0.95}"
	for _, tc := range []struct{ body, want string }{
		{"offsets: [" + ok + "]\n", ""},
		{"offsets: [{gpu: H100, tp: 1, engine: vllm, runs: 2, factor: 0.95}]\n", "offsets[0]: model, gpu and engine are required"},
		{"offsets: [" + ok + ", {model: a/b, gpu: H100, tp: 0, engine: vllm, runs: 2, factor: 0.95}]\n", "offsets[1].tp: want at least 1"},
		{"offsets: [{model: a/b, gpu: H100, tp: 1, engine: vllm, runs: 0, factor: 0.95}]\n", "offsets[0].runs: want at least 1"},
		{"offsets: [{model: a/b, gpu: H100, tp: 1, engine: vllm, runs: 2, factor: -1}]\n", "offsets[0].factor: want a positive number"},
		{"folds: [{protocol: load, held_out: x, runs: [r], trained_on: 3, coefficients: {step_us: 100, layer_us: 1, seq_us: 1, eta_weights: 0.7, eta_kv: 0.7, mfu: 0.5, roofline_exponent: 3, all_reduce_us: 5, eta_link: 0.8, ingest_us: 1000, ingest_jitter: 0.3}, offsets: [{model: a/b, gpu: H100, tp: 1, engine: vllm, runs: 1, factor: 0}]}]\n", "folds[0].offsets[0].factor"},
		{"offsets: [{model: a/b, gpu: H100, tp: 1, engine: vllm, runs: 2, factor: 0.9, bias: 1}]\n", `unknown field "bias"`},
	} {
		_, err := ParseCalibration([]byte(head+tc.body), "c.yaml")
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.body, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.body, err, tc.want)
		}
	}
}

// TestParseCalibrationFullBatch: a full-batch factor must be a positive
// number over at least one run; SlowEnd takes the larger of it and the
// ITL factor, and the ITL factor alone without one (or without a
// calibration).
func TestParseCalibrationFullBatch(t *testing.T) {
	const head = "name: x\ncoefficients: {step_us: 100, layer_us: 1, seq_us: 1, eta_weights: 0.7, eta_kv: 0.7, mfu: 0.5, roofline_exponent: 3, all_reduce_us: 5, eta_link: 0.8, ingest_us: 1000, ingest_jitter: 0.3}\n"
	for _, tc := range []struct{ body, want string }{
		{"full_batch: {factor: 1.52, runs: 3}\n", ""},
		{"full_batch: {factor: 0, runs: 3}\n", "full_batch.factor: want a positive number"},
		{"full_batch: {factor: -1.5, runs: 3}\n", "full_batch.factor: want a positive number"},
		{"full_batch: {factor: 1.5, runs: 0}\n", "full_batch.runs: want at least 1"},
		{"full_batch: {factor: 1.5, runs: 1, max: 2}\n", `unknown field "max"`},
	} {
		c, err := ParseCalibration([]byte(head+tc.body), "c.yaml")
		if tc.want == "" {
			if err != nil || c.FullBatch == nil || c.FullBatch.Factor != 1.52 || c.FullBatch.Runs != 3 {
				t.Errorf("%s: %+v, %v", tc.body, c.FullBatch, err)
			}
			if c.SlowEnd(1.1) != 1.52 || c.SlowEnd(1.6) != 1.6 {
				t.Errorf("SlowEnd: %v, %v; want 1.52 and 1.6", c.SlowEnd(1.1), c.SlowEnd(1.6))
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "c.yaml") {
			t.Errorf("%s: got %v, want %q", tc.body, err, tc.want)
		}
	}
	var none *Calibration
	if none.SlowEnd(1.1) != 1.1 || (&Calibration{}).SlowEnd(1.1) != 1.1 {
		t.Error("SlowEnd without a full-batch factor: want the ITL factor")
	}
}
