package sglang

import (
	"slices"
	"testing"

	"github.com/eppsim/eppsim/replica"
)

// refSeq is one inserted sequence of the naive reference and how much of
// it is still cached.
type refSeq struct {
	toks    []uint32
	present int
}

func lcp(a, b []uint32) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// pathOf is the tokens from the root to the end of n.
func pathOf(n *node) []uint32 {
	var parts [][]uint32
	for x := n; x != nil && !x.isRoot; x = x.parent {
		parts = append(parts, x.key)
	}
	var out []uint32
	for i := len(parts) - 1; i >= 0; i-- {
		out = append(out, parts[i]...)
	}
	return out
}

// FuzzRadixTree checks the radix tree against a naive reference: every
// match is the longest common prefix (page-floored) with any cached,
// not-evicted sequence; the tree's size never exceeds the capacity and
// equals the distinct cached page-prefixes; locked nodes are never evicted.
func FuzzRadixTree(f *testing.F) {
	f.Add([]byte{0, 0, 5, 1, 2, 3, 1, 9, 2, 3, 0, 7, 3, 3, 4, 1, 1})
	f.Add([]byte{1, 0, 20, 4, 4, 0, 20, 4, 5, 2, 1, 3, 40, 1, 3, 0, 9, 9, 2, 8, 3, 200})
	f.Add([]byte{2, 0, 23, 1, 0, 17, 2, 2, 5, 0, 30, 7, 3, 12, 1, 11, 2, 1, 2, 0, 3, 3, 3, 99})
	f.Add([]byte("the quick brown fox jumps over the lazy dog, again and again and again"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 || len(data) > 512 {
			return
		}
		page := []int{1, 2, 4}[int(data[0])%3]
		const capacity = 64
		var log replica.EventLog
		log.SetEnabled(true)
		tr := newTree(page, PolicyLRU, &log)
		var refs []refSeq
		var locked []*node
		lockedSet := map[*node]int{}
		tr.onEvict = func(n *node) {
			if lockedSet[n] > 0 || n.lockRef != 0 {
				t.Fatalf("evicting locked node %d", n.id)
			}
			p := pathOf(n)
			start := len(p) - len(n.key)
			for i := range refs {
				if refs[i].present > start && lcp(refs[i].toks, p) >= len(p) {
					refs[i].present = start
				}
			}
		}
		size := func() int { return tr.evictable + tr.protected }
		next := func(i *int) byte {
			if *i >= len(data) {
				return 0
			}
			b := data[*i]
			*i++
			return b
		}
		refMatch := func(key []uint32) int {
			key = key[:len(key)/page*page]
			best := 0
			for _, r := range refs {
				best = max(best, min(lcp(r.toks, key), r.present)/page*page)
			}
			return best
		}
		makeKey := func(i *int) []uint32 {
			var key []uint32
			if len(refs) > 0 && next(i)%2 == 0 {
				r := refs[int(next(i))%len(refs)]
				key = slices.Clone(r.toks[:int(next(i))%(len(r.toks)+1)])
			}
			for n := int(next(i)) % 12; n > 0; n-- {
				key = append(key, uint32(next(i)%3))
			}
			return key
		}
		for i := 1; i < len(data); {
			switch next(&i) % 5 {
			case 0, 1: // insert, evicting the shortfall first
				key := makeKey(&i)
				key = key[:len(key)/page*page]
				if len(key) == 0 {
					continue
				}
				if size()+len(key) > capacity {
					tr.evict(size() + len(key) - capacity)
				}
				if size()+len(key) > capacity {
					continue // cannot fit: skip (the pool would refuse)
				}
				pre := refMatch(append(slices.Clone(key), 0))
				got, _ := tr.insert(tr.root, key, nil)
				if got != min(pre, len(key)) {
					t.Fatalf("insert reports %d present, reference %d", got, pre)
				}
				refs = append(refs, refSeq{toks: key, present: len(key)})
			case 2: // match (and maybe lock its node)
				key := makeKey(&i)
				want := refMatch(key)
				if p := tr.peek(tr.root, key); p != want {
					t.Fatalf("peek %d, reference %d for %v", p, want, key)
				}
				hit, n := tr.match(tr.root, key)
				if hit != want || len(pathOf(n)) != hit {
					t.Fatalf("match %d (node path %d), reference %d", hit, len(pathOf(n)), want)
				}
				if !n.isRoot && next(&i)%2 == 0 {
					tr.lock(n)
					locked = append(locked, n)
					lockedSet[n]++
				}
			case 3: // unlock
				if len(locked) > 0 {
					k := int(next(&i)) % len(locked)
					n := locked[k]
					locked = slices.Delete(locked, k, k+1)
					lockedSet[n]--
					tr.unlock(n)
				}
			case 4:
				tr.evict(int(next(&i)) % 40)
			}
			refs = slices.DeleteFunc(refs, func(r refSeq) bool { return r.present == 0 })
			if size() > capacity {
				t.Fatalf("tree holds %d tokens, capacity %d", size(), capacity)
			}
			if err := tr.check(); err != nil {
				t.Fatal(err)
			}
			// Size = distinct cached page-prefixes × page.
			seen := map[string]bool{}
			for _, r := range refs {
				for k := page; k <= r.present; k += page {
					seen[string(slices.Clone(u32bytes(r.toks[:k])))] = true
				}
			}
			if len(seen)*page != size() {
				t.Fatalf("tree holds %d tokens, reference %d", size(), len(seen)*page)
			}
			for _, n := range locked {
				if n.evicted {
					t.Fatal("a locked node was evicted")
				}
			}
		}
	})
}

func u32bytes(v []uint32) []byte {
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		b = append(b, byte(x), byte(x>>8), byte(x>>16), byte(x>>24))
	}
	return b
}
