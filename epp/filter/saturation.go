package filter

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/eppsim/eppsim/epp"
)

// UtilizationDetectorParams are utilization-detector's parameters (spec
// §7.3). Absent fields take the defaults.
type UtilizationDetectorParams struct {
	QueueDepthThreshold       *int      `json:"queueDepthThreshold"`
	KVCacheUtilThreshold      *float64  `json:"kvCacheUtilThreshold"`
	MetricsStalenessThreshold *Duration `json:"metricsStalenessThreshold"`
	Headroom                  *float64  `json:"headroom"`
}

// Utilization-detector defaults (spec §7.3).
const (
	DefaultQueueDepthThreshold       = 5
	DefaultKVCacheUtilThreshold      = 0.8
	DefaultMetricsStalenessThreshold = 200 * time.Millisecond
)

// UtilizationDetector is utilization-detector (spec §7.3,
// saturationdetector/utilization): the default saturation detector, also
// usable as a filter when placed in a profile.
//
// An endpoint's metrics are stale when never scraped (UpdateTime 0) or older
// than metricsStalenessThreshold at the current simulated time.
type UtilizationDetector struct {
	epp.TypedName
	queue     int
	kv        float64
	staleness int64 // ns
	headroom  float64
}

func utilizationDetectorFactory(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
	var p UtilizationDetectorParams
	if err := epp.DecodeParams(UtilizationDetectorType, name, params, &p); err != nil {
		return nil, err
	}
	return NewUtilizationDetector(name, p)
}

// NewUtilizationDetector applies the defaults, validates and returns the
// detector. Every invalid field is reported.
func NewUtilizationDetector(name string, p UtilizationDetectorParams) (*UtilizationDetector, error) {
	d := &UtilizationDetector{
		TypedName: epp.TypedName{PluginType: UtilizationDetectorType, PluginName: name},
		queue:     DefaultQueueDepthThreshold,
		kv:        DefaultKVCacheUtilThreshold,
		staleness: int64(DefaultMetricsStalenessThreshold),
	}
	if p.QueueDepthThreshold != nil {
		d.queue = *p.QueueDepthThreshold
	}
	if p.KVCacheUtilThreshold != nil {
		d.kv = *p.KVCacheUtilThreshold
	}
	if p.MetricsStalenessThreshold != nil {
		d.staleness = int64(p.MetricsStalenessThreshold.Duration)
	}
	if p.Headroom != nil {
		d.headroom = *p.Headroom
	}
	var errs []error
	if d.queue <= 0 {
		errs = append(errs, fmt.Errorf("queueDepthThreshold must be strictly positive, got %d", d.queue))
	}
	if !(d.kv > 0 && d.kv <= 1) {
		errs = append(errs, fmt.Errorf("kvCacheUtilThreshold must be in (0.0, 1.0], got %v", d.kv))
	}
	if d.staleness <= 0 {
		errs = append(errs, fmt.Errorf("metricsStalenessThreshold must be strictly positive, got %v", time.Duration(d.staleness)))
	}
	if !(d.headroom >= 0) {
		errs = append(errs, fmt.Errorf("headroom must be a non-negative value, got %v", d.headroom))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("plugin %q (type %s): invalid configuration: %w", name, UtilizationDetectorType, err)
	}
	return d, nil
}

func (d *UtilizationDetector) stale(m *epp.Metrics, now int64) bool {
	return m.UpdateTime == 0 || now-m.UpdateTime > d.staleness
}

// Saturation returns the mean over eps of max(q/queueDepthThreshold,
// kv/kvCacheUtilThreshold), stale or missing metrics counting 1.0; an empty
// pool is saturated (1.0).
func (d *UtilizationDetector) Saturation(eps []*epp.Endpoint, now int64) float64 {
	if len(eps) == 0 {
		return 1.0
	}
	total := 0.0
	for _, e := range eps {
		m := &e.Metrics
		if d.stale(m, now) {
			total += 1.0
			continue
		}
		total += max(float64(m.WaitingQueueSize)/float64(d.queue), m.KVCacheUsagePercent/d.kv)
	}
	return total / float64(len(eps))
}

