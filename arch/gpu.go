package arch

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"sigs.k8s.io/yaml"

	"github.com/eppsim/eppsim/internal/suggest"
)

// GPU is one accelerator's datasheet figures (dense, per GPU). The YAML
// and JSON field names are those of gpus.yaml.
type GPU struct {
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Aliases     []string `json:"aliases,omitempty"`
	// Base, in a user catalogue, makes a new entry start as a copy of
	// this existing one.
	Base string `json:"base,omitempty"`
	// MemoryGB is the capacity the datasheet states.
	MemoryGB float64 `json:"memory_gb"`
	// DeviceMemoryMiB is the total the driver reports (cudaMemGetInfo,
	// nvidia-smi), which vLLM's gpu_memory_utilization multiplies; 0 means
	// MemoryGB GiB.
	DeviceMemoryMiB float64 `json:"device_memory_mib,omitempty"`
	MemoryType      string  `json:"memory_type,omitempty"`
	// MemoryBandwidthTBps is the peak HBM (or GDDR) bandwidth in TB/s.
	MemoryBandwidthTBps float64 `json:"memory_bandwidth_tbps"`
	// Dense tensor-core peaks in TFLOP/s; FP8TFLOPS is 0 without FP8.
	BF16TFLOPS float64 `json:"bf16_tflops"`
	FP16TFLOPS float64 `json:"fp16_tflops,omitempty"`
	FP8TFLOPS  float64 `json:"fp8_tflops,omitempty"`
	// Interconnect is the GPU-to-GPU link ("nvlink" or "pcie") and
	// InterconnectGBps its bandwidth per GPU, both directions, in GB/s.
	Interconnect     string  `json:"interconnect,omitempty"`
	InterconnectGBps float64 `json:"interconnect_gbps,omitempty"`
	// ComputeCapability is CUDA's compute capability ("9.0" for Hopper,
	// "10.0" for B200), which picks vLLM's all-reduce size limits
	// (vllm/distributed/device_communicators/all_reduce_utils.py); empty
	// for a part vLLM keeps no limits for, whose all-reduce then never uses
	// symmetric memory.
	ComputeCapability string `json:"compute_capability,omitempty"`
	// LargeBatchDefaults is vLLM's GPU class for its batch defaults
	// (vllm-engine.md A.5); nil applies vLLM's rule (LargeBatch).
	LargeBatchDefaults *bool  `json:"large_batch_defaults,omitempty"`
	Source             string `json:"source,omitempty"`
}

// DeviceMemoryBytes is the memory vLLM sees as the device total.
func (g *GPU) DeviceMemoryBytes() float64 {
	if g.DeviceMemoryMiB > 0 {
		return g.DeviceMemoryMiB * (1 << 20)
	}
	return g.MemoryGB * (1 << 30)
}

// LargeBatch reports vLLM's batch-default class: LargeBatchDefaults when
// set, else vLLM's rule (EngineArgs.get_batch_defaults): at least 70 GiB
// of device memory and not an A100.
func (g *GPU) LargeBatch() bool {
	if g.LargeBatchDefaults != nil {
		return *g.LargeBatchDefaults
	}
	return g.DeviceMemoryBytes() >= 70*(1<<30) && !strings.Contains(strings.ToLower(g.Name), "a100")
}

// TFLOPS is the dense tensor-core peak for GEMMs with weights of the given
// width in bits: FP8 where the GPU has it and the weights are 8-bit
// floats, else BF16.
func (g *GPU) TFLOPS(fp8 bool) float64 {
	if fp8 && g.FP8TFLOPS > 0 {
		return g.FP8TFLOPS
	}
	return g.BF16TFLOPS
}

func (g *GPU) validate() error {
	switch {
	case g.Name == "":
		return fmt.Errorf("name: required")
	case g.MemoryGB <= 0 && g.DeviceMemoryMiB <= 0:
		return fmt.Errorf("%s: memory_gb: must be > 0", g.Name)
	case g.DeviceMemoryMiB < 0:
		return fmt.Errorf("%s: device_memory_mib: must not be negative", g.Name)
	case g.MemoryBandwidthTBps <= 0:
		return fmt.Errorf("%s: memory_bandwidth_tbps: must be > 0", g.Name)
	case g.BF16TFLOPS <= 0:
		return fmt.Errorf("%s: bf16_tflops: must be > 0", g.Name)
	case g.FP16TFLOPS < 0 || g.FP8TFLOPS < 0 || g.InterconnectGBps < 0:
		return fmt.Errorf("%s: fp16_tflops, fp8_tflops and interconnect_gbps must not be negative", g.Name)
	}
	switch g.Interconnect {
	case "", "nvlink", "pcie":
	default:
		return fmt.Errorf("%s: interconnect: want nvlink or pcie, got %q", g.Name, g.Interconnect)
	}
	return nil
}

