package workload

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

// maxLineBytes is the default of Options.MaxLineBytes: the most one input
// line may hold (a ShareGPT conversation or an OpenAI request with a long
// history can be large; nothing legitimate is this big).
const maxLineBytes = 256 << 20

var errLineTooLong = errors.New("line too long")

// overLimit words the error for input (a "line", a "CSV record", a
// "conversation") longer than the limit of n bytes (Options.MaxLineBytes).
func overLimit(what string, n int) string {
	return fmt.Sprintf("%s longer than the limit of %s (not a trace file?)", what, formatBytes(n))
}

// formatBytes renders n bytes as "256 MiB", "64 KiB" or "1000 bytes".
func formatBytes(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// utf8BOM is the byte order mark some editors write at the start of a UTF-8
// file; it is not part of the content.
const utf8BOM = "\xef\xbb\xbf"

// skipBOM drops a leading byte order mark from br: a check of the first
// three bytes, once per input.
func skipBOM(br *bufio.Reader) {
	if b, _ := br.Peek(len(utf8BOM)); string(b) == utf8BOM {
		br.Discard(len(utf8BOM)) // buffered by Peek: cannot fail
	}
}

// lineReader yields lines without their terminator ("\n" or "\r\n"),
// counting them. A line longer than limit bytes is errLineTooLong (and
// at most limit + 64 KiB of it is buffered). The returned slice is valid
// until the next call.
type lineReader struct {
	r     *bufio.Reader
	line  int
	limit int
	buf   []byte
}

func newLineReader(r io.Reader, limit int) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10), limit: limit}
}

func (lr *lineReader) next() ([]byte, error) {
	lr.buf = lr.buf[:0]
	for {
		chunk, err := lr.r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			lr.buf = append(lr.buf, chunk...)
			if len(lr.buf) > lr.limit+1 { // +1: a "\r" that may end the line
				lr.line++
				return nil, errLineTooLong
			}
			continue
		}
		var line []byte
		if len(lr.buf) > 0 {
			lr.buf = append(lr.buf, chunk...)
			line = lr.buf
		} else {
			line = chunk
		}
		if err == io.EOF {
			if len(line) == 0 {
				return nil, io.EOF
			}
		} else if err != nil {
			return nil, err
		}
		lr.line++
		line = bytes.TrimSuffix(line, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) > lr.limit {
			return nil, errLineTooLong
		}
		return line, nil
	}
}

// ReadConfigFile reads a file a workload is made from, a synthesizer spec
// or an inference-perf config: at most 1 MiB, so that a device or a pipe
// that never ends is refused (an *InputError) instead of read into memory
// whole.
func ReadConfigFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	defer f.Close()
	return readConfig(f, path, maxConfigBytes)
}

// readConfig reads r whole, if it holds at most limit bytes.
func readConfig(r io.Reader, name string, limit int) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(data) > limit {
		return nil, &InputError{File: name, Msg: fmt.Sprintf("larger than %s, the limit of a config file (not a workload spec or inference-perf config?)", formatBytes(limit))}
	}
	return data, nil
}

// parseTime parses a non-negative decimal number of units (a JSON number such
// as "1234", "12.5" or "1.5e3") into ns, exactly for plain decimals with up to
// 9 fractional digits of ns.
func parseTime(s string, unit int64) (int64, error) {
	if s == "" {
		return 0, errors.New("empty number")
	}
	if rest, ok := strings.CutPrefix(s, "-"); ok {
		if v, err := parseTime(rest, unit); err != nil || v != 0 {
			return 0, fmt.Errorf("negative value %s", s)
		}
		return 0, nil // -0
	}
	if !strings.ContainsAny(s, "eE") {
		intPart, frac, _ := strings.Cut(s, ".")
		i, err := strconv.ParseInt(intPart, 10, 64)
		if err != nil || i > math.MaxInt64/unit {
			return 0, fmt.Errorf("bad or out-of-range number %s", s)
		}
		ns := i * unit
		if frac != "" {
			// frac digits of `unit` ns: value = frac / 10^len(frac) * unit.
			var num, den int64 = 0, 1
			for j := 0; j < len(frac); j++ {
				c := frac[j]
				if c < '0' || c > '9' {
					return 0, fmt.Errorf("bad number %s", s)
				}
				if den < 1e12 {
					num = num*10 + int64(c-'0')
					den *= 10
				}
			}
			// num/den < 1 and unit <= 1e9 keep num*unit in range.
			ns += num * (unit / gcd(unit, den)) / (den / gcd(unit, den))
		}
		return ns, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f*float64(unit) > math.MaxInt64/2 {
		return 0, fmt.Errorf("bad or out-of-range number %s", s)
	}
	return int64(math.Round(f * float64(unit))), nil
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// formatMillis renders ns as decimal milliseconds, exactly ("1500.000001").
func formatMillis(ns int64) string {
	ms, rem := ns/1e6, ns%1e6
	if rem == 0 {
		return strconv.FormatInt(ms, 10)
	}
	s := fmt.Sprintf("%d.%06d", ms, rem)
	return strings.TrimRight(s, "0")
}

// jsonNumber returns the text of a raw JSON number, or an error for any other
// JSON value.
func jsonNumber(raw []byte) (string, error) {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return "", errors.New("missing")
	}
	if c := s[0]; c != '-' && (c < '0' || c > '9') {
		return "", fmt.Errorf("expected a number, got %s", s)
	}
	return s, nil
}
