package replica

import (
	"runtime"
	"testing"
)

// TestMemoryBytes: Config.MemoryBytes is what block pools hold once every
// block is cached (measured on the heap: within 10% of the estimate
// without EngineOverheadBytes), and the default preset's estimate is
// about 2 MB (its 25,402 blocks at 78 bytes), the figure docs/replicas.md
// quotes.
func TestMemoryBytes(t *testing.T) {
	const blocks, pools = 20000, 8
	cfg := Config{NumGPUBlocks: blocks}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	keep := make([]*BlockPool, pools)
	for i := range keep {
		p := NewBlockPool(blocks, nil)
		ids := p.GetNewBlocks(blocks-1, nil)
		for j, b := range ids {
			p.CacheBlock(b, uint64(i)<<32|uint64(j)+1)
		}
		p.Free(ids)
		keep[i] = p
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	got := float64(after.HeapAlloc-before.HeapAlloc) / pools
	want := float64(cfg.MemoryBytes() - EngineOverheadBytes)
	if got < 0.9*want || got > 1.1*want {
		t.Errorf("a full pool of %d blocks holds %.0f bytes, the estimate is %.0f", blocks, got, want)
	}
	t.Logf("full pool: %.0f bytes, estimate %.0f", got, want)
	runtime.KeepAlive(keep)

	p, err := LookupPreset("llama-3.1-8b-h100")
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.EngineConfig()
	if err != nil {
		t.Fatal(err)
	}
	if m := c.MemoryBytes(); c.NumGPUBlocks != 25402 || m < 1.9e6 || m > 2.1e6 {
		t.Errorf("llama-3.1-8b-h100: %d blocks, %d bytes", c.NumGPUBlocks, m)
	}
	// The CPU tier counts.
	c.Offload = &OffloadConfig{CPUBlocks: 10000}
	if c.MemoryBytes() <= 2.1e6 {
		t.Errorf("with a CPU tier: %d bytes", c.MemoryBytes())
	}
}
