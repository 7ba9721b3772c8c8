package sglang

import (
	"container/heap"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/eppsim/eppsim/replica"
)

// node is one radix-tree node (sglang-engine.md A.2). Its KV slots are a
// count, len(key): slots have no identity that anything observable depends
// on (A.1: a slot is owned by exactly one node or request row).
type node struct {
	parent *node
	// children by child key (A.2 get_child_key: the first token, or for
	// page P a hash of the first page); nodes whose first pages collide on
	// that hash are chained through next.
	children map[uint64]*node
	next     *node
	// key aliases the token storage of the request that inserted it; those
	// positions are never written again.
	key []uint32
	// digests are the SHA-256 page digests of the KV-event hash chain
	// (A.13), one per page; nil when events are off.
	digests [][32]byte
	lockRef int32
	// lastAccess and created are ticks of the tree's clock (A.2 uses
	// time.monotonic; a counter keeps every touch strictly ordered).
	lastAccess, created int64
	id                  int64
	// heapGen invalidates the node's older entries in the eviction heap.
	heapGen int64
	isRoot  bool
	evicted bool
}

func (n *node) leaf() bool { return len(n.children) == 0 }

// tree is SGLang's RadixCache over a count-based token pool (A.2–A.6).
// Different cache salts (extra keys) get separate roots: keys with different
// extra keys never share a node (A.2), and a root is never evictable.
type tree struct {
	page   int
	root   *node
	salted map[string]*node
	// evictable and protected are evictable_size_ and protected_size_ (A.4).
	evictable, protected int
	clock, nextID        int64
	heap                 leafHeap
	policy               string
	nodes                int
	// events queues BlockStored/BlockRemoved (disabled: events off, no
	// digests computed).
	events *replica.EventLog
	// evictedTokens counts tokens freed by eviction.
	evictedTokens int64
	// onEvict, when set, sees each node just before eviction removes it
	// (tests).
	onEvict func(*node)
}

func newTree(page int, policy string, events *replica.EventLog) *tree {
	t := &tree{page: page, policy: policy, events: events}
	t.root = t.newNode(nil, nil)
	t.root.isRoot = true
	t.root.lockRef = 1 // A.2: the root is never evictable
	return t
}

func (t *tree) newNode(parent *node, key []uint32) *node {
	t.clock++
	t.nextID++
	return &node{parent: parent, key: key, lastAccess: t.clock, created: t.clock, id: t.nextID}
}

// rootFor returns the root of cache salt salt's subtree.
func (t *tree) rootFor(salt string, create bool) *node {
	if salt == "" {
		return t.root
	}
	if r, ok := t.salted[salt]; ok || !create {
		return r
	}
	if t.salted == nil {
		t.salted = map[string]*node{}
	}
	r := t.newNode(nil, nil)
	r.isRoot, r.lockRef = true, 1
	t.salted[salt] = r
	return r
}

// childKey is get_child_key (A.2) for a key of at least one page.
func (t *tree) childKey(key []uint32) uint64 {
	if t.page == 1 {
		return uint64(key[0])
	}
	h := uint64(14695981039346656037) // FNV-1a over the first page
	for _, v := range key[:t.page] {
		h ^= uint64(v)
		h *= 1099511628211
	}
	return h
}

func (t *tree) child(n *node, key []uint32) *node {
	c := n.children[t.childKey(key)]
	if t.page == 1 {
		return c
	}
	for ; c != nil; c = c.next {
		if equal(c.key[:t.page], key[:t.page]) {
			return c
		}
	}
	return nil
}

func (t *tree) addChild(p, c *node) {
	if p.children == nil {
		p.children = make(map[uint64]*node, 2)
	}
	k := t.childKey(c.key)
	c.next = p.children[k]
	p.children[k] = c
	c.parent = p
}

