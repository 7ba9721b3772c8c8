package scorer

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/eppsim/eppsim/epp"
)

// Session-affinity strategies (spec §4.3).
const (
	// StrategyEncodedEndpointHeader: the client echoes a header holding the
	// base64 of the chosen endpoint's "namespace/name". Stateless. Default.
	StrategyEncodedEndpointHeader = "encoded_endpoint_header"
	// StrategySessionID: a server-side binding from a client session id to
	// the endpoint that served it, TTL-evicted.
	StrategySessionID = "session_id"
)

// Session-affinity defaults (spec §4.3).
const (
	DefaultSessionTokenHeader   = "x-session-token"
	DefaultSessionIDHeader      = "x-session-id"
	DefaultEvictionTTLSeconds   = 300
	DefaultEvictionSweepSeconds = 10
)

// SessionAffinityParams are the parameters of session-affinity-scorer and
// session-affinity-filter (spec §4.3).
type SessionAffinityParams struct {
	// Strategy is encoded_endpoint_header (default) or session_id.
	Strategy                    string                      `json:"strategy"`
	EncodedEndpointHeaderConfig EncodedEndpointHeaderConfig `json:"encodedEndpointHeaderConfig"`
	SessionIDConfig             SessionIDConfig             `json:"sessionIdConfig"`
	// ProfileName selects which profile's pick this instance pins; empty
	// means the primary (decode) profile.
	ProfileName string `json:"profileName"`
}

// EncodedEndpointHeaderConfig configures encoded_endpoint_header.
type EncodedEndpointHeaderConfig struct {
	// HeaderName carries the token in requests and responses (default
	// x-session-token; matched lower-cased).
	HeaderName string `json:"headerName"`
}

// SessionIDConfig configures session_id.
type SessionIDConfig struct {
	// Sources resolve the session id in order; the first non-empty wins.
	// Default: the header x-session-id.
	Sources []SessionIDSource `json:"sources"`
	// EvictionTTLSeconds: a binding unused for longer is deleted by the
	// sweep (default 300).
	EvictionTTLSeconds float64 `json:"evictionTtlSeconds"`
	// EvictionSweepSeconds: sweep period (default 10).
	EvictionSweepSeconds float64 `json:"evictionSweepSeconds"`
}

// SessionIDSource names one place a session id is read from; exactly one of
// Header and Attribute is set.
//
// Attribute names a request attribute (Request.Get). In eppsim request
// attributes are keyed by DataKey, so "Type/Producer" names DataKey{Type,
// Producer} and a bare "Type" names DataKey{Type, "session-id-producer"};
// "SessionID" therefore reads what session-id-producer publishes.
type SessionIDSource struct {
	Header    string `json:"header"`
	Attribute string `json:"attribute"`
}

// sessionCore is the logic the scorer and the filter share
// (scheduling/util/sessionaffinity upstream).
type sessionCore struct {
	strategy string
	header   string // encoded_endpoint_header
	profile  string
	sources  []sessionSource // session_id
	ttl      int64           // ns
	sweep    int64           // ns
	// bindings maps session id → binding (session_id only).
	bindings  map[string]*binding
	lastSweep int64 // time of the last sweep tick applied
	// presenceKey carries, from Score/Filter to PreRequest, whether the
	// session's bound endpoint was among this request's candidates.
	presenceKey epp.DataKey
}

type sessionSource struct {
	header string
	key    epp.DataKey
	isAttr bool
}

type binding struct {
	endpoint string
	lastSeen int64
}

