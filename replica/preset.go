package replica

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/eppsim/eppsim/arch"
	"github.com/eppsim/eppsim/internal/suggest"
)

// Preset is a replica: a model on tensor-parallel GPUs with its vLLM engine
// arguments and step-time model. Presets are plain data, written as YAML
// files (the built-in ones are presets/*.yaml; see
// presets/llama-3.1-8b-h100.yaml for the format); every field can be
// overridden (WithOverrides). The model and GPU are references, resolved
// when the preset is loaded (Arch, GPU).
type Preset struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// ModelRef is the Hugging Face id of an embedded config (arch.Models)
	// or the path of a config.json, relative to the preset file.
	ModelRef string `json:"model"`
	// GPUName names a GPU of the catalogue (or an alias);
	// GPUOverrides replaces some of its fields (gpus.yaml names).
	GPUName      string          `json:"gpu"`
	GPUOverrides json.RawMessage `json:"gpu_overrides,omitempty"`
	// TensorParallelSize is vLLM's tensor_parallel_size: weights and KV
	// cache split across this many GPUs (default 1).
	TensorParallelSize int `json:"tensor_parallel_size"`
	// EngineType is the inference engine: "vllm" (the default, also when
	// empty) or "sglang". It is not called engine because engine is the
	// vLLM engine arguments' block.
	EngineType string     `json:"engine_type,omitempty"`
	Engine     EngineArgs `json:"engine"`
	// SGLang is an SGLang replica's server arguments (nil: SGLang's
	// defaults); a vLLM replica ignores it.
	SGLang *SGLangFlags `json:"sglang,omitempty"`
	// StepModel selects "calibrated" (the default: CalibratedModel with the
	// calibration below), "roofline" (B.3 with BLIS's constants) or
	// "linear".
	StepModel string `json:"step_model"`
	// CalibrationRef is the calibrated model's coefficients: "default"
	// (or empty) for the calibration that ships
	// (calibrations/default.yaml), else a calibration file, relative to the
	// preset file. Calibration is the resolved calibration.
	CalibrationRef string       `json:"calibration,omitempty"`
	Calibration    *Calibration `json:"-"`
	Roofline       Roofline     `json:"roofline"`
	// Linear is the linear model's coefficients; all zero derives them
	// from the roofline.
	Linear Linear `json:"linear"`
	// Non-blocking CPU-side delays of the roofline and linear models (B.3,
	// BLIS α0 and α2): added to a request's TTFT and per output token,
	// never to the engine step. The calibrated model takes them from its
	// calibration (Delays).
	IngestUs         float64 `json:"ingest_us"`
	PerOutputTokenUs float64 `json:"per_output_token_us"`
	// StepScale, when > 0 and not 1, multiplies every step the model
	// gives: the step-time uncertainty of a latency interval near the
	// knee (docs/latency.md, "Intervals") is simulated this way. Not part
	// of the preset file.
	StepScale float64 `json:"-"`
	// ExpertShards, when > 1, is the number of data-parallel ranks a
	// mixture of experts' routed experts are split over: vLLM runs an MoE
	// model's data-parallel ranks with its expert layers as one DP×TP
	// group (vLLM docs/serving/data_parallel_deployment.md), so each
	// rank's GPUs hold 1/ExpertShards of the experts it would hold alone
	// and compute their share of every rank's tokens. Set on the ranks of
	// an expanded data-parallel replica (sim.ExpandDataParallel); not part
	// of the preset file.
	ExpertShards int `json:"-"`

	// Arch and GPU are the resolved model and GPU.
	Arch *arch.Model `json:"-"`
	GPU  arch.GPU    `json:"-"`

	// Where references resolve: the catalogue (nil: the built-in one) and
	// the directory of relative model paths.
	gpus *arch.GPUCatalogue
	dir  string
}

