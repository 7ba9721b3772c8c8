package replica

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// Config is one engine's vLLM configuration.
type Config struct {
	// BlockSize is the KV block size in tokens (A.1 default 16).
	BlockSize int `json:"blockSize"`
	// NumGPUBlocks is vLLM's num_gpu_blocks, null block included.
	NumGPUBlocks int `json:"numGpuBlocks"`
	// MaxNumBatchedTokens is the per-step token budget (A.5).
	MaxNumBatchedTokens int `json:"maxNumBatchedTokens"`
	// MaxNumSeqs caps the running requests (A.5).
	MaxNumSeqs int `json:"maxNumSeqs"`
	// LongPrefillTokenThreshold caps one request's tokens per step when > 0.
	LongPrefillTokenThreshold int `json:"longPrefillTokenThreshold"`
	// MaxModelLen is the longest sequence (prompt + output) accepted; 0 means
	// the KV capacity.
	MaxModelLen int `json:"maxModelLen"`
	// DisablePrefixCaching turns the prefix cache off (vLLM enables it by
	// default, A.5).
	DisablePrefixCaching bool `json:"disablePrefixCaching"`
	// HashSeed seeds the block-hash chain (PYTHONHASHSEED). Replicas of one
	// fleet share it so equal prefixes hash alike everywhere.
	HashSeed uint64 `json:"hashSeed"`
	// KVEvents makes the engine publish KV events to its subscribers.
	KVEvents bool `json:"kvEvents"`
	// CheckInvariants verifies pool and queue invariants after every step
	// (debug option; tests turn it on).
	CheckInvariants bool `json:"checkInvariants"`
}

// BatchDefaults returns vLLM's max_num_batched_tokens / max_num_seqs for the
// OpenAI API server on a GPU class (A.5, EngineArgs.get_batch_defaults):
// 8192/1024 for ≥70 GiB parts other than A100, else 2048/256.
func BatchDefaults(g GPUSpec) (maxBatchedTokens, maxSeqs int) {
	if g.LargeClass {
		return 8192, 1024
	}
	return 2048, 256
}

func (c *Config) validate() error {
	switch {
	case c.BlockSize <= 0:
		return fmt.Errorf("blockSize must be positive, got %d", c.BlockSize)
	case c.NumGPUBlocks < 2:
		return fmt.Errorf("numGpuBlocks must be at least 2 (block 0 is the null block), got %d", c.NumGPUBlocks)
	case c.MaxNumBatchedTokens <= 0:
		return fmt.Errorf("maxNumBatchedTokens must be positive, got %d", c.MaxNumBatchedTokens)
	case c.MaxNumSeqs <= 0:
		return fmt.Errorf("maxNumSeqs must be positive, got %d", c.MaxNumSeqs)
	case c.LongPrefillTokenThreshold < 0:
		return fmt.Errorf("longPrefillTokenThreshold must not be negative, got %d", c.LongPrefillTokenThreshold)
	case c.MaxModelLen < 0:
		return fmt.Errorf("maxModelLen must not be negative, got %d", c.MaxModelLen)
	}
	return nil
}

// Preset is a named replica: a model on a GPU class with its engine knobs,
// KV capacity and step-time model. Presets are plain data; every field can be
// overridden (WithOverrides).
type Preset struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Engine      Config `json:"engine"`
	// StepModel selects "roofline" (B.3, the default) or "linear".
	StepModel string   `json:"stepModel"`
	Roofline  Roofline `json:"roofline"`
	Linear    Linear   `json:"linear"`
	// Non-blocking CPU-side delays (B.3, BLIS α0 and α2): added to a
	// request's TTFT and per output token, never to the engine step.
	IngestUs         float64 `json:"ingestUs"`
	PerOutputTokenUs float64 `json:"perOutputTokenUs"`
}

// Model returns the preset's step-time model.
func (p *Preset) Model() (StepModel, error) {
	switch p.StepModel {
	case "", "roofline":
		r := p.Roofline
		return &r, nil
	case "linear":
		l := p.Linear
		return &l, nil
	}
	return nil, fmt.Errorf("preset %s: unknown stepModel %q (want roofline or linear)", p.Name, p.StepModel)
}

// Model shapes from the models' config.json (B.1).
var (
	llama31_8B  = ModelSpec{Name: "meta-llama/Llama-3.1-8B-Instruct", Layers: 32, Hidden: 4096, Heads: 32, KVHeads: 8, HeadDim: 128, FFN: 14336, Vocab: 128256, MaxLen: 131072}
	llama31_70B = ModelSpec{Name: "meta-llama/Llama-3.1-70B-Instruct", Layers: 80, Hidden: 8192, Heads: 64, KVHeads: 8, HeadDim: 128, FFN: 28672, Vocab: 128256, MaxLen: 131072}

	// GPU classes (B.2, BLIS hardware_config.json).
	gpuH100 = GPUSpec{Name: "H100", TFlops: 989.5, BandwidthT: 3.35, MFUPrefill: 0.45, MFUDecode: 0.30, MemoryGiB: 80, LargeClass: true}
	gpuA100 = GPUSpec{Name: "A100-80GB", TFlops: 312, BandwidthT: 2.039, MFUPrefill: 0.38, MFUDecode: 0.18, MemoryGiB: 80}
)

