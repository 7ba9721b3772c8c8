package producer

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/eppsim/eppsim/epp"
)

const preciseParams = `{"tokenProcessorConfig":{"blockSizeTokens":4},
 "indexerConfig":{"kvCacheBackendConfigs":[{"name":"gpu","weight":1.0},{"name":"cpu","weight":0.8}]}}`

func precisePlugin(t *testing.T, params string) *PrecisePrefix {
	t.Helper()
	var raw json.RawMessage
	if params != "" {
		raw = json.RawMessage(params)
	}
	p, err := preciseFactory("precise-prefix-cache-producer", raw, epp.NewHandle(0))
	if err != nil {
		t.Fatal(err)
	}
	pp := p.(*PrecisePrefix)
	pp.SetDefaultEventModel("m")
	return pp
}

func seq(lo, hi uint32) []uint32 {
	var out []uint32
	for i := lo; i <= hi; i++ {
		out = append(out, i)
	}
	return out
}

func stored(hashes []uint64, parent uint64, tokens []uint32, medium string) epp.KVEvent {
	return epp.KVEvent{Kind: epp.BlockStored, BlockHashes: hashes, ParentBlockHash: parent, HasParent: parent != 0, TokenIDs: tokens, BlockSize: 4, Medium: medium}
}

func removed(medium string, hashes ...uint64) epp.KVEvent {
	return epp.KVEvent{Kind: epp.BlockRemoved, BlockHashes: hashes, Medium: medium}
}

// preciseMatch runs Produce for a request with the given tokens on fresh
// candidates and returns the match info per endpoint (nil when absent).
func preciseMatch(t *testing.T, p *PrecisePrefix, now int64, model string, prompts ...[]uint32) []*epp.PrefixCacheMatchInfo {
	t.Helper()
	eps := newEndpoints("a", "b", "c")
	req := &epp.Request{ID: "r", TargetModel: model, Tokenized: &epp.TokenizedRequest{Prompts: prompts}}
	if err := p.Produce(&epp.Cycle{Now: now}, req, eps); err != nil {
		t.Fatal(err)
	}
	out := make([]*epp.PrefixCacheMatchInfo, len(eps))
	for i, e := range eps {
		if v, ok := e.Get(p.key); ok {
			info := v.(epp.PrefixCacheMatchInfo)
			out[i] = &info
		}
	}
	return out
}

func wantInfo(t *testing.T, label string, got *epp.PrefixCacheMatchInfo, match, total, cached int, byTier map[string]int) {
	t.Helper()
	want := epp.PrefixCacheMatchInfo{MatchBlocks: match, TotalBlocks: total, BlockSizeTokens: 4, CachedBlockCount: cached, CachedByTier: byTier}
	if got == nil || !reflect.DeepEqual(*got, want) {
		t.Errorf("%s: got %+v, want %+v", label, got, want)
	}
}

const podA, podB, podC = "10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000"