// PresetRenames maps the camelCase keys presets and fleet overrides had
// before they took vLLM's snake_case names to the new names, for "did you
// mean" errors.
var PresetRenames = map[string]string{
	"numGpuBlocks":              "num_gpu_blocks_override",
	"blockSize":                 "block_size",
	"maxNumBatchedTokens":       "max_num_batched_tokens",
	"maxNumSeqs":                "max_num_seqs",
	"longPrefillTokenThreshold": "long_prefill_token_threshold",
	"maxModelLen":               "max_model_len",
	"disablePrefixCaching":      "enable_prefix_caching (negated)",
	"checkInvariants":           "check_invariants",
	"stepModel":                 "step_model",
	"ingestUs":                  "ingest_us",
	"perOutputTokenUs":          "per_output_token_us",
	"layerUs":                   "layer_us",
	"stepUs":                    "step_us",
	"reqUs":                     "req_us",
	"etaWeights":                "eta_weights",
	"etaKV":                     "eta_kv",
	"allReduceBWRatio":          "all_reduce_bw_ratio",
	"allReduceUs":               "all_reduce_us",
	"prefillTokenUs":            "prefill_token_us",
	"decodeSeqUs":               "decode_seq_us",
	"tp":                        "tensor_parallel_size",
	"gpuMemoryUtilization":      "gpu_memory_utilization",
	"kvCacheDtype":              "kv_cache_dtype",
}

// defaultPreset holds the defaults a preset file is decoded onto.
func defaultPreset() Preset {
	return Preset{
		TensorParallelSize: 1,
		StepModel:          "calibrated",
		Roofline:           DefaultRoofline(),
		IngestUs:           15563.2,
		PerOutputTokenUs:   45.9,
	}
}

// decodePreset decodes YAML or JSON onto p, strictly.
func decodePreset(data []byte, p *Preset) error {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return err
	}
	if p.Engine.EnablePrefixCaching != nil { // decode into a copy, not the shared value
		v := *p.Engine.EnablePrefixCaching
		p.Engine.EnablePrefixCaching = &v
	}
	if p.Engine.OffloadJobOverheadUs != nil {
		v := *p.Engine.OffloadJobOverheadUs
		p.Engine.OffloadJobOverheadUs = &v
	}
	if p.SGLang != nil {
		v := *p.SGLang
		p.SGLang = &v
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := suggest.UnknownField(dec.Decode(p), p, PresetRenames); err != nil {
		if engineGivenAsType(js) {
			return fmt.Errorf("engine: is the vLLM engine arguments' block; the engine itself is engine_type (%s)", strings.Join(EngineTypes, ", "))
		}
		return err
	}
	return checkGivenZeros(js)
}

// engineGivenAsType reports whether a preset document's engine key is a
// string ("engine: sglang"), the engine type written under the key of the
// vLLM arguments.
func engineGivenAsType(js []byte) bool {
	var doc struct {
		Engine json.RawMessage `json:"engine"`
	}
	if json.Unmarshal(js, &doc) != nil {
		return false
	}
	var s string
	return json.Unmarshal(doc.Engine, &s) == nil
}

// zeroIsDefault lists the engine arguments whose zero value EngineArgs
// reads as "vLLM's default", which vLLM itself refuses: given as 0 they
// are an error, not the default (leave the key out for that). The others
// keep their zero: long_prefill_token_threshold 0 is vLLM's default (no
// threshold), kv_offloading_size 0 no CPU tier, offload_job_overhead_us 0
// a free copy.
var zeroIsDefault = []string{"block_size", "max_num_batched_tokens", "max_num_seqs", "max_model_len",
	"data_parallel_size", "gpu_memory_utilization", "num_gpu_blocks_override", "offload_pcie_gb_per_s"}

