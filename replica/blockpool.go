package replica

import (
	"fmt"

	"github.com/eppsim/eppsim/internal/blockmap"
)

// nullBlock is vLLM's reserved block 0: never allocated, never cached (A.3).
const nullBlock = 0

// noBlock marks the end of an intrusive list.
const noBlock = -1

// block is one physical KV block.
type block struct {
	refCnt int32
	// qpos is the block's position in the free queue's ring while it is
	// queued (refCnt == 0); stale otherwise.
	qpos uint32
	hash uint64
	// entry says whether the block holds a hash: notCached, dupMember, or
	// the position of the prefix-cache entry that maps its hash to it.
	entry int32
	// Same-hash chain: vLLM does not de-duplicate (A.3), so several blocks
	// may hold one hash; the map points at the oldest (the chain's head,
	// which records the entry) and the rest (dupMember) follow.
	dupNext int32
}

// Values of block.entry other than a map position.
const (
	notCached = -1 // holds no hash
	dupMember = -2 // holds a hash whose entry maps to an older block
)

func (b *block) hashed() bool { return b.entry != notCached }

// BlockPool is vLLM's BlockPool: a fixed set of num_gpu_blocks blocks, a
// free queue ordered by time freed, and the prefix-cache map from block hash
// to block (vllm-engine.md A.3–A.4).
type BlockPool struct {
	blocks    []block
	free      freeQueue
	cached    blockmap.Map // hash -> oldest block holding it (never grows)
	events    *EventLog
	evictions int64
	fresh     []int32 // scratch for Free
	// sink keeps the loads of GetNewBlocks' prefetch pass alive.
	sink uint64
}

// NewBlockPool returns a pool of numBlocks blocks (block 0 is the null
// block), all free, in block-id order (A.4). events may be nil.
func NewBlockPool(numBlocks int, events *EventLog) *BlockPool {
	if numBlocks < 2 {
		panic(fmt.Sprintf("replica: num_gpu_blocks must be at least 2, got %d", numBlocks))
	}
	p := &BlockPool{
		blocks: make([]block, numBlocks),
		free:   newFreeQueue(numBlocks),
		cached: blockmap.New(blockmap.GroupsFor(numBlocks)),
		events: events,
	}
	for i := range p.blocks {
		p.blocks[i].entry, p.blocks[i].dupNext = notCached, noBlock
	}
	// The null block is held forever so it is never handed out.
	p.blocks[nullBlock].refCnt = 1
	for i := 1; i < numBlocks; i++ {
		p.pushBack(int32(i))
	}
	return p
}

// NumBlocks is num_gpu_blocks, null block included.
func (p *BlockPool) NumBlocks() int { return len(p.blocks) }

// NumFree is the length of the free queue (cached-but-unreferenced blocks
// included: they are evictable).
func (p *BlockPool) NumFree() int { return p.free.live }

// Usage is vllm:kv_cache_usage_perc: 1 - free/(num_gpu_blocks-1) (A.4).
func (p *BlockPool) Usage() float64 {
	return 1 - float64(p.free.live)/float64(len(p.blocks)-1)
}

// Evictions counts cached blocks dropped from the prefix cache on reuse.
func (p *BlockPool) Evictions() int64 { return p.evictions }

// Lookup returns a block holding hash, if any (get_cached_block: the oldest).
func (p *BlockPool) Lookup(hash uint64) (int32, bool) {
	pos, ok := p.cached.Find(hash)
	if !ok {
		return 0, false
	}
	return int32(*p.cached.Val(pos)), true
}

// RefCnt returns a block's reference count.
func (p *BlockPool) RefCnt(b int32) int32 { return p.blocks[b].refCnt }

// Touch takes a reference on each hit block; a block whose count was 0 leaves
// the free queue, which is how a hit refreshes its LRU position (A.3 step 3).
func (p *BlockPool) Touch(ids []int32) {
	for _, b := range ids {
		blk := &p.blocks[b]
		if blk.refCnt == 0 {
			p.free.remove(blk.qpos)
		}
		blk.refCnt++
	}
}

