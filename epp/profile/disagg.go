package profile

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/eppsim/eppsim/epp"
)

// Headers the disaggregation handler sets for the decode pod's routing
// sidecar (pd-offload.md A.2, llm-d-router pkg/common/routing/common.go).
const (
	PrefillHeader  = epp.PrefillHeader
	EncodersHeader = "x-encoder-hosts-ports"
)

// Default profile names of the disaggregation handlers.
const (
	DefaultPrefillProfile = "prefill"
	DefaultEncodeProfile  = "encode"
)

// pdDecisionType is the request-scoped data under which the handler keeps
// its decision between PickProfiles and ProcessResults.
const pdDecisionType = "PDDecision"

// Disagg is disagg-profile-handler, and the deprecated pd-profile-handler
// that upstream keeps as its legacy alias (pd-offload.md A.2; llm-d-router
// ebab687 profilehandler/disagg). In the default decode-first order it runs
// the decode profile, then the encode profile if its decider approves on
// the decode pick, then the prefill profile if the prefill decider
// approves on it; in prefill-first order it runs prefill (whenever that
// profile exists), then encode, then decode. Decode is the primary
// profile. A prefill profile that runs and finds no endpoint leaves the
// request decode-only, silently (A.2, A.9). PreRequest sets the
// x-prefiller-host-port header to the prefill pick, which is what makes
// the decode pod's sidecar run the P/D request path (A.4).
type Disagg struct {
	epp.TypedName
	prefillFirst                     bool
	decode, prefill, encode          string
	pdDecider, encodeDecider         Decider
	stateKey                         epp.DataKey
	consumes                         []epp.Dependency
	notSimulated                     string
	encodeDeciderName, pdDeciderName string
}

// DisaggParams are the parameters of disagg-profile-handler and
// pd-profile-handler: the nested format (stageOrder, profiles, deciders)
// and the deprecated flat format upstream still accepts, plus
// pd-profile-handler's own fields. Mixing the two formats is an error.
type DisaggParams struct {
	StageOrder string `json:"stageOrder"`
	Profiles   struct {
		Decode  string `json:"decode"`
		Prefill string `json:"prefill"`
		Encode  string `json:"encode"`
	} `json:"profiles"`
	Deciders struct {
		Prefill string `json:"prefill"`
		Encode  string `json:"encode"`
	} `json:"deciders"`

	// Deprecated flat fields.
	DecodeProfile            string `json:"decodeProfile"`
	PrefillProfile           string `json:"prefillProfile"`
	EncodeProfile            string `json:"encodeProfile"`
	PrefillDeciderPluginName string `json:"prefillDeciderPluginName"`
	EncodeDeciderPluginName  string `json:"encodeDeciderPluginName"`
	DeciderPluginName        string `json:"deciderPluginName"`
	// pd-profile-handler fields (deprecated; prefixPluginType and
	// prefixPluginName were never used upstream).
	PrimaryPort                 int    `json:"primaryPort"`
	PrefixPluginType            string `json:"prefixPluginType"`
	PrefixPluginName            string `json:"prefixPluginName"`
	PrefixMatchInfoProducerName string `json:"prefixMatchInfoProducerName"`
}

func (p *DisaggParams) nested() bool {
	return p.Profiles.Decode != "" || p.Profiles.Prefill != "" || p.Profiles.Encode != "" ||
		p.Deciders.Prefill != "" || p.Deciders.Encode != ""
}

func (p *DisaggParams) flat() bool {
	return p.DecodeProfile != "" || p.PrefillProfile != "" || p.EncodeProfile != "" ||
		p.PrefillDeciderPluginName != "" || p.EncodeDeciderPluginName != "" || p.DeciderPluginName != ""
}