func newSessionCore(typ, name string, p SessionAffinityParams) (*sessionCore, error) {
	if p.Strategy == "" {
		p.Strategy = StrategyEncodedEndpointHeader
	}
	c := &sessionCore{
		strategy:    p.Strategy,
		profile:     p.ProfileName,
		presenceKey: epp.DataKey{Type: "session-affinity.bound-present", Producer: name},
	}
	switch p.Strategy {
	case StrategyEncodedEndpointHeader:
		c.header = normalizeHeader(p.EncodedEndpointHeaderConfig.HeaderName, DefaultSessionTokenHeader)
	case StrategySessionID:
		cfg := p.SessionIDConfig
		if len(cfg.Sources) == 0 {
			cfg.Sources = []SessionIDSource{{Header: DefaultSessionIDHeader}}
		}
		if cfg.EvictionTTLSeconds == 0 {
			cfg.EvictionTTLSeconds = DefaultEvictionTTLSeconds
		}
		if cfg.EvictionSweepSeconds == 0 {
			cfg.EvictionSweepSeconds = DefaultEvictionSweepSeconds
		}
		for i, s := range cfg.Sources {
			if (s.Header == "") == (s.Attribute == "") {
				return nil, fmt.Errorf("plugin %q (type %s): sessionIdConfig.sources[%d]: exactly one of header or attribute must be set", name, typ, i)
			}
			if s.Header != "" {
				c.sources = append(c.sources, sessionSource{header: normalizeHeader(s.Header, DefaultSessionIDHeader)})
				continue
			}
			c.sources = append(c.sources, sessionSource{key: attributeKey(s.Attribute), isAttr: true})
		}
		if !(cfg.EvictionTTLSeconds > 0) {
			return nil, fmt.Errorf("plugin %q (type %s): sessionIdConfig.evictionTtlSeconds must be > 0, got %v", name, typ, cfg.EvictionTTLSeconds)
		}
		if !(cfg.EvictionSweepSeconds > 0) {
			return nil, fmt.Errorf("plugin %q (type %s): sessionIdConfig.evictionSweepSeconds must be > 0, got %v", name, typ, cfg.EvictionSweepSeconds)
		}
		c.ttl = int64(cfg.EvictionTTLSeconds * float64(time.Second))
		c.sweep = max(int64(cfg.EvictionSweepSeconds*float64(time.Second)), 1)
		c.bindings = map[string]*binding{}
	default:
		return nil, fmt.Errorf("plugin %q (type %s): strategy must be %q or %q, got %q", name, typ, StrategyEncodedEndpointHeader, StrategySessionID, p.Strategy)
	}
	return c, nil
}

func normalizeHeader(h, def string) string {
	h = strings.ToLower(strings.TrimSpace(h))
	if h == "" {
		return def
	}
	return h
}

func attributeKey(a string) epp.DataKey {
	if t, p, ok := strings.Cut(a, "/"); ok {
		return epp.DataKey{Type: t, Producer: p}
	}
	return epp.DataKey{Type: a, Producer: epp.SessionIDProducer}
}

func (c *sessionCore) consumes() []epp.Dependency {
	var deps []epp.Dependency
	for _, s := range c.sources {
		if s.isAttr {
			// Only the SessionID key has a registered default producer;
			// other attributes are read if some configured plugin
			// publishes them.
			deps = append(deps, epp.Dependency{Key: s.key, Required: s.key.Type == epp.SessionIDType})
		}
	}
	return deps
}

// sessionID resolves the request's session id from the configured sources.
func (c *sessionCore) sessionID(req *epp.Request) string {
	if req == nil {
		return ""
	}
	for _, s := range c.sources {
		var id string
		if !s.isAttr {
			id = req.Headers[s.header]
		} else if v, ok := req.Get(s.key); ok && v != nil {
			if rv := reflect.ValueOf(v); rv.Kind() == reflect.String {
				id = rv.String()
			}
		}
		if id = strings.TrimSpace(id); id != "" {
			return id
		}
	}
	return ""
}

