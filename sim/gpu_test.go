package sim

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eppsim/eppsim/epp"
	"github.com/eppsim/eppsim/epp/config"
	"github.com/eppsim/eppsim/epp/plugins"
	"github.com/eppsim/eppsim/workload"
)

// TestGPUBusyShare: the exporter's busy share by hand. Each case is a
// sequence of step begins (b), step ends (e) and publications (p, window
// W ms) at times in ms; want are the published shares in order.
func TestGPUBusyShare(t *testing.T) {
	type op struct {
		kind byte
		ms   int64
	}
	for _, c := range []struct {
		name string
		w    int64
		ops  []op
		want []float64
	}{
		// Steps [200, 700) and [900, 1400): 500 + 100 ms of the first
		// second, the 400 ms left of the second step in the next.
		{"two steps", 1000, []op{{'b', 200}, {'e', 700}, {'b', 900}, {'p', 1000}, {'e', 1400}, {'p', 2000}}, []float64{0.6, 0.4}},
		// [500, 2250): half of the first window, all of the second, a
		// quarter of the third.
		{"one step over three windows", 1000, []op{{'b', 500}, {'p', 1000}, {'p', 2000}, {'e', 2250}, {'p', 3000}}, []float64{0.5, 1, 0.25}},
		// A step ending at a boundary counts the same whether it ends
		// before or after the publication of that instant.
		{"ends at the boundary, first", 1000, []op{{'b', 500}, {'e', 1000}, {'p', 1000}, {'p', 2000}}, []float64{0.5, 0}},
		{"ends at the boundary, after", 1000, []op{{'b', 500}, {'p', 1000}, {'e', 1000}, {'p', 2000}}, []float64{0.5, 0}},
		// A step beginning at a boundary belongs to the next window.
		{"begins at the boundary", 1000, []op{{'b', 1000}, {'p', 1000}, {'e', 1500}, {'p', 2000}}, []float64{0, 0.5}},
		{"idle", 1000, []op{{'p', 1000}, {'p', 2000}}, []float64{0, 0}},
		// W = 500 ms: [100, 400) and [450, 700) give 300 + 50 ms of the
		// first window (0.7) and 200 ms of the second (0.4).
		{"half-second windows", 500, []op{{'b', 100}, {'e', 400}, {'b', 450}, {'p', 500}, {'e', 700}, {'p', 1000}}, []float64{0.7, 0.4}},
		// Back-to-back steps: a busy window is exactly 1.
		{"back to back", 1000, []op{{'b', 0}, {'e', 300}, {'b', 300}, {'e', 800}, {'b', 800}, {'p', 1000}, {'e', 1100}, {'p', 2000}}, []float64{1, 0.1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b gpuBusy
			var got []float64
			for _, o := range c.ops {
				ns := o.ms * 1e6
				switch o.kind {
				case 'b':
					b.begin(ns)
				case 'e':
					b.end(ns)
				case 'p':
					got = append(got, b.publish(ns, c.w*1e6))
				}
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("published %v, want %v", got, c.want)
			}
		})
	}
}

// attrPicker picks the first candidate and records, for each cycle, the
// candidates' GPUUtilization (-1: missing).
type attrPicker struct {
	epp.TypedName
	seen [][]float64
}

func (p *attrPicker) Pick(_ *epp.Cycle, _ *epp.Request, scored []epp.ScoredEndpoint) []*epp.Endpoint {
	var row []float64
	for _, s := range scored {
		v := -1.0
		if x, ok := s.Endpoint.Get(epp.GPUUtilizationKey); ok {
			v = x.(float64)
		}
		row = append(row, v)
	}
	p.seen = append(p.seen, row)
	return []*epp.Endpoint{scored[0].Endpoint}
}

