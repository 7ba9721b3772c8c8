package config_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/epp"
	"github.com/eppsim/eppsim/epp/config"
	"github.com/eppsim/eppsim/epp/plugins"
)

// BenchmarkSchedulingCycle runs the full scheduling cycle of the built-in
// default config (token-producer estimate + approx producer, queue 2 /
// kv 2 / prefix 3, max-score picker, PreRequest index update) for a chat
// request of about 12k pseudo-tokens (48 KB of text) whose first half every
// endpoint has already indexed.
func BenchmarkSchedulingCycle(b *testing.B) {
	for _, n := range []int{16, 64} {
		b.Run(fmt.Sprintf("endpoints=%d", n), func(b *testing.B) {
			l, err := config.Default(config.Options{Registry: plugins.Builtin(), Seed: 1})
			if err != nil {
				b.Fatal(err)
			}
			r := l.Router()
			for i := range n {
				name := fmt.Sprintf("default/p%d", i)
				r.AddEndpoint(epp.EndpointInfo{Name: name, Address: fmt.Sprintf("10.0.0.%d:8000", i+1)})
				if err := r.UpdateMetrics(name, epp.Metrics{WaitingQueueSize: i % 5, KVCacheUsagePercent: float64(i%10) / 10, CacheBlockSize: 16, CacheNumBlocks: 26000, UpdateTime: 1}); err != nil {
					b.Fatal(err)
				}
			}
			shared := strings.Repeat("the quick brown fox jumps over a lazy dog. ", 560)
			body := func(i int) []byte {
				return []byte(fmt.Sprintf(`{"model":"m","messages":[{"role":"system","content":%q},{"role":"user","content":"question %d %s"}]}`,
					shared, i, strings.Repeat("x", 24000)))
			}
			// Warm every endpoint's index with the shared prefix.
			for i := range n {
				if _, err := r.Schedule(&epp.Cycle{Now: int64(i)}, &epp.Request{ID: fmt.Sprint(i), TargetModel: "m", Path: "/v1/chat/completions", Body: body(-i - 1)}); err != nil {
					b.Fatal(err)
				}
			}
			bodies := make([][]byte, 64)
			for i := range bodies {
				bodies[i] = body(i)
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(bodies[0])))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				req := &epp.Request{ID: fmt.Sprint(i), TargetModel: "m", Path: "/v1/chat/completions", Body: bodies[i%len(bodies)]}
				if _, err := r.Schedule(&epp.Cycle{Now: int64(1000 + i)}, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