// pinned returns the index in eps of the session's endpoint, or -1.
func (c *sessionCore) pinned(cy *epp.Cycle, req *epp.Request, eps []*epp.Endpoint) int {
	if req == nil {
		return -1
	}
	var want string
	switch c.strategy {
	case StrategyEncodedEndpointHeader:
		tok := req.Headers[c.header]
		if tok == "" {
			return -1
		}
		b, err := base64.StdEncoding.DecodeString(tok)
		if err != nil {
			return -1
		}
		want = string(b)
	case StrategySessionID:
		c.sweepTo(now(cy))
		id := c.sessionID(req)
		if id == "" {
			return -1
		}
		b := c.bindings[id]
		if b == nil {
			return -1
		}
		want = b.endpoint
		idx := indexOf(eps, want)
		req.Put(c.presenceKey, idx >= 0)
		return idx
	}
	return indexOf(eps, want)
}

func indexOf(eps []*epp.Endpoint, name string) int {
	for i, e := range eps {
		if e.Name == name {
			return i
		}
	}
	return -1
}

func now(c *epp.Cycle) int64 {
	if c == nil {
		return 0
	}
	return c.Now
}

// sweepTo applies the periodic eviction sweep (every sweep interval from
// time 0, as upstream's ticker from plugin start) up to time t: bindings
// unused for more than the TTL at the latest tick ≤ t are deleted. Running
// only the latest pending tick is equivalent to running every tick, because
// lastSeen does not change between calls.
func (c *sessionCore) sweepTo(t int64) {
	if t < 0 {
		return
	}
	tick := t - t%c.sweep
	if tick <= c.lastSweep {
		return
	}
	c.lastSweep = tick
	for id, b := range c.bindings {
		if tick-b.lastSeen > c.ttl {
			delete(c.bindings, id)
		}
	}
}

// preRequest binds a first-seen session to the routed endpoint, refreshes
// lastSeen when it stayed, and migrates the binding only when the bound
// endpoint was absent from this request's candidates (spec §4.3).
func (c *sessionCore) preRequest(cy *epp.Cycle, req *epp.Request, res *epp.Result) {
	if c.strategy != StrategySessionID || req == nil {
		return
	}
	t := now(cy)
	c.sweepTo(t)
	id := c.sessionID(req)
	if id == "" {
		return
	}
	target := profileTarget(res, c.profile)
	if target == nil {
		return
	}
	b := c.bindings[id]
	switch {
	case b == nil:
		c.bindings[id] = &binding{endpoint: target.Name, lastSeen: t}
	case b.endpoint == target.Name:
		b.lastSeen = t
	default:
		// Migrate only on an absence recorded by this request's own
		// Score/Filter call; a missing record never forces a migration.
		if v, ok := req.Get(c.presenceKey); ok {
			if present, isBool := v.(bool); isBool && !present {
				b.endpoint, b.lastSeen = target.Name, t
			}
		}
	}
}

// responseHeader returns the header an encoded_endpoint_header instance
// writes on the response: base64 of the pinned profile's target (or the
// primary target).
func (c *sessionCore) responseHeader(res *epp.Result) (name, value string, ok bool) {
	if c.strategy != StrategyEncodedEndpointHeader {
		return "", "", false
	}
	t := profileTarget(res, c.profile)
	if t == nil {
		return "", "", false
	}
	return c.header, base64.StdEncoding.EncodeToString([]byte(t.Name)), true
}

// Binding returns the endpoint bound to a session id (session_id only).
func (c *sessionCore) binding(id string) (string, bool) {
	b := c.bindings[id]
	if b == nil {
		return "", false
	}
	return b.endpoint, true
}

// SessionAffinity is session-affinity-scorer (spec §4.3): 1.0 for the
// session's endpoint when it is a candidate, 0 for every other endpoint.
//
// encoded_endpoint_header is stateless: eppsim has no HTTP responses, so the
// simulator obtains the header a response would carry from ResponseHeader and
// sets it on the session's next request. session_id keeps its bindings in
// simulated time (Cycle.Now): the sweep runs every evictionSweepSeconds from
// time 0, and PreRequest binds or refreshes.
type SessionAffinity struct {
	epp.TypedName
	core *sessionCore
}

