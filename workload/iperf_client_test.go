package workload

import (
	"slices"
	"strings"
	"testing"
)

// TestInferencePerfClientPlan: the client model of a config resolves
// num_workers × worker_max_concurrency with inference-perf v0.2.0's
// defaults (num_workers = the CPU count, worker_max_concurrency 100),
// the timeout (load.request_timeout, else aiohttp's 300 s), and the flags'
// overrides.
func TestInferencePerfClientPlan(t *testing.T) {
	base := iperfConfig("constant", "2.5")
	withLoad := func(extra string) string {
		return strings.Replace(base, "load:\n", "load:\n"+extra, 1)
	}
	for _, tc := range []struct {
		name            string
		yml             string
		o               InferencePerfOptions
		nil_            bool
		cap, workers, m int
		timeout         int64
	}{
		{"defaults", base, InferencePerfOptions{}, false, 22400, 224, 100, 300e9},
		{"cpus", base, InferencePerfOptions{CPUs: 2}, false, 200, 2, 100, 300e9},
		{"explicit", withLoad("  num_workers: 16\n  worker_max_concurrency: 10\n  request_timeout: 60\n"), InferencePerfOptions{CPUs: 2}, false, 160, 16, 10, 60e9},
		{"workers-only", withLoad("  num_workers: 3\n"), InferencePerfOptions{}, false, 300, 3, 100, 300e9},
		// num_workers: 0 is inference-perf's single-process path: no cap.
		{"single-process", withLoad("  num_workers: 0\n"), InferencePerfOptions{}, false, 0, 0, 100, 300e9},
		{"overrides", withLoad("  request_timeout: 60\n"), InferencePerfOptions{MaxConcurrency: 7, RequestTimeout: 5e9}, false, 7, 224, 100, 5e9},
		{"open-loop", base, InferencePerfOptions{OpenLoop: true}, true, 0, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewSource(strings.NewReader(tc.yml), "test.yaml", opts(withFormat(Options{Seed: 1, InferencePerf: tc.o})))
			if err != nil {
				t.Fatal(err)
			}
			p := s.Client()
			if tc.nil_ {
				if p != nil {
					t.Fatalf("client %+v with OpenLoop", p)
				}
				return
			}
			if p == nil {
				t.Fatal("no client")
			}
			if p.MaxConcurrency != tc.cap || p.NumWorkers != tc.workers || p.WorkerMaxConcurrency != tc.m || p.Timeout != tc.timeout {
				t.Errorf("client %+v, want cap %d = %d × %d, timeout %d", p, tc.cap, tc.workers, tc.m, tc.timeout)
			}
			if p.Interval != 2.5e9 || p.Lead != 1e9 || p.Poll != 1e9 || !slices.Equal(p.StageRequests, []int{1000, 100}) {
				t.Errorf("client %+v: interval 2.5 s, lead and poll 1 s, stages of 1000 and 100 requests", p)
			}
			if p.Streaming || p.UsageChunk {
				t.Errorf("client %+v streams, the config does not", p)
			}
		})
	}
	// The time scale stretches the schedule's own times, not the timeout.
	s, err := NewSource(strings.NewReader(base), "test.yaml", opts(withFormat(Options{Seed: 1, TimeScale: 2})))
	if err != nil {
		t.Fatal(err)
	}
	if p := s.Client(); p.Interval != 5e9 || p.Lead != 2e9 || p.Poll != 2e9 || p.Timeout != 300e9 {
		t.Errorf("time scale 2: client %+v", p)
	}
	// Other formats have no client.
	s, err = Open("builtin:chat", opts(Options{}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if p := s.Client(); p != nil {
		t.Errorf("builtin:chat has a client %+v", p)
	}
	// A streaming config's bodies ask for usage: the stream has a usage
	// chunk.
	s, err = NewSource(strings.NewReader(base+"api: {streaming: true}\n"), "test.yaml", opts(withFormat(Options{Seed: 1})))
	if err != nil {
		t.Fatal(err)
	}
	if p := s.Client(); !p.Streaming || !p.UsageChunk {
		t.Errorf("streaming config: client %+v", p)
	}
}

// TestInferencePerfClientOptionErrors: bad client values are refused.
func TestInferencePerfClientOptionErrors(t *testing.T) {
	for _, o := range []InferencePerfOptions{{CPUs: -1}, {MaxConcurrency: -2}, {RequestTimeout: -1}} {
		if _, err := NewSource(strings.NewReader(iperfConfig("constant", "1")), "test.yaml", opts(withFormat(Options{InferencePerf: o}))); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

// TestInferencePerfStageStart: every request carries its stage's schedule
// start: 0 for the first stage, the previous stage's last arrival +
// load.interval + 1 s for the next (as generated open-loop), so Arrival -
// StageStart is the request's place in its stage; the time scale scales
// both.
func TestInferencePerfStageStart(t *testing.T) {
	for _, scale := range []float64{1, 0.5} {
		reqs := iperfDrain(t, iperfConfig("constant", "3"), Options{Seed: 4, TimeScale: scale})
		var last0 int64
		var start1 int64 = -1
		for _, r := range reqs {
			switch r.Stage {
			case 0:
				if r.StageStart != 0 {
					t.Fatalf("stage 0 request %d starts at %d", r.ID, r.StageStart)
				}
				last0 = r.Arrival
			case 1:
				if start1 < 0 {
					start1 = r.StageStart
				}
				if r.StageStart != start1 || r.Arrival < r.StageStart {
					t.Fatalf("stage 1 request %d: start %d (first %d), arrival %d", r.ID, r.StageStart, start1, r.Arrival)
				}
			}
		}
		// Stage 0 ends exactly at its duration (100 s), so stage 1
		// starts at 100 + 3 + 1 s.
		want := int64(104e9 * scale)
		if d := start1 - want; d < -1 || d > 1 || last0 != int64(100e9*scale) {
			t.Errorf("scale %g: stage 1 starts at %d, want %d (stage 0's last arrival %d)", scale, start1, want, last0)
		}
	}
}
