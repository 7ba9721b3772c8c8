package report

import (
	"testing"

	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/sim"
)

func TestSummaryByTier(t *testing.T) {
	recs := []sim.Record{
		// 500 GPU + 300 CPU tokens; 600 predicted cover the GPU part and
		// 100 of the CPU part.
		{ID: 1, PromptTokens: 1000, OutputTokens: 2, CachedTokens: 800, CPUCachedTokens: 300, Outcome: sim.Completed, HasPredicted: true, Predicted: 0.6, PredictedBlocks: 16},
		// All 400 from the CPU tier; 100 predicted.
		{ID: 2, PromptTokens: 500, OutputTokens: 2, CachedTokens: 400, CPUCachedTokens: 400, Outcome: sim.Completed, HasPredicted: true, Predicted: 0.2, PredictedBlocks: 8},
		// 100 GPU tokens, 150 predicted: 50 over.
		{ID: 3, PromptTokens: 200, OutputTokens: 2, CachedTokens: 100, Outcome: sim.Completed, HasPredicted: true, Predicted: 0.75, PredictedBlocks: 4},
	}
	a := NewAggregator()
	for i := range recs {
		a.Add(&recs[i])
	}
	res := &sim.Result{Replicas: []sim.ReplicaResult{
		{Name: "r0", Stats: replica.Stats{ExternalQueries: 10, OffloadLoads: 2, OffloadLoadedBlocks: 44, OffloadStoredBlocks: 100, CPUEvictions: 7, OffloadLoadTime: 3e6}},
		{Name: "r1", Stats: replica.Stats{ExternalQueries: 5, OffloadStoredBlocks: 20}},
	}}
	s := a.Summary(res)
	o := s.Cache.Offload
	want := OffloadCache{GPUHitRatio: 600.0 / 1700, CPUHitRatio: 700.0 / 1700, GPUHitTokens: 600, CPUHitTokens: 700, CPUHitRequests: 2,
		Loads: 2, LoadedBlocks: 44, StoredBlocks: 120, CPUEvictions: 7, MeanLoadCopyMs: 1.5}
	if o == nil || *o != want {
		t.Fatalf("offload %+v, want %+v", o, want)
	}
	bt := s.Prediction["approx-prefix-cache-producer"].ByTier
	wantTier := TierPrediction{
		GPU:                 TierError{TrueTokens: 600, PredictedTokens: 600},
		CPU:                 TierError{TrueTokens: 700, PredictedTokens: 200, UnderpredictedTokens: 500, UnderpredictedShare: 500.0 / 700},
		OverpredictedTokens: 50,
	}
	if bt == nil || *bt != wantTier {
		t.Fatalf("by tier %+v, want %+v", bt, wantTier)
	}
	// Without a CPU tier neither appears.
	s = a.Summary(&sim.Result{Replicas: []sim.ReplicaResult{{Name: "r0"}}})
	if s.Cache.Offload != nil || s.Prediction["approx-prefix-cache-producer"].ByTier != nil {
		t.Fatalf("offload fields without a CPU tier: %+v", s.Cache.Offload)
	}
}