// SessionAffinityFilter is session-affinity-filter (spec §4.3, §9): only the
// session's endpoint when it is a candidate, otherwise all candidates.
type SessionAffinityFilter struct {
	epp.TypedName
	core *sessionCore
}

func sessionAffinityFactory(typ string) epp.Factory {
	return func(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
		var p SessionAffinityParams
		if err := epp.DecodeParams(typ, name, params, &p); err != nil {
			return nil, err
		}
		if typ == SessionAffinityFilterType {
			return NewSessionAffinityFilter(name, p)
		}
		return NewSessionAffinity(name, p)
	}
}

// NewSessionAffinity returns a session-affinity-scorer.
func NewSessionAffinity(name string, p SessionAffinityParams) (*SessionAffinity, error) {
	c, err := newSessionCore(SessionAffinityType, name, p)
	if err != nil {
		return nil, err
	}
	return &SessionAffinity{TypedName: epp.TypedName{PluginType: SessionAffinityType, PluginName: name}, core: c}, nil
}

// NewSessionAffinityFilter returns a session-affinity-filter.
func NewSessionAffinityFilter(name string, p SessionAffinityParams) (*SessionAffinityFilter, error) {
	c, err := newSessionCore(SessionAffinityFilterType, name, p)
	if err != nil {
		return nil, err
	}
	return &SessionAffinityFilter{TypedName: epp.TypedName{PluginType: SessionAffinityFilterType, PluginName: name}, core: c}, nil
}

// Score implements epp.Scorer.
func (s *SessionAffinity) Score(c *epp.Cycle, req *epp.Request, eps []*epp.Endpoint, scores []float64) {
	if i := s.core.pinned(c, req, eps); i >= 0 {
		scores[i] = 1.0
	}
}

// Filter implements epp.Filter.
func (f *SessionAffinityFilter) Filter(c *epp.Cycle, req *epp.Request, eps []*epp.Endpoint) []*epp.Endpoint {
	if i := f.core.pinned(c, req, eps); i >= 0 {
		return eps[i : i+1 : i+1]
	}
	return eps
}

// PreRequest implements epp.PreRequestHook.
func (s *SessionAffinity) PreRequest(c *epp.Cycle, req *epp.Request, res *epp.Result) {
	s.core.preRequest(c, req, res)
}

// PreRequest implements epp.PreRequestHook.
func (f *SessionAffinityFilter) PreRequest(c *epp.Cycle, req *epp.Request, res *epp.Result) {
	f.core.preRequest(c, req, res)
}

// Consumes implements epp.DataConsumer (attribute sources of session_id).
func (s *SessionAffinity) Consumes() []epp.Dependency { return s.core.consumes() }

// Consumes implements epp.DataConsumer (attribute sources of session_id).
func (f *SessionAffinityFilter) Consumes() []epp.Dependency { return f.core.consumes() }

// ResponseHeader returns the response header an encoded_endpoint_header
// instance would write for res (ok is false for session_id, whose client owns
// its id, or when the pinned profile has no target).
func (s *SessionAffinity) ResponseHeader(res *epp.Result) (name, value string, ok bool) {
	return s.core.responseHeader(res)
}

// ResponseHeader is SessionAffinity.ResponseHeader for the filter.
func (f *SessionAffinityFilter) ResponseHeader(res *epp.Result) (name, value string, ok bool) {
	return f.core.responseHeader(res)
}

// Binding returns the endpoint a session id is bound to (session_id).
func (s *SessionAffinity) Binding(id string) (string, bool) { return s.core.binding(id) }

// Binding returns the endpoint a session id is bound to (session_id).
func (f *SessionAffinityFilter) Binding(id string) (string, bool) { return f.core.binding(id) }

// EncodeSessionToken returns the encoded_endpoint_header token for an
// endpoint name: base64 of "namespace/name".
func EncodeSessionToken(endpoint string) string {
	return base64.StdEncoding.EncodeToString([]byte(endpoint))
}
