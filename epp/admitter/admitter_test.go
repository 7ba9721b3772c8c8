package admitter

import (
	"errors"
	"math"
	"testing"

	"github.com/eppsim/eppsim/epp"
)

// TestProbabilisticProbability checks p(s) = min(s^5·300, 1) at the values
// §13 lists, and the saturation at which it reaches 1: (1/300)^(1/5) =
// 0.31958.
func TestProbabilisticProbability(t *testing.T) {
	p, err := probabilisticFactory("pa", nil, epp.NewHandle(1))
	if err != nil {
		t.Fatal(err)
	}
	a := p.(*Probabilistic)
	for _, tc := range []struct{ s, p float64 }{
		{0, 0}, {0.10, 0.0030}, {0.15, 0.0228}, {0.20, 0.0960}, {0.25, 0.2930}, {0.30, 0.7290},
		{0.31958, 0.99997}, {0.31959, 1}, {0.5, 1}, {2, 1},
	} {
		if got := a.Probability(tc.s); math.Abs(got-tc.p) > 5e-5 {
			t.Errorf("p(%v) = %.5f, want %.4f", tc.s, got, tc.p)
		}
	}
}

// TestProbabilisticSaturation: s is the mean over the candidates of
// max(waiting/5, kv/0.8) with the admitter's defaults: (max(2/5, 0.2/0.8)
// + max(0/5, 0.4/0.8)) / 2 = (0.4 + 0.5)/2 = 0.45.
func TestProbabilisticSaturation(t *testing.T) {
	p, _ := probabilisticFactory("pa", nil, epp.NewHandle(1))
	a := p.(*Probabilistic)
	eps := []*epp.Endpoint{
		{Metrics: epp.Metrics{WaitingQueueSize: 2, KVCacheUsagePercent: 0.2}},
		{Metrics: epp.Metrics{WaitingQueueSize: 0, KVCacheUsagePercent: 0.4}},
	}
	if s := a.Saturation(eps); math.Abs(s-0.45) > 1e-12 {
		t.Fatalf("s = %v, want 0.45", s)
	}
}

// TestProbabilisticAdmit: priority ≥ 0 is always admitted without a draw;
// at s = 0.2 (p = 0.096) the share of sheddable requests denied is p, and
// the same seed denies the same requests.
func TestProbabilisticAdmit(t *testing.T) {
	eps := []*epp.Endpoint{{Metrics: epp.Metrics{WaitingQueueSize: 1}}} // s = 1/5
	denials := func(seed uint64, prio int) (n int, pattern []bool) {
		p, _ := probabilisticFactory("pa", nil, epp.NewHandle(seed))
		a := p.(*Probabilistic)
		for range 20000 {
			err := a.Admit(nil, &epp.Request{Priority: prio}, eps)
			if err != nil && !errors.Is(err, ErrDenied) {
				t.Fatal(err)
			}
			pattern = append(pattern, err != nil)
			if err != nil {
				n++
			}
		}
		return n, pattern
	}
	if n, _ := denials(1, 0); n != 0 {
		t.Errorf("priority 0 denied %d times", n)
	}
	n, p1 := denials(1, -1)
	if share := float64(n) / 20000; math.Abs(share-0.096) > 0.006 {
		t.Errorf("denied share %v, want 0.096", share)
	}
	_, p2 := denials(1, -1)
	for i := range p1 {
		if p1[i] != p2[i] {
			t.Fatal("same seed, different denials")
		}
	}
	for _, bad := range []string{`{"power":0}`, `{"k":-1}`, `{"queueDepthThreshold":0}`, `{"kvCacheUtilThreshold":-0.5}`, `{"x":1}`} {
		if _, err := probabilisticFactory("pa", []byte(bad), nil); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

// TestLatencySLOAdmit: only sheddable requests with an SLO header > 0 can
// be denied, and only when some candidate has a prediction and none is
// valid, idle or cold.
func TestLatencySLOAdmit(t *testing.T) {
	p, err := latencySLOFactory("ls", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := p.(*LatencySLO)
	busy := epp.Metrics{RunningRequestsSize: 3, KVCacheUsagePercent: 0.5}
	withPred := func(m epp.Metrics, valid bool) *epp.Endpoint {
		e := &epp.Endpoint{Metrics: m}
		e.Put(a.key, LatencyPrediction{TTFTValid: valid, TPOTValid: valid})
		return e
	}
	slo := map[string]string{epp.SLOTTFTHeader: "200"}
	for _, tc := range []struct {
		name  string
		prio  int
		hdr   map[string]string
		eps   []*epp.Endpoint
		admit bool
	}{
		{"priority 0", 0, slo, []*epp.Endpoint{withPred(busy, false)}, true},
		{"no SLO header", -1, nil, []*epp.Endpoint{withPred(busy, false)}, true},
		{"invalid SLO header", -1, map[string]string{epp.SLOTPOTHeaderAlias: "fast"}, []*epp.Endpoint{withPred(busy, false)}, true},
		{"no predictions (eppsim's case)", -1, slo, []*epp.Endpoint{{Metrics: busy}}, true},
		{"busy, invalid predictions", -1, slo, []*epp.Endpoint{withPred(busy, false)}, false},
		{"one valid", -1, slo, []*epp.Endpoint{withPred(busy, false), withPred(busy, true)}, true},
		{"one idle", -1, slo, []*epp.Endpoint{withPred(busy, false), withPred(epp.Metrics{KVCacheUsagePercent: 0.5}, false)}, true},
		{"one cold", -1, slo, []*epp.Endpoint{withPred(busy, false), withPred(epp.Metrics{RunningRequestsSize: 1, KVCacheUsagePercent: 0.01}, false)}, true},
	} {
		err := a.Admit(nil, &epp.Request{Priority: tc.prio, Headers: tc.hdr}, tc.eps)
		if (err == nil) != tc.admit {
			t.Errorf("%s: %v, want admit %v", tc.name, err, tc.admit)
		}
	}
}
