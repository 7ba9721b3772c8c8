package workload

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// TestParsePriorityClass reads NAME=PRIORITY:SHARE and names what is wrong.
func TestParsePriorityClass(t *testing.T) {
	c, err := ParsePriorityClass(" critical = 10 : 0.2 ")
	if err != nil || c != (PriorityClass{Name: "critical", Priority: 10, Share: 0.2}) {
		t.Fatalf("%+v %v", c, err)
	}
	if c, err := ParsePriorityClass("batch=-1:3"); err != nil || c.Priority != -1 || c.Share != 3 {
		t.Fatalf("%+v %v", c, err)
	}
	for _, bad := range []string{"x", "x=1", "=1:1", "x=a:1", "x=1:0", "x=1:-2", "x=1:inf", "x=1:b"} {
		if _, err := ParsePriorityClass(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	for in, want := range map[string]string{"": FairnessNone, "none": FairnessNone, "session": FairnessSession, "Class": FairnessClass} {
		if got, err := ParseFairnessID(in); err != nil || got != want {
			t.Errorf("ParseFairnessID(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseFairnessID("tenant"); err == nil {
		t.Error("unknown fairness source accepted")
	}
}

// TestClassesBySession: every turn of a session gets one class, the shares
// hold over many sessions (1:3 → 25 % / 75 %), the draw depends on the
// seed, a trace's own objective header is kept, and the fairness ID follows
// its source.
func TestClassesBySession(t *testing.T) {
	var lines []string
	for i := range 4000 {
		sid := "s" + string(rune('a'+i%26)) + strings.Repeat("x", i/26%7) + string(rune('0'+i%10))
		lines = append(lines, `{"model":"m","prompt":"p","x_session_id":"`+sid+`"}`)
	}
	lines = append(lines, `{"model":"m","prompt":"p","x_session_id":"own","x_objective":"mine"}`)
	data := strings.Join(lines, "\n")
	classes := []PriorityClass{{Name: "high", Priority: 10, Share: 1}, {Name: "low", Priority: -1, Share: 3}}
	reqs := readAll(t, "c.jsonl", data, Options{Classes: classes, FairnessID: FairnessSession, Seed: 5})
	bySession := map[string]string{}
	high := 0
	for _, r := range reqs[:4000] {
		obj := r.Headers[ObjectiveHeader]
		if prev, ok := bySession[r.Session]; ok && prev != obj {
			t.Fatalf("session %s has classes %s and %s", r.Session, prev, obj)
		}
		bySession[r.Session] = obj
		if r.Headers[FairnessHeader] != r.Session {
			t.Fatalf("fairness %q, want the session %q", r.Headers[FairnessHeader], r.Session)
		}
	}
	for _, obj := range bySession {
		if obj == "high" {
			high++
		}
	}
	if share := float64(high) / float64(len(bySession)); math.Abs(share-0.25) > 0.05 {
		t.Errorf("high share %.3f over %d sessions, want 0.25", share, len(bySession))
	}
	last := reqs[4000]
	if last.Headers[ObjectiveHeader] != "mine" {
		t.Errorf("the trace's objective was replaced: %v", last.Headers)
	}
	// Another seed draws other classes; the same seed the same.
	again := readAll(t, "c.jsonl", data, Options{Classes: classes, Seed: 5})
	other := readAll(t, "c.jsonl", data, Options{Classes: classes, Seed: 6})
	same, diff := true, false
	for i := range 4000 {
		same = same && again[i].Headers[ObjectiveHeader] == reqs[i].Headers[ObjectiveHeader]
		diff = diff || other[i].Headers[ObjectiveHeader] != reqs[i].Headers[ObjectiveHeader]
	}
	if !same || !diff {
		t.Errorf("seed dependence: same seed identical %v, other seed differs %v", same, diff)
	}
	if _, ok := again[0].Headers[FairnessHeader]; ok {
		t.Error("fairness header without a source")
	}
	byClass := readAll(t, "c.jsonl", data, Options{Classes: classes, FairnessID: FairnessClass, Seed: 5})
	if h := byClass[0].Headers; h[FairnessHeader] != h[ObjectiveHeader] {
		t.Errorf("class fairness: %v", h)
	}
	if _, err := NewSource(strings.NewReader(data), "c.jsonl", opts(Options{Classes: append(classes, classes[0])})); err == nil {
		t.Error("a class given twice accepted")
	}
}

// TestOpenAIIdentityFields: x_headers (keys lower-cased), x_objective and
// x_fairness_id become request headers, on the general path (the fast path
// declines such lines), and WriteOpenAI writes them back.
func TestOpenAIIdentityFields(t *testing.T) {
	data := `{"model":"m","prompt":"a","x_objective":"critical","x_fairness_id":"tenant-a","x_headers":{"X-LLM-D-SLO-TTFT-MS":"200"}}` + "\n" +
		`{"body":{"model":"m","prompt":"b"},"x_headers":{"x-gateway-inference-objective":"batch"}}` + "\n" +
		`{"model":"m","prompt":"c"}`
	reqs := readAll(t, "i.jsonl", data, Options{})
	want := []map[string]string{
		{ObjectiveHeader: "critical", FairnessHeader: "tenant-a", "x-llm-d-slo-ttft-ms": "200"},
		{ObjectiveHeaderAlias: "batch"},
		nil,
	}
	for i, r := range reqs {
		if len(r.Headers) != len(want[i]) {
			t.Fatalf("request %d headers %v, want %v", i, r.Headers, want[i])
		}
		for k, v := range want[i] {
			if r.Headers[k] != v {
				t.Errorf("request %d header %s = %q, want %q", i, k, r.Headers[k], v)
			}
		}
		if bytes.Contains(r.Body, []byte("x_")) {
			t.Errorf("request %d body keeps a replay field: %s", i, r.Body)
		}
	}
	var f openaiFast
	if f.decode([]byte(`{"model":"m","prompt":"a","x_objective":"critical"}`)) {
		t.Error("the fast path decoded an identity field")
	}
	var b bytes.Buffer
	if err := WriteOpenAI(&b, reqs[0]); err != nil {
		t.Fatal(err)
	}
	back := readAll(t, "back.jsonl", b.String(), Options{})
	if back[0].Headers[ObjectiveHeader] != "critical" || back[0].Headers["x-llm-d-slo-ttft-ms"] != "200" {
		t.Errorf("round trip headers %v", back[0].Headers)
	}
	if err := firstError(t, "bad.jsonl", `{"model":"m","prompt":"a","x_headers":{"a":1}}`, Options{}); err == nil || !strings.Contains(err.Error(), "x_headers") {
		t.Errorf("a non-string header: %v", err)
	}
}

// TestInferencePerfHeaders: api.headers (keys lower-cased) are sent with
// every request, so an objective header there reaches the EPP; a
// non-string value is an error naming the field.
func TestInferencePerfHeaders(t *testing.T) {
	y := "api:\n  headers: {X-LLM-D-Inference-Objective: batch}\ndata:\n  type: random\n  input_distribution: {total_count: 5}\n" +
		"  output_distribution: {mean: 10, std_dev: 0, min: 10, max: 10, total_count: 5}\nload:\n  stages: [{rate: 1, duration: 5}]\n"
	c, err := ParseInferencePerf([]byte(y), "h.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewInferencePerfSource(c, opts(Options{Seed: 1}))
	if err != nil {
		t.Fatal(err)
	}
	reqs, err := Drain(s)
	if err != nil || len(reqs) != 5 {
		t.Fatalf("%d requests, %v", len(reqs), err)
	}
	for _, r := range reqs {
		if r.Headers[ObjectiveHeader] != "batch" {
			t.Fatalf("headers %v", r.Headers)
		}
	}
	_, err = ParseInferencePerf([]byte(strings.Replace(y, "batch", "[1]", 1)), "h.yaml")
	if err == nil || !strings.Contains(err.Error(), "api.headers.X-LLM-D-Inference-Objective") {
		t.Errorf("non-string header: %v", err)
	}
}
