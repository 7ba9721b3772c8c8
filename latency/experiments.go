// Package latency checks eppsim's times against measured vLLM (and SGLang)
// runs and fits the step-time model to them: it reads experiment files
// (the schema of ../shared/latency/experiments.json: a model, a GPU, vLLM's
// engine arguments or SGLang's flags, an inference-perf workload and,
// optionally, the measured latencies) and the results directories inference-perf writes, with an
// engine file for the serving side (LoadResultsDir, LoadInputs),
// simulates each run on one replica (with dp > 1, dp data-parallel engines
// behind vLLM's own load balancer), compares predicted with
// measured latency (Validate: latency.csv, latency.md, a plot), and fits
// the calibrated step-time model's coefficients by simulating the runs
// inside an optimiser (Calibrate). See docs/latency.md.
//
// It imports scenario (one simulation per run) and sits beside sweep,
// which does the same for routing parameters.
package latency

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/eppsim/eppsim/arch"
	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/replica/sglang"
	"github.com/eppsim/eppsim/workload"
)

// File is an experiments file.
type File struct {
	About       json.RawMessage `json:"about,omitempty"`
	Sources     json.RawMessage `json:"sources,omitempty"`
	Experiments []Experiment    `json:"experiments"`
	// Refused are the well-formed runs that cannot be simulated (a model
	// that does not fit its GPUs, an unknown GPU or quantisation, a TP
	// that does not divide the heads), set aside by Parse with the reason:
	// the file's other runs are still validated and calibrated on. A
	// malformed run (a field of the wrong type or out of range) fails the
	// whole file instead.
	Refused []RefusedRun `json:"-"`
}

// RefusedRun is a run Parse set aside, and why (the error names the file,
// the run and the field, as a failed Parse would).
type RefusedRun struct {
	ID  string
	Err error
}

// Experiment is one measured (or to-be-predicted) serving run: a single
// replica (one vLLM engine, or dp data-parallel engines behind vLLM's own
// load balancer; or one SGLang engine), one GPU type, an inference-perf
// workload.
type Experiment struct {
	ID    string `json:"id"`
	Model string `json:"model"`
	// ModelArch is the model's Hugging Face config.json fields; it is read
	// when Model is not an embedded config (arch.Models).
	ModelArch json.RawMessage `json:"model_arch,omitempty"`
	Precision string          `json:"precision,omitempty"`
	Hardware  string          `json:"hardware"`
	TP        int             `json:"tp"`
	// DP is the data-parallel size: that many engines, each on TP GPUs
	// with its own KV cache (absent or null: 1).
	DP *int `json:"dp"`
	// EngineType is the engine that served the run: "vllm" (the default,
	// also when absent) or "sglang" (replica.EngineTypes). An SGLang run
	// gives its server flags in SGLang, not Engine.
	EngineType string `json:"engine_type,omitempty"`
	// Engine is a vLLM run's engine arguments.
	Engine Engine `json:"engine"`
	// SGLang is an SGLang run's server flags, by SGLang's names (nil:
	// SGLang's defaults); only with engine_type sglang.
	SGLang   *replica.SGLangFlags `json:"sglang,omitempty"`
	Workload Workload             `json:"workload"`
	// Measured holds the measured latencies by scope: "summary" (the whole
	// run) and "stage_0", "stage_1", ... (its load stages).
	Measured map[string]Measurement `json:"measured,omitempty"`
	// Predictions holds other simulators' predictions for the run:
	// source → simulator → scope → metric → value.
	Predictions map[string]map[string]map[string]map[string]Prediction `json:"predictions,omitempty"`
	// RegimeFlags marks overloaded runs (TTFT in minutes, failures).
	RegimeFlags []string `json:"regime_flags,omitempty"`

	// The fields below are set for a run read from an inference-perf
	// results directory (LoadResultsDir); experiments files have none.

	// IPerfConfig is the run's inference-perf config as the results
	// directory holds it, and IPerfConfigName its path: Spec simulates it
	// as it is, rather than InferencePerfYAML's reconstruction from
	// Workload.
	IPerfConfig     []byte `json:"-"`
	IPerfConfigName string `json:"-"`
	// NominalOutputLen, when > 0, is the output length (tokens) itl_mean
	// divides by; otherwise it is Workload.SharedPrefix.OutputLen.
	NominalOutputLen float64 `json:"-"`
	// modelFile: ModelArch is the config.json file Model names, which
	// wins over an embedded config of the same name.
	modelFile bool
}

