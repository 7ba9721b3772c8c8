package workload

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// maxLineBytes bounds one input line (a ShareGPT conversation or an OpenAI
// request with a long history can be large; nothing legitimate is this big).
const maxLineBytes = 256 << 20

var errLineTooLong = errors.New("line too long")

// lineReader yields lines without their terminator ("\n" or "\r\n"),
// counting them. The returned slice is valid until the next call.
type lineReader struct {
	r    *bufio.Reader
	line int
	buf  []byte
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10)}
}

func (lr *lineReader) next() ([]byte, error) {
	lr.buf = lr.buf[:0]
	for {
		chunk, err := lr.r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			lr.buf = append(lr.buf, chunk...)
			if len(lr.buf) > maxLineBytes {
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
		return line, nil
	}
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
