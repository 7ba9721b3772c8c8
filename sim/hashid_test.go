package sim

import (
	"os"
	"testing"

	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/workload"
)

// TestHashIDChainsMatchTokenChains checks the premise of runner.promptHashes:
// on hash-id traces the engine hash chains derived from trace block ids
// (Engine.ChainHashIDs) have the same length as the token chains
// (Engine.ChainHashes) and induce the same prefix equalities, i.e. token
// hash and id hash correspond one to one across every block of every
// request, salt or not.
func TestHashIDChainsMatchTokenChains(t *testing.T) {
	traces := []struct {
		path string
		max  int
	}{
		{"../workload/testdata/mooncake.jsonl", 0},
		{"../workload/testdata/alibaba.jsonl", 0},
		{"testdata/micro_mooncake.jsonl", 0},
		{sharedMooncake, 400},
	}
	for _, bs := range []int{16, 32} {
		cfg := replica.Config{BlockSize: bs, NumGPUBlocks: 64, MaxNumBatchedTokens: 64, MaxNumSeqs: 4}
		eng, err := replica.NewEngine(cfg, unitStep{})
		if err != nil {
			t.Fatal(err)
		}
		for _, tr := range traces {
			if _, err := os.Stat(tr.path); err != nil {
				continue // the shared trace is optional
			}
			src, err := workload.Open(tr.path, workload.Options{Seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			var reqs []*workload.Request
			if tr.max > 0 {
				reqs, err = workload.Drain(&limit{src: src, n: tr.max})
			} else {
				reqs, err = workload.Drain(src)
			}
			src.Close()
			if err != nil {
				t.Fatal(err)
			}
			tokToID, idToTok := map[uint64]uint64{}, map[uint64]uint64{}
			blocks := 0
			for _, wr := range reqs {
				if wr.HashIDs == nil {
					t.Fatalf("%s: request %d has no hash ids", tr.path, wr.ID)
				}
				for _, salt := range []string{"", "s1"} {
					want := eng.ChainHashes(wr.PromptTokens, salt)
					got, ok := eng.ChainHashIDs(wr.PromptTokens, wr.HashIDs, wr.HashBlockSize, salt)
					if ok != (wr.HashBlockSize%bs == 0) {
						t.Fatalf("%s: request %d: ChainHashIDs ok = %v for trace blocks of %d, engine blocks of %d", tr.path, wr.ID, ok, wr.HashBlockSize, bs)
					}
					if !ok {
						continue
					}
					if len(got) != len(want) {
						t.Fatalf("%s: request %d: %d id hashes, %d token hashes", tr.path, wr.ID, len(got), len(want))
					}
					for i := range want {
						if g, seen := tokToID[want[i]]; seen && g != got[i] {
							t.Fatalf("%s: request %d block %d: one token prefix, two id hashes", tr.path, wr.ID, i)
						}
						if w, seen := idToTok[got[i]]; seen && w != want[i] {
							t.Fatalf("%s: request %d block %d: one id hash, two token prefixes", tr.path, wr.ID, i)
						}
						tokToID[want[i]], idToTok[got[i]] = got[i], want[i]
						blocks++
					}
				}
			}
			if blocks == 0 && reqs[0].HashBlockSize%bs == 0 {
				t.Fatalf("%s: no full blocks checked", tr.path)
			}
		}
	}
	cfg := replica.Config{BlockSize: 16, NumGPUBlocks: 64, MaxNumBatchedTokens: 64, MaxNumSeqs: 4}
	eng, _ := replica.NewEngine(cfg, unitStep{})
	if _, ok := eng.ChainHashIDs(make([]uint32, 40), []int64{1, 2, 3}, 24, ""); ok {
		t.Error("ChainHashIDs accepted a trace block size that is not a multiple of the engine's")
	}
}

// unitStep is a step-time model for engines that only hash.
type unitStep struct{}

func (unitStep) StepTime([]replica.BatchEntry) int64 { return 1 }