// NextChange implements epp.SaturationHorizon: the first instant after now
// at which an endpoint fresh at now turns stale (now − UpdateTime >
// metricsStalenessThreshold), -1 when none will.
func (d *UtilizationDetector) NextChange(eps []*epp.Endpoint, now int64) int64 {
	t := int64(-1)
	for _, e := range eps {
		m := &e.Metrics
		if d.stale(m, now) {
			continue
		}
		if at := m.UpdateTime + d.staleness + 1; t < 0 || at < t {
			t = at
		}
	}
	return t
}

// Filter implements epp.Filter: keep endpoints with fresh metrics and
// q < queue·(1+headroom) and kv < kv·(1+headroom); if none remain, the input
// is returned unchanged.
func (d *UtilizationDetector) Filter(c *epp.Cycle, _ *epp.Request, eps []*epp.Endpoint) []*epp.Endpoint {
	t := now(c)
	qLimit := float64(d.queue) * (1.0 + d.headroom)
	kvLimit := d.kv * (1.0 + d.headroom)
	out := make([]*epp.Endpoint, 0, len(eps))
	for _, e := range eps {
		m := &e.Metrics
		if d.stale(m, t) {
			continue
		}
		if float64(m.WaitingQueueSize) < qLimit && m.KVCacheUsagePercent < kvLimit {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		return eps
	}
	return out
}

// Concurrency modes of concurrency-detector.
const (
	ConcurrencyRequests = "requests"
	ConcurrencyTokens   = "tokens"
	ConcurrencyHybrid   = "hybrid"
)

// ConcurrencyDetectorParams are concurrency-detector's parameters (spec
// §7.3). Absent fields take the defaults.
type ConcurrencyDetectorParams struct {
	MaxConcurrency           *int64   `json:"maxConcurrency"`
	Headroom                 *float64 `json:"headroom"`
	ConcurrencyMode          *string  `json:"concurrencyMode"`
	MaxTokenConcurrency      *int64   `json:"maxTokenConcurrency"`
	InFlightLoadProducerName string   `json:"inFlightLoadProducerName"`
}

// Concurrency-detector defaults.
const (
	DefaultMaxConcurrency      = 100
	DefaultMaxTokenConcurrency = 1000000
)

// ConcurrencyDetector is concurrency-detector (spec §7.3,
// saturationdetector/concurrency), reading the live in-flight counters
// (InFlightLoad, spec §8; missing = 0).
//
// Saturation: requests/tokens mode = aggregate in-flight / aggregate
// capacity; hybrid = mean over endpoints of max(requests/maxConcurrency,
// tokens/maxTokenConcurrency); no endpoint → 1.0. Filter: drop endpoints at
// or above capacity·(1+headroom) (hybrid: either limit); no fallback.
type ConcurrencyDetector struct {
	epp.TypedName
	maxReq   int64
	maxTok   int64
	headroom float64
	mode     string
	key      epp.DataKey
}

func concurrencyDetectorFactory(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
	var p ConcurrencyDetectorParams
	if err := epp.DecodeParams(ConcurrencyDetectorType, name, params, &p); err != nil {
		return nil, err
	}
	return NewConcurrencyDetector(name, p)
}

// NewConcurrencyDetector applies the defaults, validates and returns the
// detector.
func NewConcurrencyDetector(name string, p ConcurrencyDetectorParams) (*ConcurrencyDetector, error) {
	d := &ConcurrencyDetector{
		TypedName: epp.TypedName{PluginType: ConcurrencyDetectorType, PluginName: name},
		maxReq:    DefaultMaxConcurrency,
		maxTok:    DefaultMaxTokenConcurrency,
		mode:      ConcurrencyRequests,
		key:       epp.KeyOf(epp.InFlightLoadType, p.InFlightLoadProducerName, epp.InFlightLoadProducer),
	}
	if p.MaxConcurrency != nil {
		d.maxReq = *p.MaxConcurrency
	}
	if p.MaxTokenConcurrency != nil {
		d.maxTok = *p.MaxTokenConcurrency
	}
	if p.Headroom != nil {
		d.headroom = *p.Headroom
	}
	if p.ConcurrencyMode != nil {
		d.mode = *p.ConcurrencyMode
	}
	var errs []error
	if d.maxReq <= 0 {
		errs = append(errs, fmt.Errorf("maxConcurrency must be strictly positive, got %d", d.maxReq))
	}
	if !(d.headroom >= 0) {
		errs = append(errs, fmt.Errorf("headroom must be a non-negative value, got %v", d.headroom))
	}
	if d.maxTok <= 0 {
		errs = append(errs, fmt.Errorf("maxTokenConcurrency must be strictly positive, got %d", d.maxTok))
	}
	switch d.mode {
	case ConcurrencyRequests, ConcurrencyTokens, ConcurrencyHybrid:
	default:
		errs = append(errs, fmt.Errorf("unsupported concurrencyMode: %q", d.mode))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("plugin %q (type %s): invalid configuration: %w", name, ConcurrencyDetectorType, err)
	}
	return d, nil
}

// Consumes implements epp.DataConsumer: InFlightLoad, required.
func (d *ConcurrencyDetector) Consumes() []epp.Dependency {
	return []epp.Dependency{{Key: d.key, Required: true}}
}

// Saturation implements SaturationDetector (now is unused: the counters
// are live).
func (d *ConcurrencyDetector) Saturation(eps []*epp.Endpoint, _ int64) float64 {
	if len(eps) == 0 {
		return 1.0
	}
	if d.mode == ConcurrencyHybrid {
		total := 0.0
		for _, e := range eps {
			l := inFlight(e, d.key)
			total += max(float64(l.Requests)/float64(d.maxReq), float64(l.Tokens)/float64(d.maxTok))
		}
		return total / float64(len(eps))
	}
	var load, capacity int64
	for _, e := range eps {
		l := inFlight(e, d.key)
		if d.mode == ConcurrencyTokens {
			load += int64(l.Tokens)
			capacity += d.maxTok
		} else {
			load += int64(l.Requests)
			capacity += d.maxReq
		}
	}
	return float64(load) / float64(capacity)
}

// Filter implements epp.Filter.
func (d *ConcurrencyDetector) Filter(_ *epp.Cycle, _ *epp.Request, eps []*epp.Endpoint) []*epp.Endpoint {
	reqLimit := int64(float64(d.maxReq) * (1.0 + d.headroom))
	tokLimit := int64(float64(d.maxTok) * (1.0 + d.headroom))
	out := make([]*epp.Endpoint, 0, len(eps))
	for _, e := range eps {
		l := inFlight(e, d.key)
		var keep bool
		switch d.mode {
		case ConcurrencyTokens:
			keep = int64(l.Tokens) < tokLimit
		case ConcurrencyHybrid:
			keep = int64(l.Requests) < reqLimit && int64(l.Tokens) < tokLimit
		default:
			keep = int64(l.Requests) < reqLimit
		}
		if keep {
			out = append(out, e)
		}
	}
	return out
}

// Utilization-filter metrics.
const (
	MetricActiveRequests     = "active-requests"
	MetricRunningRequests    = "running-requests"
	MetricWaitingQueue       = "waiting-queue"
	MetricKVCacheUtilization = "kv-cache-utilization"
)

// UtilizationFilterParams are utilization-filter's parameters (spec §9).
type UtilizationFilterParams struct {
	Conditions               []UtilizationCondition `json:"conditions"`
	FallbackOnEmpty          bool                   `json:"fallbackOnEmpty"`
	InFlightLoadProducerName string                 `json:"inFlightLoadProducerName"`
}

// UtilizationCondition bounds one metric: the endpoint's value must be ≤
// MaxValue.
type UtilizationCondition struct {
	Metric   string  `json:"metric"`
	MaxValue float64 `json:"maxValue"`
}

// UtilizationFilter is utilization-filter (spec §9): keep endpoints whose
// every condition holds (value ≤ maxValue). Metrics: active-requests
// (InFlightLoad.Requests), running-requests, waiting-queue (last scrape),
// kv-cache-utilization (fraction 0..1); a missing value is 0. With
// fallbackOnEmpty the input is returned when nothing passes. No conditions
// keep everything.
type UtilizationFilter struct {
	epp.TypedName
	conds    []UtilizationCondition
	fallback bool
	key      epp.DataKey
}

func utilizationFilterFactory(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
	var p UtilizationFilterParams
	if err := epp.DecodeParams(UtilizationFilterType, name, params, &p); err != nil {
		return nil, err
	}
	return NewUtilizationFilter(name, p)
}

// NewUtilizationFilter validates p and returns the filter.
func NewUtilizationFilter(name string, p UtilizationFilterParams) (*UtilizationFilter, error) {
	for i, c := range p.Conditions {
		switch c.Metric {
		case MetricActiveRequests, MetricRunningRequests, MetricWaitingQueue, MetricKVCacheUtilization:
		default:
			return nil, pluginErr(UtilizationFilterType, name, "conditions[%d].metric must be one of %s, %s, %s, %s, got %q",
				i, MetricActiveRequests, MetricRunningRequests, MetricWaitingQueue, MetricKVCacheUtilization, c.Metric)
		}
	}
	return &UtilizationFilter{
		TypedName: epp.TypedName{PluginType: UtilizationFilterType, PluginName: name},
		conds:     p.Conditions,
		fallback:  p.FallbackOnEmpty,
		key:       epp.KeyOf(epp.InFlightLoadType, p.InFlightLoadProducerName, epp.InFlightLoadProducer),
	}, nil
}

// Consumes implements epp.DataConsumer: InFlightLoad, required only when a
// condition uses active-requests.
func (f *UtilizationFilter) Consumes() []epp.Dependency {
	for _, c := range f.conds {
		if c.Metric == MetricActiveRequests {
			return []epp.Dependency{{Key: f.key, Required: true}}
		}
	}
	return nil
}

func (f *UtilizationFilter) value(e *epp.Endpoint, metric string) float64 {
	switch metric {
	case MetricActiveRequests:
		return float64(inFlight(e, f.key).Requests)
	case MetricRunningRequests:
		return float64(e.Metrics.RunningRequestsSize)
	case MetricWaitingQueue:
		return float64(e.Metrics.WaitingQueueSize)
	case MetricKVCacheUtilization:
		return e.Metrics.KVCacheUsagePercent
	}
	return 0
}

// Filter implements epp.Filter.
func (f *UtilizationFilter) Filter(_ *epp.Cycle, _ *epp.Request, eps []*epp.Endpoint) []*epp.Endpoint {
	out := make([]*epp.Endpoint, 0, len(eps))
next:
	for _, e := range eps {
		for _, c := range f.conds {
			if f.value(e, c.Metric) > c.MaxValue {
				continue next
			}
		}
		out = append(out, e)
	}
	if len(out) == 0 && f.fallback {
		return eps
	}
	return out
}

var (
	_ SaturationDetector = (*UtilizationDetector)(nil)
	_ SaturationDetector = (*ConcurrencyDetector)(nil)
	_ epp.Filter         = (*UtilizationDetector)(nil)
	_ epp.Filter         = (*ConcurrencyDetector)(nil)

	_ epp.SaturationHorizon = (*UtilizationDetector)(nil)
)
