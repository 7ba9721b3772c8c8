package capacity

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
)

// ReadResult reads a capacity.json.
func ReadResult(path string) (*Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

// Merge joins the results of a sharded search (--shard I/N): they must
// answer the same question, and together hold every configuration once
// unless partial.
func Merge(parts []*Result, partial bool) (*Result, error) {
	if len(parts) == 0 {
		return nil, fmt.Errorf("merge: no result to merge")
	}
	out := *parts[0]
	out.Shard, out.Configs, out.Stats = "", nil, Stats{}
	base := out
	seen := map[int]bool{}
	for i, p := range parts {
		q := *p
		q.Shard, q.Configs, q.Stats = "", nil, Stats{}
		if !reflect.DeepEqual(q, base) {
			return nil, fmt.Errorf("merge: result %d (shard %s) answers another question than result 0 (question, SLO, rate, fleet, seeds, tolerance, early stop and the traffic's rate must be equal)", i, p.Shard)
		}
		for _, c := range p.Configs {
			if seen[c.Index] {
				return nil, fmt.Errorf("merge: configuration %d (%s) is in two results", c.Index, c.Name)
			}
			seen[c.Index] = true
			out.Configs = append(out.Configs, c)
		}
		out.Stats.Full += p.Stats.Full
		out.Stats.Stopped += p.Stats.Stopped
		out.Stats.Requests += p.Stats.Requests
		out.Stats.Skipped += p.Stats.Skipped
	}
	if !partial {
		for i := range out.TotalConfigs {
			if !seen[i] {
				return nil, fmt.Errorf("merge: configuration %d of %d is in no result (a shard is missing; --allow-partial writes what there is)", i, out.TotalConfigs)
			}
		}
	}
	slices.SortFunc(out.Configs, func(a, b Config) int { return a.Index - b.Index })
	return &out, nil
}
