package scorer

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/eppsim/eppsim/epp"
)

// goldenPath is ../shared/golden relative to the repository root.
const goldenPath = "../../testdata/shared/golden/epp-golden.json"

func loadGoldenScorers(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(goldenPath)
	if os.IsNotExist(err) {
		t.Skipf("golden file %s not present", goldenPath)
	}
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Scorers map[string]json.RawMessage `json:"scorers"`
	}
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatalf("%s: %v", goldenPath, err)
	}
	if len(g.Scorers) == 0 {
		t.Fatalf("%s: no scorers cases", goldenPath)
	}
	return g.Scorers
}

// newScorer builds a scorer through the registry, as the config layer does.
func newScorer(t *testing.T, typ, params string) epp.Scorer {
	t.Helper()
	r := epp.NewRegistry()
	Register(r)
	f, ok := r.Lookup(typ)
	if !ok {
		t.Fatalf("type %s not registered", typ)
	}
	var raw json.RawMessage
	if params != "" {
		raw = json.RawMessage(params)
	}
	p, err := f(typ, raw, epp.NewHandle(1))
	if err != nil {
		t.Fatalf("%s(%s): %v", typ, params, err)
	}
	return p.(epp.Scorer)
}

func endpoints(n int) []*epp.Endpoint {
	out := make([]*epp.Endpoint, n)
	for i := range out {
		out[i] = &epp.Endpoint{EndpointInfo: &epp.EndpointInfo{Name: fmt.Sprintf("default/pod%d", i), Labels: map[string]string{}}}
	}
	return out
}

func score(s epp.Scorer, req *epp.Request, eps []*epp.Endpoint) []float64 {
	if req == nil {
		req = &epp.Request{ID: "r"}
	}
	out := make([]float64, len(eps))
	s.Score(&epp.Cycle{}, req, eps, out)
	return out
}

// assertExact compares every score bit for bit with the golden value.
func assertExact(t *testing.T, label string, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d scores, want %d", label, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("%s: endpoint %d = %v (%b), want %v (%b)", label, i, got[i], got[i], want[i], want[i])
		}
	}
}

