package latency

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/eppsim/eppsim/arch"
	"github.com/eppsim/eppsim/internal/suggest"
	"github.com/eppsim/eppsim/replica"
)

// EngineFile is the name of the engine file LoadInputs looks for in a
// results directory.
const EngineFile = "engine.yaml"

// EngineSpec is the serving side of a run recorded with inference-perf,
// which its results directory does not hold: the model, the GPU, the
// parallelism and vLLM's engine arguments, or for an SGLang run SGLang's
// server flags. It is read from a small YAML file in vLLM's argument
// names, with SGLang's flags in an sglang block (ParseEngine;
// docs/latency.md, "Your own runs"). Zero fields take the engine's
// defaults.
type EngineSpec struct {
	// File is the file it was read from, for errors ("" when built in
	// code).
	File string
	// ID names the run (default: the results directory's path).
	ID string
	// Model is the Hugging Face id of an embedded config, or the path of
	// a config.json (or of its directory), relative to the engine file.
	Model string
	// ModelArch is the config.json Model names, when it names a file.
	ModelArch json.RawMessage
	// GPU is the GPU's name in the catalogue (arch.DefaultGPUs).
	GPU                string
	TensorParallelSize int
	// DataParallelSize is the engines behind vLLM's own load balancer,
	// each on TensorParallelSize GPUs with its own KV cache (0 or 1: one).
	DataParallelSize     int
	MaxNumSeqs           int
	MaxNumBatchedTokens  int
	MaxModelLen          int
	BlockSize            int
	GPUMemoryUtilization float64
	EnablePrefixCaching  *bool
	// NumGPUBlocks is num_gpu_blocks_override, or the block count vLLM
	// logged (total_gpu_kv_blocks): the KV capacity, null block included,
	// of each engine.
	NumGPUBlocks int
	// DPLBEngineCounts (dp-lb-engine-counts, eppsim's key): whether the
	// engines' request counts reached vLLM's data-parallel load balancer
	// (nil: true); see Engine.DPLBEngineCounts.
	DPLBEngineCounts *bool
	// KernelCacheWarm (kernel-cache-warm, eppsim's key): the server
	// started with a Triton cache holding every fused-MoE kernel, so no
	// step compiled one at first use (Engine.KernelCacheWarm).
	KernelCacheWarm bool
	// EngineType is engine-type: "vllm" ("" too) or "sglang".
	EngineType string
	// SGLang is an SGLang run's sglang block (nil: SGLang's defaults).
	SGLang *replica.SGLangFlags
}

// engineKeys are the keys of an engine file, in the order the help lists
// them; "-" and "_" are interchangeable, as in vLLM's arguments.
var engineKeys = []string{"id", "model", "gpu", "tensor_parallel_size", "data_parallel_size", "pipeline_parallel_size",
	"max_num_seqs", "max_num_batched_tokens", "max_model_len", "block_size", "gpu_memory_utilization",
	"enable_prefix_caching", "num_gpu_blocks_override", "total_gpu_kv_blocks", "dp_lb_engine_counts",
	"kernel_cache_warm", "engine_type", "sglang"}

// sglangKeys are the keys of an engine file's sglang block: SGLang's
// server flags (replica.SGLangFlags), "-" or "_" as on SGLang's command
// line.
var sglangKeys = []string{"mem_fraction_static", "page_size", "max_running_requests", "chunked_prefill_size",
	"max_prefill_tokens", "max_total_tokens", "schedule_policy", "schedule_conservativeness", "enable_mixed_chunk",
	"context_length", "radix_eviction_policy", "decode_log_interval", "kv_cache_dtype"}

// maxEngineBytes bounds an engine file.
const maxEngineBytes = 1 << 20

// LoadEngineFile reads an engine file; a relative model path is taken
// from the file's directory.
func LoadEngineFile(path string) (*EngineSpec, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("engine file: %w", err)
	}
	if !st.Mode().IsRegular() || st.Size() > maxEngineBytes {
		return nil, fmt.Errorf("%s: not an engine file (a regular file of at most %d bytes)", path, maxEngineBytes)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("engine file: %w", err)
	}
	return ParseEngine(data, path, filepath.Dir(path))
}

