package scorer

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/eppsim/eppsim/epp"
)

// Custom endpoint attributes in the simulator.
//
// Upstream, endpoint-attribute-scorer/-filter read a scalar that a data-layer
// extractor (e.g. dcgm-extractor for GPUUtilization) scraped from the pod.
// In eppsim a scalar attribute named K (with producer P) is looked up, in
// order:
//
//  1. the per-endpoint attribute DataKey{K, P} (P may be empty), if some
//     eppsim component stores one (dcgm-extractor stores GPUUtilization
//     with producer dcgm-extractor, epp/gpu.go); any Go numeric value is
//     accepted;
//  2. the endpoint label K, parsed as a float64 (strconv.ParseFloat), so a
//     fleet description can give each replica a static value, e.g. label
//     GPUUtilization: "0.42".
//
// An endpoint with neither (or an unparsable label) is "missing".

// AttributeValue returns the scalar attribute key of e as described above.
func AttributeValue(e *epp.Endpoint, key epp.DataKey) (float64, bool) {
	if v, ok := e.Get(key); ok {
		if f, ok := toFloat(v); ok {
			return f, true
		}
	}
	if s, ok := e.Labels[key.Type]; ok {
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return f, true
		}
	}
	return 0, false
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case *float64:
		if x != nil {
			return *x, true
		}
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case int32:
		return float64(x), true
	case uint64:
		return float64(x), true
	case uint32:
		return float64(x), true
	case uint:
		return float64(x), true
	}
	return 0, false
}

// Endpoint-attribute algorithm names.
const (
	AlgorithmLinearLowerIsBetter  = "linear_lower_is_better"
	AlgorithmLinearHigherIsBetter = "linear_higher_is_better"
	AlgorithmThreshold            = "threshold"
)

// EndpointAttributeParams are endpoint-attribute-scorer's parameters.
type EndpointAttributeParams struct {
	AttributeKey string `json:"attributeKey"`
	// Producer names the data producer/extractor of the attribute.
	Producer  string                     `json:"producer"`
	Algorithm EndpointAttributeAlgorithm `json:"algorithm"`
}

// EndpointAttributeAlgorithm selects the scoring direction and normalisation.
type EndpointAttributeAlgorithm struct {
	Type          string        `json:"type"`
	Normalization Normalization `json:"normalization"`
}

// Normalization selects fixedRange or adaptiveRange (default).
type Normalization struct {
	FixedRange    *FixedRange `json:"fixedRange"`
	AdaptiveRange *struct{}   `json:"adaptiveRange"`
}

// FixedRange normalises against [Min, Max]; Min < Max.
type FixedRange struct {
	Min float64 `json:"min"`
	Max float64 `json:"max"`
}

// EndpointAttribute is endpoint-attribute-scorer (spec §4,
// scorer/endpointattribute): a scalar attribute normalised linearly.
// adaptiveRange: min-max over the candidates that have the value (all equal →
// 1.0); fixedRange: (v−min)/(max−min) clamped to [0,1]; inverted for
// linear_lower_is_better; missing → 0.
type EndpointAttribute struct {
	epp.TypedName
	key   epp.DataKey
	lower bool
	fixed *FixedRange
}

func endpointAttributeScorerFactory(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
	var p EndpointAttributeParams
	if err := epp.DecodeParams(EndpointAttributeType, name, params, &p); err != nil {
		return nil, err
	}
	return NewEndpointAttribute(name, p)
}

// NewEndpointAttribute returns an endpoint-attribute-scorer.
func NewEndpointAttribute(name string, p EndpointAttributeParams) (*EndpointAttribute, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("plugin %q (type %s): %s", name, EndpointAttributeType, fmt.Sprintf(format, a...))
	}
	if p.AttributeKey == "" {
		return nil, bad("requires a non-empty attributeKey")
	}
	switch p.Algorithm.Type {
	case AlgorithmLinearLowerIsBetter, AlgorithmLinearHigherIsBetter:
	default:
		return nil, bad("algorithm.type must be %q or %q, got %q", AlgorithmLinearLowerIsBetter, AlgorithmLinearHigherIsBetter, p.Algorithm.Type)
	}
	n := p.Algorithm.Normalization
	if n.FixedRange != nil && n.AdaptiveRange != nil {
		return nil, bad("allows at most one normalization strategy, got both fixedRange and adaptiveRange")
	}
	if n.FixedRange != nil && !(n.FixedRange.Min < n.FixedRange.Max) {
		return nil, bad("normalization.fixedRange requires min < max, got min %v, max %v", n.FixedRange.Min, n.FixedRange.Max)
	}
	return &EndpointAttribute{
		TypedName: epp.TypedName{PluginType: EndpointAttributeType, PluginName: name},
		key:       epp.DataKey{Type: p.AttributeKey, Producer: p.Producer},
		lower:     p.Algorithm.Type == AlgorithmLinearLowerIsBetter,
		fixed:     n.FixedRange,
	}, nil
}