func (t *tree) removeChild(p, c *node) {
	k := t.childKey(c.key)
	head := p.children[k]
	if head == c {
		if c.next == nil {
			delete(p.children, k)
		} else {
			p.children[k] = c.next
		}
		c.next = nil
		return
	}
	for x := head; x != nil; x = x.next {
		if x.next == c {
			x.next = c.next
			c.next = nil
			return
		}
	}
	panic("sglang: removeChild of a node that is not a child")
}

// replaceChild puts u where c was under p (same first page, A.3 step 5).
func (t *tree) replaceChild(p, c, u *node) {
	k := t.childKey(c.key)
	if p.children[k] == c {
		p.children[k] = u
	} else {
		for x := p.children[k]; ; x = x.next {
			if x.next == c {
				x.next = u
				break
			}
		}
	}
	u.next, c.next = c.next, nil
	u.parent = p
}

func equal(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// common is the matched length of a and b: tokens for page 1, whole pages
// otherwise (A.3 step 3, _key_match_paged).
func (t *tree) common(a, b []uint32) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	return i / t.page * t.page
}

// touch sets n's last access to a new tick (A.3 step 3) and re-queues it
// for eviction when it is an evictable leaf.
func (t *tree) touch(n *node) {
	t.clock++
	n.lastAccess = t.clock
	t.maybePush(n)
}

// match is match_prefix (A.3) on an already truncated key: it refreshes the
// path's last access, splits a node the key ends inside, and returns the
// hit length and the deepest matched node (root when none).
func (t *tree) match(root *node, key []uint32) (int, *node) {
	key = key[:len(key)/t.page*t.page]
	n, hit := root, 0
	for len(key) > 0 {
		c := t.child(n, key)
		if c == nil {
			break
		}
		t.touch(c)
		m := t.common(c.key, key)
		if m < len(c.key) {
			n = t.split(c, m)
			hit += m
			break
		}
		hit += m
		key = key[m:]
		n = c
	}
	return hit, n
}

// peek is match without side effects: the hit length only (no LRU refresh,
// no split), for the simulator's oracle.
func (t *tree) peek(root *node, key []uint32) int {
	if root == nil {
		return 0
	}
	key = key[:len(key)/t.page*t.page]
	n, hit := root, 0
	for len(key) > 0 {
		c := t.child(n, key)
		if c == nil {
			break
		}
		m := t.common(c.key, key)
		hit += m
		if m < len(c.key) {
			break
		}
		key = key[m:]
		n = c
	}
	return hit
}

// split is _split_node (A.3 step 5): a new upper node takes c's first m
// tokens, c's lock_ref and its place under the parent; c keeps the suffix.
// Totals do not change; the page digests split at m/P. The new node gets a
// fresh id and access tick, as a new TreeNode does.
func (t *tree) split(c *node, m int) *node {
	u := t.newNode(nil, c.key[:m])
	u.lockRef = c.lockRef
	if c.digests != nil {
		u.digests = c.digests[: m/t.page : m/t.page]
		c.digests = c.digests[m/t.page:]
	}
	t.replaceChild(c.parent, c, u)
	c.key = c.key[m:]
	t.addChild(u, c)
	t.nodes++
	return u
}

// insert is _insert_helper (A.5) on a page-aligned key: it walks like a
// match (refreshing last access, splitting where the key diverges or ends
// inside a node), adds the unmatched remainder as one new evictable leaf
// with one BlockStored per page, and returns the tokens that were already
// present and the node the key ends at. src (nil for none) is the
// request whose tokens key holds, from its start.
func (t *tree) insert(root *node, key []uint32, src *seq) (int, *node) {
	key = key[:len(key)/t.page*t.page]
	n, prefix := root, 0
	for len(key) > 0 {
		c := t.child(n, key)
		if c == nil {
			break
		}
		t.touch(c)
		m := t.common(c.key, key)
		if m < len(c.key) {
			c = t.split(c, m)
		}
		prefix += m
		key = key[m:]
		n = c
	}
	if len(key) == 0 {
		return prefix, n
	}
	leaf := t.newNode(nil, key)
	t.addChild(n, leaf)
	t.nodes++
	t.evictable += len(key)
	t.maybePush(leaf)
	if t.events.Enabled() {
		t.recordStore(leaf, prefix, src)
	}
	return prefix, leaf
}

