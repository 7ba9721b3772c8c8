package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Output files named by a flag (trace synth/convert --out, calibrate
// --out, --cpuprofile). What is at the path decides how it is written:
//
//   - nothing, or a regular file: a temporary file in the same directory,
//     renamed onto the path once complete, so that a reader never sees half
//     a file and an interrupted or failed write leaves nothing behind;
//   - a symbolic link: the same, onto the path the link leads to (a
//     dangling link's target is created), so the link stays a link;
//   - a character device or a FIFO (/dev/null, /dev/stdout, a named pipe):
//     written straight through, never replaced;
//   - anything else (a directory, a socket, a block device): refused, exit
//     2, naming the flag and the path.

// An outTarget is where an output file goes, checked before anything is
// written (checkOutFile).
type outTarget struct {
	flag, path string // as given, for messages
	// rename is the path the temporary file is renamed onto: path, or
	// where its symbolic links lead. Empty: path is written through.
	rename string
	// exists: a regular file is there, which the rename replaces.
	exists bool
}

// checkOutFile finds how to write the output file path named by flag. Its
// errors exit 2 and name both.
func checkOutFile(flag, path string) (*outTarget, error) {
	t := &outTarget{flag: flag, path: path}
	st, err := os.Stat(path) // through symbolic links
	switch {
	case err == nil && st.Mode().IsRegular():
		t.exists = true
	case err == nil && st.Mode()&(fs.ModeCharDevice|fs.ModeNamedPipe) != 0:
		return t, nil // written through
	case err == nil:
		return nil, t.usageErr(fmt.Errorf("is %s: want a regular file (replaced), a character device or FIFO (written to) or a new path", fileKind(st.Mode())))
	case !errors.Is(err, fs.ErrNotExist):
		return nil, t.usageErr(err)
	}
	if t.rename, err = resolveLinks(path); err != nil {
		return nil, t.usageErr(err)
	}
	dir := filepath.Dir(t.rename)
	if st, err := os.Stat(dir); err != nil {
		return nil, t.usageErr(err)
	} else if !st.IsDir() {
		return nil, t.usageErr(fmt.Errorf("%s is not a directory", dir))
	}
	return t, nil
}

func (t *outTarget) usageErr(err error) error {
	return withExitCode(2, t.wrap(err))
}

func (t *outTarget) wrap(err error) error {
	if t.rename != "" && t.rename != t.path {
		return fmt.Errorf("%s %s (→ %s): %w", t.flag, t.path, t.rename, err)
	}
	return fmt.Errorf("%s %s: %w", t.flag, t.path, err)
}

// fileKind names the type of a file mode for messages.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO or pipe"
	}
	return "not a regular file (" + m.Type().String() + ")"
}

// maxLinks bounds the symbolic links resolveLinks follows (Linux's
// MAXSYMLINKS is 40).
const maxLinks = 40

// resolveLinks follows path's symbolic links (those of the last element;
// the directories are the kernel's to follow) to the path they lead to,
// which need not exist.
func resolveLinks(path string) (string, error) {
	p := path
	for range maxLinks {
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) || err == nil && fi.Mode()&fs.ModeSymlink == 0 {
			return p, nil
		}
		if err != nil {
			return "", err
		}
		dest, err := os.Readlink(p)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(dest) {
			// Relative to the link's directory as the kernel finds it
			// (its own links resolved), so that ".." means what it does
			// to open(2).
			dir, err := filepath.EvalSymlinks(filepath.Dir(p))
			if err != nil {
				return "", err
			}
			dest = filepath.Join(dir, dest)
		}
		p = dest
	}
	return "", fmt.Errorf("more than %d symbolic links", maxLinks)
}

// An outFile is an output file being written: Commit it when complete,
// Abort it otherwise (after Commit, Abort does nothing).
type outFile struct {
	t    *outTarget
	f    *os.File
	tmp  bool        // f is a temporary file to rename onto t.rename
	stop func() bool // ends the context watch of a file written through
	done bool
}

// filePerm is the mode of the files eppsim writes (a temporary file is
// created 0600 and widened before the rename).
const filePerm = 0o644

// create opens the output: a temporary file beside t.rename, or t.path
// itself to write through. A FIFO's open waits for a reader; ctx ending
// abandons the wait, and closes a file written through so that a write
// blocked on a FIFO nobody reads returns.
func (t *outTarget) create(ctx context.Context) (*outFile, error) {
	if t.rename != "" {
		dir, base := filepath.Dir(t.rename), filepath.Base(t.rename)
		f, err := os.CreateTemp(dir, "."+base+".tmp-*")
		if err != nil {
			return nil, t.usageErr(err)
		}
		return &outFile{t: t, f: f, tmp: true}, nil
	}
	type opened struct {
		f   *os.File
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		// No O_CREATE and no O_TRUNC: a device or FIFO, never a new file.
		f, err := os.OpenFile(t.path, os.O_WRONLY, 0)
		ch <- opened{f, err}
	}()
	select {
	case o := <-ch:
		if o.err != nil {
			return nil, t.usageErr(o.err)
		}
		of := &outFile{t: t, f: o.f}
		of.stop = context.AfterFunc(ctx, func() { o.f.Close() })
		return of, nil
	case <-ctx.Done():
		go func() {
			if o := <-ch; o.f != nil {
				o.f.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

func (o *outFile) Write(p []byte) (int, error) { return o.f.Write(p) }

// Commit completes the file: closes it and renames a temporary file into
// place. It removes the temporary file when that fails.
func (o *outFile) Commit() error {
	if o.done {
		return nil
	}
	o.done = true
	if !o.tmp {
		o.stop()
		if err := o.f.Close(); err != nil {
			return o.t.wrap(err)
		}
		return nil
	}
	err := errors.Join(o.f.Chmod(filePerm), o.f.Close())
	if err == nil {
		err = os.Rename(o.f.Name(), o.t.rename)
	}
	if err != nil {
		os.Remove(o.f.Name())
		return o.t.wrap(err)
	}
	return nil
}

// Abort closes the file and removes a temporary one.
func (o *outFile) Abort() {
	if o == nil || o.done {
		return
	}
	o.done = true
	if !o.tmp {
		o.stop()
		o.f.Close()
		return
	}
	o.f.Close()
	os.Remove(o.f.Name())
}

// writeOutFile writes data to t (create, Write, Commit).
func writeOutFile(ctx context.Context, t *outTarget, data []byte) error {
	f, err := t.create(ctx)
	if err != nil {
		return err
	}
	defer f.Abort()
	if _, err := f.Write(data); err != nil {
		return t.wrap(err)
	}
	return f.Commit()
}