// sglangZeroIsDefault lists the sglang block's keys whose zero value
// SGLangFlags reads as "SGLang's default", which SGLang itself refuses or
// reads otherwise: given as 0 they are an error (leave the key out for the
// default). The boolean enable_mixed_chunk and the strings keep theirs.
var sglangZeroIsDefault = []string{"mem_fraction_static", "page_size", "max_running_requests", "chunked_prefill_size",
	"max_prefill_tokens", "max_total_tokens", "schedule_conservativeness", "context_length", "decode_log_interval"}

// checkGivenZeros refuses a zero given for a zeroIsDefault key of the
// engine block, or a sglangZeroIsDefault key of the sglang block, of a
// preset document (JSON).
func checkGivenZeros(js []byte) error {
	var doc struct {
		Engine map[string]json.RawMessage `json:"engine"`
		SGLang map[string]json.RawMessage `json:"sglang"`
	}
	if json.Unmarshal(js, &doc) != nil {
		return nil // decoded already: not an object, nothing to check
	}
	for _, b := range []struct {
		block, engine string
		keys          []string
		given         map[string]json.RawMessage
	}{{"engine", "vLLM", zeroIsDefault, doc.Engine}, {"sglang", "SGLang", sglangZeroIsDefault, doc.SGLang}} {
		for _, k := range b.keys {
			if v, ok := b.given[k]; ok {
				var f float64
				if json.Unmarshal(v, &f) == nil && f == 0 {
					return fmt.Errorf("%s.%s: 0 is not a value %s accepts (leave the key out for the default)", b.block, k, b.engine)
				}
			}
		}
	}
	return nil
}

// ParsePreset reads a preset file (YAML or JSON) and resolves its model
// (relative paths from dir) and GPU (in gpus; nil: the built-in
// catalogue). A preset without a name is named after its file.
func ParsePreset(data []byte, file, dir string, gpus *arch.GPUCatalogue) (Preset, error) {
	p := defaultPreset()
	if err := decodePreset(data, &p); err != nil {
		return Preset{}, fmt.Errorf("%s: %w", file, err)
	}
	if p.Name == "" {
		p.Name = strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
	}
	p.gpus, p.dir = gpus, dir
	if err := p.resolve(); err != nil {
		return Preset{}, fmt.Errorf("%s: %w", file, err)
	}
	return p, nil
}

// LoadPreset reads a preset file.
func LoadPreset(path string, gpus *arch.GPUCatalogue) (Preset, error) {
	data, err := arch.ReadConfigFile(path)
	if err != nil {
		return Preset{}, err
	}
	return ParsePreset(data, path, filepath.Dir(path), gpus)
}

//go:embed presets/*.yaml
var presetFS embed.FS

