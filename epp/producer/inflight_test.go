package producer

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/epp"
)

func inflightWith(t *testing.T, params string) *InFlightLoad {
	t.Helper()
	var raw json.RawMessage
	if params != "" {
		raw = json.RawMessage(params)
	}
	p, err := inflightFactory("inflight-load-producer", raw, epp.NewHandle(0))
	if err != nil {
		t.Fatal(err)
	}
	return p.(*InFlightLoad)
}

var approxKey = epp.DataKey{Type: epp.PrefixCacheMatchInfoType, Producer: epp.ApproxPrefixProducer}

// inflightReq is a request with n pseudo-tokens and the given body.
func inflightReq(n int, body string) *epp.Request {
	return &epp.Request{ID: "r", Body: []byte(body), Tokenized: &epp.TokenizedRequest{Prompts: [][]uint32{make([]uint32, n)}}}
}

func uncachedOf(t *testing.T, f *InFlightLoad, e *epp.Endpoint) int {
	t.Helper()
	v, ok := e.Get(epp.DataKey{Type: epp.UncachedRequestTokensType, Producer: f.Name()})
	if !ok {
		t.Fatalf("no UncachedRequestTokens on %s", e.Name)
	}
	return v.(epp.UncachedRequestTokens).Tokens
}

func TestInFlightDiscount(t *testing.T) {
	f := inflightWith(t, "")
	eps := newEndpoints("a", "b", "c", "d")
	// a: 5 of 16 blocks of 64 matched: (16−5)·64 + max(0, 1000−1024) = 704.
	eps[0].Put(approxKey, epp.PrefixCacheMatchInfo{MatchBlocks: 5, TotalBlocks: 16, BlockSizeTokens: 64})
	// b: no match info → all 1000.
	// c: index capped at 10 blocks: (10−10)·64 + (1000−640) = 360.
	eps[2].Put(approxKey, epp.PrefixCacheMatchInfo{MatchBlocks: 10, TotalBlocks: 10, BlockSizeTokens: 64})
	// d: block size 0 → ignored → 1000.
	eps[3].Put(approxKey, epp.PrefixCacheMatchInfo{MatchBlocks: 3, TotalBlocks: 3})
	req := inflightReq(1000, `{}`)
	if err := f.Produce(&epp.Cycle{}, req, eps); err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{704, 1000, 360, 1000} {
		if got := uncachedOf(t, f, eps[i]); got != want {
			t.Errorf("%s uncached %d, want %d", eps[i].Name, got, want)
		}
		v, _ := eps[i].Get(epp.DataKey{Type: epp.InFlightLoadType, Producer: f.Name()})
		if v.(epp.InFlightLoad) != (epp.InFlightLoad{}) {
			t.Errorf("initial load %+v", v)
		}
	}
	// A custom prefix producer name reads that key instead.
	g := inflightWith(t, `{"prefixMatchInfoProducerName":"precise"}`)
	eps[1].Put(epp.DataKey{Type: epp.PrefixCacheMatchInfoType, Producer: "precise"}, epp.PrefixCacheMatchInfo{MatchBlocks: 1, TotalBlocks: 2, BlockSizeTokens: 500})
	_ = g.Produce(&epp.Cycle{}, req, eps)
	if got := uncachedOf(t, g, eps[1]); got != 500 {
		t.Errorf("precise discount %d", got)
	}
	if got := uncachedOf(t, g, eps[0]); got != 1000 {
		t.Errorf("approx info read by precise-configured producer: %d", got)
	}
	if deps := g.Consumes(); deps[1].Key.String() != "PrefixCacheMatchInfoDataKey/precise" || deps[1].Required || !deps[0].Required {
		t.Errorf("consumes %+v", deps)
	}
}

func TestInFlightLifecycle(t *testing.T) {
	c := &epp.Cycle{}
	f := inflightWith(t, "")
	eps := newEndpoints("dec", "pre")
	eps[0].Put(approxKey, epp.PrefixCacheMatchInfo{MatchBlocks: 5, TotalBlocks: 16, BlockSizeTokens: 64})
	req := inflightReq(1000, `{}`)
	_ = f.Produce(c, req, eps)
	res := &epp.Result{PrimaryProfile: "decode", Profiles: map[string]*epp.ProfileResult{
		"decode": {Targets: []*epp.Endpoint{eps[0], eps[1]}}, "prefill": {Targets: []*epp.Endpoint{eps[1]}},
	}}
	f.PreRequest(c, req, res)
	if got := f.Load("dec"); got != (epp.InFlightLoad{Requests: 1, Tokens: 704}) {
		t.Errorf("dec after PreRequest %+v", got)
	}
	if got := f.Load("pre"); got != (epp.InFlightLoad{Requests: 1, Tokens: 1000}) {
		t.Errorf("pre after PreRequest %+v", got)
	}
	// A second request on dec, no discount info.
	req2 := inflightReq(100, `{}`)
	f.PreRequest(c, req2, resultFor(newEndpoints("dec")[0]))
	if got := f.Load("dec"); got != (epp.InFlightLoad{Requests: 2, Tokens: 804}) {
		t.Errorf("dec with two %+v", got)
	}
	// First chunk: all prompt tokens freed; the prefill entry fully released.
	f.ResponseFirstChunk(c, req, res)
	if got := f.Load("dec"); got != (epp.InFlightLoad{Requests: 2, Tokens: 100}) {
		t.Errorf("dec after first chunk %+v", got)
	}
	if got := f.Load("pre"); got != (epp.InFlightLoad{}) {
		t.Errorf("pre after first chunk %+v", got)
	}
	f.ResponseFirstChunk(c, req, res) // idempotent
	f.ResponseComplete(c, req, res)
	if got := f.Load("dec"); got != (epp.InFlightLoad{Requests: 1, Tokens: 100}) {
		t.Errorf("dec after complete %+v", got)
	}
	f.ResponseComplete(c, req, res) // releasing twice never goes below
	// A non-streamed response: first chunk and end together.
	f.ResponseFirstChunk(c, req2, nil)
	f.ResponseComplete(c, req2, nil)
	if got := f.Load("dec"); got != (epp.InFlightLoad{}) {
		t.Errorf("dec at rest %+v", got)
	}
	// A deleted endpoint's in-flight requests release onto the old counter.
	req3 := inflightReq(50, `{}`)
	f.PreRequest(c, req3, resultFor(newEndpoints("gone")[0]))
	f.RemoveEndpoint("gone")
	req4 := inflightReq(7, `{}`)
	f.PreRequest(c, req4, resultFor(newEndpoints("gone")[0]))
	f.ResponseComplete(c, req3, nil)
	if got := f.Load("gone"); got != (epp.InFlightLoad{Requests: 1, Tokens: 7}) {
		t.Errorf("recreated endpoint %+v", got)
	}
}