func TestGoldenScorers(t *testing.T) {
	g := loadGoldenScorers(t)
	handled := map[string]func(t *testing.T, raw json.RawMessage){
		"queue-scorer": func(t *testing.T, raw json.RawMessage) {
			var cases []struct {
				Q      []int     `json:"waiting_queue_sizes"`
				Scores []float64 `json:"scores"`
			}
			mustUnmarshal(t, raw, &cases)
			for _, c := range cases {
				eps := endpoints(len(c.Q))
				for i, q := range c.Q {
					eps[i].Metrics.WaitingQueueSize = q
				}
				assertExact(t, fmt.Sprint("queue ", c.Q), score(newScorer(t, QueueType, ""), nil, eps), c.Scores)
			}
		},
		"running-requests-size-scorer": func(t *testing.T, raw json.RawMessage) {
			var cases []struct {
				R      []int     `json:"running_requests"`
				Scores []float64 `json:"scores"`
			}
			mustUnmarshal(t, raw, &cases)
			for _, c := range cases {
				eps := endpoints(len(c.R))
				for i, r := range c.R {
					eps[i].Metrics.RunningRequestsSize = r
				}
				assertExact(t, fmt.Sprint("running ", c.R), score(newScorer(t, RunningRequestsType, ""), nil, eps), c.Scores)
			}
		},
		"kv-cache-utilization-scorer": func(t *testing.T, raw json.RawMessage) {
			var cases []struct {
				KV     []float64 `json:"kv_cache_usage_perc"`
				Scores []float64 `json:"raw_scores_before_clamp"`
			}
			mustUnmarshal(t, raw, &cases)
			for _, c := range cases {
				eps := endpoints(len(c.KV))
				for i, kv := range c.KV {
					eps[i].Metrics.KVCacheUsagePercent = kv
				}
				assertExact(t, fmt.Sprint("kv ", c.KV), score(newScorer(t, KVCacheUtilizationType, ""), nil, eps), c.Scores)
			}
		},
		"load-aware-scorer(threshold=128)": func(t *testing.T, raw json.RawMessage) {
			var cases []struct {
				Q      []int     `json:"waiting_queue_sizes"`
				Scores []float64 `json:"scores"`
			}
			mustUnmarshal(t, raw, &cases)
			for _, c := range cases {
				eps := endpoints(len(c.Q))
				for i, q := range c.Q {
					eps[i].Metrics.WaitingQueueSize = q
				}
				for _, params := range []string{"", `{"threshold":128}`} {
					assertExact(t, fmt.Sprint("load-aware ", params, c.Q), score(newScorer(t, LoadAwareType, params), nil, eps), c.Scores)
				}
			}
		},
		"prefix-cache-scorer": func(t *testing.T, raw json.RawMessage) {
			var cases []struct {
				MTB    [][3]int  `json:"match_total_blocksize"`
				Params string    `json:"params"`
				Scores []float64 `json:"scores"`
			}
			mustUnmarshal(t, raw, &cases)
			for _, c := range cases {
				eps := endpoints(len(c.MTB))
				for i, m := range c.MTB {
					if m == [3]int{-1, -1, -1} { // no PrefixCacheMatchInfo
						continue
					}
					eps[i].Put(epp.DataKey{Type: epp.PrefixCacheMatchInfoType, Producer: epp.ApproxPrefixProducer},
						epp.PrefixCacheMatchInfo{MatchBlocks: m[0], TotalBlocks: m[1], BlockSizeTokens: m[2], CachedBlockCount: m[0]})
				}
				assertExact(t, "prefix "+c.Params, score(newScorer(t, PrefixCacheType, c.Params), nil, eps), c.Scores)
			}
		},
		"lora-affinity-scorer": func(t *testing.T, raw json.RawMessage) {
			var cases []struct {
				Endpoints string    `json:"endpoints"`
				Scores    []float64 `json:"scores"`
				Target    string    `json:"target_model"`
			}
			mustUnmarshal(t, raw, &cases)
			const desc = "pod1 active={lora-a} max=2; pod2 active={x} max=2; pod3 active={x} waiting={lora-a} max=2; pod4 active={x,y} max=2"
			for _, c := range cases {
				if c.Endpoints != desc {
					t.Fatalf("lora golden case changed: %q", c.Endpoints)
				}
				eps := endpoints(4)
				set := func(i int, active, waiting []string) {
					m := &eps[i].Metrics
					m.MaxActiveModels = 2
					m.ActiveModels, m.WaitingModels = map[string]int{}, map[string]int{}
					for _, a := range active {
						m.ActiveModels[a] = 1
					}
					for _, w := range waiting {
						m.WaitingModels[w] = 1
					}
				}
				set(0, []string{"lora-a"}, nil)
				set(1, []string{"x"}, nil)
				set(2, []string{"x"}, []string{"lora-a"})
				set(3, []string{"x", "y"}, nil)
				assertExact(t, "lora", score(newScorer(t, LoraAffinityType, ""), &epp.Request{TargetModel: c.Target}, eps), c.Scores)
			}
		},
		"active-request-scorer": func(t *testing.T, raw json.RawMessage) {
			var cases []struct {
				Inflight []int     `json:"inflight_requests"`
				Params   string    `json:"params"`
				Scores   []float64 `json:"scores"`
			}
			mustUnmarshal(t, raw, &cases)
			re := regexp.MustCompile(`idleThreshold=([0-9.]+),maxBusyScore=([0-9.]+)`)
			for _, c := range cases {
				m := re.FindStringSubmatch(c.Params)
				if m == nil {
					t.Fatalf("unparsed active-request params %q", c.Params)
				}
				idle, _ := strconv.Atoi(m[1])
				busy, _ := strconv.ParseFloat(m[2], 64)
				params := fmt.Sprintf(`{"idleThreshold":%d,"maxBusyScore":%v}`, idle, busy)
				eps := endpoints(len(c.Inflight))
				for i, n := range c.Inflight {
					eps[i].Put(epp.DataKey{Type: epp.InFlightLoadType, Producer: epp.InFlightLoadProducer}, epp.InFlightLoad{Requests: n})
				}
				assertExact(t, "active-request "+params, score(newScorer(t, ActiveRequestType, params), nil, eps), c.Scores)
				if idle == 0 && busy == 1 {
					assertExact(t, "active-request no params", score(newScorer(t, ActiveRequestType, ""), nil, eps), c.Scores)
				}
			}
		},
		"token-load-scorer(queueThresholdTokens=1000)": func(t *testing.T, raw json.RawMessage) {
			var cases []struct {
				Loads  [][2]int  `json:"inflight_tokens_and_uncached_request_tokens"`
				Scores []float64 `json:"scores"`
			}
			mustUnmarshal(t, raw, &cases)
			for _, c := range cases {
				eps := endpoints(len(c.Loads))
				for i, l := range c.Loads {
					eps[i].Put(epp.DataKey{Type: epp.InFlightLoadType, Producer: epp.InFlightLoadProducer}, &epp.InFlightLoad{Tokens: l[0]})
					eps[i].Put(epp.DataKey{Type: epp.UncachedRequestTokensType, Producer: epp.InFlightLoadProducer}, epp.UncachedRequestTokens{Tokens: l[1]})
				}
				assertExact(t, "token-load", score(newScorer(t, TokenLoadType, `{"queueThresholdTokens":1000}`), nil, eps), c.Scores)
			}
		},
		"context-length-aware": func(t *testing.T, raw json.RawMessage) {
			var cases []struct {
				L      int       `json:"context_length_tokens"`
				Labels []string  `json:"labels"`
				Scores []float64 `json:"scores"`
			}
			mustUnmarshal(t, raw, &cases)
			for _, c := range cases {
				eps := endpoints(len(c.Labels))
				for i, l := range c.Labels {
					if l != "" { // "" is an endpoint without the label
						eps[i].Labels[DefaultContextLengthLabel] = l
					}
				}
				req := &epp.Request{}
				if c.L > 0 {
					req.Tokenized = &epp.TokenizedRequest{Prompts: [][]uint32{make([]uint32, c.L)}}
				}
				assertExact(t, fmt.Sprint("context-length L=", c.L), score(newScorer(t, ContextLengthAwareType, ""), req, eps), c.Scores)
			}
		},
	}
	for key, raw := range g {
		fn, ok := handled[key]
		if !ok {
			t.Errorf("golden scorers case %q has no conformance check", key)
			continue
		}
		t.Run(key, func(t *testing.T) { fn(t, raw) })
	}
	for key := range handled {
		if _, ok := g[key]; !ok {
			t.Errorf("conformance check for %q has no golden case", key)
		}
	}
}

func mustUnmarshal(t *testing.T, raw json.RawMessage, dst any) {
	t.Helper()
	if err := json.Unmarshal(raw, dst); err != nil {
		t.Fatal(err)
	}
}
