package producer

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/eppsim/eppsim/epp"
)

// Session-id producer defaults.
const (
	DefaultSessionHeader  = "x-session-id"
	DefaultSessionLRUSize = 1024
	DefaultSessionTTL     = 30 * time.Minute
	// BoundEndpointType is the data type of the session's bound endpoint
	// ("ip:port"), a request attribute written next to SessionID.
	BoundEndpointType = "BoundEndpoint"
)

// SessionIDParams are the session-id-producer parameters. At most one of
// headerName and cookieName may be set; with neither (as when the producer
// is auto-created for a consumer, spec §1.3 step 6) the id is read from the
// x-session-id header. lruSize (default 1024) and ttl (Go duration, default
// 30m) bound the session → endpoint bindings.
type SessionIDParams struct {
	HeaderName string `json:"headerName,omitempty"`
	CookieName string `json:"cookieName,omitempty"`
	LRUSize    int    `json:"lruSize,omitempty"`
	TTL        string `json:"ttl,omitempty"`
}

// SessionID is the session-id-producer: it reads the session id into the
// request attribute SessionID/<name> (a string) and, when the session was
// routed before within the TTL, the bound endpoint's address into
// BoundEndpoint/<name>. PreRequest binds the session to the primary target.
type SessionID struct {
	epp.TypedName
	header   string
	cookie   string
	ttl      int64
	idKey    epp.DataKey
	boundKey epp.DataKey
	bindings *simplelru.LRU[string, sessionBinding]
}

type sessionBinding struct {
	address string
	expiry  int64
}

// NewSessionID validates p and returns the producer.
func NewSessionID(name string, p SessionIDParams) (*SessionID, error) {
	header := strings.ToLower(strings.TrimSpace(p.HeaderName))
	cookie := strings.TrimSpace(p.CookieName)
	if header != "" && cookie != "" {
		return nil, errors.New("at most one of headerName or cookieName may be set")
	}
	if header == "" && cookie == "" {
		header = DefaultSessionHeader
	}
	size := DefaultSessionLRUSize
	if p.LRUSize < 0 {
		return nil, fmt.Errorf("lruSize must be > 0, got %d", p.LRUSize)
	} else if p.LRUSize > 0 {
		size = p.LRUSize
	}
	ttl := DefaultSessionTTL
	if p.TTL != "" {
		d, err := time.ParseDuration(p.TTL)
		if err != nil {
			return nil, fmt.Errorf("invalid ttl %q: %w", p.TTL, err)
		}
		if d <= 0 {
			return nil, fmt.Errorf("ttl must be > 0, got %s", d)
		}
		ttl = d
	}
	l, err := simplelru.NewLRU[string, sessionBinding](size, nil)
	if err != nil {
		return nil, fmt.Errorf("session bindings: %w", err)
	}
	return &SessionID{
		TypedName: epp.TypedName{PluginType: SessionIDType, PluginName: name},
		header:    header,
		cookie:    cookie,
		ttl:       int64(ttl),
		idKey:     epp.DataKey{Type: epp.SessionIDType, Producer: name},
		boundKey:  epp.DataKey{Type: BoundEndpointType, Producer: name},
		bindings:  l,
	}, nil
}

func sessionFactory(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
	var p SessionIDParams
	if err := epp.DecodeParams(SessionIDType, name, params, &p); err != nil {
		return nil, err
	}
	s, err := NewSessionID(name, p)
	if err != nil {
		return nil, fmt.Errorf("plugin %q (type %s): %w", name, SessionIDType, err)
	}
	return s, nil
}

// Produces is SessionID/<name> and BoundEndpoint/<name>.
func (s *SessionID) Produces() []epp.DataKey { return []epp.DataKey{s.idKey, s.boundKey} }

// ID extracts the session id of a request ("" if none).
func (s *SessionID) ID(req *epp.Request) string {
	if req == nil || req.Headers == nil {
		return ""
	}
	if s.header != "" {
		return strings.TrimSpace(req.Headers[s.header])
	}
	return strings.TrimSpace(cookieValue(req.Headers["cookie"], s.cookie))
}

func cookieValue(header, name string) string {
	if header == "" || name == "" {
		return ""
	}
	for pair := range strings.SplitSeq(header, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if ok && k == name {
			return v
		}
	}
	return ""
}

// Produce publishes the session id and any live binding.
func (s *SessionID) Produce(c *epp.Cycle, req *epp.Request, _ []*epp.Endpoint) error {
	id := s.ID(req)
	if id == "" {
		return nil
	}
	req.Put(s.idKey, id)
	if b, ok := s.bindings.Get(id); ok {
		if now(c) < b.expiry {
			req.Put(s.boundKey, b.address)
		} else {
			s.bindings.Remove(id)
		}
	}
	return nil
}

// PreRequest binds the session to the primary target's address, refreshing
// the TTL.
func (s *SessionID) PreRequest(c *epp.Cycle, req *epp.Request, res *epp.Result) {
	id := s.ID(req)
	if id == "" {
		return
	}
	t := res.Target()
	if t == nil || t.EndpointInfo == nil || t.Address == "" {
		return
	}
	s.bindings.Add(id, sessionBinding{address: t.Address, expiry: now(c) + s.ttl})
}

func now(c *epp.Cycle) int64 {
	if c == nil {
		return 0
	}
	return c.Now
}
