package producer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/eppsim/eppsim/epp"
)

// TestSharedConfigParams builds every plugin of this package that the
// shipped EndpointPickerConfigs declare, with their parameters decoded
// strictly.
func TestSharedConfigParams(t *testing.T) {
	files, err := filepath.Glob("../../testdata/shared/epp-configs/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no shared configs: %v", err)
	}
	r := epp.NewRegistry()
	Register(r)
	built := 0
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var cfg struct {
			Plugins []struct {
				Name       string          `json:"name"`
				Type       string          `json:"type"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"plugins"`
		}
		if err := yaml.Unmarshal(raw, &cfg); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, p := range cfg.Plugins {
			factory, ok := r.Lookup(p.Type)
			if !ok {
				continue
			}
			name := p.Name
			if name == "" {
				name = p.Type
			}
			_, err := factory(name, p.Parameters, epp.NewHandle(0))
			if filepath.Base(f) == "epp-mm-embeddings-cache-config.yaml" && p.Type == MMEmbeddingsType {
				// cacheSizeInMB is not a parameter of the real producer
				// (cacheSizeInMBPerServer is): strict decoding rejects it,
				// so the shipped config does not load upstream either
				// (flow-control.md §14.3).
				if err == nil || !strings.Contains(err.Error(), `unknown field "cacheSizeInMB"`) {
					t.Errorf("%s: %v, want the unknown field cacheSizeInMB", filepath.Base(f), err)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s: %s: %v", filepath.Base(f), p.Type, err)
			}
			built++
		}
	}
	t.Logf("built %d producer plugins", built)
	if built < 10 {
		t.Errorf("only %d producer plugins found in the shared configs", built)
	}
}
