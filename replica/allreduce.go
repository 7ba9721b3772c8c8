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
//   - On Hopper and Blackwell, symmetric memory above the custom kernel's
//     limits (below).
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
	customAllReduceMaxBytes = 8 << 20   // the registered buffer: larger calls go elsewhere
	oneStageMaxBytes4       = 512 << 10 // one-stage kernel below this on up to 4 GPUs
	oneStageMaxBytes8       = 256 << 10 // and below this on up to 8
)

// Symmetric memory. Since September 2025 (vllm-project/vllm pull request #24111,
// merged 2025-09-02, which made VLLM_ALLREDUCE_USE_SYMM_MEM default to on)
// an NVLink group of GPUs vLLM keeps limits for runs a third kind of
// all-reduce, PyTorch's symmetric-memory collectives
// (vllm/distributed/device_communicators/symm_mem.py), and the custom
// kernel then serves only the calls it beats them on. CudaCommunicator.
// all_reduce tries, in order: the custom kernel for calls below
// min(8 MiB, CUSTOM_ALL_REDUCE_MAX_SIZES[capability][TP]); symmetric
// memory for BF16 calls below SYMM_MEM_ALL_REDUCE_MAX_SIZES[capability][TP]
// (SymmMemCommunicator.should_use_symm_mem refuses every other dtype, so a
// float16 model's calls skip it); NCCL for the rest. Symmetric memory runs
// multimem_all_reduce_ (NVLink SHARP: the NVSwitch sums the ranks' slices
// and multicasts the result) on the group sizes of _WORLD_SIZES_MULTIMEM,
// two_shot_all_reduce_ (a reduce-scatter and an all-gather over peer
// loads) on the others. The limits (all_reduce_utils.py, as of vLLM 0.15):
//
//	capability  custom below (TP 2 / 4 / 6 / 8)   symmetric memory below      multimem on
//	9.0 Hopper  64 MiB / 32 MiB / 512 KiB / 256 KiB  64 / 32 / 64 / 64 MiB    TP 4, 6, 8
//	10.0 B200   2 / 2 / 1 / 1 MiB                    8 / 32 / 128 / 128 MiB   TP 6, 8
//
// so on H100 a decode step's all-reduce (a few hundred KiB to a few MiB)
// is the custom kernel at TP 2 and 4 and multimem at TP 8, where it was
// the two-stage custom kernel before. The NCCL symmetric-memory path
// (VLLM_USE_NCCL_SYMM_MEM) and FlashInfer's fused all-reduce are off by
// default and not modelled.
//
// How fast they are, read from the published timings (µs per call, BF16
// buffers, H100 SXM, vLLM's benchmarks/kernels/benchmark_device_communicators.py):
// multimem moves each rank's buffer up to the switch and the reduced
// result back, S·(1 + 1/TP) bytes each way, and two-shot 2·(TP−1)/TP·S as
// the two-stage kernel does, both at customLinkShare of the one-way link
// (they too are thread blocks loading over NVLink) after one latency,
// without the two-stage kernel's extra synchronization:
//   - multimem, TP 6 (pull request #24111): 13, 16, 18, 21, 25 and 31 µs
//     for 0.5–4 MiB; the model, with the fitted 8.7 µs latency, gives
//     11.3–29.6 µs, within 15%;
//   - multimem and two-shot, TP 8 (pull request #42324, the last of its
//     SM 9.0 tables): 11–46 µs and 15–65 µs for 0.5–8 MiB; the model is
//     within 10% of both from 1 MiB up (TestAllReduceMatchesGraphTimings).
//
// eppsim takes the capability from the GPU catalogue (arch.GPU.
// ComputeCapability); a GPU without one (a user entry that does not say)
// gets the custom kernel below 8 MiB and NCCL above, vLLM's behaviour
// where symmetric memory is unavailable.
type symmetricMemoryLimits struct {
	customBelow, symmBelow float64
	multimem               bool
}

