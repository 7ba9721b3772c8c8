package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// checkOutDir refuses an --out directory that already holds files unless
// force is set: a what-if run must not silently replace the results of an
// earlier one. A missing directory is fine (the verb creates it, and
// removes it again if the run fails); a path that is not a directory is an
// error whatever force says.
func checkOutDir(dir string, force bool) error {
	st, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("--out %s: %w", dir, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("--out %s: not a directory", dir)
	}
	if force {
		return nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("--out %s: %w", dir, err)
	}
	if len(entries) == 0 {
		return nil
	}
	var names []string
	for _, e := range entries[:min(len(entries), 3)] {
		names = append(names, e.Name())
	}
	if len(entries) > 3 {
		names = append(names, fmt.Sprintf("and %d more", len(entries)-3))
	}
	return fmt.Errorf("--out %s already holds earlier results (%s): pass --force to overwrite them, or choose another directory",
		dir, strings.Join(names, ", "))
}

// checkOutDirNotInput is checkOutDir for a verb that reads directories and
// writes another (sweep merge): --out must also not be one of the inputs,
// whatever force says (the merge would replace the shard's own points.jsonl
// while reading it).
func checkOutDirNotInput(dir string, inputs []string, force bool) error {
	for _, in := range inputs {
		if sameDir(dir, in) {
			return fmt.Errorf("--out %s is the input directory %s: merge into another directory (--force does not change that)", dir, in)
		}
	}
	return checkOutDir(dir, force)
}

// sameDir reports whether a and b name the same directory: the same file
// when both exist (through links, other spellings), the same absolute
// path otherwise.
func sameDir(a, b string) bool {
	sa, erra := os.Stat(a)
	sb, errb := os.Stat(b)
	if erra == nil && errb == nil {
		return os.SameFile(sa, sb)
	}
	aa, erra := filepath.Abs(a)
	ab, errb := filepath.Abs(b)
	return erra == nil && errb == nil && aa == ab
}
