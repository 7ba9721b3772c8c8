package producer

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/eppsim/eppsim/epp"
)

func TestSessionID(t *testing.T) {
	p, err := sessionFactory("session-id-producer", nil, epp.NewHandle(0))
	if err != nil {
		t.Fatal(err)
	}
	s := p.(*SessionID)
	idKey := epp.DataKey{Type: epp.SessionIDType, Producer: "session-id-producer"}
	boundKey := epp.DataKey{Type: BoundEndpointType, Producer: "session-id-producer"}
	c := &epp.Cycle{Now: int64(time.Second)}
	req := &epp.Request{Headers: map[string]string{"x-session-id": " abc "}}
	_ = s.Produce(c, req, nil)
	if v, _ := req.Get(idKey); v != "abc" {
		t.Errorf("session id %v", v)
	}
	if _, ok := req.Get(boundKey); ok {
		t.Error("bound before any routing")
	}
	ep := newEndpoints("default/p0")[0]
	s.PreRequest(c, req, resultFor(ep))
	req2 := &epp.Request{Headers: map[string]string{"x-session-id": "abc"}}
	_ = s.Produce(&epp.Cycle{Now: int64(time.Second + 29*time.Minute)}, req2, nil)
	if v, _ := req2.Get(boundKey); v != ep.Address {
		t.Errorf("bound endpoint %v", v)
	}
	req3 := &epp.Request{Headers: map[string]string{"x-session-id": "abc"}}
	_ = s.Produce(&epp.Cycle{Now: int64(time.Second + 30*time.Minute)}, req3, nil)
	if _, ok := req3.Get(boundKey); ok {
		t.Error("binding outlived its TTL")
	}
	// No header: nothing.
	req4 := &epp.Request{}
	_ = s.Produce(c, req4, nil)
	if _, ok := req4.Get(idKey); ok {
		t.Error("id without header")
	}

	// Cookie source; header/cookie exclusive; strict params.
	p, err = sessionFactory("s", json.RawMessage(`{"cookieName":"sid","ttl":"1m","lruSize":2}`), epp.NewHandle(0))
	if err != nil {
		t.Fatal(err)
	}
	req5 := &epp.Request{Headers: map[string]string{"cookie": "a=1; sid=xyz; b=2"}}
	_ = p.(*SessionID).Produce(c, req5, nil)
	if v, _ := req5.Get(epp.DataKey{Type: epp.SessionIDType, Producer: "s"}); v != "xyz" {
		t.Errorf("cookie id %v", v)
	}
	for _, bad := range []string{`{"headerName":"a","cookieName":"b"}`, `{"ttl":"0s"}`, `{"ttl":"x"}`, `{"lruSize":-1}`, `{"header":"x"}`} {
		if _, err := sessionFactory("s", json.RawMessage(bad), epp.NewHandle(0)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}