// GetNewBlocks pops n blocks from the front of the free queue. A popped
// block that still holds a hash is evicted from the prefix cache first (lazy
// eviction, BlockRemoved), then handed out with refCnt 1 (A.3 step 4). The
// caller must have checked NumFree.
//
// It works in passes so that the cache misses of a long allocation overlap
// instead of queueing behind each other: the ids come off the ring, one
// pass loads every block and the prefix-cache entry it heads (independent
// loads the CPU runs in parallel), and only then are the blocks evicted one
// by one, in queue order, from warm cache lines.
func (p *BlockPool) GetNewBlocks(n int, out []int32) []int32 {
	if n > p.free.live {
		panic(fmt.Sprintf("replica: GetNewBlocks(%d) with %d free", n, p.free.live))
	}
	first := len(out)
	for range n {
		out = append(out, p.free.popFront())
	}
	popped := out[first:]
	var touch uint64
	for _, b := range popped {
		if e := p.blocks[b].entry; e >= 0 {
			touch ^= p.cached.TouchAt(int(e))
		}
	}
	p.sink = touch
	for _, b := range popped {
		p.evict(b)
		p.blocks[b].refCnt = 1
	}
	return out
}

// evict drops b's hash from the prefix cache (_maybe_evict_cached_block).
func (p *BlockPool) evict(b int32) {
	blk := &p.blocks[b]
	switch {
	case blk.entry == notCached:
		return
	case blk.entry >= 0 && blk.dupNext == noBlock: // the usual case: b alone holds its hash
		p.cached.DeleteAt(int(blk.entry))
	case blk.entry >= 0: // the next block of the chain becomes the oldest
		*p.cached.Val(int(blk.entry)) = uint64(blk.dupNext)
		p.blocks[blk.dupNext].entry = blk.entry
	default: // a younger duplicate: unlink it from its chain
		pos, _ := p.cached.Find(blk.hash)
		for c := int32(*p.cached.Val(pos)); c != noBlock; c = p.blocks[c].dupNext {
			if p.blocks[c].dupNext == b {
				p.blocks[c].dupNext = blk.dupNext
				break
			}
		}
	}
	h := blk.hash
	blk.entry, blk.dupNext, blk.hash = notCached, noBlock, 0
	p.evictions++
	p.events.Removed(h)
}

// Prefetch loads the prefix-cache groups that looking up or caching hashes
// will probe first, so that the cache misses of a run of independent
// lookups overlap; it changes nothing.
func (p *BlockPool) Prefetch(hashes []uint64) {
	var touch uint64
	for _, h := range hashes {
		touch ^= p.cached.Touch(h)
	}
	p.sink = touch
}

// CacheBlock registers a newly full block under hash (cache_full_blocks).
// A block already holding a hash is left alone.
func (p *BlockPool) CacheBlock(b int32, hash uint64) {
	blk := &p.blocks[b]
	if blk.hashed() || b == nullBlock {
		return
	}
	blk.hash, blk.dupNext = hash, noBlock
	pos, found := p.cached.FindOrInsert(hash, uint64(b))
	if !found {
		blk.entry = int32(pos)
		return
	}
	// Append at the end so the map keeps returning the oldest block.
	blk.entry = dupMember
	c := int32(*p.cached.Val(pos))
	for p.blocks[c].dupNext != noBlock {
		c = p.blocks[c].dupNext
	}
	p.blocks[c].dupNext = b
}

// Free releases one reference on each block, in the order given. The caller
// passes a request's blocks in reverse so that tail blocks are evicted first
// (A.4). A block reaching 0 goes to the back of the queue if it holds a hash
// (it stays hittable until popped) and to the front if it was never filled.
//
// Like block_pool.free_blocks (prepend_n(fresh), append_n(cached)), the
// unfilled blocks keep their relative order as a group at the front.
func (p *BlockPool) Free(ids []int32) {
	fresh := p.fresh[:0]
	for _, b := range ids {
		blk := &p.blocks[b]
		blk.refCnt--
		if blk.refCnt < 0 {
			panic(fmt.Sprintf("replica: block %d freed below zero", b))
		}
		if blk.refCnt > 0 {
			continue
		}
		if blk.hashed() {
			p.pushBack(b)
		} else {
			fresh = append(fresh, b)
		}
	}
	for i := len(fresh) - 1; i >= 0; i-- {
		p.pushFront(fresh[i])
	}
	p.fresh = fresh
}

