package producer

import (
	"encoding/json"
	"fmt"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/eppsim/eppsim/epp"
)

// MMEmbeddingsType is the multimodal encoder-cache producer's type.
const MMEmbeddingsType = epp.MMEmbeddingsProducer

// MMEmbeddingsParams are mm-embeddings-cache-producer's parameters
// (flow-control.md §14.3). Decoding is strict: the shipped
// epp-mm-embeddings-cache-config.yaml sets cacheSizeInMB, which upstream's
// parameters do not know, so it fails to load there and here.
type MMEmbeddingsParams struct {
	CacheSizeInMBPerServer int `json:"cacheSizeInMBPerServer"`
}

// DefaultMMCacheSizeMB is the per-server size when cacheSizeInMBPerServer
// is ≤ 0: 4096 MB, 2048 entries.
const DefaultMMCacheSizeMB = 4096

// MMEmbeddings is mm-embeddings-cache-producer (β, flow-control.md §14.3):
// one LRU of multimodal content hashes per endpoint ID, ⌊MB/2⌋ entries (at
// least 1). Produce: the request's items are the distinct
// MultiModal[].Hash of a tokenized prompt that a real-token token-producer
// (the vLLM render backend) supplied; per candidate, matched = the items
// its LRU contains (Contains does not refresh recency); no items, nothing
// written. PreRequest: every target of the primary profile adds each item
// (insert or refresh), applied at once (upstream: asynchronously, §16.5).
//
// In eppsim the model servers' tokens come from the workload and carry no
// multimodal features, and the estimate backend's placeholders are not
// the server's (upstream's producer ignores them too), so requests have no
// items: nothing is written and mm-embeddings-cache-scorer scores 0, as
// upstream does for text-only traffic. The fleet is static, so the
// endpoint-delete and 2-minute pod-list sweeps never drop an LRU.
type MMEmbeddings struct {
	epp.TypedName
	key      epp.DataKey
	capacity int
	lrus     map[string]*simplelru.LRU[string, struct{}]
	stateKey epp.DataKey
}

func mmEmbeddingsFactory(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
	var p MMEmbeddingsParams
	if err := epp.DecodeParams(MMEmbeddingsType, name, params, &p); err != nil {
		return nil, err
	}
	return NewMMEmbeddings(name, p), nil
}

// NewMMEmbeddings returns the producer with empty caches.
func NewMMEmbeddings(name string, p MMEmbeddingsParams) *MMEmbeddings {
	mb := p.CacheSizeInMBPerServer
	if mb <= 0 {
		mb = DefaultMMCacheSizeMB
	}
	return &MMEmbeddings{TypedName: epp.TypedName{PluginType: MMEmbeddingsType, PluginName: name},
		key: epp.DataKey{Type: epp.EncoderCacheMatchInfoType, Producer: name}, capacity: max(1, mb/2),
		lrus: map[string]*simplelru.LRU[string, struct{}]{}, stateKey: epp.DataKey{Type: "MMEmbeddingsItems", Producer: name}}
}

// Capacity is the entries of each endpoint's LRU.
func (m *MMEmbeddings) Capacity() int { return m.capacity }

// Produces is EncoderCacheMatchInfo/<name>.
func (m *MMEmbeddings) Produces() []epp.DataKey { return []epp.DataKey{m.key} }

// Consumes is TokenizedPrompt/token-producer, required.
func (m *MMEmbeddings) Consumes() []epp.Dependency {
	return []epp.Dependency{{Key: TokenizedPromptKey, Required: true}}
}

// items returns the request's distinct multimodal hashes from the model
// server's tokenization (nil without any).
func items(req *epp.Request) []string {
	tr := req.Tokenized
	if tr == nil || !tr.FromServer {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for _, f := range tr.MultiModal {
		if f.Hash != "" && !seen[f.Hash] {
			seen[f.Hash] = true
			out = append(out, f.Hash)
		}
	}
	return out
}

// Produce implements epp.DataProducer.
func (m *MMEmbeddings) Produce(_ *epp.Cycle, req *epp.Request, eps []*epp.Endpoint) error {
	its := items(req)
	if len(its) == 0 {
		return nil
	}
	req.Put(m.stateKey, its)
	for _, e := range eps {
		matched := 0
		if l := m.lrus[e.Name]; l != nil {
			for _, h := range its {
				if l.Contains(h) {
					matched++
				}
			}
		}
		e.Put(m.key, epp.EncoderCacheMatchInfo{Matched: matched, Total: len(its)})
	}
	return nil
}

// PreRequest implements epp.PreRequestHook.
func (m *MMEmbeddings) PreRequest(_ *epp.Cycle, req *epp.Request, res *epp.Result) {
	v, ok := req.Get(m.stateKey)
	if !ok || res == nil {
		return
	}
	its, _ := v.([]string)
	pr := res.Profiles[res.PrimaryProfile]
	if pr == nil {
		return
	}
	for _, t := range pr.Targets {
		if t == nil || t.EndpointInfo == nil {
			continue
		}
		l := m.lrus[t.Name]
		if l == nil {
			l, _ = simplelru.NewLRU[string, struct{}](m.capacity, nil) // capacity ≥ 1: cannot fail
			m.lrus[t.Name] = l
		}
		for _, h := range its {
			l.Add(h, struct{}{})
		}
	}
}

var (
	_ epp.DataProducer   = (*MMEmbeddings)(nil)
	_ epp.DataConsumer   = (*MMEmbeddings)(nil)
	_ epp.PreRequestHook = (*MMEmbeddings)(nil)
)

// String describes the producer (for tests and explanations).
func (m *MMEmbeddings) String() string {
	return fmt.Sprintf("%s: %d entries per endpoint, %d endpoints cached", m.Name(), m.capacity, len(m.lrus))
}
