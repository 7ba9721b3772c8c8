package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestCPUProfileFlag: --cpuprofile writes a pprof profile (gzipped
// protobuf) once the command has run, and a profile file that cannot be
// created is a clear error before anything runs.
func TestCPUProfileFlag(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.prof")
	if _, _, err := runCLI(t, "run", "--max-requests", "10", "--replicas", "2", "--cpuprofile", path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
		t.Fatalf("profile of %d bytes does not start with the gzip magic", len(data))
	}
	bad := filepath.Join(t.TempDir(), "missing-dir", "cpu.prof")
	out, _, err := runCLI(t, "run", "--max-requests", "10", "--cpuprofile", bad)
	if err == nil || out != "" {
		t.Fatalf("unwritable profile: err %v, output %q", err, out)
	}
}
