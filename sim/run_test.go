package sim

import (
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/epp"
	"github.com/eppsim/eppsim/epp/config"
	"github.com/eppsim/eppsim/epp/plugins"
	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/workload"
)

// sliceSource replays a fixed list of requests.
type sliceSource struct{ reqs []*workload.Request }

func (s *sliceSource) Next() (*workload.Request, error) {
	if len(s.reqs) == 0 {
		return nil, io.EOF
	}
	r := s.reqs[0]
	s.reqs = s.reqs[1:]
	return r, nil
}

// Test plugins: a round-robin picker and a one-profile handler, so these
// tests exercise the run wiring independently of the EPP plugin packages.
type rrPicker struct {
	epp.TypedName
	n int
}

func (p *rrPicker) Pick(_ *epp.Cycle, _ *epp.Request, scored []epp.ScoredEndpoint) []*epp.Endpoint {
	e := scored[p.n%len(scored)].Endpoint
	p.n++
	return []*epp.Endpoint{e}
}

type oneProfile struct{ epp.TypedName }

func (oneProfile) PickProfiles(_ *epp.Cycle, _ *epp.Request, ps []*epp.Profile, res map[string]*epp.ProfileResult) []string {
	if len(res) > 0 {
		return nil
	}
	return []string{ps[0].Name}
}

func (oneProfile) ProcessResults(_ *epp.Cycle, _ *epp.Request, res map[string]*epp.ProfileResult) (*epp.Result, error) {
	return &epp.Result{PrimaryProfile: "default", Profiles: res}, nil
}

func testRouter() *epp.Router {
	return &epp.Router{
		Profiles: []*epp.Profile{{Name: "default", Picker: &rrPicker{TypedName: epp.TypedName{PluginType: "rr", PluginName: "rr"}}}},
		Handler:  oneProfile{},
	}
}

func testFleet(t *testing.T, n, blocks int) []ReplicaSpec {
	t.Helper()
	p, err := replica.LookupPreset("llama-3.1-8b-h100")
	if err != nil {
		t.Fatal(err)
	}
	p.Engine.NumGPUBlocksOverride = blocks
	p.Engine.CheckInvariants = true
	var out []ReplicaSpec
	for i := range n {
		out = append(out, ReplicaSpec{Name: "default/r" + string(rune('0'+i)), Address: "10.0.0." + string(rune('1'+i)) + ":8000", Preset: p})
	}
	return out
}

func tokens(start, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(start + i)
	}
	return out
}

func req(id int64, at int64, prompt []uint32, out int) *workload.Request {
	return &workload.Request{ID: id, Prev: -1, Arrival: at, Model: "m", PromptTokens: prompt, PromptLen: len(prompt), OutputTokens: out}
}

func run(t *testing.T, reqs []*workload.Request, fleet []ReplicaSpec, opts Options) ([]Record, *Result) {
	t.Helper()
	var recs []Record
	opts.OnRecord = func(r *Record) { recs = append(recs, *r) }
	res, err := Run(&sliceSource{reqs: reqs}, testRouter(), fleet, opts)
	if err != nil {
		t.Fatal(err)
	}
	return recs, res
}

const second = int64(1e9)

func TestRunIdenticalPromptsReuse(t *testing.T) {
	// One replica: the second identical 1,024-token prompt reuses
	// floor(1023/16)*16 = 1,008 tokens (vllm-engine.md A.2).
	p := tokens(0, 1024)
	recs, res := run(t, []*workload.Request{req(0, 0, p, 10), req(1, 10*second, p, 10)}, testFleet(t, 1, 2000), Options{})
	if res.Completed != 2 || res.Injected != 2 || len(recs) != 2 {
		t.Fatalf("result %+v records %d", res, len(recs))
	}
	if recs[1].CachedTokens != 1008 || recs[1].OracleCachedTokens != 1008 || recs[1].RoutedCachedTokens != 1008 || recs[0].CachedTokens != 0 {
		t.Fatalf("cached %d/%d oracle %d", recs[0].CachedTokens, recs[1].CachedTokens, recs[1].OracleCachedTokens)
	}
	// An extension by one 512-token block reuses exactly the earlier
	// prompt's full blocks (1,024 tokens).
	recs, _ = run(t, []*workload.Request{req(0, 0, p, 10), req(1, 10*second, tokens(0, 1536), 10)}, testFleet(t, 1, 2000), Options{})
	if recs[1].CachedTokens != 1024 {
		t.Fatalf("extension reused %d, want 1024", recs[1].CachedTokens)
	}
}

