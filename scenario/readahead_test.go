package scenario

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/workload"
)

// skipTrace is a Mooncake trace whose lines 3 and 7 are invalid.
func skipTrace(t *testing.T) string {
	t.Helper()
	lines := []string{
		`{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}`,
		`{"timestamp": 10, "input_length": 600, "output_length": 5, "hash_ids": [0, 2]}`,
		`{"timestamp": 20, "input_length": 600}`,
		`{"timestamp": 30, "input_length": 900, "output_length": 5, "hash_ids": [0, 1]}`,
		`{"timestamp": 40, "input_length": 600, "output_length": 5, "hash_ids": [3, 4]}`,
		`{"timestamp": 50, "input_length": 100, "output_length": 5, "hash_ids": [5]}`,
		`not json`,
		`{"timestamp": 60, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}`,
	}
	path := filepath.Join(t.TempDir(), "skip.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestReadaheadMatchesDirectReading reads one trace directly and through the
// readahead and checks the same requests (bodies and tokens included), the
// same terminal error and the same skip count after every request.
func TestReadaheadMatchesDirectReading(t *testing.T) {
	path := skipTrace(t)
	opt := workload.Options{Seed: 5, SkipInvalid: true}
	direct, err := workload.Open(path, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	src, err := workload.Open(path, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ra := startReadahead(src)
	defer ra.Stop()
	for i := 0; ; i++ {
		want, werr := direct.Next()
		got, gerr := ra.Next()
		if !errors.Is(gerr, werr) && (gerr == nil || werr == nil || gerr.Error() != werr.Error()) {
			t.Fatalf("request %d: error %v, want %v", i, gerr, werr)
		}
		if ra.Skipped() != direct.Skipped() {
			t.Fatalf("after request %d: skipped %d, want %d", i, ra.Skipped(), direct.Skipped())
		}
		if werr != nil {
			break
		}
		if got.ID != want.ID || got.Arrival != want.Arrival || got.Line != want.Line ||
			string(got.Body) != string(want.Body) || !slices.Equal(got.PromptTokens, want.PromptTokens) {
			t.Fatalf("request %d differs: %+v vs %+v", i, got, want)
		}
	}
	if _, err := ra.Next(); err != io.EOF {
		t.Fatalf("Next after the end: %v, want io.EOF", err)
	}
}

// TestReadaheadSkipCountStopsAtLimit: a run limited to 3 requests consumes
// lines 1-4, so it reports the one invalid line among them even though the
// readahead has read the whole file by then.
func TestReadaheadSkipCountStopsAtLimit(t *testing.T) {
	spec := testSpec(t, 3)
	spec.Trace = skipTrace(t)
	spec.Workload = workload.Options{Seed: 3, SkipInvalid: true}
	s, err := Run(spec, ForSource("round-robin"), Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	w := s.Config.Workload
	line3 := spec.Trace + ":3: "
	if w.SkippedInvalid != 1 || len(w.SkippedExamples) != 1 || !strings.HasPrefix(w.SkippedExamples[0], line3) || w.Injected != 3 {
		t.Fatalf("skipped %d %q, injected %d; want 1 naming %q, and 3", w.SkippedInvalid, w.SkippedExamples, w.Injected, line3)
	}
	spec.Env.MaxRequests = 0
	s, err = Run(spec, ForSource("round-robin"), Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	w = s.Config.Workload
	if w.SkippedInvalid != 2 || len(w.SkippedExamples) != 2 || !strings.HasPrefix(w.SkippedExamples[0], line3) ||
		!strings.HasPrefix(w.SkippedExamples[1], spec.Trace+":7: ") {
		t.Fatalf("whole trace: skipped %d %q, want 2 naming lines 3 and 7", w.SkippedInvalid, w.SkippedExamples)
	}
	if n := s.Config.NotSimulated; len(n) != 0 {
		t.Fatalf("round-robin has not-simulated notes %q", n)
	}
}
