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
// vectors and the shipped EPP configs are byte-identical to the shared
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
	for _, c := range copies {
		if _, err := os.Stat(filepath.Join(sharedRoot, "epp-configs", filepath.Base(c))); err != nil {
			t.Errorf("%s has no original in %s/epp-configs any more (make testdata-refresh)", c, sharedRoot)
		}
	}
}