// ParseEngine reads an engine file: a YAML mapping of vLLM's engine
// arguments (model, tensor-parallel-size, max-num-seqs, ...) plus gpu and
// id. Unknown keys are errors (a typo must not fall back to a default),
// and so are values vLLM would refuse. The model is resolved at once
// (relative paths from dir), and the GPU looked up in the catalogue.
// Errors name the file, the line and the key: "engine.yaml:3: gpu: unknown
// GPU ...".
func ParseEngine(data []byte, name, dir string) (*EngineSpec, error) {
	p := engineParser{file: name}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: invalid YAML: %w", name, err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, fmt.Errorf("%s: empty file (want model, gpu and vLLM's engine arguments)", name)
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, p.errf(root, "", "expected a mapping of vLLM's engine arguments")
	}
	e := &EngineSpec{File: name}
	seen := map[string]*yaml.Node{}
	var modelNode, gpuNode *yaml.Node
	err := p.entries(root, "", seen, func(kn, v *yaml.Node, norm, key string) error {
		var err error
		switch norm {
		case "id":
			e.ID, err = p.str(v, key)
		case "model":
			e.Model, err = p.str(v, key)
			modelNode = v
		case "gpu":
			e.GPU, err = p.str(v, key)
			gpuNode = v
		case "tensor_parallel_size":
			e.TensorParallelSize, err = p.integer(v, key, 1)
		case "data_parallel_size":
			if e.DataParallelSize, err = p.integer(v, key, 1); err == nil && e.DataParallelSize > maxDP {
				err = p.errf(v, key, "%d: at most %d data-parallel engines", e.DataParallelSize, maxDP)
			}
		case "pipeline_parallel_size":
			var n int
			if n, err = p.integer(v, key, 1); err == nil && n != 1 {
				err = p.errf(v, key, "%d: pipeline parallelism is not simulated (each engine runs on one tensor-parallel group)", n)
			}
		case "dp_lb_engine_counts":
			var b bool
			if b, err = p.boolean(v, key); err == nil {
				e.DPLBEngineCounts = &b
			}
		case "kernel_cache_warm":
			e.KernelCacheWarm, err = p.boolean(v, key)
		case "max_num_seqs":
			e.MaxNumSeqs, err = p.integer(v, key, 1)
		case "max_num_batched_tokens":
			e.MaxNumBatchedTokens, err = p.integer(v, key, 1)
		case "max_model_len":
			e.MaxModelLen, err = p.integer(v, key, 1)
		case "block_size":
			e.BlockSize, err = p.integer(v, key, 1)
		case "gpu_memory_utilization":
			var f float64
			if f, err = p.number(v, key); err == nil {
				if !(f > 0 && f <= 1) {
					err = p.errf(v, key, "%s: must be in (0, 1]", v.Value)
				}
				e.GPUMemoryUtilization = f
			}
		case "enable_prefix_caching":
			var b bool
			if b, err = p.boolean(v, key); err == nil {
				e.EnablePrefixCaching = &b
			}
		case "engine_type":
			if e.EngineType, err = p.str(v, key); err == nil {
				if cerr := replica.CheckEngineType(e.EngineType); cerr != nil {
					err = p.errf(v, key, "%w", cerr)
				}
			}
		case "sglang":
			e.SGLang, err = p.sglang(v, key)
		case "num_gpu_blocks_override", "total_gpu_kv_blocks":
			var n int
			if n, err = p.integer(v, key, 2); err == nil {
				if e.NumGPUBlocks != 0 && e.NumGPUBlocks != n {
					err = p.errf(v, key, "%d disagrees with the other block count, %d (both are the engine's KV blocks; give one)", n, e.NumGPUBlocks)
				}
				e.NumGPUBlocks = n
			}
		default:
			msg := "unknown key"
			if s := suggest.Closest(norm, engineKeys, 3); s != "" {
				msg += fmt.Sprintf("; did you mean %s?", strings.ReplaceAll(s, "_", "-"))
			}
			return p.errf(kn, key, "%s (an engine file takes %s)", msg, strings.ReplaceAll(strings.Join(engineKeys, ", "), "_", "-"))
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if modelNode == nil {
		return nil, p.errf(root, "model", "missing: the Hugging Face id of an embedded config (%s) or a config.json path", strings.Join(arch.Models(), ", "))
	}
	if gpuNode == nil {
		return nil, p.errf(root, "gpu", "missing: the GPU's name (%s)", strings.Join(arch.DefaultGPUs().Names(), ", "))
	}
	if e.TensorParallelSize == 0 {
		e.TensorParallelSize = 1
	}
	g, err := arch.DefaultGPUs().Lookup(e.GPU)
	if err != nil {
		return nil, p.errf(gpuNode, "gpu", "%w", err)
	}
	e.GPU = g.Name
	m, err := e.resolveModel(dir)
	if err != nil {
		return nil, p.errf(modelNode, "model", "%w", err)
	}
	if err := m.CheckTP(e.TensorParallelSize); err != nil {
		return nil, p.errf(seen["tensor_parallel_size"], "tensor-parallel-size", "%w", err)
	}
	if e.DataParallelSize == 0 {
		e.DataParallelSize = 1
	}
	if err := p.checkEngineType(e, root, seen); err != nil {
		return nil, err
	}
	return e, nil
}

// checkEngineType refuses vLLM's engine arguments in an SGLang run's file
// (vllmOnly names what to give instead; data-parallel-size 1 is allowed)
// and an sglang block in a vLLM run's.
func (p engineParser) checkEngineType(e *EngineSpec, root *yaml.Node, seen map[string]*yaml.Node) error {
	if e.EngineType != replica.EngineSGLang {
		if kn := seen["sglang"]; kn != nil {
			return p.errf(kn, kn.Value, "SGLang's server flags, but the run's engine is vLLM (add engine-type: sglang for an SGLang run)")
		}
		return nil
	}
	// In the file's order, so that the first offending line is named.
	for i := 0; i+1 < len(root.Content); i += 2 {
		kn := root.Content[i]
		norm := strings.ReplaceAll(kn.Value, "-", "_")
		if norm == "data_parallel_size" && e.DataParallelSize == 1 {
			continue
		}
		if _, vllm := vllmOnly[norm]; vllm {
			return p.errf(kn, "", "%w", vllmOnlyError(norm, kn.Value))
		}
	}
	return nil
}

// sglang reads an sglang block: a mapping of SGLang's server flags
// (sglangKeys). Numbers must be whole where SGLang's are and may not be 0
// (leave the flag out for SGLang's default); each flag is checked as it
// is read (replica.SGLangFlags.Validate), so that an error names its line.
func (p engineParser) sglang(n *yaml.Node, key string) (*replica.SGLangFlags, error) {
	if n.Kind != yaml.MappingNode {
		return nil, p.errf(n, key, "expected a mapping of SGLang's server flags (%s), got %s", strings.Join(sglangKeys, ", "), describeYAML(n))
	}
	f := &replica.SGLangFlags{}
	err := p.entries(n, key, map[string]*yaml.Node{}, func(kn, v *yaml.Node, norm, name string) error {
		var err error
		switch norm {
		case "mem_fraction_static":
			f.MemFractionStatic, err = p.positive(v, name)
		case "schedule_conservativeness":
			f.ScheduleConservativeness, err = p.positive(v, name)
		case "page_size":
			f.PageSize, err = p.integer(v, name, 1)
		case "max_running_requests":
			f.MaxRunningRequests, err = p.integer(v, name, 1)
		case "chunked_prefill_size":
			if f.ChunkedPrefillSize, err = p.integer(v, name, -1); err == nil && f.ChunkedPrefillSize == 0 {
				err = p.errf(v, name, "0: give a number of tokens, or -1 to turn chunked prefill off")
			}
		case "max_prefill_tokens":
			f.MaxPrefillTokens, err = p.integer(v, name, 1)
		case "max_total_tokens":
			f.MaxTotalTokens, err = p.integer(v, name, 1)
		case "context_length":
			f.ContextLength, err = p.integer(v, name, 1)
		case "decode_log_interval":
			f.DecodeLogInterval, err = p.integer(v, name, 1)
		case "enable_mixed_chunk":
			f.EnableMixedChunk, err = p.boolean(v, name)
		case "schedule_policy":
			f.SchedulePolicy, err = p.str(v, name)
		case "radix_eviction_policy":
			f.RadixEvictionPolicy, err = p.str(v, name)
		case "kv_cache_dtype":
			f.KVCacheDtype, err = p.str(v, name)
		default:
			msg := "unknown SGLang flag"
			if s := suggest.Closest(norm, sglangKeys, 3); s != "" {
				msg += fmt.Sprintf("; did you mean %s?", s)
			}
			return p.errf(kn, name, "%s (the sglang block takes %s)", msg, strings.Join(sglangKeys, ", "))
		}
		if err != nil {
			return err
		}
		// The flags read before were valid: an error is this one's.
		if verr := f.Validate(); verr != nil {
			return p.errf(v, "", "%w", verr)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

// entries calls fn on each key of mapping n in order, with the key
// normalized (- as _) and its name in errors (the key, or block.key within
// a block): keys must be plain strings given once in seen's terms, and
// values no aliases.
func (p engineParser) entries(n *yaml.Node, block string, seen map[string]*yaml.Node, fn func(kn, v *yaml.Node, norm, name string) error) error {
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, v := n.Content[i], n.Content[i+1]
		if kn.Kind != yaml.ScalarNode || kn.ShortTag() != "!!str" {
			return p.errf(kn, block, "keys must be plain strings")
		}
		norm, name := strings.ReplaceAll(kn.Value, "-", "_"), kn.Value
		if block != "" {
			name = block + "." + kn.Value
		}
		if prev := seen[norm]; prev != nil {
			return p.errf(kn, name, "given twice (also line %d)", prev.Line)
		}
		seen[norm] = kn
		if v.Kind == yaml.AliasNode {
			return p.errf(v, name, "aliases are not supported")
		}
		if err := fn(kn, v, norm, name); err != nil {
			return err
		}
	}
	return nil
}

// positive is a number above 0.
func (p engineParser) positive(n *yaml.Node, key string) (float64, error) {
	f, err := p.number(n, key)
	if err == nil && !(f > 0) {
		err = p.errf(n, key, "%s: must be positive (leave it out for SGLang's default)", n.Value)
	}
	return f, err
}

// resolveModel finds the model: a config.json file (or a directory
// holding one) relative to dir, else an embedded config by Hugging Face id.
func (e *EngineSpec) resolveModel(dir string) (*arch.Model, error) {
	if e.Model == "" {
		return nil, errors.New("empty")
	}
	path := e.Model
	if !filepath.IsAbs(path) && dir != "" {
		path = filepath.Join(dir, path)
	}
	if st, err := os.Stat(path); err == nil {
		if st.IsDir() {
			path = filepath.Join(path, "config.json")
		}
		data, err := arch.ReadConfigFile(path)
		if err != nil {
			return nil, err
		}
		m, err := arch.ParseModel(data, e.Model)
		if err != nil {
			return nil, err
		}
		e.ModelArch = data
		return m, nil
	}
	return arch.LookupModel(e.Model)
}

type engineParser struct{ file string }

// errf formats an error at node n (nil: no line) for key; a %w verb in
// format wraps its argument.
func (p engineParser) errf(n *yaml.Node, key, format string, args ...any) error {
	loc := p.file
	if n != nil && n.Line > 0 {
		loc += ":" + strconv.Itoa(n.Line)
	}
	if key != "" {
		loc += ": " + key
	}
	return fmt.Errorf("%s: "+format, append([]any{loc}, args...)...)
}

func describeYAML(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	if n.ShortTag() == "!!str" {
		return strconv.Quote(n.Value)
	}
	return n.Value
}

func (p engineParser) str(n *yaml.Node, key string) (string, error) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" || strings.TrimSpace(n.Value) == "" {
		return "", p.errf(n, key, "expected a non-empty string, got %s", describeYAML(n))
	}
	return n.Value, nil
}

func (p engineParser) number(n *yaml.Node, key string) (float64, error) {
	if n.Kind == yaml.ScalarNode && (n.ShortTag() == "!!int" || n.ShortTag() == "!!float") {
		var f float64
		if err := n.Decode(&f); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
			return f, nil
		}
	}
	return 0, p.errf(n, key, "expected a number, got %s", describeYAML(n))
}

// integer is a whole number of at least lo.
func (p engineParser) integer(n *yaml.Node, key string, lo int) (int, error) {
	f, err := p.number(n, key)
	if err != nil || f != math.Trunc(f) {
		return 0, p.errf(n, key, "expected a whole number, got %s", describeYAML(n))
	}
	if f < float64(lo) || f > math.MaxInt32 {
		return 0, p.errf(n, key, "%s: must be at least %d", n.Value, lo)
	}
	return int(f), nil
}

func (p engineParser) boolean(n *yaml.Node, key string) (bool, error) {
	var b bool
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&b) != nil {
		return false, p.errf(n, key, "expected true or false, got %s", describeYAML(n))
	}
	return b, nil
}
