package workload

import (
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/traces"
)

const smallSpec = `
base: chat
name: small
sessions: 12
arrivals: {rate: 4}
turns: {mean: 3, max: 5}
tenants: {count: 2, systemPrompt: {median: 60, sigma: 0.2}, cacheSalt: true}
userMessage: {median: 20, sigma: 0.5}
answer: {median: 30, sigma: 0.5}
`

func synthReqs(t *testing.T, specYAML string, seed uint64, o Options) []*Request {
	t.Helper()
	spec, err := ParseSpec([]byte(specYAML))
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSynthesizer(spec, rand.New(rand.NewPCG(seed, 0)), opts(o))
	if err != nil {
		t.Fatal(err)
	}
	reqs, err := Drain(s)
	if err != nil {
		t.Fatal(err)
	}
	return reqs
}

func jsonl(t *testing.T, reqs []*Request) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, r := range reqs {
		if err := WriteOpenAI(&b, r); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

func TestSynthDeterministicAndConsistent(t *testing.T) {
	a := synthReqs(t, smallSpec, 1, Options{})
	b := synthReqs(t, smallSpec, 1, Options{})
	c := synthReqs(t, smallSpec, 2, Options{})
	if !bytes.Equal(jsonl(t, a), jsonl(t, b)) {
		t.Fatal("same seed, different output")
	}
	if bytes.Equal(jsonl(t, a), jsonl(t, c)) {
		t.Fatal("different seeds, same output")
	}
	checkInvariants(t, a)
	byID := map[int64]*Request{}
	sessions := map[string]bool{}
	for _, r := range a {
		byID[r.ID] = r
		sessions[r.Session] = true
		if r.Endpoint != EndpointChat || r.Model != DefaultModel || !strings.HasPrefix(r.CacheSalt, "tenant-") {
			t.Fatalf("request %d: %s %s salt %q", r.ID, r.Endpoint, r.Model, r.CacheSalt)
		}
		if r.OutputTokens != len(r.OutputTokenIDs) || r.OutputTokenIDs[len(r.OutputTokenIDs)-1] != TokEOT {
			t.Fatalf("request %d: output %d ids %d", r.ID, r.OutputTokens, len(r.OutputTokenIDs))
		}
		if r.Prev < 0 {
			if r.Turn != 0 || r.AfterPrevious {
				t.Fatalf("request %d: first turn %d after %v", r.ID, r.Turn, r.AfterPrevious)
			}
			continue
		}
		p := byID[r.Prev]
		// Closed-loop turn: after the previous turn plus a think time, its
		// prompt the previous prompt + answer + the new message.
		if !r.AfterPrevious || r.ThinkTime < int64(1e9) || r.Arrival != p.Arrival+r.ThinkTime || r.Turn != p.Turn+1 || r.Session != p.Session {
			t.Fatalf("request %d: after %v think %d arrival %d prev %d", r.ID, r.AfterPrevious, r.ThinkTime, r.Arrival, p.Arrival)
		}
		if !hasPrefix(r.PromptTokens, slices.Concat(p.PromptTokens, p.OutputTokenIDs)) {
			t.Fatalf("request %d does not extend request %d", r.ID, p.ID)
		}
	}
	if len(sessions) != 12 {
		t.Errorf("%d sessions, want 12", len(sessions))
	}
}

// TestSynthRoundTrip: synthesized traffic written as OpenAI JSONL reads back
// as the same requests (closed-loop).
func TestSynthRoundTrip(t *testing.T) {
	reqs := synthReqs(t, smallSpec, 3, Options{})
	back := readAll(t, "rt.jsonl", string(jsonl(t, reqs)), Options{Mode: ModeClosedLoop})
	if len(back) != len(reqs) {
		t.Fatalf("%d requests back, want %d", len(back), len(reqs))
	}
	for i, a := range reqs {
		b := back[i]
		if !bytes.Equal(a.Body, b.Body) || !slices.Equal(a.PromptTokens, b.PromptTokens) || !slices.Equal(a.OutputTokenIDs, b.OutputTokenIDs) ||
			a.OutputTokens != b.OutputTokens || a.OutputText != b.OutputText || a.Arrival != b.Arrival || a.AfterPrevious != b.AfterPrevious ||
			a.ThinkTime != b.ThinkTime || a.Session != b.Session || a.Turn != b.Turn || a.Prev != b.Prev || a.CacheSalt != b.CacheSalt ||
			a.Model != b.Model || a.Endpoint != b.Endpoint {
			t.Fatalf("request %d differs after the round trip:\n%+v\n%+v", i, a, b)
		}
	}
}

func TestSynthOpenLoopAndRate(t *testing.T) {
	closed := synthReqs(t, smallSpec, 4, Options{})
	open := synthReqs(t, smallSpec, 4, Options{Mode: ModeOpenLoop})
	fast := synthReqs(t, smallSpec, 4, Options{Rate: 40})
	for i := range closed {
		if open[i].AfterPrevious || open[i].Arrival != closed[i].Arrival || !slices.Equal(open[i].PromptTokens, closed[i].PromptTokens) {
			t.Fatalf("open-loop request %d differs beyond AfterPrevious", i)
		}
	}
	// Session starts come 10x faster; the content is unchanged.
	var startsClosed, startsFast []int64
	for i := range closed {
		if closed[i].Turn == 0 {
			startsClosed = append(startsClosed, closed[i].Arrival)
		}
		if fast[i].Turn == 0 {
			startsFast = append(startsFast, fast[i].Arrival)
		}
	}
	last := len(startsClosed) - 1
	if r := float64(startsClosed[last]) / float64(startsFast[last]); math.Abs(r-10) > 1e-6 {
		t.Errorf("last session start ratio %v, want 10", r)
	}
}

func TestSynthRAGAndContextCap(t *testing.T) {
	spec := `
sessions: 6
arrivals: {rate: 1}
turns: {mean: 4, max: 8}
tenants: {count: 1, systemPrompt: {median: 50}}
userMessage: {median: 10}
answer: {median: 100}
rag: {probability: 1, documents: 1, document: {median: 300}}
maxContextTokens: 600
`
	reqs := synthReqs(t, spec, 5, Options{})
	var firsts []*Request
	for _, r := range reqs {
		if r.PromptLen > 600 {
			t.Fatalf("request %d: %d tokens above maxContextTokens", r.ID, r.PromptLen)
		}
		if r.Turn == 0 {
			firsts = append(firsts, r)
		}
	}
	// All sessions share the system prompt and the single document.
	for _, r := range firsts[1:] {
		common := 0
		for common < len(r.PromptTokens) && r.PromptTokens[common] == firsts[0].PromptTokens[common] {
			common++
		}
		if common < 300 {
			t.Errorf("request %d shares only %d tokens with the first session", r.ID, common)
		}
	}
}

func TestParseSpec(t *testing.T) {
	s, err := ParseSpec([]byte(smallSpec))
	if err != nil {
		t.Fatal(err)
	}
	// Inherited from the chat preset: think time and the answer cap.
	if s.Name != "small" || s.Sessions != 12 || s.Arrivals.Rate != 4 || s.Arrivals.Process != "poisson" ||
		s.Think.Median != Duration(120e9) || s.Think.Sigma != 0.95 || s.Answer.Max != 2000 || s.Tenants.Count != 2 {
		t.Errorf("%+v", s)
	}
	bad := []struct{ yaml, want string }{
		{"sessions: 3\narrivals: {rate: 1}\nuserMessage: {median: 5}\nanswer: {median: 5}\nfoo: 1", `spec: error unmarshaling JSON: while decoding JSON: json: unknown field "foo"`},
		{"sessions: 0", "spec: sessions: must be > 0"},
		{"base: chat\narrivals: {process: weibull}", `spec: arrivals.process: "weibull" is not poisson or gamma`},
		{"base: chat\narrivals: {process: gamma}", "spec: arrivals.cv: must be in (0, 100] for a gamma process"},
		{"base: chat\nthinkTime: {median: soon}", `spec: error unmarshaling JSON: while decoding JSON: bad duration "soon": time: invalid duration "soon"`},
		{"base: nope", `spec: base: traces: no built-in workload "nope" (have agentic, chat, rag)`},
		{"base: chat\nrag: {probability: 0.5, document: {median: 100}}", "spec: rag.documents: must be in [1, 1e6] when rag.probability > 0"},
	}
	for _, b := range bad {
		if _, err := ParseSpec([]byte(b.yaml)); err == nil || err.Error() != b.want {
			t.Errorf("ParseSpec(%q)\n error %v\n want  %s", b.yaml, err, b.want)
		}
	}
	for _, name := range traces.Names() {
		if _, err := PresetSpec(name); err != nil {
			t.Errorf("preset %s: %v", name, err)
		}
	}
}

func TestBuiltin(t *testing.T) {
	s, err := Builtin("chat", 1)
	if err != nil {
		t.Fatal(err)
	}
	if s.Name() != DefaultWorkload || s.Format() != FormatSynth || s.Mode() != ModeClosedLoop {
		t.Fatalf("%s %s %v", s.Name(), s.Format(), s.Mode())
	}
	var reqs []*Request
	for range 40 {
		r, err := s.Next()
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, r)
	}
	checkInvariants(t, reqs)
	if _, err := Builtin("nope", 1); err == nil {
		t.Fatal("unknown builtin accepted")
	}
	if _, err := Open("builtin:chat", Options{Model: "other", Seed: 2}); err != nil {
		t.Fatal(err)
	}
}

