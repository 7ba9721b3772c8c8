package producer

import (
	"strings"
	"testing"

	"github.com/eppsim/eppsim/epp"
)

func mmReq(fromServer bool, hashes ...string) *epp.Request {
	tr := &epp.TokenizedRequest{Prompts: [][]uint32{{1, 2, 3}}, FromServer: fromServer}
	for _, h := range hashes {
		tr.MultiModal = append(tr.MultiModal, epp.MultiModalFeature{Modality: "image", Hash: h, Count: 4})
	}
	return &epp.Request{Tokenized: tr}
}

// TestMMEmbeddingsProducer: per-endpoint LRUs of ⌊MB/2⌋ entries. A request
// with items {x, y} finds nothing; after it is routed to ns/a, a request
// with {x, z, x} finds 1 of its 2 distinct items on ns/a and 0 on ns/b; a
// 2-entry LRU (4 MB) evicts the least recent; Contains does not refresh.
func TestMMEmbeddingsProducer(t *testing.T) {
	m := NewMMEmbeddings("mm", MMEmbeddingsParams{CacheSizeInMBPerServer: 4})
	if m.Capacity() != 2 || NewMMEmbeddings("d", MMEmbeddingsParams{}).Capacity() != 2048 || NewMMEmbeddings("one", MMEmbeddingsParams{CacheSizeInMBPerServer: 1}).Capacity() != 1 {
		t.Fatalf("capacities %d", m.Capacity())
	}
	eps := burstPods("ns/a", "ns/b")
	info := func(e *epp.Endpoint) (epp.EncoderCacheMatchInfo, bool) {
		return epp.Attr[epp.EncoderCacheMatchInfo](e, m.key)
	}
	route := func(r *epp.Request, to *epp.Endpoint) {
		m.PreRequest(nil, r, &epp.Result{PrimaryProfile: "default", Profiles: map[string]*epp.ProfileResult{"default": {Targets: []*epp.Endpoint{to}}}})
	}
	r1 := mmReq(true, "x", "y")
	if err := m.Produce(nil, r1, eps); err != nil {
		t.Fatal(err)
	}
	if got, _ := info(eps[0]); got != (epp.EncoderCacheMatchInfo{Matched: 0, Total: 2}) {
		t.Errorf("first request on ns/a: %+v", got)
	}
	route(r1, eps[0])
	eps = burstPods("ns/a", "ns/b")
	r2 := mmReq(true, "x", "z", "x")
	_ = m.Produce(nil, r2, eps)
	if a, _ := info(eps[0]); a != (epp.EncoderCacheMatchInfo{Matched: 1, Total: 2}) {
		t.Errorf("ns/a %+v", a)
	}
	if b, _ := info(eps[1]); b != (epp.EncoderCacheMatchInfo{Matched: 0, Total: 2}) {
		t.Errorf("ns/b %+v", b)
	}
	// ns/a holds x, y (x least recent). Routing {x, z} there refreshes x
	// and evicts y.
	route(r2, eps[0])
	eps = burstPods("ns/a")
	_ = m.Produce(nil, mmReq(true, "y", "x", "z"), eps)
	if a, _ := info(eps[0]); a != (epp.EncoderCacheMatchInfo{Matched: 2, Total: 3}) {
		t.Errorf("after eviction %+v", a)
	}
	// No items (text only, or the estimate backend's placeholders): nothing
	// written.
	for _, r := range []*epp.Request{mmReq(true), mmReq(false, "x"), {}} {
		eps = burstPods("ns/a")
		_ = m.Produce(nil, r, eps)
		if _, ok := info(eps[0]); ok {
			t.Errorf("match info for a request without server items")
		}
	}
}

// TestMMEmbeddingsStrictParams: the shipped config's cacheSizeInMB is not a
// parameter (cacheSizeInMBPerServer is), so decoding fails, naming it.
func TestMMEmbeddingsStrictParams(t *testing.T) {
	_, err := mmEmbeddingsFactory("mm", []byte(`{"cacheSizeInMB":2048}`), nil)
	if err == nil || !strings.Contains(err.Error(), `unknown field "cacheSizeInMB"`) {
		t.Fatalf("error %v", err)
	}
	if _, err := mmEmbeddingsFactory("mm", []byte(`{"cacheSizeInMBPerServer":2048}`), nil); err != nil {
		t.Fatal(err)
	}
}