// WithOverrides returns a copy of g with the fields given in overrides
// (YAML or JSON, gpus.yaml field names) replaced. Unknown fields are
// errors.
func (g GPU) WithOverrides(overrides []byte) (GPU, error) {
	if len(bytes.TrimSpace(overrides)) == 0 || string(bytes.TrimSpace(overrides)) == "null" {
		return g, nil
	}
	out := g.detached()
	if err := decodeStrict(overrides, &out); err != nil {
		return GPU{}, fmt.Errorf("gpu %s: %w", g.Name, err)
	}
	if err := out.validate(); err != nil {
		return GPU{}, err
	}
	return out, nil
}

// detached returns a copy of g that shares no memory with it, so that
// decoding into the copy leaves g alone.
func (g GPU) detached() GPU {
	g.Aliases = slices.Clone(g.Aliases)
	if g.LargeBatchDefaults != nil {
		v := *g.LargeBatchDefaults
		g.LargeBatchDefaults = &v
	}
	return g
}

// GPUCatalogue is a set of GPUs looked up by name or alias.
type GPUCatalogue struct {
	gpus []GPU
}

//go:embed gpus.yaml
var gpusYAML []byte

// defaultGPUs is the embedded catalogue, parsed once.
var defaultGPUs = sync.OnceValue(func() []GPU {
	c := &GPUCatalogue{}
	if err := c.Merge(gpusYAML, "gpus.yaml"); err != nil {
		panic(err) // the embedded file is fixed; tests parse it
	}
	return c.gpus
})

// DefaultGPUs returns a fresh copy of the embedded catalogue (gpus.yaml).
func DefaultGPUs() *GPUCatalogue {
	return &GPUCatalogue{gpus: slices.Clone(defaultGPUs())}
}

// LoadGPUCatalogue returns the default catalogue merged with a user file.
func LoadGPUCatalogue(path string) (*GPUCatalogue, error) {
	data, err := ReadConfigFile(path)
	if err != nil {
		return nil, err
	}
	c := DefaultGPUs()
	if err := c.Merge(data, path); err != nil {
		return nil, err
	}
	return c, nil
}

// Names lists the catalogue's GPU names in catalogue order.
func (c *GPUCatalogue) Names() []string {
	out := make([]string, len(c.gpus))
	for i, g := range c.gpus {
		out[i] = g.Name
	}
	return out
}

// normalizeGPU folds the spellings of one GPU name together: case, an
// "NVIDIA " prefix, and spaces or underscores for dashes.
func normalizeGPU(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	s = strings.TrimPrefix(s, "nvidia ")
	s = strings.NewReplacer(" ", "-", "_", "-").Replace(s)
	return s
}

func (c *GPUCatalogue) index(name string) int {
	n := normalizeGPU(name)
	for i, g := range c.gpus {
		if normalizeGPU(g.Name) == n {
			return i
		}
		for _, a := range g.Aliases {
			if normalizeGPU(a) == n {
				return i
			}
		}
	}
	return c.describedIndex(n)
}

