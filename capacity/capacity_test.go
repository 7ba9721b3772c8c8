package capacity

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/scenario"
	"github.com/eppsim/eppsim/sim"
	"github.com/eppsim/eppsim/workload"
)

// poissonTrace writes n requests of identical 64-token prompts and one
// output token, arriving as a Poisson process of rate per second (seeded),
// in the Mooncake format; it returns the path.
func poissonTrace(t testing.TB, n int, rate float64, seed uint64) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 0))
	var b bytes.Buffer
	at := 0.0
	for range n {
		at += rng.ExpFloat64() / rate * 1000
		fmt.Fprintf(&b, `{"timestamp": %.6f, "input_length": 64, "output_length": 1, "hash_ids": [7]}`+"\n", at)
	}
	path := filepath.Join(t.TempDir(), "poisson.jsonl")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// short is n, or a third of it under -short (the race detector's runs).
func short(n int) int {
	if testing.Short() {
		return n / 3
	}
	return n
}

// constantPreset is an engine whose every step takes stepUs, one request
// at a time, without prefix caching or CPU-side delays: each request of
// one output token is served in exactly one step.
func constantPreset(t testing.TB, stepUs float64) replica.Preset {
	t.Helper()
	p, err := replica.LookupPreset("llama-3.1-8b-h100")
	if err != nil {
		t.Fatal(err)
	}
	p.StepModel, p.Linear = "linear", replica.Linear{StepUs: stepUs}
	p.IngestUs, p.PerOutputTokenUs = 0, 0
	off := false
	p.Engine.AsyncScheduling = &off
	p.Engine.EnablePrefixCaching = &off
	p.Engine.MaxNumSeqs = 1
	return p
}

func queueSpec(t testing.TB, path string, replicas int, p replica.Preset) *scenario.Spec {
	return &scenario.Spec{Trace: path, Workload: workload.Options{Format: workload.FormatMooncake, Mode: workload.ModeOpenLoop, Seed: 1},
		Fleet: sim.UniformFleet(replicas, p), Env: sim.Options{Seed: 1}}
}

// TestMD1MaxRate: one replica serving every request in one constant step
// S, Poisson arrivals, is an M/D/1 queue. Pollaczek–Khinchine gives its
// mean wait W = ρ·S / (2(1 − ρ)), ρ = λS, so the highest rate at which the
// mean queue wait stays within w is λ = 2w / (S(S + 2w)). With S = 10 ms
// and w = 5 ms, λ = 50 requests/s (ρ = 0.5). The search must find it
// within 2%: its own tolerance is 0.5%, and the trace holds 40,000
// arrivals, so that the sample mean wait of the seeded draw at ρ = 0.5 is
// within about 1.5% of its expectation (W is 2× as sensitive to the rate
// there, dlnW/dlnλ = 1/(1 − ρ)); the scaled draw is the same at every
// rate, so the search's answer is that draw's, not noise between points.
func TestMD1MaxRate(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 400,000 simulated requests (about 3 s, a minute under the race detector); make test-long runs it")
	}
	const (
		stepUs = 10_000.0
		w      = 5.0 // ms
	)
	path := poissonTrace(t, 40_000, 20, 11)
	spec := queueSpec(t, path, 1, constantPreset(t, stepUs))
	terms, err := ParseSLO([]string{"queue_mean<=5ms"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Do(context.Background(), Search{Spec: spec, EPPs: []scenario.EPP{scenario.ForSource("round-robin")}, SLO: terms, Tolerance: 0.005})
	if err != nil {
		t.Fatal(err)
	}
	S := stepUs / 1000
	want := 2 * w / (S * (S + 2*w)) * 1000
	c := res.Configs[0]
	t.Logf("found %.3f req/s (want %.3f), %d points, stats %+v", c.MaxRate, want, len(c.Points), res.Stats)
	for _, p := range c.Points {
		t.Logf("  %.3f req/s holds %v %v %s", p.Rate, p.Holds, p.Runs[0].Values, p.Runs[0].StoppedEarly)
	}
	if !c.Found || math.Abs(c.MaxRate/want-1) > 0.02 {
		t.Errorf("max rate %.3f req/s (found %v), want %.3f within 2%%", c.MaxRate, c.Found, want)
	}
}

// constantTrace writes n requests like poissonTrace's, arriving every
// 1/rate seconds exactly.
func constantTrace(t testing.TB, n int, rate float64) string {
	t.Helper()
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, `{"timestamp": %.6f, "input_length": 64, "output_length": 1, "hash_ids": [7]}`+"\n", float64(i)/rate*1000)
	}
	path := filepath.Join(t.TempDir(), "constant.jsonl")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestMinReplicasLinear: requests arriving every 1/R seconds, each served
