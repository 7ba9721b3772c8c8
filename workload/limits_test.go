package workload

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// endless is an input that never ends (like /dev/zero): fill repeated. It
// fails once it has served budget bytes, so that a reader that does not
// stop at its limit fails the test instead of exhausting memory.
type endless struct {
	head   string // served first
	fill   byte
	served int
	budget int
}

var errBudget = errors.New("test input exhausted: the reader buffered past its limit")

func (e *endless) Read(p []byte) (int, error) {
	if e.served >= e.budget {
		return 0, errBudget
	}
	p = p[:min(len(p), e.budget-e.served)]
	n := 0
	if e.served < len(e.head) {
		n = copy(p, e.head[e.served:])
	}
	for i := n; i < len(p); i++ {
		p[i] = e.fill
	}
	e.served += len(p)
	return len(p), nil
}

// TestLineLimit: a line (CSV record, ShareGPT conversation) longer than
// Options.MaxLineBytes stops reading with a file:line error naming the
// limit; one at the limit is read. Every reader of trace input is covered,
// and none buffers much more than the limit of an input that never ends.
func TestLineLimit(t *testing.T) {
	const limit = 1000
	padWith := func(c, prefix, suffix string, n int) string {
		return prefix + strings.Repeat(c, n-len(prefix)-len(suffix)) + suffix
	}
	pad := func(prefix, suffix string, n int) string { return padWith("x", prefix, suffix, n) }
	mooncake := `{"timestamp": 0, "input_length": 10, "output_length": 5, "hash_ids": [0]}`
	alibaba := `{"chat_id": 1, "parent_chat_id": -1, "timestamp": 0, "input_length": 10, "output_length": 5, "hash_ids": [0]}`
	openai := `{"model": "m", "prompt": "hello", "max_tokens": 3}`
	conv := `{"conversations": [{"from": "human", "value": "hi"}]}`
	azureHead := "TIMESTAMP,ContextTokens,GeneratedTokens\n"
	tests := []struct {
		name   string
		format Format
		data   string // the limit+1 line is line 2 (line 1 of ShareGPT's array)
		want   string
		atCap  string // valid input whose longest line is exactly at the limit
		n      int    // requests in atCap
	}{
		{"mooncake", FormatMooncake,
			mooncake + "\n" + pad(`{"timestamp": 1, "input_length": 10, "output_length": 5, "hash_ids": [0], "x": "`, `"}`, limit+1) + "\n",
			"t:2: line longer than the limit of 1000 bytes (not a trace file?)",
			mooncake + "\n" + pad(`{"timestamp": 1, "input_length": 10, "output_length": 5, "hash_ids": [0], "x": "`, `"}`, limit) + "\r\n", 2},
		{"alibaba", FormatAlibaba,
			alibaba + "\n" + pad(`{"chat_id": 2, "parent_chat_id": -1, "timestamp": 0, "input_length": 10, "output_length": 5, "hash_ids": [0], "x": "`, `"}`, limit+1),
			"t:2: line longer than the limit of 1000 bytes (not a trace file?)",
			alibaba + "\n" + pad(`{"chat_id": 2, "parent_chat_id": -1, "timestamp": 0, "input_length": 10, "output_length": 5, "hash_ids": [0], "x": "`, `"}`, limit), 2},
		{"openai", FormatOpenAI,
			openai + "\n" + pad(`{"model": "m", "prompt": "`, `"}`, limit+1) + "\n",
			"t:2: line longer than the limit of 1000 bytes (not a trace file?)",
			openai + "\n" + pad(`{"model": "m", "prompt": "`, `"}`, limit) + "\n", 2},
		{"sharegpt array", FormatShareGPT,
			"[" + conv + ",\n" + pad(`{"conversations": [{"from": "human", "value": "`, `"}]}`, limit+1) + "]\n",
			"t:2: JSON value longer than the limit of 1000 bytes (not a trace file?)",
			"[" + conv + "," + pad(`{"conversations": [{"from": "human", "value": "`, `"}]}`, limit-1) + "]\n", 2},
		{"sharegpt jsonl", FormatShareGPT,
			conv + "\n" + pad(`{"conversations": [{"from": "human", "value": "`, `"}]}`, limit+1) + "\n",
			"t:2: JSON value longer than the limit of 1000 bytes (not a trace file?)",
			conv + pad(`{"conversations": [{"from": "human", "value": "`, `"}]}`, limit) + "\n", 2},
		{"sharegpt whitespace", FormatShareGPT,
			"[" + conv + "," + strings.Repeat("\n", limit+1) + conv + "]",
			"t:1001: JSON value longer than the limit of 1000 bytes (not a trace file?)",
			"[" + conv + "," + strings.Repeat("\n", limit-len(conv)-1) + conv + "]", 2},
		{"azure", FormatAzure,
			azureHead + "0,10,1\n" + pad("1,10,1", "", limit+1) + "\n",
			"t:3: CSV record longer than the limit of 1000 bytes (not a trace file?)",
			azureHead + "0,10,1\n" + padWith(" ", "1,10,", "1", limit) + "\n", 2},
		{"azure header", FormatAzure,
			pad(azureHead[:len(azureHead)-1]+",", "", limit+1) + "\n0,10,1\n",
			"t:1: header: CSV record longer than the limit of 1000 bytes (not a trace file?)",
			pad(azureHead[:len(azureHead)-1]+",", "", limit) + "\n0,10,1,z\n", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := Options{Format: tt.format, MaxLineBytes: limit}
			for _, skip := range []bool{false, true} {
				o.SkipInvalid = skip // not skippable: the rest of the input is lost
				if err := firstError(t, "t", tt.data, o); err == nil || err.Error() != tt.want || !IsInputError(err) {
					t.Errorf("skip %v: error %v\nwant  %s", skip, err, tt.want)
				}
			}
			o.SkipInvalid = false
			if got := readAll(t, "t", tt.atCap, o); len(got) != tt.n {
				t.Errorf("at the limit: %d requests, want %d", len(got), tt.n)
			}
		})
	}
}

