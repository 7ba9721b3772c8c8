// Package filter implements the EPP filters of spec §9 and the saturation
// detectors of spec §7.3 (llm-d-router ebab687,
// pkg/epp/framework/plugins/scheduling/filter and
// .../flowcontrol/saturationdetector) that apply to a single-pool
// simulation: the role filters (decode/prefill/encode), label-selector-filter
// with its deprecated aliases by-label-selector and by-label,
// prefix-cache-affinity-filter, utilization-filter, slo-headroom-tier-filter,
// and utilization-detector / concurrency-detector, which are both filters and
// pool-saturation signals for admission (spec §7.4).
//
// Filters return a subset of their input in input order (epp.Filter). Those
// that draw random numbers take a stream from Handle.Rand(name) at
// construction. context-length-aware (filter mode), session-affinity-filter
// and endpoint-attribute-filter live in package scorer with the scorer whose
// logic they share.
//
// Filters without upstream parameters ignore any parameters given, as the
// upstream factories do.
package filter

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/eppsim/eppsim/epp"
)

// Registered type strings (spec §1.4).
const (
	DecodeType              = "decode-filter"
	PrefillType             = "prefill-filter"
	EncodeType              = "encode-filter"
	LabelSelectorType       = "label-selector-filter"
	ByLabelSelectorType     = "by-label-selector" // deprecated alias of label-selector-filter
	ByLabelType             = "by-label"          // deprecated
	PrefixCacheAffinityType = "prefix-cache-affinity-filter"
	UtilizationFilterType   = "utilization-filter"
	SLOHeadroomTierType     = "slo-headroom-tier-filter"
	UtilizationDetectorType = "utilization-detector"
	ConcurrencyDetectorType = "concurrency-detector"
)

// Register adds every filter type of this package to r.
func Register(r *epp.Registry) {
	r.Register(DecodeType, func(name string, _ json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
		return NewDecode(name), nil
	})
	r.Register(PrefillType, func(name string, _ json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
		return NewPrefill(name), nil
	})
	r.Register(EncodeType, func(name string, _ json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
		return NewEncode(name), nil
	})
	r.Register(LabelSelectorType, selectorFactory(LabelSelectorType))
	r.Register(ByLabelSelectorType, selectorFactory(ByLabelSelectorType))
	r.Register(ByLabelType, byLabelFactory)
	r.Register(PrefixCacheAffinityType, prefixCacheAffinityFactory)
	r.Register(UtilizationFilterType, utilizationFilterFactory)
	r.Register(SLOHeadroomTierType, sloHeadroomTierFactory)
	r.Register(TopologyExtractorType, topologyExtractorFactory)
	r.Register(TopologyAffinityFilterType, topologyAffinityFactory)
	r.Register(UtilizationDetectorType, utilizationDetectorFactory)
	r.Register(ConcurrencyDetectorType, concurrencyDetectorFactory)
}

// SaturationDetector is implemented by utilization-detector and
// concurrency-detector: the pool saturation the admission controller of spec
// §7.4 compares with 1.0 (legacy admission sheds priority < 0 requests at
// saturation ≥ 1). now is the simulated time in ns, used for metric
// staleness.
type SaturationDetector interface {
	epp.Plugin
	Saturation(eps []*epp.Endpoint, now int64) float64
}

// inFlight reads InFlightLoad under key; missing is zero load.
func inFlight(e *epp.Endpoint, key epp.DataKey) epp.InFlightLoad {
	l, _ := epp.Attr[epp.InFlightLoad](e, key)
	return l
}

func now(c *epp.Cycle) int64 {
	if c == nil {
		return 0
	}
	return c.Now
}

// Duration is a JSON duration in Go syntax ("200ms", "1s"), as
// metav1.Duration decodes it.
type Duration struct{ time.Duration }

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string such as \"200ms\": %w", err)
	}
	v, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

func pluginErr(typ, name, format string, a ...any) error {
	return fmt.Errorf("plugin %q (type %s): %s", name, typ, fmt.Sprintf(format, a...))
}
