package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
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