// vllmSymmetricMemory returns vLLM's limits for a group of ranks GPUs of
// compute capability capability, and false where vLLM keeps none (the
// table above).
func vllmSymmetricMemory(capability string, ranks int) (symmetricMemoryLimits, bool) {
	const kib, mib = 1 << 10, 1 << 20
	switch capability {
	case "9.0":
		switch ranks {
		case 2:
			return symmetricMemoryLimits{64 * mib, 64 * mib, false}, true
		case 4:
			return symmetricMemoryLimits{32 * mib, 32 * mib, true}, true
		case 6:
			return symmetricMemoryLimits{512 * kib, 64 * mib, true}, true
		case 8:
			return symmetricMemoryLimits{256 * kib, 64 * mib, true}, true
		}
	case "10.0":
		switch ranks {
		case 2:
			return symmetricMemoryLimits{2 * mib, 8 * mib, false}, true
		case 4:
			return symmetricMemoryLimits{2 * mib, 32 * mib, false}, true
		case 6:
			return symmetricMemoryLimits{1 * mib, 128 * mib, true}, true
		case 8:
			return symmetricMemoryLimits{1 * mib, 128 * mib, true}, true
		}
	}
	return symmetricMemoryLimits{}, false
}

// allReduceAlgorithm names the algorithm vLLM runs for one all-reduce.
type allReduceAlgorithm int

const (
	oneStage    allReduceAlgorithm = iota // custom kernel, every rank reads every peer's buffer
	twoStage                              // custom kernel, reduce-scatter then all-gather
	ncclRing                              // NCCL's ring
	multimem                              // symmetric memory, NVLink SHARP
	symmTwoShot                           // symmetric memory, reduce-scatter then all-gather
)

// tensorParallel is a replica's tensor-parallel group as the all-reduce
// sees it.
type tensorParallel struct {
	ranks int
	// nvlink: the GPUs are fully connected by NVLink (the catalogue's
	// interconnect "nvlink": SXM parts on an NVSwitch baseboard), which
	// the custom all-reduce and symmetric memory need.
	nvlink bool
	// oneWay is the link's bandwidth in one direction, bytes/s.
	oneWay float64
	// capability is the GPUs' CUDA compute capability ("" unknown), bf16
	// whether the activations are BF16: together they decide whether
	// symmetric memory serves a call.
	capability string
	bf16       bool
}

// algorithm returns the algorithm vLLM picks for an all-reduce of size
// bytes on g (the rules of the comments above).
func (g tensorParallel) algorithm(size float64) allReduceAlgorithm {
	symm, hasSymm := symmetricMemoryLimits{}, false
	if g.nvlink {
		symm, hasSymm = vllmSymmetricMemory(g.capability, g.ranks)
	}
	customBelow := float64(customAllReduceMaxBytes)
	if hasSymm {
		customBelow = min(customBelow, symm.customBelow)
	}
	custom := g.nvlink && g.ranks%2 == 0 && g.ranks <= 8 && size < customBelow
	switch {
	case custom && (g.ranks == 2 || g.ranks <= 4 && size < oneStageMaxBytes4 || size < oneStageMaxBytes8):
		return oneStage
	case custom:
		return twoStage
	case hasSymm && g.bf16 && size < symm.symmBelow && symm.multimem:
		return multimem
	case hasSymm && g.bf16 && size < symm.symmBelow:
		return symmTwoShot
	}
	return ncclRing
}

// bytesIn returns the bytes one GPU receives over its link for an
// all-reduce of size bytes.
func (g tensorParallel) bytesIn(size float64) float64 {
	t := float64(g.ranks)
	switch g.algorithm(size) {
	case oneStage:
		return (t - 1) * size
	case multimem:
		return (1 + 1/t) * size
	}
	return 2 * (t - 1) / t * size
}

// seconds is the time of one all-reduce of size bytes: the latency
// latencyUs (µs), plus twoStageExtraUs for the two-stage kernel, plus the
// received bytes at the link's one-way bandwidth times eta (NCCL's ring)
// or customLinkShare (vLLM's custom kernels and symmetric memory).
func (g tensorParallel) seconds(size, latencyUs, eta float64) float64 {
	if g.ranks <= 1 {
		return 0
	}
	switch g.algorithm(size) {
	case ncclRing:
		return latencyUs*1e-6 + g.bytesIn(size)/(g.oneWay*eta)
	case twoStage:
		return (latencyUs+twoStageExtraUs)*1e-6 + g.bytesIn(size)/(g.oneWay*customLinkShare)
	}
	return latencyUs*1e-6 + g.bytesIn(size)/(g.oneWay*customLinkShare)
}
