package producer

import (
	"encoding/json"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/epp"
)

const goldenPath = "../../testdata/shared/golden/epp-golden.json"

type goldenApprox struct {
	Config string `json:"config"`
	Steps  []struct {
		Request  string `json:"request"`
		Picked   string `json:"picked"`
		LenBytes int    `json:"prompt_len_bytes"`
		Match    []struct {
			Endpoint  string `json:"endpoint"`
			Match     int    `json:"matchBlocks"`
			Total     int    `json:"totalBlocks"`
			BlockSize int    `json:"blockSizeTokens"`
		} `json:"match_info_before_add"`
	} `json:"steps"`
}

func loadGolden(t testing.TB) (goldenApprox, string) {
	t.Helper()
	raw, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Approx    goldenApprox `json:"approx_producer_sequence"`
		HashCases []struct {
			ID   string `json:"id"`
			Text string `json:"prompt_text"`
		} `json:"hash_cases"`
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	var lorem string
	for _, c := range g.HashCases {
		if c.ID == "lorem1000" {
			lorem = c.Text
		}
	}
	if len(lorem) != 1000 || len(g.Approx.Steps) != 9 {
		t.Fatalf("unexpected golden shape: lorem %d bytes, %d steps", len(lorem), len(g.Approx.Steps))
	}
	return g.Approx, lorem
}

func completionsReq(id, model, prompt string) *epp.Request {
	body, _ := json.Marshal(map[string]any{"model": model, "prompt": prompt})
	return &epp.Request{ID: id, TargetModel: model, Path: "/v1/completions", Body: body}
}

func newEndpoints(names ...string) []*epp.Endpoint {
	eps := make([]*epp.Endpoint, len(names))
	for i, n := range names {
		eps[i] = &epp.Endpoint{EndpointInfo: &epp.EndpointInfo{Name: n, Address: "10.0.0." + string(rune('1'+i)) + ":8000"}}
	}
	return eps
}

func resultFor(e *epp.Endpoint) *epp.Result {
	return &epp.Result{PrimaryProfile: "default", Profiles: map[string]*epp.ProfileResult{"default": {Targets: []*epp.Endpoint{e}}}}
}

// TestGoldenApproxSequence drives the real token-producer + approx producer
// Produce/PreRequest path through the 9 golden steps (capacity 3, 16→64
// block size, the stale entry left by a 4-block prompt).
func TestGoldenApproxSequence(t *testing.T) {
	g, lorem := loadGolden(t)
	tok, err := tokenFactory(TokenProducerType)("token-producer", nil, epp.NewHandle(1))
	if err != nil {
		t.Fatal(err)
	}
	pl, err := approxFactory("approx-prefix-cache-producer", json.RawMessage(g.Config), epp.NewHandle(1))
	if err != nil {
		t.Fatal(err)
	}
	ap := pl.(*ApproxPrefix)
	// The prompts the golden steps describe by length and by the matches
	// they produce: q1/q2 are the first 300 bytes of lorem (block 0 shared
	// with lorem, block 1 partial), q3–q5 and q8 lorem itself, q6 shares
	// only lorem's first 256-byte block, q7/q9 share nothing with it.
	other := strings.Repeat("q", 1000)
	prompts := map[string]string{
		"q1": lorem[:300], "q2": lorem[:300], "q3": lorem, "q4": lorem, "q5": lorem,
		"q6": lorem[:256] + strings.Repeat("x", 744), "q7": other, "q8": lorem, "q9": other,
	}
	const model = "meta-llama/Llama-3.1-8B-Instruct"
	c := &epp.Cycle{}
	for _, st := range g.Steps {
		p := prompts[st.Request]
		if len(p) != st.LenBytes {
			t.Fatalf("%s: prompt %d bytes, golden %d", st.Request, len(p), st.LenBytes)
		}
		req := completionsReq(st.Request, model, p)
		eps := newEndpoints("default/pod1", "default/pod2")
		if err := tok.(epp.DataProducer).Produce(c, req, eps); err != nil {
			t.Fatal(err)
		}
		if err := ap.Produce(c, req, eps); err != nil {
			t.Fatal(err)
		}
		for i, want := range st.Match {
			if eps[i].Name != want.Endpoint {
				t.Fatalf("endpoint order")
			}
			v, ok := eps[i].Get(epp.DataKey{Type: epp.PrefixCacheMatchInfoType, Producer: "approx-prefix-cache-producer"})
			if !ok {
				t.Fatalf("%s: no match info on %s", st.Request, want.Endpoint)
			}
			got := v.(epp.PrefixCacheMatchInfo)
			if got.MatchBlocks != want.Match || got.TotalBlocks != want.Total || got.BlockSizeTokens != want.BlockSize || got.CachedBlockCount != want.Match {
				t.Errorf("%s %s: got %+v, want match %d total %d bs %d", st.Request, want.Endpoint, got, want.Match, want.Total, want.BlockSize)
			}
		}
		if st.Picked != "" {
			for _, e := range eps {
				if e.Name == st.Picked {
					ap.PreRequest(c, req, resultFor(e))
				}
			}
		}
	}
	if got := ap.PodCapacity("default/pod2"); got != 3 {
		t.Errorf("pod2 capacity %d", got)
	}
	if got := ap.PodBlocks("default/pod2"); got != 3 {
		t.Errorf("pod2 LRU holds %d", got)
	}
}

