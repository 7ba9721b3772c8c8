package scenario

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/sim"
	"github.com/eppsim/eppsim/workload"
)

// TestRunStages: an inference-perf ladder of two stages, evenly spaced
// (--iperf-even-arrivals), reports each stage as cutting the run's records
// by stage gives it. By hand: stage 0 sends int(2 × 10) = 20 requests at
// 10 × k/20 s, k = 1 … 20, so from 0.5 s to 10 s: 20 requests over 9.5 s.
// Through inference-perf's client (enqueued 1 s before its schedule, at
// -1 s, and polled every second from then), stage 0 ends at the first poll
// after its last request ends, a fraction of a second after 10 s: at 11 s;
// stage 1 is enqueued interval = 1 s later and its schedule starts 1 s
// after that, at 13 s: int(5 × 4) = 20 requests at 13 + 4 × k/20 s, from
// 13.2 s to 17 s, 20 over 3.8 s.
func TestRunStages(t *testing.T) {
	dir := t.TempDir()
	profile := filepath.Join(dir, "ladder.yaml")
	yml := `load:
  type: constant
  stages: [{rate: 2, duration: 10}, {rate: 5, duration: 4}]
data:
  type: shared_prefix
  shared_prefix: {num_groups: 3, num_prompts_per_group: 2, system_prompt_len: 1000, question_len: 100, output_len: 30}
`
	if err := os.WriteFile(profile, []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := replica.LookupPreset("llama-3.1-8b-h100")
	if err != nil {
		t.Fatal(err)
	}
	spec := &Spec{Version: "test", Trace: workload.InferencePerfPrefix + profile,
		Workload: workload.Options{Seed: 3, InferencePerf: workload.InferencePerfOptions{EvenArrivals: true}},
		Fleet:    sim.UniformFleet(2, p), Env: sim.Options{Seed: 3}}
	var recs []sim.Record
	s, err := Run(spec, ForSource("default"), Hooks{OnRecord: func(r *sim.Record) { recs = append(recs, *r) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Stages) != 2 {
		t.Fatalf("stages %+v", s.Stages)
	}
	hand := []struct {
		rate, first, span float64
	}{{2, 0.5, 9.5}, {5, 13.2, 3.8}}
	var end0 int64
	for _, r := range recs {
		if r.Stage == 0 {
			end0 = max(end0, r.Completion)
		}
	}
	if end0 <= 10*1e9 || end0 > 11*1e9 {
		t.Fatalf("stage 0 ends at %d ns, not in (10 s, 11 s]", end0)
	}
	for k, st := range s.Stages {
		h := hand[k]
		if st.Stage != k || st.RequestedRate.Float() != h.rate || st.Requests != 20 || math.Abs(st.FirstArrivalS.Float()-h.first) > 1e-9 ||
			math.Abs(st.SendSpanS.Float()-h.span) > 1e-9 || math.Abs(st.RequestsPerS.Float()-20/h.span) > 1e-9 {
			t.Errorf("stage %d: %+v, want rate %g, 20 requests from %g s over %g s", k, st, h.rate, h.first, h.span)
		}
		// The rest as requests.csv cut by stage gives it.
		var ttft []float64
		var out, completed int
		first, end := int64(math.MaxInt64), int64(0)
		var tpot float64
		for _, r := range recs {
			if r.Stage != k {
				continue
			}
			first = min(first, r.Arrival)
			end = max(end, r.Completion, r.Arrival)
			if r.Outcome == sim.Completed {
				completed++
				out += r.OutputTokens
				ttft = append(ttft, float64(r.TTFT)/1e6)
				tpot += float64(r.E2E-r.TTFT) / 1e6 / float64(r.OutputTokens-1)
			}
		}
		slices.Sort(ttft)
		p90 := ttft[int(math.Ceil(0.9*float64(len(ttft))))-1]
		if st.Completed != completed || st.SuccessRate.Float() != float64(completed)/20 || st.TTFT.P90.Float() != p90 ||
			math.Abs(st.OutputTokensPerS.Float()-float64(out)/(float64(end-first)/1e9)) > 1e-9 ||
			math.Abs(st.ITLMean.Float()-tpot/float64(completed)) > 1e-9 {
			t.Errorf("stage %d: %+v; records: %d completed, TTFT p90 %g, %d output tokens over %d ns", k, st, completed, p90, out, end-first)
		}
		if st.GaugeSamples == 0 || !(st.KVUsage.Max.Float() > 0) || st.Waiting.Mean.Float() < 0 {
			t.Errorf("stage %d gauges: %d samples, waiting %+v, KV %+v", k, st.GaugeSamples, st.Waiting, st.KVUsage)
		}
	}
	// Stage 0's part of the run ends at stage 1's first arrival, 13.2 s:
	// 13.2 s ÷ 50 ms = 264 scrapes from the first arrival at 0.5 s (10
	// scrapes, 0 … 0.45 s, before it), on each of 2 replicas.
	if got := s.Stages[0].GaugeSamples; got != 2*(264-10) {
		t.Errorf("stage 0: %d gauge samples, want %d", got, 2*(264-10))
	}
}