// Engine is vLLM's engine arguments of a run (vLLM's names).
type Engine struct {
	MaxNumSeqs           int     `json:"max_num_seqs"`
	MaxNumBatchedTokens  int     `json:"max_num_batched_tokens"`
	MaxModelLen          int     `json:"max_model_len"`
	BlockSize            int     `json:"block_size"`
	GPUMemoryUtilization float64 `json:"gpu_memory_utilization"`
	EnablePrefixCaching  *bool   `json:"enable_prefix_caching"`
	EnableChunkedPrefill *bool   `json:"enable_chunked_prefill"`
	CPUKVOffload         *bool   `json:"cpu_kv_offload"`
	// TotalGPUKVBlocks is the KV-block count vLLM logged, when known: with
	// data parallelism each engine's, as each engine logs its own.
	TotalGPUKVBlocks int `json:"total_gpu_kv_blocks"`
	CPUKVBlocks      int `json:"cpu_kv_blocks"`
	// DPLBEngineCounts, for a run with dp > 1, says whether the engines'
	// request counts reached vLLM's data-parallel load balancer (nil:
	// true). vLLM did not publish a dense model's counts from PR #30739
	// (January 2026) until PR #49204 (July 2026): false simulates those
	// versions (picker.DPLBOptions.NoEngineCounts). eppsim's key, not vLLM's.
	DPLBEngineCounts *bool `json:"dp_lb_engine_counts,omitempty"`
	// KernelCacheWarm says the server started with a Triton cache holding
	// every fused-MoE kernel its steps needed, so that no step compiled
	// one at first use (replica.EngineArgs.KernelCacheWarm; absent: a
	// fresh engine, as a benchmark's server starts). eppsim's key.
	KernelCacheWarm bool `json:"kernel_cache_warm,omitempty"`
}

// Workload is the load generator's settings (inference-perf).
type Workload struct {
	API struct {
		Type      string `json:"type"`
		Streaming bool   `json:"streaming"`
	} `json:"api"`
	IgnoreEOS bool   `json:"ignore_eos"`
	Label     string `json:"label"`
	DataType  string `json:"data_type"`
	// SharedPrefix is the shared_prefix generator's lengths as requested.
	// The group counts of the harness that recorded the runs were 10 × 10
	// whatever was requested (see Experiment.InferencePerfYAML).
	SharedPrefix struct {
		SystemPromptLen int `json:"system_prompt_len"`
		QuestionLen     int `json:"question_len"`
		OutputLen       int `json:"output_len"`
		NumGroups       int `json:"num_groups"`
		PromptsPerGroup int `json:"num_prompts_per_group"`
	} `json:"shared_prefix_requested"`
	Stages []Stage `json:"stages"`
}

// Stage is one load stage: constant rate for a duration.
type Stage struct {
	RateRPS   float64 `json:"rate_rps"`
	DurationS float64 `json:"duration_s"`
}

// Measurement is one scope's measured latencies (ms).
type Measurement struct {
	E2E  Distribution `json:"e2e_ms"`
	TTFT Distribution `json:"ttft_ms"`
}

// Distribution holds a latency's mean and percentiles, ms; absent values
// are NaN after decoding.
type Distribution struct {
	Mean, P90, P99 float64
}

// UnmarshalJSON reads {"mean": ..., "p90": ..., "p99": ..., ...}, other
// keys ignored.
func (d *Distribution) UnmarshalJSON(b []byte) error {
	var m map[string]*float64
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	get := func(k string) float64 {
		if v := m[k]; v != nil {
			return *v
		}
		return math.NaN()
	}
	d.Mean, d.P90, d.P99 = get("mean"), get("p90"), get("p99")
	return nil
}

