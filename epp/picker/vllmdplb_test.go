package picker

import (
	"testing"

	"github.com/eppsim/eppsim/epp"
)

// dpStep is one event of TestVLLMDPLB: a scrape of the engines' counts
// (scrape set) at ms, or a request picked at ms.
type dpStep struct {
	ms     int64
	scrape [][2]int // (waiting, running) by engine; nil: a pick
	want   int      // the engine picked
	why    string
}

// TestVLLMDPLB works vLLM's DP load balancer through by hand: score
// 4·waiting + running over the API server's copy of the counts, the first
// minimum in rank order, one added to the chosen engine's waiting count;
// the copy replaced by a publication (a changed scrape ≥ 100 ms after the
// previous publication, or any scrape 5 s after it).
func TestVLLMDPLB(t *testing.T) {
	pick := func(ms int64, want int, why string) dpStep { return dpStep{ms: ms, want: want, why: why} }
	scrape := func(ms int64, c ...[2]int) dpStep { return dpStep{ms: ms, scrape: c} }
	for _, tc := range []struct {
		name  string
		opts  DPLBOptions
		n     int
		steps []dpStep
	}{
		{"two engines", DefaultDPLBOptions(), 2, []dpStep{
			scrape(0, [2]int{0, 0}, [2]int{0, 0}),
			pick(10, 0, "copy 0,0: scores 0, 0; a tie goes to the first in rank order; copy 1w,0"),
			pick(20, 1, "scores 4, 0; copy 1w,1w"),
			pick(30, 0, "scores 4, 4: tie, rank 0; copy 2w,1w"),
			scrape(100, [2]int{0, 2}, [2]int{0, 1}),
			pick(110, 1, "publication (changed, 100 ms after the last) replaces the copy: 0w2r, 0w1r: scores 2, 1; copy e1 1w1r"),
			pick(120, 0, "scores 2, 5; copy e0 1w2r"),
			pick(130, 1, "scores 6, 5; copy e1 2w1r"),
			scrape(150, [2]int{1, 2}, [2]int{0, 2}),
			pick(160, 0, "changed but only 50 ms after the publication: no publication; scores 6, 9; copy e0 2w2r"),
			scrape(200, [2]int{0, 2}, [2]int{0, 1}),
			pick(210, 1, "the published counts again: no change seen (vLLM would republish the engines' reports of 150 ms), no publication; scores 10, 9"),
			scrape(5100, [2]int{0, 2}, [2]int{0, 1}),
			pick(5110, 1, "5 s after the publication: the heartbeat republishes; scores 2, 1"),
			scrape(5200, [2]int{0, 2}, [2]int{0, 1}),
			pick(5210, 0, "unchanged, no publication: the increment stays; scores 2, 5"),
		}},
		{"three engines", DefaultDPLBOptions(), 3, []dpStep{
			scrape(100, [2]int{1, 0}, [2]int{0, 4}, [2]int{0, 4}),
			pick(101, 0, "scores 4, 4, 4: the first minimum is rank 0"),
			pick(102, 1, "scores 8, 4, 4"),
			pick(103, 2, "scores 8, 8, 4"),
			pick(104, 0, "scores 8, 8, 8"),
			scrape(200, [2]int{0, 5}, [2]int{1, 0}, [2]int{0, 3}),
			pick(201, 2, "scores 5, 4, 3"),
			pick(202, 1, "scores 5, 4, 7"),
			pick(203, 0, "scores 5, 8, 7"),
		}},
		{"no engine counts (vLLM PR #30739 to #49204, dense models)", DPLBOptions{NoEngineCounts: true}, 2, []dpStep{
			pick(1, 0, "copy zeros: tie, rank 0"),
			pick(2, 1, "scores 4, 0"),
			pick(3, 0, "scores 4, 4"),
			scrape(100, [2]int{0, 2}, [2]int{0, 9}),
			pick(101, 1, "no counts are ever published: scores 8, 4"),
			scrape(5000, [2]int{0, 2}, [2]int{0, 9}),
			pick(5001, 0, "the heartbeat publishes zeros: a tie again"),
			pick(5002, 1, "scores 4, 0"),
			pick(10050, 0, "no pick saw the scrapes of 10 s to 10.05 s: the heartbeat of 10 s resets all the same"),
			pick(12000, 1, "no heartbeat before 15 s: scores 4, 0"),
			pick(15000, 0, "a request on the heartbeat sees it"),
		}},
		{"a change long after the last publication", DefaultDPLBOptions(), 2, []dpStep{
			scrape(0, [2]int{0, 0}, [2]int{0, 0}),
			pick(1000, 0, "no change: copy zeros; copy 1w,0"),
			scrape(1300, [2]int{0, 1}, [2]int{0, 0}),
			pick(1301, 1, "the change is published at once: 0w1r, 0: scores 1, 0"),
			scrape(1400, [2]int{0, 1}, [2]int{0, 1}),
			pick(1450, 0, "changed, 100 ms after the last publication: scores 1, 1; tie, rank 0"),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewVLLMDPLB("lb", tc.opts)
			e := eps(tc.n)
			for i, s := range tc.steps {
				if s.scrape != nil {
					for k, c := range s.scrape {
						e[k].Metrics = epp.Metrics{WaitingQueueSize: c[0], RunningRequestsSize: c[1], UpdateTime: s.ms * 1e6}
					}
					continue
				}
				got := p.Pick(&epp.Cycle{Now: s.ms * 1e6}, nil, scoredOf(e, make([]float64, tc.n)...))
				if len(got) != 1 || got[0] != e[s.want] {
					t.Fatalf("step %d (%d ms): picked %v, want %s (%s)", i, s.ms, got, e[s.want].Name, s.why)
				}
			}
		})
	}
	if got := NewVLLMDPLB("lb", DPLBOptions{}).Pick(&epp.Cycle{}, nil, nil); got != nil {
		t.Errorf("no candidates: %v", got)
	}
	if o := NewVLLMDPLB("lb", DPLBOptions{}).Options(); o.PublishInterval != 100e6 || o.Heartbeat != 5e9 || o.NoEngineCounts {
		t.Errorf("defaults %+v", o)
	}
}
