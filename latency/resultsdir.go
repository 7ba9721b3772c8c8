package latency

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/workload"
)

// MaxDecodePerToken is the largest decode time per output token (s), (E2E
// mean − TTFT mean)/(output_len − 1), that a results directory may show:
// the slowest measured run of ../shared/latency, overloaded, takes 37 ms,
// so a second means the file's latencies are not in seconds (milliseconds
// written where inference-perf writes seconds give 4 s and more).
const MaxDecodePerToken = 1.0

// maxIPerfConfigBytes bounds an inference-perf config (as workload does).
const maxIPerfConfigBytes = 1 << 20

// iperfWrites is what a results file larger than its bound is not.
const iperfWrites = "what inference-perf writes there"

// reStageFile matches a stage report's name after the prefix.
var reStageFile = regexp.MustCompile(`^stage_(\d+)_lifecycle_metrics\.json$`)

// LoadResultsDir reads the run an inference-perf results directory
// records, with the engine that served it:
//
//   - the resolved config inference-perf writes beside its reports
//     (config.yaml), read as workload.ParseInferencePerf reads any
//     inference-perf config. It is the run's workload: Spec simulates it
//     as it is (Experiment.IPerfConfig). The requests must be streamed
//     (TTFT is measured on streams only) with ignore_eos (else the server
//     stopped at EOS and the outputs are shorter than the max_tokens the
//     simulation generates).
//   - summary_lifecycle_metrics.json → Measured["summary"], and each
//     stage_N_lifecycle_metrics.json → Measured["stage_N"] (ParseLifecycle;
//     seconds there, ms in Measurement). A stage report's requested rate
//     must be its config stage's.
//
// When inference-perf was given storage.local_storage.report_file_prefix,
// every file name starts with it; the prefix is found from the summary
// report's name. The run is flagged overloaded (RegimeFlags) when requests
// failed or the mean TTFT is at least OverloadedTTFT, as experiments.json
// flags its runs. Errors name the file and the field.
func LoadResultsDir(dir string, eng *EngineSpec) (*Experiment, error) {
	if eng == nil {
		return nil, fmt.Errorf("%s: no engine file", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("results directory: %w", err)
	}
	var prefixes []string
	for _, de := range entries {
		if n := de.Name(); strings.HasSuffix(n, SummaryFile) && !de.IsDir() {
			prefixes = append(prefixes, strings.TrimSuffix(n, SummaryFile))
		}
	}
	switch len(prefixes) {
	case 0:
		return nil, fmt.Errorf("%s: missing: not an inference-perf results directory (inference-perf writes the whole run's report there unless report.request_lifecycle.summary is false)",
			filepath.Join(dir, SummaryFile))
	case 1:
	default:
		return nil, fmt.Errorf("%s: the reports of %d runs (report_file_prefix %s); give each run's directory", dir, len(prefixes), strings.Join(quoteAll(prefixes), ", "))
	}
	prefix := prefixes[0]
	file := func(name string) string { return filepath.Join(dir, prefix+name) }

	cfgPath := file(ConfigFile)
	raw, err := readBounded(cfgPath, maxIPerfConfigBytes, iperfWrites)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s: missing: the run's inference-perf config (inference-perf writes it beside its reports; with a build that did not, copy the config the run used there)", cfgPath)
		}
		return nil, err
	}
	cfg, err := workload.ParseInferencePerf(raw, cfgPath)
	if err != nil {
		return nil, err
	}
	switch {
	case !cfg.API.Streaming:
		return nil, fmt.Errorf("%s: api.streaming: false: inference-perf measures TTFT on streamed responses only, and eppsim needs it", cfgPath)
	case !cfg.Server.IgnoreEOS:
		return nil, fmt.Errorf("%s: server.ignore_eos: false: the server stopped at its end-of-sequence token, so the outputs were shorter than max_tokens, which the simulation generates; record the run with ignore_eos: true", cfgPath)
	}
	outLen, err := NominalOutputLen(cfg)
	if err != nil {
		return nil, err
	}

	e := &Experiment{
		ID: eng.ID, Model: eng.Model, ModelArch: eng.ModelArch, Hardware: eng.GPU, TP: eng.TensorParallelSize,
		Engine: Engine{
			MaxNumSeqs: eng.MaxNumSeqs, MaxNumBatchedTokens: eng.MaxNumBatchedTokens, MaxModelLen: eng.MaxModelLen,
			BlockSize: eng.BlockSize, GPUMemoryUtilization: eng.GPUMemoryUtilization,
			EnablePrefixCaching: eng.EnablePrefixCaching, TotalGPUKVBlocks: eng.NumGPUBlocks,
			DPLBEngineCounts: eng.DPLBEngineCounts, KernelCacheWarm: eng.KernelCacheWarm,
		},
		EngineType: eng.EngineType, SGLang: eng.SGLang,
		IPerfConfig: raw, IPerfConfigName: cfgPath, NominalOutputLen: outLen,
		modelFile: eng.ModelArch != nil,
		Measured:  map[string]Measurement{},
	}
	if e.ID == "" {
		e.ID = filepath.Clean(dir)
	}
	if dp := eng.DataParallelSize; dp > 1 {
		e.DP = &dp
	}
	w := &e.Workload
	w.API.Type, w.API.Streaming = cfg.API.Type, cfg.API.Streaming
	w.IgnoreEOS, w.DataType = cfg.Server.IgnoreEOS, cfg.Data.Type
	if cfg.Data.Type == "shared_prefix" {
		sp := cfg.Data.SharedPrefix
		w.SharedPrefix.SystemPromptLen, w.SharedPrefix.QuestionLen, w.SharedPrefix.OutputLen = sp.SystemPromptLen, sp.QuestionLen, sp.OutputLen
		w.SharedPrefix.NumGroups, w.SharedPrefix.PromptsPerGroup = sp.NumGroups, sp.NumPromptsPerGroup
	}
	for _, s := range cfg.Load.Stages {
		w.Stages = append(w.Stages, Stage{RateRPS: s.Rate, DurationS: float64(s.Duration)})
	}

	// The reports: the summary, then the stages the directory has.
	summary, err := loadLifecycle(file(SummaryFile))
	if err != nil {
		return nil, err
	}
	if err := checkUnits(summary, outLen, file(SummaryFile)); err != nil {
		return nil, err
	}
	e.Measured["summary"] = summary.Measurement()
	for _, de := range entries {
		m := reStageFile.FindStringSubmatch(strings.TrimPrefix(de.Name(), prefix))
		if m == nil || !strings.HasPrefix(de.Name(), prefix) || de.IsDir() {
			continue
		}
		k, err := strconv.Atoi(m[1])
		if err != nil || k >= len(cfg.Load.Stages) {
			return nil, fmt.Errorf("%s: a report of stage %s, but %s has %d load stages; the files are not of one run",
				filepath.Join(dir, de.Name()), m[1], cfgPath, len(cfg.Load.Stages))
		}
		path := filepath.Join(dir, de.Name())
		st, err := loadLifecycle(path)
		if err != nil {
			return nil, err
		}
		if r := st.RequestedRate; !math.IsNaN(r) && math.Abs(r-cfg.Load.Stages[k].Rate) > 1e-9*cfg.Load.Stages[k].Rate {
			return nil, fmt.Errorf("%s: load_summary.requested_rate: %g, but load.stages[%d].rate of %s is %g; the files are not of one run",
				path, r, k, cfgPath, cfg.Load.Stages[k].Rate)
		}
		if err := checkUnits(st, outLen, path); err != nil {
			return nil, err
		}
		e.Measured[fmt.Sprintf("stage_%d", k)] = st.Measurement()
	}
	e.RegimeFlags = regimeFlags(summary)

	if err := e.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", e.ID, err)
	}
	if err := e.resolve(); err != nil {
		return nil, fmt.Errorf("%s: %w", e.ID, err)
	}
	// Build the run's scenario once, so that engine arguments the replica
	// cannot take (a max_model_len the KV cache cannot hold, ...) are
	// reported now, with the engine file's name.
	if _, err := Spec(e, replica.DefaultCalibration(), Options{Seed: 1}); err != nil {
		if eng.File != "" {
			return nil, fmt.Errorf("%s: %w", eng.File, err)
		}
		return nil, err
	}
	return e, nil
}

