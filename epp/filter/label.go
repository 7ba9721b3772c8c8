package filter

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/eppsim/eppsim/epp"
)

// RoleLabel is the endpoint label the role filters read.
const RoleLabel = "llm-d.ai/role"

// Role label values (filter/bylabel/roles.go).
const (
	RoleDecode              = "decode"
	RolePrefill             = "prefill"
	RoleEncode              = "encode"
	RolePrefillDecode       = "prefill-decode"
	RoleEncodePrefill       = "encode-prefill"
	RoleEncodePrefillDecode = "encode-prefill-decode"
	RoleBoth                = "both" // deprecated synonym of prefill-decode
)

// ByLabel keeps endpoints whose label has one of a set of values, and
// optionally those without the label (spec §9). It implements by-label and
// the three role filters.
type ByLabel struct {
	epp.TypedName
	label         string
	valid         map[string]struct{}
	allowsNoLabel bool
}

// NewDecode returns decode-filter: role ∈ {decode, prefill-decode, both,
// encode-prefill-decode} or no role label.
func NewDecode(name string) *ByLabel {
	return newByLabel(DecodeType, name, RoleLabel, true, RoleDecode, RolePrefillDecode, RoleBoth, RoleEncodePrefillDecode)
}

// NewPrefill returns prefill-filter: role ∈ {prefill, encode-prefill,
// prefill-decode, both, encode-prefill-decode}; unlabeled endpoints dropped.
func NewPrefill(name string) *ByLabel {
	return newByLabel(PrefillType, name, RoleLabel, false, RolePrefill, RoleEncodePrefill, RolePrefillDecode, RoleBoth, RoleEncodePrefillDecode)
}

// NewEncode returns encode-filter: role ∈ {encode, encode-prefill,
// encode-prefill-decode}; unlabeled endpoints dropped.
func NewEncode(name string) *ByLabel {
	return newByLabel(EncodeType, name, RoleLabel, false, RoleEncode, RoleEncodePrefill, RoleEncodePrefillDecode)
}

func newByLabel(typ, name, label string, allowsNoLabel bool, values ...string) *ByLabel {
	valid := make(map[string]struct{}, len(values))
	for _, v := range values {
		valid[v] = struct{}{}
	}
	return &ByLabel{
		TypedName:     epp.TypedName{PluginType: typ, PluginName: name},
		label:         label,
		valid:         valid,
		allowsNoLabel: allowsNoLabel,
	}
}

// ByLabelParams are the parameters of the deprecated by-label filter.
type ByLabelParams struct {
	Label         string   `json:"label"`
	ValidValues   []string `json:"validValues"`
	AllowsNoLabel bool     `json:"allowsNoLabel"`
}

func byLabelFactory(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
	var p ByLabelParams
	if err := epp.DecodeParams(ByLabelType, name, params, &p); err != nil {
		return nil, err
	}
	return NewByLabel(name, p)
}

// NewByLabel returns a by-label filter.
func NewByLabel(name string, p ByLabelParams) (*ByLabel, error) {
	if name == "" {
		return nil, pluginErr(ByLabelType, name, "name cannot be empty")
	}
	if p.Label == "" {
		return nil, pluginErr(ByLabelType, name, "'label' must be specified")
	}
	if len(p.ValidValues) == 0 && !p.AllowsNoLabel {
		return nil, pluginErr(ByLabelType, name, "either 'validValues' must be non-empty or 'allowsNoLabel' must be true")
	}
	return newByLabel(ByLabelType, name, p.Label, p.AllowsNoLabel, p.ValidValues...), nil
}

// Filter implements epp.Filter. As upstream, an absent label reads as the
// value "", so "" in validValues also admits unlabeled endpoints.
func (f *ByLabel) Filter(_ *epp.Cycle, _ *epp.Request, eps []*epp.Endpoint) []*epp.Endpoint {
	out := make([]*epp.Endpoint, 0, len(eps))
	for _, e := range eps {
		v, has := e.Labels[f.label]
		_, ok := f.valid[v]
		if ok || (!has && f.allowsNoLabel) {
			out = append(out, e)
		}
	}
	return out
}

// LabelSelector is a Kubernetes label selector (metav1.LabelSelector).
type LabelSelector struct {
	MatchLabels      map[string]string          `json:"matchLabels"`
	MatchExpressions []LabelSelectorRequirement `json:"matchExpressions"`
}

// LabelSelectorRequirement is one matchExpressions entry.
type LabelSelectorRequirement struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"`
	Values   []string `json:"values"`
}

// Label selector operators.
const (
	OpIn           = "In"
	OpNotIn        = "NotIn"
	OpExists       = "Exists"
	OpDoesNotExist = "DoesNotExist"
)