// Presets returns the built-in presets (presets/*.yaml), sorted by name.
func Presets() []Preset {
	entries, err := presetFS.ReadDir("presets")
	if err != nil {
		panic(err)
	}
	var out []Preset
	for _, e := range entries {
		data, err := presetFS.ReadFile("presets/" + e.Name())
		if err != nil {
			panic(err)
		}
		p, err := ParsePreset(data, "presets/"+e.Name(), "", nil)
		if err != nil {
			panic(err) // the embedded files are fixed; tests load them
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b Preset) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// PresetNames lists the built-in presets' names, sorted.
func PresetNames() []string {
	var names []string
	for _, p := range Presets() {
		names = append(names, p.Name)
	}
	return names
}

// LookupPreset returns the built-in preset called name, or reads name as a
// preset file; GPUs resolve in the built-in catalogue.
func LookupPreset(name string) (Preset, error) {
	return LookupPresetIn(name, nil)
}

// LookupPresetIn is LookupPreset with GPUs resolved in gpus (nil: the
// built-in catalogue).
func LookupPresetIn(name string, gpus *arch.GPUCatalogue) (Preset, error) {
	for _, p := range Presets() {
		if p.Name == name {
			if gpus != nil {
				p.gpus = gpus
				if err := p.resolve(); err != nil {
					return Preset{}, fmt.Errorf("preset %s: %w", name, err)
				}
			}
			return p, nil
		}
	}
	if st, err := os.Stat(name); err == nil && !st.IsDir() {
		return LoadPreset(name, gpus)
	}
	return Preset{}, fmt.Errorf("unknown replica preset %q (have %s; or give a preset YAML file)", name, strings.Join(PresetNames(), ", "))
}

// NewPreset makes a preset for model m on tensor-parallel GPUs g with
// vLLM's default engine arguments and the default roofline; its name is
// derived from the model, GPU and TP ("qwen3-14b-h100", "...-tp2").
func NewPreset(m *arch.Model, g arch.GPU, tp int) (Preset, error) {
	if err := m.CheckTP(tp); err != nil {
		return Preset{}, fmt.Errorf("%s: %w", m.Name, err)
	}
	p := defaultPreset()
	p.Name = presetName(m.Name, g.Name, tp)
	p.Description = fmt.Sprintf("%s on %d×%s", m.Name, tp, g.Name)
	p.ModelRef, p.GPUName, p.TensorParallelSize = m.Name, g.Name, tp
	p.Arch, p.GPU = m, g
	// The calibration is resolved now, not on the first Model call: Delays
	// reads it too (its ingest delay, jitter and per-token delay), and a
	// copy of the preset that has not built its model yet must not fall
	// back to the preset's uncalibrated delays.
	if err := p.resolveCalibration(); err != nil {
		return Preset{}, err
	}
	return p, nil
}

func presetName(model, gpu string, tp int) string {
	base := filepath.Base(model)
	if base == "config.json" {
		base = filepath.Base(filepath.Dir(model))
		if base == "." || base == "/" {
			base = "model"
		}
	}
	base = strings.TrimSuffix(base, ".json")
	name := strings.ToLower(base + "-" + gpu)
	if tp > 1 {
		name += fmt.Sprintf("-tp%d", tp)
	}
	return name
}

// WithCatalogue returns p with its GPU resolved again in gpus (a user
// catalogue may redefine the preset's GPU).
func (p Preset) WithCatalogue(gpus *arch.GPUCatalogue) (Preset, error) {
	p.gpus = gpus
	if err := p.resolve(); err != nil {
		return Preset{}, fmt.Errorf("preset %s: %w", p.Name, err)
	}
	return p, nil
}

// resolve looks up the model and GPU the references name.
func (p *Preset) resolve() error {
	switch {
	case p.ModelRef == "":
		return fmt.Errorf("model: required (a Hugging Face id of %s, or a config.json path)", strings.Join(arch.Models(), ", "))
	case p.GPUName == "":
		return fmt.Errorf("gpu: required")
	case p.TensorParallelSize < 1:
		return fmt.Errorf("tensor_parallel_size: must be at least 1, got %d", p.TensorParallelSize)
	}
	m, err := arch.ResolveModel(p.ModelRef, p.dir)
	if err != nil {
		return fmt.Errorf("model: %w", err)
	}
	gpus := p.gpus
	if gpus == nil {
		gpus = arch.DefaultGPUs()
	}
	g, err := gpus.Lookup(p.GPUName)
	if err != nil {
		return fmt.Errorf("gpu: %w", err)
	}
	if g, err = g.WithOverrides(p.GPUOverrides); err != nil {
		return fmt.Errorf("gpu_overrides: %w", err)
	}
	if err := m.CheckTP(p.TensorParallelSize); err != nil {
		return fmt.Errorf("%s: %w", m.Name, err)
	}
	if err := p.Engine.validate(); err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	if err := p.checkEngine(); err != nil {
		return err
	}
	if err := p.resolveCalibration(); err != nil {
		return err
	}
	p.Arch, p.GPU = m, g
	return nil
}

// resolveCalibration loads the calibration CalibrationRef names.
func (p *Preset) resolveCalibration() error {
	switch p.CalibrationRef {
	case "", "default":
		c := DefaultCalibration()
		p.Calibration = &c
		return nil
	}
	path := p.CalibrationRef
	if !filepath.IsAbs(path) && p.dir != "" {
		path = filepath.Join(p.dir, path)
	}
	c, err := LoadCalibration(path)
	if err != nil {
		return fmt.Errorf("calibration: %w", err)
	}
	p.Calibration = &c
	return nil
}

// WithCalibration returns p using calibration c (the calibrated model's
// coefficients; --calibration).
func (p Preset) WithCalibration(c Calibration, ref string) Preset {
	p.CalibrationRef, p.Calibration = ref, &c
	return p
}

// StepModelID names the step-time model and its constants for summaries:
// "calibrated NAME@HASH", "roofline" or "linear".
func (p *Preset) StepModelID() string {
	id := p.StepModel
	switch p.StepModel {
	case "", "calibrated":
		id = "calibrated"
		if p.Calibration != nil {
			id += " " + p.Calibration.ID()
		}
	}
	if s := p.stepScale(); s != 1 {
		id += fmt.Sprintf(" ×%.6g", s)
	}
	return id
}

// stepScale is what every step of the preset's model is multiplied by:
// StepScale when set, times its deployment's offset in its calibration
// (Calibration.Offsets; the calibrated step model only).
func (p *Preset) stepScale() float64 {
	s := 1.0
	if p.StepScale > 0 {
		s = p.StepScale
	}
	if (p.StepModel == "" || p.StepModel == "calibrated") && p.Calibration != nil && len(p.Calibration.Offsets) > 0 {
		s *= OffsetFor(p.Calibration.Offsets, DeploymentOf(p))
	}
	return s
}

// Delays returns the non-blocking per-request delays in µs: the mean ingest
// added to TTFT and E2E, the per-output-token time added to E2E, and the
// share of the ingest that varies per request (Coefficients.IngestJitter).
// The calibrated model takes them from its calibration, the others from
// the preset (without jitter).
func (p *Preset) Delays() (ingestUs, perOutputTokenUs, ingestJitter float64) {
	if (p.StepModel == "" || p.StepModel == "calibrated") && p.Calibration != nil {
		c := &p.Calibration.Coefficients
		return c.IngestUs, c.PerOutputTokenUs, c.IngestJitter
	}
	return p.IngestUs, p.PerOutputTokenUs, 0
}

// WithOverrides returns a copy of p with the fields given in overrides (YAML
// or JSON, the preset file's field names) replaced, and its model and GPU
// resolved again when their references change. Unknown fields are errors,
// with a suggestion ("numGpuBlocks"; did you mean num_gpu_blocks_override?).
func (p Preset) WithOverrides(overrides []byte) (Preset, error) {
	if t := bytes.TrimSpace(overrides); len(t) == 0 || string(t) == "null" {
		return p, nil
	}
	out := p
	if err := decodePreset(overrides, &out); err != nil {
		return Preset{}, fmt.Errorf("preset %s: %w", p.Name, err)
	}
	if out.ModelRef != p.ModelRef || out.GPUName != p.GPUName || out.TensorParallelSize != p.TensorParallelSize ||
		!bytes.Equal(out.GPUOverrides, p.GPUOverrides) || out.Arch == nil {
		if err := out.resolve(); err != nil {
			return Preset{}, fmt.Errorf("preset %s: %w", p.Name, err)
		}
	} else if err := out.Engine.validate(); err != nil {
		return Preset{}, fmt.Errorf("preset %s: engine: %w", p.Name, err)
	} else if err := out.checkEngine(); err != nil {
		return Preset{}, fmt.Errorf("preset %s: %w", p.Name, err)
	}
	return out, nil
}

// KVCapacity is the preset's computed KV capacity (ComputeKVCapacity),
// whether or not num_gpu_blocks_override replaces it.
func (p *Preset) KVCapacity() (KVCapacity, error) {
	if p.Arch == nil {
		return KVCapacity{}, fmt.Errorf("preset %s: model and GPU not resolved", p.Name)
	}
	return computeKVCapacity(p.Arch, &p.GPU, p.TensorParallelSize, p.ExpertShards, p.Engine)
}

// EngineConfig resolves the engine arguments: vLLM's defaults for the
// model and GPU, and num_gpu_blocks from num_gpu_blocks_override or else
// the KV capacity. Like vLLM it refuses a configuration whose KV cache
// cannot hold one max_model_len request (unless the override is set).
func (p *Preset) EngineConfig() (Config, error) {
	if p.Arch == nil {
		return Config{}, fmt.Errorf("preset %s: model and GPU not resolved", p.Name)
	}
	if err := p.Engine.validate(); err != nil {
		return Config{}, fmt.Errorf("preset %s: engine: %w", p.Name, err)
	}
	e := p.Engine.withDefaults(p.Arch, &p.GPU)
	cfg := Config{
		BlockSize:                 e.BlockSize,
		MaxNumBatchedTokens:       e.MaxNumBatchedTokens,
		MaxNumSeqs:                e.MaxNumSeqs,
		LongPrefillTokenThreshold: e.LongPrefillTokenThreshold,
		MaxModelLen:               e.MaxModelLen,
		DisablePrefixCaching:      e.EnablePrefixCaching != nil && !*e.EnablePrefixCaching,
		AsyncScheduling:           e.AsyncScheduling == nil || *e.AsyncScheduling,
		CheckInvariants:           e.CheckInvariants,
		NumGPUBlocks:              e.NumGPUBlocksOverride,
	}
	if cfg.NumGPUBlocks == 0 {
		c, err := p.KVCapacity()
		if err != nil {
			return Config{}, fmt.Errorf("preset %s: %w", p.Name, err)
		}
		cfg.NumGPUBlocks = c.Blocks
		if need := (cfg.MaxModelLen + cfg.BlockSize - 1) / cfg.BlockSize; need > c.Blocks {
			return Config{}, fmt.Errorf("preset %s: max_model_len %d needs %d KV blocks of %d tokens but only %d fit on %d×%s; lower max_model_len or raise gpu_memory_utilization (as vLLM would ask)",
				p.Name, cfg.MaxModelLen, need, cfg.BlockSize, c.Blocks, p.TensorParallelSize, p.GPU.Name)
		}
	}
	if e.KVOffloadingSize > 0 {
		elem, err := p.Arch.KVElementBytes(e.KVCacheDtype)
		if err != nil {
			return Config{}, fmt.Errorf("preset %s: %w", p.Name, err)
		}
		off, err := e.CPUOffload(p.Arch, p.TensorParallelSize, elem, e.BlockSize)
		if err != nil {
			return Config{}, fmt.Errorf("preset %s: %w", p.Name, err)
		}
		cfg.KVOffloadingSize, cfg.Offload = e.KVOffloadingSize, off
	}
	if err := cfg.validate(); err != nil {
		return Config{}, fmt.Errorf("preset %s: %w", p.Name, err)
	}
	return cfg, nil
}

// KVBlockBytesPerRank is one KV block's bytes on one tensor-parallel rank
// of the preset's model, KV dtype and block size: what a P/D transfer moves
// per block and rank pair (pd-offload.md A.8: 2·L·max(1, H_kv/TP)·d·s per
// token, MLA L·(r_kv + d_rope)·s).
func (p *Preset) KVBlockBytesPerRank() (int64, error) {
	if p.Arch == nil {
		return 0, fmt.Errorf("preset %s: model and GPU not resolved", p.Name)
	}
	e := p.Engine.withDefaults(p.Arch, &p.GPU)
	elem, err := p.Arch.KVElementBytes(e.KVCacheDtype)
	if err != nil {
		return 0, fmt.Errorf("preset %s: %w", p.Name, err)
	}
	return p.Arch.KVBytesPerToken(elem, p.TensorParallelSize) * int64(e.BlockSize), nil
}

// Model returns the preset's step-time model, bound to its model, GPU, TP
// and KV dtype, every step multiplied by StepScale when set and by its
// deployment's offset when its calibration has one.
func (p *Preset) Model() (StepModel, error) {
	m, err := p.unscaledModel()
	if err != nil {
		return nil, err
	}
	if s := p.stepScale(); s != 1 {
		return scaledSteps{m: m, scale: s}, nil
	}
	return m, nil
}

// scaledSteps multiplies every step of m by scale.
type scaledSteps struct {
	m     StepModel
	scale float64
}

func (s scaledSteps) StepTime(batch []BatchEntry) int64 {
	return int64(float64(s.m.StepTime(batch))*s.scale + 0.5)
}

// compilesKernels and compileClass pass s.m's first-use compiles through
// unscaled: they are host time, not the GPU's steps.
func (s scaledSteps) compilesKernels() bool {
	k, ok := s.m.(kernelCompiler)
	return ok && k.compilesKernels()
}

func (s scaledSteps) compileClass(n int) (int, int64, bool) {
	if k, ok := s.m.(kernelCompiler); ok {
		return k.compileClass(n)
	}
	return 0, 0, false
}

func (p *Preset) unscaledModel() (StepModel, error) {
	rooflineFor := func() (*Roofline, error) {
		if p.Arch == nil {
			return nil, fmt.Errorf("preset %s: model and GPU not resolved", p.Name)
		}
		elem, err := p.Arch.KVElementBytes(p.Engine.KVCacheDtype)
		if err != nil {
			return nil, fmt.Errorf("preset %s: %w", p.Name, err)
		}
		r := p.Roofline
		r.Bind(p.Arch, &p.GPU, p.TensorParallelSize, elem)
		return &r, nil
	}
	switch p.StepModel {
	case "", "calibrated":
		if p.Arch == nil {
			return nil, fmt.Errorf("preset %s: model and GPU not resolved", p.Name)
		}
		if p.Calibration == nil {
			if err := p.resolveCalibration(); err != nil {
				return nil, fmt.Errorf("preset %s: %w", p.Name, err)
			}
		}
		elem, err := p.Arch.KVElementBytes(p.Engine.KVCacheDtype)
		if err != nil {
			return nil, fmt.Errorf("preset %s: %w", p.Name, err)
		}
		m, err := newCalibratedModel(p.Calibration.Coefficients, p.Arch, &p.GPU, p.TensorParallelSize, max(p.ExpertShards, 1), elem)
		if err != nil {
			return nil, fmt.Errorf("preset %s: %w", p.Name, err)
		}
		if p.EngineTypeOf() == EngineSGLang {
			// SGLang runs PyTorch's symmetric-memory all-reduce only with
			// --enable-torch-symm-mem, off by default: its custom kernel,
			// then NCCL (allreduce.go). Its decode CUDA graphs pad too, to
			// a list of its own that sglang-engine.md does not give, so
			// its steps stay unpadded.
			m.withoutSymmetricMemory()
		} else {
			e := p.Engine.withDefaults(p.Arch, &p.GPU)
			g := vllmCUDAGraphSizes(e.MaxNumSeqs, e.MaxNumBatchedTokens)
			m.padToCUDAGraphs(g)
			if !e.KernelCacheWarm {
				m.compileOnFirstUse(g, e.MaxNumBatchedTokens)
			}
		}
		return m, nil
	case "roofline":
		return rooflineFor()
	case "linear":
		l := p.Linear
		if l == (Linear{}) {
			r, err := rooflineFor()
			if err != nil {
				return nil, err
			}
			l = linearFromRoofline(r)
		}
		return &l, nil
	}
	return nil, fmt.Errorf("preset %s: unknown step_model %q (want calibrated, roofline or linear)", p.Name, p.StepModel)
}

// linearFromRoofline derives the linear model's coefficients from a bound
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
