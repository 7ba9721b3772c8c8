// Package traces embeds eppsim's built-in workloads: synthesizer specs
// (YAML, see package workload's Spec and docs/workloads.md) that the binary
// can run without any trace file. "chat" is the default workload of
// `eppsim run`; "agentic" and "rag" are the other presets.
package traces

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

//go:embed presets/*.yaml
var presets embed.FS

// Preset returns the YAML spec of the named built-in workload.
func Preset(name string) ([]byte, error) {
	b, err := presets.ReadFile("presets/" + name + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("traces: no built-in workload %q (have %s)", name, strings.Join(Names(), ", "))
	}
	return b, nil
}

// Names lists the built-in workloads, sorted.
func Names() []string {
	entries, _ := fs.ReadDir(presets, "presets")
	var out []string
	for _, e := range entries {
		if n, ok := strings.CutSuffix(e.Name(), ".yaml"); ok {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}