func TestDistributions(t *testing.T) {
	d := DefaultThinkTime()
	// 120 s · exp(±0.95 · 1.28155) = 405.4 s / 35.52 s.
	for _, q := range []struct{ p, want float64 }{{0.1, 35.52e9}, {0.5, 120e9}, {0.9, 405.4e9}} {
		if got := d.Quantile(q.p); math.Abs(got-q.want)/q.want > 0.002 {
			t.Errorf("think-time p%.0f = %.1f s, want %.1f s", q.p*100, got/1e9, q.want/1e9)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, cv := range []float64{0.5, 1, 2} {
		g := interarrival{mean: 10, cv: cv}
		const n = 40000
		var sum, sq float64
		for range n {
			x := g.next(r)
			sum += x
			sq += x * x
		}
		mean := sum / n
		sd := math.Sqrt(sq/n - mean*mean)
		if math.Abs(mean-10) > 0.3 || math.Abs(sd/mean-cv) > 0.08*cv {
			t.Errorf("cv %g: mean %.3f, cv %.3f", cv, mean, sd/mean)
		}
	}
	z := newDiscrete(zipfWeights(3, 1)) // weights 1, 1/2, 1/3 → 6/11, 3/11, 2/11
	counts := make([]int, 3)
	for range 22000 {
		counts[z.sample(r)]++
	}
	for i, want := range []int{12000, 6000, 4000} {
		if math.Abs(float64(counts[i]-want)) > 400 {
			t.Errorf("zipf bucket %d: %d, want about %d", i, counts[i], want)
		}
	}
}

// TestSharedTokenizerConcurrent: sources on different goroutines may share
// one Tokenizer (run with -race).
func TestSharedTokenizerConcurrent(t *testing.T) {
	done := make(chan []byte, 2)
	for range 2 {
		go func() {
			s, err := Open("testdata/openai.jsonl", opts(Options{}))
			if err != nil {
				done <- nil
				return
			}
			reqs, _ := Drain(s)
			var b bytes.Buffer
			for _, r := range reqs {
				_ = WriteOpenAI(&b, r)
			}
			done <- b.Bytes()
		}()
	}
	a, b := <-done, <-done
	if a == nil || !bytes.Equal(a, b) {
		t.Fatal("concurrent reads differ")
	}
}