// parseStageOrder is upstream ParseStageOrder: case, '-' and '_' are
// ignored; "" is decode-first.
func parseStageOrder(s string) (prefillFirst bool, err error) {
	switch strings.ToLower(strings.NewReplacer("-", "", "_", "").Replace(s)) {
	case "", "decodefirst", "decode":
		return false, nil
	case "prefillfirst", "prefill":
		return true, nil
	}
	return false, fmt.Errorf("invalid stage order %q, must be %q or %q", s, "decode-first", "prefill-first")
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func disaggFactory(typ string) epp.Factory {
	return func(name string, params json.RawMessage, h *epp.Handle) (epp.Plugin, error) {
		p := DisaggParams{}
		if typ == PDType {
			// pd-profile-handler's decider defaults to the prefix-based one.
			p.DeciderPluginName = PrefixBasedPDDeciderType
		}
		if err := epp.DecodeParams(typ, name, params, &p); err != nil {
			return nil, err
		}
		if typ == PDType && p.DeciderPluginName == PrefixBasedPDDeciderType && p.nested() {
			p.DeciderPluginName = "" // the default alone does not make the parameters flat
		}
		if p.nested() && p.flat() {
			return nil, fmt.Errorf("plugin %q (type %s): cannot mix deprecated flat parameters (decodeProfile, prefillProfile, encodeProfile, "+
				"deciderPluginName, prefillDeciderPluginName, encodeDeciderPluginName) with nested parameters (profiles, deciders): use one format or the other", name, typ)
		}
		if p.PrimaryPort != 0 && (p.PrimaryPort < 1 || p.PrimaryPort > 65535) {
			return nil, fmt.Errorf("plugin %q (type %s): invalid primaryPort: must be between 1 and 65535, got %d", name, typ, p.PrimaryPort)
		}
		prefillFirst, err := parseStageOrder(p.StageOrder)
		if err != nil {
			return nil, fmt.Errorf("plugin %q (type %s): %w", name, typ, err)
		}
		pdName := or(p.Deciders.Prefill, or(p.PrefillDeciderPluginName, p.DeciderPluginName))
		encName := or(p.Deciders.Encode, p.EncodeDeciderPluginName)
		if prefillFirst && pdName != "" {
			return nil, fmt.Errorf("plugin %q (type %s): prefill decider is not supported in prefill-first stage order", name, typ)
		}
		if typ == PDType && pdName == "" {
			return nil, fmt.Errorf("plugin %q (type %s): decider plugin name is not defined", name, typ)
		}
		d := &Disagg{
			TypedName:    epp.TypedName{PluginType: typ, PluginName: name},
			prefillFirst: prefillFirst,
			decode:       or(p.Profiles.Decode, or(p.DecodeProfile, DefaultDecodeProfile)),
			prefill:      or(p.Profiles.Prefill, or(p.PrefillProfile, DefaultPrefillProfile)),
			encode:       or(p.Profiles.Encode, or(p.EncodeProfile, DefaultEncodeProfile)),
			stateKey:     epp.DataKey{Type: pdDecisionType, Producer: name},
		}
		if typ == PDType {
			d.encode = "" // the legacy handler has no encode stage
		}
		field := "deciders.prefill"
		if p.flat() || typ == PDType {
			field = "deciderPluginName"
		}
		if d.pdDecider, err = lookupDecider(h, pdName, field); err != nil {
			return nil, fmt.Errorf("plugin %q (type %s): %w", name, typ, err)
		}
		if d.encodeDecider, err = lookupDecider(h, encName, "deciders.encode"); err != nil {
			return nil, fmt.Errorf("plugin %q (type %s): %w", name, typ, err)
		}
		d.pdDeciderName, d.encodeDeciderName = pdName, encName
		// Required: the approximate producer's match under its default
		// key (or pd-profile-handler's prefixMatchInfoProducerName) and the
		// tokenized prompt, auto-created when missing (A.2).
		d.consumes = []epp.Dependency{
			{Key: epp.KeyOf(epp.PrefixCacheMatchInfoType, p.PrefixMatchInfoProducerName, epp.ApproxPrefixProducer), Required: true},
			{Key: epp.DataKey{Type: epp.TokenizedPromptType, Producer: epp.TokenProducer}, Required: true},
		}
		var notes []string
		if p.PrimaryPort != 0 {
			notes = append(notes, fmt.Sprintf("primaryPort %d rewrites the decode target to a data-parallel rank port, which eppsim does not model "+
				"(each simulated endpoint is one engine); fallback: the request goes to the picked endpoint", p.PrimaryPort))
		}
		if d.encodeDecider != nil {
			if _, mm := d.encodeDecider.(*MultimodalDecider); !mm {
				notes = append(notes, "the encode stage is not simulated: when its decider approves, the encode profile runs and "+
					"x-encoder-hosts-ports is set, but no encoder pod is modelled; fallback: the request's prompt is prefilled as without an encoder")
			}
		}
		if len(notes) > 0 {
			d.notSimulated = "not simulated: " + strings.Join(notes, "; ")
			return &disaggNote{d}, nil
		}
		return d, nil
	}
}

func lookupDecider(h *epp.Handle, name, field string) (Decider, error) {
	if name == "" {
		return nil, nil
	}
	var p epp.Plugin
	if h != nil {
		p = h.Plugins[name]
	}
	if p == nil {
		return nil, fmt.Errorf("%s plugin not found: %s", field, name)
	}
	d, ok := p.(Decider)
	if !ok {
		return nil, fmt.Errorf("%s: plugin %s (type %s) is not a disaggregation decider", field, name, p.Type())
	}
	return d, nil
}

// disaggNote is a Disagg with a part that is not simulated.
type disaggNote struct{ *Disagg }

// NotSimulatedReason implements epp.NotSimulated.
func (d *disaggNote) NotSimulatedReason() string { return d.notSimulated }

// Disaggregates reports whether the handler can send a request's prefill
// to a separate pod: a prefill decider is configured, or the stage order
// is prefill-first.
func (h *Disagg) Disaggregates() bool { return h.pdDecider != nil || h.prefillFirst }

// PrefillProfile is the name of the prefill profile.
func (h *Disagg) PrefillProfile() string { return h.prefill }

// Consumes implements epp.DataConsumer.
func (h *Disagg) Consumes() []epp.Dependency { return h.consumes }

func hasProfile(profiles []*epp.Profile, name string) bool {
	if name == "" {
		return false
	}
	for _, p := range profiles {
		if p.Name == name {
			return true
		}
	}
	return false
}

func (h *Disagg) put(req *epp.Request, d epp.PDDecision) {
	if req != nil {
		req.Put(h.stateKey, d)
	}
}

// PickProfiles implements epp.ProfileHandler (upstream Pick). A stage its
// decider declines is recorded as a nil result so that it is not
// reconsidered.
func (h *Disagg) PickProfiles(c *epp.Cycle, req *epp.Request, profiles []*epp.Profile, results map[string]*epp.ProfileResult) []string {
	if h.prefillFirst {
		return h.pickPrefillFirst(c, req, profiles, results)
	}
	if _, ran := results[h.decode]; !ran {
		if !hasProfile(profiles, h.decode) {
			return nil
		}
		return []string{h.decode}
	}
	d := results[h.decode]
	if d == nil || len(d.Targets) == 0 {
		return nil
	}
	// The decode pick is the peer of the later profiles: topology plugins
	// grade candidates by their proximity to it (pd-offload.md §A.2,
	// pickDecodeFirst publishes only this).
	req.Put(epp.PeerEndpointKey, d.Targets[0])
	if hasProfile(profiles, h.encode) {
		if _, ran := results[h.encode]; !ran {
			if h.encodeDecider != nil {
				if ok, _ := h.encodeDecider.Decide(c, req, d.Targets[0]); ok {
					return []string{h.encode}
				}
			}
			results[h.encode] = nil
		}
	}
	if _, ran := results[h.prefill]; ran {
		return nil
	}
	if !hasProfile(profiles, h.prefill) {
		h.put(req, epp.PDDecision{Decider: h.pdDeciderName, Reason: epp.PDReasonNoPrefillProfile})
		return nil
	}
	if h.pdDecider == nil {
		h.put(req, epp.PDDecision{Reason: epp.PDReasonDisabled})
		results[h.prefill] = nil
		return nil
	}
	ok, dec := h.pdDecider.Decide(c, req, d.Targets[0])
	h.put(req, dec)
	if ok {
		return []string{h.prefill}
	}
	results[h.prefill] = nil
	return nil
}

func (h *Disagg) pickPrefillFirst(c *epp.Cycle, req *epp.Request, profiles []*epp.Profile, results map[string]*epp.ProfileResult) []string {
	if _, ran := results[h.decode]; ran {
		return nil
	}
	if hasProfile(profiles, h.prefill) {
		if _, ran := results[h.prefill]; !ran {
			return []string{h.prefill}
		}
	}
	if hasProfile(profiles, h.encode) {
		if _, ran := results[h.encode]; !ran {
			if h.encodeDecider != nil {
				if ok, _ := h.encodeDecider.Decide(c, req, nil); ok {
					return []string{h.encode}
				}
			}
			results[h.encode] = nil
		}
	}
	if !hasProfile(profiles, h.decode) {
		return nil
	}
	return []string{h.decode}
}

// ProcessResults implements epp.ProfileHandler: decode is primary and must
// have a target; prefill and encode results join when non-nil. The
// decision records whether the request is disaggregated and why.
func (h *Disagg) ProcessResults(_ *epp.Cycle, req *epp.Request, results map[string]*epp.ProfileResult) (*epp.Result, error) {
	d := results[h.decode]
	if d == nil || len(d.Targets) == 0 {
		return nil, errors.New("failed to find available decode workers")
	}
	out := map[string]*epp.ProfileResult{h.decode: d}
	var dec epp.PDDecision
	if req != nil {
		if v, ok := req.Get(h.stateKey); ok {
			dec, _ = v.(epp.PDDecision)
		}
	}
	if h.prefillFirst {
		dec = epp.PDDecision{Reason: epp.PDReasonNoPrefillProfile}
		if _, ran := results[h.prefill]; ran {
			dec.Reason = epp.PDReasonNoPrefillEndpoint
		}
	}
	if p := results[h.prefill]; p != nil && len(p.Targets) > 0 {
		out[h.prefill] = p
		dec.Disaggregated = true
		dec.Reason = epp.PDReasonDisaggregated
	} else if dec.Reason == epp.PDReasonDisaggregated {
		// Approved, but the prefill profile found no endpoint: decode-only
		// (ebab687 completes such a request silently, A.2).
		dec.Reason = epp.PDReasonNoPrefillEndpoint
	}
	if e := results[h.encode]; h.encode != "" && e != nil {
		out[h.encode] = e
	}
	res := &epp.Result{PrimaryProfile: h.decode, Profiles: out}
	if h.Disaggregates() {
		// Without a prefill decider (and decode-first) nothing is ever
		// disaggregated: there is no decision to record.
		res.PD = &dec
	}
	return res, nil
}

// PreRequest implements epp.PreRequestHook (upstream Handler.PreRequest):
// any inbound x-prefiller-host-port is dropped, and set to the address of
// the prefill profile's first target when there is one; the encode
// targets' addresses go comma-joined into x-encoder-hosts-ports.
func (h *Disagg) PreRequest(_ *epp.Cycle, req *epp.Request, res *epp.Result) {
	if req == nil || res == nil {
		return
	}
	if req.Headers == nil {
		req.Headers = map[string]string{}
	}
	delete(req.Headers, PrefillHeader)
	if p := res.Profiles[h.prefill]; p != nil && len(p.Targets) > 0 && p.Targets[0] != nil && p.Targets[0].EndpointInfo != nil {
		req.Headers[PrefillHeader] = p.Targets[0].Address
	}
	if h.encode == "" {
		return
	}
	delete(req.Headers, EncodersHeader)
	if e := res.Profiles[h.encode]; e != nil {
		var addrs []string
		for _, t := range e.Targets {
			if t != nil && t.EndpointInfo != nil {
				addrs = append(addrs, t.Address)
			}
		}
		if len(addrs) > 0 {
			req.Headers[EncodersHeader] = strings.Join(addrs, ",")
		}
	}
}

var (
	_ epp.ProfileHandler = (*Disagg)(nil)
	_ epp.PreRequestHook = (*Disagg)(nil)
	_ epp.DataConsumer   = (*Disagg)(nil)
	_ epp.NotSimulated   = (*disaggNote)(nil)
)