func TestPreciseStoreChainRemove(t *testing.T) {
	p := precisePlugin(t, preciseParams)
	c := &epp.Cycle{}
	p.HandleKVEvents(c, podA, []epp.KVEvent{stored([]uint64{101, 102}, 0, seq(1, 8), "")})
	m := preciseMatch(t, p, 0, "m", seq(1, 10)) // partial tail dropped: 2 keys
	wantInfo(t, "a", m[0], 2, 2, 2, map[string]int{"gpu": 2})
	wantInfo(t, "b", m[1], 0, 2, 0, nil)

	p.HandleKVEvents(c, podA, []epp.KVEvent{stored([]uint64{103}, 102, seq(9, 12), "")})
	wantInfo(t, "a chained", preciseMatch(t, p, 0, "m", seq(1, 12))[0], 3, 3, 3, map[string]int{"gpu": 3})

	// Unknown parent: dropped.
	n := p.Indexer().Index().Len()
	p.HandleKVEvents(c, podA, []epp.KVEvent{stored([]uint64{200}, 999, seq(13, 16), "")})
	if p.Indexer().Index().Len() != n {
		t.Errorf("event with unknown parent was indexed")
	}
	// Removing the middle block breaks the chain.
	p.HandleKVEvents(c, podA, []epp.KVEvent{removed("", 102)})
	wantInfo(t, "a after remove", preciseMatch(t, p, 0, "m", seq(1, 12))[0], 1, 3, 1, map[string]int{"gpu": 1})
	// ... and its engine mapping, so a child of 102 is now dropped.
	p.HandleKVEvents(c, podA, []epp.KVEvent{stored([]uint64{104}, 102, seq(9, 12), "")})
	if p.Indexer().Index().Len() != n-1 {
		t.Errorf("child of a removed block was indexed: %d keys", p.Indexer().Index().Len())
	}
	// Less than one full block: nothing written.
	for _, info := range preciseMatch(t, p, 0, "m", seq(1, 3)) {
		if info != nil {
			t.Errorf("short request got %+v", info)
		}
	}
	// Another model (or a salt) gives other keys.
	if m := preciseMatch(t, p, 0, "other", seq(1, 8)); m[0].MatchBlocks != 0 {
		t.Errorf("other model matched %+v", m[0])
	}
	eps := newEndpoints("a")
	req := &epp.Request{TargetModel: "m", Tokenized: &epp.TokenizedRequest{Prompts: [][]uint32{seq(1, 8)}, CacheSalt: "s"}}
	_ = p.Produce(c, req, eps)
	if v, _ := eps[0].Get(p.key); v.(epp.PrefixCacheMatchInfo).MatchBlocks != 0 {
		t.Errorf("salted request matched unsalted events: %+v", v)
	}
	// Multi-prompt requests sum per prompt.
	wantInfo(t, "two prompts", preciseMatch(t, p, 0, "m", seq(1, 4), seq(1, 8))[0], 2, 3, 2, map[string]int{"gpu": 2})
}

func TestPreciseTiers(t *testing.T) {
	p := precisePlugin(t, preciseParams)
	c := &epp.Cycle{}
	p.HandleKVEvents(c, podA, []epp.KVEvent{
		stored([]uint64{101, 102}, 0, seq(1, 8), ""),
		stored([]uint64{101, 102}, 0, nil, "CPU"), // location-only: offloaded copy
	})
	p.HandleKVEvents(c, podB, []epp.KVEvent{stored([]uint64{301, 302}, 0, seq(1, 8), "cpu")})
	p.HandleKVEvents(c, podC, []epp.KVEvent{
		stored([]uint64{401}, 0, seq(1, 4), "GPU"),
		stored([]uint64{402}, 401, seq(5, 8), "cpu"),
	})
	m := preciseMatch(t, p, 0, "m", seq(1, 8))
	// a: max weight per key (gpu 1.0) → 2.0.
	wantInfo(t, "a", m[0], 2, 2, 2, map[string]int{"gpu": 2, "cpu": 2})
	// b: 0.8+0.8 = 1.6 → int 1; two contiguous blocks.
	wantInfo(t, "b", m[1], 1, 2, 2, map[string]int{"cpu": 2})
	// c: gpu then cpu: 1.8 → 1; the tier intersection empties at block 1.
	wantInfo(t, "c", m[2], 1, 2, 2, map[string]int{"gpu": 1})

	// Unlisted tiers weigh 1.0 at ebab687 (#2809 option: kvCacheDefaultBackendWeight).
	q := precisePlugin(t, `{"tokenProcessorConfig":{"blockSizeTokens":4},"indexerConfig":{"kvCacheBackendConfigs":[{"name":"gpu","weight":1.0}],"kvCacheDefaultBackendWeight":0.5}}`)
	q.HandleKVEvents(c, podB, []epp.KVEvent{stored([]uint64{301, 302}, 0, seq(1, 8), "disk")})
	wantInfo(t, "default weight", preciseMatch(t, q, 0, "m", seq(1, 8))[1], 1, 2, 2, map[string]int{"disk": 2})
	r := precisePlugin(t, `{"tokenProcessorConfig":{"blockSizeTokens":4}}`)
	r.HandleKVEvents(c, podB, []epp.KVEvent{stored([]uint64{301, 302}, 0, seq(1, 8), "disk")})
	wantInfo(t, "unlisted tier", preciseMatch(t, r, 0, "m", seq(1, 8))[1], 2, 2, 2, map[string]int{"disk": 2})
}

