package sim

import (
	"fmt"
	"testing"

	"github.com/eppsim/eppsim/epp/config"
	"github.com/eppsim/eppsim/epp/plugins"
	"github.com/eppsim/eppsim/workload"
)

// preciseConfig is a precise (KV-event) producer at blockSize-token
// blocks over the engine's 16-token blocks, with the server's own tokens
// and the default tier weights (gpu 1.0, cpu 0.8), scored alone.
func preciseConfig(blockSize int) []byte {
	return []byte(fmt.Sprintf(`apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: token-producer
  parameters: {modelName: m}
- type: precise-prefix-cache-producer
  parameters: {tokenProcessorConfig: {blockSize: %d}}
- type: prefix-cache-scorer
  parameters: {prefixMatchInfoProducerName: precise-prefix-cache-producer}
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: prefix-cache-scorer
`, blockSize))
}

func TestRunPreciseProducerHonoursCacheSalt(t *testing.T) {
	loaded, err := config.Load(preciseConfig(64), config.Options{Registry: plugins.Builtin(), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	prompt := tokens(0, 1024)
	salted := func(id int64, at int64, salt string) *workload.Request {
		r := req(id, at, prompt, 4)
		r.CacheSalt = salt
		r.Endpoint = workload.EndpointCompletions
		r.Body = []byte(fmt.Sprintf(`{"model":"m","prompt":"p","cache_salt":%q}`, salt))
		if salt == "" {
			r.Body = []byte(`{"model":"m","prompt":"p"}`)
		}
		return r
	}
	var recs []Record
	_, err = Run(&sliceSource{reqs: []*workload.Request{
		salted(0, 0, "s1"), salted(1, 10*second, "s1"), salted(2, 20*second, "s2"), salted(3, 30*second, ""),
	}}, loaded.Router(), testFleet(t, 1, 2000), Options{KVEventLag: 5_000_000, OnRecord: func(r *Record) { recs = append(recs, *r) }})
	if err != nil {
		t.Fatal(err)
	}
	// Request 1 repeats request 0 with the same salt: the replica stored all
	// 64 engine blocks, i.e. all 16 of the producer's 64-token keys. Other
	// salts (or none) share nothing, in the engine and in the index alike.
	want := []struct {
		precise float64
		cached  int
	}{{0, 0}, {1, 1008}, {0, 0}, {0, 0}}
	for i, w := range want {
		r := recs[i]
		if !r.HasPrecise || r.PredictedPrecise != w.precise || r.CachedTokens != w.cached {
			t.Errorf("request %d: precise %v (has %v), cached %d; want %v, %d", i, r.PredictedPrecise, r.HasPrecise, r.CachedTokens, w.precise, w.cached)
		}
	}
}
