package replica

// vLLM replays a forward pass from CUDA graphs captured at start-up for a
// fixed list of token counts, and a step of n tokens runs as the graph of
// the smallest captured size ≥ n, the extra rows being padding
// (vllm/config/vllm.py, VllmConfig.pad_for_cudagraph; the model runner pads
// whenever CUDA graphs are on and n is at most the largest captured size,
// uniform decode batches under FULL graphs and mixed ones under PIECEWISE
// graphs, FULL_AND_PIECEWISE being the default mode). The captured sizes,
// unless --cudagraph-capture-sizes gives them, are
//
//	[1, 2, 4] + range(8, min(cap+1, 256), 8) + range(256, cap+1, 16)
//
// with cap = min(max_num_seqs·2, 512, max_num_batched_tokens)
// (--max-cudagraph-capture-size; vLLM's docs for it give the pattern and
// the default). A step above the largest size runs without a graph and
// unpadded.
//
// What the padding costs: the padded rows go through every linear layer,
// the all-reduces and, for a mixture of experts, the router, which sends
// them to experts like real tokens (vllm-project/vllm PR #38128, "padded
// tokens flow through the MoE router"; PR #46428 added an opt-in skip,
// VLLM_MOE_SKIP_PADDING, off by default; SGLang PR #25852 describes the
// same extra expert-weight loads at low batch). Attention gives them no
// context (their sequence lengths are 0) and the sampler reads only real
// rows' logits, so neither counts them. For a dense model's memory-bound
// decode the padding changes almost nothing; for a mixture of experts at
// small batches it raises the experts a step reads: Llama-4-Scout's top-1
// of 16 reaches 7.0 experts with 9 tokens and 10.3 with the 16 they run as.
//
// This departs from vllm-engine.md B.1, which counts linear FLOPs per new
// token and the all-reduce's volume on the step's tokens, and says nothing
// of CUDA graphs: here both count the padded rows, and so do the experts a
// mixture of experts reaches. The spec's `roofline` step model keeps B.1.

// cudaGraphSizes is vLLM's default CUDA-graph capture list, held as its
// largest size (0: no graphs, every step unpadded).
type cudaGraphSizes struct {
	largest int
}

// vllmCUDAGraphSizes is the capture list vLLM builds for an engine of
// maxNumSeqs sequences and a maxNumBatchedTokens token budget.
func vllmCUDAGraphSizes(maxNumSeqs, maxNumBatchedTokens int) cudaGraphSizes {
	limit := min(2*maxNumSeqs, 512, maxNumBatchedTokens)
	switch {
	case limit >= 256:
		return cudaGraphSizes{largest: 256 + (limit-256)/16*16}
	case limit >= 8:
		return cudaGraphSizes{largest: limit / 8 * 8}
	case limit >= 4:
		return cudaGraphSizes{largest: 4}
	case limit >= 1:
		return cudaGraphSizes{largest: min(limit, 2)}
	}
	return cudaGraphSizes{}
}

// padded is the token count a step of n tokens runs as: the smallest
// captured size ≥ n, or n itself above the largest.
func (g cudaGraphSizes) padded(n int) int {
	switch {
	case n <= 0 || n > g.largest:
		return n
	case n <= 2:
		return n
	case n <= 4:
		return 4
	case n <= 256:
		return (n + 7) / 8 * 8
	}
	return 256 + (n-256+15)/16*16
}
