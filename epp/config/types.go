package config

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// API versions and kind of an EndpointPickerConfig (spec §1.1).
const (
	APIVersion           = "llm-d.ai/v1alpha1"
	DeprecatedAPIVersion = "inference.networking.x-k8s.io/v1alpha1"
	Kind                 = "EndpointPickerConfig"
)

// EndpointPickerConfig is the configuration document of spec §1.1
// (apix/config/v1alpha1/endpointpickerconfig_types.go). Field names, YAML
// keys and JSON keys are upstream's.
type EndpointPickerConfig struct {
	APIVersion string `yaml:"apiVersion" json:"apiVersion"`
	Kind       string `yaml:"kind" json:"kind"`
	// FeatureGates entries are "name", "name=true" or "name=false".
	FeatureGates       []string              `yaml:"featureGates,omitempty" json:"featureGates,omitempty"`
	Plugins            []PluginSpec          `yaml:"plugins" json:"plugins"`
	SchedulingProfiles []SchedulingProfile   `yaml:"schedulingProfiles" json:"schedulingProfiles"`
	DataLayer          *DataLayerConfig      `yaml:"dataLayer,omitempty" json:"dataLayer,omitempty"`
	FlowControl        *FlowControlConfig    `yaml:"flowControl,omitempty" json:"flowControl,omitempty"`
	RequestHandler     *RequestHandlerConfig `yaml:"requestHandler,omitempty" json:"requestHandler,omitempty"`
	// SaturationDetector is deprecated: Load moves it to
	// flowControl.saturationDetector when that is unset.
	SaturationDetector *PluginRef `yaml:"saturationDetector,omitempty" json:"saturationDetector,omitempty"`
	// Parser is deprecated: Load moves it to requestHandler.parsers when that
	// is empty.
	Parser *PluginRef `yaml:"parser,omitempty" json:"parser,omitempty"`
}

// PluginSpec declares one plugin instance.
type PluginSpec struct {
	// Name defaults to Type (spec §1.3 step 1).
	Name string `yaml:"name,omitempty" json:"name,omitempty"`
	Type string `yaml:"type" json:"type"`
	// Parameters are passed to the plugin factory as raw JSON; the factory
	// decodes them strictly. Nil when the config gives none.
	Parameters json.RawMessage `yaml:"-" json:"parameters,omitempty"`
}

// pluginSpecYAML is PluginSpec as the YAML decoder sees it: parameters are
// captured as an ordered YAML value and converted to JSON afterwards.
type pluginSpecYAML struct {
	Name       string    `yaml:"name"`
	Type       string    `yaml:"type"`
	Parameters yamlValue `yaml:"parameters"`
}

// UnmarshalYAML decodes a plugin entry strictly and converts its parameters
// to JSON.
func (p *PluginSpec) UnmarshalYAML(unmarshal func(any) error) error {
	var s pluginSpecYAML
	if err := unmarshal(&s); err != nil {
		return err
	}
	p.Name, p.Type = s.Name, s.Type
	p.Parameters = nil
	if s.Parameters.set && s.Parameters.v != nil {
		raw, err := yamlToJSON(s.Parameters.v)
		if err != nil {
			return fmt.Errorf("plugin %q: parameters: %w", p.displayName(), err)
		}
		p.Parameters = raw
	}
	return nil
}

// MarshalYAML writes the entry with its parameters as YAML, keeping the
// parameters' key order.
func (p PluginSpec) MarshalYAML() (any, error) {
	out := yamlMapSlice{}
	if p.Name != "" {
		out = append(out, yamlMapItem{Key: "name", Value: p.Name})
	}
	out = append(out, yamlMapItem{Key: "type", Value: p.Type})
	if len(p.Parameters) > 0 && string(p.Parameters) != "null" {
		v, err := jsonToYAML(p.Parameters)
		if err != nil {
			return nil, fmt.Errorf("plugin %q: parameters: %w", p.displayName(), err)
		}
		out = append(out, yamlMapItem{Key: "parameters", Value: v})
	}
	return out, nil
}

func (p *PluginSpec) displayName() string {
	if p.Name != "" {
		return p.Name
	}
	return p.Type
}

// SchedulingProfile is a named list of plugin references; each reference is
// slotted as filter, scorer and/or picker by what the plugin implements.
type SchedulingProfile struct {
	Name    string             `yaml:"name" json:"name"`
	Plugins []SchedulingPlugin `yaml:"plugins" json:"plugins"`
}

// SchedulingPlugin references a plugin from a profile.
type SchedulingPlugin struct {
	PluginRef string `yaml:"pluginRef" json:"pluginRef"`
	// Weight applies to scorers only; unset means 1.0 (spec §1.3).
	Weight *float64 `yaml:"weight,omitempty" json:"weight,omitempty"`
}

// PluginRef is a bare reference to a plugin by name (saturation detector,
// parser, data-layer extractor, discovery).
type PluginRef struct {
	PluginRef string `yaml:"pluginRef" json:"pluginRef"`
}

// DataLayerConfig configures metric sources and their extractors (§1.1, §7).
type DataLayerConfig struct {
	// InjectDefaults defaults to true; false disables the automatic
	// metrics-data-source + core-metrics-extractor.
	InjectDefaults              *bool             `yaml:"injectDefaults,omitempty" json:"injectDefaults,omitempty"`
	Sources                     []DataLayerSource `yaml:"sources,omitempty" json:"sources,omitempty"`
	Discovery                   *PluginRef        `yaml:"discovery,omitempty" json:"discovery,omitempty"`
	PeerDiscovery               *PluginRef        `yaml:"peerDiscovery,omitempty" json:"peerDiscovery,omitempty"`
	CrossReplicaSyncerPluginRef string            `yaml:"crossReplicaSyncerPluginRef,omitempty" json:"crossReplicaSyncerPluginRef,omitempty"`
	CrossReplicaSyncInterval    *Duration         `yaml:"crossReplicaSyncInterval,omitempty" json:"crossReplicaSyncInterval,omitempty"`
}

