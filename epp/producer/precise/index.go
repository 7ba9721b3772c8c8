package precise

import (
	"slices"

	"github.com/eppsim/eppsim/internal/blockmap"
	"github.com/eppsim/eppsim/internal/keylru"
)

// Index is the in-memory KV-block index (spec §6.3–6.4; upstream
// kvblock.InMemoryIndex): request key → pod entries (each key's entries form
// an LRU of at most podCacheSize), plus the engine-key → request-keys mapping
// that KV events are resolved through. Both maps are LRUs bounded by size
// keys (upstream: golang-lru; here keylru.LRU, which has the same semantics
// without a heap object per key). Pods and tiers are interned to small
// integers.
//
// A key's entries are kept inline in the LRU's value while there are at
// most inlineEntries of them (nearly always: a block is cached on few pods),
// and an engine key's request keys while there is one (always when the
// engine and the indexer hash blocks of the same size or the engine's are
// smaller); larger sets live in the spill maps, keyed like the LRU and
// dropped with their key.
//
// An Index is not safe for concurrent use; the simulator drives the EPP from
// one goroutine.
type Index struct {
	podCacheSize int
	data         *keylru.LRU[keyEntries]
	e2r          *keylru.LRU[engineMapping]
	moreEntries  map[uint64][]entry  // request key -> its entries, when more than inlineEntries
	moreKeys     map[uint64][]uint64 // engine key -> its request keys, when more than one
	scratch      []entry
	resolved     []uint64     // scratch of touchRemoval
	seen         blockmap.Map // scratch of engineToRequest
	// sink receives the words that the touch passes load (see
	// blockmap.Map.Touch).
	sink uint64

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

// inlineEntries is how many entries a request key keeps in its LRU value:
// three, so that a value fills half a cache line and never straddles two.
const inlineEntries = 3

// keyEntries holds a request key's entries, least recently added first:
// e[:n], or all of them in Index.moreEntries when n is spilled.
type keyEntries struct {
	e [inlineEntries]entry
	n uint8
	_ [7]byte
}

const spilled = 0xff

// engineMapping holds an engine key's request keys: first when n == 1, all
// of them in Index.moreKeys otherwise.
type engineMapping struct {
	first uint64
	n     uint32
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
	return &Index{
		podCacheSize: podCacheSize,
		data:         keylru.New[keyEntries](size),
		e2r:          keylru.New[engineMapping](size),
		moreEntries:  map[uint64][]entry{},
		moreKeys:     map[uint64][]uint64{},
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

// entries returns request key rk's entries, whose LRU value is v. The slice
// aliases the index's storage.
func (ix *Index) entries(rk uint64, v *keyEntries) []entry {
	if v.n == spilled {
		return ix.moreEntries[rk]
	}
	return v.e[:v.n]
}

// setEntries makes es request key rk's entries (v its LRU value); es is
// copied unless it is rk's spilled slice itself.
func (ix *Index) setEntries(rk uint64, v *keyEntries, es []entry) {
	if len(es) <= inlineEntries {
		if v.n == spilled {
			delete(ix.moreEntries, rk)
		}
		v.n = uint8(copy(v.e[:], es))
		return
	}
	if v.n != spilled {
		es = slices.Clone(es)
	}
	v.n = spilled
	ix.moreEntries[rk] = es
}

// dropKey forgets request key rk's spilled entries, if any (rk has left the
// LRU).
func (ix *Index) dropKey(rk uint64) { delete(ix.moreEntries, rk) }

// engineToRequest maps engine keys to request keys by length ratio (1:1,
// many:1 or 1:many), as upstream engineToRequestMapping: for i < max(E, R),
// engine key i·E/n gets request key i·R/n appended. It calls fn once per
// distinct engine key, in order of first appearance; rks may alias
// requestKeys. seen is scratch for the check of repeated engine keys.
//
// When the engine keys are distinct (as a chain of block hashes is), engine
// key j gets the request keys of the i with i·E/n == j: key j·R/E alone when
// E ≥ R, a run of requestKeys otherwise.
func engineToRequest(engineKeys, requestKeys []uint64, seen *blockmap.Map, fn func(ek uint64, rks []uint64)) {
	e, r := len(engineKeys), len(requestKeys)
	if e == 0 || r == 0 {
		return
	}
	if !distinct(engineKeys, seen) {
		engineToRequestGeneral(engineKeys, requestKeys, fn)
		return
	}
	for j, ek := range engineKeys {
		lo, hi := j*r/e, j*r/e+1
		if r > e {
			// The i with ⌊i·E/R⌋ == j: ⌈j·R/E⌉ ≤ i < ⌈(j+1)·R/E⌉.
			lo, hi = (j*r+e-1)/e, ((j+1)*r+e-1)/e
		}
		fn(ek, requestKeys[lo:hi])
	}
}

// distinct reports whether keys has no repeated value; seen is an empty
// set, left empty.
func distinct(keys []uint64, seen *blockmap.Map) bool {
	if len(keys) <= 8 {
		for i, k := range keys {
			if slices.Contains(keys[:i], k) {
				return false
			}
		}
		return true
	}
	unique := true
	for _, k := range keys {
		if v := seen.Ref(k); *v != 0 {
			unique = false
			break
		} else {
			*v = 1
		}
	}
	for _, k := range keys {
		if pos, ok := seen.Lookup(k); ok {
			seen.DeleteAt(pos)
		}
	}
	return unique
}

// engineToRequestGeneral is engineToRequest for engine keys that repeat:
// a repeated key collects the request keys of all its positions.
func engineToRequestGeneral(engineKeys, requestKeys []uint64, fn func(ek uint64, rks []uint64)) {
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

// mapEngineKey records ek → rks (upstream: engine-map LRU Add).
func (ix *Index) mapEngineKey(ek uint64, rks []uint64) {
	v, _, old, evicted := ix.e2r.Add(ek)
	if evicted {
		delete(ix.moreKeys, old)
	}
	if len(rks) == 1 {
		v.first, v.n = rks[0], 1
		delete(ix.moreKeys, ek)
		return
	}
	v.first, v.n = 0, uint32(len(rks))
	ix.moreKeys[ek] = slices.Clone(rks)
}

// unmapEngineKey drops ek's mapping.
func (ix *Index) unmapEngineKey(ek uint64) {
	ix.e2r.Remove(ek)
	delete(ix.moreKeys, ek)
}

// touchRemoval loads, one level at a time for all of an event's engine
// keys, the table entries that evicting them reads — their engine-map
// entries, then the request keys' entries — so that the cache misses of a
// long BlockRemoved overlap instead of stalling the evictions one by one.
// It changes nothing.
func (ix *Index) touchRemoval(engineKeys []uint64) {
	sink := ix.sink
	for _, ek := range engineKeys {
		sink ^= ix.e2r.Touch(ek)
	}
	rks := ix.resolved[:0]
	for _, ek := range engineKeys {
		if v, ok := ix.e2r.Peek(ek); ok && v.n == 1 {
			rks = append(rks, v.first)
		}
	}
	for _, rk := range rks {
		sink ^= ix.data.Touch(rk)
	}
	for _, rk := range rks {
		if v, ok := ix.data.Peek(rk); ok {
			sink ^= uint64(v.n)
		}
	}
	ix.resolved, ix.sink = rks, sink
}

// touchStore is touchRemoval for an add of these keys.
func (ix *Index) touchStore(engineKeys, requestKeys []uint64) {
	sink := ix.sink
	for _, ek := range engineKeys {
		sink ^= ix.e2r.Touch(ek)
	}
	for _, rk := range requestKeys {
		sink ^= ix.data.Touch(rk)
	}
	ix.sink = sink
}

// add stores entries under every request key and, when engineKeys is
// non-nil, the engine→request mapping (upstream InMemoryIndex.Add).
func (ix *Index) add(engineKeys, requestKeys []uint64, entries []entry) {
	if len(requestKeys) == 0 || len(entries) == 0 {
		return
	}
	ix.touchStore(engineKeys, requestKeys)
	if engineKeys != nil {
		engineToRequest(engineKeys, requestKeys, &ix.seen, ix.mapEngineKey)
	}
	for _, rk := range requestKeys {
		// Add refreshes a held key as Get would, and inserts a new one.
		v, _, old, evicted := ix.data.Add(rk)
		if evicted {
			ix.dropKey(old)
		}
		if len(entries) == 1 && v.n != spilled && ix.addInline(rk, v, entries[0]) {
			continue
		}
		es := ix.entries(rk, v)
		if v.n != spilled {
			es = append(ix.scratch[:0], es...)
		}
		es = addAll(es, entries, ix.podCacheSize)
		ix.setEntries(rk, v, es)
		if v.n != spilled {
			ix.scratch = es[:0]
		}
	}
}

// addInline is add's step for one entry on a key whose entries are
// inline: addAll and setEntries without a scratch copy, element by
// element. It reports false, changing nothing, when the entries would
// spill.
func (ix *Index) addInline(rk uint64, v *keyEntries, rec entry) bool {
	n := int(v.n)
	for i := range n {
		if v.e[i] == rec {
			// Present: moves to most recent.
			for j := i; j < n-1; j++ {
				v.e[j] = v.e[j+1]
			}
			v.e[n-1] = rec
			return true
		}
	}
	if n >= ix.podCacheSize {
		// Full: the least recent is dropped.
		for j := 0; j < n-1; j++ {
			v.e[j] = v.e[j+1]
		}
		v.e[n-1] = rec
		return true
	}
	if n < inlineEntries {
		v.e[n] = rec
		v.n = uint8(n + 1)
		return true
	}
	return false
}

// addAll inserts recs into es with LRU semantics — an existing entry moves
// to most recent, a new one appends, overflow drops the least recent — and
// returns the result.
func addAll(es, recs []entry, capacity int) []entry {
	for _, rec := range recs {
		if i := slices.Index(es, rec); i >= 0 {
			copy(es[i:], es[i+1:])
			es[len(es)-1] = rec
			continue
		}
		if capacity > 0 && len(es) >= capacity {
			copy(es, es[1:])
			es[len(es)-1] = rec
			continue
		}
		es = append(es, rec)
	}
	return es
}

// removeAll deletes recs from es and returns the result.
func removeAll(es, recs []entry) []entry {
	for _, rec := range recs {
		if i := slices.Index(es, rec); i >= 0 {
			es = append(es[:i], es[i+1:]...)
		}
	}
	return es
}

// evictRequestKey removes entries from one request key, dropping the key
// when it empties. It reports whether the key still holds entries.
//
// It looks rk up once: a key that empties is dropped without being made the
// most recent first (which its removal would undo), one that keeps entries
// is refreshed as Get would.
func (ix *Index) evictRequestKey(rk uint64, recs []entry) (remaining bool) {
	pos, ok := ix.data.Find(rk)
	if !ok {
		return false
	}
	v := ix.data.ValAt(pos)
	if len(recs) == 1 && v.n != spilled {
		// removeAll and setEntries in place, element by element.
		n, rec := int(v.n), recs[0]
		for i := range n {
			if v.e[i] == rec {
				for j := i; j < n-1; j++ {
					v.e[j] = v.e[j+1]
				}
				n--
				break
			}
		}
		if n == 0 {
			ix.data.RemoveAt(pos)
			return false
		}
		v.n = uint8(n)
		ix.data.RefreshAt(pos)
		return true
	}
	es := removeAll(ix.entries(rk, v), recs)
	if len(es) == 0 {
		ix.data.RemoveAt(pos)
		ix.dropKey(rk)
		return false
	}
	ix.data.RefreshAt(pos)
	ix.setEntries(rk, v, es)
	return true
}

// evictEngineKey resolves an engine key and removes entries from its
// request keys; the mapping is dropped once all of them are empty.
func (ix *Index) evictEngineKey(ek uint64, recs []entry) {
	pos, ok := ix.e2r.Find(ek)
	if !ok {
		return
	}
	if v := ix.e2r.ValAt(pos); v.n == 1 {
		// The common 1:1 mapping, without looking rk up twice: the check
		// below would find what evictRequestKey reports, and its Get would
		// not change the LRU order (rk is already the most recent key).
		// ek is looked up once too: refreshed if it stays (Get's effect;
		// the two LRUs' orders are independent), dropped otherwise.
		if ix.evictRequestKey(v.first, recs) {
			ix.e2r.RefreshAt(pos)
		} else {
			ix.e2r.RemoveAt(pos)
			delete(ix.moreKeys, ek)
		}
		return
	}
	ix.e2r.RefreshAt(pos)
	rks := ix.moreKeys[ek]
	for _, rk := range rks {
		ix.evictRequestKey(rk, recs)
	}
	for _, rk := range rks {
		if v, ok := ix.data.Get(rk); ok && len(ix.entries(rk, v)) > 0 {
			return
		}
	}
	ix.unmapEngineKey(ek)
}

// requestKey returns the last request key an engine key maps to (the chain
// position a child block continues from).
func (ix *Index) requestKey(ek uint64) (uint64, bool) {
	v, ok := ix.e2r.Get(ek)
	if !ok || v.n == 0 {
		return 0, false
	}
	if v.n == 1 {
		return v.first, true
	}
	rks := ix.moreKeys[ek]
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
		v, ok := ix.data.Peek(rk)
		if !ok {
			continue
		}
		es := ix.entries(rk, v)
		kept := es[:0]
		for _, e := range es {
			if e.pod != id {
				kept = append(kept, e)
			}
		}
		if len(kept) == 0 {
			ix.data.Remove(rk)
			ix.dropKey(rk)
			continue
		}
		ix.setEntries(rk, v, kept)
	}
}

// Len is the number of request keys held.
func (ix *Index) Len() int { return ix.data.Len() }

// KeyEntries describes the entries of a request key, for tests and
// reporting: "pod@tier" strings, speculative ones suffixed "[speculative]",
// least recent first.
func (ix *Index) KeyEntries(rk uint64) []string {
	v, ok := ix.data.Peek(rk)
	if !ok {
		return nil
	}
	es := ix.entries(rk, v)
	out := make([]string, len(es))
	for i, e := range es {
		s := ix.podNames[e.pod] + "@" + ix.tierNames[e.tier]
		if e.spec {
			s += "[speculative]"
		}
		out[i] = s
	}
	return out
}
