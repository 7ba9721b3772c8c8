package sweep

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// MergeOptions control Merge.
type MergeOptions struct {
	// Objectives and Constraints override those recorded in the shards'
	// points files (which must then agree).
	Objectives  []Objective
	Constraints []Constraint
	// AllowPartial writes the result even when points are missing.
	AllowPartial bool
	DPI          int
}

// Merge combines the points files of shard directories into out: the
// merged points.jsonl (sorted by index) and the same points.csv, best.yaml,
// sweep.json and plots an unsharded run of the sweep writes. Every
// directory must hold the same sweep (equal hashes); a point present in
// several must have the same result in each.
func Merge(dirs []string, out string, opts MergeOptions) (*Results, error) {
	if len(dirs) == 0 {
		return nil, errors.New("sweep merge: no shard directories")
	}
	if out == "" {
		return nil, errors.New("--out: merge needs an output directory")
	}
	var h *logHeader
	byIndex := map[int]Record{}
	for _, dir := range dirs {
		hd, recs, _, err := readLog(filepath.Join(dir, LogFile))
		if err != nil {
			return nil, fmt.Errorf("sweep merge: %w", err)
		}
		if h == nil {
			h = hd
		} else {
			if hd.Hash != h.Hash {
				return nil, fmt.Errorf("sweep merge: %s holds a different sweep than %s (hash %.12s… vs %.12s…)", dir, dirs[0], hd.Hash, h.Hash)
			}
			if len(opts.Objectives) == 0 && (!slices.Equal(hd.Objectives, h.Objectives) || !slices.Equal(hd.Constraints, h.Constraints)) {
				return nil, fmt.Errorf("sweep merge: %s and %s were run with different --objective/--constraint; give them to merge", dirs[0], dir)
			}
		}
		for _, r := range recs {
			if old, ok := byIndex[r.Index]; ok {
				if !sameRecord(old, r) {
					return nil, fmt.Errorf("sweep merge: point %d differs between shard directories (%s)", r.Index, dir)
				}
				continue
			}
			byIndex[r.Index] = r
		}
	}
	objs, cons := opts.Objectives, opts.Constraints
	if len(objs) == 0 {
		var err error
		if objs, err = ParseObjectives(h.Objectives); err != nil {
			return nil, fmt.Errorf("sweep merge: recorded objectives: %w", err)
		}
		if cons, err = ParseConstraints(h.Constraints); err != nil {
			return nil, fmt.Errorf("sweep merge: recorded constraints: %w", err)
		}
	}
	recs := make([]Record, 0, len(byIndex))
	for _, r := range byIndex {
		recs = append(recs, r)
	}
	slices.SortFunc(recs, func(a, b Record) int { return a.Index - b.Index })
	if missing := h.Spec.Points - len(recs); missing > 0 && !opts.AllowPartial {
		var first []string
		for i, k := 0, 0; i < h.Spec.Points && len(first) < 10; i++ {
			if k < len(recs) && recs[k].Index == i {
				k++
				continue
			}
			first = append(first, fmt.Sprint(i))
		}
		return nil, fmt.Errorf("sweep merge: %d of %d points missing (first: %s); merge every shard, finish the shards (re-run them to resume), or pass --allow-partial",
			missing, h.Spec.Points, strings.Join(first, ", "))
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, fmt.Errorf("--out: %w", err)
	}
	mh := *h
	mh.Objectives, mh.Constraints = nil, nil
	for _, o := range objs {
		mh.Objectives = append(mh.Objectives, o.String())
	}
	for _, c := range cons {
		mh.Constraints = append(mh.Constraints, c.String())
	}
	if err := writeLog(out, &mh, recs); err != nil {
		return nil, err
	}
	return finalize(out, &mh, recs, objs, cons, opts.DPI)
}

func sameRecord(a, b Record) bool {
	if a.Error != b.Error || !slices.Equal(a.Values, b.Values) {
		return false
	}
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a.Summary) != nil || json.Compact(&cb, b.Summary) != nil {
		return bytes.Equal(a.Summary, b.Summary)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}
