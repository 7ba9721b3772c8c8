package main

import (
	"context"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mkfifo makes a FIFO at path.
func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
}

// mknull makes a character device like /dev/null (1, 3) at path, so that
// a test writes to a device without going near the real /dev/null (a bug
// that replaces the device replaces this one). It skips the test when
// device nodes cannot be made (not root) or opened (a nodev mount).
func mknull(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mknod(path, syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
		t.Skipf("mknod: %v", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("a device node in %s: %v", filepath.Dir(path), err)
	}
	f.Close()
}

// isCharDevice fails the test unless path is still a character device.
func isCharDevice(t *testing.T, path string) {
	t.Helper()
	if st, err := os.Lstat(path); err != nil || st.Mode()&fs.ModeCharDevice == 0 {
		t.Fatalf("%s is no longer a character device: %v %v", path, st.Mode(), err)
	}
}

// readFIFO reads path (a FIFO) to its end on a goroutine; the channel gets
// what was read.
func readFIFO(t *testing.T, path string) <-chan string {
	t.Helper()
	ch := make(chan string, 1)
	go func() {
		f, err := os.Open(path)
		if err != nil {
			ch <- "open: " + err.Error()
			return
		}
		defer f.Close()
		b, err := io.ReadAll(f)
		if err != nil {
			ch <- "read: " + err.Error()
			return
		}
		ch <- string(b)
	}()
	return ch
}

// fromFIFO is what readFIFO's reader got, or a failure after 10 s (the
// FIFO was replaced, say, so the reader waits for a writer forever).
func fromFIFO(t *testing.T, got <-chan string) string {
	t.Helper()
	select {
	case s := <-got:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("nothing reached the FIFO's reader in 10 s")
	}
	return ""
}

// TestOutFileKinds: an output file named by a flag is written through a
// temporary file renamed into place when the path is absent or a regular
// file, onto a symbolic link's target (the link stays a link, a dangling
// one's target is created), straight through to a character device or a
// FIFO (which stay what they are; the device is one made like /dev/null in
// the test's directory), and refused, exit 2 naming the flag and
// the path, for a directory, a socket or a path in a missing directory.
func TestOutFileKinds(t *testing.T) {
	const data = "new contents\n"
	for _, tc := range []struct {
		name string
		// setup makes what is at the path and returns the path and the
		// file that receives the data ("" when refused).
		setup func(t *testing.T, dir string) (path, dest string)
		fifo  bool   // dest is a FIFO to read
		err   string // the refusal, after "--out PATH: "
	}{
		{name: "absent", setup: func(t *testing.T, dir string) (string, string) {
			p := filepath.Join(dir, "new.jsonl")
			return p, p
		}},
		{name: "regular file", setup: func(t *testing.T, dir string) (string, string) {
			p := filepath.Join(dir, "old.jsonl")
			writeFile(t, p, "old contents, longer than the new ones\n")
			return p, p
		}},
		{name: "link to a regular file", setup: func(t *testing.T, dir string) (string, string) {
			target := filepath.Join(dir, "target.jsonl")
			writeFile(t, target, "old\n")
			link := filepath.Join(dir, "link.jsonl")
			symlink(t, target, link)
			return link, target
		}},
		{name: "relative link through a linked directory", setup: func(t *testing.T, dir string) (string, string) {
			// dir/real/sub/link.jsonl → ../target.jsonl, reached as
			// dir/alias/link.jsonl with dir/alias → real/sub: ".." is
			// dir/real, as open(2) resolves it, not dir.
			sub := filepath.Join(dir, "real", "sub")
			if err := os.MkdirAll(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			target := filepath.Join(dir, "real", "target.jsonl")
			writeFile(t, target, "old\n")
			symlink(t, filepath.Join("..", "target.jsonl"), filepath.Join(sub, "link.jsonl"))
			symlink(t, filepath.Join("real", "sub"), filepath.Join(dir, "alias"))
			return filepath.Join(dir, "alias", "link.jsonl"), target
		}},
		{name: "dangling link", setup: func(t *testing.T, dir string) (string, string) {
			target := filepath.Join(dir, "later.jsonl")
			link := filepath.Join(dir, "link.jsonl")
			symlink(t, "later.jsonl", link)
			return link, target
		}},
		{name: "chain of links", setup: func(t *testing.T, dir string) (string, string) {
			target := filepath.Join(dir, "target.jsonl")
			symlink(t, target, filepath.Join(dir, "b"))
			symlink(t, filepath.Join(dir, "b"), filepath.Join(dir, "a"))
			return filepath.Join(dir, "a"), target
		}},
		{name: "FIFO", fifo: true, setup: func(t *testing.T, dir string) (string, string) {
			p := filepath.Join(dir, "fifo")
			mkfifo(t, p)
			return p, p
		}},
		{name: "link to a FIFO", fifo: true, setup: func(t *testing.T, dir string) (string, string) {
			p := filepath.Join(dir, "fifo")
			mkfifo(t, p)
			symlink(t, p, filepath.Join(dir, "link"))
			return filepath.Join(dir, "link"), p
		}},
		{name: "character device", setup: func(t *testing.T, dir string) (string, string) {
			p := filepath.Join(dir, "null")
			mknull(t, p)
			return p, ""
		}},
		{name: "link to a character device", setup: func(t *testing.T, dir string) (string, string) {
			p := filepath.Join(dir, "null")
			mknull(t, p)
			symlink(t, p, filepath.Join(dir, "link"))
			return filepath.Join(dir, "link"), ""
		}},
		{name: "directory", err: "is a directory", setup: func(t *testing.T, dir string) (string, string) {
			return dir, ""
		}},
		{name: "link to a directory", err: "is a directory", setup: func(t *testing.T, dir string) (string, string) {
			symlink(t, dir, filepath.Join(dir, "link"))
			return filepath.Join(dir, "link"), ""
		}},
		{name: "socket", err: "is a socket", setup: func(t *testing.T, dir string) (string, string) {
			p := filepath.Join(dir, "sock")
			l, err := net.Listen("unix", p)
			if err != nil {
				t.Skipf("unix socket: %v", err)
			}
			t.Cleanup(func() { l.Close() })
			return p, ""
		}},
		{name: "missing directory", err: "no such file or directory", setup: func(t *testing.T, dir string) (string, string) {
			return filepath.Join(dir, "missing", "x.jsonl"), ""
		}},
		{name: "dangling link into a missing directory", err: "no such file or directory", setup: func(t *testing.T, dir string) (string, string) {
			symlink(t, filepath.Join(dir, "missing", "x.jsonl"), filepath.Join(dir, "link"))
			return filepath.Join(dir, "link"), ""
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path, dest := tc.setup(t, dir)
			before := lstatAll(t, dir)
			target, err := checkOutFile("--out", path)
			if tc.err != "" {
				if err == nil || exitCode(err) != 2 || !strings.HasPrefix(err.Error(), "--out "+path) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v (exit %d), want exit 2, \"--out %s…: …%s\"", err, exitCode(err), path, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got <-chan string
			if tc.fifo {
				got = readFIFO(t, dest)
			}
			if err := writeOutFile(context.Background(), target, []byte(data)); err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.fifo:
				if s := fromFIFO(t, got); s != data {
					t.Errorf("the FIFO's reader got %q, want %q", s, data)
				}
			case dest != "":
				if b, err := os.ReadFile(dest); err != nil || string(b) != data {
					t.Errorf("%s holds %q (%v), want %q", dest, b, err, data)
				}
				if st, err := os.Stat(dest); err != nil || st.Mode().Perm() != filePerm {
					t.Errorf("%s: mode %v (%v), want %v", dest, st.Mode(), err, fs.FileMode(filePerm))
				}
			}
			// Nothing else changed type: links are links, a FIFO a FIFO,
			// and no temporary file is left.
			after := lstatAll(t, dir)
			for name, m := range before {
				if after[name] != m {
					t.Errorf("%s was %v, now %v", name, m, after[name])
				}
			}
			for name := range after {
				if _, ok := before[name]; !ok && filepath.Join(dir, name) != dest {
					t.Errorf("%s left behind", name)
				}
			}
		})
	}
}

// TestOutFileAbort: an aborted output leaves the path as it was and no
// temporary file.
func TestOutFileAbort(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x.jsonl")
	writeFile(t, p, "old\n")
	target, err := checkOutFile("--out", p)
	if err != nil {
		t.Fatal(err)
	}
	f, err := target.create(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("half a fi")); err != nil {
		t.Fatal(err)
	}
	f.Abort()
	if b, err := os.ReadFile(p); err != nil || string(b) != "old\n" {
		t.Fatalf("after Abort %s holds %q (%v)", p, b, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("after Abort the directory holds %v", entries)
	}
}

// TestOutFileFIFOWithoutReader: opening a FIFO nobody reads waits, and the
// context's end abandons the wait.
func TestOutFileFIFOWithoutReader(t *testing.T) {
	p := filepath.Join(t.TempDir(), "fifo")
	mkfifo(t, p)
	target, err := checkOutFile("--out", p)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := target.create(ctx); err != context.Canceled {
		t.Fatalf("create on a cancelled context: %v", err)
	}
	// Let the abandoned open return (it closes what it opened).
	if f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
		f.Close()
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, oldname, newname string) {
	t.Helper()
	if err := os.Symlink(oldname, newname); err != nil {
		t.Fatal(err)
	}
}

// lstatAll maps every path under dir (relative) to its type.
func lstatAll(t *testing.T, dir string) map[string]fs.FileMode {
	t.Helper()
	m := map[string]fs.FileMode{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		m[rel] = d.Type()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestOutFileFlags: trace synth and convert write --out through a FIFO or
// a symbolic link without replacing either, leave a device a device (one
// made like /dev/null in a temporary directory), and
// refuse a directory (exit 2, naming --out and the path) before writing;
// calibrate refuses a directory --out before fitting anything.
func TestOutFileFlags(t *testing.T) {
	verbs := []struct {
		name string
		args []string
	}{
		{"synth", []string{"trace", "synth", "--preset", "chat", "--sessions", "2"}},
		{"convert", []string{"trace", "convert", filepath.Join(traceFixtures, "mooncake.jsonl")}},
	}
	for _, v := range verbs {
		t.Run(v.name+"/FIFO", func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "fifo")
			mkfifo(t, p)
			got := readFIFO(t, p)
			if _, _, err := runCLI(t, append(v.args, "--out", p)...); err != nil {
				t.Fatal(err)
			}
			if s := fromFIFO(t, got); !strings.HasPrefix(s, `{"custom_id":"req-`) {
				t.Errorf("the FIFO's reader got %.80q", s)
			}
			if st, err := os.Lstat(p); err != nil || st.Mode()&fs.ModeNamedPipe == 0 {
				t.Errorf("%s is no longer a FIFO: %v %v", p, st.Mode(), err)
			}
		})
		t.Run(v.name+"/link", func(t *testing.T) {
			dir := t.TempDir()
			target, link := filepath.Join(dir, "target.jsonl"), filepath.Join(dir, "link.jsonl")
			writeFile(t, target, "old\n")
			symlink(t, "target.jsonl", link)
			if _, _, err := runCLI(t, append(v.args, "--out", link)...); err != nil {
				t.Fatal(err)
			}
			if dest, err := os.Readlink(link); err != nil || dest != "target.jsonl" {
				t.Errorf("the link now %q (%v)", dest, err)
			}
			if b, err := os.ReadFile(target); err != nil || !strings.HasPrefix(string(b), `{"custom_id":"req-`) {
				t.Errorf("the link's target holds %.80q (%v)", b, err)
			}
		})
		t.Run(v.name+"/device", func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "null")
			mknull(t, p)
			if _, _, err := runCLI(t, append(v.args, "--out", p)...); err != nil {
				t.Fatal(err)
			}
			isCharDevice(t, p)
		})
		t.Run(v.name+"/directory", func(t *testing.T) {
			dir := t.TempDir()
			_, _, err := runCLI(t, append(v.args, "--out", dir)...)
			if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), "--out "+dir+": is a directory") {
				t.Fatalf("err %v (exit %d)", err, exitCode(err))
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("left in the directory: %v", entries)
			}
		})
	}
	dir := t.TempDir()
	_, _, err := runCLI(t, "calibrate", resultsDirs.codegen, "--out", dir, "--budget", "2", "--quiet")
	if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), "--out "+dir+": is a directory") {
		t.Fatalf("calibrate --out DIR: err %v (exit %d)", err, exitCode(err))
	}
}