// Prediction is another simulator's predicted value of one metric.
type Prediction struct {
	Predicted float64 `json:"predicted"`
	Actual    float64 `json:"actual"`
	MAPE      float64 `json:"mape"`
}

// maxExperimentsBytes bounds an experiments file (the shared one, 30 runs,
// has 644 kB).
const maxExperimentsBytes = 64 << 20

// Load reads an experiments file: a regular file of at most 64 MiB.
func Load(path string) (*File, error) {
	data, err := readBounded(path, maxExperimentsBytes, "an experiments file")
	if err != nil {
		return nil, fmt.Errorf("experiments: %w", err)
	}
	return Parse(data, path)
}

// Parse decodes an experiments file and checks every experiment; errors
// name the file, the experiment and the field. An engine field that is
// given (not absent or null) must hold a value vLLM accepts: 0 is not
// "the default" (absent is).
func Parse(data []byte, name string) (*File, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // a UTF-8 byte order mark is no JSON
	var f File
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(f.Experiments) == 0 {
		return nil, fmt.Errorf("%s: experiments: none", name)
	}
	// Which fields each experiment gives, to tell 0 from absent.
	var given struct {
		Experiments []struct {
			Engine   map[string]json.RawMessage `json:"engine"`
			SGLang   json.RawMessage            `json:"sglang"`
			Workload struct {
				SharedPrefix map[string]json.RawMessage `json:"shared_prefix_requested"`
			} `json:"workload"`
		} `json:"experiments"`
	}
	if err := json.Unmarshal(data, &given); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	seen := map[string]bool{}
	for i := range f.Experiments {
		e := &f.Experiments[i]
		g := given.Experiments[i]
		err := e.checkGiven(g.Engine, g.Workload.SharedPrefix)
		if err == nil {
			err = e.checkSGLang(g.Engine, g.SGLang)
		}
		if err == nil {
			err = e.check()
		}
		if err != nil {
			return nil, fmt.Errorf("%s: experiments[%d] (%s): %w", name, i, e.ID, err)
		}
		if seen[e.ID] {
			return nil, fmt.Errorf("%s: experiments[%d]: id %q repeated", name, i, e.ID)
		}
		seen[e.ID] = true
	}
	kept := f.Experiments[:0]
	for i := range f.Experiments {
		e := f.Experiments[i]
		if err := e.resolve(); err != nil {
			f.Refused = append(f.Refused, RefusedRun{ID: e.ID, Err: fmt.Errorf("%s: experiments[%d] (%s): %w", name, i, e.ID, err)})
			continue
		}
		kept = append(kept, e)
	}
	f.Experiments = kept
	if len(f.Experiments) == 0 {
		return nil, f.Refused[0].Err
	}
	return &f, nil
}

// Bounds of an experiment's integer fields when given: engine arguments
// as vLLM accepts them (block 0 of total_gpu_kv_blocks is the null block;
// cpu_kv_blocks 0 is a run without a CPU tier), the shared_prefix lengths
// (num_groups and num_prompts_per_group 0 are the recording harness's 10,
// see InferencePerfYAML).
var (
	engineMin = []struct {
		key string
		min int
		val func(*Engine) int
	}{
		{"max_num_seqs", 1, func(e *Engine) int { return e.MaxNumSeqs }},
		{"max_num_batched_tokens", 1, func(e *Engine) int { return e.MaxNumBatchedTokens }},
		{"max_model_len", 1, func(e *Engine) int { return e.MaxModelLen }},
		{"block_size", 1, func(e *Engine) int { return e.BlockSize }},
		{"total_gpu_kv_blocks", 2, func(e *Engine) int { return e.TotalGPUKVBlocks }},
		{"cpu_kv_blocks", 0, func(e *Engine) int { return e.CPUKVBlocks }},
	}
	sharedPrefixMin = []struct {
		key string
		min int
		val func(*Workload) int
	}{
		{"system_prompt_len", 0, func(w *Workload) int { return w.SharedPrefix.SystemPromptLen }},
		{"num_groups", 0, func(w *Workload) int { return w.SharedPrefix.NumGroups }},
		{"num_prompts_per_group", 0, func(w *Workload) int { return w.SharedPrefix.PromptsPerGroup }},
	}
)

