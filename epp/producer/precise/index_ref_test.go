package precise

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/eppsim/eppsim/internal/blockmap"
)

// refIndex is the in-memory index written as upstream writes it: two
// golang-lru LRUs, a heap object per key. TestIndexMatchesReference holds
// Index to it.
type refIndex struct {
	podCacheSize int
	data         *simplelru.LRU[uint64, *refPodCache]
	e2r          *simplelru.LRU[uint64, []uint64]
}

type refPodCache struct{ entries []entry }

func newRefIndex(t *testing.T, size, podCacheSize int) *refIndex {
	data, err := simplelru.NewLRU[uint64, *refPodCache](size, nil)
	if err != nil {
		t.Fatal(err)
	}
	e2r, err := simplelru.NewLRU[uint64, []uint64](size, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &refIndex{podCacheSize: podCacheSize, data: data, e2r: e2r}
}

func (ix *refIndex) add(engineKeys, requestKeys []uint64, entries []entry) {
	if len(requestKeys) == 0 || len(entries) == 0 {
		return
	}
	if engineKeys != nil {
		engineToRequestGeneral(engineKeys, requestKeys, func(ek uint64, rks []uint64) { ix.e2r.Add(ek, rks) })
	}
	for _, rk := range requestKeys {
		pc, ok := ix.data.Get(rk)
		if !ok {
			pc = &refPodCache{}
			ix.data.Add(rk, pc)
		}
		for _, rec := range entries {
			if i := slices.Index(pc.entries, rec); i >= 0 {
				pc.entries = append(slices.Delete(pc.entries, i, i+1), rec)
				continue
			}
			if len(pc.entries) >= ix.podCacheSize {
				pc.entries = pc.entries[1:]
			}
			pc.entries = append(pc.entries, rec)
		}
	}
}

func (ix *refIndex) evictRequestKey(rk uint64, recs []entry) bool {
	pc, ok := ix.data.Get(rk)
	if !ok {
		return false
	}
	for _, rec := range recs {
		if i := slices.Index(pc.entries, rec); i >= 0 {
			pc.entries = slices.Delete(pc.entries, i, i+1)
		}
	}
	if len(pc.entries) == 0 {
		ix.data.Remove(rk)
		return false
	}
	return true
}

func (ix *refIndex) evictEngineKey(ek uint64, recs []entry) {
	rks, ok := ix.e2r.Get(ek)
	if !ok {
		return
	}
	for _, rk := range rks {
		ix.evictRequestKey(rk, recs)
	}
	for _, rk := range rks {
		if pc, ok := ix.data.Get(rk); ok && len(pc.entries) > 0 {
			return
		}
	}
	ix.e2r.Remove(ek)
}

func (ix *refIndex) requestKey(ek uint64) (uint64, bool) {
	rks, ok := ix.e2r.Get(ek)
	if !ok || len(rks) == 0 {
		return 0, false
	}
	return rks[len(rks)-1], true
}

func (ix *refIndex) clearPod(pod int32) {
	for _, rk := range ix.data.Keys() {
		pc, _ := ix.data.Peek(rk)
		pc.entries = slices.DeleteFunc(pc.entries, func(e entry) bool { return e.pod == pod })
		if len(pc.entries) == 0 {
			ix.data.Remove(rk)
		}
	}
}

// TestIndexMatchesReference drives Index and refIndex with the same random
// stores (1:1, many:1 and 1:many engine/request ratios, repeated engine
// keys, location-only adds), lookups, evictions and pod clears — with LRUs
// small enough to evict, and per-key capacities on both sides of the
// inline limit — and compares the keys in recency order, every key's
// entries and every engine key's mapping.
func TestIndexMatchesReference(t *testing.T) {
	for _, tc := range []struct{ size, podCache int }{{40, 2}, {40, 4}, {60, 7}, {1000, 10}} {
		t.Run(fmt.Sprintf("size%d_pods%d", tc.size, tc.podCache), func(t *testing.T) {
			testIndexMatchesReference(t, tc.size, tc.podCache)
		})
	}
}

func testIndexMatchesReference(t *testing.T, size, podCache int) {
	rng := rand.New(rand.NewPCG(uint64(size), uint64(podCache)))
	ix, err := NewIndex(size, podCache)
	if err != nil {
		t.Fatal(err)
	}
	ref := newRefIndex(t, size, podCache)
	const pods = 9
	for p := range pods {
		ix.podID(fmt.Sprintf("pod%d", p)) // ids 0..pods-1 on both sides
	}
	keys := func(base uint64, n int) []uint64 {
		out := make([]uint64, n)
		for i := range out {
			out[i] = base + uint64(rng.IntN(3*size))
		}
		return out
	}
	ent := func() entry {
		return entry{pod: int32(rng.IntN(pods)), tier: uint8(rng.IntN(2)), spec: rng.IntN(8) == 0}
	}
	for step := range 4000 {
		switch op := rng.IntN(10); {
		case op < 5:
			e, r := 1+rng.IntN(12), 1+rng.IntN(12)
			var eks []uint64
			if rng.IntN(6) > 0 {
				eks = keys(1<<40, e)
				if rng.IntN(2) == 0 {
					eks = uniq(eks)
				}
			}
			rks := keys(0, r)
			recs := []entry{ent()}
			if rng.IntN(4) == 0 {
				recs = append(recs, ent(), ent())
			}
			ix.add(eks, rks, recs)
			ref.add(eks, rks, recs)
		case op < 7:
			ek, rec := keys(1<<40, 1)[0], ent()
			ix.evictEngineKey(ek, []entry{rec})
			ref.evictEngineKey(ek, []entry{rec})
		case op < 8:
			rk, rec := keys(0, 1)[0], ent()
			if got, want := ix.evictRequestKey(rk, []entry{rec}), ref.evictRequestKey(rk, []entry{rec}); got != want {
				t.Fatalf("step %d: evictRequestKey = %v, want %v", step, got, want)
			}
		case op < 9:
			ek := keys(1<<40, 1)[0]
			got, gok := ix.requestKey(ek)
			want, wok := ref.requestKey(ek)
			if got != want || gok != wok {
				t.Fatalf("step %d: requestKey = %x %v, want %x %v", step, got, gok, want, wok)
			}
		default:
			if rng.IntN(10) == 0 {
				p := int32(rng.IntN(pods))
				ix.clearPod(fmt.Sprintf("pod%d", p))
				ref.clearPod(p)
				break
			}
			for _, rk := range keys(0, 8) { // a lookup walk refreshes what it finds
				_, ok := ix.data.Get(rk)
				if _, rok := ref.data.Get(rk); ok != rok {
					t.Fatalf("step %d: Get(%x) = %v, want %v", step, rk, ok, rok)
				}
				if !ok {
					break
				}
			}
		}
		compareIndexes(t, step, ix, ref)
	}
}

func uniq(ks []uint64) []uint64 {
	var out []uint64
	for _, k := range ks {
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

func compareIndexes(t *testing.T, step int, ix *Index, ref *refIndex) {
	t.Helper()
	if got, want := ix.data.Keys(), ref.data.Keys(); !slices.Equal(got, want) {
		t.Fatalf("step %d: request keys %x, want %x", step, got, want)
	}
	for _, rk := range ref.data.Keys() {
		v, _ := ix.data.Peek(rk)
		pc, _ := ref.data.Peek(rk)
		if got := ix.entries(rk, v); !slices.Equal(got, pc.entries) {
			t.Fatalf("step %d: key %x entries %v, want %v", step, rk, got, pc.entries)
		}
	}
	if got, want := ix.e2r.Keys(), ref.e2r.Keys(); !slices.Equal(got, want) {
		t.Fatalf("step %d: engine keys %x, want %x", step, got, want)
	}
	for _, ek := range ref.e2r.Keys() {
		v, _ := ix.e2r.Peek(ek)
		want, _ := ref.e2r.Peek(ek)
		got := ix.moreKeys[ek]
		if v.n == 1 {
			got = []uint64{v.first}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("step %d: engine key %x maps to %x, want %x", step, ek, got, want)
		}
	}
	// The spill maps hold exactly the live keys whose values spilled.
	for rk := range ix.moreEntries {
		if v, ok := ix.data.Peek(rk); !ok || v.n != spilled {
			t.Fatalf("step %d: stale spilled entries of key %x", step, rk)
		}
	}
	for ek := range ix.moreKeys {
		if v, ok := ix.e2r.Peek(ek); !ok || v.n == 1 {
			t.Fatalf("step %d: stale spilled request keys of engine key %x", step, ek)
		}
	}
}

// TestEngineToRequestRuns: the run-based mapping is the general one, at
// every length ratio, with and without a repeated engine key.
func TestEngineToRequestRuns(t *testing.T) {
	type call struct {
		ek  uint64
		rks []uint64
	}
	record := func(dst *[]call) func(uint64, []uint64) {
		return func(ek uint64, rks []uint64) { *dst = append(*dst, call{ek, slices.Clone(rks)}) }
	}
	for e := 1; e <= 40; e++ {
		for r := 1; r <= 40; r++ {
			eks, rks := make([]uint64, e), make([]uint64, r)
			for i := range eks {
				eks[i] = uint64(1000 + 7*i)
			}
			if e > 2 && r%2 == 0 {
				eks[e-1] = eks[e/2] // repeated: the general path
			}
			for i := range rks {
				rks[i] = uint64(i + 1)
			}
			var got, want []call
			var seen blockmap.Map
			engineToRequest(eks, rks, &seen, record(&got))
			if seen.Len() != 0 {
				t.Fatalf("E=%d R=%d: scratch set left with %d keys", e, r, seen.Len())
			}
			engineToRequestGeneral(eks, rks, record(&want))
			if !slices.EqualFunc(got, want, func(a, b call) bool { return a.ek == b.ek && slices.Equal(a.rks, b.rks) }) {
				t.Fatalf("E=%d R=%d: %v, want %v", e, r, got, want)
			}
		}
	}
}
