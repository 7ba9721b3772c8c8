package sweep

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestEvaluateUnmeasuredNeverWins (issue #25): a point whose run measured
// nothing has null latencies (or, in a log written before, zeros), and
// its regret is a vacuous 0. Whatever the objective, it is infeasible
// ("no measured request") and never the best; points.csv leaves its
// latency cells empty.
func TestEvaluateUnmeasuredNeverWins(t *testing.T) {
	h := &logHeader{Spec: SpecDoc{Points: 3, Dims: []DimDoc{{Name: "x", Values: []string{"0", "1", "2"}}}}}
	recs := []Record{
		{Index: 0, Values: []string{"0"}, Summary: json.RawMessage(`{"latency_ms":{"ttft":{"p50":null,"p99":null},"e2e":{"mean":null,"p99":null}},` +
			`"throughput":{"requests_per_s":null},"cache":{"regret_tokens":0},"requests":{"completed":0,"rejected":9}}`)},
		{Index: 1, Values: []string{"1"}, Summary: json.RawMessage(`{"latency_ms":{"ttft":{"p50":50,"p99":100},"e2e":{"mean":200,"p99":400}},` +
			`"throughput":{"requests_per_s":3},"cache":{"regret_tokens":500},"requests":{"completed":9,"rejected":0}}`)},
		// Written before null: zeros for the empty set.
		{Index: 2, Values: []string{"2"}, Summary: json.RawMessage(`{"latency_ms":{"ttft":{"p50":0,"p99":0},"e2e":{"mean":0,"p99":0}},` +
			`"throughput":{"requests_per_s":0},"cache":{"regret_tokens":0},"requests":{"completed":0,"rejected":9}}`)},
	}
	for _, obj := range []string{"ttft_p99", "regret", "rejected"} {
		r, err := evaluate(h, recs, mustObjectives(t, obj), nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.Best == nil || r.Best.Index != 1 {
			t.Errorf("%s: best %+v, want point 1", obj, r.Best)
		}
		for _, i := range []int{0, 2} {
			if p := r.Points[i]; p.Feasible || !slices.Contains(p.Violated, NoMeasuredRequest) {
				t.Errorf("%s: point %d %+v, want infeasible: %s", obj, i, p, NoMeasuredRequest)
			}
		}
	}
	r, err := evaluate(h, recs, mustObjectives(t, "ttft_p99"), nil)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(strings.NewReader(string(r.pointsCSV()))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := slices.Index(rows[0], "ttft_p99_ms")
	if col < 0 || rows[1][col] != "" || rows[2][col] != "100.000" || rows[1][len(rows[1])-2] != "false" {
		t.Fatalf("points.csv:\n%s", r.pointsCSV())
	}
}

// TestMeasured: null or 0 E2E mean is no measured request; a summary
// without the field is not judged.
func TestMeasured(t *testing.T) {
	for doc, want := range map[string]bool{
		`{"latency_ms":{"e2e":{"mean":null}}}`: false,
		`{"latency_ms":{"e2e":{"mean":0}}}`:    false,
		`{"latency_ms":{"e2e":{"mean":12.5}}}`: true,
		`{"latency_ms":{"ttft":{"p99":3}}}`:    true,
		`{}`:                                   true,
	} {
		var m map[string]any
		if err := json.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatal(err)
		}
		if got := Measured(m); got != want {
			t.Errorf("Measured(%s) = %v, want %v", doc, got, want)
		}
	}
}

// TestTuneUnmeasured: with a warm-up longer than the traffic every
// evaluation measures nothing; minimising regret, each would score a
// vacuous 0. None is feasible, so there is no best.
func TestTuneUnmeasured(t *testing.T) {
	spec := testSpec(t, 10)
	spec.Env.Warmup = int64(1000 * time.Hour)
	obj, _ := ParseObjective("regret")
	p, err := ParseTuneParam("queue-scorer.weight")
	if err != nil {
		t.Fatal(err)
	}
	r, err := Tune(context.Background(), TuneSpec{Version: "test", Spec: spec, Params: []TuneParam{p}, Objective: obj, Budget: 3, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r.Best != nil {
		t.Errorf("best %+v, want none", r.Best)
	}
	for _, e := range r.Trajectory {
		if e.Feasible || !slices.Contains(e.Violated, NoMeasuredRequest) {
			t.Errorf("evaluation %d: %+v", e.N, e)
		}
	}
	if err := WriteTune(t.TempDir(), r, testDPI); err != nil {
		t.Fatal(err)
	}
}