// NominalOutputLen is the output length (tokens) of an inference-perf
// config's requests that itl_mean divides by: shared_prefix's output_len;
// for random and synthetic data the mean of output_distribution — fixed:
// int(mean); uniform: (min + max)/2; normal and lognormal: mean (clipping
// to [min, max] is not accounted for) — with ignore_eos, the server
// generates exactly each request's max_tokens. It must be at least 2.
func NominalOutputLen(cfg *workload.InferencePerfConfig) (float64, error) {
	var n float64
	field := "data.output_distribution.mean"
	switch cfg.Data.Type {
	case "shared_prefix":
		n, field = float64(cfg.Data.SharedPrefix.OutputLen), "data.shared_prefix.output_len"
	case "random", "synthetic":
		d := cfg.Data.Output
		switch d.Type {
		case "fixed":
			n = math.Trunc(d.Mean)
		case "uniform":
			n, field = float64(d.Min+d.Max)/2, "data.output_distribution"
		default:
			n = min(max(d.Mean, float64(d.Min)), float64(d.Max))
		}
	default:
		return 0, fmt.Errorf("%s: data.type: %q: eppsim knows the output lengths of shared_prefix, random and synthetic data only", cfg.File, cfg.Data.Type)
	}
	if !(n >= 2) {
		return 0, fmt.Errorf("%s: %s: a nominal output length of %g tokens; itl_mean divides by output length − 1, so it must be at least 2", cfg.File, field, n)
	}
	return n, nil
}

