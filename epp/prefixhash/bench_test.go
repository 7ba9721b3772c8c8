package prefixhash

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/epp"
)

// benchText returns n bytes of deterministic word-like text.
func benchText(n int) string {
	r := rand.New(rand.NewPCG(1, 2))
	words := []string{"the", "cache", "prefix", "router", "token", "block", "replica", "latency", "model", "request"}
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(words[r.IntN(len(words))])
		b.WriteByte(' ')
	}
	return b.String()[:n]
}

// BenchmarkBlockHashes12k hashes one 12,000-token prompt at the approx
// producer's effective block size (64) — throughput in token bytes/s.
func BenchmarkBlockHashes12k(b *testing.B) {
	tokens := PackString(benchText(48000))
	req := &epp.Request{TargetModel: "meta-llama/Llama-3.1-8B-Instruct", Tokenized: &epp.TokenizedRequest{Prompts: [][]uint32{tokens}}}
	b.SetBytes(int64(4 * len(tokens)))
	b.ReportAllocs()
	for b.Loop() {
		if hs := GetBlockHashes(req, 64, 2048); len(hs[0]) != 188 {
			b.Fatal(len(hs[0]))
		}
	}
}

// benchChatBody is a 48 KB multi-turn chat body.
func benchChatBody() []byte {
	text := benchText(48000)
	var msgs []map[string]string
	for i := 0; i < 8; i++ {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		msgs = append(msgs, map[string]string{"role": role, "content": text[i*6000 : (i+1)*6000]})
	}
	body, _ := json.Marshal(map[string]any{"model": "m", "messages": msgs})
	return body
}

// benchCompletionsBody is a 48 KB completions body.
func benchCompletionsBody() []byte {
	body, _ := json.Marshal(map[string]any{"model": "m", "prompt": benchText(48000)})
	return body
}

// BenchmarkTokenizeChat48KB runs the estimate tokenizer on a 48 KB
// multi-turn chat body.
func BenchmarkTokenizeChat48KB(b *testing.B) {
	body := benchChatBody()
	e := &Estimator{}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Tokenize("/v1/chat/completions", body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTokenizeCompletions48KB is the same for a completions body.
func BenchmarkTokenizeCompletions48KB(b *testing.B) {
	body := benchCompletionsBody()
	e := &Estimator{}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.Tokenize("/v1/completions", body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckBodyChat48KB runs the parser's body check (spec §2.1
// step 0) on the 48 KB chat body; it runs for every request, before the
// tokenizer.
func BenchmarkCheckBodyChat48KB(b *testing.B) {
	body := benchChatBody()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if err := CheckBody(KindChatCompletions, body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckBodyCompletions48KB is the same for the completions body.
func BenchmarkCheckBodyCompletions48KB(b *testing.B) {
	body := benchCompletionsBody()
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if err := CheckBody(KindCompletions, body); err != nil {
			b.Fatal(err)
		}
	}
}
