// Package admitter implements the EPP's Admit plugins
// (../shared/spec/flow-control.md §13): probabilistic-admitter and
// latency-slo-admitter. The director runs every Admitter at step 9, after
// flow control and the data producers, in configuration order; the first
// denial answers the request with HTTP 500 (§7). Both act only on
// sheddable requests (priority < 0).
package admitter

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/eppsim/eppsim/epp"
)

// Registered types.
const (
	ProbabilisticType = "probabilistic-admitter"
	LatencySLOType    = "latency-slo-admitter"
)

// Register adds the admitter types to r.
func Register(r *epp.Registry) {
	r.Register(ProbabilisticType, probabilisticFactory)
	r.Register(LatencySLOType, latencySLOFactory)
}

// ProbabilisticParams are probabilistic-admitter's parameters (§13), all
// > 0.
type ProbabilisticParams struct {
	QueueDepthThreshold  *float64 `json:"queueDepthThreshold"`
	KVCacheUtilThreshold *float64 `json:"kvCacheUtilThreshold"`
	Power                *float64 `json:"power"`
	K                    *float64 `json:"k"`
}

// Probabilistic is probabilistic-admitter (β): a sheddable request is
// denied with probability p = min(s^power·k, 1), s being the mean over the
// candidates of max(waiting/queueDepthThreshold, kv/kvCacheUtilThreshold)
// from their last scrape (no staleness check). One draw per evaluated
// request, even when p = 0, from the plugin's seeded stream (upstream: a
// process-global, randomly seeded generator; §16.5).
type Probabilistic struct {
	epp.TypedName
	qd, kv, power, k float64
	rng              *rand.Rand
}

func probabilisticFactory(name string, params json.RawMessage, h *epp.Handle) (epp.Plugin, error) {
	var p ProbabilisticParams
	if err := epp.DecodeParams(ProbabilisticType, name, params, &p); err != nil {
		return nil, err
	}
	a := &Probabilistic{TypedName: epp.TypedName{PluginType: ProbabilisticType, PluginName: name},
		qd: 5, kv: 0.8, power: 5, k: 300, rng: h.Rand(name)}
	var errs []error
	for _, f := range []struct {
		name string
		v    *float64
		dst  *float64
	}{{"queueDepthThreshold", p.QueueDepthThreshold, &a.qd}, {"kvCacheUtilThreshold", p.KVCacheUtilThreshold, &a.kv},
		{"power", p.Power, &a.power}, {"k", p.K, &a.k}} {
		if f.v == nil {
			continue
		}
		if !(*f.v > 0) || math.IsInf(*f.v, 0) {
			errs = append(errs, fmt.Errorf("%s must be > 0, got %v", f.name, *f.v))
		}
		*f.dst = *f.v
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("plugin %q (type %s): %w", name, ProbabilisticType, err)
	}
	return a, nil
}

// Saturation is the admitter's own s over eps.
func (a *Probabilistic) Saturation(eps []*epp.Endpoint) float64 {
	if len(eps) == 0 {
		return 0
	}
	sum := 0.0
	for _, e := range eps {
		m := &e.Metrics
		sum += max(float64(m.WaitingQueueSize)/a.qd, m.KVCacheUsagePercent/a.kv)
	}
	return sum / float64(len(eps))
}

// Probability is p(s) = min(s^power·k, 1).
func (a *Probabilistic) Probability(s float64) float64 {
	return min(math.Pow(s, a.power)*a.k, 1)
}

// ErrDenied is an admitter's denial.
var ErrDenied = errors.New("denied")

// Admit implements epp.Admitter.
func (a *Probabilistic) Admit(_ *epp.Cycle, req *epp.Request, eps []*epp.Endpoint) error {
	if req == nil || req.Priority >= 0 || len(eps) == 0 {
		return nil
	}
	p := a.Probability(a.Saturation(eps))
	if a.rng.Float64() < p {
		return fmt.Errorf("sheddable request %w at pool saturation", ErrDenied)
	}
	return nil
}

// LatencySLOParams are latency-slo-admitter's parameters.
type LatencySLOParams struct {
	LatencyPredictionInfoProducerName string `json:"latencyPredictionInfoProducerName"`
}

// LatencyPrediction is what a latency-prediction producer attaches per
// endpoint (predicted-latency-producer, which eppsim does not simulate, so
// the attribute is absent and the admitter admits).
type LatencyPrediction struct {
	TTFTValid, TPOTValid bool
}

// LatencySLO is latency-slo-admitter (β, §13).
type LatencySLO struct {
	epp.TypedName
	key epp.DataKey
}

func latencySLOFactory(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
	var p LatencySLOParams
	if err := epp.DecodeParams(LatencySLOType, name, params, &p); err != nil {
		return nil, err
	}
	return &LatencySLO{TypedName: epp.TypedName{PluginType: LatencySLOType, PluginName: name},
		key: epp.KeyOf(epp.LatencyPredictionType, p.LatencyPredictionInfoProducerName, epp.LatencyProducer)}, nil
}

// Consumes implements epp.DataConsumer: the latency predictions, required.
func (a *LatencySLO) Consumes() []epp.Dependency {
	return []epp.Dependency{{Key: a.key, Required: true}}
}

// sloHeader parses a float SLO header (and its alias); an invalid value
// counts as 0.
func sloHeader(req *epp.Request, key, alias string) float64 {
	v, ok := req.Headers[key]
	if !ok {
		v, ok = req.Headers[alias]
	}
	if !ok {
		return 0
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || math.IsNaN(f) {
		return 0
	}
	return f
}

// Admit implements epp.Admitter: a sheddable request with a TTFT or TPOT
// SLO header > 0 is denied when some candidate has a prediction and no
// candidate is valid (both predictions valid), idle (no running request at
// the last scrape) or cold (KV usage < 0.02).
func (a *LatencySLO) Admit(_ *epp.Cycle, req *epp.Request, eps []*epp.Endpoint) error {
	if req.Priority >= 0 {
		return nil
	}
	if sloHeader(req, epp.SLOTTFTHeader, epp.SLOTTFTHeaderAlias) <= 0 && sloHeader(req, epp.SLOTPOTHeader, epp.SLOTPOTHeaderAlias) <= 0 {
		return nil
	}
	anyPrediction, ok := false, false
	for _, e := range eps {
		p, has := epp.Attr[LatencyPrediction](e, a.key)
		anyPrediction = anyPrediction || has
		if e.Metrics.KVCacheUsagePercent < 0.02 || e.Metrics.RunningRequestsSize == 0 || has && p.TTFTValid && p.TPOTValid {
			ok = true
		}
	}
	if !anyPrediction || ok {
		return nil
	}
	return fmt.Errorf("sheddable request %w: no endpoint can meet its latency SLO", ErrDenied)
}

var (
	_ epp.Admitter     = (*Probabilistic)(nil)
	_ epp.Admitter     = (*LatencySLO)(nil)
	_ epp.DataConsumer = (*LatencySLO)(nil)
)