func approxWith(t *testing.T, params string) *ApproxPrefix {
	t.Helper()
	var raw json.RawMessage
	if params != "" {
		raw = json.RawMessage(params)
	}
	p, err := approxFactory("approx-prefix-cache-producer", raw, epp.NewHandle(0))
	if err != nil {
		t.Fatal(err)
	}
	return p.(*ApproxPrefix)
}

func TestApproxParams(t *testing.T) {
	for _, c := range []struct {
		params string
		err    string
	}{
		{`{"autoTune":false,"blockSizeTokens":0}`, "blockSizeTokens must be > 0"},
		{`{"maxPrefixTokensToMatch":-1}`, "maxPrefixTokensToMatch"},
		{`{"maxPrefixBlocksToMatch":-1}`, "maxPrefixBlocksToMatch"},
		{`{"tailFirst":true}`, "unknown field"},
		{`{"autoTune":true,"blockSizeTokens":0}`, ""},
	} {
		_, err := approxFactory("a", json.RawMessage(c.params), epp.NewHandle(0))
		if (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s: err %v, want %q", c.params, err, c.err)
		}
	}
	// Deprecated blockSize replaces blockSizeTokens only when that is left at 16.
	if got := approxWith(t, `{"blockSize":128}`).Params().BlockSizeTokens; got != 128 {
		t.Errorf("blockSize mapping: %d", got)
	}
	if got := approxWith(t, `{"blockSize":128,"blockSizeTokens":96}`).Params().BlockSizeTokens; got != 96 {
		t.Errorf("blockSize with explicit blockSizeTokens: %d", got)
	}
}

func TestApproxBlockSizeAndCaps(t *testing.T) {
	ep := func(bs int) []*epp.Endpoint {
		e := newEndpoints("p")
		e[0].Metrics.CacheBlockSize = bs
		return e
	}
	def := approxWith(t, "")
	manual := approxWith(t, `{"autoTune":false,"blockSizeTokens":256,"maxPrefixTokensToMatch":0,"maxPrefixBlocksToMatch":0}`)
	small := approxWith(t, `{"autoTune":false,"blockSizeTokens":8,"maxPrefixTokensToMatch":0,"maxPrefixBlocksToMatch":7}`)
	for _, c := range []struct {
		a    *ApproxPrefix
		eps  []*epp.Endpoint
		want int
	}{
		{def, nil, 64}, {def, ep(0), 64}, {def, ep(16), 64}, {def, ep(128), 128},
		{manual, ep(16), 256}, {small, ep(512), 64},
	} {
		if got := c.a.BlockSize(c.eps); got != c.want {
			t.Errorf("BlockSize = %d, want %d", got, c.want)
		}
	}
	if got := def.MaxBlocks(64); got != 2048 {
		t.Errorf("default MaxBlocks(64) = %d", got)
	}
	if got := def.MaxBlocks(100); got != 1310 {
		t.Errorf("default MaxBlocks(100) = %d", got)
	}
	if got := manual.MaxBlocks(256); got != math.MaxInt {
		t.Errorf("unlimited MaxBlocks = %d", got)
	}
	if got := small.MaxBlocks(64); got != 7 {
		t.Errorf("block cap = %d", got)
	}
}

