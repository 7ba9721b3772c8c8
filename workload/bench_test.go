package workload

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"testing"
)

// mooncakeGen produces a Mooncake-format trace on the fly: 512 interleaved
// sessions whose block lists grow by one or two blocks per turn (a quarter
// of turns start a new session), arrivals 86.4 ms apart (1M requests span
// a day), so the whole trace never exists in memory.
type mooncakeGen struct {
	n, i     int
	bs       int
	buf      []byte
	sessions [][]int64
	nextID   int64
	state    uint64
}

func newMooncakeGen(n, bs int) *mooncakeGen {
	return &mooncakeGen{n: n, bs: bs, sessions: make([][]int64, 512), nextID: 1}
}

func (g *mooncakeGen) rand() uint64 {
	g.state += 0x9e3779b97f4a7c15
	return splitmix64(g.state)
}

func (g *mooncakeGen) Read(p []byte) (int, error) {
	for len(g.buf) == 0 {
		if g.i == g.n {
			return 0, io.EOF
		}
		g.line()
	}
	n := copy(p, g.buf)
	g.buf = g.buf[n:]
	return n, nil
}

func (g *mooncakeGen) line() {
	s := g.rand() % uint64(len(g.sessions))
	ids := g.sessions[s]
	if len(ids) == 0 || len(ids) > 12 || g.rand()%4 == 0 {
		ids = append(ids[:0], 0)
	}
	for range 1 + g.rand()%2 {
		ids = append(ids, g.nextID)
		g.nextID++
	}
	g.sessions[s] = ids
	in := (len(ids)-1)*g.bs + 1 + int(g.rand()%uint64(g.bs))
	b := g.buf[:0]
	b = append(b, `{"timestamp": `...)
	b = strconv.AppendInt(b, int64(g.i)*864/10, 10)
	b = append(b, `, "input_length": `...)
	b = strconv.AppendInt(b, int64(in), 10)
	b = append(b, `, "output_length": `...)
	b = strconv.AppendInt(b, int64(1+g.rand()%500), 10)
	b = append(b, `, "hash_ids": [`...)
	for j, id := range ids {
		if j > 0 {
			b = append(b, ", "...)
		}
		b = strconv.AppendInt(b, id, 10)
	}
	b = append(b, "]}\n"...)
	g.buf = b
	g.i++
}

// BenchmarkStream streams synthesized Mooncake traces of 100k and 1M
// requests (64-token hash blocks, ~400 prompt tokens, bodies and tokens
// materialized) and reports the peak live heap: it must not grow with the
// trace length (it is bounded by the session-inference window: 1 h of trace
// time, ~42k requests here).
func BenchmarkStream(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("requests=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			var peak uint64
			var tokens int64
			for range b.N {
				s, err := NewSource(newMooncakeGen(n, 64), "gen", opts(Options{Format: FormatMooncake, BlockSize: 64}))
				if err != nil {
					b.Fatal(err)
				}
				var ms runtime.MemStats
				for i := 0; ; i++ {
					r, err := s.Next()
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					tokens += int64(len(r.PromptTokens))
					if i%100_000 == 50_000 {
						runtime.GC() // live heap only
						runtime.ReadMemStats(&ms)
						peak = max(peak, ms.HeapAlloc)
					}
				}
				if s.Emitted() != int64(n) {
					b.Fatalf("%d requests, want %d", s.Emitted(), n)
				}
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-live-heap-MB")
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "req/s")
			b.ReportMetric(float64(tokens)/float64(n*b.N), "tokens/req")
		})
	}
}

// BenchmarkMooncakeTrace materializes the shared Mooncake conversation trace
// (12,031 requests, 145M prompt tokens, 580 MB of bodies).
func BenchmarkMooncakeTrace(b *testing.B) {
	const path = "../../shared/traces/mooncake_conversation_trace.jsonl"
	if _, err := os.Stat(path); err != nil {
		b.Skip("shared Mooncake trace not present")
	}
	b.ReportAllocs()
	for range b.N {
		s, err := Open(path, opts(Options{}))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := drainCount(s); err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
}

// BenchmarkHashPrompt synthesizes the tokens and completions body of one
// 24-block Mooncake prompt (12,076 tokens, about the shared trace's mean).
func BenchmarkHashPrompt(b *testing.B) {
	lx, err := testTokenizer().Lexicon(0)
	if err != nil {
		b.Fatal(err)
	}
	s := &blockSynth{seed: 1, lex: lx}
	ids := make([]int64, 24)
	for i := range ids {
		ids[i] = int64(i * 1000)
	}
	const in = 23*512 + 300
	model := jsonString(DefaultModel)
	b.ReportAllocs()
	for range b.N {
		s.hashPrompt(ids, 512, in, model, 100)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*in), "ns/token")
}

func drainCount(s Source) (int, error) {
	n := 0
	for {
		_, err := s.Next()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n++
	}
}

// BenchmarkBuiltinChat generates the default workload.
func BenchmarkBuiltinChat(b *testing.B) {
	b.ReportAllocs()
	for range b.N {
		s, err := Open(DefaultWorkload, opts(Options{Seed: 1}))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := drainCount(s); err != nil {
			b.Fatal(err)
		}
	}
}
