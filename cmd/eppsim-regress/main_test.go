package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommittedScenariosLoad: the pinned scenario file is valid and every
// scenario has a committed baseline.
func TestCommittedScenariosLoad(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "regress")
	f, err := loadScenarios(filepath.Join(dir, "scenarios.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if f.Tolerance <= 0 || f.Tolerance > 1e-6 || len(f.Scenarios) < 2 {
		t.Fatalf("scenarios %+v", f)
	}
	for _, s := range f.Scenarios {
		if st, err := os.Stat(filepath.Join(dir, s.Name, "summary.json")); err != nil || st.Size() == 0 {
			t.Errorf("scenario %s: baseline: %v", s.Name, err)
		}
	}
}

func TestLoadScenariosErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"scenarios: [{name: a, args: [x]}]", "tolerance must be positive"},
		{"tolerance: 1e-9\n", "no scenarios"},
		{"tolerance: 1e-9\nscenarios: [{name: A, args: [x]}]", `name "A" must be lower-case`},
		{"tolerance: 1e-9\nscenarios: [{name: a, args: [x]}, {name: a, args: [y]}]", `duplicate name "a"`},
		{"tolerance: 1e-9\nscenarios: [{name: a}]", "scenario a: no args"},
		{"tolerance: 1e-9\nscenarios: [{name: a, args: [--out, x]}]", "--out is set by the gate"},
		{"tolerance: 1e-9\nscenarios: [{name: a, args: [x], extra: 1}]", `unknown field "extra"`},
	} {
		p := filepath.Join(t.TempDir(), "scenarios.yaml")
		if err := os.WriteFile(p, []byte(tc.yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := loadScenarios(p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

func TestDemote(t *testing.T) {
	got := string(demote([]byte("## a\n\ntext # not a heading\n### b\n")))
	if want := "### a\n\ntext # not a heading\n#### b\n"; got != want {
		t.Fatalf("demote: %q, want %q", got, want)
	}
}
