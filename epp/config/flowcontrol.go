package config

import (
	"fmt"
	"time"

	"github.com/eppsim/eppsim/epp"
	"github.com/eppsim/eppsim/epp/flowcontrol"
)

// FlowControlInfo describes the flow-control layer of an effective
// configuration (flow-control.md §3), built only with the flowControl
// feature gate on.
type FlowControlInfo struct {
	// Bands are the static bands (band 0 included), highest priority first;
	// bands of InferenceObjective priorities are copied from
	// DefaultPriorityBand (or DefaultNegativePriorityBand) at run time.
	Bands                       []BandInfo `json:"bands"`
	DefaultPriorityBand         BandInfo   `json:"defaultPriorityBand"`
	DefaultNegativePriorityBand *BandInfo  `json:"defaultNegativePriorityBand,omitempty"`
	// MaxBytes and MaxRequests are the global caps (0: unlimited).
	MaxBytes             int64  `json:"maxBytes"`
	MaxRequests          int64  `json:"maxRequests"`
	DefaultRequestTTL    string `json:"defaultRequestTTL"`
	NoEndpointRequestTTL string `json:"noEndpointRequestTTL"`
	UsageLimitPolicy     string `json:"usageLimitPolicy"`
	SaturationDetector   string `json:"saturationDetector"`
	EnableEviction       bool   `json:"enableEviction"`
}

// BandInfo is one band of FlowControlInfo.
type BandInfo struct {
	Priority       int    `json:"priority"`
	MaxBytes       int64  `json:"maxBytes"`
	MaxRequests    int64  `json:"maxRequests"`
	FairnessPolicy string `json:"fairnessPolicy"`
	OrderingPolicy string `json:"orderingPolicy"`
}

