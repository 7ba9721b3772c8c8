package replica

import (
	"unsafe"

	"github.com/eppsim/eppsim/internal/blockmap"
)

// EngineOverheadBytes is what an engine holds besides its KV bookkeeping
// (scheduler, queues, hasher, step model, statistics), measured: the peak
// RSS of runs of 1,000 to 4,000 replicas of 2-block pools, per replica,
// rounded up.
const EngineOverheadBytes = 64 << 10

// MemoryBytes estimates the memory an engine of configuration c holds once
// its caches are full: the GPU block pool (the blocks, the free queue's
// ring, the prefix-cache map at its full size), the CPU tier's slots, free
// list and index when offloading is on, and EngineOverheadBytes. A run's
// requests, the EPP's per-endpoint state (its approximate index grows
// with the traffic up to its lruCapacityPerServer) and the trace come on
// top.
func (c Config) MemoryBytes() int64 {
	n := int64(c.NumGPUBlocks)
	b := n*int64(unsafe.Sizeof(block{})) + int64(freeRingSize(c.NumGPUBlocks))*4 +
		blockmap.Bytes(blockmap.GroupsFor(c.NumGPUBlocks))
	if o := c.Offload; o != nil && o.CPUBlocks > 0 {
		b += int64(o.CPUBlocks)*int64(unsafe.Sizeof(cpuSlot{})+4) + blockmap.Bytes(blockmap.GroupsFor(o.CPUBlocks))
	}
	return b + EngineOverheadBytes
}