// recordStore computes the new leaf's page digests and queues one
// BlockStored per page (A.13). offset is where the leaf's key starts in the
// inserting request's token sequence.
func (t *tree) recordStore(leaf *node, offset int, src *seq) {
	P := t.page
	pages := len(leaf.key) / P
	leaf.digests = make([][32]byte, pages)
	var prev *[32]byte
	p := leaf.parent
	if !p.isRoot {
		prev = &p.digests[len(p.digests)-1]
	}
	buf := make([]byte, 32+4*P)
	for i := range pages {
		toks := leaf.key[i*P : (i+1)*P]
		b := buf[:0]
		if prev != nil {
			b = append(b, prev[:]...)
		}
		for _, v := range toks {
			b = binary.LittleEndian.AppendUint32(b, v)
		}
		leaf.digests[i] = sha256.Sum256(b)
		var parent uint64
		if prev != nil {
			parent = hashValue(prev)
		}
		start := offset + i*P
		t.stored(hashValue(&leaf.digests[i]), parent, prev != nil, toks, src, start)
		prev = &leaf.digests[i]
	}
}

// hashValue is hash_str_to_int64 (A.13): the signed int64 of the first 8
// digest bytes, big-endian, as the uint64 the EPP casts it to.
func hashValue(d *[32]byte) uint64 { return binary.BigEndian.Uint64(d[:8]) }

// lock is inc_lock_ref (A.4): pins n and its ancestors up to the root.
func (t *tree) lock(n *node) {
	for x := n; x != nil && !x.isRoot; x = x.parent {
		if x.lockRef == 0 {
			t.evictable -= len(x.key)
			t.protected += len(x.key)
		}
		x.lockRef++
	}
}

// unlock is dec_lock_ref (A.4).
func (t *tree) unlock(n *node) {
	for x := n; x != nil && !x.isRoot; x = x.parent {
		if x.lockRef <= 0 {
			panic(fmt.Sprintf("sglang: unlock of node %d with lock_ref %d", x.id, x.lockRef))
		}
		x.lockRef--
		if x.lockRef == 0 {
			t.evictable += len(x.key)
			t.protected -= len(x.key)
			t.maybePush(x)
		}
	}
}

// maybePush queues n in the eviction heap if it is an evictable leaf
// (A.4 evictable_leaves); older entries of n become stale.
func (t *tree) maybePush(n *node) {
	if n.isRoot || n.evicted || n.lockRef != 0 || !n.leaf() {
		return
	}
	n.heapGen++
	a, b := t.priority(n)
	heap.Push(&t.heap, leafEntry{a: a, b: b, id: n.id, gen: n.heapGen, n: n})
	if len(t.heap) > 4*t.nodes+1024 {
		t.compactHeap()
	}
}

// priority is the eviction key of evict_policy.py (A.6), smallest first;
// ties fall to the node id (creation order), a simulator rule.
func (t *tree) priority(n *node) (int64, int64) {
	switch t.policy {
	case PolicyFIFO:
		return n.created, 0
	case PolicyFILO:
		return -n.created, 0
	case PolicyMRU:
		return -n.lastAccess, 0
	}
	return n.lastAccess, 0 // lru
}

func (t *tree) compactHeap() {
	live := t.heap[:0]
	for _, e := range t.heap {
		if e.gen == e.n.heapGen && !e.n.evicted && e.n.lockRef == 0 && e.n.leaf() {
			live = append(live, e)
		}
	}
	clear(t.heap[len(live):])
	t.heap = live
	heap.Init(&t.heap)
}

