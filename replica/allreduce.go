package replica

// Tensor-parallel communication of the calibrated step-time model
// (docs/latency.md, "Tensor parallelism"). Every transformer layer ends
// its attention block and its MLP (or MoE) block with an all-reduce of
// the hidden states of the step's new tokens across the tensor-parallel
// group, so a step pays two all-reduces per layer, each of
// N·d·2 bytes (BF16 activations, whatever the weights' type).
//
// ../shared/spec/vllm-engine.md B.1 gives every call the ring's volume,
// N·d·2 B·2(TP−1)/TP (BLIS's tpAllReduceBasis), which the roofline model
// (steptime.go, B.3) keeps. The calibrated model follows what vLLM itself
// runs instead, read from its source: for the small calls of decode steps
// its one-stage kernel moves (TP−1)·S bytes into each GPU, 4× the ring's
// at TP 8 (7S against 1.75S), and its latency does not grow with the
// ring's length.
// vLLM picks the algorithm per call, and the algorithm sets how many bytes
// each GPU receives:
//
//   - vLLM's custom all-reduce (csrc/custom_all_reduce.cuh,
//     vllm/distributed/device_communicators/custom_all_reduce.py) serves
//     calls below its registered buffer size (8 MiB by default) on 2, 4, 6
//     or 8 GPUs fully connected by NVLink (NVSwitch: every GPU reaches
//     every other directly). vLLM also runs it on a pair of PCIe GPUs
//     with peer-to-peer access; eppsim does not know whether a PCIe part
//     has it and gives PCIe groups NCCL's ring. Its one-stage kernel, where every rank reads
//     the whole buffer of each peer and sums, runs on 2 GPUs always, on up
//     to 4 GPUs below 512 KiB and on up to 8 below 256 KiB; above those
//     sizes the two-stage kernel reduce-scatters (each rank reads its 1/TP
//     share from every peer) and all-gathers (each rank reads the other
//     reduced shares): 2·(TP−1)/TP of the buffer in all.
//   - Otherwise NCCL's ring all-reduce, which also moves 2·(TP−1)/TP of
//     the buffer through each GPU's link in each direction (NCCL's
//     definition of bus bandwidth, nccl-tests doc/PERFORMANCE.md).
//
// Every call also pays a latency that does not depend on its size: the
// kernel launch and the flag exchange that synchronizes the ranks
// (all_reduce_us). On a switched NVLink fabric every rank signals its peers
// at once, so that latency does not grow with the number of ranks the way a
// ring's does. The two-stage kernel synchronizes once more between its two
// phases and pays twoStageExtraUs on top.
//
// How fast the bytes arrive depends on the algorithm. NCCL's ring reaches
// most of the link at large sizes: the bytes cross the GPU's link in one
// direction at InterconnectGBps/2 (the catalogue states both directions,
// as datasheets do: 900 GB/s for H100's NVLink 4, 450 each way) times
// eta_link. vLLM's custom kernels do not: they run on a few dozen thread
// blocks that load their peers' buffers over NVLink, and they receive at
// customLinkShare of the one-way link whatever the group size.
//
// customLinkShare and twoStageExtraUs are measured, not fitted: the
// timings of vLLM's custom all-reduce (its all_reduce op on registered
// buffers of float32 elements, H100 SXM, without CUDA graphs, 100 calls
// each) published in sgl-project/sglang pull request #2904 (2025-01-15),
// read as t = latency + [two-stage] extra + bytes received / rate:
//   - rate: the slope between the 1 MiB and 4 MiB buffers gives 219 GB/s
//     at TP 2 (one-stage, the peer's buffer), 230 at TP 4 and 251 at TP 8
//     (two-stage, 2·(TP−1)/TP of it); their mean, 233 GB/s, is 0.52 of
//     the 450 GB/s one way;
//   - latency: at that rate the one-stage intercepts are 8.4–8.7 µs at TP 2
//     (1, 2 and 4 MiB), 7.5 µs at TP 4 and 7.9 µs at TP 8 (128 KiB), about
//     the same, while the two-stage ones are 13.2–13.9 µs at TP 4 and
//     13.5–16.2 µs at TP 8: about 5.5 µs more (the means, 13.5 and 14.8,
//     less TP 2's 8.6, are 4.9 and 6.2 µs).
//
// The eager timings include a launch and a copy into the registered
// buffer that CUDA graphs avoid; that part of the latency is all_reduce_us,
// fitted on the measured runs, and the rate and the extra synchronization,
// which happen on the GPUs, carry over.
const (
	customLinkShare = 0.52
	twoStageExtraUs = 5.5
)

// Custom all-reduce limits of vLLM (csrc/custom_all_reduce.cuh,
// CustomAllreduce.allreduce; custom_all_reduce.py, max_size).
const (
	customAllReduceMaxBytes = 8 << 20   // the registered buffer: larger calls go to NCCL
	oneStageMaxBytes4       = 512 << 10 // one-stage kernel below this on up to 4 GPUs
	oneStageMaxBytes8       = 256 << 10 // and below this on up to 8
)

// allReduceAlgorithm names the algorithm vLLM runs for one all-reduce.
type allReduceAlgorithm int

const (
	oneStage allReduceAlgorithm = iota // custom kernel, every rank reads every peer's buffer
	twoStage                           // custom kernel, reduce-scatter then all-gather
	ncclRing                           // NCCL's ring
)

// tensorParallel is a replica's tensor-parallel group as the all-reduce
// sees it.
type tensorParallel struct {
	ranks int
	// nvlink: the GPUs are fully connected by NVLink (the catalogue's
	// interconnect "nvlink": SXM parts on an NVSwitch baseboard), which
	// the custom all-reduce needs.
	nvlink bool
	// oneWay is the link's bandwidth in one direction, bytes/s.
	oneWay float64
}

// algorithm returns the algorithm vLLM picks for an all-reduce of size
// bytes on g (the rules of the comment above).
func (g tensorParallel) algorithm(size float64) allReduceAlgorithm {
	custom := g.nvlink && g.ranks%2 == 0 && g.ranks <= 8 && size < customAllReduceMaxBytes
	switch {
	case !custom:
		return ncclRing
	case g.ranks == 2, g.ranks <= 4 && size < oneStageMaxBytes4, size < oneStageMaxBytes8:
		return oneStage
	default:
		return twoStage
	}
}

// bytesIn returns the bytes one GPU receives over its link for an
// all-reduce of size bytes.
func (g tensorParallel) bytesIn(size float64) float64 {
	t := float64(g.ranks)
	if g.algorithm(size) == oneStage {
		return (t - 1) * size
	}
	return 2 * (t - 1) / t * size
}

// seconds is the time of one all-reduce of size bytes: the latency
// latencyUs (µs), plus twoStageExtraUs for the two-stage kernel, plus the
// received bytes at the link's one-way bandwidth times eta (NCCL's ring)
// or customLinkShare (vLLM's custom kernels).
func (g tensorParallel) seconds(size, latencyUs, eta float64) float64 {
	if g.ranks <= 1 {
		return 0
	}
	switch g.algorithm(size) {
	case oneStage:
		return latencyUs*1e-6 + g.bytesIn(size)/(g.oneWay*customLinkShare)
	case twoStage:
		return (latencyUs+twoStageExtraUs)*1e-6 + g.bytesIn(size)/(g.oneWay*customLinkShare)
	}
	return latencyUs*1e-6 + g.bytesIn(size)/(g.oneWay*eta)
}
