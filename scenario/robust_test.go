package scenario

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eppsim/eppsim/workload"
)

// robustInputs returns trace files that every reader must survive: each
// format's fixture, an empty file, a binary file, and each fixture with its
// first, middle or last record broken (invalid JSON or CSV, and a
// semantically invalid value).
func robustInputs(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{}
	write := func(name string, data []byte) {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		files[name] = p
	}
	write("empty.jsonl", nil)
	write("blank.jsonl", []byte("\n\n   \n"))
	bin := make([]byte, 4096)
	for i := range bin {
		bin[i] = byte(i*131 + i/7)
	}
	write("binary.bin", bin)
	fixtures := map[string]string{
		"mooncake": "mooncake.jsonl", "alibaba": "alibaba.jsonl", "openai": "openai.jsonl",
		"sharegpt": "sharegpt.json", "azure": "azure.csv",
	}
	// Per format: a broken record (syntax) and an invalid one (semantics).
	broken := map[string][2]string{
		"mooncake": {`{"timestamp": 0, "input_length": `, `{"timestamp": 0, "input_length": 0, "output_length": 5, "hash_ids": [1]}`},
		"alibaba":  {`{"chat_id": 1,`, `{"chat_id": 9, "parent_chat_id": -1, "timestamp": 1, "input_length": -3, "output_length": 1, "turn": 1, "hash_ids": [1]}`},
		"openai":   {`{"model": "m", "prompt": `, `{"model": "m", "messages": "not a list", "x_arrival_ms": 1}`},
		"sharegpt": {`  {"id": "b", "conversations": [`, `  {"id": "b", "conversations": "x"},`},
		"azure":    {`2023-11-16 18:17:04.0799600,abc`, `not a time,5,5`},
	}
	for f, name := range fixtures {
		data, err := os.ReadFile(filepath.Join("..", "workload", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		write(name, data)
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		// Records are the lines that are neither blank nor the CSV header
		// nor the JSON array's brackets.
		var recs []int
		for i, l := range lines {
			s := strings.TrimSpace(l)
			if s == "" || s == "[" || s == "]" || strings.HasPrefix(s, "TIMESTAMP") || (f == "sharegpt" && !strings.HasPrefix(s, "{\"id\"") && !strings.HasPrefix(s, "{\"conversations\"")) {
				continue
			}
			recs = append(recs, i)
		}
		for _, pos := range []struct {
			name string
			at   int
		}{{"first", recs[0]}, {"middle", recs[len(recs)/2]}, {"last", recs[len(recs)-1]}} {
			for k, kind := range []string{"syntax", "invalid"} {
				out := append([]string(nil), lines...)
				out[pos.at] = broken[f][k]
				write(fmt.Sprintf("%s-%s-%s%s", f, pos.name, kind, filepath.Ext(name)), []byte(strings.Join(out, "\n")+"\n"))
			}
		}
	}
	return files
}

// TestEveryReaderEndsOnEveryInput runs every reader (each format, and
// detection) on every other format's files, empty and binary files, and
// files broken in their first, middle or last record, with and without
// --skip-invalid. Each run must end within seconds, either with an input
// error (exit 2 in the CLI) or with a valid result — never spin.
func TestEveryReaderEndsOnEveryInput(t *testing.T) {
	files := robustInputs(t)
	formats := []workload.Format{workload.FormatAuto, workload.FormatMooncake, workload.FormatAlibaba,
		workload.FormatOpenAI, workload.FormatShareGPT, workload.FormatAzure}
	base := testSpec(t, 0)
	for name, path := range files {
		for _, f := range formats {
			for _, skip := range []bool{false, true} {
				spec := *base
				spec.Trace = path
				spec.Workload = workload.Options{Format: f, SkipInvalid: skip, Seed: 3}
				type result struct {
					err error
					n   int
				}
				done := make(chan result, 1)
				go func() {
					s, err := Run(&spec, ForSource("round-robin"), Hooks{})
					r := result{err: err}
					if s != nil {
						r.n = s.Requests.Total
					}
					done <- r
				}()
				label := fmt.Sprintf("%s as %s (skip-invalid %v)", name, f, skip)
				select {
				case r := <-done:
					if r.err != nil && !IsInputError(r.err) {
						t.Errorf("%s: error %q is not an input error", label, r.err)
					}
					if r.err != nil && !strings.Contains(r.err.Error(), filepath.Base(path)) {
						t.Errorf("%s: error %q does not name the file", label, r.err)
					}
				case <-time.After(20 * time.Second):
					t.Fatalf("%s: still running after 20 s", label)
				}
			}
		}
	}
}

// TestFirstRecordErrorIsReported: an invalid first record ends the run
// with the reader's own message (what `eppsim trace inspect` prints), not
// a run that never receives a request.
func TestFirstRecordErrorIsReported(t *testing.T) {
	path := filepath.Join(t.TempDir(), "first0.jsonl")
	if err := os.WriteFile(path, []byte(`{"timestamp": 0, "input_length": 0, "output_length": 5, "hash_ids": [1]}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := testSpec(t, 0)
	spec.Trace = path
	_, err := Run(spec, ForSource("default"), Hooks{})
	want := path + ":1: input_length: must be > 0, got 0"
	if err == nil || err.Error() != want || !IsInputError(err) {
		t.Fatalf("error %v, want input error %q", err, want)
	}
	// The same file through the inspector gives the same message.
	src, err := workload.Open(path, workload.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, ierr := workload.Inspect(src, 16); ierr == nil || ierr.Error() != want {
		t.Fatalf("inspect error %v, want %q", ierr, want)
	}
}