// gpuMemoryUtilization is vLLM's default gpu_memory_utilization (A.5).
const gpuMemoryUtilization = 0.9

func roofline(m ModelSpec, g GPUSpec, tp int) Roofline {
	// BLIS trained-physics constants (B.2/B.3): β5 32.09546717 µs/layer,
	// β7 126.024825 µs/step, β6 4.41684444 µs/request, η_w = 1/β3,
	// η_kv = 1/β2b; all-reduce at 0.27 of HBM bandwidth plus an estimated
	// 8 µs latency each.
	return Roofline{
		Model: m, GPU: g, TP: tp,
		LayerUs: 32.09546717, StepUs: 126.024825, ReqUs: 4.41684444,
		EtaWeights: 1 / 1.36252915, EtaKV: 1 / 1.94710771,
		AllReduceBWRatio: 0.27, AllReduceUs: 8,
		Multiplier: 1,
	}
}

func newPreset(name, desc string, m ModelSpec, g GPUSpec, tp int) Preset {
	blocks, err := KVCapacityBlocks(m, g, tp, 16, gpuMemoryUtilization)
	if err != nil {
		panic(err) // the built-in table is fixed; a failure is a programming error
	}
	tok, seqs := BatchDefaults(g)
	rf := roofline(m, g, tp)
	return Preset{
		Name: name, Description: desc,
		Engine: Config{
			BlockSize: 16, NumGPUBlocks: blocks,
			MaxNumBatchedTokens: tok, MaxNumSeqs: seqs,
			MaxModelLen: m.MaxLen,
		},
		StepModel:        "roofline",
		Roofline:         rf,
		Linear:           linearFromRoofline(&rf),
		IngestUs:         15563.2,
		PerOutputTokenUs: 45.9,
	}
}

// Presets returns the built-in replica presets, sorted by name.
func Presets() []Preset {
	ps := []Preset{
		newPreset("llama-3.1-8b-h100", "Llama-3.1-8B-Instruct, BF16, 1×H100 80GB", llama31_8B, gpuH100, 1),
		newPreset("llama-3.1-8b-a100", "Llama-3.1-8B-Instruct, BF16, 1×A100 80GB", llama31_8B, gpuA100, 1),
		newPreset("llama-3.1-70b-h100-tp4", "Llama-3.1-70B-Instruct, BF16, 4×H100 80GB, TP4", llama31_70B, gpuH100, 4),
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].Name < ps[j].Name })
	return ps
}

// linearFromRoofline derives the linear model's coefficients from the
// roofline: the step overhead plus weight read, the compute-bound cost of
// one uncached prompt token, and the per-sequence cost of a decode at 1k
// context. It is a starting point for users' own calibration.
func linearFromRoofline(r *Roofline) Linear {
	one := float64(r.StepTime([]BatchEntry{{NewTokens: 1, Context: 1024, Decode: true}}))
	two := float64(r.StepTime([]BatchEntry{{NewTokens: 1, Context: 1024, Decode: true}, {NewTokens: 1, Context: 1024, Decode: true}}))
	chunk := float64(r.StepTime([]BatchEntry{{NewTokens: 2048}}))
	perSeq := (two - one) / 1e3
	step := one/1e3 - perSeq
	return Linear{StepUs: step, PrefillTokenUs: (chunk/1e3 - step) / 2048, DecodeSeqUs: perSeq}
}

// LookupPreset returns the named preset.
func LookupPreset(name string) (Preset, error) {
	var names []string
	for _, p := range Presets() {
		if p.Name == name {
			return p, nil
		}
		names = append(names, p.Name)
	}
	return Preset{}, fmt.Errorf("unknown replica preset %q (have %s)", name, strings.Join(names, ", "))
}

// WithOverrides returns a copy of p with the fields given in overrides (YAML
// or JSON, same field names as the preset's JSON form) replaced. Unknown
// fields are errors.
func (p Preset) WithOverrides(overrides []byte) (Preset, error) {
	if len(bytes.TrimSpace(overrides)) == 0 {
		return p, nil
	}
	js, err := yaml.YAMLToJSON(overrides)
	if err != nil {
		return Preset{}, fmt.Errorf("preset %s overrides: %w", p.Name, err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	out := p
	if err := dec.Decode(&out); err != nil {
		return Preset{}, fmt.Errorf("preset %s overrides: %w", p.Name, err)
	}
	if err := out.Engine.validate(); err != nil {
		return Preset{}, fmt.Errorf("preset %s overrides: %w", p.Name, err)
	}
	return out, nil
}