func TestInFlightEstimatedOutput(t *testing.T) {
	c := &epp.Cycle{}
	for _, tc := range []struct {
		params, body string
		want         int64 // tokens held on dec after PreRequest
		path         string
	}{
		{`{"addEstimatedOutputTokens":true}`, `{}`, 704 + 1500, ""},
		{`{"addEstimatedOutputTokens":true,"outputRatio":0.25}`, `{}`, 704 + 250, ""},
		{`{"addEstimatedOutputTokens":true}`, `{"max_tokens":200}`, 704 + 200, ""},
		{`{"addEstimatedOutputTokens":true}`, `{"max_completion_tokens":300,"max_tokens":200}`, 704 + 300, ""},
		{`{"addEstimatedOutputTokens":true}`, `{"max_tokens":0}`, 704 + 1500, ""},
		{`{"addEstimatedOutputTokens":true,"maxEstimatedOutputTokens":100}`, `{"max_tokens":200}`, 704 + 100, ""},
		{`{"addEstimatedOutputTokens":true,"maxEstimatedOutputTokens":0}`, `{}`, 704, ""},
		// vLLM's /inference/v1/generate: vllmhttp-parser reads
		// sampling_params.max_tokens, 0 included; a fractional or negative
		// one, or a top-level max_tokens, is no cap.
		{`{"addEstimatedOutputTokens":true}`, `{"token_ids":[1],"sampling_params":{"max_tokens":200}}`, 704 + 200, "/inference/v1/generate"},
		{`{"addEstimatedOutputTokens":true}`, `{"token_ids":[1],"sampling_params":{"max_tokens":0}}`, 704, "/inference/v1/generate"},
		{`{"addEstimatedOutputTokens":true}`, `{"token_ids":[1],"sampling_params":{"max_tokens":2.5}}`, 704 + 1500, "/inference/v1/generate"},
		{`{"addEstimatedOutputTokens":true}`, `{"token_ids":[1],"sampling_params":{"max_tokens":-3}}`, 704 + 1500, "/inference/v1/generate"},
		{`{"addEstimatedOutputTokens":true}`, `{"token_ids":[1],"max_tokens":200}`, 704 + 1500, "/inference/v1/generate"},
	} {
		f := inflightWith(t, tc.params)
		eps := newEndpoints("dec", "pre")
		eps[0].Put(approxKey, epp.PrefixCacheMatchInfo{MatchBlocks: 5, TotalBlocks: 16, BlockSizeTokens: 64})
		req := inflightReq(1000, tc.body)
		req.Path = tc.path
		_ = f.Produce(c, req, eps)
		if got := int64(uncachedOf(t, f, eps[0])); got != tc.want {
			t.Errorf("%s %s: uncached %d, want %d", tc.params, tc.body, got, tc.want)
		}
		res := &epp.Result{PrimaryProfile: "decode", Profiles: map[string]*epp.ProfileResult{
			"decode": {Targets: eps[:1]}, "prefill": {Targets: eps[1:]},
		}}
		f.PreRequest(c, req, res)
		if got := int64(f.Load("dec").Tokens); got != tc.want {
			t.Errorf("%s %s: held %d, want %d", tc.params, tc.body, got, tc.want)
		}
		// With output tokens, the first chunk releases only the prefill entry.
		f.ResponseFirstChunk(c, req, res)
		if got := f.Load("dec"); int64(got.Tokens) != tc.want || got.Requests != 1 || f.Load("pre") != (epp.InFlightLoad{}) {
			t.Errorf("%s: after first chunk dec %+v pre %+v", tc.params, got, f.Load("pre"))
		}
		f.ResponseComplete(c, req, res)
		if got := f.Load("dec"); got != (epp.InFlightLoad{}) {
			t.Errorf("%s: after complete %+v", tc.params, got)
		}
	}
	for _, bad := range []string{`{"outputRatio":-1}`, `{"maxEstimatedOutputTokens":-5}`, `{"bogus":true}`} {
		if _, err := inflightFactory("x", json.RawMessage(bad), epp.NewHandle(0)); err == nil || !strings.Contains(err.Error(), "x") {
			t.Errorf("%s: err %v", bad, err)
		}
	}
}