// Consumes implements epp.DataConsumer. The dependency is optional: its
// producer is a data-layer extractor eppsim does not run, and the label
// fallback needs no producer.
func (s *EndpointAttribute) Consumes() []epp.Dependency {
	return []epp.Dependency{{Key: s.key, Required: false}}
}

// Score implements epp.Scorer.
func (s *EndpointAttribute) Score(_ *epp.Cycle, _ *epp.Request, eps []*epp.Endpoint, scores []float64) {
	if s.fixed != nil {
		for i, e := range eps {
			v, ok := AttributeValue(e, s.key)
			if !ok {
				scores[i] = 0
				continue
			}
			n := (v - s.fixed.Min) / (s.fixed.Max - s.fixed.Min)
			n = math.Max(0, math.Min(1, n))
			if s.lower {
				n = 1 - n
			}
			scores[i] = n
		}
		return
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, e := range eps {
		if v, ok := AttributeValue(e, s.key); ok {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	for i, e := range eps {
		v, ok := AttributeValue(e, s.key)
		switch {
		case !ok:
			scores[i] = 0
		case hi == lo:
			scores[i] = 1
		default:
			n := (v - lo) / (hi - lo)
			if s.lower {
				n = 1 - n
			}
			scores[i] = n
		}
	}
}

// Endpoint-attribute-filter operators and onMissing policies.
const (
	OpLessThan           = "LessThan"
	OpLessThanOrEqual    = "LessThanOrEqual"
	OpGreaterThan        = "GreaterThan"
	OpGreaterThanOrEqual = "GreaterThanOrEqual"
	OpEqual              = "Equal"
	OpNotEqual           = "NotEqual"
	OnMissingPass        = "Pass"
	OnMissingFail        = "Fail"
)

// EndpointAttributeFilterParams are endpoint-attribute-filter's parameters.
type EndpointAttributeFilterParams struct {
	Attribute string `json:"attribute"`
	Producer  string `json:"producer"`
	// OnMissing: Pass (default) keeps endpoints without the attribute, Fail
	// drops them.
	OnMissing string `json:"onMissing"`
	// FallbackOnEmpty returns the input when every endpoint is dropped.
	FallbackOnEmpty bool                `json:"fallbackOnEmpty"`
	Algorithm       AttributeFilterAlgo `json:"algorithm"`
}

// AttributeFilterAlgo selects the filter algorithm; only threshold exists.
type AttributeFilterAlgo struct {
	Type      string           `json:"type"`
	Threshold *AttributeThresh `json:"threshold"`
}

// AttributeThresh keeps endpoints whose value compares true against Value.
type AttributeThresh struct {
	Operator string  `json:"operator"`
	Value    float64 `json:"value"`
}

// EndpointAttributeFilter is endpoint-attribute-filter (spec §9): threshold
// comparison on the scalar attribute (see AttributeValue).
type EndpointAttributeFilter struct {
	epp.TypedName
	key           epp.DataKey
	passOnMissing bool
	fallback      bool
	op            string
	value         float64
}

func endpointAttributeFilterFactory(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
	var p EndpointAttributeFilterParams
	if err := epp.DecodeParams(EndpointAttrFilterType, name, params, &p); err != nil {
		return nil, err
	}
	return NewEndpointAttributeFilter(name, p)
}

// NewEndpointAttributeFilter returns an endpoint-attribute-filter.
func NewEndpointAttributeFilter(name string, p EndpointAttributeFilterParams) (*EndpointAttributeFilter, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("plugin %q (type %s): %s", name, EndpointAttrFilterType, fmt.Sprintf(format, a...))
	}
	if p.Attribute == "" {
		return nil, bad("requires a non-empty attribute")
	}
	switch p.OnMissing {
	case "":
		p.OnMissing = OnMissingPass
	case OnMissingPass, OnMissingFail:
	default:
		return nil, bad("onMissing must be %q or %q, got %q", OnMissingPass, OnMissingFail, p.OnMissing)
	}
	if p.Algorithm.Type != AlgorithmThreshold {
		return nil, bad("algorithm.type must be %q, got %q", AlgorithmThreshold, p.Algorithm.Type)
	}
	if p.Algorithm.Threshold == nil {
		return nil, bad("requires algorithm.threshold when algorithm.type is %q", AlgorithmThreshold)
	}
	switch p.Algorithm.Threshold.Operator {
	case OpLessThan, OpLessThanOrEqual, OpGreaterThan, OpGreaterThanOrEqual, OpEqual, OpNotEqual:
	default:
		return nil, bad("threshold.operator must be one of LessThan, LessThanOrEqual, GreaterThan, GreaterThanOrEqual, Equal, NotEqual, got %q", p.Algorithm.Threshold.Operator)
	}
	return &EndpointAttributeFilter{
		TypedName:     epp.TypedName{PluginType: EndpointAttrFilterType, PluginName: name},
		key:           epp.DataKey{Type: p.Attribute, Producer: p.Producer},
		passOnMissing: p.OnMissing == OnMissingPass,
		fallback:      p.FallbackOnEmpty,
		op:            p.Algorithm.Threshold.Operator,
		value:         p.Algorithm.Threshold.Value,
	}, nil
}

// Consumes implements epp.DataConsumer (optional, as for the scorer).
func (f *EndpointAttributeFilter) Consumes() []epp.Dependency {
	return []epp.Dependency{{Key: f.key, Required: false}}
}

func (f *EndpointAttributeFilter) matches(v float64) bool {
	switch f.op {
	case OpLessThan:
		return v < f.value
	case OpLessThanOrEqual:
		return v <= f.value
	case OpGreaterThan:
		return v > f.value
	case OpGreaterThanOrEqual:
		return v >= f.value
	case OpEqual:
		return v == f.value
	case OpNotEqual:
		return v != f.value
	}
	return false
}

// Filter implements epp.Filter.
func (f *EndpointAttributeFilter) Filter(_ *epp.Cycle, _ *epp.Request, eps []*epp.Endpoint) []*epp.Endpoint {
	out := make([]*epp.Endpoint, 0, len(eps))
	for _, e := range eps {
		v, ok := AttributeValue(e, f.key)
		if (!ok && f.passOnMissing) || (ok && f.matches(v)) {
			out = append(out, e)
		}
	}
	if len(out) == 0 && f.fallback {
		return eps
	}
	return out
}

// HeaderLabelAffinityParams are header-label-affinity-scorer's parameters.
type HeaderLabelAffinityParams struct {
	HeaderName string `json:"headerName"`
	LabelKey   string `json:"labelKey"`
}

// HeaderLabelAffinity is header-label-affinity-scorer (spec §4,
// scorer/headerlabelaffinity): 1 when the endpoint's label labelKey equals
// the request header headerName (non-empty), else 0.
type HeaderLabelAffinity struct {
	epp.TypedName
	header string
	label  string
}

func headerLabelAffinityFactory(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
	if len(params) == 0 || string(params) == "null" {
		return nil, fmt.Errorf("plugin %q (type %s): %w", name, HeaderLabelAffinityType, errors.New("requires parameters headerName and labelKey"))
	}
	var p HeaderLabelAffinityParams
	if err := epp.DecodeParams(HeaderLabelAffinityType, name, params, &p); err != nil {
		return nil, err
	}
	return NewHeaderLabelAffinity(name, p)
}

// NewHeaderLabelAffinity returns a header-label-affinity-scorer.
func NewHeaderLabelAffinity(name string, p HeaderLabelAffinityParams) (*HeaderLabelAffinity, error) {
	if p.HeaderName == "" {
		return nil, fmt.Errorf("plugin %q (type %s): headerName is required", name, HeaderLabelAffinityType)
	}
	if p.LabelKey == "" {
		return nil, fmt.Errorf("plugin %q (type %s): labelKey is required", name, HeaderLabelAffinityType)
	}
	return &HeaderLabelAffinity{
		TypedName: epp.TypedName{PluginType: HeaderLabelAffinityType, PluginName: name},
		header:    normalizeHeader(p.HeaderName, ""),
		label:     p.LabelKey,
	}, nil
}

// Score implements epp.Scorer.
func (s *HeaderLabelAffinity) Score(_ *epp.Cycle, req *epp.Request, eps []*epp.Endpoint, scores []float64) {
	if req == nil {
		return
	}
	want := req.Headers[s.header]
	if want == "" {
		return
	}
	for i, e := range eps {
		if v, ok := e.Labels[s.label]; ok && v == want {
			scores[i] = 1
		}
	}
}
