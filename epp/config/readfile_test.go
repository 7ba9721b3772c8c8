package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadFileLimit: a configuration file is read whole up to the limit
// and refused past it, without reading more than the limit of an input
// that never ends.
func TestReadFileLimit(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		size int
		want string
	}{
		{100, ""},
		{101, "larger than 100 bytes, the limit of a configuration file (not an EndpointPickerConfig?)"},
	} {
		path := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(path, []byte(strings.Repeat("#", tt.size)), 0o644); err != nil {
			t.Fatal(err)
		}
		data, err := readFile(path, 100)
		switch {
		case tt.want == "" && (err != nil || len(data) != tt.size):
			t.Errorf("%d bytes: %d read, error %v", tt.size, len(data), err)
		case tt.want != "" && (err == nil || err.Error() != path+": "+tt.want):
			t.Errorf("%d bytes: error %v\nwant  %s: %s", tt.size, err, path, tt.want)
		}
	}
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero")
	}
	_, err := LoadFile("/dev/zero", Options{})
	if want := "/dev/zero: larger than 16 MiB, the limit of a configuration file (not an EndpointPickerConfig?)"; err == nil || err.Error() != want {
		t.Errorf("/dev/zero: error %v\nwant  %s", err, want)
	}
}