// Selector is label-selector-filter (and its deprecated alias
// by-label-selector): keep the endpoints whose labels match a Kubernetes
// label selector, with the semantics of metav1.LabelSelectorAsSelector —
// every requirement must hold; an empty selector matches everything; In
// needs the key with a listed value; NotIn holds when the key is absent or
// its value is not listed; Exists/DoesNotExist test the key only.
type Selector struct {
	epp.TypedName
	reqs []requirement
}

type requirement struct {
	key    string
	op     string
	values []string
}

func selectorFactory(typ string) epp.Factory {
	return func(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
		var p LabelSelector
		if err := epp.DecodeParams(typ, name, params, &p); err != nil {
			return nil, err
		}
		s, err := NewSelector(name, p)
		if err != nil {
			return nil, err
		}
		s.PluginType = typ
		return s, nil
	}
}

// NewSelector validates sel as Kubernetes does and returns a
// label-selector-filter.
func NewSelector(name string, sel LabelSelector) (*Selector, error) {
	if name == "" {
		return nil, pluginErr(LabelSelectorType, name, "missing filter name")
	}
	s := &Selector{TypedName: epp.TypedName{PluginType: LabelSelectorType, PluginName: name}}
	keys := make([]string, 0, len(sel.MatchLabels))
	for k := range sel.MatchLabels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		r := requirement{key: k, op: OpIn, values: []string{sel.MatchLabels[k]}}
		if err := r.validate(); err != nil {
			return nil, pluginErr(LabelSelectorType, name, "matchLabels: %v", err)
		}
		s.reqs = append(s.reqs, r)
	}
	for i, e := range sel.MatchExpressions {
		r := requirement{key: e.Key, op: e.Operator, values: slices.Clone(e.Values)}
		if err := r.validate(); err != nil {
			return nil, pluginErr(LabelSelectorType, name, "matchExpressions[%d]: %v", i, err)
		}
		s.reqs = append(s.reqs, r)
	}
	return s, nil
}

var (
	labelNameRE   = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
	dnsSubdomainR = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// validateKey checks a qualified name: [prefix/]name, prefix a DNS subdomain
// of at most 253 characters, name at most 63 label characters.
func validateKey(k string) error {
	name := k
	if prefix, n, ok := strings.Cut(k, "/"); ok {
		if prefix == "" || len(prefix) > 253 || !dnsSubdomainR.MatchString(prefix) {
			return fmt.Errorf("invalid label key %q: prefix must be a DNS subdomain", k)
		}
		name = n
	}
	if name == "" || len(name) > 63 || !labelNameRE.MatchString(name) {
		return fmt.Errorf("invalid label key %q: name must be 1-63 alphanumeric characters, '-', '_' or '.', starting and ending with an alphanumeric", k)
	}
	return nil
}

func validateValue(v string) error {
	if v == "" {
		return nil
	}
	if len(v) > 63 || !labelNameRE.MatchString(v) {
		return fmt.Errorf("invalid label value %q: must be at most 63 alphanumeric characters, '-', '_' or '.', starting and ending with an alphanumeric", v)
	}
	return nil
}

func (r requirement) validate() error {
	if err := validateKey(r.key); err != nil {
		return err
	}
	switch r.op {
	case OpIn, OpNotIn:
		if len(r.values) == 0 {
			return fmt.Errorf("key %q: values must be non-empty for operator %s", r.key, r.op)
		}
	case OpExists, OpDoesNotExist:
		if len(r.values) != 0 {
			return fmt.Errorf("key %q: values must be empty for operator %s", r.key, r.op)
		}
	default:
		return fmt.Errorf("%q is not a valid label selector operator", r.op)
	}
	for _, v := range r.values {
		if err := validateValue(v); err != nil {
			return err
		}
	}
	return nil
}

func (r requirement) matches(labels map[string]string) bool {
	v, has := labels[r.key]
	switch r.op {
	case OpIn:
		return has && slices.Contains(r.values, v)
	case OpNotIn:
		return !has || !slices.Contains(r.values, v)
	case OpExists:
		return has
	case OpDoesNotExist:
		return !has
	}
	return false
}

// Matches reports whether labels satisfy every requirement.
func (s *Selector) Matches(labels map[string]string) bool {
	for _, r := range s.reqs {
		if !r.matches(labels) {
			return false
		}
	}
	return true
}

// Filter implements epp.Filter.
func (s *Selector) Filter(_ *epp.Cycle, _ *epp.Request, eps []*epp.Endpoint) []*epp.Endpoint {
	out := make([]*epp.Endpoint, 0, len(eps))
	for _, e := range eps {
		if s.Matches(e.Labels) {
			out = append(out, e)
		}
	}
	return out
}
