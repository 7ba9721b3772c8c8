package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"

	"sigs.k8s.io/yaml"

	"github.com/eppsim/eppsim/replica"
)

// FleetFile is the --fleet YAML: groups of identical replicas, for
// heterogeneous fleets.
//
//	groups:
//	- name: h100            # replica name prefix (default: the preset name)
//	  count: 8
//	  preset: llama-3.1-8b-h100
//	  overrides:            # any preset field, e.g. engine.numGpuBlocks
//	    engine: {numGpuBlocks: 20000}
//	  labels: {llm-d.ai/role: decode}
type FleetFile struct {
	Groups []FleetGroup `json:"groups"`
}

// FleetGroup is count replicas of one preset.
type FleetGroup struct {
	Name      string            `json:"name"`
	Count     int               `json:"count"`
	Preset    string            `json:"preset"`
	Overrides json.RawMessage   `json:"overrides"`
	Labels    map[string]string `json:"labels"`
}

// maxReplicas bounds a fleet's size (addresses are 10.0.x.y).
const maxReplicas = 10000

// UniformFleet returns n replicas of one preset, named default/vllm-i with
// addresses 10.0.x.y:8000.
func UniformFleet(n int, p replica.Preset) []ReplicaSpec {
	out := make([]ReplicaSpec, n)
	for i := range out {
		out[i] = ReplicaSpec{Name: fmt.Sprintf("default/vllm-%d", i), Address: address(i), Preset: p}
	}
	return out
}

func address(i int) string { return fmt.Sprintf("10.0.%d.%d:8000", i/250, i%250+1) }

// LoadFleet reads a fleet file.
func LoadFleet(path string) ([]ReplicaSpec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	return ParseFleet(data, path)
}

// ParseFleet decodes a fleet file strictly; errors name the file and the
// group.
func ParseFleet(data []byte, name string) ([]ReplicaSpec, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	var f FleetFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(f.Groups) == 0 {
		return nil, fmt.Errorf("%s: groups: at least one group is required", name)
	}
	var out []ReplicaSpec
	for gi, g := range f.Groups {
		where := fmt.Sprintf("%s: groups[%d]", name, gi)
		if g.Count < 1 || g.Count > maxReplicas-len(out) {
			return nil, fmt.Errorf("%s: count: must be in 1..%d, got %d", where, maxReplicas-len(out), g.Count)
		}
		if g.Preset == "" {
			return nil, fmt.Errorf("%s: preset: required", where)
		}
		p, err := replica.LookupPreset(g.Preset)
		if err != nil {
			return nil, fmt.Errorf("%s: preset: %w", where, err)
		}
		if len(g.Overrides) > 0 && string(g.Overrides) != "null" {
			if p, err = p.WithOverrides(g.Overrides); err != nil {
				return nil, fmt.Errorf("%s: overrides: %w", where, err)
			}
		}
		prefix := g.Name
		if prefix == "" {
			prefix = g.Preset
		}
		for i := range g.Count {
			out = append(out, ReplicaSpec{
				Name:    fmt.Sprintf("default/%s-%d", prefix, i),
				Address: address(len(out)),
				Labels:  maps.Clone(g.Labels),
				Preset:  p,
			})
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
