package producer

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/epp"
)

func benchPrompt(n int, seed uint64) string {
	r := rand.New(rand.NewPCG(seed, 7))
	words := []string{"the", "cache", "prefix", "router", "token", "block", "replica", "latency", "model", "request"}
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(words[r.IntN(len(words))])
		b.WriteByte(' ')
	}
	return b.String()[:n]
}

func chatReq(id, model, content string) *epp.Request {
	body, _ := json.Marshal(map[string]any{"model": model, "messages": []map[string]string{{"role": "user", "content": content}}})
	return &epp.Request{ID: id, TargetModel: model, Path: "/v1/chat/completions", Body: body}
}

func benchEndpoints(n int) []*epp.Endpoint {
	eps := make([]*epp.Endpoint, n)
	for i := range eps {
		eps[i] = &epp.Endpoint{
			EndpointInfo: &epp.EndpointInfo{Name: fmt.Sprintf("default/pod%d", i), Address: fmt.Sprintf("10.0.%d.%d:8000", i/256, i%256)},
			Metrics:      epp.Metrics{CacheBlockSize: 16, CacheNumBlocks: 100000},
		}
	}
	return eps
}

// warmApprox indexes, on every other endpoint, a prompt that shares the
// first half of the benchmark prompt, so Produce walks ~94 blocks.
func warmApprox(b *testing.B, ap *ApproxPrefix, tok *TokenProducer, eps []*epp.Endpoint, prompt string) {
	shared := prompt[:len(prompt)/2] + benchPrompt(len(prompt)/2, 99)
	c := &epp.Cycle{}
	for i := 0; i < len(eps); i += 2 {
		req := chatReq(fmt.Sprint("warm", i), "m", shared)
		if err := tok.Produce(c, req, eps); err != nil {
			b.Fatal(err)
		}
		_ = ap.Produce(c, req, eps)
		ap.PreRequest(c, req, resultFor(eps[i]))
	}
}

func benchApproxProduce(b *testing.B, n int, withTokenize bool) {
	tok, err := NewTokenProducer(TokenProducerType, "token-producer", TokenProducerParams{})
	if err != nil {
		b.Fatal(err)
	}
	ap, err := NewApproxPrefix("approx-prefix-cache-producer", DefaultApproxPrefixParams())
	if err != nil {
		b.Fatal(err)
	}
	eps := benchEndpoints(n)
	prompt := benchPrompt(48000, 1)
	warmApprox(b, ap, tok, eps, prompt)
	req := chatReq("r", "m", prompt)
	c := &epp.Cycle{}
	if err := tok.Produce(c, req, eps); err != nil {
		b.Fatal(err)
	}
	if req.Tokenized.TokenCount() != 12001 {
		b.Fatalf("prompt has %d tokens", req.Tokenized.TokenCount())
	}
	b.ReportAllocs()
	for b.Loop() {
		if withTokenize {
			req.Tokenized = nil
			_ = tok.Produce(c, req, eps)
		}
		_ = ap.Produce(c, req, eps)
	}
	v, _ := eps[0].Get(ap.key)
	if info := v.(epp.PrefixCacheMatchInfo); info.MatchBlocks < 90 || info.TotalBlocks != 188 {
		b.Fatalf("unexpected match %+v", info)
	}
}

// BenchmarkApproxProduce: approx-prefix-cache-producer Produce on a
// 12k-token (48 KB) prompt, tokens already produced.
func BenchmarkApproxProduce16(b *testing.B) { benchApproxProduce(b, 16, false) }
func BenchmarkApproxProduce64(b *testing.B) { benchApproxProduce(b, 64, false) }

// BenchmarkTokenizeApproxProduce adds the estimate token producer (48 KB
// chat body → pseudo-tokens) in front.
func BenchmarkTokenizeApproxProduce16(b *testing.B) { benchApproxProduce(b, 16, true) }
func BenchmarkTokenizeApproxProduce64(b *testing.B) { benchApproxProduce(b, 64, true) }

// replayGen synthesizes the approximate index's insert stream of a
// long-prompt conversation replay: each request is one conversation's
// context so far (a shared system prefix, then the conversation's own
// blocks), ~190 blocks on average, sent to the conversation's home pod
// most of the time. Calibrated on the Mooncake conversation trace at 16
// replicas, where about a third of the inserted hashes are already held by
// the target pod and nearly every new one evicts.
type replayGen struct {
	rng   *rand.Rand
	convs []replayConv
	next  uint64
	buf   []uint64
}

type replayConv struct {
	id     uint64
	blocks int
}

func newReplayGen(seed uint64, conversations int) *replayGen {
	g := &replayGen{rng: rand.New(rand.NewPCG(seed, 11))}
	g.convs = make([]replayConv, conversations)
	for i := range g.convs {
		g.convs[i] = g.freshConv()
		g.convs[i].blocks += g.rng.IntN(160) // spread over the sawtooth from the start
	}
	return g
}

func (g *replayGen) freshConv() replayConv {
	g.next++
	return replayConv{id: g.next, blocks: 40 + g.rng.IntN(120)}
}

// request returns the next request's hashes and target pod.
func (g *replayGen) request(pods int) ([]uint64, int) {
	ci := g.rng.IntN(len(g.convs))
	c := &g.convs[ci]
	c.blocks += 2 + g.rng.IntN(12)
	if c.blocks > 280 {
		*c = g.freshConv()
	}
	g.buf = g.buf[:0]
	const systemBlocks = 8
	for i := range c.blocks {
		owner := c.id
		if i < systemBlocks {
			owner = c.id % 7 // a handful of shared system prompts
		}
		g.buf = append(g.buf, splitmix(owner<<20|uint64(i)))
	}
	pod := int(c.id % uint64(pods))
	if g.rng.IntN(20) < 9 {
		pod = g.rng.IntN(pods)
	}
	return g.buf, pod
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// BenchmarkApproxAddReplay is the approximate index's insert path
// (PreRequest → approxIndex.add) in steady state: 16 pods whose LRUs of
// upstream's default capacity are full, fed the replayGen stream. One op is
// one request.
func BenchmarkApproxAddReplay(b *testing.B) {
	const pods = 16
	ix := newApproxIndex()
	names := make([]string, pods)
	for i := range names {
		names[i] = fmt.Sprintf("default/pod%d", i)
	}
	g := newReplayGen(1, 3000)
	for range 8000 { // fill every LRU and reach the steady hit ratio
		hs, pod := g.request(pods)
		ix.add(hs, names[pod], DefaultLRUCapacityPerServer, false)
	}
	blocks := 0
	b.ReportAllocs()
	for b.Loop() {
		hs, pod := g.request(pods)
		blocks += len(hs)
		ix.add(hs, names[pod], DefaultLRUCapacityPerServer, false)
	}
	b.ReportMetric(float64(blocks)/float64(b.N), "blocks/op")
}