// evict is RadixCache.evict (A.6): pop the evictable leaf of lowest
// priority, free all its slots, remove it, and queue its parent when that
// became an evictable leaf, until n tokens are freed or nothing is
// evictable. It returns the tokens freed (whole nodes: it may overshoot).
func (t *tree) evict(n int) int {
	freed := 0
	for freed < n && len(t.heap) > 0 {
		e := heap.Pop(&t.heap).(leafEntry)
		x := e.n
		if e.gen != x.heapGen || x.evicted || x.lockRef != 0 || !x.leaf() {
			continue
		}
		freed += len(x.key)
		t.evictable -= len(x.key)
		if t.events.Enabled() {
			for i := range x.digests {
				t.events.Removed(hashValue(&x.digests[i]))
			}
		}
		if t.onEvict != nil {
			t.onEvict(x)
		}
		p := x.parent
		t.removeChild(p, x)
		x.evicted = true
		x.parent = nil
		t.nodes--
		if !p.isRoot {
			t.maybePush(p)
		}
	}
	t.evictedTokens += int64(freed)
	return freed
}

// leafEntry is one eviction-heap entry; stale when gen differs from the
// node's heapGen (lazy deletion).
type leafEntry struct {
	a, b, id, gen int64
	n             *node
}

type leafHeap []leafEntry

func (h leafHeap) Len() int { return len(h) }
func (h leafHeap) Less(i, j int) bool {
	if h[i].a != h[j].a {
		return h[i].a < h[j].a
	}
	if h[i].b != h[j].b {
		return h[i].b < h[j].b
	}
	return h[i].id < h[j].id
}
func (h leafHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *leafHeap) Push(x any)   { *h = append(*h, x.(leafEntry)) }
func (h *leafHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = leafEntry{}
	*h = old[:len(old)-1]
	return e
}

// roots returns the tree's roots, the unsalted one first, then salted ones
// in salt order (deterministic walks).
func (t *tree) roots() []*node {
	out := []*node{t.root}
	if len(t.salted) > 0 {
		keys := make([]string, 0, len(t.salted))
		for k := range t.salted {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			out = append(out, t.salted[k])
		}
	}
	return out
}

// walk calls f for every non-root node, parents before children.
func (t *tree) walk(f func(*node)) {
	var rec func(*node)
	rec = func(n *node) {
		for _, c := range n.children {
			for x := c; x != nil; x = x.next {
				f(x)
				rec(x)
			}
		}
	}
	for _, r := range t.roots() {
		rec(r)
	}
}

// check verifies the tree's structure and size counters (A.4).
func (t *tree) check() error {
	ev, pr, nodes := 0, 0, 0
	var err error
	t.walk(func(n *node) {
		nodes++
		if err != nil {
			return
		}
		switch {
		case n.evicted:
			err = fmt.Errorf("evicted node %d still in the tree", n.id)
		case len(n.key) == 0 || len(n.key)%t.page != 0:
			err = fmt.Errorf("node %d has key length %d with page %d", n.id, len(n.key), t.page)
		case n.lockRef < 0:
			err = fmt.Errorf("node %d has lock_ref %d", n.id, n.lockRef)
		case n.parent == nil:
			err = fmt.Errorf("node %d has no parent", n.id)
		case t.child(n.parent, n.key) != n:
			err = fmt.Errorf("node %d not found under its parent by its key", n.id)
		case t.events.Enabled() && len(n.digests) != len(n.key)/t.page:
			err = fmt.Errorf("node %d has %d digests for %d pages", n.id, len(n.digests), len(n.key)/t.page)
		}
		if n.lockRef > 0 {
			pr += len(n.key)
			if !n.parent.isRoot && n.parent.lockRef < n.lockRef {
				err = fmt.Errorf("node %d lock_ref %d exceeds its parent's %d", n.id, n.lockRef, n.parent.lockRef)
			}
		} else {
			ev += len(n.key)
		}
	})
	if err != nil {
		return err
	}
	if ev != t.evictable || pr != t.protected {
		return fmt.Errorf("tree sizes evictable %d protected %d, counters say %d and %d", ev, pr, t.evictable, t.protected)
	}
	if nodes != t.nodes {
		return fmt.Errorf("tree has %d nodes, counter says %d", nodes, t.nodes)
	}
	return nil
}
