package producer

import (
	"testing"

	"github.com/eppsim/eppsim/epp"
)

// What the EPP's prefix producers make of an SGLang pod
// (sglang-engine.md A.12, A.13), with hand-built inputs: no SGLang engine
// is needed, only what one sends.

// TestApproxAutoTuneSGLangPod: an SGLang pod's scrape has no
// cache_config_info (the EPP's block size and block count stay 0; the
// other gauges update). AutoTune then falls back to the configured
// blockSizeTokens, raised to the 64-token floor, and sizes the pod's LRU
// to lruCapacityPerServer: with the defaults 16 → 64 tokens and 31250
// blocks; with blockSizeTokens 128 and lruCapacityPerServer 5000, 128 and
// 5000. The block size is the first candidate's: a vLLM pod reporting
// 128-token blocks first gives 128, an SGLang pod first the fallback.
func TestApproxAutoTuneSGLangPod(t *testing.T) {
	sglangPod := epp.Metrics{WaitingQueueSize: 3, RunningRequestsSize: 5, KVCacheUsagePercent: 0.42}
	vllmPod := epp.Metrics{CacheBlockSize: 128, CacheNumBlocks: 20000}
	prompt := make([]byte, 64*4*3) // 3 blocks of 64 estimate tokens (4 bytes each)
	for i := range prompt {
		prompt[i] = 'z'
	}
	for _, c := range []struct {
		name, params  string
		wantBS, wantN int
	}{
		{"defaults", "", 64, 31250},
		{"configured", `{"blockSizeTokens":128,"lruCapacityPerServer":5000}`, 128, 5000},
	} {
		a := approxWith(t, c.params)
		eps := newEndpoints("default/sg")
		eps[0].Metrics = sglangPod
		if got := a.BlockSize(eps); got != c.wantBS {
			t.Errorf("%s: block size %d, want %d", c.name, got, c.wantBS)
		}
		req := produceOn(t, a, string(prompt), eps)
		if info := approxInfo(t, a, eps[0]); info.BlockSizeTokens != c.wantBS {
			t.Errorf("%s: match info at %d-token blocks, want %d", c.name, info.BlockSizeTokens, c.wantBS)
		}
		a.PreRequest(&epp.Cycle{}, req, resultFor(eps[0]))
		if got := a.PodCapacity("default/sg"); got != c.wantN {
			t.Errorf("%s: LRU capacity %d, want %d", c.name, got, c.wantN)
		}
	}
	a := approxWith(t, "")
	eps := newEndpoints("default/sg", "default/v")
	eps[0].Metrics, eps[1].Metrics = sglangPod, vllmPod
	if got := a.BlockSize(eps); got != 64 {
		t.Errorf("SGLang pod first: block size %d, want 64", got)
	}
	eps[0], eps[1] = eps[1], eps[0]
	if got := a.BlockSize(eps); got != 128 {
		t.Errorf("vLLM pod first: block size %d, want 128", got)
	}
	// The vLLM pod's LRU is its num_gpu_blocks beside an SGLang pod's default.
	req := produceOn(t, a, string(prompt), eps)
	a.PreRequest(&epp.Cycle{}, req, resultFor(eps[0]))
	if got := a.PodCapacity("default/v"); got != 20000 {
		t.Errorf("vLLM pod: LRU capacity %d, want 20000", got)
	}
}

// sglangPage is one BlockStored as SGLang's radix cache emits it: one
// page, one hash, block_size = the page's tokens, medium GPU, no extra keys.
func sglangPage(hash, parent uint64, tokens []uint32) epp.KVEvent {
	return epp.KVEvent{Kind: epp.BlockStored, BlockHashes: []uint64{hash}, ParentBlockHash: parent, HasParent: parent != 0,
		TokenIDs: tokens, BlockSize: len(tokens), Medium: "GPU"}
}