// in one constant step S, routed round-robin: replica i of n sees every
// n-th request, n/R apart, so no request ever waits while n/R ≥ S and the
// wait grows with every request once n/R < S. Such a fleet scales
// linearly: the fewest replicas that hold a queue-wait p99 of 1 ms at R
// is ⌈R / λ₁⌉, λ₁ one replica's highest rate, which the rate search
// finds (1/S = 100 requests/s, within its tolerance).
func TestMinReplicasLinear(t *testing.T) {
	const stepUs = 10_000.0
	terms, err := ParseSLO([]string{"queue_p99<=1ms"})
	if err != nil {
		t.Fatal(err)
	}
	rr := []scenario.EPP{scenario.ForSource("round-robin")}
	path := constantTrace(t, 2000, 50)
	one, err := Do(context.Background(), Search{Spec: queueSpec(t, path, 1, constantPreset(t, stepUs)), EPPs: rr, SLO: terms, Tolerance: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	l1 := one.Configs[0].MaxRate
	if !one.Configs[0].Found || math.Abs(l1/100-1) > 0.01 {
		t.Fatalf("one replica's max rate %.3f req/s (found %v), want 100 within 1%%", l1, one.Configs[0].Found)
	}
	for _, rate := range []float64{730, 1210} {
		res, err := Do(context.Background(), Search{Spec: queueSpec(t, path, 4, constantPreset(t, stepUs)), EPPs: rr, SLO: terms, Rate: rate})
		if err != nil {
			t.Fatal(err)
		}
		c := res.Configs[0]
		want := int(math.Ceil(rate / l1))
		if !c.Found || c.MinReplicas != want || c.NextReplicas != want-1 {
			t.Errorf("rate %g: min replicas %d (next %d, found %v), want ⌈%g / %.3f⌉ = %d", rate, c.MinReplicas, c.NextReplicas, c.Found, rate, l1, want)
		}
	}
}

// TestMonotoneInBound: a looser bound never finds a lower rate, on the
// same traffic and seed, for a mean and for a percentile.
func TestMonotoneInBound(t *testing.T) {
	path := poissonTrace(t, short(3000), 20, 5)
	spec := queueSpec(t, path, 1, constantPreset(t, 10_000))
	for _, bounds := range [][]string{{"queue_mean<=1ms", "queue_mean<=3ms", "queue_mean<=10ms"}, {"ttft_p99<=30ms", "ttft_p99<=60ms", "ttft_p99<=200ms"}} {
		prev := 0.0
		for _, b := range bounds {
			terms, err := ParseSLO([]string{b})
			if err != nil {
				t.Fatal(err)
			}
			res, err := Do(context.Background(), Search{Spec: spec, EPPs: []scenario.EPP{scenario.ForSource("round-robin")}, SLO: terms, Tolerance: 0.01})
			if err != nil {
				t.Fatal(err)
			}
			c := res.Configs[0]
			if !c.Found || c.MaxRate < prev {
				t.Errorf("%s: max rate %.3f (found %v), below the tighter bound's %.3f", b, c.MaxRate, c.Found, prev)
			}
			prev = c.MaxRate
		}
	}
}

// TestEarlyStopChangesNothing: the early stop only spares simulation; the
// answer and every point's verdict are those of full runs, and the runs
// it stopped are marked and carry no values.
func TestEarlyStopChangesNothing(t *testing.T) {
	path := poissonTrace(t, short(3000), 20, 9)
	spec := queueSpec(t, path, 1, constantPreset(t, 10_000))
	terms, err := ParseSLO([]string{"ttft_p99<=60ms", "queue_mean<=5ms"})
	if err != nil {
		t.Fatal(err)
	}
	s := Search{Spec: spec, EPPs: []scenario.EPP{scenario.ForSource("round-robin")}, SLO: terms, Tolerance: 0.01}
	stop, err := Do(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	s.NoEarlyStop = true
	full, err := Do(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	a, b := stop.Configs[0], full.Configs[0]
	if a.MaxRate != b.MaxRate || a.NextRate != b.NextRate || len(a.Points) != len(b.Points) || a.Binding != b.Binding {
		t.Fatalf("early stop: %.4f (next %.4f, %s), full runs: %.4f (next %.4f, %s)", a.MaxRate, a.NextRate, a.Binding, b.MaxRate, b.NextRate, b.Binding)
	}
	for i := range a.Points {
		if a.Points[i].Holds != b.Points[i].Holds {
			t.Errorf("point %d: holds %v with the early stop, %v without", i, a.Points[i].Holds, b.Points[i].Holds)
		}
		if r := a.Points[i].Runs[0]; r.StoppedEarly != "" && (r.Values != nil || r.Holds || r.FinalRequests > r.Requests) {
			t.Errorf("point %d: a stopped run %+v", i, r)
		}
	}
	if stop.Stats.Stopped == 0 || stop.Stats.Skipped == 0 || full.Stats.Stopped != 0 {
		t.Errorf("stats with the early stop %+v, without %+v", stop.Stats, full.Stats)
	}
}

// TestSameSeedSameOutput: the same search twice writes byte-identical
// files, plots included; and a search in two shards, merged, writes the
// unsharded search's files.
func TestSameSeedSameOutput(t *testing.T) {
	path := poissonTrace(t, short(1500), 20, 3)
	terms, err := ParseSLO([]string{"ttft_p99<=60ms", "success>=0.99"})
	if err != nil {
		t.Fatal(err)
	}
	epps := []scenario.EPP{scenario.ForSource("round-robin"), scenario.ForSource("least-queue"), scenario.ForSource("default")}
	search := func(shard int) *Result {
		s := Search{Spec: queueSpec(t, path, 2, constantPreset(t, 10_000)), EPPs: epps, SLO: terms, Seeds: 2}
		if shard >= 0 {
			s.Shard.I, s.Shard.N = shard, 2
		}
		r, err := Do(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	write := func(r *Result) string {
		dir := t.TempDir()
		if err := Write(dir, r, 40); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	a, b := write(search(-1)), write(search(-1))
	m, err := Merge([]*Result{search(1), search(0)}, false)
	if err != nil {
		t.Fatal(err)
	}
	merged := write(m)
	entries, err := os.ReadDir(a)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 9 {
		t.Errorf("%d files written, want 9 (capacity.json, curves.csv, capacity.md, three plots as svg and png)", len(entries))
	}
	for _, e := range entries {
		x, _ := os.ReadFile(filepath.Join(a, e.Name()))
		for _, other := range []string{b, merged} {
			y, err := os.ReadFile(filepath.Join(other, e.Name()))
			if err != nil || !bytes.Equal(x, y) {
				t.Errorf("%s differs between %s and %s (%v)", e.Name(), a, other, err)
			}
		}
	}
	if _, err := Merge([]*Result{search(0)}, false); err == nil {
		t.Error("a merge missing a shard succeeded")
	}
}

// TestInferencePerfLadderKeepsDurations: on an inference-perf ladder a
// rate multiplier scales every stage's rate and keeps its duration, so a
// point at ×m simulates about m times the requests (the early stop's
// bound, Requests, counts them), and a stage term is judged per stage.
func TestInferencePerfLadderKeepsDurations(t *testing.T) {
	cfg := `{"api":{"streaming":true,"type":"completion"},"data":{"shared_prefix":{"num_groups":3,"num_prompts_per_group":4,"output_len":40,"question_len":200,"system_prompt_len":100},"type":"shared_prefix"},` +
		`"load":{"stages":[{"duration":8,"rate":1},{"duration":8,"rate":3}],"type":"constant"},"server":{"model_name":"meta-llama/Llama-3.1-8B-Instruct","type":"vllm"}}`
	path := filepath.Join(t.TempDir(), "ladder.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := replica.LookupPreset("llama-3.1-8b-h100")
	if err != nil {
		t.Fatal(err)
	}
	spec := &scenario.Spec{Trace: workload.InferencePerfPrefix + path, Workload: workload.Options{Seed: 1}, Fleet: sim.UniformFleet(1, p), Env: sim.Options{Seed: 1}}
	terms, err := ParseSLO([]string{"stage:ttft_p90<=200ms", "success>=0.99"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Do(context.Background(), Search{Spec: spec, EPPs: []scenario.EPP{scenario.ForSource("default")}, SLO: terms, Tolerance: 0.25})
	if err != nil {
		t.Fatal(err)
	}
	c := res.Configs[0]
	if res.Scaling != "stage-rates" || !c.Found {
		t.Fatalf("scaling %q, answer %+v", res.Scaling, c)
	}
	for _, pt := range c.Points {
		r := pt.Runs[0]
		if want := int(1*pt.Multiplier*8) + int(3*pt.Multiplier*8) + 2; r.Requests != want {
			t.Errorf("×%g: %d requests bound, want %d", pt.Multiplier, r.Requests, want)
		}
		if r.StoppedEarly == "" {
			if v, ok := r.Values["stage:ttft_p90"]; !ok || !v.Defined() {
				t.Errorf("×%g: no stage TTFT p90 (%v)", pt.Multiplier, r.Values)
			}
			if r.FinalRequests < r.Requests-2 {
				t.Errorf("×%g: %d requests simulated, want %d (durations kept)", pt.Multiplier, r.FinalRequests, r.Requests-2)
			}
		}
	}
}