// DataLayerSource is a data source with its extractors.
type DataLayerSource struct {
	PluginRef  string      `yaml:"pluginRef" json:"pluginRef"`
	Extractors []PluginRef `yaml:"extractors" json:"extractors"`
}

// FlowControlConfig configures the flow-control layer; only honoured when the
// flowControl feature gate is on, except SaturationDetector (§1.1, §7.4).
type FlowControlConfig struct {
	MaxBytes                    *Quantity            `yaml:"maxBytes,omitempty" json:"maxBytes,omitempty"`
	MaxRequests                 *Quantity            `yaml:"maxRequests,omitempty" json:"maxRequests,omitempty"`
	DefaultRequestTTL           *Duration            `yaml:"defaultRequestTTL,omitempty" json:"defaultRequestTTL,omitempty"`
	NoEndpointRequestTTL        *Duration            `yaml:"noEndpointRequestTTL,omitempty" json:"noEndpointRequestTTL,omitempty"`
	DefaultPriorityBand         *PriorityBandConfig  `yaml:"defaultPriorityBand,omitempty" json:"defaultPriorityBand,omitempty"`
	DefaultNegativePriorityBand *PriorityBandConfig  `yaml:"defaultNegativePriorityBand,omitempty" json:"defaultNegativePriorityBand,omitempty"`
	PriorityBands               []PriorityBandConfig `yaml:"priorityBands,omitempty" json:"priorityBands,omitempty"`
	UsageLimitPolicyPluginRef   string               `yaml:"usageLimitPolicyPluginRef,omitempty" json:"usageLimitPolicyPluginRef,omitempty"`
	SaturationDetector          *PluginRef           `yaml:"saturationDetector,omitempty" json:"saturationDetector,omitempty"`
	EnableEviction              bool                 `yaml:"enableEviction,omitempty" json:"enableEviction,omitempty"`
}

// PriorityBandConfig configures one priority band of flow control.
type PriorityBandConfig struct {
	Priority          int       `yaml:"priority" json:"priority"`
	MaxBytes          *Quantity `yaml:"maxBytes,omitempty" json:"maxBytes,omitempty"`
	MaxRequests       *Quantity `yaml:"maxRequests,omitempty" json:"maxRequests,omitempty"`
	FairnessPolicyRef string    `yaml:"fairnessPolicyRef,omitempty" json:"fairnessPolicyRef,omitempty"`
	OrderingPolicyRef string    `yaml:"orderingPolicyRef,omitempty" json:"orderingPolicyRef,omitempty"`
}

// RequestHandlerConfig lists the request parsers.
type RequestHandlerConfig struct {
	Parsers []PluginRef `yaml:"parsers,omitempty" json:"parsers,omitempty"`
}

// Duration is a Kubernetes metav1.Duration: a Go duration string ("60s").
type Duration struct {
	time.Duration
}

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(unmarshal func(any) error) error {
	var s string
	if err := unmarshal(&s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("invalid duration %q: %w", s, err)
	}
	d.Duration = v
	return nil
}

// MarshalYAML writes the duration as a string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON parses a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("invalid duration %q: %w", s, err)
	}
	d.Duration = v
	return nil
}

// Quantity is a Kubernetes resource quantity ("100", "1k", "1Gi"), kept as
// written; Value parses it.
type Quantity string

// UnmarshalYAML accepts a YAML number or string and validates it.
func (q *Quantity) UnmarshalYAML(unmarshal func(any) error) error {
	var s string
	if err := unmarshal(&s); err != nil {
		return err
	}
	if _, err := ParseQuantity(s); err != nil {
		return err
	}
	*q = Quantity(s)
	return nil
}

// Value returns the quantity as an integer (rounded up, as Kubernetes does).
func (q Quantity) Value() int64 {
	v, _ := ParseQuantity(string(q))
	return v
}

// ParseQuantity parses a Kubernetes quantity: a decimal number with an
// optional binary (Ki Mi Gi Ti Pi Ei), decimal (k M G T P E, m = milli) or
// exponent (e3, E6) suffix. The value is rounded up to an integer.
func ParseQuantity(s string) (int64, error) {
	str := strings.TrimSpace(s)
	if str == "" {
		return 0, fmt.Errorf("invalid quantity %q: empty", s)
	}
	num := str
	mult := 1.0
	suffixes := []struct {
		s string
		m float64
	}{
		{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"Pi", 1 << 50}, {"Ei", 1 << 60},
		{"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}, {"P", 1e15}, {"E", 1e18}, {"m", 1e-3},
	}
	for _, sf := range suffixes {
		if strings.HasSuffix(str, sf.s) {
			num, mult = strings.TrimSuffix(str, sf.s), sf.m
			break
		}
	}
	if num == "" || strings.ContainsAny(num, "xXpP_") || strings.HasPrefix(num, "0x") {
		return 0, fmt.Errorf("invalid quantity %q", s)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("invalid quantity %q", s)
	}
	v := math.Ceil(f * mult)
	if v < 0 {
		return 0, fmt.Errorf("invalid quantity %q: negative", s)
	}
	if v > math.MaxInt64/2 {
		return 0, fmt.Errorf("invalid quantity %q: too large", s)
	}
	return int64(v), nil
}
