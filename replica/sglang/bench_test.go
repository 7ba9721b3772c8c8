package sglang

import (
	"math/rand/v2"
	"testing"

	"github.com/eppsim/eppsim/replica"
)

// BenchmarkEngineMultiTurn drives the engine through a synthetic multi-turn
// chat workload: 64 conversations with a 2000-token shared system prompt,
// each turn's prompt the previous turn's prompt + answer + 200 new tokens,
// 150-token answers, 16 conversations active at a time, pool 200k tokens.
// One op is one request served to completion (steps included).
func BenchmarkEngineMultiTurn(b *testing.B) {
	cfg := testConfig(200_000)
	cfg.CheckInvariants = false
	e, err := NewEngine(cfg, &replica.Linear{PrefillTokenUs: 0.05, DecodeSeqUs: 10, StepUs: 5000})
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	system := make([]uint32, 2000)
	for i := range system {
		system[i] = uint32(r.IntN(30000))
	}
	type conv struct{ hist []uint32 }
	convs := make([]conv, 64)
	for i := range convs {
		convs[i].hist = append([]uint32(nil), system...)
	}
	now := int64(0)
	id := int64(0)
	active := map[*replica.Request]int{}
	queue := func() {
		c := r.IntN(len(convs))
		h := &convs[c].hist
		for range 200 {
			*h = append(*h, uint32(r.IntN(30000)))
		}
		if len(*h) > 60000 {
			*h = append((*h)[:0], system...)
		}
		q := &replica.Request{ID: id, Prompt: append([]uint32(nil), *h...), OutputLen: 150}
		id++
		if err := e.Add(q, now); err != nil {
			b.Fatal(err)
		}
		active[q] = c
	}
	b.ReportAllocs()
	b.ResetTimer()
	done := 0
	for done < b.N {
		for len(active) < 16 {
			queue()
		}
		d, ok := e.BeginStep(now)
		if !ok {
			now += 1000
			continue
		}
		now += d
		out := e.EndStep(now)
		for _, q := range out.Finished {
			c := active[q]
			delete(active, q)
			h := &convs[c].hist
			for k := range q.OutputLen {
				*h = append(*h, q.OutputToken(k))
			}
			done++
		}
	}
	b.ReportMetric(float64(e.Stats().PrefixHits)/float64(max(e.Stats().PrefixQueries, 1)), "hit-rate")
}
