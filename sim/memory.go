package sim

import (
	"fmt"

	"github.com/eppsim/eppsim/replica"
)

// DefaultMaxFleetBytes is the memory a fleet may take by default
// (Options.MaxFleetBytes 0): 8 GiB of estimated engine state. Past 768 MB
// of live data the garbage collector lets the heap grow by half of it
// (internal/gctune), so with the trace and the EPP's state such a run
// fits a 16 GiB machine. The default preset's replica (llama-3.1-8b-h100,
// 25,402 KV blocks) is estimated at 2 MB, so about 4,300 of them fit;
// 10,000 of them (19 GiB, 28 GiB of heap) are refused.
const DefaultMaxFleetBytes int64 = 8 << 30

// FleetMemory estimates the memory the fleet's engines hold once their
// caches are full (replica.Config.MemoryBytes of each) and returns the
// largest replica's share with its KV block count.
func FleetMemory(fleet []ReplicaSpec) (total, largest int64, largestBlocks int, err error) {
	for _, r := range fleet {
		var b int64
		var blocks int
		if r.Preset.EngineTypeOf() == replica.EngineSGLang {
			cfg, err := SGLangConfig(r)
			if err != nil {
				return 0, 0, 0, err
			}
			// A page is its KV block.
			b, blocks = cfg.MemoryBytes(), cfg.MaxTotalNumTokens/cfg.PageSize
		} else {
			cfg, err := r.Preset.EngineConfig()
			if err != nil {
				return 0, 0, 0, fmt.Errorf("replica %s: %w", r.Name, err)
			}
			b, blocks = cfg.MemoryBytes(), cfg.NumGPUBlocks
		}
		total += b
		if b > largest {
			largest, largestBlocks = b, blocks
		}
	}
	return total, largest, largestBlocks, nil
}

// MemoryError is a fleet whose estimated memory exceeds the bound.
type MemoryError struct {
	Replicas int
	// Estimate and Limit are bytes; Largest the largest replica's share,
	// of LargestBlocks KV blocks.
	Estimate, Limit, Largest int64
	LargestBlocks            int
}

func (e *MemoryError) Error() string {
	return fmt.Sprintf("the fleet needs an estimated %s of memory (%d replicas; up to %s each for the pool and prefix cache of its %d KV blocks), more than the bound of %s",
		gib(e.Estimate), e.Replicas, mib(e.Largest), e.LargestBlocks, gib(e.Limit))
}

// CheckFleetMemory returns a *MemoryError when the fleet's FleetMemory
// exceeds limit (0: DefaultMaxFleetBytes; negative: no bound).
func CheckFleetMemory(fleet []ReplicaSpec, limit int64) error {
	if limit < 0 {
		return nil
	}
	if limit == 0 {
		limit = DefaultMaxFleetBytes
	}
	total, largest, blocks, err := FleetMemory(fleet)
	if err != nil {
		return err
	}
	if total > limit {
		return &MemoryError{Replicas: len(fleet), Estimate: total, Limit: limit, Largest: largest, LargestBlocks: blocks}
	}
	return nil
}

func gib(b int64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }
func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
