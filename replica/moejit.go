package replica

// A mixture of experts' routed experts run in vLLM's fused MoE kernel, a
// Triton kernel that Triton compiles the first time it is launched with a
// new specialisation, in the middle of a step, while the engine's host
// thread waits (vllm-project/vllm issue #43009, "Triton kernel JIT
// compilation during inference", and PR #45631, whose JIT monitor warns of
// each such compile as a latency spike that a longer warm-up would avoid;
// triton-lang/triton issue #4781 shows the same for vLLM's prefix-prefill
// kernel). What selects the specialisation:
//
//   - the tile configuration, which vLLM looks up for the step's token
//     count M at the nearest key of its tuned table (fused_moe.py,
//     try_get_optimal_moe_config: min over the keys of |key − M|, the
//     first on a tie); the keys are benchmark_moe.py's batch sizes,
//     moeConfigKeys;
//   - Triton's specialisation of integer arguments on divisibility by 16
//     (and equality to 1, which no step this counts reaches): the number
//     of routed rows, M·top_k, is one (pytorch/helion issue #165 describes
//     the recompiles a change of these annotations causes; vLLM PR #49903
//     warms three variants of its own kernels for this reason);
//   - which of the layer's two GEMMs it is (the gate/up projection and the
//     down projection differ in compile-time constants: the routed-weight
//     multiply, top_k), so each new class compiles two kernels.
//
// vLLM compiles at start-up what start-up runs: the profiling pass at
// max_num_batched_tokens and the CUDA graphs it captures, which cover
// every step of at most the largest captured size (such steps are padded
// to a captured size, cudagraph.go). A step above it runs eagerly with its
// own token count, and the first step of each class the start-up did not
// run pays the compiles. Over a benchmark, that is a handful of stalls in
// the first seconds to minutes of a fresh engine and none after.
//
// vllm-engine.md says nothing of start-up or of kernel compiles (its step
// time, B.1–B.3, is a warmed-up engine's), so this is beyond the spec, as
// the CUDA-graph padding is (cudagraph.go); the roofline and linear step
// models have no such stalls.
//
// The measured runs show it: the three sustained Mixtral-8x7B TP 2 runs of
// ../shared/latency have a first-stage TTFT tail (p99 0.38–0.48 s, p99.9
// 1.0–1.4 s, max 1.2–2.0 s against a p95 of 63–66 ms) that their second
// stages, at twice the rate, do not have (p99 68 ms, max 0.1 s), and that
// the dense models at TP 1 and 2 do not have (docs/latency.md, "Tails").
//
// Not modelled: the padded length of the sorted routing table, another
// integer argument whose divisibility depends on the tile's M size; a
// model and GPU with no tuned table, whose default configuration changes
// only where M passes the expert count (its classes here are the tuned
// table's, an upper bound); configurations that several keys share (each
// key counts as its own); quantised experts, whose kernels vLLM may take
// from a precompiled library (they compile nothing here: docs/latency.md,
// "Tails", says why); other Triton kernels a model may compile at first
// use (dense models' compiled graphs are warmed at start-up for every
// size they run); SGLang, whose warm-up differs (its replicas do not use
// this); a Triton cache kept from an earlier run of the pod, for which
// EngineArgs has kernel_cache_warm.

// moeConfigKeys are the token counts vLLM's tuned fused-MoE tables are
// keyed by (benchmarks/kernels/benchmark_moe.py's default batch sizes).
var moeConfigKeys = [...]int{1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 1536, 2048, 3072, 4096}

// MoEKernelCompileMs is the host time one compile of the fused MoE kernel
// takes, in ms. No source gives it for this kernel; 600 ms per kernel
// (1.2 s per class, two kernels) is read from the first-stage tails of the
// three sustained Mixtral-8x7B runs of ../shared/latency, which imply 6 to
// 11 stalls of 1.1 to 1.5 s each (an in-sample estimate: docs/latency.md,
// "Tails"). It is the same order as a public report of twelve Triton
// compiles taking about 14 s on an RTX 3090's host (syv-ai/qwen38-27b-
// rtx3090 issue #155).
const MoEKernelCompileMs = 600

// moeKernels is a vLLM engine's view of which fused-MoE kernel classes a
// step needs compiled: steps up to graphs' largest size and the profiling
// pass's class are compiled at start-up.
type moeKernels struct {
	topK    int
	largest int // the largest CUDA graph size (0: none)
	warm    int // the class the profiling pass compiled (-1: none)
	stall   int64
}

// newMoEKernels returns the classes of an engine of a top-k mixture of
// experts with CUDA graphs g and a max_num_batched_tokens budget.
func newMoEKernels(topK int, g cudaGraphSizes, budget int) *moeKernels {
	k := &moeKernels{topK: max(topK, 1), largest: g.largest, stall: 2 * MoEKernelCompileMs * 1e6}
	k.warm = k.classOf(budget)
	return k
}

// classOf is the kernel class of a step of n tokens: its config key's
// index times 2, plus 1 when n·top_k is divisible by 16.
func (k *moeKernels) classOf(n int) int {
	best := 0
	for i, key := range moeConfigKeys {
		if abs(key-n) < abs(moeConfigKeys[best]-n) {
			best = i
		}
	}
	c := 2 * best
	if n*k.topK%16 == 0 {
		c++
	}
	return c
}

// class returns the class a step of n tokens runs and the stall its first
// use costs; ok is false when the start-up compiled it.
func (k *moeKernels) class(n int) (class int, stall int64, ok bool) {
	if n <= k.largest {
		return 0, 0, false
	}
	c := k.classOf(n)
	if c == k.warm {
		return 0, 0, false
	}
	return c, k.stall, true
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// kernelCompiler is a step model whose engine compiles kernels the first
// time a step needs them (moeKernels): compilesKernels reports whether any
// step can, compileClass returns the class a step of n tokens runs and the
// host time its first use costs, ok false when no step of n tokens
// compiles anything. The engine asks compilesKernels once, when it is
// made.
type kernelCompiler interface {
	compilesKernels() bool
	compileClass(n int) (class int, stall int64, ok bool)
}
