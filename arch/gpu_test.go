package arch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestGPUCatalogue(t *testing.T) {
	c := DefaultGPUs()
	if got := strings.Join(c.Names(), ","); got != "H100,H200,A100-80GB,A100-40GB,L40S,B200" {
		t.Fatalf("names %s", got)
	}
	tests := []struct {
		name       string
		want       string
		memGiB     float64
		tbps, bf16 float64
		large      bool
	}{
		{"H100", "H100", 79.647, 3.35, 989.5, true},
		{"H100-80GB-HBM3 (SXM)", "H100", 79.647, 3.35, 989.5, true}, // experiments.json hardware
		{"nvidia h100 80gb hbm3", "H100", 79.647, 3.35, 989.5, true},
		{"A100-SXM4-80GB", "A100-80GB", 80, 2.039, 312, false},
		{"A100", "A100-80GB", 80, 2.039, 312, false},
		{"L40S-48GB", "L40S", 44.988, 0.864, 362.05, false},
		{"h200", "H200", 140.401, 4.8, 989.5, true},
		{"B200", "B200", 179.062, 8, 2250, true},
		{"A100_SXM4_40GB", "A100-40GB", 40, 1.555, 312, false},
	}
	for _, tc := range tests {
		g, err := c.Lookup(tc.name)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		gib := g.DeviceMemoryBytes() / (1 << 30)
		if g.Name != tc.want || gib < tc.memGiB-0.001 || gib > tc.memGiB+0.001 || g.MemoryBandwidthTBps != tc.tbps ||
			g.BF16TFLOPS != tc.bf16 || g.LargeBatch() != tc.large {
			t.Errorf("%s: %+v (%.3f GiB)", tc.name, g, gib)
		}
	}
	if _, err := c.Lookup("H10"); err == nil || !strings.Contains(err.Error(), "did you mean H100?") {
		t.Errorf("typo: %v", err)
	}
	if _, err := c.Lookup("TPUv5"); err == nil || !strings.Contains(err.Error(), "have H100, H200") {
		t.Errorf("unknown: %v", err)
	}
}

// TestLargeBatchRule: the catalogue's explicit classes agree with vLLM's
// rule (>= 70 GiB and not an A100).
func TestLargeBatchRule(t *testing.T) {
	c := DefaultGPUs()
	for _, n := range c.Names() {
		g, _ := c.Lookup(n)
		explicit := g.LargeBatch()
		g.LargeBatchDefaults = nil
		if g.LargeBatch() != explicit {
			t.Errorf("%s: large_batch_defaults %v but vLLM's rule says %v", n, explicit, g.LargeBatch())
		}
		if g.Source == "" || g.Interconnect == "" {
			t.Errorf("%s: no source or interconnect", n)
		}
	}
}

func TestGPUCatalogueMerge(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "gpus.yaml")
	src := `gpus:
- name: h100-sxm          # an alias: overrides the H100 entry
  memory_bandwidth_tbps: 3.0
- name: H100-NVL
  base: H100
  memory_gb: 94
  device_memory_mib: 95830
  memory_bandwidth_tbps: 3.9
- name: MI300X
  memory_gb: 192
  memory_bandwidth_tbps: 5.3
  bf16_tflops: 1307.4
  fp8_tflops: 2614.9
`
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadGPUCatalogue(file)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := c.Lookup("H100")
	if h.MemoryBandwidthTBps != 3.0 || h.BF16TFLOPS != 989.5 || len(h.Aliases) == 0 {
		t.Errorf("override: %+v", h)
	}
	nvl, err := c.Lookup("h100-nvl")
	if err != nil || nvl.MemoryGB != 94 || nvl.BF16TFLOPS != 989.5 || nvl.Interconnect != "nvlink" || !nvl.LargeBatch() || len(nvl.Aliases) != 0 {
		t.Errorf("based: %+v %v", nvl, err)
	}
	mi, err := c.Lookup("MI300X")
	if err != nil || mi.DeviceMemoryBytes() != 192*(1<<30) || !mi.LargeBatch() {
		t.Errorf("new: %+v %v", mi, err)
	}
	if d, _ := DefaultGPUs().Lookup("H100"); d.MemoryBandwidthTBps != 3.35 {
		t.Error("merging changed the embedded catalogue")
	}
	// Pointer fields are copied before an override decodes into them.
	if err := DefaultGPUs().Merge([]byte("gpus:\n- {name: H100, large_batch_defaults: false}\n"), "u.yaml"); err != nil {
		t.Fatal(err)
	}
	if d, _ := DefaultGPUs().Lookup("H100"); !d.LargeBatch() {
		t.Error("an override of large_batch_defaults leaked into the embedded catalogue")
	}
	cl := c.Clone()
	if err := cl.Merge([]byte("gpus:\n- {name: MI300X, memory_bandwidth_tbps: 1}\n"), "u.yaml"); err != nil {
		t.Fatal(err)
	}
	if mi, _ := c.Lookup("MI300X"); mi.MemoryBandwidthTBps != 5.3 {
		t.Error("merging into a clone changed the original")
	}
	bad := []struct{ src, want string }{
		{"gpus:\n- name: X\n  memory_gb: 1\n", "gpus[0]: X: memory_bandwidth_tbps: must be > 0"},
		{"gpus:\n- name: H100\n  memory_bandwith_tbps: 3\n", `unknown field "memory_bandwith_tbps"; did you mean memory_bandwidth_tbps?`},
		{"gpus:\n- name: New1\n  base: nope\n", `gpus[0]: base: unknown GPU "nope"`},
		{"gpus:\n- memory_gb: 1\n", "gpus[0]: name: required"},
		{"gpus:\n- name: H100\n  interconnect: infiniband\n", "interconnect: want nvlink or pcie"},
		{"gpu: []\n", `unknown field "gpu"; did you mean gpus?`},
	}
	for _, tc := range bad {
		err := DefaultGPUs().Merge([]byte(tc.src), "user.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "user.yaml") {
			t.Errorf("%q: %v, want %q", tc.src, err, tc.want)
		}
	}
}