func TestPreciseRemoveDedupAndClear(t *testing.T) {
	p := precisePlugin(t, preciseParams)
	c := &epp.Cycle{}
	ev := stored([]uint64{101, 102}, 0, seq(1, 8), "")
	p.HandleKVEvents(c, podA, []epp.KVEvent{ev, ev}) // stored twice: two references
	p.HandleKVEvents(c, podB, []epp.KVEvent{stored([]uint64{501, 502}, 0, seq(1, 8), "")})
	p.HandleKVEvents(c, podA, []epp.KVEvent{removed("", 101)}) // suppressed
	if m := preciseMatch(t, p, 0, "m", seq(1, 8)); m[0].MatchBlocks != 2 {
		t.Errorf("first remove of a twice-stored block evicted it: %+v", m[0])
	}
	p.HandleKVEvents(c, podA, []epp.KVEvent{removed("", 101), removed("", 777)}) // last reference; unknown passes through
	if m := preciseMatch(t, p, 0, "m", seq(1, 8)); m[0].MatchBlocks != 0 || m[1].MatchBlocks != 2 {
		t.Errorf("after last remove: a %+v b %+v", m[0], m[1])
	}
	// Removes are scoped by tier.
	p.HandleKVEvents(c, podC, []epp.KVEvent{stored([]uint64{601}, 0, seq(1, 4), ""), stored([]uint64{601}, 0, nil, "cpu")})
	p.HandleKVEvents(c, podC, []epp.KVEvent{removed("cpu", 601)})
	wantInfo(t, "c after cpu remove", preciseMatch(t, p, 0, "m", seq(1, 4))[2], 1, 1, 1, map[string]int{"gpu": 1})
	// AllBlocksCleared drops one pod only.
	p.HandleKVEvents(c, podB, []epp.KVEvent{{Kind: epp.AllBlocksCleared}})
	m := preciseMatch(t, p, 0, "m", seq(1, 4))
	if m[1].MatchBlocks != 0 || m[2].MatchBlocks != 1 {
		t.Errorf("after clear: b %+v c %+v", m[1], m[2])
	}
	p.RemoveEndpoint(podC)
	if m := preciseMatch(t, p, 0, "m", seq(1, 4)); m[2].MatchBlocks != 0 {
		t.Errorf("removed endpoint still matches: %+v", m[2])
	}
}

func TestPreciseEngineBlockRatios(t *testing.T) {
	p := precisePlugin(t, preciseParams) // request block size 4
	c := &epp.Cycle{}
	// many:1 — engine blocks of 2 tokens: 4 engine hashes → 2 keys.
	p.HandleKVEvents(c, podA, []epp.KVEvent{stored([]uint64{1, 2, 3, 4}, 0, seq(1, 8), "")})
	p.HandleKVEvents(c, podA, []epp.KVEvent{stored([]uint64{5, 6}, 4, seq(9, 12), "")})
	// 1:many — one engine block of 8 tokens → 2 keys; a child continues from the last.
	p.HandleKVEvents(c, podB, []epp.KVEvent{stored([]uint64{7}, 0, seq(1, 8), "")})
	p.HandleKVEvents(c, podB, []epp.KVEvent{stored([]uint64{8}, 7, seq(9, 16), "")})
	// An engine block shorter than a request block yields no key: dropped.
	p.HandleKVEvents(c, podC, []epp.KVEvent{stored([]uint64{9}, 0, seq(1, 2), "")})
	m := preciseMatch(t, p, 0, "m", seq(1, 16))
	if m[0].MatchBlocks != 3 || m[1].MatchBlocks != 4 || m[2].MatchBlocks != 0 {
		t.Errorf("ratios: a %+v b %+v c %+v", m[0], m[1], m[2])
	}
	// Removing engine block 1 (mapped to key 0 with block 2) evicts key 0 for a.
	p.HandleKVEvents(c, podA, []epp.KVEvent{removed("", 1)})
	if m := preciseMatch(t, p, 0, "m", seq(1, 16)); m[0].MatchBlocks != 0 || m[1].MatchBlocks != 4 {
		t.Errorf("after engine remove: a %+v b %+v", m[0], m[1])
	}
	// LoRA events hash under the adapter name.
	p.HandleKVEvents(c, podC, []epp.KVEvent{{Kind: epp.BlockStored, BlockHashes: []uint64{11}, TokenIDs: seq(1, 4), LoraName: "lora1"}})
	if m := preciseMatch(t, p, 0, "lora1", seq(1, 4)); m[2].MatchBlocks != 1 {
		t.Errorf("lora: %+v", m[2])
	}
}