func TestRunRoundRobinRegret(t *testing.T) {
	// Round-robin sends the repeat to the other replica: true reuse 0,
	// oracle 1,008.
	p := tokens(0, 1024)
	recs, _ := run(t, []*workload.Request{req(0, 0, p, 5), req(1, 5*second, p, 5)}, testFleet(t, 2, 2000), Options{})
	if recs[0].Replica != 0 || recs[1].Replica != 1 || recs[1].CachedTokens != 0 || recs[1].RoutedCachedTokens != 0 || recs[1].OracleCachedTokens != 1008 {
		t.Fatalf("records %+v", recs)
	}
}

func TestRunConservationAndDeterminism(t *testing.T) {
	reqs := func() []*workload.Request {
		var out []*workload.Request
		for i := range 60 {
			prompt := append(tokens(0, 300), tokens(10000+i%7*1000, 50+i*13%400)...)
			r := req(int64(i), int64(i)*20_000_000, prompt, 1+i*7%90)
			if i == 59 {
				r = req(int64(i), int64(i)*20_000_000, tokens(0, 40000), 10) // too long for the tiny cache: rejected
			}
			out = append(out, r)
		}
		return out
	}
	fleet := testFleet(t, 3, 300)
	recs1, res1 := run(t, reqs(), fleet, Options{Seed: 7})
	if res1.Completed+res1.Rejected+res1.InFlight != res1.Injected || res1.Injected != 60 || res1.Rejected != 1 || len(recs1) != 60 {
		t.Fatalf("conservation: %+v, %d records", res1, len(recs1))
	}
	seen := map[int64]bool{}
	for _, r := range recs1 {
		if seen[r.ID] {
			t.Fatalf("request %d recorded twice", r.ID)
		}
		seen[r.ID] = true
		if r.Outcome == Completed && (r.TTFT <= 0 || r.E2E < r.TTFT || r.OracleCachedTokens < r.CachedTokens) {
			t.Fatalf("record %+v", r)
		}
	}
	recs2, res2 := run(t, reqs(), fleet, Options{Seed: 7})
	if !reflect.DeepEqual(recs1, recs2) || res1.Events != res2.Events {
		t.Fatal("same inputs and seed gave different records")
	}
}

func TestRunClosedLoopRelease(t *testing.T) {
	// Turn 1 follows turn 0 after it completes plus 2 s of think time, even
	// though its trace arrival is earlier.
	t0 := req(0, 0, tokens(0, 500), 20)
	t0.Session = "s"
	t1 := req(1, 1*second, tokens(0, 800), 20)
	t1.Session, t1.Turn, t1.Prev, t1.AfterPrevious, t1.ThinkTime = "s", 1, 0, true, 2*second
	recs, _ := run(t, []*workload.Request{t0, t1}, testFleet(t, 1, 2000), Options{})
	if len(recs) != 2 {
		t.Fatalf("%d records", len(recs))
	}
	if want := recs[0].Completion + 2*second; recs[1].Arrival != want {
		t.Fatalf("turn 1 arrived at %d, want completion of turn 0 + 2s = %d", recs[1].Arrival, want)
	}
	if recs[1].CachedTokens != 496 {
		t.Fatalf("turn 1 reused %d, want 496", recs[1].CachedTokens)
	}
}

func TestRunSamples(t *testing.T) {
	var samples []Sample
	_, err := Run(&sliceSource{reqs: []*workload.Request{req(0, 0, tokens(0, 1024), 200), req(1, 0, tokens(0, 1024), 200)}},
		testRouter(), testFleet(t, 2, 2000), Options{SampleInterval: second / 2, OnSample: func(s *Sample) { samples = append(samples, *s) }})
	if err != nil {
		t.Fatal(err)
	}
	// One sample per replica at t=0, 0.5 s, ... until the run goes idle.
	if len(samples) < 4 || len(samples)%2 != 0 || samples[0].Time != 0 || samples[2].Time != second/2 || samples[3].Replica != 1 {
		t.Fatalf("samples %+v", samples)
	}
	last := samples[len(samples)-1]
	if last.Running != 0 || last.PrefixQueries != 1024 {
		t.Fatalf("last sample %+v", last)
	}
	if s := samples[1]; s.Running != 0 || s.Waiting != 0 {
		t.Fatalf("at t=0 nothing has reached replica 1 yet: %+v", s)
	}
}