func loadLifecycle(path string) (*Lifecycle, error) {
	data, err := readBounded(path, maxLifecycleBytes, iperfWrites)
	if err != nil {
		return nil, err
	}
	return ParseLifecycle(data, path)
}

// checkUnits refuses latencies that cannot be seconds (MaxDecodePerToken).
func checkUnits(l *Lifecycle, outLen float64, path string) error {
	if d := (l.E2E.Mean - l.TTFT.Mean) / (outLen - 1); d > MaxDecodePerToken {
		return fmt.Errorf("%s: successes.latency: (request_latency.mean %g − time_to_first_token.mean %g) / (output length %g − 1) = %.3g s per output token, which no vLLM run takes; inference-perf writes seconds: were the values converted to another unit?",
			path, l.E2E.Mean, l.TTFT.Mean, outLen, d)
	}
	return nil
}

// regimeFlags flags an overloaded run as experiments.json does: requests
// failed, or the mean TTFT is at least OverloadedTTFT.
func regimeFlags(l *Lifecycle) []string {
	var out []string
	if l.Failures > 0 {
		total := l.Failures + max(l.Successes, 0)
		out = append(out, fmt.Sprintf("failures=%d (%.1f%%)", l.Failures, 100*float64(l.Failures)/float64(total)))
	}
	if ttft := l.TTFT.Mean * 1000; ttft >= OverloadedTTFT {
		out = append(out, fmt.Sprintf("ttft_mean=%.0fms: saturated/overloaded (queueing dominates)", ttft))
	}
	return out
}

// readBounded reads a regular file of at most limit bytes; what says what
// a larger file is not.
func readBounded(path string, limit int64, what string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes; not %s", path, limit, what)
	}
	return data, nil
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

// LoadInputs reads the runs of several inputs into one File: each input is
// an experiments file (the schema of ../shared/latency/experiments.json)
// or an inference-perf results directory (LoadResultsDir), whose engine
// is engineFile when given, else the directory's engine.yaml. Run IDs must
// be unique over all inputs.
func LoadInputs(paths []string, engineFile string) (*File, error) {
	if len(paths) == 0 {
		return nil, errors.New("no input: give an experiments file or an inference-perf results directory")
	}
	var eng *EngineSpec
	if engineFile != "" {
		var err error
		if eng, err = LoadEngineFile(engineFile); err != nil {
			return nil, err
		}
	}
	out := &File{}
	from := map[string]string{} // run ID → input
	dirs := 0
	for _, path := range paths {
		st, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("input: %w", err)
		}
		var exps []Experiment
		if st.IsDir() {
			dirs++
			e := eng
			if e == nil {
				ef := filepath.Join(path, EngineFile)
				if _, err := os.Stat(ef); errors.Is(err, os.ErrNotExist) {
					return nil, fmt.Errorf("%s: missing: a results directory needs the engine that served the run (model, gpu, vLLM's engine arguments, or engine-type sglang and SGLang's flags; docs/latency.md \"Your own runs\"), there or as --engine FILE", ef)
				}
				if e, err = LoadEngineFile(ef); err != nil {
					return nil, err
				}
			}
			x, err := LoadResultsDir(path, e)
			if err != nil {
				return nil, err
			}
			exps = []Experiment{*x}
		} else {
			if base := filepath.Base(path); base == SummaryFile || reStageFile.MatchString(base) || base == ConfigFile {
				return nil, fmt.Errorf("%s: an inference-perf report: give its directory, %s", path, filepath.Dir(path))
			}
			f, err := Load(path)
			if err != nil {
				return nil, err
			}
			exps = f.Experiments
			out.Refused = append(out.Refused, f.Refused...)
			if out.About == nil {
				out.About, out.Sources = f.About, f.Sources
			}
		}
		for _, x := range exps {
			if prev, ok := from[x.ID]; ok {
				return nil, fmt.Errorf("%s: run id %q is also a run of %s; run ids must be unique (a results directory's id is its path, or id in its engine file)", path, x.ID, prev)
			}
			from[x.ID] = path
			out.Experiments = append(out.Experiments, x)
		}
	}
	if eng != nil && dirs == 0 {
		return nil, fmt.Errorf("engine file %s: no results directory among the inputs (an experiments file carries its own engines)", engineFile)
	}
	if len(paths) > 1 {
		// The pooled file's metadata would describe only some of its runs.
		out.About, out.Sources = nil, nil
	}
	return out, nil
}