// TestGPUTelemetryRun: three replicas, r0 and r2 two ranks of one pod
// (one host). Every request goes to r0: a long one at 0 keeps it stepping
// back to back (a decode of 1,500 tokens lasts several seconds), so its
// exporter publishes 1 at 1 s; r1 and r2 never step. The source polls
// every scrape (no interval): a probe at 10 ms, before the first poll
// (50 ms), sees no attribute; one at 500 ms sees the values published at
// 0 (all 0); one at 1.5 s sees 1 for r0 and for r2 (its pod's busiest
// GPU) and 0 for r1. The run ends, the same twice, and the exporters'
// ticks count in neither Events nor SimTime.
func TestGPUTelemetryRun(t *testing.T) {
	const ms = int64(1e6)
	once := func(polls []epp.GPUPoll) ([][]float64, *Result) {
		fleet := testFleet(t, 3, 4000)
		fleet[2].Address = "10.0.0.1:8001"
		p := &attrPicker{TypedName: epp.TypedName{PluginType: "attr", PluginName: "attr"}}
		router := &epp.Router{Profiles: []*epp.Profile{{Name: "default", Picker: p}}, Handler: oneProfile{}, GPUPolls: polls}
		reqs := []*workload.Request{req(0, 0, tokens(0, 64), 1500), req(1, 10*ms, tokens(1000, 32), 1),
			req(2, 500*ms, tokens(2000, 32), 1), req(3, 1500*ms, tokens(3000, 32), 1)}
		var res *Result
		var err error
		withDeadline(t, func() {
			res, err = Run(&sliceSource{reqs: reqs}, router, fleet, Options{Seed: 1, DCGMCollectInterval: 1000 * ms})
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Completed != 4 {
			t.Fatalf("result %+v", res)
		}
		return p.seen, res
	}
	seen, res := once([]epp.GPUPoll{{Source: "dcgm-data-source"}})
	want := [][]float64{{-1, -1, -1}, {-1, -1, -1}, {0, 0, 0}, {1, 0, 1}}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("candidates' GPU utilization %v, want %v", seen, want)
	}
	if res.SimTime < 2000*ms {
		t.Fatalf("the long request ended at %v s: it must outlast the second window", float64(res.SimTime)/1e9)
	}
	seen2, res2 := once([]epp.GPUPoll{{Source: "dcgm-data-source"}})
	if fmt.Sprint(seen2) != fmt.Sprint(seen) || res2.Events != res.Events || res2.SimTime != res.SimTime {
		t.Errorf("second run differs: %v, %d events, %d ns", seen2, res2.Events, res2.SimTime)
	}
	// Without a poll: no attribute, and the same simulation.
	seen0, res0 := once(nil)
	if fmt.Sprint(seen0) != fmt.Sprint([][]float64{{-1, -1, -1}, {-1, -1, -1}, {-1, -1, -1}, {-1, -1, -1}}) ||
		res0.Events != res.Events || res0.SimTime != res.SimTime {
		t.Errorf("without polls: %v, %d events (%d with), %d ns (%d with)", seen0, res0.Events, res.Events, res0.SimTime, res.SimTime)
	}
}

// TestGPUCollectIntervalInvalid: a negative collect interval is the
// user's input error (FleetError), and only matters with a poll.
func TestGPUCollectIntervalInvalid(t *testing.T) {
	fleet := testFleet(t, 1, 4000)
	router := testRouter()
	router.GPUPolls = []epp.GPUPoll{{Source: "s"}}
	_, err := Run(&sliceSource{}, router, fleet, Options{DCGMCollectInterval: -1})
	if fe := (*FleetError)(nil); err == nil || !errors.As(err, &fe) || err.Error() != "dcgm-exporter collect interval -1ns: must be greater than 0" {
		t.Errorf("err %v", err)
	}
	if _, err := Run(&sliceSource{}, testRouter(), testFleet(t, 1, 4000), Options{DCGMCollectInterval: -1}); err != nil {
		t.Errorf("without a poll: %v", err)
	}
}

// gpuProbe is a PreRequest hook that records, for each routed request,
// the time, the GPU-utilization filter's survivors and both endpoints'
// stored GPUUtilization (-1: missing).
type gpuProbe struct {
	epp.TypedName
	router *epp.Router
	rows   []string
}

func (p *gpuProbe) PreRequest(c *epp.Cycle, _ *epp.Request, res *epp.Result) {
	var surv []string
	for _, f := range res.Profiles["default"].Trace.Filters {
		if f.Filter == "gpu-utilization-filter" {
			surv = f.Survivors
		}
	}
	var vals []float64
	for _, e := range p.router.Endpoints() {
		v := -1.0
		if x, ok := p.router.Attribute(e.Name, epp.GPUUtilizationKey); ok {
			v = x.(float64)
		}
		vals = append(vals, v)
	}
	p.rows = append(p.rows, fmt.Sprintf("%v %v %v", time.Duration(c.Now), surv, vals))
}

// TestGPUConfigRun runs ../shared/epp-configs/sim-epp-gpu-config.yaml on
// two replicas with 1 s exporter windows; its dcgm-source polls every
// second (20 scrapes of 50 ms). Request 0 (t = 0, 1,500 output tokens)
// goes to one replica, L (a tie: no attribute yet, equal KV usage), which
// then steps back to back for more than two seconds; short probes follow
// at 0.5, 1.2, 1.5, 1.9 and 2.5 s. By hand: until the first poll at 1 s
// the attribute is missing and the filter (onMissing Pass) keeps both
// replicas, so the 0.5 s probe goes by KV usage to the other replica, O;
// the poll at 1 s stores L's busy share of (0, 1 s], exactly 1 (its first
// step began at 0), and O's, the probe's few milliseconds of steps: from
// then on the filter (≤ 0.90) keeps O alone, and at 2 s L publishes 1
// again and O three times its first share (three probes like the first).
// The same run twice gives the same routing.
func TestGPUConfigRun(t *testing.T) {
	path := "../testdata/shared/epp-configs/sim-epp-gpu-config.yaml"
	if _, err := os.Stat(path); err != nil {
		t.Skip("shared configs not found")
	}
	const ms = int64(1e6)
	once := func() ([]Record, []string) {
		l, err := config.LoadFile(path, config.Options{Registry: plugins.Builtin(), Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(l.NotSimulated) != 0 {
			t.Fatalf("not simulated %v", l.NotSimulated)
		}
		router := l.Router()
		router.Record = true
		probe := &gpuProbe{router: router}
		router.PreRequest = append(router.PreRequest, probe)
		reqs := []*workload.Request{completion(req(0, 0, tokens(0, 64), 1500))}
		for i, at := range []int64{500, 1200, 1500, 1900, 2500} {
			reqs = append(reqs, completion(req(int64(i+1), at*ms, tokens(1000*(i+1), 32), 1)))
		}
		var recs []Record
		var res *Result
		withDeadline(t, func() {
			res, err = Run(&sliceSource{reqs: reqs}, router, testFleet(t, 2, 4000),
				Options{Seed: 1, DCGMCollectInterval: 1000 * ms, OnRecord: func(r *Record) { recs = append(recs, *r) }})
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Completed != 6 || res.SimTime < 2000*ms {
			t.Fatalf("result %+v: every request must complete, request 0 after 2 s", res)
		}
		slices.SortFunc(recs, func(a, b Record) int { return int(a.ID - b.ID) })
		return recs, probe.rows
	}
	recs, rows := once()
	names := []string{"default/r0", "default/r1"}
	L := recs[0].Replica
	O := 1 - L
	if recs[1].Replica != O {
		t.Errorf("the 0.5 s probe went to replica %d, want %d (lower KV usage)", recs[1].Replica, O)
	}
	for _, r := range recs[2:] {
		if r.Replica != O {
			t.Errorf("request %d went to replica %d, want %d", r.ID, r.Replica, O)
		}
	}
	both := fmt.Sprint(names)
	only := fmt.Sprint([]string{names[O]})
	val := func(l, o float64) string {
		v := make([]float64, 2)
		v[L], v[O] = l, o
		return fmt.Sprint(v)
	}
	// O's share of the first window: the 0.5 s probe's steps; read back
	// from the row at 1.2 s, checked to be small, then expected exactly.
	var oShare float64
	if len(rows) == 6 {
		var vals [2]float64
		if _, err := fmt.Sscanf(rows[2][strings.Index(rows[2], "] [")+2:], "[%g %g]", &vals[0], &vals[1]); err != nil {
			t.Fatalf("row %q: %v", rows[2], err)
		}
		oShare = vals[O]
	}
	if !(oShare > 0 && oShare < 0.05) {
		t.Errorf("O's published share %v, want a few ms of 1 s", oShare)
	}
	want := []string{
		"0s " + both + " [-1 -1]",
		"500ms " + both + " [-1 -1]",
		"1.2s " + only + " " + val(1, oShare),
		"1.5s " + only + " " + val(1, oShare),
		"1.9s " + only + " " + val(1, oShare),
		// (1 s, 2 s] holds O's steps for three probes like the first.
		"2.5s " + only + " " + val(1, float64(3*int64(math.Round(oShare*1e9)))/1e9),
	}
	if strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Errorf("cycles:\n%s\nwant\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
	recs2, rows2 := once()
	if !slices.Equal(rows2, rows) || fmt.Sprint(recs2) != fmt.Sprint(recs) {
		t.Error("a second run differs")
	}
}
