package scorer

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/eppsim/eppsim/epp"
)

// LatencyParams are latency-scorer's parameters (spec §4.4).
type LatencyParams struct {
	TTFTWeight                float64 `json:"ttftWeight"`
	TPOTWeight                float64 `json:"tpotWeight"`
	HeadroomSelectionStrategy string  `json:"headroomSelectionStrategy"`
	CompositeKVWeight         float64 `json:"compositeKVWeight"`
	CompositeQueueWeight      float64 `json:"compositeQueueWeight"`
	CompositePrefixWeight     float64 `json:"compositePrefixWeight"`
	// Producer-name parameters select the data keys, as for the other
	// consumers; empty means the default producer.
	LatencyPredictionInfoProducerName string `json:"latencyPredictionInfoProducerName"`
	PrefixMatchInfoProducerName       string `json:"prefixMatchInfoProducerName"`
}

// DefaultLatencyParams returns latency-scorer's defaults (spec §4 table).
func DefaultLatencyParams() LatencyParams {
	return LatencyParams{
		TTFTWeight:                0.8,
		TPOTWeight:                0.2,
		HeadroomSelectionStrategy: "least",
		CompositeKVWeight:         1,
		CompositeQueueWeight:      1,
		CompositePrefixWeight:     1,
	}
}

// Latency is latency-scorer (spec §4.4, scorer/latency/plugin.go) in its
// composite-fallback mode only.
//
// Upstream scores SLO headroom from the predicted-latency-producer's
// predictions, falling back to a composite when no endpoint has a prediction
// (sidecar down or timed out). The predictor is an outside service that
// eppsim does not simulate, so no endpoint ever has a prediction and the
// scorer always runs the fallback: with normalised weights (kv, queue,
// prefix; default 1/3 each; all ≤ 0 → kv only)
//
//	round(100·(wkv·(1−kv) + wq·rel(q) + wp·match/total)) / 100
//
// where rel(q) = (maxQ−q)/maxQ over the candidates (1 when maxQ = 0) and the
// prefix term is 0 when match info is missing or totalBlocks is 0.
type Latency struct {
	epp.TypedName
	wkv, wq, wp float64
	predKey     epp.DataKey
	prefixKey   epp.DataKey
}

func latencyFactory(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
	p := DefaultLatencyParams()
	if err := epp.DecodeParams(LatencyType, name, params, &p); err != nil {
		return nil, err
	}
	return NewLatency(name, p)
}

// NewLatency returns a latency-scorer.
func NewLatency(name string, p LatencyParams) (*Latency, error) {
	switch p.HeadroomSelectionStrategy {
	case "least", "most":
	default:
		return nil, fmt.Errorf("plugin %q (type %s): headroomSelectionStrategy must be \"least\" or \"most\", got %q", name, LatencyType, p.HeadroomSelectionStrategy)
	}
	wkv, wq, wp := p.CompositeKVWeight, p.CompositeQueueWeight, p.CompositePrefixWeight
	sum := wkv + wq + wp
	if sum <= 0 {
		wkv, wq, wp, sum = 1, 0, 0, 1
	}
	return &Latency{
		TypedName: epp.TypedName{PluginType: LatencyType, PluginName: name},
		wkv:       wkv / sum,
		wq:        wq / sum,
		wp:        wp / sum,
		predKey:   epp.KeyOf(epp.LatencyPredictionType, p.LatencyPredictionInfoProducerName, epp.LatencyProducer),
		prefixKey: epp.KeyOf(epp.PrefixCacheMatchInfoType, p.PrefixMatchInfoProducerName, epp.ApproxPrefixProducer),
	}, nil
}

// Consumes implements epp.DataConsumer: latency predictions and prefix match
// info, both required as upstream. The predictor producer cannot be
// simulated; the config layer reports it as such.
func (s *Latency) Consumes() []epp.Dependency {
	return []epp.Dependency{{Key: s.predKey, Required: true}, {Key: s.prefixKey, Required: true}}
}

// Score implements epp.Scorer.
func (s *Latency) Score(_ *epp.Cycle, _ *epp.Request, eps []*epp.Endpoint, scores []float64) {
	maxQ := 0
	for _, e := range eps {
		maxQ = max(maxQ, e.Metrics.WaitingQueueSize)
	}
	for i, e := range eps {
		rel := 1.0
		if maxQ > 0 {
			rel = float64(maxQ-e.Metrics.WaitingQueueSize) / float64(maxQ)
		}
		kvFree := 1.0 - e.Metrics.KVCacheUsagePercent
		prefix := 0.0
		if info, ok := prefixInfo(e, s.prefixKey); ok && info.TotalBlocks > 0 {
			prefix = float64(info.MatchBlocks) / float64(info.TotalBlocks)
		}
		composite := s.wkv*kvFree + s.wq*rel + s.wp*prefix
		w := int(math.Round(100 * composite))
		scores[i] = float64(w) / 100
	}
}

// MMEmbeddingsCacheParams are mm-embeddings-cache-scorer's parameters.
type MMEmbeddingsCacheParams struct {
	ProducerName string `json:"producerName"`
}

// MMEmbeddingsCache is mm-embeddings-cache-scorer (flow-control.md §14.3,
// scorer/mmcacheaffinity): |matched| ÷ |items| of the producer's match
// info, 0 without it.
type MMEmbeddingsCache struct {
	epp.TypedName
	key epp.DataKey
}

func mmEmbeddingsCacheFactory(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
	var p MMEmbeddingsCacheParams
	if err := epp.DecodeParams(MMEmbeddingsCacheType, name, params, &p); err != nil {
		return nil, err
	}
	s := NewMMEmbeddingsCache(name)
	s.key = epp.KeyOf(epp.EncoderCacheMatchInfoType, p.ProducerName, epp.MMEmbeddingsProducer)
	return s, nil
}

// NewMMEmbeddingsCache returns an mm-embeddings-cache-scorer reading the
// default producer.
func NewMMEmbeddingsCache(name string) *MMEmbeddingsCache {
	return &MMEmbeddingsCache{
		TypedName: epp.TypedName{PluginType: MMEmbeddingsCacheType, PluginName: name},
		key:       epp.DataKey{Type: epp.EncoderCacheMatchInfoType, Producer: epp.MMEmbeddingsProducer},
	}
}

// Consumes implements epp.DataConsumer: EncoderCacheMatchInfo, required.
func (s *MMEmbeddingsCache) Consumes() []epp.Dependency {
	return []epp.Dependency{{Key: s.key, Required: true}}
}

// Score implements epp.Scorer.
func (s *MMEmbeddingsCache) Score(_ *epp.Cycle, _ *epp.Request, eps []*epp.Endpoint, scores []float64) {
	for i, e := range eps {
		info, ok := epp.Attr[epp.EncoderCacheMatchInfo](e, s.key)
		if !ok || info.Total <= 0 {
			scores[i] = 0
			continue
		}
		scores[i] = float64(info.Matched) / float64(info.Total)
	}
}