// maxRunRequests bounds the requests of one run (Σ rate × duration over
// its stages): the 30 recorded runs have at most 16,800.
const maxRunRequests = 1_000_000

// checkGiven checks the fields the experiment gives (engine and
// shared_prefix_requested keys that are present and not null).
func (e *Experiment) checkGiven(engine, sharedPrefix map[string]json.RawMessage) error {
	has := func(m map[string]json.RawMessage, k string) bool {
		v, ok := m[k]
		return ok && string(bytes.TrimSpace(v)) != "null"
	}
	for _, f := range engineMin {
		if v := f.val(&e.Engine); has(engine, f.key) && v < f.min {
			return fmt.Errorf("engine.%s: must be at least %d, got %d (leave it out or null for vLLM's default)", f.key, f.min, v)
		}
	}
	if v := e.Engine.GPUMemoryUtilization; has(engine, "gpu_memory_utilization") && !(v > 0 && v <= 1) {
		return fmt.Errorf("engine.gpu_memory_utilization: must be in (0, 1], got %v (leave it out or null for vLLM's 0.9)", v)
	}
	for _, f := range sharedPrefixMin {
		if v := f.val(&e.Workload); has(sharedPrefix, f.key) && v < f.min {
			return fmt.Errorf("workload.shared_prefix_requested.%s: must be at least %d, got %d", f.key, f.min, v)
		}
	}
	return nil
}

func (e *Experiment) check() error {
	switch {
	case e.ID == "":
		return fmt.Errorf("id: required")
	case e.Model == "" && len(e.ModelArch) == 0:
		return fmt.Errorf("model: required")
	case e.Hardware == "":
		return fmt.Errorf("hardware: required")
	case e.TP < 1:
		return fmt.Errorf("tp: must be at least 1, got %d", e.TP)
	case e.DP != nil && *e.DP < 1:
		return fmt.Errorf("dp: must be at least 1, got %d", *e.DP)
	case e.DP != nil && *e.DP > maxDP:
		return fmt.Errorf("dp: %d: at most %d data-parallel engines", *e.DP, maxDP)
	case len(e.Workload.Stages) == 0:
		return fmt.Errorf("workload.stages: none")
	}
	if e.IPerfConfig == nil {
		switch {
		case e.Workload.DataType != "" && e.Workload.DataType != "shared_prefix":
			return fmt.Errorf("workload.data_type: %q: only shared_prefix is supported", e.Workload.DataType)
		case e.Workload.SharedPrefix.OutputLen < 2:
			return fmt.Errorf("workload.shared_prefix_requested.output_len: must be at least 2, got %d", e.Workload.SharedPrefix.OutputLen)
		case e.Workload.SharedPrefix.QuestionLen < 1:
			return fmt.Errorf("workload.shared_prefix_requested.question_len: must be at least 1")
		}
	} else if !(e.OutputLen() >= 2) {
		return fmt.Errorf("%s: nominal output length %g: must be at least 2 (itl_mean divides by output_len − 1)", e.IPerfConfigName, e.OutputLen())
	}
	requests := 0.0
	for i, s := range e.Workload.Stages {
		if !(s.RateRPS > 0) || !(s.DurationS > 0) {
			return fmt.Errorf("workload.stages[%d]: rate_rps and duration_s must be positive, got %v and %v", i, s.RateRPS, s.DurationS)
		}
		if requests += s.RateRPS * s.DurationS; requests > maxRunRequests {
			return fmt.Errorf("workload.stages[%d]: more than %d requests in all (Σ rate_rps × duration_s); a recorded run has thousands", i, maxRunRequests)
		}
	}
	return nil
}