func TestPreciseSpeculativeTTL(t *testing.T) {
	p := precisePlugin(t, `{"tokenProcessorConfig":{"blockSizeTokens":4},"speculativeIndexing":true,"speculativeTTL":"1s"}`)
	eps := newEndpoints("a", "b", "c")
	req := &epp.Request{ID: "r", TargetModel: "m", Tokenized: &epp.TokenizedRequest{Prompts: [][]uint32{seq(1, 8)}}}
	if err := p.Produce(&epp.Cycle{Now: 0}, req, eps); err != nil {
		t.Fatal(err)
	}
	res := &epp.Result{PrimaryProfile: "decode", Profiles: map[string]*epp.ProfileResult{
		"decode": {Targets: []*epp.Endpoint{eps[2]}}, "prefill": {Targets: []*epp.Endpoint{eps[1]}},
	}}
	p.PreRequest(&epp.Cycle{Now: 0}, req, res)
	m := preciseMatch(t, p, int64(999*time.Millisecond), "m", seq(1, 8))
	wantInfo(t, "c speculative", m[2], 2, 2, 2, map[string]int{"speculative": 2})
	wantInfo(t, "b speculative (prefill)", m[1], 2, 2, 2, map[string]int{"speculative": 2})
	wantInfo(t, "a", m[0], 0, 2, 0, nil)
	// A confirmed store on c keeps it after the speculative entry expires.
	p.HandleKVEvents(&epp.Cycle{Now: int64(500 * time.Millisecond)}, podC, []epp.KVEvent{stored([]uint64{1, 2}, 0, seq(1, 8), "")})
	m = preciseMatch(t, p, int64(time.Second), "m", seq(1, 8))
	wantInfo(t, "c confirmed", m[2], 2, 2, 2, map[string]int{"gpu": 2})
	wantInfo(t, "b expired", m[1], 0, 2, 0, nil)
	if n := p.Indexer().PendingSpeculative(); n != 0 {
		t.Errorf("%d speculative insertions pending", n)
	}
	// Off by default: PreRequest adds nothing.
	q := precisePlugin(t, `{"tokenProcessorConfig":{"blockSizeTokens":4}}`)
	_ = q.Produce(&epp.Cycle{}, req, eps)
	q.PreRequest(&epp.Cycle{}, req, res)
	if q.Indexer().Index().Len() != 0 {
		t.Error("speculative entries without speculativeIndexing")
	}
}

func TestPreciseEventModelFallback(t *testing.T) {
	p, err := preciseFactory("pp", json.RawMessage(`{"tokenProcessorConfig":{"blockSizeTokens":4}}`), epp.NewHandle(0))
	if err != nil {
		t.Fatal(err)
	}
	pp := p.(*PrecisePrefix)
	// No model configured: the last request's TargetModel is used.
	_ = pp.Produce(&epp.Cycle{}, &epp.Request{TargetModel: "mx", Tokenized: &epp.TokenizedRequest{Prompts: [][]uint32{seq(1, 4)}}}, newEndpoints("a"))
	pp.HandleKVEvents(&epp.Cycle{}, podA, []epp.KVEvent{stored([]uint64{1}, 0, seq(1, 4), "")})
	pp.SetEventModel(podB, "other")
	pp.HandleKVEvents(&epp.Cycle{}, podB, []epp.KVEvent{stored([]uint64{2}, 0, seq(1, 4), "")})
	eps := newEndpoints("a", "b")
	_ = pp.Produce(&epp.Cycle{}, &epp.Request{TargetModel: "mx", Tokenized: &epp.TokenizedRequest{Prompts: [][]uint32{seq(1, 4)}}}, eps)
	va, _ := eps[0].Get(pp.key)
	vb, _ := eps[1].Get(pp.key)
	if va.(epp.PrefixCacheMatchInfo).MatchBlocks != 1 || vb.(epp.PrefixCacheMatchInfo).MatchBlocks != 0 {
		t.Errorf("a %+v b %+v", va, vb)
	}
}

