package sim

import (
	"reflect"
	"testing"

	"github.com/eppsim/eppsim/epp/config"
	"github.com/eppsim/eppsim/epp/plugins"
	"github.com/eppsim/eppsim/epp/producer"
	"github.com/eppsim/eppsim/workload"
)

// offloadFleet is testFleet with a CPU tier of gib GiB on every replica
// (Llama-3.1-8B: 2 MiB blocks, so 512 blocks per GiB).
func offloadFleet(t *testing.T, n, blocks int, gib float64) []ReplicaSpec {
	t.Helper()
	fleet := testFleet(t, n, blocks)
	for i := range fleet {
		fleet[i].Preset.Engine.KVOffloadingSize = gib
	}
	return fleet
}

func TestOffloadConservationAndDeterminism(t *testing.T) {
	// Sessions revisit 7 shared prefixes on 3 replicas whose GPU caches
	// (300 blocks) cannot keep them: some prefixes come back from the CPU
	// tier (512 blocks). Every request ends exactly once, and the run is
	// a function of its inputs.
	reqs := func() []*workload.Request {
		var out []*workload.Request
		for i := range 120 {
			prompt := append(tokens(i%7*5000, 1200), tokens(100000+i*1000, 50+i*13%400)...)
			out = append(out, req(int64(i), int64(i)*40_000_000, prompt, 1+i*7%90))
		}
		out = append(out, req(120, 121*40_000_000, tokens(0, 40000), 10)) // too long for the GPU cache: rejected
		return out
	}
	fleet := offloadFleet(t, 3, 300, 1)
	recs1, res1 := run(t, reqs(), fleet, Options{Seed: 7})
	if res1.Completed+res1.Rejected+res1.InFlight != res1.Injected || res1.Injected != 121 || res1.Rejected != 1 || res1.InFlight != 0 || len(recs1) != 121 {
		t.Fatalf("conservation: %+v, %d records", res1, len(recs1))
	}
	seen := map[int64]bool{}
	cpuHits, loads := 0, int64(0)
	for _, r := range recs1 {
		if seen[r.ID] {
			t.Fatalf("request %d recorded twice", r.ID)
		}
		seen[r.ID] = true
		if r.CPUCachedTokens > r.CachedTokens || (r.Outcome == Completed && (r.TTFT <= 0 || r.E2E < r.TTFT)) {
			t.Fatalf("record %+v", r)
		}
		if r.CPUCachedTokens > 0 {
			cpuHits++
		}
	}
	for _, rr := range res1.Replicas {
		loads += rr.Stats.OffloadLoads
	}
	if cpuHits == 0 || loads < int64(cpuHits) {
		t.Fatalf("%d requests hit the CPU tier in %d loads", cpuHits, loads)
	}
	recs2, res2 := run(t, reqs(), fleet, Options{Seed: 7})
	if !reflect.DeepEqual(recs1, recs2) || !reflect.DeepEqual(res1, res2) {
		t.Fatal("same inputs and seed gave different results")
	}
	// The same run without the CPU tier hits less.
	recs3, _ := run(t, reqs(), testFleet(t, 3, 300), Options{Seed: 7})
	var with, without int
	for i := range recs1 {
		with += recs1[i].CachedTokens
		without += recs3[i].CachedTokens
		if recs3[i].CPUCachedTokens != 0 {
			t.Fatalf("CPU hits without a CPU tier: %+v", recs3[i])
		}
	}
	if with <= without {
		t.Fatalf("cached tokens %d with the CPU tier, %d without", with, without)
	}
}

func TestOffloadCPUEventsScoredWithTierWeights(t *testing.T) {
	// One replica with 130 GPU blocks (129 usable) and a 512-block CPU
	// tier. P0 (1,024 tokens, 64 blocks) is computed and offloaded; its
	// repeat finds it on both tiers (precise 1.0: a key's weight is the
	// best of its tiers). P1 (2,048 tokens + 4 output, 129 blocks) then
	// takes every GPU block, evicting P0 there; P0's third visit finds it
	// on the CPU tier only: 64 keys × 0.8 = 51.2, matchBlocks 51, precise
	// 51/64; all 1,023 reused tokens come from the CPU tier.
	loaded, err := config.Load(preciseConfig(16), config.Options{Registry: plugins.Builtin(), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	body := func(r *workload.Request) *workload.Request {
		r.Endpoint = workload.EndpointCompletions
		r.Body = []byte(`{"model":"m","prompt":"p"}`)
		return r
	}
	p0, p1 := tokens(0, 1024), tokens(100000, 2048)
	var recs []Record
	res, err := Run(&sliceSource{reqs: []*workload.Request{
		body(req(0, 0, p0, 4)), body(req(1, 10*second, p0, 4)), body(req(2, 20*second, p1, 4)), body(req(3, 30*second, p0, 4)),
	}}, loaded.Router(), offloadFleet(t, 1, 130, 1), Options{KVEventLag: 5_000_000, OnRecord: func(r *Record) { recs = append(recs, *r) }})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		precise     float64
		cached, cpu int
	}{
		{0, 0, 0},
		// GPU 1,008 (the N−1 cap leaves block 63), then block 63 from
		// the CPU tier, less the recomputed last token (B.6).
		{1, 1023, 15},
		{0, 0, 0},
		{51.0 / 64, 1023, 1023},
	}
	for i, w := range want {
		r := recs[i]
		if !r.HasPrecise || r.PredictedPrecise != w.precise || r.CachedTokens != w.cached || r.CPUCachedTokens != w.cpu {
			t.Errorf("request %d: precise %v, cached %d (CPU %d); want %v, %d (%d)", i, r.PredictedPrecise, r.CachedTokens, r.CPUCachedTokens, w.precise, w.cached, w.cpu)
		}
	}
	if st := res.Replicas[0].Stats; st.OffloadLoads != 2 || st.OffloadLoadedBlocks != 65 {
		t.Errorf("loads %d of %d blocks, want 2 of 65", st.OffloadLoads, st.OffloadLoadedBlocks)
	}
}

func TestOffloadCapacityReachesApproxProducer(t *testing.T) {
	// The scrape passes the CPU tier's capacity (512 blocks × 16 tokens);
	// with the pr2292 option the approximate producer sizes the LRU to
	// max(300 GPU blocks, 8,192 / 16) = 512 entries, without it to 300.
	for _, c := range []struct {
		option bool
		want   int
	}{{false, 300}, {true, 512}} {
		loaded, err := config.Default(config.Options{Registry: plugins.Builtin(), Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		var approx *producer.ApproxPrefix
		for _, p := range loaded.Plugins {
			if a, ok := p.Plugin.(*producer.ApproxPrefix); ok {
				approx = a
				a.SetOffloadLRU(c.option)
			}
		}
		if approx == nil {
			t.Fatal("no approximate producer in the default config")
		}
		r := req(0, 0, tokens(0, 500), 4)
		r.Endpoint, r.Body = workload.EndpointCompletions, []byte(`{"model":"m","prompt":"p"}`)
		if _, err := Run(&sliceSource{reqs: []*workload.Request{r}}, loaded.Router(), offloadFleet(t, 1, 300, 1), Options{}); err != nil {
			t.Fatal(err)
		}
		if got := approx.PodCapacity("default/r0"); got != c.want {
			t.Errorf("option %v: LRU capacity %d, want %d", c.option, got, c.want)
		}
	}
}
