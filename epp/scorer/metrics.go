package scorer

import (
	"encoding/json"

	"github.com/eppsim/eppsim/epp"
)

// Queue is queue-scorer (spec §4, scorer/queuedepth/queue.go): min-max
// inverted waiting-queue size over the candidates, (max−q)/(max−min); 1.0 for
// all when max == min.
type Queue struct{ epp.TypedName }

// NewQueue returns a queue-scorer.
func NewQueue(name string) *Queue {
	return &Queue{epp.TypedName{PluginType: QueueType, PluginName: name}}
}

// Score implements epp.Scorer.
func (s *Queue) Score(_ *epp.Cycle, _ *epp.Request, eps []*epp.Endpoint, scores []float64) {
	minMaxInverted(eps, scores, func(e *epp.Endpoint) int { return e.Metrics.WaitingQueueSize })
}

// RunningRequests is running-requests-size-scorer (spec §4,
// scorer/runningrequests/runningrequest.go): the queue-scorer formula on the
// running-request count.
type RunningRequests struct{ epp.TypedName }

// NewRunningRequests returns a running-requests-size-scorer.
func NewRunningRequests(name string) *RunningRequests {
	return &RunningRequests{epp.TypedName{PluginType: RunningRequestsType, PluginName: name}}
}

// Score implements epp.Scorer.
func (s *RunningRequests) Score(_ *epp.Cycle, _ *epp.Request, eps []*epp.Endpoint, scores []float64) {
	minMaxInverted(eps, scores, func(e *epp.Endpoint) int { return e.Metrics.RunningRequestsSize })
}

func minMaxInverted(eps []*epp.Endpoint, scores []float64, value func(*epp.Endpoint) int) {
	if len(eps) == 0 {
		return
	}
	lo, hi := value(eps[0]), value(eps[0])
	for _, e := range eps[1:] {
		v := value(e)
		lo, hi = min(lo, v), max(hi, v)
	}
	for i, e := range eps {
		if hi == lo {
			scores[i] = 1
			continue
		}
		scores[i] = float64(hi-value(e)) / float64(hi-lo)
	}
}

// KVCacheUtilization is kv-cache-utilization-scorer (spec §4,
// scorer/kvcacheutilization): 1 − KVCacheUsagePercent, not normalised;
// out-of-range usage gives values the profile clamps.
type KVCacheUtilization struct{ epp.TypedName }

// NewKVCacheUtilization returns a kv-cache-utilization-scorer.
func NewKVCacheUtilization(name string) *KVCacheUtilization {
	return &KVCacheUtilization{epp.TypedName{PluginType: KVCacheUtilizationType, PluginName: name}}
}

// Score implements epp.Scorer.
func (s *KVCacheUtilization) Score(_ *epp.Cycle, _ *epp.Request, eps []*epp.Endpoint, scores []float64) {
	for i, e := range eps {
		scores[i] = 1 - e.Metrics.KVCacheUsagePercent
	}
}

// DefaultLoadAwareThreshold is load-aware-scorer's default queue threshold.
const DefaultLoadAwareThreshold = 128

// LoadAware is load-aware-scorer (spec §4, scorer/loadaware/load_aware.go):
// an empty queue scores 0.5, otherwise 0.5·(1 − min(q,T)/T).
type LoadAware struct {
	epp.TypedName
	threshold float64
}

// LoadAwareParams are load-aware-scorer's parameters.
type LoadAwareParams struct {
	Threshold int `json:"threshold"`
}

func loadAwareFactory(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
	p := LoadAwareParams{Threshold: DefaultLoadAwareThreshold}
	if err := epp.DecodeParams(LoadAwareType, name, params, &p); err != nil {
		return nil, err
	}
	return NewLoadAware(name, p.Threshold), nil
}

// NewLoadAware returns a load-aware-scorer; a threshold ≤ 0 means 128.
func NewLoadAware(name string, threshold int) *LoadAware {
	if threshold <= 0 {
		threshold = DefaultLoadAwareThreshold
	}
	return &LoadAware{TypedName: epp.TypedName{PluginType: LoadAwareType, PluginName: name}, threshold: float64(threshold)}
}

// Score implements epp.Scorer.
func (s *LoadAware) Score(_ *epp.Cycle, _ *epp.Request, eps []*epp.Endpoint, scores []float64) {
	for i, e := range eps {
		q := float64(e.Metrics.WaitingQueueSize)
		if q == 0 {
			scores[i] = 0.5
			continue
		}
		q = min(q, s.threshold)
		scores[i] = 0.5 * (1.0 - q/s.threshold)
	}
}

// LoraAffinity is lora-affinity-scorer (spec §4, scorer/loraaffinity): 1.0
// when the target model (adapter) is active on the endpoint; 0.8 when the
// endpoint can load one more adapter (active+waiting < max); 0.6 when the
// adapter is waiting to load; else 0.
type LoraAffinity struct{ epp.TypedName }

// NewLoraAffinity returns a lora-affinity-scorer.
func NewLoraAffinity(name string) *LoraAffinity {
	return &LoraAffinity{epp.TypedName{PluginType: LoraAffinityType, PluginName: name}}
}

// Score implements epp.Scorer.
func (s *LoraAffinity) Score(_ *epp.Cycle, req *epp.Request, eps []*epp.Endpoint, scores []float64) {
	model := ""
	if req != nil {
		model = req.TargetModel
	}
	for i, e := range eps {
		m := &e.Metrics
		_, active := m.ActiveModels[model]
		_, waiting := m.WaitingModels[model]
		switch {
		case active:
			scores[i] = 1.0
		case len(m.ActiveModels)+len(m.WaitingModels) < m.MaxActiveModels:
			scores[i] = 0.8
		case waiting:
			scores[i] = 0.6
		default:
			scores[i] = 0
		}
	}
}