// TestLineLimitEndless: an input that never ends a line (/dev/zero, or
// a never-ending value) is refused after about the limit, in every format,
// and memory stays bounded: the input's budget of 4 MiB is never reached.
func TestLineLimitEndless(t *testing.T) {
	const limit = 64 << 10
	for _, tt := range []struct {
		format Format
		head   string
		fill   byte
		want   string
	}{
		{FormatMooncake, "", 0, "t:1: line longer than the limit of 64 KiB"},
		{FormatAlibaba, `{"chat_id": 1, "x": "`, 'a', "t:1: line longer than the limit of 64 KiB"},
		{FormatOpenAI, "\n\n", 0, "t:3: line longer than the limit of 64 KiB"},
		{FormatShareGPT, `[{"conversations": [{"from": "human", "value": "`, 'a', "t:1: JSON value longer than the limit of 64 KiB"},
		{FormatShareGPT, "[", ' ', "t:1: JSON value longer than the limit of 64 KiB"},
		{FormatShareGPT, "", '\n', "t:65538: JSON value longer than the limit of 64 KiB"},
		{FormatAzure, "", 0, "t:1: header: CSV record longer than the limit of 64 KiB"},
		{FormatAzure, "TIMESTAMP,ContextTokens,GeneratedTokens\n\"", '\n', "t:2: CSV record longer than the limit of 64 KiB"},
	} {
		in := &endless{head: tt.head, fill: tt.fill, budget: 4 << 20}
		s, err := NewSource(in, "t", opts(Options{Format: tt.format, MaxLineBytes: limit}))
		if err == nil {
			_, err = s.Next()
		}
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) || errors.Is(err, errBudget) {
			t.Errorf("%s %q+%q...: error %v\nwant  %s", tt.format, tt.head, tt.fill, err, tt.want)
		}
		if in.served > 2*limit+256<<10 {
			t.Errorf("%s %q+%q...: read %d bytes for a limit of %d", tt.format, tt.head, tt.fill, in.served, limit)
		}
	}
}

// TestConfigLimit: a synthesizer spec or an inference-perf config is read
// whole up to 1 MiB and refused past it, from a file, a reader or a
// device that never ends.
func TestConfigLimit(t *testing.T) {
	dir := t.TempDir()
	want := ": larger than 1 MiB, the limit of a config file (not a workload spec or inference-perf config?)"
	for _, size := range []int{maxConfigBytes, maxConfigBytes + 1} {
		path := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(path, bytes.Repeat([]byte("#"), size), 0o644); err != nil {
			t.Fatal(err)
		}
		data, err := ReadConfigFile(path)
		if size <= maxConfigBytes && (err != nil || len(data) != size) {
			t.Errorf("%d bytes: %d read, error %v", size, len(data), err)
		}
		if size > maxConfigBytes && (err == nil || err.Error() != path+want || !IsInputError(err)) {
			t.Errorf("%d bytes: error %v", size, err)
		}
	}
	in := &endless{fill: '#', budget: 4 << 20}
	_, err := NewSource(in, "x.yaml", opts(Options{Format: FormatInferencePerf}))
	if err == nil || err.Error() != "x.yaml"+want || in.served > maxConfigBytes+64<<10 {
		t.Errorf("endless config: error %v after %d bytes", err, in.served)
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		_, err := Open(InferencePerfPrefix+"/dev/zero", opts(Options{}))
		if err == nil || err.Error() != "/dev/zero"+want {
			t.Errorf("/dev/zero: error %v", err)
		}
		if _, err := ReadConfigFile("/dev/zero"); err == nil || err.Error() != "/dev/zero"+want {
			t.Errorf("/dev/zero: error %v", err)
		}
	}
}

// TestLineLimitOption: the limit must be positive.
func TestLineLimitOption(t *testing.T) {
	_, err := NewSource(bytes.NewReader(nil), "t", opts(Options{MaxLineBytes: -1}))
	if err == nil || err.Error() != "t: max line bytes -1: must be > 0" {
		t.Errorf("error %v", err)
	}
	if got := formatBytes(256 << 20); got != "256 MiB" {
		t.Errorf("formatBytes = %q", got)
	}
	var _ io.Reader = (*endless)(nil)
}
