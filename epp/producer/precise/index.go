package precise

import (
	"fmt"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Index is the in-memory KV-block index (spec §6.3–6.4; upstream
// kvblock.InMemoryIndex): request key → pod entries (each key's entries form
// an LRU of at most podCacheSize), plus the engine-key → request-keys mapping
// that KV events are resolved through. Both maps are LRUs bounded by size
// keys. Pods and tiers are interned to small integers.
//
// An Index is not safe for concurrent use; the simulator drives the EPP from
// one goroutine.
type Index struct {
	podCacheSize int
	data         *simplelru.LRU[uint64, *podCache]
	e2r          *simplelru.LRU[uint64, []uint64]

	podIDs    map[string]int32
	podNames  []string
	tierIDs   map[string]uint8
	tierNames []string
}

// entry is one PodEntry: pod, device tier, speculative flag. Speculative
// entries carry tier "" (upstream: no DeviceTier).
type entry struct {
	pod  int32
	tier uint8
	spec bool
}

// podCache holds one request key's entries, least recently added first.
type podCache struct {
	entries []entry
}

// Index defaults (upstream in_memory.go).
const (
	DefaultIndexSize    = 100_000_000
	DefaultPodCacheSize = 10
	// maxTiers bounds distinct device tiers (tier sets are 64-bit masks; one
	// bit is reserved for speculative entries).
	maxTiers = 63
)

// NewIndex returns an empty index holding at most size request keys
// (≤0 = DefaultIndexSize) with at most podCacheSize entries per key
// (≤0 = DefaultPodCacheSize).
func NewIndex(size, podCacheSize int) (*Index, error) {
	if size <= 0 {
		size = DefaultIndexSize
	}
	if podCacheSize <= 0 {
		podCacheSize = DefaultPodCacheSize
	}
	data, err := simplelru.NewLRU[uint64, *podCache](size, nil)
	if err != nil {
		return nil, fmt.Errorf("in-memory index: %w", err)
	}
	e2r, err := simplelru.NewLRU[uint64, []uint64](size, nil)
	if err != nil {
		return nil, fmt.Errorf("in-memory index engine map: %w", err)
	}
	return &Index{
		podCacheSize: podCacheSize,
		data:         data,
		e2r:          e2r,
		podIDs:       map[string]int32{},
		tierIDs:      map[string]uint8{},
	}, nil
}

func (ix *Index) podID(pod string) int32 {
	if id, ok := ix.podIDs[pod]; ok {
		return id
	}
	id := int32(len(ix.podNames))
	ix.podIDs[pod] = id
	ix.podNames = append(ix.podNames, pod)
	return id
}

func (ix *Index) tierID(tier string) (uint8, bool) {
	if id, ok := ix.tierIDs[tier]; ok {
		return id, true
	}
	if len(ix.tierNames) >= maxTiers {
		return 0, false
	}
	id := uint8(len(ix.tierNames))
	ix.tierIDs[tier] = id
	ix.tierNames = append(ix.tierNames, tier)
	return id, true
}

// makeEntry interns a PodEntry.
func (ix *Index) makeEntry(pod, tier string, spec bool) (entry, bool) {
	t, ok := ix.tierID(tier)
	if !ok {
		return entry{}, false
	}
	return entry{pod: ix.podID(pod), tier: t, spec: spec}, true
}

// engineToRequest maps engine keys to request keys by length ratio (1:1,
// many:1 or 1:many), as upstream engineToRequestMapping: for i < max(E, R),
// engine key i·E/n gets request key i·R/n appended. It calls fn once per
// distinct engine key, in order of first appearance.
func engineToRequest(engineKeys, requestKeys []uint64, fn func(ek uint64, rks []uint64)) {
	if len(engineKeys) == 0 || len(requestKeys) == 0 {
		return
	}
	n := max(len(engineKeys), len(requestKeys))
	mapping := make(map[uint64][]uint64, len(engineKeys))
	order := make([]uint64, 0, len(engineKeys))
	for i := range n {
		ek := engineKeys[i*len(engineKeys)/n]
		rk := requestKeys[i*len(requestKeys)/n]
		if _, ok := mapping[ek]; !ok {
			order = append(order, ek)
		}
		mapping[ek] = append(mapping[ek], rk)
	}
	for _, ek := range order {
		fn(ek, mapping[ek])
	}
}

// add stores entries under every request key and, when engineKeys is
// non-nil, the engine→request mapping (upstream InMemoryIndex.Add).
func (ix *Index) add(engineKeys, requestKeys []uint64, entries []entry) {
	if len(requestKeys) == 0 || len(entries) == 0 {
		return
	}
	if engineKeys != nil {
		engineToRequest(engineKeys, requestKeys, func(ek uint64, rks []uint64) { ix.e2r.Add(ek, rks) })
	}
	for _, rk := range requestKeys {
		pc, ok := ix.data.Get(rk)
		if !ok {
			pc = &podCache{}
			ix.data.Add(rk, pc)
		}
		pc.addAll(entries, ix.podCacheSize)
	}
}

// addAll inserts with LRU semantics: an existing entry moves to most recent,
// a new one appends, overflow drops the least recent.
func (pc *podCache) addAll(recs []entry, capacity int) {
	for _, rec := range recs {
		found := false
		for i := range pc.entries {
			if pc.entries[i] == rec {
				copy(pc.entries[i:], pc.entries[i+1:])
				pc.entries[len(pc.entries)-1] = rec
				found = true
				break
			}
		}
		if found {
			continue
		}
		if capacity > 0 && len(pc.entries) >= capacity {
			copy(pc.entries, pc.entries[1:])
			pc.entries[len(pc.entries)-1] = rec
			continue
		}
		pc.entries = append(pc.entries, rec)
	}
}

// removeAll deletes entries and reports whether the cache is now empty.
func (pc *podCache) removeAll(recs []entry) bool {
	for _, rec := range recs {
		for i := range pc.entries {
			if pc.entries[i] == rec {
				pc.entries = append(pc.entries[:i], pc.entries[i+1:]...)
				break
			}
		}
	}
	return len(pc.entries) == 0
}

// evictRequestKey removes entries from one request key, dropping the key
// when it empties. It reports whether the key still holds entries.
func (ix *Index) evictRequestKey(rk uint64, recs []entry) (remaining bool) {
	pc, ok := ix.data.Get(rk)
	if !ok || pc == nil {
		return false
	}
	if pc.removeAll(recs) {
		ix.data.Remove(rk)
		return false
	}
	return true
}

// evictEngineKey resolves an engine key and removes entries from its
// request keys; the mapping is dropped once all of them are empty.
func (ix *Index) evictEngineKey(ek uint64, recs []entry) {
	rks, ok := ix.e2r.Get(ek)
	if !ok {
		return
	}
	if len(rks) == 1 {
		// The common 1:1 mapping, without looking rk up twice: the check
		// below would find what evictRequestKey reports, and its Get would
		// not change the LRU order (rk is already the most recent key).
		if !ix.evictRequestKey(rks[0], recs) {
			ix.e2r.Remove(ek)
		}
		return
	}
	for _, rk := range rks {
		ix.evictRequestKey(rk, recs)
	}
	for _, rk := range rks {
		if pc, ok := ix.data.Get(rk); ok && pc != nil && len(pc.entries) > 0 {
			return
		}
	}
	ix.e2r.Remove(ek)
}

// requestKey returns the last request key an engine key maps to (the chain
// position a child block continues from).
func (ix *Index) requestKey(ek uint64) (uint64, bool) {
	rks, ok := ix.e2r.Get(ek)
	if !ok || len(rks) == 0 {
		return 0, false
	}
	return rks[len(rks)-1], true
}

// clearPod removes every entry of pod (all tiers, speculative included).
// The engine→request mapping is left as is, as upstream.
func (ix *Index) clearPod(pod string) {
	id, ok := ix.podIDs[pod]
	if !ok {
		return
	}
	for _, rk := range ix.data.Keys() {
		pc, ok := ix.data.Peek(rk)
		if !ok || pc == nil {
			continue
		}
		kept := pc.entries[:0]
		for _, e := range pc.entries {
			if e.pod != id {
				kept = append(kept, e)
			}
		}
		pc.entries = kept
		if len(kept) == 0 {
			ix.data.Remove(rk)
		}
	}
}

// Len is the number of request keys held.
func (ix *Index) Len() int { return ix.data.Len() }

// KeyEntries describes the entries of a request key, for tests and
// reporting: "pod@tier" strings, speculative ones suffixed "[speculative]",
// least recent first.
func (ix *Index) KeyEntries(rk uint64) []string {
	pc, ok := ix.data.Peek(rk)
	if !ok {
		return nil
	}
	out := make([]string, len(pc.entries))
	for i, e := range pc.entries {
		s := ix.podNames[e.pod] + "@" + ix.tierNames[e.tier]
		if e.spec {
			s += "[speculative]"
		}
		out[i] = s
	}
	return out
}
