package workload

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/traces"
)

// TestBOM: a UTF-8 byte order mark at the start of a trace is not content:
// every reader gives the same requests (lines included) with and without
// one, detected or named, from a reader or a file (with --rate's first
// pass).
func TestBOM(t *testing.T) {
	sharegpt, err := os.ReadFile("testdata/sharegpt.json")
	if err != nil {
		t.Fatal(err)
	}
	var convs []json.RawMessage
	if err := json.Unmarshal(sharegpt, &convs); err != nil {
		t.Fatal(err)
	}
	var jsonl []string
	for _, c := range convs {
		b, _ := json.Marshal(c)
		jsonl = append(jsonl, string(b))
	}
	tests := []struct {
		name   string
		format Format
		data   string
	}{
		{"mooncake", FormatMooncake, readText(t, "testdata/mooncake.jsonl")},
		{"alibaba", FormatAlibaba, readText(t, "testdata/alibaba.jsonl")},
		{"openai", FormatOpenAI, readText(t, "testdata/openai.jsonl")},
		{"sharegpt", FormatShareGPT, string(sharegpt)},
		{"sharegpt jsonl", FormatShareGPT, strings.Join(jsonl, "\n")},
		{"azure", FormatAzure, readText(t, "testdata/azure.csv")},
		// The header's first column quoted: encoding/csv would see the
		// mark before the quote as a bare quote.
		{"azure quoted", FormatAzure, "\"TIMESTAMP\",ContextTokens,GeneratedTokens\n0,10,1\n1,20,2\n"},
	}
	dir := t.TempDir()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, f := range []Format{tt.format, FormatAuto} {
				o := Options{Format: f, Seed: 3, SystemPromptTokens: 10}
				want := readAll(t, "t", tt.data, o)
				got := readAll(t, "t", utf8BOM+tt.data, o)
				if len(want) == 0 || !reflect.DeepEqual(got, want) {
					t.Errorf("format %s: %d requests with a byte order mark, %d without, or they differ", f, len(got), len(want))
				}
			}
			if !timestamped(tt.format) || tt.format == FormatOpenAI {
				return
			}
			path := filepath.Join(dir, tt.name)
			if err := os.WriteFile(path, []byte(utf8BOM+tt.data), 0o644); err != nil {
				t.Fatal(err)
			}
			if got := readFile(t, path, Options{Rate: 2, SystemPromptTokens: 10}); len(got) == 0 {
				t.Error("no requests from the file")
			}
		})
	}
	// A bad line is still reported on its line.
	err = firstError(t, "t", utf8BOM+`{"timestamp": 0, "input_length": 5, "output_length": -1, "hash_ids": [0]}`, Options{})
	if want := "t:1: output_length: -1 out of range [0, 2097152]"; err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
}

// TestBOMConfigs: a synthesizer spec and an inference-perf config with a
// byte order mark parse as without one (the YAML decoders skip it), their
// errors on the same lines.
func TestBOMConfigs(t *testing.T) {
	spec, err := traces.Preset("chat")
	if err != nil {
		t.Fatal(err)
	}
	want, err := ParseSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseSpec(append([]byte(utf8BOM), spec...))
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("spec with a byte order mark: %v", err)
	}
	iperf := []byte(readText(t, "testdata/inference-perf/general-lite.yaml"))
	wantCfg, err := ParseInferencePerf(iperf, "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	gotCfg, err := ParseInferencePerf(append([]byte(utf8BOM), iperf...), "p.yaml")
	if err != nil || !reflect.DeepEqual(gotCfg, wantCfg) {
		t.Errorf("inference-perf config with a byte order mark: %v", err)
	}
	_, err = ParseInferencePerf([]byte(utf8BOM+"load:\n  tpye: constant\n"), "p.yaml")
	if err == nil || !strings.HasPrefix(err.Error(), "p.yaml:2: load.tpye: unknown key") {
		t.Errorf("error %v", err)
	}
}

func readText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
