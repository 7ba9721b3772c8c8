package replica

import (
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/eppsim/eppsim/arch"
)

// experimentsFile is the measured vLLM runs of ../shared (DESIGN.md).
const experimentsFile = "../../shared/latency/experiments.json"

type measuredRun struct {
	ID       string `json:"id"`
	Model    string `json:"model"`
	Hardware string `json:"hardware"`
	TP       int    `json:"tp"`
	Engine   struct {
		MaxNumSeqs  int     `json:"max_num_seqs"`
		MaxBatched  int     `json:"max_num_batched_tokens"`
		MaxModelLen int     `json:"max_model_len"`
		BlockSize   int     `json:"block_size"`
		Util        float64 `json:"gpu_memory_utilization"`
		Blocks      int     `json:"total_gpu_kv_blocks"`
	} `json:"engine"`
}

func loadMeasuredRuns(t *testing.T) []measuredRun {
	t.Helper()
	data, err := os.ReadFile(experimentsFile)
	if os.IsNotExist(err) {
		t.Skipf("%s not present", experimentsFile)
	}
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Experiments []measuredRun `json:"experiments"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Experiments
}

// TestKVCapacityMatchesMeasuredRuns computes num_gpu_blocks for every
// measured run that logged it (CPU offload ignored) and reports the
// relative error (docs/latency.md, "KV capacity", lists the same table).
//
// Bound: the non-KV memory model has four constants fitted to the seven
// distinct dense configurations (eight runs) by least squares; its largest
// in-sample error is 0.6%, so each dense run must be within 1%. The one
// MoE run, Llama-4-Scout FP8 on 2×H100, is outside what the model explains:
// vLLM kept 4.1 GiB per GPU more than the dense model predicts (the
// multimodal encoder's profiling, MoE kernel workspaces or CUDA-graph pools
// are candidates one run cannot separate), so the model over-predicts its
// blocks by about 31%; the test pins that miss to 25–35% so a change in the
// accounting shows.
func TestKVCapacityMatchesMeasuredRuns(t *testing.T) {
	runs := loadMeasuredRuns(t)
	gpus := arch.DefaultGPUs()
	checked := 0
	for _, r := range runs {
		if r.Engine.Blocks == 0 {
			continue
		}
		m, err := arch.LookupModel(r.Model)
		if err != nil {
			t.Fatal(err)
		}
		g, err := gpus.Lookup(r.Hardware)
		if err != nil {
			t.Fatal(err)
		}
		args := EngineArgs{BlockSize: r.Engine.BlockSize, MaxNumBatchedTokens: r.Engine.MaxBatched,
			MaxNumSeqs: r.Engine.MaxNumSeqs, MaxModelLen: r.Engine.MaxModelLen, GPUMemoryUtilization: r.Engine.Util}
		c, err := ComputeKVCapacity(m, &g, r.TP, args)
		if err != nil {
			t.Fatalf("%s: %v", r.ID, err)
		}
		rel := float64(c.Blocks-r.Engine.Blocks) / float64(r.Engine.Blocks)
		t.Logf("%-60s %6d measured %6d computed %+6.2f%%", r.ID, r.Engine.Blocks, c.Blocks, 100*rel)
		checked++
		if m.MoE != nil {
			if rel < 0.25 || rel > 0.35 {
				t.Errorf("%s (MoE): %+.2f%%, outside the documented 25–35%% over-prediction", r.ID, 100*rel)
			}
			continue
		}
		if math.Abs(rel) > 0.01 {
			t.Errorf("%s: %d blocks computed, %d measured (%+.2f%%, bound 1%%)", r.ID, c.Blocks, r.Engine.Blocks, 100*rel)
		}
	}
	if checked < 10 {
		t.Errorf("only %d runs log their KV blocks", checked)
	}
}

// TestKVCapacityExternalCheck: a run outside the fit. vLLM (mid-2025)
// serving Qwen3-235B-A22B-FP8 on 4×H100 with default arguments (8192
// batched tokens, 1024 sequences, utilisation 0.9) logged "Available KV
// cache memory: 8.11 GiB" (vllm-project/vllm issue #21348). The sampler's
// 1024 × 151,936 logits dominate its non-KV memory, which the fit (all
// runs at 128 sequences) only extrapolates to.
func TestKVCapacityExternalCheck(t *testing.T) {
	m, err := arch.LoadModel("../arch/testdata/Qwen3-235B-A22B-FP8.json")
	if err != nil {
		t.Fatal(err)
	}
	g, _ := arch.DefaultGPUs().Lookup("H100")
	c, err := ComputeKVCapacity(m, &g, 4, EngineArgs{})
	if err != nil {
		t.Fatal(err)
	}
	got := c.Available / (1 << 30)
	t.Logf("available %.2f GiB, logged 8.11 GiB", got)
	if math.Abs(got-8.11) > 0.4 {
		t.Errorf("available KV memory %.2f GiB, vLLM logged 8.11 GiB (bound ±0.4 GiB)", got)
	}
}

func TestKVCapacityFormula(t *testing.T) {
	m, _ := arch.LookupModel("meta-llama/Llama-3.1-8B-Instruct")
	g, _ := arch.DefaultGPUs().Lookup("H100")
	args := EngineArgs{MaxNumBatchedTokens: 2048, MaxNumSeqs: 128}
	c, err := ComputeKVCapacity(m, &g, 1, args)
	if err != nil {
		t.Fatal(err)
	}
	// 0.9 × 81,559 MiB − 2·8,030,261,248 B − A − 0.77 GiB, over 16 × 128 KiB.
	wantA := max(2048*2*(2*4096+3*14336.0), 1.65*2048*4096*2+51*128*128256.0)
	avail := 0.9*81559*(1<<20) - 2*8030261248 - wantA - 0.77*(1<<30)
	if c.Activation != wantA || c.BytesPerBlock != 16*128*1024 || c.Blocks != int(avail/(16*128*1024)) {
		t.Errorf("capacity %+v, want activation %g and %d blocks", c, wantA, int(avail/(16*128*1024)))
	}
	// FP8 KV doubles the blocks (nearly: the same bytes, half per block).
	c8, _ := ComputeKVCapacity(m, &g, 1, EngineArgs{MaxNumBatchedTokens: 2048, MaxNumSeqs: 128, KVCacheDtype: "fp8"})
	if c8.Blocks != int(avail/(16*64*1024)) {
		t.Errorf("fp8 KV: %d blocks", c8.Blocks)
	}
	// Larger blocks: fewer of them, same memory.
	c32, _ := ComputeKVCapacity(m, &g, 1, EngineArgs{BlockSize: 32, MaxNumBatchedTokens: 2048, MaxNumSeqs: 128})
	if c32.Blocks != c.Blocks/2 && c32.Blocks != (c.Blocks-1)/2 {
		t.Errorf("block size 32: %d blocks vs %d", c32.Blocks, c.Blocks)
	}
	// Too little memory is an error naming the budget.
	l40s, _ := arch.DefaultGPUs().Lookup("L40S")
	big, _ := arch.LookupModel("meta-llama/Llama-3.1-70B-Instruct")
	if _, err := ComputeKVCapacity(big, &l40s, 1, EngineArgs{}); err == nil {
		t.Error("70B on one L40S fits")
	}
	if _, err := ComputeKVCapacity(m, &g, 3, EngineArgs{}); err == nil {
		t.Error("TP3 accepted for 32 heads")
	}
}

// TestEngineConfigOverrideAndMaxModelLen: num_gpu_blocks_override wins;
// without it, a max_model_len the cache cannot hold is refused as vLLM
// refuses it.
func TestEngineConfigOverrideAndMaxModelLen(t *testing.T) {
	p, _ := LookupPreset("llama-3.1-8b-a100")
	q, _ := p.WithOverrides([]byte("engine: {num_gpu_blocks_override: 1500}"))
	if e, err := q.EngineConfig(); err != nil || e.NumGPUBlocks != 1500 {
		t.Fatalf("override: %+v %v", e, err)
	}
	small, err := p.WithOverrides([]byte("engine: {gpu_memory_utilization: 0.3}"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := small.EngineConfig(); err == nil {
		t.Error("0.3 of an A100 holds a 131072-token request?")
	}
	ok, _ := small.WithOverrides([]byte("engine: {max_model_len: 8192}"))
	if e, err := ok.EngineConfig(); err != nil || e.MaxModelLen != 8192 {
		t.Errorf("shorter max_model_len: %+v %v", e, err)
	}
}