// TestPreciseSGLangEvents: the precise producer with engineType sglang at
// the default 16-token blocks, fed SGLang's one-hash-per-page batches.
//
//   - Page size 1 (SGLang's default), on pod a: each event has one token,
//     fewer than a block, so it yields no key and is skipped; the next
//     event's parent is then unknown and it is dropped too. The index
//     learns nothing: a 40-token prompt (2 blocks) matches 0 of 2.
//   - Page size 64, on pod b: one engine key maps to 64/16 = 4 request
//     keys, the next page chains from the last of them. Two pages give 8
//     keys; a 130-token prompt has 8 full blocks and matches 8 of 8.
//     Removing the second page's hash evicts its 4 keys (4 of 8 match);
//     AllBlocksCleared clears the pod (0 of 8).
//   - A salted request misses: SGLang sends no extra keys, so the stored
//     keys are unsalted and the request's first key carries the salt.
//   - Page size 24, on pod c (not a multiple of 16): the first page gives 1
//     key (its last 8 tokens are a partial block, dropped); the second is
//     hashed from that key over tokens 25–48, which is no block of the
//     prompt's chain (block 2 is tokens 17–32). A 48-token prompt matches
//     1 of 3.
func TestPreciseSGLangEvents(t *testing.T) {
	p := precisePlugin(t, `{"tokenProcessorConfig":{"blockSizeTokens":16},"kvEventsConfig":{"engineType":"sglang"}}`)
	c := &epp.Cycle{}
	match := func(label string, pod int, wantMatch, wantTotal int, prompt []uint32, salt string) {
		t.Helper()
		eps := newEndpoints("a", "b", "c")
		req := &epp.Request{ID: "r", TargetModel: "m", Tokenized: &epp.TokenizedRequest{Prompts: [][]uint32{prompt}, CacheSalt: salt}}
		if err := p.Produce(c, req, eps); err != nil {
			t.Fatal(err)
		}
		v, ok := eps[pod].Get(p.key)
		if !ok {
			t.Fatalf("%s: no match info", label)
		}
		if info := v.(epp.PrefixCacheMatchInfo); info.MatchBlocks != wantMatch || info.TotalBlocks != wantTotal || info.BlockSizeTokens != 16 {
			t.Errorf("%s: %+v, want %d of %d at 16-token blocks", label, info, wantMatch, wantTotal)
		}
	}

	var pages []epp.KVEvent
	for i := uint64(1); i <= 40; i++ {
		pages = append(pages, sglangPage(i, i-1, []uint32{uint32(i)}))
	}
	p.HandleKVEvents(c, podA, pages)
	if n := p.Indexer().Index().Len(); n != 0 {
		t.Fatalf("page size 1: the index holds %d keys, want 0", n)
	}
	match("page size 1", 0, 0, 2, seq(1, 40), "")

	p.HandleKVEvents(c, podB, []epp.KVEvent{sglangPage(1001, 0, seq(1, 64)), sglangPage(1002, 1001, seq(65, 128))})
	if n := p.Indexer().Index().Len(); n != 8 {
		t.Fatalf("page size 64: the index holds %d keys, want 8", n)
	}
	match("page size 64", 1, 8, 8, seq(1, 130), "")
	match("salted", 1, 0, 8, seq(1, 130), "salt")
	p.HandleKVEvents(c, podB, []epp.KVEvent{{Kind: epp.BlockRemoved, BlockHashes: []uint64{1002}, Medium: "GPU"}})
	match("second page removed", 1, 4, 8, seq(1, 130), "")
	p.HandleKVEvents(c, podB, []epp.KVEvent{{Kind: epp.AllBlocksCleared}})
	match("cleared", 1, 0, 8, seq(1, 130), "")

	p.HandleKVEvents(c, podC, []epp.KVEvent{sglangPage(2001, 0, seq(1, 24)), sglangPage(2002, 2001, seq(25, 48))})
	match("page size 24", 2, 1, 3, seq(1, 48), "")
}

// TestPreciseEngineTypes: kvEventsConfig.engineType takes vllm and sglang
// (and its absence); another is refused.
func TestPreciseEngineTypes(t *testing.T) {
	for _, et := range []string{"", "vllm", "sglang"} {
		if _, err := preciseFactory("p", []byte(`{"kvEventsConfig":{"engineType":"`+et+`"}}`), epp.NewHandle(0)); err != nil {
			t.Errorf("%q: %v", et, err)
		}
	}
	_, err := preciseFactory("p", []byte(`{"kvEventsConfig":{"engineType":"tgi"}}`), epp.NewHandle(0))
	if want := `plugin "p" (type precise-prefix-cache-producer): kvEventsConfig.engineType: unsupported engine type "tgi"`; err == nil || err.Error() != want {
		t.Errorf("tgi: %v, want %s", err, want)
	}
}
