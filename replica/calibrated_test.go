package replica

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/arch"
)

func testCoefficients() Coefficients {
	return Coefficients{StepUs: 500, LayerUs: 10, SeqUs: 5, EtaWeights: 0.8, EtaKV: 0.5, MFU: 0.5,
		RooflineExponent: 1000, AllReduceUs: 20, EtaLink: 0.5, IngestUs: 1000, PerOutputTokenUs: 0}
}

// bareCoefficients are testCoefficients without fixed costs (step, layer,
// sequence and all-reduce latency), so that a step is its streaming and
// compute terms alone.
func bareCoefficients() Coefficients {
	c := testCoefficients()
	c.StepUs, c.LayerUs, c.SeqUs, c.AllReduceUs = 0, 0, 0, 0
	return c
}

func mustModel(t *testing.T, id string) *arch.Model {
	t.Helper()
	m, err := arch.LookupModel(id)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mustGPU(t *testing.T, name string) arch.GPU {
	t.Helper()
	g, err := arch.DefaultGPUs().Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestCalibratedStepByHand checks the model against the formula of
// docs/latency.md worked by hand from Llama-3.1-8B's published figures:
// 8,030,261,248 parameters of which 2·128256·4096 = 1,050,673,152 are the
// embedding and lm_head and 32·2·4096 + 4096 = 266,240 the norms, so the
// linear layers are 6,979,321,856 weights (13.96 GB in BF16) plus the
// 1.05 GB lm_head read per step; 128 KiB of KV per token; 2·6,979,321,856
// FLOPs per token.
func TestCalibratedStepByHand(t *testing.T) {
	m, g := mustModel(t, "meta-llama/Llama-3.1-8B-Instruct"), mustGPU(t, "H100")
	c := testCoefficients()
	cm, err := NewCalibratedModel(c, m, &g, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	w := (linear + lmHead) * 2
	fixed := (500 + 10*32.0) * 1e-6
	for _, tc := range []struct {
		name  string
		batch []BatchEntry
		want  float64 // seconds
	}{
		{"one decode at 1024 context: memory-bound",
			[]BatchEntry{{NewTokens: 1, Context: 1024, Decode: true}},
			fixed + 5e-6 + w/(bw*0.8) + kvTok*1025/(bw*0.5)},
		{"32 decodes at 2000 context",
			repeat(BatchEntry{NewTokens: 1, Context: 2000, Decode: true}, 32),
			fixed + 32*5e-6 + w/(bw*0.8) + kvTok*2001*32/(bw*0.5)},
		{"a 2048-token prefill chunk: compute-bound",
			[]BatchEntry{{NewTokens: 2048, Context: 0}},
			fixed + 5e-6 + (2048*2*linear+2*lmHead)/peak + math.Max(kvTok*2048/(bw*0.5), 2048*(2048+1)/2.0*4*32*4096/peak)},
	} {
		got := float64(cm.StepTime(tc.batch)) / 1e9
		if math.Abs(got-tc.want) > 1e-9+1e-6*tc.want {
			t.Errorf("%s: %.9f s, want %.9f s", tc.name, got, tc.want)
		}
	}
}

// Llama-3.1-8B on an H100 with testCoefficients, worked by hand
// (TestCalibratedStepByHand's comment derives them): the linear weights,
// the lm_head, the KV bytes per token, the attention FLOPs per (query, key)
// pair, the memory bandwidth and the tensor peak at mfu 0.5.
const (
	linear = 6_979_321_856.0
	lmHead = 128256 * 4096.0
	kvTok  = 131072.0
	pair   = 4 * 32 * 4096.0
	bw     = 3.35e12
	peak   = 989.5e12 * 0.5
)

func repeat(e BatchEntry, n int) []BatchEntry {
	out := make([]BatchEntry, n)
	for i := range out {
		out[i] = e
	}
	return out
}

// TestCalibratedMoEAndTP: a mixture of experts reads the experts its
// tokens reach — top-k of E for one token, all of them for a large batch —
// and tensor parallelism splits the work and adds two all-reduces per
// layer.
func TestCalibratedMoEAndTP(t *testing.T) {
	m, g := mustModel(t, "mistralai/Mixtral-8x7B-v0.1"), mustGPU(t, "H100")
	c := bareCoefficients()
	cm, err := NewCalibratedModel(c, m, &g, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	p := m.Params()
	expert := float64(p.RoutedExperts) / 32 / 8 * 2 / 2 // one expert of one layer, bytes per GPU
	dense := (m.LinearWeightBytes()+m.LMHeadBytes())/2 - float64(p.RoutedExperts)*2/2
	bw := 3.35e12 * 0.8
	for _, tc := range []struct {
		n       float64
		reached float64
	}{{1, 2}, {2, 8 * (1 - 0.75*0.75)}, {1000, 8}} {
		want := (dense + 32*tc.reached*expert) / bw
		// TP2 runs vLLM's one-stage custom all-reduce (1000 tokens: 8.19 MB,
		// still below its 8 MiB buffer): each GPU receives its peer's
		// n·4096·2 bytes at 450 GB/s (NVLink 4 one way) × 0.52, the custom
		// kernel's measured share (customLinkShare), whatever eta_link.
		payload := 2 * 32 * tc.n * 4096 * 2 / (450e9 * 0.52)
		got := cm.seconds(1, tc.n, 0, 0) - payload
		if tc.n == 1000 {
			got = cm.seconds(1, tc.n, 0, 0)
			flops := (tc.n*cm.linFlops + cm.lmFlops) / (1979e12 * 0.5)
			if m.Quant.WeightBits == 0 {
				flops = (tc.n*cm.linFlops + cm.lmFlops) / (989.5e12 * 0.5)
			}
			want = math.Max(want, flops) + payload
		}
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%v tokens: %.9f s, want %.9f s", tc.n, got, want)
		}
	}
	// The all-reduce latency: two per layer.
	c2 := c
	c2.AllReduceUs = 10
	cm2, _ := NewCalibratedModel(c2, m, &g, 2, 2)
	if d := cm2.seconds(1, 1, 0, 0) - cm.seconds(1, 1, 0, 0); math.Abs(d-2*32*10e-6) > 1e-12 {
		t.Errorf("all-reduce latency adds %g s, want %g", d, 2*32*10e-6)
	}
}

func TestCalibrationFiles(t *testing.T) {
	// The prior is not fitted: its values are the documented round
	// magnitudes of calibrations/prior.yaml.
	p := PriorCalibration().Coefficients
	if p.StepUs != 200 || p.LayerUs != 10 || p.EtaWeights != 0.7 || p.MFU != 0.6 || p.AllReduceUs != 8 || p.EtaLink != 0.8 || p.IngestUs != 5000 || p.EtaExperts != 0.84 {
		t.Errorf("prior %+v: not the documented values", p)
	}
	d := DefaultCalibration()
	if d.Name == "" || d.Coefficients.Validate() != nil {
		t.Fatalf("shipped calibration %+v", d)
	}
	y, err := d.MarshalYAML()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseCalibration(y, "rt.yaml")
	if err != nil || back.ID() != d.ID() {
		t.Fatalf("round trip: %v, %s vs %s", err, back.ID(), d.ID())
	}
	// eta_experts absent (0) is valid: the experts stream at eta_weights,
	// and the coefficients hash as a file written before it existed did.
	old, err := ParseCalibration([]byte("name: x\ncoefficients: {step_us: 1, eta_weights: 0.5, eta_kv: 0.5, mfu: 0.5, eta_link: 0.5, roofline_exponent: 2}\n"), "old.yaml")
	if err != nil || old.Coefficients.EtaExperts != 0 {
		t.Fatalf("a calibration without eta_experts: %v, %+v", err, old.Coefficients)
	}
	if js, _ := json.Marshal(old.Coefficients); strings.Contains(string(js), "eta_experts") {
		t.Errorf("an absent eta_experts is hashed: %s", js)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"coefficients: {step_us: 1}\n", "bad.yaml: name: required"},
		{"name: x\ncoefficients: {step_us: 1, eta_weights: 1.5, eta_kv: 0.5, mfu: 0.5, eta_link: 0.5}\n", "coefficients.eta_weights: 1.5 must be in (0, 1]"},
		{"name: x\ncoefficients: {step_us: -1, eta_weights: 0.5, eta_kv: 0.5, mfu: 0.5, eta_link: 0.5}\n", "coefficients.step_us: -1 must not be negative"},
		{"name: x\ncoefficients: {step_us: 1, eta_weights: 0.5, eta_kv: 0.5, mfu: 0.5, eta_link: 0.5, roofline_exponent: 2, eta_experts: 1.2}\n", "coefficients.eta_experts: 1.2 must be in (0, 1]"},
		{"name: x\ncoefficients: {step_us: 1, eta_weights: 0.5, eta_kv: 0.5, mfu: 0.5, eta_link: 0.5, roofline_exponent: 2, eta_experts: -0.5}\n", "coefficients.eta_experts: -0.5 must be in (0, 1]"},
		{"name: x\ncoefficients: {stepus: 1}\n", `unknown field "stepus"; did you mean step_us?`},
		{"name: [\n", "bad.yaml: "},
		{"name: x\ncoefficients: {step_us: 1, eta_weights: 0.5, eta_kv: 0.5, mfu: 0.5, eta_link: 0.5, roofline_exponent: 2}\nfolds: [{protocol: model, runs: [a], coefficients: {eta_weights: 2}}]\n", "folds[0].coefficients.eta_weights: 2 must be in (0, 1]"},
		{"name: x\ncoefficients: {step_us: 1, eta_weights: 0.5, eta_kv: 0.5, mfu: 0.5, eta_link: 0.5, roofline_exponent: 2}\nfolds: [{protocol: model, coefficients: {mfu: 0.5, eta_weights: 0.5, eta_kv: 0.5, eta_link: 0.5, roofline_exponent: 2}}]\n", "folds[0]: protocol and runs are required"},
	} {
		_, err := ParseCalibration([]byte(tc.yaml), "bad.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

// TestAsyncScheduling: with async scheduling, a request added while a
// step runs misses the step scheduled next and joins the one after; added
// to an idle engine it is scheduled at once; without async scheduling it
// joins the next step.
// TestLoadCalibrationDevice: a device that never ends is refused, not read
// into memory.
func TestLoadCalibrationDevice(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	if _, err := LoadCalibration("/dev/zero"); err == nil || !strings.Contains(err.Error(), "/dev/zero: not a regular file") {
		t.Errorf("/dev/zero: error %v", err)
	}
}

// FuzzParseCalibration: any calibration file is read or refused with the
// file named, never a panic; what is read has a name and valid
// coefficients.
func FuzzParseCalibration(f *testing.F) {
	f.Add(defaultCalibrationYAML)
	f.Add([]byte("name: x\ncoefficients: {step_us: 1e309}\n"))
	f.Add([]byte("\xef\xbb\xbfname: x\ncoefficients: &a {step_us: 5}\nz: *a\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCalibration(data, "c.yaml")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "c.yaml: ") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if c.Name == "" || c.Coefficients.Validate() != nil {
			t.Fatalf("accepted %+v", c)
		}
	})
}

func TestAsyncScheduling(t *testing.T) {
	for _, async := range []bool{false, true} {
		e, err := NewEngine(Config{BlockSize: 16, NumGPUBlocks: 200, MaxNumBatchedTokens: 512, MaxNumSeqs: 8,
			CheckInvariants: true, AsyncScheduling: async}, &Linear{StepUs: 1000})
		if err != nil {
			t.Fatal(err)
		}
		a := &Request{ID: 1, Prompt: seq(0, 40), OutputLen: 5}
		if err := e.Add(a, 0); err != nil {
			t.Fatal(err)
		}
		d, ok := e.BeginStep(0) // step 1: a's prefill (idle engine: at once)
		if !ok {
			t.Fatal("idle engine did not schedule")
		}
		b := &Request{ID: 2, Prompt: seq(100, 40), OutputLen: 5}
		if err := e.Add(b, d/2); err != nil {
			t.Fatal(err)
		}
		if g := e.Gauges(); g.NumRequestsWaiting != 1 {
			t.Fatalf("async %v: waiting gauge %d during the step, want 1", async, g.NumRequestsWaiting)
		}
		now := d
		e.EndStep(now)
		d, _ = e.BeginStep(now) // step 2
		inStep2 := b.FirstScheduled >= 0
		now += d
		e.EndStep(now)
		d, _ = e.BeginStep(now) // step 3
		if inStep2 == async || b.FirstScheduled < 0 {
			t.Errorf("async %v: b scheduled in step 2: %v, by step 3: %v", async, inStep2, b.FirstScheduled >= 0)
		}
		now += d
		e.EndStep(now)
	}
}

// TestPresetsUseTheShippedCalibration: every built-in preset runs the
// calibrated model with the calibration that ships, and says so, with
// its deployment's step offset when the calibration has one; its delays
// come from the calibration.
func TestPresetsUseTheShippedCalibration(t *testing.T) {
	d := DefaultCalibration()
	for _, p := range Presets() {
		want := "calibrated " + d.ID()
		off := OffsetFor(d.Offsets, DeploymentOf(&p))
		if off != 1 {
			want += fmt.Sprintf(" ×%.6g", off)
		}
		if got := p.StepModelID(); got != want {
			t.Errorf("%s: step model %q, want %q", p.Name, got, want)
		}
		m, err := p.Model()
		if err != nil {
			t.Fatal(err)
		}
		if s, ok := m.(scaledSteps); ok && off != 1 && s.scale == off {
			m = s.m
		}
		if _, ok := m.(*CalibratedModel); !ok {
			t.Errorf("%s: model %T", p.Name, m)
		}
		if in, per, j := p.Delays(); in != d.Coefficients.IngestUs || per != d.Coefficients.PerOutputTokenUs || j != d.Coefficients.IngestJitter {
			t.Errorf("%s: delays %v %v %v", p.Name, in, per, j)
		}
	}
	// A roofline preset keeps its own delays.
	p := Presets()[0]
	p.StepModel = "roofline"
	if in, _, j := p.Delays(); in != p.IngestUs || j != 0 {
		t.Errorf("roofline delays %v, want %v", in, p.IngestUs)
	}
}

// TestBlend: the smooth roofline is the larger time for a sharp exponent,
// the sum for 1, and symmetric.
func TestBlend(t *testing.T) {
	for _, tc := range []struct{ a, b, p, want float64 }{
		{3, 4, 1, 7}, {3, 4, 2, 5}, {4, 3, 2, 5}, {3, 4, 1000, 4}, {0, 0, 3, 0}, {2, 0, 3, 2},
	} {
		if got := blend(tc.a, tc.b, tc.p); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("blend(%v, %v, %v) = %v, want %v", tc.a, tc.b, tc.p, got, tc.want)
		}
	}
}

// TestCalibratedBlendMemo: a model's memoized blend gives exactly what
// blend computes, for ratios seen before and not, collisions included:
// random step shapes (decode batches, whose ratios repeat, and prefill
// chunks) with the shipped coefficients, every step time equal to the
// formula with blend evaluated afresh.
func TestCalibratedBlendMemo(t *testing.T) {
	m, g := mustModel(t, "meta-llama/Llama-3.1-8B-Instruct"), mustGPU(t, "H100")
	cm, err := NewCalibratedModel(DefaultCalibration().Coefficients, m, &g, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	fresh := func(batch []BatchEntry) int64 {
		var n, kv, pairs float64
		for _, e := range batch {
			nn, ctx := float64(e.NewTokens), float64(e.Context)
			n += nn
			kv += ctx + nn
			pairs += nn * (ctx + (nn+1)/2)
		}
		co, b := &cm.co, float64(len(batch))
		flops := cm.peak * co.MFU
		p := co.RooflineExponent
		lin := blend(cm.denseBytes/(cm.bw*co.EtaWeights), (n*cm.linFlops+b*cm.lmFlops)/flops, p)
		attn := blend(cm.kvPerToken*kv/(cm.bw*co.EtaKV), pairs*cm.attnFlops/flops, p)
		sec := (co.StepUs+co.LayerUs*cm.layers+co.SeqUs*b)*1e-6 + lin + attn
		return int64(sec*1e9 + 0.5)
	}
	for i := range 200_000 {
		batch := make([]BatchEntry, 1+rng.IntN(64))
		for j := range batch {
			batch[j] = BatchEntry{NewTokens: 1, Context: rng.IntN(30_000), Decode: true}
			if i%5 == 0 && j == 0 {
				batch[j] = BatchEntry{NewTokens: 1 + rng.IntN(8192), Context: rng.IntN(30_000)}
			}
		}
		if got, want := cm.StepTime(batch), fresh(batch); got != want {
			t.Fatalf("step %d (%d sequences): %d ns memoized, %d ns afresh", i, len(batch), got, want)
		}
	}
}

// TestCalibratedDecodeUnderLoad: attention reads every running sequence's
// whole KV cache each step, so a decode step's time grows with the batch
// times the context (vllm-engine.md B.1: K = KV bytes per token × context
// tokens) while the weights are read once; worked by hand for
// Llama-3.1-8B on an H100 (128 KiB of KV per token).
func TestCalibratedDecodeUnderLoad(t *testing.T) {
	m, g := mustModel(t, "meta-llama/Llama-3.1-8B-Instruct"), mustGPU(t, "H100")
	c := testCoefficients()
	cm, err := NewCalibratedModel(c, m, &g, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	weights := (linear + lmHead) * 2 / (bw * 0.8)
	for _, tc := range []struct {
		batch, context int
	}{{1, 4000}, {16, 4000}, {128, 4000}, {128, 500}} {
		b, ctx := float64(tc.batch), float64(tc.context)
		kv := kvTok * (ctx + 1) * b / (bw * 0.5)
		attn := b * (ctx + 1) * pair / peak
		lin := math.Max(weights, (b*2*linear+b*2*lmHead)/peak)
		want := (500+10*32.0)*1e-6 + b*5e-6 + lin + math.Max(kv, attn)
		got := float64(cm.StepTime(repeat(BatchEntry{NewTokens: 1, Context: tc.context, Decode: true}, tc.batch))) / 1e9
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%d decodes at %d context: %.6f s, want %.6f s", tc.batch, tc.context, got, want)
		}
	}
	// Under load the KV reads overtake the weights: 128 sequences at 4,000
	// tokens read 67.1 GB of KV against 15.0 GB of weights, so the step
	// takes (0.82 + 0.64 + 5.60 + 40.1) ms against (0.82 + 0.005 + 5.60 +
	// 0.31) ms for one: 7.0×.
	light := cm.StepTime(repeat(BatchEntry{NewTokens: 1, Context: 4000, Decode: true}, 1))
	heavy := cm.StepTime(repeat(BatchEntry{NewTokens: 1, Context: 4000, Decode: true}, 128))
	if r := float64(heavy) / float64(light); r < 6.9 || r > 7.1 {
		t.Errorf("128 decodes take %.2f× one at 4,000 context, want 7.0×", r)
	}
}

// TestCalibratedMixedStep: under chunked prefill one step runs decodes and
// a prefill chunk together (vllm-engine.md A.5): the weights are read once
// for all new tokens, the linear compute counts every new token, and
// attention reads every sequence's context and computes each chunk's
// causal pairs; worked by hand for Llama-3.1-8B on an H100.
func TestCalibratedMixedStep(t *testing.T) {
	m, g := mustModel(t, "meta-llama/Llama-3.1-8B-Instruct"), mustGPU(t, "H100")
	cm, err := NewCalibratedModel(testCoefficients(), m, &g, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	batch := append(repeat(BatchEntry{NewTokens: 1, Context: 1000, Decode: true}, 32), BatchEntry{NewTokens: 2016, Context: 0})
	n, seqs := 32+2016.0, 33.0
	kvTokens := 32*1001 + 2016.0
	pairs := 32*1001 + 2016*(2017/2.0)
	want := (500+10*32.0)*1e-6 + seqs*5e-6 +
		math.Max((linear+lmHead)*2/(bw*0.8), (n*2*linear+seqs*2*lmHead)/peak) +
		math.Max(kvTok*kvTokens/(bw*0.5), pairs*pair/peak)
	got := float64(cm.StepTime(batch)) / 1e9
	if math.Abs(got-want) > 1e-9 {
		t.Errorf("32 decodes + a 2,016-token chunk: %.6f s, want %.6f s", got, want)
	}
	// The chunk makes the step compute-bound: the decodes then cost only
	// their own compute and KV, not another read of the weights.
	alone := float64(cm.StepTime(batch[32:])) / 1e9
	if got-alone > 0.5*(linear+lmHead)*2/(bw*0.8) {
		t.Errorf("the decodes add %.6f s to the chunk's %.6f s: more than half a read of the weights", got-alone, alone)
	}
}

// TestCalibratedMoESmallBatch: Llama-4-Scout routes each token to 1 of 16
// experts, so a step of 11 tokens reaches 16·(1 − (15/16)^11) = 8.13
// experts of each MoE layer on average (tokens routed independently and
// uniformly: an upper bound, since a real router's imbalance reaches
// fewer) and reads only their weights.
func TestCalibratedMoESmallBatch(t *testing.T) {
	m, g := mustModel(t, "RedHatAI/Llama-4-Scout-17B-16E-Instruct-FP8-dynamic"), mustGPU(t, "H100")
	if m.MoE == nil || m.MoE.Experts != 16 || m.MoE.ExpertsPerToken != 1 {
		t.Fatalf("Scout's MoE: %+v", m.MoE)
	}
	c := bareCoefficients()
	cm, err := NewCalibratedModel(c, m, &g, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	reached := 16 * (1 - math.Pow(15.0/16, 11))
	if math.Abs(reached-8.13) > 0.01 {
		t.Fatalf("reached %v", reached)
	}
	w := cm.denseBytes + float64(m.MoE.Layers)*reached*cm.expertBytes
	mem := w / (3.35e12 * 0.8)
	// All-reduce of 11·5120·2 bytes on 2 GPUs: one-stage, the peer's
	// buffer at 450 GB/s × 0.52 (customLinkShare), two per layer.
	ar := 2 * 48 * 11 * 5120 * 2 / (450e9 * 0.52)
	got := cm.seconds(11, 11, 0, 0)
	cmp := (11*cm.linFlops + 11*cm.lmFlops) / (1979e12 * 0.5)
	if want := math.Max(mem, cmp) + ar; math.Abs(got-want) > 1e-12 {
		t.Errorf("11 tokens: %.9f s, want %.9f s", got, want)
	}
	// A batch that reaches every expert reads them all. Its all-reduce of
	// 4000·5120·2 bytes (39 MiB, BF16) exceeds the custom kernel's 8 MiB
	// buffer and is below Hopper's 64 MiB for symmetric memory at TP 2:
	// its two-shot all-reduce, the buffer once at 450 GB/s × 0.52.
	all := cm.denseBytes + float64(m.MoE.Layers)*16*cm.expertBytes
	if got := cm.seconds(1, 4000, 0, 0) - 2*48*4000*5120*2/(450e9*0.52); math.Abs(got-math.Max(all/(3.35e12*0.8), (4000*cm.linFlops+cm.lmFlops)/(1979e12*0.5))) > 1e-9 {
		t.Errorf("4,000 tokens: %.9f s does not read every expert", got)
	}
}

// TestCalibratedExpertEfficiency: an unquantised mixture of experts
// streams its routed experts at eta_experts and the rest at eta_weights,
// worked by hand from Mixtral-8x7B's config.json on two H100s. One expert
// of one layer is 3·4096·14336 = 176,160,768 weights, 176,160,768 bytes
// per GPU in BF16 at TP 2; the rest is the attention, 32·(2·4096² +
// 2·4096·1024) = 1,342,177,280 weights, the routers, 32·4096·8 =
// 1,048,576, and the lm_head, 32000·4096 = 131,072,000: 1,474,297,856
// bytes per GPU. A token reaches 2 experts of each layer, 64 tokens
// 8·(1 − 0.75^64), all 8 to eight digits (memory-bound still: their
// compute is a tenth of the streaming). Quantised experts (Scout's FP8) and a calibration without
// eta_experts stream at eta_weights.
func TestCalibratedExpertEfficiency(t *testing.T) {
	g := mustGPU(t, "H100")
	const bw, expert, dense = 3.35e12, 176160768.0, 1474297856.0
	mixtral := mustModel(t, "mistralai/Mixtral-8x7B-v0.1")
	c := bareCoefficients() // eta_weights 0.8
	c.EtaExperts = 0.9
	cm, err := NewCalibratedModel(c, mixtral, &g, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ n, reached float64 }{{1, 2}, {64, 8 * (1 - math.Pow(0.75, 64))}} {
		// The one-stage custom all-reduce of n·4096·2 bytes, twice per layer.
		ar := 2 * 32 * tc.n * 4096 * 2 / (450e9 * 0.52)
		want := dense/(bw*0.8) + 32*tc.reached*expert/(bw*0.9)
		if got := cm.seconds(1, tc.n, 0, 0) - ar; math.Abs(got-want) > 1e-9 {
			t.Errorf("%v tokens: %.9f s, want %.9f s", tc.n, got, want)
		}
	}
	c.EtaExperts = 0
	old, err := NewCalibratedModel(c, mixtral, &g, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	ar := 2 * 32 * 4096 * 2 / (450e9 * 0.52)
	if got, want := old.seconds(1, 1, 0, 0)-ar, (dense+32*2*expert)/(bw*0.8); math.Abs(got-want) > 1e-9 {
		t.Errorf("without eta_experts: %.9f s, want %.9f s", got, want)
	}
	scout := mustModel(t, "RedHatAI/Llama-4-Scout-17B-16E-Instruct-FP8-dynamic")
	with, without := bareCoefficients(), bareCoefficients()
	with.EtaExperts = 0.9
	a, err := NewCalibratedModel(with, scout, &g, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewCalibratedModel(without, scout, &g, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	if x, y := a.seconds(8, 8, 8000, 8000), b.seconds(8, 8, 8000, 8000); x != y {
		t.Errorf("FP8 experts: %.9f s with eta_experts, %.9f s without", x, y)
	}
}

// TestEmbeddedCalibrationsAreCopies: DefaultCalibration and
// PriorCalibration parse their files once and return copies: changing every
// map and slice of one returned value leaves the next one equal to a fresh
// parse of the file. Clone copies every map and slice the types have
// (checked by reflection, so that a new one cannot be missed).
func TestEmbeddedCalibrationsAreCopies(t *testing.T) {
	for _, tc := range []struct {
		name string
		get  func() Calibration
		yaml []byte
	}{
		{"default", DefaultCalibration, defaultCalibrationYAML},
		{"prior", PriorCalibration, priorCalibrationYAML},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := ParseCalibration(tc.yaml, tc.name)
			if err != nil {
				t.Fatal(err)
			}
			a := tc.get()
			if a.Fit == nil {
				a.Fit = map[string]float64{}
			}
			a.Fit["mape_e2e_mean"] = -1
			if a.Intervals == nil {
				a.Intervals = map[string]Interval{}
			}
			a.Intervals["e2e_mean"] = Interval{Low: -1}
			a.Coefficients.StepUs = -1
			for k, x := range a.Extrapolation {
				x.Seen[0] = "changed"
				for m := range x.Intervals {
					x.Intervals[m] = Interval{Low: -1}
				}
				a.Extrapolation[k] = x
			}
			if s := a.SeenModels; s != nil {
				s.Models[0] = "changed"
				for m := range s.Intervals {
					s.Intervals[m] = Interval{Low: -1}
				}
			}
			for i := range a.Offsets {
				a.Offsets[i].Factor = -1
			}
			if a.FullBatch != nil {
				a.FullBatch.Factor = -1
			}
			for i := range a.Folds {
				for k := range a.Folds[i].Offsets {
					a.Folds[i].Offsets[k].Factor = -1
				}
				a.Folds[i].Runs = append(a.Folds[i].Runs[:0], "changed")
				for m := range a.Folds[i].Weights {
					a.Folds[i].Weights[m] = -1
				}
				a.Folds[i].Coefficients.StepUs = -1
			}
			if b := tc.get(); !reflect.DeepEqual(b, want) {
				t.Errorf("a change to one %s calibration reached the next", tc.name)
			}
		})
	}
	if n := len(DefaultCalibration().Folds); n == 0 {
		t.Fatal("the shipped calibration has no folds: the test cannot check their copies")
	}
	if x := DefaultCalibration().Extrapolation["tp"]; len(x.Seen) == 0 || len(x.Intervals) == 0 {
		t.Fatal("the shipped calibration records no reach: the test cannot check its copies")
	}
	if s := DefaultCalibration().SeenModels; s == nil || len(s.Models) == 0 || len(s.Intervals) == 0 {
		t.Fatal("the shipped calibration records no seen models: the test cannot check their copies")
	}
	if DefaultCalibration().FullBatch == nil {
		t.Fatal("the shipped calibration records no full-batch factor: the test cannot check its copy")
	}
	cloned := map[string]bool{"Calibration.Fit": true, "Calibration.Intervals": true, "Calibration.Folds": true,
		"CalibrationFold.Runs": true, "CalibrationFold.Weights": true,
		"Calibration.Extrapolation": true, "Extrapolation.Seen": true, "Extrapolation.Intervals": true,
		"Calibration.SeenModels": true, "SeenModels.Models": true, "SeenModels.Intervals": true,
		"Calibration.Offsets": true, "CalibrationFold.Offsets": true, "Calibration.FullBatch": true}
	for _, typ := range []reflect.Type{reflect.TypeFor[Calibration](), reflect.TypeFor[CalibrationFold](), reflect.TypeFor[Coefficients](), reflect.TypeFor[Interval](), reflect.TypeFor[Extrapolation](), reflect.TypeFor[SeenModels]()} {
		for i := range typ.NumField() {
			f := typ.Field(i)
			switch f.Type.Kind() {
			case reflect.Map, reflect.Slice, reflect.Pointer, reflect.Interface:
				if name := typ.Name() + "." + f.Name; !cloned[name] {
					t.Errorf("%s (%s) is not copied by Clone", name, f.Type)
				}
			}
		}
	}
}

// TestCalibrationIntervalsFor: a run at a TP size or GPU the fit never
// saw takes the axis's protocol factors as well, metric by metric (the
// lower low, the higher high; a metric only the axis has comes as it
// is), with one sentence per axis; a run the fit covers gets the
// model-out factors alone. Worked by hand from the factors below.
func TestCalibrationIntervalsFor(t *testing.T) {
	c := Calibration{Name: "x",
		Intervals: map[string]Interval{"itl_mean": {Low: 0.8, High: 1.15, Runs: 26}, "ttft_mean": {Low: 0.6, High: 1.6, Runs: 26}},
		Extrapolation: map[string]Extrapolation{
			"tp":  {Seen: []string{"1", "2", "4"}, Intervals: map[string]Interval{"itl_mean": {Low: 0.7, High: 1.1, Runs: 26}, "ttft_p99": {Low: 0.3, High: 2, Runs: 26}}},
			"gpu": {Seen: []string{"A100-80GB", "H100"}},
		}}
	base := c.Intervals
	wideTP := map[string]Interval{"itl_mean": {Low: 0.7, High: 1.15, Runs: 52}, "ttft_mean": {Low: 0.6, High: 1.6, Runs: 26}, "ttft_p99": {Low: 0.3, High: 2, Runs: 26}}
	tpNote := "TP 8 is outside the calibration's TP sizes (1, 2, 4); the intervals include its leave-one-TP-size-out errors"
	gpuNote := "H200 is outside the calibration's GPUs (A100-80GB, H100); no leave-one-GPU-out errors measure it (too few runs held out, or the protocol was not run), so the intervals leave it out"
	for _, tc := range []struct {
		name  string
		tp    int
		gpu   string
		want  map[string]Interval
		notes []string
	}{
		{"covered", 2, "H100", base, nil},
		{"TP 0 is TP 1", 0, "A100-80GB", base, nil},
		{"TP 8", 8, "H100", wideTP, []string{tpNote}},
		{"unseen GPU, no factors", 4, "H200", base, []string{gpuNote}},
		{"both", 8, "H200", wideTP, []string{tpNote, gpuNote}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, basis, notes := c.IntervalsFor(Placement{TP: tc.tp, GPU: tc.gpu})
			if !reflect.DeepEqual(got, tc.want) || !slices.Equal(notes, tc.notes) || basis != "leave one model out" {
				t.Errorf("IntervalsFor(%d, %s) = %v, %q; want %v, %q", tc.tp, tc.gpu, got, notes, tc.want, tc.notes)
			}
		})
	}
	if !reflect.DeepEqual(c.Intervals, base) || c.Intervals["itl_mean"].Low != 0.8 {
		t.Errorf("IntervalsFor changed the calibration's own factors: %v", c.Intervals)
	}
	// A fleet at several placements widens once per axis, however many of
	// them are beyond it, and names each unseen value once.
	got, _, notes := c.IntervalsFor(Placement{TP: 8, GPU: "H100"}, Placement{TP: 6, GPU: "H100"}, Placement{TP: 8, GPU: "H100"}, Placement{TP: 2, GPU: "H100"})
	tp6 := strings.Replace(tpNote, "TP 8", "TP 6", 1)
	if !reflect.DeepEqual(got, wideTP) || !slices.Equal(notes, []string{tpNote, tp6}) {
		t.Errorf("TP 8, 6, 8 and 2: %v, %q; want %v, %q", got, notes, wideTP, []string{tpNote, tp6})
	}
	// A calibration without a record of its reach widens nothing.
	old := Calibration{Name: "old", Intervals: base}
	if got, _, notes := old.IntervalsFor(Placement{Model: "org/unknown", TP: 8, GPU: "H200"}); !reflect.DeepEqual(got, base) || notes != nil {
		t.Errorf("no reach recorded: %v, %q", got, notes)
	}
}

// TestCalibrationIntervalsForSeenModels: a run of models the calibration
// was fitted on (compared without regard to case) takes the factors of
// another load of them; a fleet with any model it was not fitted on, or
// whose model is not known, takes the model-out factors, with a sentence
// per unseen model; a TP size beyond the fit widens either.
func TestCalibrationIntervalsForSeenModels(t *testing.T) {
	modelOut := map[string]Interval{"itl_mean": {Low: 0.7, High: 1.1, Runs: 26}}
	load := map[string]Interval{"itl_mean": {Low: 0.9, High: 1.05, Runs: 12}}
	c := Calibration{Name: "x", Intervals: modelOut,
		SeenModels: &SeenModels{Models: []string{"meta-llama/Llama-2-7b-hf", "mistralai/Mixtral-8x7B-v0.1"}, Intervals: load},
		Extrapolation: map[string]Extrapolation{
			"tp": {Seen: []string{"1", "2"}, Intervals: map[string]Interval{"itl_mean": {Low: 0.8, High: 1.2, Runs: 20}}},
		}}
	unseen := "Qwen/Qwen3-32B is not a model the calibration was fitted on; the intervals are its leave-one-model-out errors"
	tp8 := "TP 8 is outside the calibration's TP sizes (1, 2); the intervals include its leave-one-TP-size-out errors"
	llama := Placement{Model: "meta-llama/llama-2-7b-hf", TP: 1}
	for _, tc := range []struct {
		name  string
		at    []Placement
		want  map[string]Interval
		basis string
		notes []string
	}{
		{"seen, another case", []Placement{llama}, load, "leave the highest load out", nil},
		{"two seen models", []Placement{llama, {Model: "mistralai/Mixtral-8x7B-v0.1", TP: 2}}, load, "leave the highest load out", nil},
		{"unseen", []Placement{{Model: "Qwen/Qwen3-32B", TP: 2}}, modelOut, "leave one model out", []string{unseen}},
		{"one unseen in the fleet", []Placement{llama, {Model: "Qwen/Qwen3-32B", TP: 1}, {Model: "Qwen/Qwen3-32B", TP: 2}}, modelOut, "leave one model out", []string{unseen}},
		{"model not known", []Placement{{TP: 1}}, modelOut, "leave one model out", nil},
		{"no placement", nil, modelOut, "leave one model out", nil},
		{"seen at TP 8", []Placement{{Model: "meta-llama/Llama-2-7b-hf", TP: 8}},
			map[string]Interval{"itl_mean": {Low: 0.8, High: 1.2, Runs: 32}}, "leave the highest load out", []string{tp8}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, basis, notes := c.IntervalsFor(tc.at...)
			if !reflect.DeepEqual(got, tc.want) || basis != tc.basis || !slices.Equal(notes, tc.notes) {
				t.Errorf("IntervalsFor = %v, %q, %q; want %v, %q, %q", got, basis, notes, tc.want, tc.basis, tc.notes)
			}
		})
	}
	// With step offsets, only a deployment that has one takes the narrow
	// factors: Llama-2-7B at TP 1 in float16 on vLLM does; at TP 2 (a TP
	// size the fit saw) or in FP8 it does not, and is named.
	withOff := c.Clone()
	d := Deployment{Model: "meta-llama/Llama-2-7b-hf", GPU: "H100", TP: 1, Engine: "vllm", Weights: "float16"}
	withOff.Offsets = []StepOffset{{Deployment: d, Runs: 4, Factor: 0.96}}
	at := Placement{Model: d.Model, TP: 1, GPU: "H100", Engine: "vllm", Weights: "float16"}
	if got, basis, notes := withOff.IntervalsFor(at); !reflect.DeepEqual(got, load) || basis != "leave the highest load out" || notes != nil {
		t.Errorf("fitted deployment: %v, %q, %q", got, basis, notes)
	}
	for _, p := range []Placement{{Model: d.Model, TP: 2, GPU: "H100", Engine: "vllm", Weights: "float16"}, {Model: d.Model, TP: 1, GPU: "H100", Engine: "vllm", Weights: "fp8/8"}} {
		want := p.Deployment().String() + " is not a deployment the calibration was fitted on (it has no step offset); the intervals are its leave-one-model-out errors"
		if got, basis, notes := withOff.IntervalsFor(at, p); !reflect.DeepEqual(got, modelOut) || basis != "leave one model out" || !slices.Equal(notes, []string{want}) {
			t.Errorf("%+v beside a fitted deployment: %v, %q, %q; want the model-out factors and %q", p, got, basis, notes, want)
		}
	}
	// Without factors of another load, a seen model takes the model-out ones.
	bare := c.Clone()
	bare.SeenModels.Intervals = nil
	if got, basis, notes := bare.IntervalsFor(llama); !reflect.DeepEqual(got, modelOut) || basis != "leave one model out" || notes != nil {
		t.Errorf("no load factors: %v, %q, %q", got, basis, notes)
	}
	if c.SeenModels.Intervals == nil {
		t.Error("Clone shares SeenModels with the original")
	}
}

// TestParseCalibrationExtrapolation: the reach's errors name the field.
func TestParseCalibrationExtrapolation(t *testing.T) {
	const head = "name: x\ncoefficients: {step_us: 100, layer_us: 1, seq_us: 1, eta_weights: 0.7, eta_kv: 0.7, mfu: 0.5, roofline_exponent: 3, all_reduce_us: 5, eta_link: 0.8, ingest_us: 1000, ingest_jitter: 0.3}\n"
	for _, tc := range []struct{ body, want string }{
		{"extrapolation: {tp: {seen: ['1', '2']}}\n", ""},
		{"extrapolation: {dp: {seen: ['1']}}\n", "extrapolation.dp: unknown axis"},
		{"extrapolation: {tp: {}}\n", "extrapolation.tp.seen: required"},
		{"extrapolation: {tp: {seen: ['1'], intervals: {itl_mean: {low: 1.2, high: 0.9, runs: 5}}}}\n", "extrapolation.tp.intervals.itl_mean: want 0 < low ≤ high"},
		{"intervals: {ttft_p99: {low: 0.9, high: 0.8, runs: 5}}\n", "intervals.ttft_p99: want 0 < low ≤ high"},
		{"seen_models: {models: [a/b], intervals: {itl_mean: {low: 0.9, high: 1.1, runs: 12}}}\n", ""},
		{"seen_models: {intervals: {itl_mean: {low: 0.9, high: 1.1, runs: 12}}}\n", "seen_models.models: required"},
		{"seen_models: {models: [a/b], intervals: {itl_mean: {low: 0, high: 1.1, runs: 12}}}\n", "seen_models.intervals.itl_mean: want 0 < low ≤ high"},
		{"seen_models: {models: [a/b], interval: {}}\n", `unknown field "interval"; did you mean intervals?`},
	} {
		_, err := ParseCalibration([]byte(head+tc.body), "c.yaml")
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.body, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "c.yaml: "+tc.want) {
			t.Errorf("%s: got %v, want %q", tc.body, err, tc.want)
		}
	}
}

// TestCalibratedKVEfficiencyByLayout: eta_kv_mha sets the KV reads of a
// multi-head-attention model only. Llama-2-7B (MHA, 512 KiB of KV per
// token) decoding 128 sequences at 4,000 tokens of context reads
// 128 × 4,001 × 512 KiB = 268.6 GB of KV, which dominates its attention
// compute under the sharp roofline, so eta_kv_mha 0.25 instead of the
// absent value (eta_kv 0.5) adds 268.6 GB / 3.35 TB/s × (1/0.25 − 1/0.5)
// = 160.3 ms to the step; Llama-3.1-8B (grouped-query) is unchanged; and
// eta_kv_mha equal to eta_kv predicts as its absence does.
func TestCalibratedKVEfficiencyByLayout(t *testing.T) {
	g := mustGPU(t, "H100")
	batch := repeat(BatchEntry{NewTokens: 1, Context: 4000, Decode: true}, 128)
	step := func(model string, mha float64) float64 {
		c := testCoefficients()
		c.EtaKVMHA = mha
		cm, err := NewCalibratedModel(c, mustModel(t, model), &g, 1, 2)
		if err != nil {
			t.Fatal(err)
		}
		return float64(cm.StepTime(batch)) / 1e9
	}
	kv := 128 * 4001 * 512 * 1024.0
	want := kv / bw * (1/0.25 - 1/0.5)
	if got := step("meta-llama/Llama-2-7b-hf", 0.25) - step("meta-llama/Llama-2-7b-hf", 0); math.Abs(got-want) > 1e-6 {
		t.Errorf("Llama-2-7B: eta_kv_mha 0.25 adds %.4f s, want %.4f s", got, want)
	}
	if a, b := step("meta-llama/Llama-2-7b-hf", 0.5), step("meta-llama/Llama-2-7b-hf", 0); a != b {
		t.Errorf("Llama-2-7B: eta_kv_mha = eta_kv gives %v s, absent %v s", a, b)
	}
	if a, b := step("meta-llama/Llama-3.1-8B-Instruct", 0.25), step("meta-llama/Llama-3.1-8B-Instruct", 0); a != b {
		t.Errorf("Llama-3.1-8B (grouped-query): eta_kv_mha moved its step from %v to %v s", b, a)
	}
	c := testCoefficients()
	if c.KVEfficiency(true) != 0.5 || c.KVEfficiency(false) != 0.5 {
		t.Errorf("absent eta_kv_mha: %v, %v, want eta_kv 0.5 for both", c.KVEfficiency(true), c.KVEfficiency(false))
	}
	c.EtaKVMHA = 0.9
	if c.KVEfficiency(true) != 0.9 || c.KVEfficiency(false) != 0.5 {
		t.Errorf("eta_kv_mha 0.9: %v, %v, want 0.9 and 0.5", c.KVEfficiency(true), c.KVEfficiency(false))
	}
	c.EtaKVMHA = -0.1
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "eta_kv_mha") {
		t.Errorf("eta_kv_mha -0.1: %v, want refused", err)
	}
}

// TestCoefficientExercised: the optional coefficients bear on the models
// whose steps read them (eta_experts: unquantised routed experts;
// eta_kv_mha: multi-head attention), every other coefficient on all.
func TestCoefficientExercised(t *testing.T) {
	for _, tc := range []struct {
		model                 string
		experts, kvMHA, steps bool
	}{
		{"mistralai/Mixtral-8x7B-v0.1", true, false, true},
		{"RedHatAI/Llama-4-Scout-17B-16E-Instruct-FP8-dynamic", false, false, true},
		{"meta-llama/Llama-2-7b-hf", false, true, true},
		{"meta-llama/Llama-3.1-8B-Instruct", false, false, true},
	} {
		m, err := arch.LookupModel(tc.model)
		if err != nil {
			t.Fatal(err)
		}
		if got := CoefficientExercised("eta_experts", m); got != tc.experts {
			t.Errorf("%s: eta_experts exercised %v, want %v", tc.model, got, tc.experts)
		}
		if got := CoefficientExercised("eta_kv_mha", m); got != tc.kvMHA {
			t.Errorf("%s: eta_kv_mha exercised %v, want %v", tc.model, got, tc.kvMHA)
		}
		if got := CoefficientExercised("step_us", m); got != tc.steps {
			t.Errorf("%s: step_us exercised %v, want %v", tc.model, got, tc.steps)
		}
	}
}