func approxInfo(t *testing.T, a *ApproxPrefix, e *epp.Endpoint) epp.PrefixCacheMatchInfo {
	t.Helper()
	v, ok := e.Get(epp.DataKey{Type: epp.PrefixCacheMatchInfoType, Producer: a.Name()})
	if !ok {
		t.Fatalf("no match info on %s", e.Name)
	}
	return v.(epp.PrefixCacheMatchInfo)
}

// produceOn runs estimate tokenization + Produce for a completions prompt.
func produceOn(t *testing.T, a *ApproxPrefix, prompt string, eps []*epp.Endpoint) *epp.Request {
	t.Helper()
	tok, _ := NewTokenProducer(TokenProducerType, "token-producer", TokenProducerParams{})
	req := completionsReq("r", "m", prompt)
	if err := tok.Produce(&epp.Cycle{}, req, eps); err != nil {
		t.Fatal(err)
	}
	if err := a.Produce(&epp.Cycle{}, req, eps); err != nil {
		t.Fatal(err)
	}
	return req
}

func TestApproxCapacityAndTargets(t *testing.T) {
	a := approxWith(t, `{"lruCapacityPerServer":5}`) // autoTune on
	eps := newEndpoints("default/a", "default/b", "default/c")
	eps[0].Metrics.CacheNumBlocks = 1000 // autotuned capacity
	// b has no metric: lruCapacityPerServer; c is the prefill target.
	prompt := strings.Repeat("z", 64*4*3) // 3 blocks of 256 bytes
	req := produceOn(t, a, prompt, eps)
	res := &epp.Result{PrimaryProfile: "decode", Profiles: map[string]*epp.ProfileResult{
		"decode":  {Targets: []*epp.Endpoint{eps[0], eps[1]}},
		"prefill": {Targets: []*epp.Endpoint{eps[2]}},
		"encode":  {Targets: []*epp.Endpoint{eps[1]}},
	}}
	a.PreRequest(&epp.Cycle{}, req, res)
	if got := a.PodCapacity("default/a"); got != 1000 {
		t.Errorf("a capacity %d", got)
	}
	if got := a.PodCapacity("default/c"); got != 5 {
		t.Errorf("c capacity %d", got)
	}
	if got := a.PodBlocks("default/b"); got != 0 {
		t.Errorf("b (second decode target / encode) indexed %d blocks", got)
	}
	// A second PreRequest for the same state is a no-op (state consumed).
	a.PreRequest(&epp.Cycle{}, req, resultFor(eps[1]))
	if got := a.PodBlocks("default/b"); got != 0 {
		t.Errorf("state reused: b has %d", got)
	}
	// Capacity is fixed at first insert.
	eps[0].Metrics.CacheNumBlocks = 7
	req = produceOn(t, a, prompt+"tail", eps)
	a.PreRequest(&epp.Cycle{}, req, resultFor(eps[0]))
	if got := a.PodCapacity("default/a"); got != 1000 {
		t.Errorf("capacity changed to %d", got)
	}
	// Matches: a and c hold the prompt's 3 blocks, b none.
	eps = newEndpoints("default/a", "default/b", "default/c")
	produceOn(t, a, prompt, eps)
	for i, want := range []int{3, 0, 3} {
		if got := approxInfo(t, a, eps[i]); got.MatchBlocks != want || got.TotalBlocks != 3 || got.BlockSizeTokens != 64 {
			t.Errorf("%s: %+v, want match %d", eps[i].Name, got, want)
		}
	}
	// No tokens: (0, 0, bs) everywhere.
	produceOn(t, a, "", eps)
	for _, e := range eps {
		if got := approxInfo(t, a, e); !reflect.DeepEqual(got, epp.PrefixCacheMatchInfo{BlockSizeTokens: 64}) {
			t.Errorf("no tokens: %+v", got)
		}
	}
}