// Reset clears the prefix cache if every block but the null block is free
// (reset_prefix_cache); it reports whether it did.
func (p *BlockPool) Reset() bool {
	if p.free.live != len(p.blocks)-1 {
		return false
	}
	p.cached.Clear()
	for i := range p.blocks {
		p.blocks[i].entry, p.blocks[i].hash, p.blocks[i].dupNext = notCached, 0, noBlock
	}
	p.events.Cleared()
	return true
}

func (p *BlockPool) pushBack(b int32)  { p.free.pushBack(b, p.blocks) }
func (p *BlockPool) pushFront(b int32) { p.free.pushFront(b, p.blocks) }

// FreeOrder returns the free queue from front (next to be reused) to back;
// for tests and invariant checks.
func (p *BlockPool) FreeOrder() []int32 {
	out := make([]int32, 0, p.free.live)
	p.free.each(func(b int32) bool {
		out = append(out, b)
		return true
	})
	return out
}

// checkInvariants verifies block conservation, ref counts and the hash map.
func (p *BlockPool) checkInvariants() error {
	n := 0
	queued := make([]bool, len(p.blocks))
	var err error
	for r := p.free.head; r != p.free.tail; r++ {
		b := p.free.ring[r&p.free.mask]
		if b == nullBlock {
			continue
		}
		switch {
		case b < 0 || int(b) >= len(p.blocks):
			err = fmt.Errorf("free queue holds block %d of %d", b, len(p.blocks))
		case queued[b]:
			err = fmt.Errorf("block %d is queued twice", b)
		case p.blocks[b].refCnt != 0:
			err = fmt.Errorf("free block %d has refCnt %d", b, p.blocks[b].refCnt)
		case p.blocks[b].qpos != r:
			err = fmt.Errorf("free block %d at position %d records position %d", b, r, p.blocks[b].qpos)
		}
		if err != nil {
			return err
		}
		queued[b] = true
		n++
	}
	if n != p.free.live {
		return fmt.Errorf("free queue length %d, counter %d", n, p.free.live)
	}
	held := 0
	for i := 1; i < len(p.blocks); i++ {
		blk := &p.blocks[i]
		switch {
		case blk.refCnt < 0:
			return fmt.Errorf("block %d has refCnt %d", i, blk.refCnt)
		case blk.refCnt > 0:
			held++
			if queued[i] {
				return fmt.Errorf("held block %d is in the free queue", i)
			}
		case !queued[i]:
			return fmt.Errorf("unreferenced block %d is not in the free queue", i)
		}
	}
	if held+p.free.live != len(p.blocks)-1 {
		return fmt.Errorf("block conservation: %d held + %d free != %d", held, p.free.live, len(p.blocks)-1)
	}
	if p.blocks[nullBlock].hashed() {
		return fmt.Errorf("null block is cached")
	}
	p.cached.Each(func(h, v uint64) bool {
		head := int32(v)
		if pos, _ := p.cached.Find(h); p.blocks[head].entry != int32(pos) {
			err = fmt.Errorf("block %d heads hash %x at entry %d but records entry %d", head, h, pos, p.blocks[head].entry)
			return false
		}
		for c := head; c != noBlock; c = p.blocks[c].dupNext {
			if !p.blocks[c].hashed() || p.blocks[c].hash != h {
				err = fmt.Errorf("cache maps hash %x to block %d holding %x", h, c, p.blocks[c].hash)
				return false
			}
			if c != head && p.blocks[c].entry != dupMember {
				err = fmt.Errorf("block %d follows block %d for hash %x but records entry %d", c, head, h, p.blocks[c].entry)
				return false
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	for i := 1; i < len(p.blocks); i++ {
		blk := &p.blocks[i]
		if !blk.hashed() {
			continue
		}
		found := false
		for c, ok := p.Lookup(blk.hash); ok && c != noBlock; c = p.blocks[c].dupNext {
			if c == int32(i) {
				found = true
				break
			}
		}
		if !found {
			return fmt.Errorf("block %d holds hash %x but the cache does not map it", i, blk.hash)
		}
	}
	return nil
}