// resolve builds what Spec builds, so that a run vLLM (or inference-perf)
// would refuse is refused when the file is read, not when it is
// simulated (Parse sets such runs aside in File.Refused).
func (e *Experiment) resolve() error {
	if e.IsSGLang() && e.DataParallel() > 1 {
		return fmt.Errorf("dp: %d: an SGLang run is one engine here (SGLang's --dp-size, behind its own router, is not simulated)", e.DataParallel())
	}
	if e.IPerfConfig != nil {
		return nil // LoadResultsDir builds the run's Spec, naming the engine file
	}
	if _, err := e.enginePreset(); err != nil {
		return err
	}
	yml, name := e.WorkloadYAML()
	if _, err := workload.ParseInferencePerf(yml, name); err != nil {
		return fmt.Errorf("workload: %w", err)
	}
	return nil
}

// enginePreset is the run's replica before calibration: its model on its
// GPU at its tensor-parallel degree with its engine arguments, resolved
// as vLLM would (EngineConfig), or for an SGLang run with its SGLang
// flags, resolved as SGLang would (sglang.ConfigFor).
func (e *Experiment) enginePreset() (replica.Preset, error) {
	m, err := e.ArchModel()
	if err != nil {
		return replica.Preset{}, err
	}
	g, err := arch.DefaultGPUs().Lookup(e.Hardware)
	if err != nil {
		return replica.Preset{}, fmt.Errorf("hardware: %w", err)
	}
	p, err := replica.NewPreset(m, g, e.TP)
	if err != nil {
		return replica.Preset{}, err
	}
	if e.IsSGLang() {
		p.EngineType = replica.EngineSGLang
		var flags replica.SGLangFlags
		if e.SGLang != nil {
			flags = *e.SGLang
			p.SGLang = &flags
		}
		if _, err := sglang.ConfigFor(p, flags); err != nil {
			return replica.Preset{}, fmt.Errorf("sglang: %w", err)
		}
		return p, nil
	}
	en := e.Engine
	p.Engine.MaxNumSeqs, p.Engine.MaxNumBatchedTokens = en.MaxNumSeqs, en.MaxNumBatchedTokens
	p.Engine.MaxModelLen, p.Engine.BlockSize = en.MaxModelLen, en.BlockSize
	p.Engine.GPUMemoryUtilization = en.GPUMemoryUtilization
	p.Engine.EnablePrefixCaching = en.EnablePrefixCaching
	p.Engine.NumGPUBlocksOverride = en.TotalGPUKVBlocks
	p.Engine.KernelCacheWarm = en.KernelCacheWarm
	if _, err := p.EngineConfig(); err != nil {
		return replica.Preset{}, err
	}
	return p, nil
}

// ArchModel resolves the run's model: the embedded config of its Hugging
// Face id, or else its model_arch fields; for a run whose engine file
// names a config.json, that file.
func (e *Experiment) ArchModel() (*arch.Model, error) {
	if e.modelFile {
		m, err := arch.ParseModel(e.ModelArch, e.Model)
		if err != nil {
			return nil, fmt.Errorf("model: %w", err)
		}
		return m, nil
	}
	if m, err := arch.LookupModel(e.Model); err == nil {
		// An embedded config without quantization_config served at a
		// quantised precision is vLLM's online quantisation of it
		// (--quantization fp8, for example): the precision says how.
		if err := m.ApplyPrecision(e.Precision, ""); err != nil {
			return nil, fmt.Errorf("precision: %w", err)
		}
		return m, nil
	}
	if len(e.ModelArch) == 0 {
		return nil, fmt.Errorf("model: %q is not an embedded config and model_arch is missing", e.Model)
	}
	m, err := arch.ParseModel(e.ModelArch, e.Model)
	if err != nil {
		return nil, fmt.Errorf("model_arch: %w", err)
	}
	// model_arch is a config.json's architecture fields, which may leave
	// out quantization_config: the run's precision (and the method the
	// schema records as model_arch.quantization) then say how the weights
	// are stored, as an embedded config's quantization_config would.
	var q struct {
		Method any `json:"quantization"`
	}
	_ = json.Unmarshal(e.ModelArch, &q) // ParseModel has read it as an object
	method, _ := q.Method.(string)
	if err := m.ApplyPrecision(e.Precision, method); err != nil {
		return nil, fmt.Errorf("precision: %w", err)
	}
	return m, nil
}

// maxDP bounds a run's data-parallel engines.
const maxDP = 1024

