package sweep

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/eppsim/eppsim/scenario"
)

// Output file names of a sweep directory.
const (
	LogFile    = "points.jsonl"
	PointsFile = "points.csv"
	BestFile   = "best.yaml"
	SweepFile  = "sweep.json"
)

// logFormat identifies the points file's header line.
const logFormat = "eppsim-sweep-points/1"

// logHeader is the first line of points.jsonl.
type logHeader struct {
	Format string `json:"format"`
	Hash   string `json:"hash"`
	// Objectives and Constraints are those of the command that created
	// the file (merge uses them unless told otherwise).
	Objectives  []string `json:"objectives"`
	Constraints []string `json:"constraints,omitempty"`
	Spec        SpecDoc  `json:"spec"`
}

// Record is one finished point as points.jsonl stores it: its values and
// either the run summary (without its config and wall-clock fields) or
// the error that stopped it.
type Record struct {
	Index   int             `json:"index"`
	Values  []string        `json:"values"`
	Summary json.RawMessage `json:"summary,omitempty"`
	Error   string          `json:"error,omitempty"`
}

// readLog reads a points file. A last line cut short by an interruption
// is dropped (validLen is where the intact part ends); later records of an
// index already seen are ignored.
func readLog(path string) (h *logHeader, recs []Record, validLen int64, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, 0, err
	}
	seen := map[int]bool{}
	validLen, err = ScanLines(data, func(line int, text []byte) error {
		if line == 1 {
			h = &logHeader{}
			if err := json.Unmarshal(text, h); err != nil || h.Format != logFormat {
				return fmt.Errorf("%s:1: not an eppsim sweep points file (want a %q header)", path, logFormat)
			}
			return nil
		}
		var r Record
		if err := json.Unmarshal(text, &r); err != nil {
			return fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if r.Index < 0 || r.Index >= h.Spec.Points || len(r.Values) != len(h.Spec.Dims) {
			return fmt.Errorf("%s:%d: point %d does not belong to this sweep", path, line, r.Index)
		}
		if !seen[r.Index] {
			seen[r.Index] = true
			recs = append(recs, r)
		}
		return nil
	})
	if err != nil {
		return nil, nil, 0, err
	}
	if h == nil {
		return nil, nil, 0, fmt.Errorf("%s: empty points file", path)
	}
	slices.SortFunc(recs, func(a, b Record) int { return a.Index - b.Index })
	return h, recs, validLen, nil
}

// ScanLines calls fn on every complete line of a resumable log (numbered
// from 1; blank lines after the first are skipped) and returns the length
// of the intact part: a last line without its newline was being written
// when the writer stopped, and is left out. The first error fn returns
// ends the scan.
func ScanLines(data []byte, fn func(line int, text []byte) error) (validLen int64, err error) {
	line := 0
	for off := 0; off < len(data); {
		end := bytes.IndexByte(data[off:], '\n')
		if end < 0 {
			break
		}
		text := data[off : off+end]
		line++
		if line == 1 || len(bytes.TrimSpace(text)) > 0 {
			if err := fn(line, text); err != nil {
				return 0, err
			}
		}
		off += end + 1
		validLen = int64(off)
	}
	return validLen, nil
}

// pointLog appends records to points.jsonl, one flushed line each.
type pointLog struct {
	f    *os.File
	path string
}

// openLog opens dir's points file for appending, creating it with header
// h, or checks that the existing one is the same sweep and returns its
// records.
func openLog(dir string, h *logHeader) (*pointLog, []Record, error) {
	path := filepath.Join(dir, LogFile)
	old, recs, validLen, err := readLog(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return nil, nil, fmt.Errorf("--out: %w", err)
		}
		l := &pointLog{f: f, path: path}
		if err := l.write(h); err != nil {
			f.Close()
			return nil, nil, err
		}
		return l, nil, nil
	case err != nil:
		// Not a points file of a sweep, or a broken one: the --out
		// given is the problem (an input error).
		return nil, nil, &scenario.InputError{Err: fmt.Errorf("--out: %w", err)}
	}
	if old.Hash != h.Hash {
		return nil, nil, &scenario.InputError{Err: fmt.Errorf("--out %s holds a different sweep (%s hash %.12s…, this command %.12s…): "+
			"the trace, fleet, environment, base config or --vary/--random values differ; use another --out directory or remove it",
			dir, LogFile, old.Hash, h.Hash)}
	}
	if err := os.Truncate(path, validLen); err != nil {
		return nil, nil, fmt.Errorf("--out: dropping the interrupted last line of %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("--out: %w", err)
	}
	return &pointLog{f: f, path: path}, recs, nil
}

// write appends v as one JSON line and flushes it to disk.
func (l *pointLog) write(v any) error { return AppendJSONLine(l.f, l.path, v) }

// AppendJSONLine appends v to f (the file at path, named in errors) as one
// JSON line and flushes it to disk: a resumable log's record (points.jsonl,
// capacity's runs.jsonl), on disk before the next is written.
func AppendJSONLine(f *os.File, path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func (l *pointLog) close() error { return l.f.Close() }

// writeLog writes a complete points file (header and records in order)
// under a temporary name and renames it into place.
func writeLog(dir string, h *logHeader, recs []Record) error {
	var b bytes.Buffer
	for i, v := range append([]any{h}, recordsAny(recs)...) {
		line, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("%s line %d: %w", LogFile, i+1, err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return writeAtomic(dir, LogFile, b.Bytes())
}

func recordsAny(recs []Record) []any {
	out := make([]any, len(recs))
	for i := range recs {
		out[i] = &recs[i]
	}
	return out
}

// writeAtomic writes data to dir/name through a temporary file in dir.
func writeAtomic(dir, name string, data []byte) error {
	f, err := os.CreateTemp(dir, "."+name+".*.tmp")
	if err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	_, werr := f.Write(data)
	perr := f.Chmod(0o644)
	cerr := f.Close()
	if err := errors.Join(werr, perr, cerr); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("writing %s: %w", filepath.Join(dir, name), err)
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, name)); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("writing %s: %w", filepath.Join(dir, name), err)
	}
	return nil
}