// buildFlowControl resolves the flowControl section with the gate on
// (flow-control.md §3.1–§3.2; upstream buildFlowControlConfig): policy
// references by plugin name (the defaults by their type names, which a
// user plugin of that name replaces), the band caps' defaults (0 or unset
// means the system default), the TTLs (negative is an error;
// noEndpointRequestTTL defaults to defaultRequestTTL when only that is
// set, else 60 s) and the static bands, band 0 copied from
// defaultPriorityBand when not listed.
func (l *loader) buildFlowControl() (*flowcontrol.Controller, *FlowControlInfo, error) {
	fc := l.cfg.FlowControl
	info := &FlowControlInfo{}
	var cfg flowcontrol.Config
	det, ok := l.plugin(fc.SaturationDetector.PluginRef).(epp.SaturationDetector)
	if !ok {
		return nil, nil, l.errAt("flowControl.saturationDetector.pluginRef",
			fmt.Errorf("%w: saturation detector %q is not simulated as a detector", ErrReference, fc.SaturationDetector.PluginRef))
	}
	cfg.Detector = det
	info.SaturationDetector = det.Name()
	ulpRef := fc.UsageLimitPolicyPluginRef
	path := "flowControl.usageLimitPolicyPluginRef"
	if ulpRef == "" {
		ulpRef, path = TypeStaticUsageLimit, "flowControl"
	}
	ulp, ok := l.plugin(ulpRef).(flowcontrol.UsageLimitPolicy)
	if !ok {
		return nil, nil, l.errAt(path, fmt.Errorf("%w: usage limit policy %q is not a usage-limit policy plugin", ErrReference, ulpRef))
	}
	cfg.UsageLimit = ulp
	info.UsageLimitPolicy = ulpRef
	if fc.MaxBytes != nil {
		cfg.MaxBytes = fc.MaxBytes.Value()
	}
	if fc.MaxRequests != nil {
		cfg.MaxRequests = fc.MaxRequests.Value()
	}
	info.MaxBytes, info.MaxRequests = cfg.MaxBytes, cfg.MaxRequests
	cfg.DefaultTTL, cfg.NoEndpointTTL = flowcontrol.DefaultTTL, flowcontrol.DefaultTTL
	if d := fc.DefaultRequestTTL; d != nil {
		if d.Duration < 0 {
			return nil, nil, l.errAt("flowControl.defaultRequestTTL", fmt.Errorf("%w: defaultRequestTTL must not be negative, got %v", ErrPlugin, d.Duration))
		}
		cfg.DefaultTTL, cfg.NoEndpointTTL = int64(d.Duration), int64(d.Duration)
	}
	if d := fc.NoEndpointRequestTTL; d != nil {
		if d.Duration < 0 {
			return nil, nil, l.errAt("flowControl.noEndpointRequestTTL", fmt.Errorf("%w: noEndpointRequestTTL must not be negative, got %v", ErrPlugin, d.Duration))
		}
		cfg.NoEndpointTTL = int64(d.Duration)
	}
	info.DefaultRequestTTL, info.NoEndpointRequestTTL = time.Duration(cfg.DefaultTTL).String(), time.Duration(cfg.NoEndpointTTL).String()
	band := func(path string, b *PriorityBandConfig) (flowcontrol.BandConfig, BandInfo, error) {
		var bc flowcontrol.BandConfig
		fair, ord := TypeGlobalStrictFairness, TypeFCFSOrderingPolicy
		fairPath, ordPath := path, path
		if b != nil {
			bc.Priority = b.Priority
			if b.MaxBytes != nil {
				bc.MaxBytes = b.MaxBytes.Value()
			}
			if b.MaxRequests != nil {
				bc.MaxRequests = b.MaxRequests.Value()
			}
			if b.FairnessPolicyRef != "" {
				fair, fairPath = b.FairnessPolicyRef, path+".fairnessPolicyRef"
			}
			if b.OrderingPolicyRef != "" {
				ord, ordPath = b.OrderingPolicyRef, path+".orderingPolicyRef"
			}
		}
		if bc.MaxBytes <= 0 {
			bc.MaxBytes = flowcontrol.DefaultBandMaxBytes
		}
		if bc.MaxRequests <= 0 {
			bc.MaxRequests = flowcontrol.DefaultBandMaxRequests
		}
		f, ok := l.plugin(fair).(flowcontrol.FairnessPolicy)
		if !ok {
			return bc, BandInfo{}, l.errAt(fairPath, fmt.Errorf("%w: fairness policy %q is not a fairness policy plugin", ErrReference, fair))
		}
		o, ok := l.plugin(ord).(flowcontrol.OrderingPolicy)
		if !ok {
			return bc, BandInfo{}, l.errAt(ordPath, fmt.Errorf("%w: ordering policy %q is not an ordering policy plugin", ErrReference, ord))
		}
		bc.Fairness, bc.Ordering = f, o
		return bc, BandInfo{Priority: bc.Priority, MaxBytes: bc.MaxBytes, MaxRequests: bc.MaxRequests, FairnessPolicy: fair, OrderingPolicy: ord}, nil
	}
	tmpl, tinfo, err := band("flowControl.defaultPriorityBand", fc.DefaultPriorityBand)
	if err != nil {
		return nil, nil, err
	}
	cfg.Template, info.DefaultPriorityBand = tmpl, tinfo
	if fc.DefaultNegativePriorityBand != nil {
		nt, ninfo, err := band("flowControl.defaultNegativePriorityBand", fc.DefaultNegativePriorityBand)
		if err != nil {
			return nil, nil, err
		}
		cfg.NegativeTemplate, info.DefaultNegativePriorityBand = &nt, &ninfo
	}
	seen := map[int]int{}
	for i := range fc.PriorityBands {
		p := fmt.Sprintf("flowControl.priorityBands[%d]", i)
		bc, binfo, err := band(p, &fc.PriorityBands[i])
		if err != nil {
			return nil, nil, err
		}
		if j, dup := seen[bc.Priority]; dup {
			return nil, nil, l.errAt(p+".priority", fmt.Errorf("%w: duplicate priority %d (also flowControl.priorityBands[%d])", ErrPlugin, bc.Priority, j))
		}
		seen[bc.Priority] = i
		cfg.Bands = append(cfg.Bands, bc)
		info.Bands = append(info.Bands, binfo)
	}
	cfg.EnableEviction = fc.EnableEviction
	info.EnableEviction = fc.EnableEviction
	ctl, err := flowcontrol.New(cfg)
	if err != nil {
		return nil, nil, l.errAt("flowControl", err)
	}
	// The bands as the controller holds them (band 0 added), highest first.
	info.Bands = info.Bands[:0]
	for _, p := range ctl.Priorities() {
		b := tinfo
		b.Priority = p
		for _, bc := range cfg.Bands {
			if bc.Priority == p {
				b = BandInfo{Priority: p, MaxBytes: bc.MaxBytes, MaxRequests: bc.MaxRequests, FairnessPolicy: bc.Fairness.Name(), OrderingPolicy: bc.Ordering.Name()}
			}
		}
		info.Bands = append(info.Bands, b)
	}
	return ctl, info, nil
}
