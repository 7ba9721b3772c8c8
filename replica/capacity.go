package replica

import (
	"fmt"

	"github.com/eppsim/eppsim/arch"
)

// KVCapacity is the KV-cache sizing of one GPU of a replica (all its
// tensor-parallel ranks are alike).
type KVCapacity struct {
	DeviceBytes   float64 // device memory
	Requested     float64 // gpu_memory_utilization × device memory
	Weights       float64 // weights per GPU
	Activation    float64 // activation reserve per GPU
	Reserve       float64 // non-torch memory per GPU
	Available     float64 // what is left for the KV cache
	BytesPerToken int64   // KV bytes per token on one GPU
	BytesPerBlock int64   // BytesPerToken · block_size
	Blocks        int     // num_gpu_blocks, null block included
}

// ComputeKVCapacity estimates num_gpu_blocks the way BLIS's
// CalculateKVBlocks does (B.3): memory·utilisation minus BF16 weights,
// activations (5.5 GiB for a dense model, split across TP ranks) and
// non-torch memory (0.15 GiB at TP1, 0.6 GiB per GPU at TP>1), divided by
// the bytes of one KV block per GPU.
func ComputeKVCapacity(m *arch.Model, g *arch.GPU, tp int, e EngineArgs) (KVCapacity, error) {
	if err := m.CheckTP(tp); err != nil {
		return KVCapacity{}, err
	}
	e = e.withDefaults(m, g)
	elem, err := m.KVElementBytes(e.KVCacheDtype)
	if err != nil {
		return KVCapacity{}, err
	}
	const gib = 1 << 30
	p := m.Params()
	c := KVCapacity{DeviceBytes: g.MemoryGB * gib}
	c.Requested = c.DeviceBytes * e.GPUMemoryUtilization
	c.Weights = float64(m.LinearParams()+p.Embedding+p.Embedding) * 2 / float64(tp)
	c.Activation = 5.5 * gib / float64(tp)
	c.Reserve = 0.15 * gib
	if tp > 1 {
		c.Reserve = 0.6 * gib
	}
	c.Available = c.Requested - c.Weights - c.Activation - c.Reserve
	c.BytesPerToken = m.KVBytesPerToken(elem, tp)
	c.BytesPerBlock = c.BytesPerToken * int64(e.BlockSize)
	c.Blocks = int(c.Available / float64(c.BytesPerBlock))
	if c.Blocks < 2 {
		return c, fmt.Errorf("kv capacity: model %s does not fit on %d×%s", m.Name, tp, g.Name)
	}
	return c, nil
}