func TestApproxGlobalWalkAndRemove(t *testing.T) {
	a := approxWith(t, `{"autoTune":false,"blockSizeTokens":64}`)
	h := []uint64{1, 2, 3, 4}
	a.idx.add(h[:3], "A", 100, false)
	a.idx.add([]uint64{1, 3}, "B", 100, false)
	// The walk stops only where no pod holds the hash: B counts 1 and 3.
	if got := a.MatchBlocks([][]uint64{h}, "A"); got != 3 {
		t.Errorf("A = %d", got)
	}
	if got := a.MatchBlocks([][]uint64{h}, "B"); got != 2 {
		t.Errorf("B = %d (global walk)", got)
	}
	counts := make([]int, 2)
	a.idx.matchLongestPrefix(h, counts)
	if counts[0] != 3 || counts[1] != 2 {
		t.Errorf("matchLongestPrefix %v", counts)
	}
	a.RemovePod("A")
	if got := a.MatchBlocks([][]uint64{h}, "B"); got != 1 {
		t.Errorf("after removing A, B = %d", got)
	}
	if got := a.PodBlocks("A"); got != 0 {
		t.Errorf("A still has %d", got)
	}
}

// TestApproxInsertionOrder contrasts ebab687's head-first insertion with
// PR #2661's tail-first: capacity 3, a 4-block prompt, then 3 unrelated
// blocks. Head-first leaves the head block stale (still matching);
// tail-first leaves the tail stale and the head evicted.
func TestApproxInsertionOrder(t *testing.T) {
	p := []uint64{10, 11, 12, 13}
	for _, c := range []struct {
		tailFirst bool
		afterAdd  int
		afterEvic int
	}{{false, 4, 1}, {true, 4, 0}} {
		a := approxWith(t, `{"autoTune":false,"blockSizeTokens":64,"lruCapacityPerServer":3}`)
		a.SetTailFirst(c.tailFirst)
		a.idx.add(p, "A", 3, a.TailFirst())
		if got := a.MatchBlocks([][]uint64{p}, "A"); got != c.afterAdd {
			t.Errorf("tailFirst=%v after add: %d", c.tailFirst, got)
		}
		a.idx.add([]uint64{20, 21, 22}, "A", 3, a.TailFirst())
		if got := a.MatchBlocks([][]uint64{p}, "A"); got != c.afterEvic {
			t.Errorf("tailFirst=%v after eviction: %d", c.tailFirst, got)
		}
	}
}

func TestApproxOffloadLRUPR2292(t *testing.T) {
	// llm-d-router #1650: with autoTune the LRU has num_gpu_blocks entries
	// whatever the CPU tier holds; PR #2292 (an eppsim option) sizes it to
	// max(GPU, CPU) when the engine reports its CPU capacity, converted to
	// engine blocks (tokens / block_size).
	for _, c := range []struct {
		name          string
		params        string
		option        bool
		gpu, cpuToks  int
		wantCapacity  int
		wantXAfterLRU int // X's match after Y: 3 if the LRU kept it, 0 if evicted
	}{
		{"upstream, CPU reported", "", false, 4, 160, 4, 0},
		{"PR 2292, CPU larger", "", true, 4, 160, 10, 3},
		{"PR 2292, CPU smaller: max, not sum", "", true, 4, 32, 4, 0},
		{"PR 2292, no CPU reported", "", true, 4, 0, 4, 0},
		{"PR 2292 without autoTune: lruCapacityPerServer", `{"autoTune":false,"lruCapacityPerServer":5}`, true, 4, 160, 5, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := approxWith(t, c.params)
			a.SetOffloadLRU(c.option)
			eps := newEndpoints("default/a")
			eps[0].Metrics = epp.Metrics{CacheBlockSize: 16, CacheNumBlocks: c.gpu, CacheCPUCapacityTokens: c.cpuToks}
			// X then Y, 3 router blocks each (256 bytes = 64 estimate
			// tokens per block): 6 entries.
			x, y := strings.Repeat("x", 3*256), strings.Repeat("y", 3*256)
			for _, p := range []string{x, y} {
				a.PreRequest(&epp.Cycle{}, produceOn(t, a, p, eps), resultFor(eps[0]))
			}
			if got := a.PodCapacity("default/a"); got != c.wantCapacity {
				t.Fatalf("capacity %d, want %d", got, c.wantCapacity)
			}
			// X inserted first: an LRU of fewer than 6 entries evicted its
			// head block, and the match walk stops there.
			produceOn(t, a, x, eps)
			if got := approxInfo(t, a, eps[0]).MatchBlocks; got != c.wantXAfterLRU {
				t.Fatalf("X matches %d blocks, want %d", got, c.wantXAfterLRU)
			}
		})
	}
}
