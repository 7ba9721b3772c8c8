package capacity

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/eppsim/eppsim/scenario"
	"github.com/eppsim/eppsim/sweep"
)

// RunsFile is the resumable log of a search's simulations in its --out
// directory; in a shared search (Search.Share) each shard's log is
// SharedRunsFile(I, N) in the shared directory.
const RunsFile = "runs.jsonl"

// SharedRunsFile is shard I of N's run log in a shared directory.
func SharedRunsFile(i, n int) string { return fmt.Sprintf("runs-%d-of-%d.jsonl", i, n) }

// runsFormat identifies a run log's header line.
const runsFormat = "eppsim-capacity-runs/1"

// runsHeader is a run log's first line: the identity of the search whose
// simulations it records. A log whose hash differs belongs to another
// search and is never read into this one.
type runsHeader struct {
	Format string `json:"format"`
	Hash   string `json:"hash"`
}

// runKey names one simulation of a search: a configuration (its index),
// a point (the rate multiplier, or the fleet size of a replica search)
// and a seed. The search is deterministic, so a recorded run is the run
// that simulating the key again would give.
type runKey struct {
	Config int     `json:"config"`
	X      float64 `json:"x"`
	Seed   uint64  `json:"seed"`
}

// runRecord is one line after the header.
type runRecord struct {
	runKey
	Run Run `json:"run"`
}

// runLog appends a search's finished runs to its file and knows every run
// recorded so far, in its own file and (in a shared search) the other
// shards'.
type runLog struct {
	mu     sync.Mutex
	f      *os.File
	path   string
	hash   string
	others []string // the other shards' logs (shared search)
	runs   map[runKey]Run
}

// searchHash identifies a search: the traffic (sweep.TrafficDoc, the
// trace by content), the configurations (files by content), the question
// and its parameters, and the caller's Fingerprint.
func searchHash(s *Search) (string, error) {
	traffic, err := sweep.TrafficDoc(s.Spec)
	if err != nil {
		return "", err
	}
	type eppDoc struct {
		Name, Source, Release string
		SHA256                string `json:",omitempty"`
		DPLB                  any    `json:",omitempty"`
	}
	var epps []eppDoc
	for _, e := range s.EPPs {
		d := eppDoc{Name: e.Name, Source: e.Source, Release: e.Release, DPLB: e.DPLB}
		switch {
		case e.YAML != nil:
			sum := sha256.Sum256(e.YAML)
			d.SHA256, d.Source = hex.EncodeToString(sum[:]), ""
		case !scenario.IsBuiltin(e.Source):
			b, err := os.ReadFile(e.Source)
			if err != nil {
				return "", fmt.Errorf("--epp-config %s: %w", e.Source, err)
			}
			sum := sha256.Sum256(b)
			d.SHA256, d.Source = hex.EncodeToString(sum[:]), filepath.Base(e.Source)
		}
		epps = append(epps, d)
	}
	var slo []string
	for _, t := range s.SLO {
		slo = append(slo, t.Text)
	}
	doc := struct {
		Traffic                           sweep.SpecDoc
		EPPs                              []eppDoc
		SLO                               []string
		Rate, Tolerance, Start, MaxFactor float64
		MaxReplicas, Seeds, PerRound      int
		NoEarlyStop                       bool
		Fingerprint                       string
	}{traffic, epps, slo, s.Rate, s.Tolerance, s.Start, s.MaxFactor, s.MaxReplicas, s.Seeds, s.PointsPerRound, s.NoEarlyStop, s.Fingerprint}
	b, err := json.Marshal(&doc)
	if err != nil {
		return "", fmt.Errorf("capacity: identifying the search: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// openRunLog opens (or creates) the log at path for a search of hash h and
// reads what it and the others hold. A log of another search is an input
// error naming the file: fresh says to start over instead (the old log is
// replaced).
func openRunLog(path, h string, others []string, fresh bool) (*runLog, error) {
	l := &runLog{path: path, hash: h, others: others, runs: map[runKey]Run{}}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	if fresh {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	validLen, err := l.read(path, true)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return nil, err
		}
		l.f = f
		if err := l.writeLine(runsHeader{Format: runsFormat, Hash: h}); err != nil {
			f.Close()
			return nil, err
		}
	case err != nil:
		return nil, err
	default:
		// A line cut short by an interruption is dropped: that run is
		// simulated again.
		if err := os.Truncate(path, validLen); err != nil {
			return nil, fmt.Errorf("%s: dropping an interrupted last line: %w", path, err)
		}
		if l.f, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0); err != nil {
			return nil, err
		}
	}
	if err := l.refresh(); err != nil {
		l.close()
		return nil, err
	}
	return l, nil
}

// read adds the runs of the log at path and returns the length of its
// intact part. A header of another search is an error unless the file is
// another shard's that does not exist yet.
func (l *runLog) read(path string, own bool) (validLen int64, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	lines := 0
	validLen, err = sweep.ScanLines(data, func(line int, text []byte) error {
		lines = line
		if line == 1 {
			var h runsHeader
			if err := json.Unmarshal(text, &h); err != nil || h.Format != runsFormat {
				return &scenario.InputError{Err: fmt.Errorf("%s:1: not an eppsim capacity run log (want a %q header)", path, runsFormat)}
			}
			if h.Hash != l.hash {
				what := "--out"
				if len(l.others) > 0 || !own {
					what = "--share"
				}
				return &scenario.InputError{Err: fmt.Errorf("%s holds the runs of another search (hash %.12s…, this search %.12s…): "+
					"the traffic, fleet, configurations, SLO or search flags differ; use another %s directory, or --force to start over",
					path, h.Hash, l.hash, what)}
			}
			return nil
		}
		var r runRecord
		if err := json.Unmarshal(text, &r); err != nil {
			return &scenario.InputError{Err: fmt.Errorf("%s:%d: %w", path, line, err)}
		}
		if _, seen := l.runs[r.runKey]; !seen {
			l.runs[r.runKey] = r.Run
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if lines == 0 {
		// Empty, or a header cut short: nothing was recorded yet.
		return 0, fs.ErrNotExist
	}
	return validLen, nil
}

// refresh reads the other shards' logs again (those not yet written are
// skipped).
func (l *runLog) refresh() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.others {
		if _, err := l.read(p, false); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// lookup returns the recorded run of k.
func (l *runLog) lookup(k runKey) (Run, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.runs[k]
	return r, ok
}

// add records a finished run and appends it to the file, flushed.
func (l *runLog) add(k runKey, r Run) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs[k] = r
	return l.writeLine(runRecord{runKey: k, Run: r})
}

func (l *runLog) writeLine(v any) error { return sweep.AppendJSONLine(l.f, l.path, v) }

func (l *runLog) close() error {
	if l == nil || l.f == nil {
		return nil
	}
	return l.f.Close()
}
