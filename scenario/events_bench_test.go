package scenario

import (
	"context"
	"testing"

	"github.com/eppsim/eppsim/epp"
	"github.com/eppsim/eppsim/sim"
	"github.com/eppsim/eppsim/workload"
)

// kvRecorder records the KV event batches a router receives.
type kvRecorder struct {
	batches []recordedBatch
}

type recordedBatch struct {
	now     int64
	address string
	batch   []epp.KVEvent
}

func (k *kvRecorder) HandleKVEvents(c *epp.Cycle, address string, batch []epp.KVEvent) {
	k.batches = append(k.batches, recordedBatch{c.Now, address, append([]epp.KVEvent(nil), batch...)})
}

// BenchmarkMooncakePreciseEvents replays, into a fresh precise producer per
// iteration, the KV events that the fleet sends the oracle baseline (zero
// lag) over the first 3,000 requests of the shared Mooncake trace on 16
// replicas: the precise index's event path alone (hashing the stored
// blocks, the index and store-count updates), without the simulation.
func BenchmarkMooncakePreciseEvents(b *testing.B) {
	for _, src := range []string{"oracle", "../testdata/shared/epp-configs/epp-precise-prefix-cache-config.yaml"} {
		e := ForSource(src)
		b.Run(e.Name, func(b *testing.B) {
			spec := mooncakeSpec(b, 16)
			l, err := e.Load(1)
			if err != nil {
				b.Fatal(err)
			}
			router, err := l.router()
			if err != nil {
				b.Fatal(err)
			}
			if len(router.KVConsumers) != 1 {
				b.Fatalf("%d KV consumers", len(router.KVConsumers))
			}
			rec := &kvRecorder{}
			inner := router.KVConsumers[0]
			router.KVConsumers[0] = epp.KVEventConsumer(multiKV{inner, rec})
			src, err := workload.Open(spec.Trace, spec.Workload)
			if err != nil {
				b.Fatal(err)
			}
			opts := spec.Env
			if e.Name == "oracle" {
				opts.KVEventLag = 0
			}
			opts.MaxRequests = 3000
			if _, err := sim.RunContext(context.Background(), src, router, spec.Fleet, opts); err != nil {
				b.Fatal(err)
			}
			events := 0
			for _, r := range rec.batches {
				events += len(r.batch)
			}
			b.ResetTimer()
			for b.Loop() {
				b.StopTimer()
				l, _ := e.Load(1)
				r, _ := l.router()
				c := r.KVConsumers[0]
				b.StartTimer()
				for _, r := range rec.batches {
					c.HandleKVEvents(&epp.Cycle{Now: r.now}, r.address, r.batch)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*events), "ns/event")
		})
	}
}

type multiKV []epp.KVEventConsumer

func (m multiKV) HandleKVEvents(c *epp.Cycle, address string, batch []epp.KVEvent) {
	for _, k := range m {
		k.HandleKVEvents(c, address, batch)
	}
}
