package producer

import (
	"errors"
	"testing"

	"github.com/eppsim/eppsim/epp"
)

const msNs = int64(1e6)

// burstReq is a request whose tokenized prompt is the given 64-token
// blocks (block b is 64 copies of token b).
func burstReq(id string, blocks ...uint32) *epp.Request {
	var toks []uint32
	for _, b := range blocks {
		for range 64 {
			toks = append(toks, b)
		}
	}
	return &epp.Request{ID: id, TargetModel: "m", Tokenized: &epp.TokenizedRequest{Prompts: [][]uint32{toks}}}
}

func burstPods(names ...string) []*epp.Endpoint {
	out := make([]*epp.Endpoint, len(names))
	for i, n := range names {
		out[i] = &epp.Endpoint{EndpointInfo: &epp.EndpointInfo{Name: n}}
	}
	return out
}

func newBurst(t *testing.T, params string) *BurstPrefix {
	t.Helper()
	var raw []byte
	if params != "" {
		raw = []byte(params)
	}
	p, err := burstFactory("burst", raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p.(*BurstPrefix)
}

// produce runs Produce and returns the wait's end (-1 when none).
func produce(t *testing.T, b *BurstPrefix, now int64, r *epp.Request, eps []*epp.Endpoint) int64 {
	t.Helper()
	err := b.Produce(&epp.Cycle{Now: now}, r, eps)
	var w *epp.WaitError
	switch {
	case errors.As(err, &w):
		return w.Until
	case err != nil:
		t.Fatalf("request %s: %v", r.ID, err)
	}
	return -1
}

// match returns the member's match on each endpoint after its resumption.
func match(b *BurstPrefix, eps []*epp.Endpoint) []int {
	var out []int
	for _, e := range eps {
		m, _ := epp.Attr[epp.PrefixCacheMatchInfo](e, b.key)
		out = append(out, m.MatchBlocks)
	}
	return out
}

// TestBurstWindow: A at 0 opens a batch sealed at 100 ms; B (50 ms) joins
// it; both wait until 100 ms. C arriving at 100 ms finds the batch due: it
// is sealed first and C opens the next one, sealed at 200 ms. A and B share
// their prompt (two blocks): they are placed together, (2, 2, 64) on the
// replica and (0, 2, 64) elsewhere; C alone is not placed.
func TestBurstWindow(t *testing.T) {
	b := newBurst(t, "")
	podsA, podsB, podsC := burstPods("ns/a", "ns/b"), burstPods("ns/a", "ns/b"), burstPods("ns/a", "ns/b")
	ra, rb, rc := burstReq("A", 1, 2), burstReq("B", 1, 2), burstReq("C", 7)
	if w := produce(t, b, 0, ra, podsA); w != 100*msNs {
		t.Fatalf("A waits until %d", w)
	}
	if w := produce(t, b, 50*msNs, rb, podsB); w != 100*msNs {
		t.Fatalf("B waits until %d", w)
	}
	if w := produce(t, b, 100*msNs, rc, podsC); w != 200*msNs {
		t.Fatalf("C waits until %d, want the next batch's seal", w)
	}
	if s, p := b.Stats(); s != 1 || p != 2 {
		t.Fatalf("sealed %d placed %d", s, p)
	}
	for _, m := range []struct {
		r    *epp.Request
		eps  []*epp.Endpoint
		want []int
	}{{ra, podsA, []int{2, 0}}, {rb, podsB, []int{2, 0}}} {
		if w := produce(t, b, 100*msNs, m.r, m.eps); w != -1 {
			t.Fatalf("%s waits again", m.r.ID)
		}
		if got := match(b, m.eps); got[0] != m.want[0] || got[1] != m.want[1] {
			t.Errorf("%s match %v, want %v", m.r.ID, got, m.want)
		}
		info, _ := epp.Attr[epp.PrefixCacheMatchInfo](m.eps[1], b.key)
		if info.TotalBlocks != 2 || info.BlockSizeTokens != 64 {
			t.Errorf("%s info %+v", m.r.ID, info)
		}
	}
	produce(t, b, 200*msNs, rc, podsC)
	if got := match(b, podsC); got[0] != 0 || got[1] != 0 {
		t.Errorf("C (alone) match %v", got)
	}
}

// TestBurstMaxPerReplica: three identical requests with maxPerReplica 1 on
// two replicas go in runs of one: ns/a (least loaded, lowest name), ns/b,
// then — both at their cap — the overall least loaded, ns/a again.
func TestBurstMaxPerReplica(t *testing.T) {
	b := newBurst(t, `{"maxPerReplica":1}`)
	var reqs []*epp.Request
	var pods [][]*epp.Endpoint
	for i := range 3 {
		reqs = append(reqs, burstReq(string(rune('A'+i)), 3))
		pods = append(pods, burstPods("ns/a", "ns/b"))
		produce(t, b, int64(i)*msNs, reqs[i], pods[i])
	}
	want := [][]int{{1, 0}, {0, 1}, {1, 0}}
	for i := range reqs {
		produce(t, b, 100*msNs, reqs[i], pods[i])
		if got := match(b, pods[i]); got[0] != want[i][0] || got[1] != want[i][1] {
			t.Errorf("request %d match %v, want %v", i, got, want[i])
		}
	}
}

// TestBurstRunningTieBreak: equal batch loads are broken by fewer scraped
// running requests before the name.
func TestBurstRunningTieBreak(t *testing.T) {
	b := newBurst(t, "")
	pods := burstPods("ns/a", "ns/b")
	pods[0].Metrics.RunningRequestsSize = 4
	r1, r2 := burstReq("1", 5), burstReq("2", 5)
	produce(t, b, 0, r1, pods)
	produce(t, b, 0, r2, burstPods("ns/a", "ns/b"))
	produce(t, b, 100*msNs, r1, pods)
	if got := match(b, pods); got[0] != 0 || got[1] != 1 {
		t.Errorf("match %v, want ns/b (fewer running)", got)
	}
}

// TestBurstMinColocate: with minColocateBlocks 2, a group of two identical
// requests (G) and two singletons sharing their first two blocks (S1 with
// three blocks, S2 with four) on two replicas: total 4, fair share 2. G
// goes to ns/a; S2 (the longer singleton first) finds no placed prefix and
// goes to the least loaded, ns/b; S1 shares two blocks with S2 there, and
// ns/b is below its share: co-located on ns/b.
func TestBurstMinColocate(t *testing.T) {
	b := newBurst(t, `{"minColocateBlocks":2}`)
	g1, g2 := burstReq("G1", 9, 9), burstReq("G2", 9, 9)
	s1, s2 := burstReq("S1", 1, 2, 3), burstReq("S2", 1, 2, 4, 5)
	pods := map[string][]*epp.Endpoint{}
	for i, r := range []*epp.Request{g1, g2, s1, s2} {
		pods[r.ID] = burstPods("ns/a", "ns/b")
		produce(t, b, int64(i)*msNs, r, pods[r.ID])
	}
	want := map[string][]int{"G1": {2, 0}, "G2": {2, 0}, "S1": {0, 3}, "S2": {0, 4}}
	for _, r := range []*epp.Request{g1, g2, s1, s2} {
		produce(t, b, 100*msNs, r, pods[r.ID])
		if got := match(b, pods[r.ID]); got[0] != want[r.ID][0] || got[1] != want[r.ID][1] {
			t.Errorf("%s match %v, want %v", r.ID, got, want[r.ID])
		}
	}
	// Without minColocateBlocks the singletons are not placed.
	b0 := newBurst(t, "")
	for i, r := range []*epp.Request{s1, s2} {
		produce(t, b0, int64(i), r, burstPods("ns/a", "ns/b"))
	}
	p := burstPods("ns/a", "ns/b")
	produce(t, b0, 100*msNs, s1, p)
	if got := match(b0, p); got[0] != 0 || got[1] != 0 {
		t.Errorf("singleton placed without minColocateBlocks: %v", got)
	}
}

// TestBurstMaxBatchSize: past maxBatchSize a request fails at once, without
// waiting, and gets no match info.
func TestBurstMaxBatchSize(t *testing.T) {
	b := newBurst(t, `{"maxBatchSize":2}`)
	produce(t, b, 0, burstReq("1", 1), burstPods("ns/a"))
	produce(t, b, 0, burstReq("2", 1), burstPods("ns/a"))
	err := b.Produce(&epp.Cycle{Now: 1}, burstReq("3", 1), burstPods("ns/a"))
	var w *epp.WaitError
	if err == nil || errors.As(err, &w) {
		t.Fatalf("third request: %v, want a failure without a wait", err)
	}
}

// TestBurstTokensBalance: balanceBy tokens charges a unit's blocks on its
// first touch of a replica: a 4-block group on ns/a (load 4), then a
// 1-block group goes to ns/b.
func TestBurstTokensBalance(t *testing.T) {
	b := newBurst(t, `{"balanceBy":"tokens"}`)
	big := []*epp.Request{burstReq("B1", 1, 2, 3, 4), burstReq("B2", 1, 2, 3, 4)}
	small := []*epp.Request{burstReq("S1", 8), burstReq("S2", 8), burstReq("S3", 8)}
	pods := map[string][]*epp.Endpoint{}
	for i, r := range append(big, small...) {
		pods[r.ID] = burstPods("ns/a", "ns/b")
		produce(t, b, int64(i), r, pods[r.ID])
	}
	produce(t, b, 100*msNs, small[0], pods["S1"])
	if got := match(b, pods["S1"]); got[0] != 0 || got[1] != 1 {
		t.Errorf("small group on %v, want ns/b", got)
	}
}

// TestBurstParamErrors: the parameter ranges of §14.1.
func TestBurstParamErrors(t *testing.T) {
	for _, bad := range []string{`{"windowDurationMs":0}`, `{"windowDurationMs":10001}`, `{"maxPerReplica":0}`,
		`{"blockSizeTokens":0}`, `{"maxPrefixTokensToMatch":10}`, `{"minColocateBlocks":-1}`, `{"maxBatchSize":0}`,
		`{"balanceBy":"bytes"}`, `{"window":5}`} {
		if _, err := burstFactory("b", []byte(bad), nil); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	b := newBurst(t, `{"maxPrefixTokensToMatch":256,"windowDurationMs":10000,"maxBatchSize":-1}`)
	if b.maxBlocks != 4 || b.window != 10000*msNs || b.maxBatch != -1 {
		t.Errorf("parsed %+v", b)
	}
}
