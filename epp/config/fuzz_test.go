package config_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/eppsim/eppsim/epp/config"
)

// FuzzLoad: the loader never panics, and whatever it accepts marshals to
// YAML that loads again.
func FuzzLoad(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(sharedConfigs, "*.yaml"))
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\nplugins:\n- type: queue-scorer\n  parameters: {a: [1, {b: c}], 1: x}\n"))
	f.Add([]byte("a: &x [*x]\n"))
	f.Add([]byte("\xef\xbb\xbfapiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\nplugins:\n- type: queue-scorer\n  parameters: {w: [1e309, \"1e309\", 1e-400]}\n"))
	f.Add([]byte("apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\nflowControl: {maxBytes: 1Gi, defaultRequestTTL: 5s}\n"))
	reg := fakeRegistry(nil)
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := config.Load(data, config.Options{Registry: reg, File: "fuzz.yaml"})
		if err != nil {
			return
		}
		y, err := l.YAML()
		if err != nil {
			t.Fatalf("marshal accepted config: %v", err)
		}
		if _, err := config.Load(y, config.Options{Registry: reg}); err != nil {
			t.Fatalf("reload of effective config failed: %v\n%s\n--- from\n%s", err, y, data)
		}
	})
}
