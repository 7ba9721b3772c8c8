package replica

import (
	"fmt"
	"testing"
)

// BenchmarkDecodeStep measures one engine step (schedule + outputs) with a
// batch of decoding requests on the 8B/H100 preset.
func BenchmarkDecodeStep(b *testing.B) {
	for _, batch := range []int{8, 64, 256} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			p, _ := LookupPreset("llama-3.1-8b-h100")
			m, _ := p.Model()
			cfg, _ := p.EngineConfig()
			e, err := NewEngine(cfg, m)
			if err != nil {
				b.Fatal(err)
			}
			now := int64(0)
			id := int64(0)
			// Finished requests are replaced, keeping the batch size steady.
			add := func() {
				id++
				if err := e.Add(&Request{ID: id, Prompt: seq(int(id)*4096, 1024), OutputLen: 512}, now); err != nil {
					b.Fatal(err)
				}
			}
			for range batch {
				add()
			}
			for e.waiting.len() > 0 { // admit everyone
				d, _ := e.BeginStep(now)
				now += d
				e.EndStep(now)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				d, _ := e.BeginStep(now)
				now += d
				for range e.EndStep(now).Finished {
					add()
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "steps/s")
		})
	}
}

// BenchmarkAdmitLongPrompt measures the life of a 12k-token request whose
// first 8k tokens are cached (hashing, lookup, allocation, caching, free),
// the per-request cost of a Mooncake-like replay.
func BenchmarkAdmitLongPrompt(b *testing.B) {
	p, _ := LookupPreset("llama-3.1-8b-h100")
	m, _ := p.Model()
	cfg, _ := p.EngineConfig()
	e, err := NewEngine(cfg, m)
	if err != nil {
		b.Fatal(err)
	}
	shared := seq(0, 8192)
	now := int64(0)
	run := func(id int64) {
		prompt := append(append(make([]uint32, 0, 12288), shared...), seq(1_000_000+int(id)*4096, 4096)...)
		if err := e.Add(&Request{ID: id, Prompt: prompt, OutputLen: 1}, now); err != nil {
			b.Fatal(err)
		}
		for e.Busy() {
			d, _ := e.BeginStep(now)
			now += d
			e.EndStep(now)
		}
	}
	run(0)
	b.ReportAllocs()
	b.SetBytes(12288 * 4)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		run(int64(i + 1))
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "requests/s")
}

// BenchmarkFleetChurn measures the block bookkeeping of a Mooncake-like
// replay on a fleet whose KV caches together exceed the CPU cache: 12 engines
// of the 8B/H100 preset take 12k-token requests in turn (hash chains given,
// a quarter of them extending one of 64 shared 4k-token prefixes), so every
// allocation evicts and every block is cached and freed. It reports the
// cost per prompt block.
func BenchmarkFleetChurn(b *testing.B) {
	p, _ := LookupPreset("llama-3.1-8b-h100")
	m, _ := p.Model()
	cfg, _ := p.EngineConfig()
	const engines, promptBlocks, sharedBlocks = 12, 750, 256
	bs := cfg.BlockSize
	fleet := make([]*Engine, engines)
	for i := range fleet {
		e, err := NewEngine(cfg, m)
		if err != nil {
			b.Fatal(err)
		}
		fleet[i] = e
	}
	prompt := make([]uint32, promptBlocks*bs)
	x := uint64(1)
	next := func() uint64 { x = mix64(x + 0x9e3779b97f4a7c15); return x }
	prefixes := make([][]uint64, 64)
	for i := range prefixes {
		prefixes[i] = make([]uint64, sharedBlocks)
		for j := range prefixes[i] {
			prefixes[i][j] = next()
		}
	}
	now := int64(0)
	run := func(id int64) {
		hashes := make([]uint64, 0, promptBlocks)
		if id%4 == 0 {
			hashes = append(hashes, prefixes[next()%64]...)
		}
		for len(hashes) < promptBlocks {
			hashes = append(hashes, next())
		}
		e := fleet[(id%engines+engines)%engines]
		if err := e.Add(&Request{ID: id, Prompt: prompt, PromptHashes: hashes, OutputLen: 1}, now); err != nil {
			b.Fatal(err)
		}
		for e.Busy() {
			d, _ := e.BeginStep(now)
			now += d
			e.EndStep(now)
		}
	}
	// Fill every cache first.
	for i := range int64(engines * 60) {
		run(-i - 1)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		run(int64(i + 1))
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*promptBlocks), "ns/block")
}
