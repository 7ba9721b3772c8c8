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
