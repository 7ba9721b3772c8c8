package replica

import (
	"math/rand/v2"
	"testing"
)

// driveRandom feeds a random workload through one engine with invariants
// checked after every step, and checks that every request completes exactly
// once with a plausible record.
func driveRandom(t *testing.T, seed uint64, numBlocks, budget, maxSeqs, threshold int, nReq int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	e, err := NewEngine(Config{BlockSize: 16, NumGPUBlocks: numBlocks, MaxNumBatchedTokens: budget, MaxNumSeqs: maxSeqs,
		LongPrefillTokenThreshold: threshold, KVEvents: true, CheckInvariants: true}, &Linear{StepUs: 500, PrefillTokenUs: 1, DecodeSeqUs: 10})
	if err != nil {
		t.Fatal(err)
	}
	var sink recorder
	e.Subscribe(&sink)
	capacity := e.MaxSequenceLen()
	// A few shared "system prompts" and sessions make prefixes repeat.
	prefixes := [][]uint32{seq(0, 40), seq(10000, 100), seq(20000, 7)}
	var reqs []*Request
	now := int64(0)
	next := 0
	done := map[int64]int{}
	for steps := 0; next < nReq || e.Busy(); steps++ {
		if steps > 200000 {
			t.Fatalf("seed %d: no progress", seed)
		}
		for next < nReq && rng.IntN(3) == 0 {
			p := prefixes[rng.IntN(len(prefixes))]
			body := seq(100000+rng.IntN(50)*1000, rng.IntN(200))
			prompt := append(append([]uint32{}, p...), body...)
			out := 1 + rng.IntN(60)
			if len(prompt)+out > capacity {
				out = 1
				prompt = prompt[:min(len(prompt), capacity-1)]
			}
			r := &Request{ID: int64(next), Prompt: prompt, OutputLen: out}
			if err := e.Add(r, now); err != nil {
				t.Fatal(err)
			}
			reqs = append(reqs, r)
			next++
		}
		d, ok := e.BeginStep(now)
		if !ok {
			now += 1000
			continue
		}
		now += d
		for _, r := range e.EndStep(now).Finished {
			done[r.ID]++
		}
	}
	for _, r := range reqs {
		if done[r.ID] != 1 {
			t.Fatalf("seed %d: request %d finished %d times", seed, r.ID, done[r.ID])
		}
		if r.Generated() != r.OutputLen || r.FirstToken < r.FirstScheduled || r.Completed < r.FirstToken || r.FirstScheduled < r.Arrived {
			t.Fatalf("seed %d: request %d record %+v", seed, r.ID, r)
		}
		if r.NumCachedTokens%16 != 0 || r.NumCachedTokens > len(r.Prompt)-1 {
			t.Fatalf("seed %d: request %d cached %d of %d", seed, r.ID, r.NumCachedTokens, len(r.Prompt))
		}
	}
	if e.Pool().NumFree() != numBlocks-1 {
		t.Fatalf("seed %d: %d blocks still held after drain", seed, numBlocks-1-e.Pool().NumFree())
	}
}

func TestRandomWorkloadInvariants(t *testing.T) {
	configs := []struct{ blocks, budget, seqs, thr int }{
		{40, 64, 8, 0},    // tight memory: preemptions
		{200, 512, 32, 0}, // roomy
		{30, 2048, 4, 48}, // threshold and few seqs
		{24, 33, 64, 0},   // budget barely above a block
	}
	for i, c := range configs {
		for seed := uint64(1); seed <= 4; seed++ {
			driveRandom(t, seed*100+uint64(i), c.blocks, c.budget, c.seqs, c.thr, 80)
		}
	}
}

func FuzzEngine(f *testing.F) {
	f.Add(uint64(1), uint8(40), uint16(64), uint8(8), uint8(0))
	f.Add(uint64(9), uint8(20), uint16(17), uint8(2), uint8(20))
	f.Fuzz(func(t *testing.T, seed uint64, blocks uint8, budget uint16, seqs uint8, thr uint8) {
		nb := 18 + int(blocks)%200 // room for the longest random request
		driveRandom(t, seed, nb, 1+int(budget)%4096, 1+int(seqs)%64, int(thr), 30)
	})
}