// describedIndex matches a descriptive name such as "H200-141GB-HBM3e
// (SXM)" or "NVIDIA A100 40GB", the way run records spell the GPU: one
// family token (the first token of an entry's name: h100, a100, ...), an
// optional memory size that must be the entry's memory_gb, and words
// that do not tell parts apart (memory types, "SXM", "GPU"). A PCIe or NVL
// form names a different part (other bandwidth and power) unless the
// entry itself is a PCIe card, so it matches nothing. -1 when no single
// entry fits.
func (c *GPUCatalogue) describedIndex(n string) int {
	family, mem, pcie := "", 0, false
	for _, tok := range strings.FieldsFunc(n, func(r rune) bool { return r == '-' || r == '(' || r == ')' || r == ',' }) {
		switch {
		case tok == "nvidia" || tok == "tensor" || tok == "core" || tok == "gpu" || strings.HasPrefix(tok, "sxm") ||
			strings.HasPrefix(tok, "hbm") || strings.HasPrefix(tok, "gddr"):
		case tok == "pcie" || tok == "nvl":
			pcie = true
		case strings.HasSuffix(tok, "gb") && len(tok) > 2:
			v, err := strconv.Atoi(strings.TrimSuffix(tok, "gb"))
			if err != nil || mem != 0 {
				return -1
			}
			mem = v
		case family == "":
			family = tok
		default:
			return -1
		}
	}
	found := -1
	for i, g := range c.gpus {
		name := normalizeGPU(g.Name)
		if f, _, _ := strings.Cut(name, "-"); f != family {
			continue
		}
		if (mem != 0 && int(g.MemoryGB+0.5) != mem) || (pcie && g.Interconnect != "pcie") {
			continue
		}
		if found >= 0 {
			return -1 // two entries fit: the name does not say which
		}
		found = i
	}
	return found
}

// Lookup returns the GPU called name (or one of its aliases, compared
// without regard to case, an "NVIDIA " prefix, or spaces and dashes).
func (c *GPUCatalogue) Lookup(name string) (GPU, error) {
	if i := c.index(name); i >= 0 {
		return c.gpus[i].detached(), nil
	}
	msg := fmt.Sprintf("unknown GPU %q (have %s", name, strings.Join(c.Names(), ", "))
	if s := suggest.Closest(normalizeGPU(name), lower(c.Names()), 3); s != "" {
		msg = fmt.Sprintf("unknown GPU %q; did you mean %s? (have %s", name, c.Names()[slices.Index(lower(c.Names()), s)], strings.Join(c.Names(), ", "))
	}
	return GPU{}, fmt.Errorf("%s; a --gpu-catalogue file can add GPUs)", msg)
}

func lower(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = normalizeGPU(s)
	}
	return out
}

// Merge reads a catalogue file (YAML or JSON: a "gpus" list) into c. An
// entry whose name (or an alias) exists overrides only the fields it
// gives; an entry with base starts as a copy of that entry (aliases
// dropped); any other entry is new and needs memory, bandwidth and BF16
// TFLOPS. Errors name the file and the entry.
func (c *GPUCatalogue) Merge(data []byte, file string) error {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	var doc struct {
		GPUs []json.RawMessage `json:"gpus"`
	}
	if err := decodeStrict(js, &doc); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	for i, raw := range doc.GPUs {
		where := fmt.Sprintf("%s: gpus[%d]", file, i)
		var head struct {
			Name string `json:"name"`
			Base string `json:"base"`
		}
		if err := json.Unmarshal(raw, &head); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if head.Name == "" {
			return fmt.Errorf("%s: name: required", where)
		}
		var g GPU
		at := c.index(head.Name)
		switch {
		case head.Base != "":
			b := c.index(head.Base)
			if b < 0 {
				return fmt.Errorf("%s: base: unknown GPU %q (have %s)", where, head.Base, strings.Join(c.Names(), ", "))
			}
			g = c.gpus[b]
			g.Aliases, g.LargeBatchDefaults, g.Description, g.Source = nil, nil, "", ""
		case at >= 0:
			g = c.gpus[at].detached()
		}
		if err := decodeStrict(raw, &g); err != nil {
			return fmt.Errorf("%s (%s): %w", where, head.Name, err)
		}
		if at >= 0 {
			g.Name = c.gpus[at].Name // an alias names the entry it overrides
		}
		g.Base = ""
		if err := g.validate(); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if at >= 0 {
			c.gpus[at] = g
		} else {
			c.gpus = append(c.gpus, g)
		}
	}
	return nil
}

// decodeStrict decodes YAML or JSON onto v, rejecting unknown fields with
// a suggestion.
func decodeStrict(data []byte, v any) error {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	return suggest.UnknownField(dec.Decode(v), v, nil)
}

// Clone returns a copy of c that merges independently.
func (c *GPUCatalogue) Clone() *GPUCatalogue {
	return &GPUCatalogue{gpus: slices.Clone(c.gpus)}
}
