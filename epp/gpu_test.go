package epp

import "testing"

// TestGPUPollEvery: a dcgm-data-source's interval in metrics scrapes,
// rounded to the nearest multiple (a half rounds up), at least one.
func TestGPUPollEvery(t *testing.T) {
	const ms = int64(1e6)
	for _, c := range []struct {
		interval, scrape int64
		want             int
	}{
		{1000 * ms, 50 * ms, 20},
		{0, 50 * ms, 1},        // no interval: every scrape
		{20 * ms, 50 * ms, 1},  // 0.4 scrapes rounds to 0: at least 1
		{25 * ms, 50 * ms, 1},  // 0.5 rounds up to 1
		{70 * ms, 50 * ms, 1},  // 1.4 → 1
		{75 * ms, 50 * ms, 2},  // 1.5 → 2
		{124 * ms, 50 * ms, 2}, // 2.48 → 2
		{125 * ms, 50 * ms, 3}, // 2.5 → 3: every 150 ms
		{1000 * ms, 300 * ms, 3},
		{1050 * ms, 300 * ms, 4}, // 3.5 → 4
		{4, 3, 1},                // 1.33 → 1
		{5, 3, 2},                // 1.67 → 2
	} {
		if got := GPUPollEvery(c.interval, c.scrape); got != c.want {
			t.Errorf("GPUPollEvery(%d, %d) = %d, want %d", c.interval, c.scrape, got, c.want)
		}
	}
}

// TestRouterAttributes: a data-layer attribute set on an endpoint reaches
// every later candidate of it, and only of it; what a cycle Puts on its
// candidates does not leak into the store or the next cycle.
func TestRouterAttributes(t *testing.T) {
	r := &Router{}
	r.AddEndpoint(EndpointInfo{Name: "a"})
	r.AddEndpoint(EndpointInfo{Name: "b"})
	if _, ok := r.Candidates()[0].Get(GPUUtilizationKey); ok {
		t.Fatal("attribute before any was set")
	}
	if err := r.SetAttribute("b", GPUUtilizationKey, 0.25); err != nil {
		t.Fatal(err)
	}
	if err := r.SetAttribute("c", GPUUtilizationKey, 0.5); err == nil {
		t.Error("unknown endpoint accepted")
	}
	eps := r.Candidates()
	if _, ok := eps[0].Get(GPUUtilizationKey); ok {
		t.Error("a has b's attribute")
	}
	if v, ok := eps[1].Get(GPUUtilizationKey); !ok || v != 0.25 {
		t.Errorf("b: %v %v", v, ok)
	}
	other := DataKey{Type: "X", Producer: "p"}
	eps[1].Put(GPUUtilizationKey, 0.75)
	eps[1].Put(other, 1)
	next := r.Candidates()
	if v, _ := next[1].Get(GPUUtilizationKey); v != 0.25 {
		t.Errorf("a cycle's Put leaked into the store: %v", v)
	}
	if _, ok := next[1].Get(other); ok {
		t.Error("a cycle's attribute leaked into the next cycle")
	}
	if err := r.SetAttribute("b", GPUUtilizationKey, 1.0); err != nil {
		t.Fatal(err)
	}
	if v, ok := r.Attribute("b", GPUUtilizationKey); !ok || v != 1.0 {
		t.Errorf("stored %v %v", v, ok)
	}
	if v, _ := next[1].Get(GPUUtilizationKey); v != 0.25 {
		t.Errorf("a later SetAttribute changed an earlier cycle's snapshot: %v", v)
	}
}
