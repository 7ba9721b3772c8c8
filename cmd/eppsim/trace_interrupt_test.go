package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eppsim/eppsim/workload"
)

// TestTraceSynthInterrupted: SIGINT or SIGTERM stops a huge trace synth
// (issue #25 D2): the partial temporary file is removed, the exit code is
// 130 or 143, and the size warning came first, with its estimate.
func TestTraceSynthInterrupted(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(signalName(sig), func(t *testing.T) {
			dir := t.TempDir()
			cmd, _, stderr := startEppsim(t, "trace", "synth", "--sessions", "100000000", "--out", filepath.Join(dir, "x.jsonl"))
			waitForFiles(t, dir, 10*time.Second)
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			code, took := waitExit(t, cmd, 10*time.Second)
			if code != 128+int(sig) || !strings.Contains(stderr.String(), "interrupted by "+signalName(sig)) {
				t.Fatalf("exit %d after %v, stderr %q; want %d", code, took, stderr, 128+int(sig))
			}
			if !strings.Contains(stderr.String(), "warning: 100000000 sessions make about ") {
				t.Errorf("no size warning: %q", stderr)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("left behind: %v", entries)
			}
		})
	}
}

// TestTraceConvertInterrupted: a signal stops trace convert while it waits
// for more of its input (a FIFO whose writer has written part of a trace
// and neither writes more nor closes it), at once, and removes the
// partial output.
func TestTraceConvertInterrupted(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(signalName(sig), func(t *testing.T) {
			dir := t.TempDir()
			fifo := filepath.Join(dir, "in.jsonl")
			mkfifo(t, fifo)
			out := filepath.Join(dir, "out")
			if err := os.Mkdir(out, 0o755); err != nil {
				t.Fatal(err)
			}
			cmd, _, stderr := startEppsim(t, "trace", "convert", fifo, "--out", filepath.Join(out, "x.jsonl"))
			// More than the 64 KiB format detection reads, so that convert
			// starts writing, then nothing; the FIFO stays open.
			w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			writeMooncakeLines(t, w, 2000)
			waitForFiles(t, out, 10*time.Second)
			time.Sleep(200 * time.Millisecond) // convert has caught up with the writer
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			code, took := waitExit(t, cmd, 10*time.Second)
			if code != 128+int(sig) || !strings.Contains(stderr.String(), "interrupted by "+signalName(sig)) {
				t.Fatalf("exit %d after %v, stderr %q; want %d", code, took, stderr, 128+int(sig))
			}
			if took > 2*time.Second {
				t.Errorf("took %v to stop", took)
			}
			if entries, _ := os.ReadDir(out); len(entries) != 0 {
				t.Errorf("left behind: %v", entries)
			}
		})
	}
}

// TestSynthWarnSize: trace synth warns, with its estimate, before writing
// more than a few GB, and says nothing otherwise.
func TestSynthWarnSize(t *testing.T) {
	for _, tc := range []struct {
		preset   string
		sessions int
		want     string // "" for no warning
	}{
		{"chat", 300, ""},
		{"chat", 20, ""},
		{"chat", 10000, ""},
		{"chat", 100_000_000, "eppsim: warning: 100000000 sessions make about 2.1 TB of JSONL (21.2 kB per session, the mean of the first 20 synthesized alike)"},
		{"agentic", 10_000_000, "eppsim: warning: 10000000 sessions make about "},
	} {
		t.Run(fmt.Sprintf("%s-%d", tc.preset, tc.sessions), func(t *testing.T) {
			spec, err := workload.PresetSpec(tc.preset)
			if err != nil {
				t.Fatal(err)
			}
			spec.Sessions = tc.sessions
			var w bytes.Buffer
			if err := synthWarnSize(context.Background(), &w, spec, 1, workload.Options{Seed: 1}); err != nil {
				t.Fatal(err)
			}
			if got := w.String(); tc.want == "" && got != "" || !strings.HasPrefix(got, tc.want) {
				t.Errorf("warning %q, want %q", got, tc.want)
			}
		})
	}
}

// TestFormatBytes: decimal units, one decimal.
func TestFormatBytes(t *testing.T) {
	for n, want := range map[float64]string{0: "0 B", 999: "999 B", 1000: "1.0 kB", 21_200: "21.2 kB", 4e9: "4.0 GB", 2.12e12: "2.1 TB", 3e18: "3000.0 PB"} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%g) = %q, want %q", n, got, want)
		}
	}
}

// writeMooncakeLines writes n Mooncake trace lines to w (600-token prompts
// of 5 shared prefixes, 30-token outputs, one a second).
func writeMooncakeLines(t *testing.T, w io.Writer, n int) {
	t.Helper()
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, `{"timestamp": %d, "input_length": 600, "output_length": 30, "hash_ids": [%d, %d]}`+"\n", i, i%5, 100+i)
	}
	if _, err := w.Write(b.Bytes()); err != nil {
		t.Fatal(err)
	}
}