// EngineTypeOf is the run's engine type, vLLM when absent.
func (e *Experiment) EngineTypeOf() string {
	if e.EngineType == "" {
		return replica.EngineVLLM
	}
	return e.EngineType
}

// IsSGLang reports whether the run was served by SGLang.
func (e *Experiment) IsSGLang() bool { return e.EngineType == replica.EngineSGLang }

// DataParallel is the run's data-parallel size: its engines, 1 when dp is
// absent.
func (e *Experiment) DataParallel() int {
	if e.DP == nil {
		return 1
	}
	return *e.DP
}

// Overloaded reports whether the run is flagged as overloaded.
func (e *Experiment) Overloaded() bool { return len(e.RegimeFlags) > 0 }

// Scopes lists the run's scopes: "summary", then one per stage.
func (e *Experiment) Scopes() []string {
	out := []string{"summary"}
	for i := range e.Workload.Stages {
		out = append(out, fmt.Sprintf("stage_%d", i))
	}
	return out
}

// HasMeasurement reports whether the run carries measured latencies.
func (e *Experiment) HasMeasurement() bool {
	m, ok := e.Measured["summary"]
	return ok && !math.IsNaN(m.E2E.Mean) && !math.IsNaN(m.TTFT.Mean)
}

// OutputLen is the nominal output length (tokens) itl_mean divides by:
// the shared_prefix output_len, or for a run read from a results
// directory the one its config gives (NominalOutputLen).
func (e *Experiment) OutputLen() float64 {
	if e.NominalOutputLen > 0 {
		return e.NominalOutputLen
	}
	return float64(e.Workload.SharedPrefix.OutputLen)
}

// WorkloadYAML is the inference-perf config Spec simulates, and its name
// in errors: the config of a run read from a results directory as it is,
// else InferencePerfYAML.
func (e *Experiment) WorkloadYAML() ([]byte, string) {
	if e.IPerfConfig != nil {
		return e.IPerfConfig, e.IPerfConfigName
	}
	return e.InferencePerfYAML(), e.ID + " (workload)"
}

// InferencePerfYAML is the run's workload as an inference-perf config:
// the shared_prefix generator with the run's lengths, constant-rate
// stages, the completion or chat API. The group counts are those the
// recording harness used: every resolved config of the runs in
// ../shared/latency shows num_groups 10 and num_prompts_per_group 10,
// whatever the profile requested (its README: "the generator built 10 ×
// 10 = 100 prompts"); a run that states its own counts keeps them.
func (e *Experiment) InferencePerfYAML() []byte {
	w := &e.Workload
	sp := w.SharedPrefix
	groups, per := sp.NumGroups, sp.PromptsPerGroup
	if groups == 0 {
		groups = 10
	}
	if per == 0 {
		per = 10
	}
	api := w.API.Type
	if api == "" {
		api = "completion"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "api:\n  type: %s\n  streaming: %t\n", api, w.API.Streaming || w.API.Type == "")
	fmt.Fprintf(&b, "data:\n  type: shared_prefix\n  shared_prefix:\n    num_groups: %d\n    num_prompts_per_group: %d\n"+
		"    system_prompt_len: %d\n    question_len: %d\n    output_len: %d\n", groups, per, sp.SystemPromptLen, sp.QuestionLen, sp.OutputLen)
	b.WriteString("load:\n  type: constant\n  interval: 1.0\n  stages:\n")
	for _, s := range w.Stages {
		fmt.Fprintf(&b, "  - rate: %v\n    duration: %v\n", s.RateRPS, s.DurationS)
	}
	fmt.Fprintf(&b, "server:\n  type: %s\n  model_name: %s\n  ignore_eos: %t\n", e.EngineTypeOf(), e.Model, w.IgnoreEOS || w.API.Type == "")
	return []byte(b.String())
}

// Models lists the distinct models of the experiments, sorted.
func (f *File) Models() []string {
	var out []string
	for _, e := range f.Experiments {
		if !slices.Contains(out, e.Model) {
			out = append(out, e.Model)
		}
	}
	slices.Sort(out)
	return out
}