func TestSamplingDoesNotChangeTheRun(t *testing.T) {
	reqs := func() *sliceSource {
		return &sliceSource{reqs: []*workload.Request{req(0, 0, tokens(0, 1024), 50), req(1, second, tokens(0, 512), 50)}}
	}
	plain, err := Run(reqs(), testRouter(), testFleet(t, 2, 2000), Options{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	sampled, err := Run(reqs(), testRouter(), testFleet(t, 2, 2000), Options{SampleInterval: 7 * second / 10, OnSample: func(*Sample) { n++ }})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 || plain.Events != sampled.Events || plain.SimTime != sampled.SimTime {
		t.Fatalf("%d samples; events %d vs %d, sim time %d vs %d", n, plain.Events, sampled.Events, plain.SimTime, sampled.SimTime)
	}
}

// TestRunRejectsBadBody: a body the EPP's parser rejects (spec §2.1 step
// 0) ends as a Rejected record whose reason is the parse error, and the
// run goes on: the requests around it are routed and served exactly as in
// a run where it is never sent (it indexes nothing and occupies no
// replica), and a closed-loop session continues after it.
func TestRunRejectsBadBody(t *testing.T) {
	chat := func(text, extra string) []byte {
		return []byte(`{"model":"m","messages":[{"role":"user","content":"` + text + `"}]` + extra + `}`)
	}
	long := strings.Repeat("pack my box with five dozen liquor jugs ", 20)
	at := func(id int64, sec float64, prompt []uint32, body []byte, endpoint string) *workload.Request {
		r := req(id, int64(sec*float64(second)), prompt, 20)
		r.Body, r.Endpoint = body, endpoint
		return r
	}
	openLoop := func(withBad bool) []*workload.Request {
		rs := []*workload.Request{at(0, 0, tokens(0, 600), chat("hello there", ""), workload.EndpointChat)}
		if withBad {
			rs = append(rs, at(1, 1, tokens(1000, 900), chat(long, `,"add_generation_prompt":"yes"`), workload.EndpointChat))
		}
		return append(rs,
			at(2, 2, tokens(1000, 900), chat(long, ""), workload.EndpointChat),
			at(3, 3, tokens(5000, 700), []byte(`{"model":"m","prompt":"something else"}`), workload.EndpointCompletions))
	}
	runEPP := func(rs []*workload.Request) (map[int64]Record, *Result) {
		t.Helper()
		l, err := config.Default(config.Options{Registry: plugins.Builtin(), Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		recs := map[int64]Record{}
		res, err := Run(&sliceSource{reqs: rs}, l.Router(), testFleet(t, 2, 2000), Options{OnRecord: func(r *Record) { recs[r.ID] = *r }})
		if err != nil {
			t.Fatal(err)
		}
		return recs, res
	}
	recs, res := runEPP(openLoop(true))
	if res.Injected != 4 || res.Rejected != 1 || res.Completed != 3 || len(recs) != 4 {
		t.Fatalf("result %+v, %d records", res, len(recs))
	}
	const reason = "bad request (HTTP 400 from openai-parser): chat-completions request: add_generation_prompt: got a string, want a boolean"
	if bad := recs[1]; bad.Outcome != Rejected || bad.Reason != reason || bad.Replica != -1 || bad.HasPredicted || bad.Arrival != second {
		t.Fatalf("bad body: %+v, want rejected at 1 s with reason %q", bad, reason)
	}
	ref, _ := runEPP(openLoop(false))
	for _, id := range []int64{0, 2, 3} {
		a, b := recs[id], ref[id]
		if a.Outcome != Completed || a.Replica != b.Replica || a.HasPredicted != b.HasPredicted || a.Predicted != b.Predicted ||
			a.PredictedBlocks != b.PredictedBlocks || a.CachedTokens != b.CachedTokens || a.TTFT != b.TTFT || a.E2E != b.E2E {
			t.Errorf("request %d differs from the run without the bad body:\n%+v\n%+v", id, a, b)
		}
	}

	// Closed loop: turn 1 is rejected when released; turn 2, whose
	// previous turn never completes, goes at its trace arrival.
	t0 := at(0, 0, tokens(0, 600), chat("hello there", ""), workload.EndpointChat)
	t0.Session = "s"
	t1 := at(1, 0.1, tokens(0, 900), chat("hello there, again", `,"messages":[{"role":"user","content":5}]`), workload.EndpointChat)
	t1.Session, t1.Turn, t1.Prev, t1.AfterPrevious, t1.ThinkTime = "s", 1, 0, true, second
	t2 := at(2, 5, tokens(0, 1200), chat("hello there, again and again", ""), workload.EndpointChat)
	t2.Session, t2.Turn, t2.Prev, t2.AfterPrevious, t2.ThinkTime = "s", 2, 1, true, second
	recs, res = runEPP([]*workload.Request{t0, t1, t2})
	if res.Rejected != 1 || res.Completed != 2 {
		t.Fatalf("closed loop: %+v", res)
	}
	if r := recs[1]; r.Outcome != Rejected || !strings.HasSuffix(r.Reason, "messages[0].content: got a number, want a string or an array of content blocks") ||
		r.Arrival != recs[0].Completion+second {
		t.Fatalf("closed-loop bad turn: %+v", r)
	}
	if r := recs[2]; r.Outcome != Completed || r.Arrival != 5*second {
		t.Fatalf("turn after the rejected one: %+v", r)
	}
}
