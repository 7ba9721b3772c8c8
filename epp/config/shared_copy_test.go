package config_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// sharedRoot is the project's shared folder, beside the repository (absent
// in a user's fresh clone); testdataShared holds the repository's copies of
// the parts of it that the tests must have (testdata/shared/README.md).
const (
	sharedRoot     = "../../../shared"
	testdataShared = "../../testdata/shared"
)

// TestSharedCopiesCurrent checks that the repository's copies of the golden
// vectors, the shipped EPP configs and the published benchmarks' EPP
// configs are byte-identical to the shared
// folder's originals and that every original has a copy, so that a refresh
// of ../shared that was not copied (make testdata-refresh) fails in CI.
func TestSharedCopiesCurrent(t *testing.T) {
	if _, err := os.Stat(sharedRoot); err != nil {
		t.Skipf("%s is absent (a fresh clone): nothing to compare the copies in %s with", sharedRoot, testdataShared)
	}
	originals, err := filepath.Glob(filepath.Join(sharedRoot, "epp-configs", "*.yaml"))
	if err != nil || len(originals) == 0 {
		t.Fatalf("no configs in %s/epp-configs: %v", sharedRoot, err)
	}
	originals = append(originals, filepath.Join(sharedRoot, "golden", "epp-golden.json"))
	bench, err := publishedConfigs(sharedRoot)
	if err != nil || len(bench) == 0 {
		t.Fatalf("no benchmark configs in %s/benchmarks: %v", sharedRoot, err)
	}
	originals = append(originals, bench...)
	for _, orig := range originals {
		rel, err := filepath.Rel(sharedRoot, orig)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(orig)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(testdataShared, rel))
		if err != nil {
			t.Errorf("%s has no copy in %s (make testdata-refresh): %v", rel, testdataShared, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s/%s differs from %s (make testdata-refresh)", testdataShared, rel, orig)
		}
	}
	copies, _ := filepath.Glob(filepath.Join(testdataShared, "epp-configs", "*.yaml"))
	benchCopies, _ := filepath.Glob(filepath.Join(testdataShared, "benchmarks", "*", "*.yaml"))
	for _, c := range append(copies, benchCopies...) {
		rel, _ := filepath.Rel(testdataShared, c)
		if _, err := os.Stat(filepath.Join(sharedRoot, rel)); err != nil {
			t.Errorf("%s has no original in %s any more (make testdata-refresh)", c, sharedRoot)
		}
	}
}

// publishedConfigs lists the EndpointPickerConfigs of the published
// benchmarks under root (root/benchmarks/SET/*.yaml but each set's
// inference-perf.yaml, the workload profile).
func publishedConfigs(root string) ([]string, error) {
	all, err := filepath.Glob(filepath.Join(root, "benchmarks", "*", "*.yaml"))
	var out []string
	for _, f := range all {
		if filepath.Base(f) != "inference-perf.yaml" {
			out = append(out, f)
		}
	}
	return out, err
}
