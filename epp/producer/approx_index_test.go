package producer

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// refIndex is upstream's indexer written naively: a set of pods per hash and
// a golang-lru simplelru per pod whose eviction callback takes the pod out
// of the hash's set.
type refIndex struct {
	pods map[uint64]map[int32]bool
	lrus map[int32]*simplelru.LRU[uint64, struct{}]
}

func (r *refIndex) add(t *testing.T, hashes []uint64, id int32, capacity int, tailFirst bool) {
	l := r.lrus[id]
	if l == nil {
		var err error
		l, err = simplelru.NewLRU[uint64, struct{}](capacity, func(h uint64, _ struct{}) {
			delete(r.pods[h], id)
			if len(r.pods[h]) == 0 {
				delete(r.pods, h)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		r.lrus[id] = l
	}
	for i := range hashes {
		if tailFirst {
			i = len(hashes) - 1 - i
		}
		l.Add(hashes[i], struct{}{})
	}
	for _, h := range hashes {
		if r.pods[h] == nil {
			r.pods[h] = map[int32]bool{}
		}
		r.pods[h][id] = true
	}
}

// TestApproxIndexMatchesReference drives approxIndex and refIndex with the
// same random prompts — shared prefixes, repeated hashes, prompts longer
// than the LRU (stale entries), tail-first insertion, more than 64 pods,
// pod removal — and compares every hash's pod set, the LRUs' contents in
// recency order and the longest-prefix counts.
func TestApproxIndexMatchesReference(t *testing.T) {
	const pods, capacity = 70, 40
	rng := rand.New(rand.NewPCG(9, 10))
	ix := newApproxIndex()
	ref := &refIndex{pods: map[uint64]map[int32]bool{}, lrus: map[int32]*simplelru.LRU[uint64, struct{}]{}}
	universe := make([]uint64, 300)
	for i := range universe {
		universe[i] = splitmix(uint64(i))
	}
	name := func(id int32) string { return fmt.Sprintf("pod%d", id) }
	for i := range int32(pods) {
		ix.podID(name(i)) // ids in the same order as the reference's
	}
	prompt := func() []uint64 {
		start, n := rng.IntN(len(universe)), 1+rng.IntN(2*capacity)
		var hs []uint64
		for j := range n {
			hs = append(hs, universe[(start+j)%len(universe)])
		}
		if rng.IntN(10) == 0 {
			hs = append(hs, hs[rng.IntN(len(hs))]) // a repeated hash
		}
		return hs
	}
	for step := range 3000 {
		id := int32(rng.IntN(pods))
		if rng.IntN(4) == 0 {
			id = int32(rng.IntN(3)) // a few busy pods, so that LRUs fill up
		}
		if rng.IntN(200) == 0 {
			ix.dropPod(name(id))
			if l := ref.lrus[id]; l != nil {
				l.Purge() // fires the callback for every key
				delete(ref.lrus, id)
			}
			continue
		}
		hs := prompt()
		tailFirst := rng.IntN(2) == 0
		ix.add(hs, name(id), capacity, tailFirst)
		ref.add(t, hs, id, capacity, tailFirst)

		check := hs
		if step%10 == 0 {
			check = universe
		}
		for _, h := range check {
			for p := range int32(pods) {
				if got, want := ix.holds(h, p), ref.pods[h][p]; got != want {
					t.Fatalf("step %d: pod %d holds %x = %v, want %v", step, p, h, got, want)
				}
			}
			if got, want := ix.held(h), len(ref.pods[h]) > 0; got != want {
				t.Fatalf("step %d: held %x = %v, want %v", step, h, got, want)
			}
		}
		for p, l := range ref.lrus {
			got := ix.pods[p].lru
			if got == nil || !slices.Equal(got.Keys(), l.Keys()) {
				t.Fatalf("step %d: pod %d LRU differs", step, p)
			}
		}
		q := prompt()
		counts := make([]int, pods)
		ix.matchLongestPrefix(q, counts)
		want := make([]int, pods)
		for _, h := range q {
			if len(ref.pods[h]) == 0 {
				break
			}
			for p := range ref.pods[h] {
				want[p]++
			}
		}
		if !slices.Equal(counts, want) {
			t.Fatalf("step %d: counts %v, want %v", step, counts, want)
		}
	}
}
