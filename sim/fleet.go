package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/eppsim/eppsim/arch"
	"github.com/eppsim/eppsim/internal/suggest"
	"github.com/eppsim/eppsim/replica"
)

// FleetFile is the --fleet YAML: groups of identical replicas, for
// heterogeneous fleets. A group is a preset (built-in name or preset file)
// or a model (Hugging Face id of an embedded config, or a config.json path)
// on a GPU with a tensor-parallel degree; either way overrides change any
// preset field (engine arguments by vLLM's names).
//
//	gpu_catalogue: gpus.yaml # optional: GPUs added to or changed in the built-in catalogue
//	groups:
//	- name: h100             # replica name prefix (default: the preset name)
//	  count: 8
//	  preset: llama-3.1-8b-h100
//	  overrides:             # any preset field
//	    engine: {num_gpu_blocks_override: 20000, max_num_seqs: 256}
//	  labels: {llm-d.ai/role: decode}
//	- name: qwen
//	  count: 2
//	  model: Qwen/Qwen3-14B  # or path/to/config.json
//	  gpu: A100-80GB
//	  tp: 2                  # tensor_parallel_size
//	  gpu_overrides: {memory_bandwidth_tbps: 1.9}
//	- name: sg
//	  count: 2
//	  preset: llama-3.1-8b-h100
//	  engine_type: sglang    # the engine (default: the preset's, vllm)
//	  sglang: {page_size: 16, mem_fraction_static: 0.9} # SGLang's flags by their names
//
// Relative paths (preset files, model configs, the catalogue) are relative
// to the fleet file.
type FleetFile struct {
	GPUCatalogue string       `json:"gpu_catalogue,omitempty"`
	Groups       []FleetGroup `json:"groups"`
}

// FleetGroup is count replicas of one preset, or of one model on a GPU.
type FleetGroup struct {
	Name   string `json:"name"`
	Count  int    `json:"count"`
	Preset string `json:"preset"`
	// Model, GPU and TP build the replica without a preset (vLLM defaults),
	// or replace the preset's.
	Model              string `json:"model"`
	GPU                string `json:"gpu"`
	TP                 int    `json:"tp"`
	TensorParallelSize int    `json:"tensor_parallel_size"`
	// GPUOverrides changes fields of the GPU's catalogue entry.
	GPUOverrides json.RawMessage   `json:"gpu_overrides"`
	Overrides    json.RawMessage   `json:"overrides"`
	Labels       map[string]string `json:"labels"`
	// EngineType replaces the preset's engine_type (vllm or sglang), and
	// SGLang is merged into its sglang block (replica.SGLangFlags, by
	// SGLang's flag names); both are applied before Overrides.
	EngineType string          `json:"engine_type"`
	SGLang     json.RawMessage `json:"sglang"`
}

// FleetOptions control how a fleet file resolves its replicas.
type FleetOptions struct {
	// GPUs is the GPU catalogue (nil: the built-in one); a fleet file's
	// gpu_catalogue merges into a copy of it.
	GPUs *arch.GPUCatalogue
}

// fleetRenames suggests the current keys for old or vLLM-style spellings
// in a fleet file (the preset's own keys come from replica.PresetRenames).
var fleetRenames = map[string]string{
	"gpuOverrides":       "gpu_overrides",
	"gpuCatalogue":       "gpu_catalogue",
	"tensorParallelSize": "tensor_parallel_size",
	"modelConfig":        "model",
	"engine":             "engine_type",
}

// Roles are the values of the llm-d.ai/role label (pd-offload.md A.1;
// llm-d-router filter/bylabel/roles.go): decode-filter keeps decode,
// prefill-decode, both and encode-prefill-decode pods and pods without the
// label; prefill-filter keeps prefill, encode-prefill, prefill-decode, both
// and encode-prefill-decode pods.
var Roles = []string{"decode", "prefill", "encode", "prefill-decode", "encode-prefill", "encode-prefill-decode", "both"}

// MaxReplicas bounds a fleet's size, engines of data-parallel ranks
// included (addresses are 10.0.x.y; the memory a fleet may take is bounded
// apart, CheckFleetMemory).
const MaxReplicas = 10000

// UniformFleet returns n replicas of one preset, named default/E-i after
// the preset's engine type (default/vllm-i, default/sglang-i) with
// addresses 10.0.x.y:8000.
func UniformFleet(n int, p replica.Preset) []ReplicaSpec {
	out := make([]ReplicaSpec, n)
	for i := range out {
		out[i] = ReplicaSpec{Name: fmt.Sprintf("default/%s-%d", p.EngineTypeOf(), i), Address: address(i), Preset: p}
	}
	return out
}

func address(i int) string { return fmt.Sprintf("10.0.%d.%d:8000", i/250, i%250+1) }