func TestPreciseParams(t *testing.T) {
	for _, c := range []struct {
		params string
		err    string
		bs     int
	}{
		{``, "", 16},
		{`{"tokenProcessorConfig":{"blockSize":64},"indexerConfig":{"kvBlockIndexConfig":{"enableMetrics":true}}}`, "", 64},
		{`{"tokenProcessorConfig":{"blockSize":16,"hashSeed":"42"},"kvEventsConfig":{"zmqEndpoint":"tcp://0.0.0.0:5557"},"indexerConfig":{"kvBlockIndexConfig":{"enableMetrics":false,"metricsLoggingInterval":60000000000}}}`, "", 16},
		{`{"tokenProcessorConfig":{"blockSizeTokens":5}}`, "", 5},
		{`{"tokenProcessorConfig":{"hashAlgorithm":"xxh64"},"kvEventsConfig":{"topicFilter":"kv@","concurrency":8,"engineType":"sglang","discoverPods":false,"podDiscoveryConfig":{"podLabelSelector":"a=b","socketPort":5557,"replaySocketPort":5558}},"indexerConfig":{"kvBlockIndexConfig":{"inMemoryConfig":{"size":1000,"podCacheSize":4}}}}`, "", 16},
		{`{"speculativeIndexing":true,"speculativeTTL":"500ms"}`, "", 16},
		{`{"tokenProcessorConfig":{"blockSizeTokens":-1}}`, "blockSizeTokens must be greater than 0", 0},
		{`{"tokenProcessorConfig":{"hashAlgorithm":"sha256"}}`, "unsupported hashAlgorithm", 0},
		{`{"indexerConfig":null}`, "indexerConfig is required", 0},
		{`{"indexerConfig":{"tokenizersPoolConfig":{"modelName":"m"}}}`, "tokenizersPoolConfig is not supported", 0},
		{`{"indexerConfig":{"kvBlockIndexConfig":{"inMemoryConfig":null}}}`, "no valid index configuration", 0},
		{`{"kvEventsConfig":{"engineType":"trt"}}`, "unsupported engine type", 0},
		{`{"speculativeIndexing":true,"speculativeTTL":"soon"}`, "invalid speculativeTTL", 0},
		{`{"tokenProcessorConfig":{"blockSizeToken":4}}`, "unknown field", 0},
		{`{"kvEventsConfig":{"zmq":"x"}}`, "unknown field", 0},
	} {
		var raw json.RawMessage
		if c.params != "" {
			raw = json.RawMessage(c.params)
		}
		p, err := preciseFactory("pp", raw, epp.NewHandle(0))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err %v, want %q", c.params, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.params, err)
			continue
		}
		if got := p.(*PrecisePrefix).BlockSize(); got != c.bs {
			t.Errorf("%s: block size %d, want %d", c.params, got, c.bs)
		}
	}
}

func TestPreciseScorerWrapper(t *testing.T) {
	pl, err := preciseScorerFactory("precise-prefix-cache-scorer", json.RawMessage(`{"tokenProcessorConfig":{"blockSizeTokens":4}}`), epp.NewHandle(0))
	if err != nil {
		t.Fatal(err)
	}
	s := pl.(*PrecisePrefixScorer)
	s.SetDefaultEventModel("m")
	s.HandleKVEvents(&epp.Cycle{}, podB, []epp.KVEvent{stored([]uint64{1, 2}, 0, seq(1, 8), "")})
	eps := newEndpoints("a", "b")
	// No token producer ran: the server's tokens are used (3 full blocks).
	req := &epp.Request{TargetModel: "m", ServerPromptTokens: seq(1, 12)}
	scores := make([]float64, 2)
	s.Score(&epp.Cycle{}, req, eps, scores)
	if scores[0] != 0 || scores[1] != 2.0/3.0 {
		t.Errorf("scores %v", scores)
	}
	if s.Type() != "precise-prefix-cache-scorer" || s.Consumes()[0].Required {
		t.Errorf("type %s consumes %+v", s.Type(), s.Consumes())
	}
	// A short request scores 0.
	scores = []float64{0, 0}
	s.Score(&epp.Cycle{}, &epp.Request{TargetModel: "m", ServerPromptTokens: seq(1, 3)}, newEndpoints("a", "b"), scores)
	if scores[1] != 0 {
		t.Errorf("short request scored %v", scores)
	}
}
