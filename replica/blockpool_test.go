package replica

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestBlockPoolDuplicateHashes drives a pool with hashes from a tiny set,
// so that several blocks hold one hash (vLLM does not de-duplicate, A.3),
// and checks after every operation that Lookup returns the oldest block
// still holding the hash, as a reference list per hash says, that evicted
// hashes are reported in order, and the pool's invariants.
func TestBlockPoolDuplicateHashes(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const numBlocks = 24
	p := NewBlockPool(numBlocks, &EventLog{enabled: true})
	holders := map[uint64][]int32{} // hash -> blocks holding it, oldest first
	var held []int32                // blocks with one reference each
	for step := range 20000 {
		switch op := rng.IntN(4); {
		case op == 0 && p.NumFree() > 0: // allocate a few blocks
			n := 1 + rng.IntN(min(4, p.NumFree()))
			front := p.FreeOrder()[:n]
			var wantRemoved []uint64
			for _, b := range front {
				h := p.blocks[b].hash
				if i := slices.Index(holders[h], b); i >= 0 && p.blocks[b].hashed() {
					holders[h] = slices.Delete(holders[h], i, i+1)
					wantRemoved = append(wantRemoved, h)
				}
			}
			p.events.take()
			got := p.GetNewBlocks(n, nil)
			if !slices.Equal(got, front) {
				t.Fatalf("step %d: GetNewBlocks = %v, want the queue front %v", step, got, front)
			}
			var removed []uint64
			for _, ev := range p.events.take() {
				removed = append(removed, ev.BlockHashes...)
			}
			if !slices.Equal(removed, wantRemoved) {
				t.Fatalf("step %d: removed %x, want %x", step, removed, wantRemoved)
			}
			held = append(held, got...)
		case op == 1 && len(held) > 0: // a held block fills with one of 4 hashes
			b := held[rng.IntN(len(held))]
			h := uint64(1 + rng.IntN(4))
			if !p.blocks[b].hashed() {
				holders[h] = append(holders[h], b)
			}
			p.CacheBlock(b, h)
		case op == 2 && len(held) > 0: // free a few held blocks
			n := 1 + rng.IntN(len(held))
			p.Free(held[len(held)-n:])
			held = held[:len(held)-n]
		case op == 3: // hit: take a reference on the block Lookup returns
			h := uint64(1 + rng.IntN(4))
			if b, ok := p.Lookup(h); ok {
				p.Touch([]int32{b})
				held = append(held, b)
			}
		}
		for h := uint64(1); h <= 4; h++ {
			b, ok := p.Lookup(h)
			if want := holders[h]; ok != (len(want) > 0) || ok && b != want[0] {
				t.Fatalf("step %d: Lookup(%d) = %d, %v; holders %v", step, h, b, ok, want)
			}
		}
		if err := p.checkInvariants(); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
}