// ExpandDataParallel replaces every replica whose engine arguments set
// data_parallel_size N > 1 by its N ranks: independent engines (each on its
// own tensor-parallel group, with its own KV cache and scheduler) that the
// EPP sees as endpoints of their own, as llm-d's datastore lists a
// data-parallel pod's ranks (spec flow-control.md 14.2: IDs
// "<pod>-rank-<i>"; rank i listens on the pod's port + i). Labels are
// copied to every rank. A mixture of experts' ranks split its routed
// experts between them (replica.Preset.ExpertShards), as vLLM's expert
// layers span the whole DP×TP group.
func ExpandDataParallel(fleet []ReplicaSpec) ([]ReplicaSpec, error) {
	var out []ReplicaSpec
	for _, r := range fleet {
		n := r.Preset.Engine.DataParallelSize
		if n <= 1 {
			out = append(out, r)
			continue
		}
		if r.Preset.EngineTypeOf() == replica.EngineSGLang {
			// data_parallel_size is a vLLM argument; SGLang's --dp and DP
			// attention are not modelled (sglang-engine.md's scope).
			return nil, fmt.Errorf("replica %s: engine sglang: data_parallel_size %d is vLLM's data parallelism; SGLang's (--dp, DP attention) is not modelled: give more replicas instead", r.Name, n)
		}
		host, port, err := net.SplitHostPort(r.Address)
		if err != nil {
			return nil, fmt.Errorf("replica %s: address %q: %w", r.Name, r.Address, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil || p+n-1 > 65535 {
			return nil, fmt.Errorf("replica %s: port %q cannot take %d data-parallel ranks", r.Name, port, n)
		}
		for i := range n {
			rank := r
			rank.Name = fmt.Sprintf("%s-rank-%d", r.Name, i)
			rank.Address = net.JoinHostPort(host, strconv.Itoa(p+i))
			rank.Labels = maps.Clone(r.Labels)
			rank.Preset.Engine.DataParallelSize = 1
			// A mixture of experts' ranks share their expert layers
			// (replica.Preset.ExpertShards).
			rank.Preset.ExpertShards = n
			out = append(out, rank)
		}
		if len(out) > MaxReplicas {
			return nil, fmt.Errorf("data parallelism makes more than %d engines", MaxReplicas)
		}
	}
	return out, nil
}

// LoadFleet reads a fleet file.
func LoadFleet(path string) ([]ReplicaSpec, error) {
	return LoadFleetWith(path, FleetOptions{})
}

// LoadFleetWith reads a fleet file with options.
func LoadFleetWith(path string, opts FleetOptions) ([]ReplicaSpec, error) {
	data, err := arch.ReadConfigFile(path)
	if err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	return ParseFleetWith(data, path, filepath.Dir(path), opts)
}

// ParseFleet decodes a fleet file strictly; errors name the file and the
// group. Relative paths resolve from the working directory.
func ParseFleet(data []byte, name string) ([]ReplicaSpec, error) {
	return ParseFleetWith(data, name, "", FleetOptions{})
}

// ParseFleetWith decodes a fleet file strictly, resolving relative paths
// from dir; errors name the file and the group, and suggest the intended
// key for an unknown one.
func ParseFleetWith(data []byte, name, dir string, opts FleetOptions) ([]ReplicaSpec, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	var f FleetFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %w", name, suggest.UnknownField(err, f, fleetRenames))
	}
	if len(f.Groups) == 0 {
		return nil, fmt.Errorf("%s: groups: at least one group is required", name)
	}
	// tp and tensor_parallel_size: absent is the preset's (or 1); given,
	// at least 1 (0 used to read as absent).
	var given struct {
		Groups []map[string]json.RawMessage `json:"groups"`
	}
	if err := json.Unmarshal(js, &given); err == nil {
		for gi, g := range given.Groups {
			for _, k := range []string{"tp", "tensor_parallel_size"} {
				var n float64
				if v, ok := g[k]; ok && json.Unmarshal(v, &n) == nil && n < 1 {
					return nil, fmt.Errorf("%s: groups[%d]: %s: must be at least 1, got %v (leave it out for the preset's)", name, gi, k, n)
				}
			}
		}
	}
	gpus := opts.GPUs
	if f.GPUCatalogue != "" {
		cat := inDir(dir, f.GPUCatalogue)
		data, err := arch.ReadConfigFile(cat)
		if err != nil {
			return nil, fmt.Errorf("%s: gpu_catalogue: %w", name, err)
		}
		if gpus == nil {
			gpus = arch.DefaultGPUs()
		} else {
			gpus = gpus.Clone()
		}
		if err := gpus.Merge(data, cat); err != nil {
			return nil, fmt.Errorf("%s: gpu_catalogue: %w", name, err)
		}
	}
	var out []ReplicaSpec
	for gi, g := range f.Groups {
		where := fmt.Sprintf("%s: groups[%d]", name, gi)
		if g.Count < 1 || g.Count > MaxReplicas-len(out) {
			return nil, fmt.Errorf("%s: count: must be in 1..%d, got %d", where, MaxReplicas-len(out), g.Count)
		}
		p, err := g.preset(dir, gpus)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		// Resolve the group's engine now, so that its errors name the
		// group (vLLM's arguments, or the sglang block).
		if err := CheckEngine(ReplicaSpec{Name: p.Name, Preset: p}); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if role, ok := g.Labels[RoleLabel]; ok && !slices.Contains(Roles, role) {
			msg := fmt.Sprintf("%s: labels: %s %q is not one of llm-d's roles (%s)", where, RoleLabel, role, strings.Join(Roles, ", "))
			if c := suggest.Closest(role, Roles, 3); c != "" {
				msg += fmt.Sprintf("; did you mean %q?", c)
			}
			return nil, errors.New(msg)
		}
		prefix := g.Name
		if prefix == "" {
			prefix = p.Name
		}
		for i := range g.Count {
			spec := ReplicaSpec{
				Name:    fmt.Sprintf("default/%s-%d", prefix, i),
				Address: address(len(out)),
				Labels:  maps.Clone(g.Labels),
				Preset:  p,
			}
			if spec.Labels, err = EngineLabels(spec); err != nil {
				return nil, fmt.Errorf("%s: labels: %w", where, err)
			}
			out = append(out, spec)
		}
	}
	seen := map[string]bool{}
	for _, r := range out {
		if seen[r.Name] {
			return nil, fmt.Errorf("%s: replica name %q appears twice (give groups distinct names)", name, r.Name)
		}
		seen[r.Name] = true
	}
	return out, nil
}

// inDir resolves a relative path from dir.
func inDir(dir, path string) string {
	if dir == "" || filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(dir, path)
}

// preset builds the group's replica preset.
func (g *FleetGroup) preset(dir string, gpus *arch.GPUCatalogue) (replica.Preset, error) {
	tp := g.TP
	if g.TensorParallelSize != 0 {
		if tp != 0 && tp != g.TensorParallelSize {
			return replica.Preset{}, fmt.Errorf("tp %d and tensor_parallel_size %d disagree (give one)", tp, g.TensorParallelSize)
		}
		tp = g.TensorParallelSize
	}
	if tp < 0 {
		return replica.Preset{}, fmt.Errorf("tp: must be at least 1, got %d", tp)
	}
	// A model given as a path is relative to the fleet file.
	model := g.Model
	if model != "" {
		if p := inDir(dir, model); pathExists(p) {
			model = p
		}
	}
	var p replica.Preset
	var err error
	switch {
	case g.Preset != "":
		ref := g.Preset
		if p := inDir(dir, ref); fileExists(p) {
			ref = p
		}
		if p, err = replica.LookupPresetIn(ref, gpus); err != nil {
			return replica.Preset{}, fmt.Errorf("preset: %w", err)
		}
		// model, gpu and tp replace the preset's.
		ov := map[string]any{}
		if model != "" {
			ov["model"] = model
		}
		if g.GPU != "" {
			ov["gpu"] = g.GPU
		}
		if tp != 0 {
			ov["tensor_parallel_size"] = tp
		}
		if len(ov) > 0 {
			js, _ := json.Marshal(ov)
			if p, err = p.WithOverrides(js); err != nil {
				return replica.Preset{}, err
			}
		}
	case model != "":
		m, err := arch.ResolveModel(model, "")
		if err != nil {
			return replica.Preset{}, fmt.Errorf("model: %w", err)
		}
		if g.GPU == "" {
			return replica.Preset{}, fmt.Errorf("gpu: required with model (one of %s)", strings.Join(catalogue(gpus).Names(), ", "))
		}
		gpu, err := catalogue(gpus).Lookup(g.GPU)
		if err != nil {
			return replica.Preset{}, fmt.Errorf("gpu: %w", err)
		}
		if p, err = replica.NewPreset(m, gpu, max(tp, 1)); err != nil {
			return replica.Preset{}, err
		}
		if gpus != nil {
			if p, err = p.WithCatalogue(gpus); err != nil {
				return replica.Preset{}, err
			}
		}
	default:
		return replica.Preset{}, fmt.Errorf("preset or model: one is required")
	}
	if len(g.GPUOverrides) > 0 && string(g.GPUOverrides) != "null" {
		js, _ := json.Marshal(map[string]json.RawMessage{"gpu_overrides": g.GPUOverrides})
		if p, err = p.WithOverrides(js); err != nil {
			return replica.Preset{}, err
		}
	}
	if g.EngineType != "" || (len(g.SGLang) > 0 && string(g.SGLang) != "null") {
		ov := map[string]json.RawMessage{}
		if g.EngineType != "" {
			ov["engine_type"], _ = json.Marshal(g.EngineType)
		}
		if len(g.SGLang) > 0 && string(g.SGLang) != "null" {
			ov["sglang"] = g.SGLang
		}
		js, _ := json.Marshal(ov)
		if p, err = p.WithOverrides(js); err != nil {
			return replica.Preset{}, err
		}
	}
	if len(g.Overrides) > 0 && string(g.Overrides) != "null" {
		if p, err = p.WithOverrides(g.Overrides); err != nil {
			return replica.Preset{}, fmt.Errorf("overrides: %w", err)
		}
	}
	return p, nil
}

func catalogue(gpus *arch.GPUCatalogue) *arch.GPUCatalogue {
	if gpus == nil {
		return arch.DefaultGPUs()
	}
	return gpus
}

func pathExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}
