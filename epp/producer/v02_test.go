package producer

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/epp"
)

func ip(v int) *int { return &v }

func newV02(t *testing.T, params string) epp.Plugin {
	t.Helper()
	p, err := v02Factory("prefix-cache-scorer", json.RawMessage(params), nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// v02Step scores req on eps and, when pick ≥ 0, records eps[pick] as the
// target, returning the scores.
func v02Step(t *testing.T, s epp.Scorer, req *epp.Request, eps []*epp.Endpoint, pick int) []float64 {
	t.Helper()
	for i, e := range eps {
		eps[i] = &epp.Endpoint{EndpointInfo: e.EndpointInfo} // a new cycle's view
	}
	scores := make([]float64, len(eps))
	s.Score(nil, req, eps, scores)
	if pick >= 0 {
		s.(epp.PreRequestHook).PreRequest(nil, req, resultFor(eps[pick]))
	}
	return scores
}

// TestV02EstimateScores walks GIE v0.5.1's estimate by hand with 16-character
// blocks: a 48-character prompt has 1 (model) + 3 block hashes; a pod
// that served it matches all 4; a prompt that shares only the first block
// matches the model block and that block, 2 of 4; one that differs only in
// characters 16–23 matches everything (the in-place overwrite); a prompt
// shorter than a block has no hashes and scores 0 everywhere.
func TestV02EstimateScores(t *testing.T) {
	s := newV02(t, `{"hashBlockSize": 16, "maxPrefixBlocksToMatch": 256, "lruCapacityPerServer": 100}`).(*V02Estimate)
	eps := newEndpoints("a", "b")
	a16, b16, c16 := strings.Repeat("a", 16), strings.Repeat("b", 16), strings.Repeat("c", 16)
	steps := []struct {
		name, prompt string
		pick         int
		want         []float64
	}{
		{"cold", a16 + b16 + c16, 0, []float64{0, 0}},
		{"same prompt: a holds all 4 blocks", a16 + b16 + c16, -1, []float64{1, 0}},
		{"first block shared: model + block 0 = 2/4", a16 + "bbbbbbbbXbbbbbbb" + c16, -1, []float64{0.5, 0}},
		{"differs only in chars 16-23: all 4", a16 + "XXXXXXXXbbbbbbbb" + c16, -1, []float64{1, 0}},
		{"partial tail ignored: 4/4", a16 + b16 + c16 + "tail", -1, []float64{1, 0}},
		{"longer prompt: 4 of 5", a16 + b16 + c16 + a16, 1, []float64{0.8, 0}},
		{"b now holds the 5-block prompt", a16 + b16 + c16 + a16, -1, []float64{0.8, 1}},
		{"shorter than a block: no hashes", "short", -1, []float64{0, 0}},
		{"another model shares nothing", a16 + b16 + c16, -1, nil},
	}
	for i, st := range steps {
		req := completionsReq("r", "m", st.prompt)
		if i == len(steps)-1 {
			req = completionsReq("r", "other", st.prompt)
			st.want = []float64{0, 0}
		}
		got := v02Step(t, s, req, eps, st.pick)
		for j := range got {
			if got[j] != st.want[j] {
				t.Errorf("%s: scores %v, want %v", st.name, got, st.want)
				break
			}
		}
	}
	if info, ok := epp.Attr[epp.PrefixCacheMatchInfo](eps[0], s.key); !ok || info.TotalBlocks != 4 || info.MatchBlocks != 0 || info.BlockSizeTokens != 0 {
		t.Errorf("match info of the last step on a: %+v %v", info, ok)
	}
}

// TestV02EstimateChat: a chat body is hashed as its "<|im_start|>role\n
// content<|im_end|>\n" rendering; the v0.2 prompt of two messages is 47
// characters, so 16-character blocks give 1 + 2 hashes.
func TestV02EstimateChat(t *testing.T) {
	s := newV02(t, `{"hashBlockSize": 16}`).(*V02Estimate)
	body := []byte(`{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}]}`)
	req := &epp.Request{ID: "c", TargetModel: "m", Path: "/v1/chat/completions", Body: body}
	prompt := "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
	if got := s.Hashes(req); len(got) != 1+len(prompt)/16 {
		t.Errorf("%d hashes for a %d-character prompt, want %d", len(got), len(prompt), 1+len(prompt)/16)
	}
	// A non-string prompt was a 400 upstream: no prefix signal here.
	bad := &epp.Request{ID: "x", TargetModel: "m", Body: []byte(`{"model":"m","prompt":[1,2,3]}`)}
	if got := s.Hashes(bad); got != nil {
		t.Errorf("token-array prompt: %x", got)
	}
}

// TestV02EstimateLRU: the pod LRU holds lruCapacityPerServer hashes; a
// later prompt evicts the oldest, and the default applies when the
// capacity is not positive.
func TestV02EstimateLRU(t *testing.T) {
	s := newV02(t, `{"hashBlockSize": 16, "lruCapacityPerServer": 4}`).(*V02Estimate)
	eps := newEndpoints("a")
	p1 := strings.Repeat("a", 48) // 4 hashes: fills the LRU
	p2 := strings.Repeat("z", 16) // model block (held) + 1 new: evicts p1's first block
	v02Step(t, s, completionsReq("1", "m", p1), eps, 0)
	v02Step(t, s, completionsReq("2", "m", p2), eps, 0)
	// p1's block 0 is gone: the walk stops after the model block (1/4).
	if got := v02Step(t, s, completionsReq("3", "m", p1), eps, -1); got[0] != 0.25 {
		t.Errorf("after eviction: %v, want [0.25]", got)
	}
	if _, _, c := newV02(t, `{"lruCapacityPerServer": 0}`).(*V02Estimate).Params(); c != V02DefaultLRUCapacityPerServer {
		t.Errorf("capacity 0 → %d, want the default", c)
	}
	if bs, mb, _ := newV02(t, `{}`).(*V02Estimate).Params(); bs != 64 || mb != 256 {
		t.Errorf("defaults: %d chars, %d blocks", bs, mb)
	}
}

// TestV02TrackingMinMax: cache_tracking scores min-max over the pods with
// a hit (v0.2.1 indexedScoresToNormalizedScoredPods).
func TestV02TrackingMinMax(t *testing.T) {
	s := newV02(t, `{"mode":"cache_tracking","indexerConfig":{"tokenProcessorConfig":{"blockSize":4,"hashSeed":"42"}}}`).(*V02Tracking)
	if s.BlockSize() != 4 {
		t.Fatalf("block size %d", s.BlockSize())
	}
	eps := newEndpoints("a", "b", "c", "d")
	cases := []struct {
		match []int
		want  []float64
	}{
		{[]int{3, 1, 0, 2}, []float64{1, 0, 0, 0.5}},
		{[]int{2, 0, 2, 0}, []float64{1, 0, 1, 0}},
		{[]int{0, 0, 0, 0}, []float64{0, 0, 0, 0}},
	}
	for _, tc := range cases {
		for i, e := range eps {
			e = &epp.Endpoint{EndpointInfo: e.EndpointInfo}
			eps[i] = e
			e.Put(s.key, epp.PrefixCacheMatchInfo{MatchBlocks: tc.match[i], TotalBlocks: 8, BlockSizeTokens: 4})
		}
		scores := make([]float64, len(eps))
		s.Score(nil, &epp.Request{ID: "r"}, eps, scores)
		for i := range scores {
			if scores[i] != tc.want[i] {
				t.Errorf("match %v: scores %v, want %v", tc.match, scores, tc.want)
				break
			}
		}
	}
}

func TestV02ParamErrors(t *testing.T) {
	for _, params := range []string{
		`{"hashBlockSize": 0}`,
		`{"maxPrefixBlocksToMatch": -1}`,
		`{"mode": "exact"}`,
		`{"mode": "cache_tracking", "hashBlockSize": 64}`,
		`{"indexerConfig": {}}`,
		`{"blockChars": 64}`,
	} {
		if _, err := v02Factory("p", json.RawMessage(params), nil); err == nil {
			t.Errorf("%s: no error", params)
		}
	}
	if _, err := NewV02Prefix("p", V02PrefixParams{HashBlockSize: ip(8)}); err != nil {
		t.Error(err)
	}
}

// TestV02TrackingEvents: v0.2.0's pool recorded every block under "gpu",
// ignored AllBlocksCleared, and matched only blocks stored at its own
// block size; the score is then min-max over the pods with a hit.
func TestV02TrackingEvents(t *testing.T) {
	s := newV02(t, `{"mode":"cache_tracking","indexerConfig":{"tokenProcessorConfig":{"blockSize":4,"hashSeed":"0"}}}`).(*V02Tracking)
	s.SetDefaultEventModel("m")
	c := &epp.Cycle{}
	s.HandleKVEvents(c, podA, []epp.KVEvent{stored([]uint64{1, 2}, 0, seq(1, 8), "cpu")})
	s.HandleKVEvents(c, podB, []epp.KVEvent{stored([]uint64{5}, 0, seq(1, 4), "")})
	// Stored at another engine block size: never matches in v0.2.0.
	other := stored([]uint64{9, 10}, 0, seq(1, 8), "")
	other.BlockSize = 8
	s.HandleKVEvents(c, podC, []epp.KVEvent{other})
	score := func() []float64 {
		eps := newEndpoints("a", "b", "c")
		scores := make([]float64, 3)
		s.Score(c, &epp.Request{ID: "r", TargetModel: "m", Tokenized: &epp.TokenizedRequest{Prompts: [][]uint32{seq(1, 12)}}}, eps, scores)
		return scores
	}
	if got := score(); got[0] != 1 || got[1] != 0 || got[2] != 0 {
		t.Errorf("a 2 blocks (cpu counted as gpu), b 1, c none: %v, want [1 0 0]", got)
	}
	s.HandleKVEvents(c, podA, []epp.KVEvent{{Kind: epp.AllBlocksCleared}})
	if got := score(); got[0] != 1 {
		t.Errorf("after AllBlocksCleared (ignored): %v", got)
	}
	s.HandleKVEvents(c, podA, []epp.KVEvent{removed("cpu", 2)}) // its medium is dropped too
	if got := score(); got[0] != 1 || got[1] != 1 {
		t.Errorf("a and b 1 block each: %v, want [1 1 0]", got)
	}
}

// TestV02EstimateMatchBlocks: MatchBlocks is what Produce writes.
func TestV02EstimateMatchBlocks(t *testing.T) {
	s := newV02(t, `{"hashBlockSize": 16}`).(*V02Estimate)
	eps := newEndpoints("a", "b")
	p := strings.Repeat("q", 40)
	v02Step(t, s, completionsReq("1", "m", p), eps, 0)
	h := s.Hashes(completionsReq("2", "m", p))
	if got := s.MatchBlocks(h, "a"); got != 3 || s.MatchBlocks(h, "b") != 0 || s.MatchBlocks(h, "none") != 0 {
		t.Errorf("MatchBlocks a = %d, want 3 (model + 2 blocks)", got)
	}
}
