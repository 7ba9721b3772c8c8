package scorer

import (
	"encoding/json"

	"github.com/eppsim/eppsim/epp"
)

// ActiveRequestParams are active-request-scorer's parameters (spec §4).
type ActiveRequestParams struct {
	// IdleThreshold: endpoints with at most this many in-flight requests
	// score 1.0. Default 0; negative values fall back to 0.
	IdleThreshold int `json:"idleThreshold"`
	// MaxBusyScore caps the score of busy endpoints. Default 1.0; values
	// outside [0,1] are ignored (1.0).
	MaxBusyScore *float64 `json:"maxBusyScore"`
	// InFlightLoadProducerName names the inflight-load producer to read;
	// empty means inflight-load-producer.
	InFlightLoadProducerName string `json:"inFlightLoadProducerName"`
	// RequestTimeout is deprecated and ignored upstream (in-flight tracking
	// moved to inflight-load-producer); accepted so old configs load.
	RequestTimeout string `json:"requestTimeout"`
}

// ActiveRequest is active-request-scorer (spec §4,
// scorer/activerequest/active_request.go), reading InFlightLoad.Requests
// (spec §8): c ≤ idleThreshold → 1.0, else (maxC − c)/maxC · maxBusyScore
// with maxC the largest count over the candidates. A missing attribute counts
// as 0 requests.
type ActiveRequest struct {
	epp.TypedName
	idle    int
	maxBusy float64
	key     epp.DataKey
}

func activeRequestFactory(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
	var p ActiveRequestParams
	if err := epp.DecodeParams(ActiveRequestType, name, params, &p); err != nil {
		return nil, err
	}
	return NewActiveRequest(name, p), nil
}

// NewActiveRequest returns an active-request-scorer.
func NewActiveRequest(name string, p ActiveRequestParams) *ActiveRequest {
	s := &ActiveRequest{
		TypedName: epp.TypedName{PluginType: ActiveRequestType, PluginName: name},
		idle:      max(p.IdleThreshold, 0),
		maxBusy:   1.0,
		key:       epp.KeyOf(epp.InFlightLoadType, p.InFlightLoadProducerName, epp.InFlightLoadProducer),
	}
	if p.MaxBusyScore != nil && *p.MaxBusyScore >= 0 && *p.MaxBusyScore <= 1 {
		s.maxBusy = *p.MaxBusyScore
	}
	return s
}

// Consumes implements epp.DataConsumer: InFlightLoad, required.
func (s *ActiveRequest) Consumes() []epp.Dependency {
	return []epp.Dependency{{Key: s.key, Required: true}}
}

// Score implements epp.Scorer.
func (s *ActiveRequest) Score(_ *epp.Cycle, _ *epp.Request, eps []*epp.Endpoint, scores []float64) {
	maxC := 0
	for _, e := range eps {
		maxC = max(maxC, inFlight(e, s.key).Requests)
	}
	for i, e := range eps {
		c := inFlight(e, s.key).Requests
		if c <= s.idle {
			scores[i] = 1.0
			continue
		}
		scores[i] = float64(maxC-c) / float64(maxC) * s.maxBusy
	}
}

// DefaultQueueThresholdTokens is token-load-scorer's default threshold
// (128 requests of 32K tokens).
const DefaultQueueThresholdTokens = 4194304

// TokenLoadParams are token-load-scorer's parameters (spec §4).
type TokenLoadParams struct {
	// QueueThresholdTokens T; ≤ 0 means the default 4194304.
	QueueThresholdTokens int64 `json:"queueThresholdTokens"`
	// InFlightLoadProducerName names the inflight-load producer whose
	// InFlightLoad and UncachedRequestTokens are read.
	InFlightLoadProducerName string `json:"inFlightLoadProducerName"`
}

// TokenLoad is token-load-scorer (spec §4, scorer/tokenload/token_load.go):
// L = InFlightLoad.Tokens + this request's UncachedRequestTokens on the
// endpoint (spec §8); L ≤ 0 → 1.0, else 1 − min(L,T)/T. Missing attributes
// count as 0.
type TokenLoad struct {
	epp.TypedName
	threshold   float64
	loadKey     epp.DataKey
	uncachedKey epp.DataKey
}

func tokenLoadFactory(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
	p := TokenLoadParams{QueueThresholdTokens: DefaultQueueThresholdTokens}
	if err := epp.DecodeParams(TokenLoadType, name, params, &p); err != nil {
		return nil, err
	}
	return NewTokenLoad(name, p), nil
}

// NewTokenLoad returns a token-load-scorer.
func NewTokenLoad(name string, p TokenLoadParams) *TokenLoad {
	if p.QueueThresholdTokens <= 0 {
		p.QueueThresholdTokens = DefaultQueueThresholdTokens
	}
	return &TokenLoad{
		TypedName:   epp.TypedName{PluginType: TokenLoadType, PluginName: name},
		threshold:   float64(p.QueueThresholdTokens),
		loadKey:     epp.KeyOf(epp.InFlightLoadType, p.InFlightLoadProducerName, epp.InFlightLoadProducer),
		uncachedKey: epp.KeyOf(epp.UncachedRequestTokensType, p.InFlightLoadProducerName, epp.InFlightLoadProducer),
	}
}

// Consumes implements epp.DataConsumer: InFlightLoad and
// UncachedRequestTokens of the same producer, both required.
func (s *TokenLoad) Consumes() []epp.Dependency {
	return []epp.Dependency{{Key: s.loadKey, Required: true}, {Key: s.uncachedKey, Required: true}}
}

// Score implements epp.Scorer.
func (s *TokenLoad) Score(_ *epp.Cycle, _ *epp.Request, eps []*epp.Endpoint, scores []float64) {
	for i, e := range eps {
		load := float64(inFlight(e, s.loadKey).Tokens)
		if u, ok := epp.Attr[epp.UncachedRequestTokens](e, s.uncachedKey); ok {
			load += float64(u.Tokens)
		}
		if load <= 0 {
			scores[i] = 1.0
			continue
		}
		load = min(load, s.threshold)
		scores[i] = 1.0 - load/s.threshold
	}
}
