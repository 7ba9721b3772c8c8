package config_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/epp/config"
	"github.com/eppsim/eppsim/epp/plugins"
)

// manyPlugins is a configuration of n queue-scorers, all in one profile.
func manyPlugins(n int) []byte {
	var b strings.Builder
	b.WriteString("apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\nplugins:\n")
	for i := range n {
		fmt.Fprintf(&b, "- name: q%d\n  type: queue-scorer\n", i)
	}
	b.WriteString("schedulingProfiles:\n- name: default\n  plugins:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - pluginRef: q%d\n", i)
	}
	return []byte(b.String())
}

// BenchmarkLoadManyPlugins loads a configuration of many plugins and
// assembles its Router, as every simulation does: linear in the plugin
// count (the name lookups are map lookups, the instantiation order a
// heap), where it used to be quadratic (10k plugins 0.25 s, 40k 5 s).
func BenchmarkLoadManyPlugins(b *testing.B) {
	for _, n := range []int{1000, 10000, 40000} {
		data := manyPlugins(n)
		b.Run(fmt.Sprintf("plugins=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				l, err := config.Load(data, config.Options{Registry: plugins.Builtin(), File: "many.yaml"})
				if err != nil {
					b.Fatal(err)
				}
				if r := l.Router(); len(r.Profiles[0].Scorers) != n {
					b.Fatalf("%d scorers, want %d", len(r.Profiles[0].Scorers), n)
				}
			}
		})
	}
}

// TestManyPluginsLoad: a configuration of thousands of plugins loads with
// every plugin found by name, in configuration order.
func TestManyPluginsLoad(t *testing.T) {
	const n = 3000
	l, err := config.Load(manyPlugins(n), config.Options{Registry: plugins.Builtin(), File: "many.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, 1, n / 2, n - 1} {
		name := fmt.Sprintf("q%d", i)
		if p := l.Plugin(name); p == nil || p.Name() != name {
			t.Errorf("Plugin(%q) = %v", name, p)
		}
		if got := l.Plugins[i].Name; got != name {
			t.Errorf("Plugins[%d] = %s, want %s (configuration order)", i, got, name)
		}
	}
	if l.Plugin("nope") != nil {
		t.Error("Plugin(nope) found something")
	}
	if r := l.Router(); len(r.Profiles[0].Scorers) != n || len(r.Parsers) != 4 {
		t.Errorf("router: %d scorers, %d parsers", len(r.Profiles[0].Scorers), len(r.Parsers))
	}
}

// TestLongErrorsShortened: an error about a deeply nested or very long
// field stays readable — at most 300 bytes beside the file name, the line
// kept, the middle elided — while Path keeps the whole field path.
func TestLongErrorsShortened(t *testing.T) {
	const head = "apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\n"
	nested := func(depth int, key string) string {
		var b strings.Builder
		b.WriteString(head + "plugins:\n- type: queue-scorer\n  parameters:\n")
		ind := "    "
		for range depth {
			b.WriteString(ind + key + ":\n")
			ind += "  "
		}
		b.WriteString(ind + "b: 1\n")
		return b.String()
	}
	block := func(depth int) string { // one space of indentation per level
		var b strings.Builder
		b.WriteString(head + "foo:\n")
		for i := range depth {
			b.WriteString(strings.Repeat(" ", i+1) + "a:\n")
		}
		return b.String()
	}
	cases := []struct {
		name, doc, want string
		line            int
	}{
		{"10000-deep flow mapping in parameters", head + "plugins:\n- type: queue-scorer\n  parameters: " +
			strings.Repeat(`{"a": `, 10000) + "1" + strings.Repeat("}", 10000) + "\n", "", 0},
		{"600-deep block mapping in parameters", nested(600, "a"), "nested too deeply", 0},
		{"deep block mapping of long keys", nested(200, strings.Repeat("k", 40)), "", 0},
		{"long unknown top-level key", head + strings.Repeat("x", 1000) + ": 1\n", "unknown field", 3},
		{"long plugin type", head + "plugins:\n- type: " + strings.Repeat("é", 3000) + "\n", "is not registered", 4},
	}
	if !testing.Short() {
		// 50 MB of YAML: a second, twenty under the race detector.
		cases = append(cases, struct {
			name, doc, want string
			line            int
		}{"10000-deep block mapping", block(10001), "exceeded max depth", 0})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := config.Load([]byte(c.doc), config.Options{Registry: plugins.Builtin(), File: "deep.yaml"})
			if err == nil {
				t.Fatal("loaded")
			}
			msg := err.Error()
			if n := len(msg) - len("deep.yaml"); n > 300 {
				t.Errorf("error of %d bytes: %.400s", len(msg), msg)
			}
			if c.line > 0 && !strings.HasPrefix(msg, fmt.Sprintf("deep.yaml:%d: ", c.line)) {
				t.Errorf("error %q does not start with the file and line %d", msg, c.line)
			}
			if !strings.Contains(msg, c.want) {
				t.Errorf("error %q does not say %q", msg, c.want)
			}
			if len(msg) > 200 && !strings.Contains(msg, "…") {
				t.Errorf("long error without an ellipsis: %q", msg)
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("error on several lines: %q", msg)
			}
		})
	}
}