func TestGPUWithOverrides(t *testing.T) {
	g, _ := DefaultGPUs().Lookup("H100")
	o, err := g.WithOverrides([]byte("memory_gb: 94\ndevice_memory_mib: 0\n"))
	if err != nil || o.DeviceMemoryBytes() != 94*(1<<30) || o.MemoryBandwidthTBps != 3.35 {
		t.Errorf("%+v %v", o, err)
	}
	if _, err := g.WithOverrides([]byte("bf16_tflops: -1\n")); err == nil {
		t.Error("negative TFLOPS accepted")
	}
	if _, err := g.WithOverrides([]byte("tflops: 1\n")); err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Errorf("unknown field: %v", err)
	}
	if same, err := g.WithOverrides(nil); err != nil || same.Name != "H100" {
		t.Error("empty overrides")
	}
}

// TestExperimentsHardware: every GPU named in the measured runs resolves.
func TestExperimentsHardware(t *testing.T) {
	c := DefaultGPUs()
	for _, r := range loadExperiments(t) {
		if _, err := c.Lookup(r.Hardware); err != nil {
			t.Errorf("%s: %v", r.ID, err)
		}
	}
}

func TestReadConfigFileRefusesDevices(t *testing.T) {
	if _, err := LoadModel("/dev/zero"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("/dev/zero: %v", err)
	}
	if _, err := LoadGPUCatalogue(t.TempDir()); err == nil {
		t.Error("a directory read as a catalogue")
	}
}

// TestLookupDescriptiveNames: run records name GPUs as their tools print
// them; a family, a matching memory size and words that do not tell parts
// apart find the entry, and a PCIe or NVL form, another memory size or an
// extra word finds none (those are other parts).
func TestLookupDescriptiveNames(t *testing.T) {
	c := DefaultGPUs()
	for name, want := range map[string]string{
		"H100-80GB-HBM3 (SXM)":   "H100",
		"H200-141GB-HBM3e (SXM)": "H200",
		"NVIDIA H200 141GB":      "H200",
		"B200-180GB-HBM3e":       "B200",
		"A100-40GB-HBM2 (SXM4)":  "A100-40GB",
		"NVIDIA A100 80GB":       "A100-80GB",
		"L40S PCIe 48GB":         "L40S",
		"H100 Tensor Core GPU":   "H100",
		"H100 PCIe":              "",
		"H100-NVL-94GB":          "",
		"H100-96GB-HBM3":         "",
		"H100 Ultra":             "",
		"A100-SXM4":              "", // 40 or 80 GB: the name does not say
	} {
		g, err := c.Lookup(name)
		if want == "" {
			if err == nil {
				t.Errorf("%q: found %s, want none", name, g.Name)
			}
			continue
		}
		if err != nil || g.Name != want {
			t.Errorf("%q: %s, %v; want %s", name, g.Name, err, want)
		}
	}
}
