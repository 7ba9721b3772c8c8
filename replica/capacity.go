package replica

import (
	"fmt"
	"math"

	"github.com/eppsim/eppsim/arch"
)

// KVCapacity is vLLM's KV-cache sizing for one GPU of a replica (all its
// tensor-parallel ranks are alike). vLLM v1 (gpu_worker
// determine_available_memory, then kv_cache_utils) loads the weights,
// profiles a dummy forward pass of max_num_batched_tokens tokens followed
// by a dummy sampling step for max_num_seqs requests, and gives the KV
// cache what is left of gpu_memory_utilization × device memory:
//
//	num_gpu_blocks = ⌊(util·M − W/TP − A − R) / (L·2·(h_kv/TP)·d_h·b_kv·block_size)⌋
//
// with W/TP the weights per GPU (arch.Model.WeightBytes), A the profiled
// activation peak and R the memory outside the activations and weights
// (CUDA context growth, cuBLAS workspaces, CUDA-graph pools, and NCCL and
// custom all-reduce buffers with TP > 1). The count includes the null
// block, as vLLM's num_gpu_blocks and its "GPU KV cache size" log line do;
// Config.NumGPUBlocks has the same meaning. The model of A and R, and its
// fit to the measured runs, are in docs/latency.md ("KV capacity").
type KVCapacity struct {
	DeviceBytes   float64 // M: device memory vLLM sees
	Requested     float64 // util·M
	Weights       float64 // W/TP
	Activation    float64 // A
	Reserve       float64 // R
	Available     float64 // util·M − W/TP − A − R
	BytesPerToken int64   // KV bytes per token on one GPU
	BytesPerBlock int64   // BytesPerToken · block_size
	Blocks        int     // ⌊Available / BytesPerBlock⌋, null block included
}

// The non-KV memory model (docs/latency.md, "KV capacity"), fitted to the
// vLLM v0.15 runs of ../shared/latency/experiments.json that log their
// KV-block counts.
const (
	// reserveBytes is R at TP1: memory that is neither weights nor the
	// profiled activation peak.
	reserveBytes = 0.77 * (1 << 30)
	// reserveTPBytes is the extra R per GPU with TP > 1 (NCCL and custom
	// all-reduce buffers).
	reserveTPBytes = 0.18 * (1 << 30)
	// samplerBytesPerLogit is the sampler's dummy-run peak per entry of the
	// max_num_seqs × vocabulary logits matrix: the logits in BF16 and FP32,
	// the top-k/top-p sort (values and int64 indices), softmax, cumulative
	// sum and masks, ≈ 51 bytes.
	samplerBytesPerLogit = 51.0
	// hiddenCopiesAtSampling is how many [max_num_batched_tokens, d]
	// activation tensors in the model dtype are still alive while the
	// sampler runs (the final hidden states and part of the residual).
	hiddenCopiesAtSampling = 1.65
)

// activationPeak is A: the larger of the forward pass's peak (residual and
// hidden states, plus the MLP's gate/up output and activation, 3·F/TP wide
// where F is the widest per-token MLP: d_ff, or the top-k experts plus the
// shared ones) and the sampling step's (hidden states plus the logits
// matrix and its temporaries).
func activationPeak(m *arch.Model, tp, batchedTokens, maxSeqs int) float64 {
	T, d := float64(batchedTokens), float64(m.Hidden)
	el := float64(m.Dtype.ServingBytes())
	ff := float64(m.Intermediate)
	if e := m.MoE; e != nil {
		ff = max(ff, float64(e.ExpertsPerToken*e.ExpertIntermediate+e.SharedExperts*e.SharedIntermediate))
	}
	forward := T * el * (2*d + 3*ff/float64(tp))
	seqs := float64(min(maxSeqs, batchedTokens))
	sampler := hiddenCopiesAtSampling*T*d*el + samplerBytesPerLogit*seqs*float64(m.Vocab)
	return max(forward, sampler)
}

// ComputeKVCapacity sizes the KV cache of model m on GPUs g at
// tensor-parallel degree tp with engine arguments e (defaults applied).
func ComputeKVCapacity(m *arch.Model, g *arch.GPU, tp int, e EngineArgs) (KVCapacity, error) {
	return computeKVCapacity(m, g, tp, 1, e)
}

// computeKVCapacity is ComputeKVCapacity for one data-parallel rank of a
// mixture of experts whose routed experts are split over expertShards·tp
// GPUs (Preset.ExpertShards).
func computeKVCapacity(m *arch.Model, g *arch.GPU, tp, expertShards int, e EngineArgs) (KVCapacity, error) {
	if err := m.CheckTP(tp); err != nil {
		return KVCapacity{}, err
	}
	e = e.withDefaults(m, g)
	elem, err := m.KVElementBytes(e.KVCacheDtype)
	if err != nil {
		return KVCapacity{}, err
	}
	c := KVCapacity{DeviceBytes: g.DeviceMemoryBytes()}
	c.Requested = e.GPUMemoryUtilization * c.DeviceBytes
	c.Weights = float64(m.WeightBytesWithExperts(tp, expertShards))
	c.Activation = activationPeak(m, tp, e.MaxNumBatchedTokens, e.MaxNumSeqs)
	c.Reserve = reserveBytes
	if tp > 1 {
		c.Reserve += reserveTPBytes
	}
	c.Available = c.Requested - c.Weights - c.Activation - c.Reserve
	c.BytesPerToken = m.KVBytesPerToken(elem, tp)
	// A block holds every layer's pages, or, with vLLM's hybrid KV cache
	// manager on, a hybrid model's group of KVBlockLayers (full and
	// sliding-window layers in groups of equal size over one pool: the
	// count vLLM logs). The simulated pool spends a request's blocks on
	// its whole context, as the full-attention group does; the sliding
	// groups' blocks (the last window of each, a few per request) are not
	// counted.
	layers := m.KVBlockLayers()
	if e.DisableHybridKVCacheManager {
		layers = m.Layers
	}
	c.BytesPerBlock = c.BytesPerToken / int64(m.Layers) * int64(layers) * int64(e.BlockSize)
	if c.Available > 0 {
		c.Blocks = int(math.Floor(c.Available / float64(c.BytesPerBlock)))
	}
	if c.Blocks < 2 {
		const gib = 1 << 30
		return c, fmt.Errorf("kv capacity: %s does not fit on %d×%s: %.2f GiB requested (gpu_memory_utilization %g), %.2f GiB weights, %.2f GiB activations, %.2f GiB reserved per GPU",
			m.Name, tp, g.Name, c.Requested/gib, e.GPUMemoryUtilization, c.Weights/gib, c.Activation/gib, c.Reserve/gib)
	}
	return c, nil
}
