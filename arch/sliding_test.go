package arch

import (
	"strings"
	"testing"
)

// TestSlidingWindowLayouts: which layers attend to a window, by the
// rules transformers lays out, and the layers one vLLM block holds (its
// hybrid manager's group size: the smaller count, or the larger when
// under 1.5 times the smaller).
func TestSlidingWindowLayouts(t *testing.T) {
	const base = `"model_type": %T%, "num_hidden_layers": %L%, "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 100, "intermediate_size": 128`
	cfg := func(typ, layers, extra string) string {
		return "{" + strings.NewReplacer("%T%", `"`+typ+`"`, "%L%", layers).Replace(base) + extra + "}"
	}
	tests := []struct {
		name, json             string
		window, sliding, block int
	}{
		{"gpt-oss layer_types", "", 128, 12, 12},
		{"gemma-3 pattern 6", cfg("gemma3_text", "62", `, "sliding_window": 1024, "sliding_window_pattern": 6`), 1024, 52, 10},
		{"gemma-2 alternate", cfg("gemma2", "46", `, "sliding_window": 4096`), 4096, 23, 23},
		{"mistral every layer", cfg("mistral", "32", `, "sliding_window": 4096`), 4096, 32, 32},
		{"qwen2.5 off", cfg("qwen2", "28", `, "sliding_window": 131072, "use_sliding_window": false`), 0, 0, 28},
		{"qwen2 from max_window_layers", cfg("qwen2", "28", `, "sliding_window": 4096, "use_sliding_window": true, "max_window_layers": 21`), 4096, 7, 7},
		{"mixtral null", cfg("mixtral", "32", `, "sliding_window": null`), 0, 0, 32},
		{"13 full, 12 sliding", cfg("x", "25", `, "sliding_window": 128, "layer_types": [`+strings.Repeat(`"full_attention", "sliding_attention", `, 12)+`"full_attention"]`), 128, 12, 13},
	}
	for _, tc := range tests {
		var m *Model
		if tc.json == "" {
			m = mustModel(t, "gpt-oss-20b.json")
		} else {
			var err error
			if m, err = ParseModel([]byte(tc.json), "c.json"); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
		}
		if m.SlidingWindow != tc.window || m.SlidingLayers != tc.sliding || m.KVBlockLayers() != tc.block {
			t.Errorf("%s: window %d, %d sliding, blocks of %d layers; want %d, %d, %d", tc.name, m.SlidingWindow, m.SlidingLayers, m.KVBlockLayers(), tc.window, tc.sliding, tc.block)
		}
	}
	for _, bad := range []struct{ json, want string }{
		{cfg("x", "2", `, "sliding_window": 8, "layer_types": ["full_attention"]`), "c.json: layer_types: 1 entries for 2 layers"},
		{cfg("x", "2", `, "layer_types": ["sliding_attention", "full_attention"]`), "c.json: sliding_window: required: 1 layers are sliding_attention"},
		{cfg("x", "2", `, "sliding_window": 8, "sliding_window_pattern": 0`), "c.json: sliding_window_pattern: must be > 0, got 0"},
	} {
		if _, err := ParseModel([]byte(bad.json), "c.json"); err == nil || err.Error() != bad.want {
			t.Errorf("%s: %v, want %q", bad.json, err, bad.want)
		}
	}
}
