package workload

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// FuzzInferencePerf: any input parses or fails with an *InputError, and a
// config that parses generates requests that keep the Request contract.
func FuzzInferencePerf(f *testing.F) {
	entries, err := os.ReadDir(iperfFixtures)
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(iperfFixtures, e.Name()))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("data: {type: random, input_distribution: {total_count: 9, type: lognormal}, output_distribution: {total_count: 9, type: uniform}}\nload: {type: poisson, stages: [{rate: 3, duration: 3}]}\napi: {type: chat}\n"))
	f.Add([]byte("data: {type: synthetic, input_distribution: {total_count: 4, type: fixed, mean: 7}, output_distribution: {total_count: 4}}\nload: {stages: [{rate: 0.5, duration: 8}], interval: 0}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseInferencePerf(data, "fuzz.yaml")
		if err != nil {
			if !IsInputError(err) {
				t.Fatalf("error is not an *InputError: %v", err)
			}
			return
		}
		if sp := c.Data.SharedPrefix; sp.NumGroups*sp.NumPromptsPerGroup > 1<<12 ||
			c.Data.Input.TotalCount > 1<<12 || c.Data.Output.TotalCount > 1<<12 {
			return // valid, but slow to set up (seconds, not a bug)
		}
		s, err := NewInferencePerfSource(c, opts(Options{Seed: 3, MaxPromptTokens: 1 << 14}))
		if err != nil {
			if !IsInputError(err) {
				t.Fatalf("source error is not an *InputError: %v", err)
			}
			return
		}
		var reqs []*Request
		for range 300 {
			r, err := s.Next()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					t.Fatalf("read: %v", err)
				}
				break
			}
			reqs = append(reqs, r)
		}
		checkInvariants(t, reqs)
		// The client model: a cap (0: none) and a timeout, one count per
		// stage; every request inside its stage's schedule.
		p := s.Client()
		if p == nil || p.MaxConcurrency < 0 || p.Timeout <= 0 || p.Interval < 0 || len(p.StageRequests) != len(c.Load.Stages) {
			t.Fatalf("client %+v for %d stages", p, len(c.Load.Stages))
		}
		for _, r := range reqs {
			if r.Arrival < r.StageStart || r.Stage >= len(p.StageRequests) {
				t.Fatalf("request %d of stage %d at %d, its stage starting at %d", r.ID, r.Stage, r.Arrival, r.StageStart)
			}
		}
	})
}

// iperfDrain reads the traffic of an inference-perf config given as YAML.
func iperfDrain(t *testing.T, yml string, o Options) []*Request {
	t.Helper()
	s, err := NewSource(strings.NewReader(yml), "test.yaml", opts(withFormat(o)))
	if err != nil {
		t.Fatal(err)
	}
	reqs, err := Drain(s)
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, reqs)
	return reqs
}

func withFormat(o Options) Options {
	o.Format = FormatInferencePerf
	return o
}

func tokHash(toks []uint32) uint64 {
	h := uint64(0x6970)
	for _, x := range toks {
		h = splitmix64(h ^ uint64(x))
	}
	return h
}

type iperfBody struct {
	Model    string `json:"model"`
	Prompt   string `json:"prompt"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
	MaxTokens     int              `json:"max_tokens"`
	IgnoreEOS     *bool            `json:"ignore_eos"`
	Stream        *bool            `json:"stream"`
	StreamOptions *json.RawMessage `json:"stream_options"`
}

func decodeIPerfBody(t *testing.T, r *Request) iperfBody {
	t.Helper()
	var b iperfBody
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		t.Fatalf("request %d: body %s: %v", r.ID, r.Body, err)
	}
	return b
}

// TestInferencePerfFixtureTraffic generates the traffic of the six recorded
// workload labels and checks it request by request: counts per stage, the
// stage windows, lengths, bodies, the 10×10 prompt pool cycled in a fixed
// shuffled order (restarting with every stage, as inference-perf asks its
// data generator anew per stage), system-prompt sharing in tokens and text.
func TestInferencePerfFixtureTraffic(t *testing.T) {
	tests := []struct {
		label       string
		perStage    []int
		durations   []int // s
		sys, q, out int   // nominal lengths
		model       string
	}{
		{"general", []int{4800, 12000}, []int{600, 600}, 100, 447, 248, "meta-llama/Llama-2-70b-hf"},
		{"general-lite", []int{1500, 3600}, []int{600, 600}, 100, 447, 248, "meta-llama/Llama-3.1-8B-Instruct"},
		{"codegen", []int{3000, 6000}, []int{600, 600}, 100, 466, 247, "meta-llama/Llama-2-7b-hf"},
		{"roleplay", []int{7200}, []int{1200}, 150, 600, 251, "meta-llama/Llama-2-7b-hf"},
		{"reasoning", []int{4800}, []int{1200}, 100, 934, 1448, "meta-llama/Llama-2-7b-hf"},
		{"reasoning-lite", []int{1200}, []int{1200}, 100, 934, 1448, "meta-llama/Llama-2-7b-hf"},
	}
	tok := testTokenizer()
	for _, tc := range tests {
		t.Run(tc.label, func(t *testing.T) {
			s, err := Open(InferencePerfPrefix+filepath.Join(iperfFixtures, tc.label+".yaml"), opts(Options{Seed: 7}))
			if err != nil {
				t.Fatal(err)
			}
			sysLen := int(math.Round(float64(tc.sys) * 1.047))
			wantLen := sysLen + int(math.Round(float64(tc.q)*1.047))
			var (
				counts     = make([]int, len(tc.perStage))
				hashes     [][]uint64 // per stage, by number in the stage
				firstPool  []*Request // stage 0's first 100 requests
				prevArr    int64
				stageStart = int64(0)
			)
			for {
				r, err := s.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if r.Stage >= len(tc.perStage) {
					t.Fatalf("request %d: stage %d", r.ID, r.Stage)
				}
				if r.Stage == len(hashes) {
					hashes = append(hashes, nil)
					if r.Stage > 0 {
						// The previous stage's last arrival, its end, then
						// load.interval (1 s) and inference-perf's 1 s lead.
						stageStart = prevArr + 2e9
					}
				}
				n := counts[r.Stage]
				counts[r.Stage]++
				if r.Arrival < prevArr || r.Arrival <= stageStart {
					t.Fatalf("request %d: arrival %d (previous %d, stage start %d)", r.ID, r.Arrival, prevArr, stageStart)
				}
				prevArr = r.Arrival
				if n == tc.perStage[r.Stage]-1 {
					if want := stageStart + int64(tc.durations[r.Stage])*1e9; r.Arrival != want {
						t.Errorf("stage %d ends at %d, want %d", r.Stage, r.Arrival, want)
					}
				}
				if r.PromptLen != wantLen || len(r.PromptTokens) != wantLen || r.OutputTokens != tc.out ||
					r.Model != tc.model || r.Endpoint != EndpointCompletions || r.Prev != -1 || r.Session != "" {
					t.Fatalf("request %d: %d prompt tokens (want %d), output %d, model %q, %s", r.ID, r.PromptLen, wantLen, r.OutputTokens, r.Model, r.Endpoint)
				}
				h := tokHash(r.PromptTokens)
				hashes[r.Stage] = append(hashes[r.Stage], h)
				if n >= 100 && h != hashes[r.Stage][n-100] {
					t.Fatalf("stage %d: request %d of the stage differs from request %d", r.Stage, n, n-100)
				}
				if r.Stage > 0 && n < len(hashes[0]) && h != hashes[0][n] {
					t.Fatalf("stage %d: request %d does not restart the pool", r.Stage, n)
				}
				if r.Stage == 0 && n < 100 {
					firstPool = append(firstPool, r)
				}
			}
			for i, c := range counts {
				if c != tc.perStage[i] {
					t.Errorf("stage %d: %d requests, want %d", i, c, tc.perStage[i])
				}
			}
			// The pool: 100 distinct prompts, 10 system prompts of 10 each.
			distinct := map[uint64]bool{}
			groups := map[uint64][]*Request{}
			for _, r := range firstPool {
				distinct[tokHash(r.PromptTokens)] = true
				g := tokHash(r.PromptTokens[:sysLen])
				groups[g] = append(groups[g], r)
				b := decodeIPerfBody(t, r)
				if b.Model != tc.model || b.MaxTokens != tc.out || b.IgnoreEOS == nil || !*b.IgnoreEOS ||
					b.Stream == nil || !*b.Stream || b.StreamOptions == nil || string(*b.StreamOptions) != `{"include_usage":true}` {
					t.Fatalf("request %d: body %s", r.ID, r.Body[:120])
				}
				if ids, _ := tok.Encode(b.Prompt); !slices.Equal(ids, r.PromptTokens) {
					t.Fatalf("request %d: the prompt text does not tokenize to PromptTokens", r.ID)
				}
			}
			if len(distinct) != 100 || len(groups) != 10 {
				t.Fatalf("%d distinct prompts in %d system-prompt groups, want 100 in 10", len(distinct), len(groups))
			}
			for _, g := range groups {
				if len(g) != 10 {
					t.Fatalf("a system prompt is shared by %d prompts, want 10", len(g))
				}
				sysText, _ := tok.Decode(g[0].PromptTokens[:sysLen])
				for _, r := range g {
					if p := decodeIPerfBody(t, r).Prompt; !strings.HasPrefix(p, sysText) || len(p) == len(sysText) {
						t.Fatalf("request %d: prompt text does not start with its group's system prompt", r.ID)
					}
				}
			}
		})
	}
}

const iperfSmall = `data:
  type: shared_prefix
  shared_prefix: {num_groups: 3, num_prompts_per_group: 4, system_prompt_len: 40, question_len: 20, output_len: 9}
load:
  type: %s
  interval: %s
  stages: [{rate: 10, duration: 100}, {rate: 2, duration: 50}]
`

func iperfConfig(load, interval string) string {
	return strings.Replace(strings.Replace(iperfSmall, "%s", load, 1), "%s", interval, 1)
}

// TestInferencePerfArrivals checks the load timers: constant (jittered as
// inference-perf draws it, or evenly spaced), poisson, and the gap between
// stages.
func TestInferencePerfArrivals(t *testing.T) {
	gaps := func(reqs []*Request, stage int) []float64 {
		var g []float64
		var prev int64 = -1
		for _, r := range reqs {
			if r.Stage != stage {
				continue
			}
			if prev >= 0 {
				g = append(g, float64(r.Arrival-prev)/1e9)
			}
			prev = r.Arrival
		}
		return g
	}
	meanCV := func(g []float64) (float64, float64) {
		var s, s2 float64
		for _, x := range g {
			s += x
			s2 += x * x
		}
		m := s / float64(len(g))
		return m, math.Sqrt(s2/float64(len(g))-m*m) / m
	}
	stageBounds := func(reqs []*Request, stage int) (first, last int64, n int) {
		first = -1
		for _, r := range reqs {
			if r.Stage == stage {
				if first < 0 {
					first = r.Arrival
				}
				last = r.Arrival
				n++
			}
		}
		return
	}
	tests := []struct {
		name     string
		yml      string
		even     bool
		check    func(t *testing.T, reqs []*Request)
		interval float64
	}{
		{"constant jittered", iperfConfig("constant", "1"), false, func(t *testing.T, reqs []*Request) {
			first, last, n := stageBounds(reqs, 0)
			if n != 1000 || last != 100e9 || first <= 0 {
				t.Errorf("stage 0: %d requests, first %d, last %d ns", n, first, last)
			}
			// Gaps are exponential draws scaled to sum to the duration:
			// mean 0.1 s, coefficient of variation about 1.
			if m, cv := meanCV(gaps(reqs, 0)); math.Abs(m-0.1) > 0.002 || cv < 0.85 || cv > 1.15 {
				t.Errorf("stage 0 gaps: mean %.4f s, cv %.3f", m, cv)
			}
		}, 1},
		{"constant even", iperfConfig("constant", "1"), true, func(t *testing.T, reqs []*Request) {
			for i, r := range reqs[:1000] {
				if want := int64(i+1) * 1e8; r.Arrival != want {
					t.Fatalf("request %d at %d ns, want %d", i, r.Arrival, want)
				}
			}
			// Stage 1: 100 requests over 50 s, 0.5 s apart, after the 2 s gap.
			for i, r := range reqs[1000:] {
				if want := int64(102e9) + int64(i+1)*5e8; r.Arrival != want || r.Stage != 1 {
					t.Fatalf("stage 1 request %d at %d ns (stage %d), want %d", i, r.Arrival, r.Stage, want)
				}
			}
		}, 1},
		{"poisson", iperfConfig("poisson", "1"), false, func(t *testing.T, reqs []*Request) {
			_, _, n := stageBounds(reqs, 0)
			if n != 1000 {
				t.Fatalf("stage 0: %d requests", n)
			}
			// Per-second counts are Poisson(10): mean 10, variance 10; each
			// non-empty second's last arrival is on the second.
			perSec := map[int64]int{}
			lastIn := map[int64]int64{}
			var maxSec int64
			for _, r := range reqs[:999] { // the last second may be cut short
				sec := (r.Arrival - 1) / 1e9
				perSec[sec]++
				lastIn[sec] = r.Arrival
				maxSec = max(maxSec, sec)
			}
			var s, s2 float64
			for sec := range maxSec {
				c := float64(perSec[sec])
				s += c
				s2 += c * c
				if perSec[sec] > 0 && lastIn[sec] != (sec+1)*1e9 {
					t.Fatalf("second %d ends at %d ns", sec, lastIn[sec])
				}
			}
			m := s / float64(maxSec)
			if v := s2/float64(maxSec) - m*m; math.Abs(m-10) > 1 || v/m < 0.6 || v/m > 1.5 {
				t.Errorf("per-second counts: mean %.2f, variance/mean %.2f", m, v/m)
			}
		}, 1},
		{"interval", iperfConfig("constant", "5.5"), false, func(t *testing.T, reqs []*Request) {
			_, last0, _ := stageBounds(reqs, 0)
			first1, last1, n := stageBounds(reqs, 1)
			start := last0 + 6.5e9 // interval + the 1 s lead
			if n != 100 || first1 <= start || last1 != start+50e9 {
				t.Errorf("stage 1: %d requests over [%d, %d], stage 0 ended at %d", n, first1, last1, last0)
			}
		}, 5.5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reqs := iperfDrain(t, tc.yml, Options{Seed: 11, InferencePerf: InferencePerfOptions{EvenArrivals: tc.even}})
			if len(reqs) != 1100 {
				t.Fatalf("%d requests, want 1100", len(reqs))
			}
			tc.check(t, reqs)
		})
	}
}

func TestInferencePerfDeterminism(t *testing.T) {
	for _, load := range []string{"constant", "poisson"} {
		a := iperfDrain(t, iperfConfig(load, "1"), Options{Seed: 5})
		b := iperfDrain(t, iperfConfig(load, "1"), Options{Seed: 5})
		c := iperfDrain(t, iperfConfig(load, "1"), Options{Seed: 6})
		if len(a) != len(b) {
			t.Fatalf("%s: %d and %d requests", load, len(a), len(b))
		}
		for i := range a {
			if a[i].Arrival != b[i].Arrival || !bytes.Equal(a[i].Body, b[i].Body) || !slices.Equal(a[i].PromptTokens, b[i].PromptTokens) {
				t.Fatalf("%s: request %d differs under the same seed", load, i)
			}
		}
		if a[0].Arrival == c[0].Arrival || bytes.Equal(a[0].Body, c[0].Body) {
			t.Errorf("%s: seeds 5 and 6 give the same first request", load)
		}
	}
}

func TestInferencePerfChat(t *testing.T) {
	yml := strings.Replace(iperfConfig("constant", "1"), "data:", "api: {type: chat, streaming: false}\nserver: {model_name: m1, ignore_eos: false}\ndata:", 1)
	reqs := iperfDrain(t, yml, Options{Seed: 2})
	tok := testTokenizer()
	for _, r := range reqs[:20] {
		b := decodeIPerfBody(t, r)
		if r.Endpoint != EndpointChat || b.Model != "m1" || b.Prompt != "" || len(b.Messages) != 1 || b.Messages[0].Role != "user" ||
			b.MaxTokens != 9 || b.IgnoreEOS == nil || *b.IgnoreEOS || b.Stream == nil || *b.Stream || b.StreamOptions != nil {
			t.Fatalf("request %d: %s %s", r.ID, r.Endpoint, r.Body)
		}
		want, err := tok.ChatPrompt([]Message{{Role: "user", Content: []string{b.Messages[0].Content}}})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(r.PromptTokens, want) {
			t.Fatalf("request %d: prompt tokens are not the chat template around the content", r.ID)
		}
		// Template (5 tokens before, 5 after) around 42 + 21 content tokens.
		if r.PromptLen != 5+42+21+5 {
			t.Fatalf("request %d: %d prompt tokens", r.ID, r.PromptLen)
		}
	}
	body := string(reqs[0].Body)
	if !strings.HasPrefix(body, `{"model":"m1","messages":[{"role":"user","content":" `) ||
		!strings.HasSuffix(body, `"}],"max_tokens":9,"ignore_eos":false,"stream":false}`) {
		t.Errorf("chat body %s", body)
	}
	comp := iperfDrain(t, iperfConfig("constant", "1"), Options{Seed: 2})
	body = string(comp[0].Body)
	if !strings.HasPrefix(body, `{"model":"`+DefaultModel+`","prompt":" `) ||
		!strings.HasSuffix(body, `","max_tokens":9,"ignore_eos":true,"stream":false}`) {
		t.Errorf("completion body %s", body)
	}
}

func TestInferencePerfRandomAndSynthetic(t *testing.T) {
	const dists = `  input_distribution: {min: 50, max: 400, mean: 200, std_dev: 60, total_count: 500}
  output_distribution: {type: uniform, min: 10, max: 30, total_count: 400}
load:
  stages: [{rate: 20, duration: 20}, {rate: 10, duration: 30}]
`
	t.Run("random", func(t *testing.T) {
		reqs := iperfDrain(t, "data:\n  type: random\n"+dists, Options{Seed: 4})
		if len(reqs) != 700 {
			t.Fatalf("%d requests", len(reqs))
		}
		seen := map[uint64]bool{}
		var sum float64
		for _, r := range reqs {
			if r.PromptLen < 52 || r.PromptLen > 419 || r.OutputTokens < 10 || r.OutputTokens > 30 {
				t.Fatalf("request %d: %d prompt tokens (want round(n × 1.047), n in [50, 400]), %d output", r.ID, r.PromptLen, r.OutputTokens)
			}
			sum += float64(r.PromptLen)
			h := tokHash(r.PromptTokens[:8])
			if seen[h] {
				t.Fatalf("request %d repeats another's text", r.ID)
			}
			seen[h] = true
		}
		if m := sum / 700 / 1.047; math.Abs(m-200) > 8 {
			t.Errorf("mean nominal prompt length %.1f, want about 200", m)
		}
		// The n-th request of every stage takes the n-th lengths.
		for n := range 300 {
			a, b := reqs[n], reqs[400+n]
			if a.PromptLen != b.PromptLen || a.OutputTokens != b.OutputTokens {
				t.Fatalf("request %d of stages 0 and 1: lengths %d/%d and %d/%d", n, a.PromptLen, a.OutputTokens, b.PromptLen, b.OutputTokens)
			}
		}
	})
	t.Run("synthetic", func(t *testing.T) {
		reqs := iperfDrain(t, "data:\n  type: synthetic\n"+dists, Options{Seed: 4})
		longest := reqs[0]
		for _, r := range reqs {
			if r.PromptLen < 50 || r.PromptLen > 400 {
				t.Fatalf("request %d: %d prompt tokens (synthetic text is not inflated)", r.ID, r.PromptLen)
			}
			if r.PromptLen > longest.PromptLen {
				longest = r
			}
		}
		// Every prompt is the start of the same corpus.
		for _, r := range reqs {
			if !hasPrefix(longest.PromptTokens, r.PromptTokens) {
				t.Fatalf("request %d is not a prefix of the corpus", r.ID)
			}
		}
	})
	t.Run("fixed and lognormal", func(t *testing.T) {
		reqs := iperfDrain(t, `data:
  type: synthetic
  input_distribution: {type: fixed, mean: 77.9, total_count: 10}
  output_distribution: {type: lognormal, min: 5, max: 500, mean: 60, std_dev: 30, total_count: 400}
load:
  stages: [{rate: 1, duration: 10}]
`, Options{Seed: 4})
		for _, r := range reqs {
			if r.PromptLen != 77 || r.OutputTokens < 5 || r.OutputTokens > 500 {
				t.Fatalf("request %d: %d prompt, %d output tokens", r.ID, r.PromptLen, r.OutputTokens)
			}
		}
	})
}

// TestInferencePerfOptions covers InferencePerfOptions and Options.Model.
func TestInferencePerfOptions(t *testing.T) {
	codegen := InferencePerfPrefix + filepath.Join(iperfFixtures, "codegen.yaml")
	first := func(t *testing.T, path string, o Options) *Request {
		s, err := Open(path, opts(o))
		if err != nil {
			t.Fatal(err)
		}
		r, err := s.Next()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, tc := range []struct {
		inflation float64
		want      int
	}{{0, 105 + 488}, {-1, 566}, {0.1, 110 + 513}} { // -1: any negative value, the nominal lengths
		r := first(t, codegen, Options{InferencePerf: InferencePerfOptions{TokenInflation: tc.inflation}})
		if r.PromptLen != tc.want {
			t.Errorf("token inflation %g: %d prompt tokens, want %d", tc.inflation, r.PromptLen, tc.want)
		}
	}
	if _, err := Open(codegen, opts(Options{InferencePerf: InferencePerfOptions{TokenInflation: 2}})); err == nil {
		t.Error("token inflation 2 accepted")
	}
	if r := first(t, codegen, Options{Model: "mine"}); r.Model != "mine" || !bytes.HasPrefix(r.Body, []byte(`{"model":"mine",`)) {
		t.Errorf("model override: %q %s", r.Model, r.Body[:30])
	}
	if _, err := Open(codegen, opts(Options{Rate: 3})); err == nil || !strings.Contains(err.Error(), "sets its own rates") {
		t.Errorf("rate: %v", err)
	}

	// The legacy keys: ignored (10 × 10 pool) unless AliasKeys.
	lite := InferencePerfPrefix + filepath.Join(iperfFixtures, "general-lite.yaml")
	for _, tc := range []struct {
		alias bool
		pool  int
	}{{false, 100}, {true, 45}} {
		s, err := Open(lite, opts(Options{InferencePerf: InferencePerfOptions{AliasKeys: tc.alias}}))
		if tc.alias {
			// enable_multi_turn_chat: true cannot be honoured.
			want := filepath.Join(iperfFixtures, "general-lite.yaml") + ":5: data.shared_prefix.enable_multi_turn_chat: multi-turn shared-prefix chat is not simulated"
			if err == nil || !strings.HasPrefix(err.Error(), want) || !IsInputError(err) {
				t.Fatalf("alias keys with multi-turn: %v", err)
			}
			data, _ := os.ReadFile(filepath.Join(iperfFixtures, "general-lite.yaml"))
			data = bytes.Replace(data, []byte(`"enable_multi_turn_chat":true`), []byte(`"enable_multi_turn_chat":false`), 1)
			s, err = NewSource(bytes.NewReader(data), "lite.yaml", opts(Options{Format: FormatInferencePerf, InferencePerf: InferencePerfOptions{AliasKeys: true}}))
		}
		if err != nil {
			t.Fatal(err)
		}
		distinct := map[uint64]bool{}
		for range 200 {
			r, err := s.Next()
			if err != nil {
				t.Fatal(err)
			}
			distinct[tokHash(r.PromptTokens)] = true
		}
		if len(distinct) != tc.pool {
			t.Errorf("alias keys %v: %d distinct prompts, want %d", tc.alias, len(distinct), tc.pool)
		}
	}
}

func TestInferencePerfOpen(t *testing.T) {
	path := filepath.Join(iperfFixtures, "roleplay.yaml")
	s, err := Open(path, opts(Options{Format: FormatInferencePerf}))
	if err != nil {
		t.Fatal(err)
	}
	if s.Format() != FormatInferencePerf || s.Mode() != ModeOpenLoop || s.Name() != path {
		t.Errorf("format %s mode %s name %s", s.Format(), s.Mode(), s.Name())
	}
	if f, err := ParseFormat("inference-perf"); err != nil || f != FormatInferencePerf {
		t.Errorf("ParseFormat: %v %v", f, err)
	}
	if _, err := Open(InferencePerfPrefix+"testdata/missing.yaml", opts(Options{})); err == nil {
		t.Error("missing file accepted")
	}
	// Errors of the config carry the file name given.
	_, err = NewSource(strings.NewReader("load: {stages: [{rate: -1, duration: 5}]}\n"), "p.yaml", opts(Options{Format: FormatInferencePerf}))
	if err == nil || err.Error() != "p.yaml:1: load.stages[0].rate: must be > 0 (and at most 1e+06 requests/s), got -1" {
		t.Errorf("error %v", err)
	}
	// --time-scale stretches the schedule.
	a := iperfDrain(t, iperfConfig("constant", "1"), Options{Seed: 1})
	b := iperfDrain(t, iperfConfig("constant", "1"), Options{Seed: 1, TimeScale: 2})
	if b[999].Arrival != 2*a[999].Arrival {
		t.Errorf("time scale 2: %d vs %d", b[999].Arrival, a[999].Arrival)
	}
}

// TestInferencePerfOpenAIRoundTrip: the traffic written as OpenAI JSONL
// (what `eppsim trace synth --from inference-perf` writes) reads back as the
// same requests, stages included.
func TestInferencePerfOpenAIRoundTrip(t *testing.T) {
	for _, api := range []string{"completion", "chat"} {
		yml := strings.Replace(iperfConfig("poisson", "1"), "data:", "api: {type: "+api+", streaming: true}\ndata:", 1)
		want := iperfDrain(t, yml, Options{Seed: 9})
		var buf bytes.Buffer
		for _, r := range want {
			if err := WriteOpenAI(&buf, r); err != nil {
				t.Fatal(err)
			}
		}
		got := readAll(t, "rt.jsonl", buf.String(), Options{})
		if len(got) != len(want) {
			t.Fatalf("%s: %d requests read back, want %d", api, len(got), len(want))
		}
		for i, w := range want {
			g := got[i]
			if g.Arrival != w.Arrival || g.Stage != w.Stage || g.Endpoint != w.Endpoint || g.Model != w.Model ||
				g.OutputTokens != w.OutputTokens || !bytes.Equal(g.Body, w.Body) || !slices.Equal(g.PromptTokens, w.PromptTokens) {
				t.Fatalf("%s: request %d differs after the round trip:\n got %+v\nwant %+v", api, i, g, w)
			}
		}
		if want[len(want)-1].Stage != 1 {
			t.Fatalf("%s: no second stage", api)
		}
	}
}

func TestInferencePerfLimits(t *testing.T) {
	for _, tc := range []struct{ yml, want string }{
		{"data: {type: shared_prefix, shared_prefix: {system_prompt_len: 1048576}}\nload: {stages: [{rate: 1, duration: 1}]}\n",
			"big.yaml: data: a text segment of 1097859 tokens (after token inflation) exceeds the limit of 1048576"},
		{"data: {type: shared_prefix, shared_prefix: {question_len: 20000}}\nload: {stages: [{rate: 1, duration: 1}]}\n",
			"big.yaml: data: prompts of 21045 tokens exceed the limit of 16384"},
	} {
		_, err := NewSource(strings.NewReader(tc.yml), "big.yaml", opts(Options{Format: FormatInferencePerf, MaxPromptTokens: 1 << 14}))
		if err == nil || err.Error() != tc.want || !IsInputError(err) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
}

// TestInferencePerfStages: the stream declares the config's stages, their
// rates and durations after --time-scale; other sources declare none.
func TestInferencePerfStages(t *testing.T) {
	for _, tc := range []struct {
		scale float64
		want  []StagePlan
	}{
		{1, []StagePlan{{Rate: 10, Duration: 100, Requests: 1000}, {Rate: 2, Duration: 50, Requests: 100}}},
		{2, []StagePlan{{Rate: 5, Duration: 200, Requests: 1000}, {Rate: 1, Duration: 100, Requests: 100}}},
	} {
		s, err := NewSource(strings.NewReader(iperfConfig("constant", "1")), "test.yaml", opts(withFormat(Options{Seed: 1, TimeScale: tc.scale})))
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Stages(); !slices.Equal(got, tc.want) {
			t.Errorf("time scale %g: stages %+v, want %+v", tc.scale, got, tc.want)
		}
	}
	s, err := Open("builtin:chat", opts(Options{}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.Stages(); got != nil {
		t.Errorf("builtin:chat declares stages %+v", got)
	}
}

// TestInferencePerfRateScale: RateScale multiplies every stage's rate and
// keeps its duration: int(rate × scale × duration) requests per stage,
// within the stage's span.
func TestInferencePerfRateScale(t *testing.T) {
	base := iperfDrain(t, iperfConfig("constant", "1"), Options{Seed: 5})
	twice := iperfDrain(t, iperfConfig("constant", "1"), Options{Seed: 5, InferencePerf: InferencePerfOptions{RateScale: 2.5}})
	count := func(reqs []*Request) map[int]int {
		m := map[int]int{}
		for _, r := range reqs {
			m[r.Stage]++
		}
		return m
	}
	a, b := count(base), count(twice)
	for st, n := range a {
		if want := int(float64(n) * 2.5); b[st] < want-1 || b[st] > want+1 {
			t.Errorf("stage %d: %d requests at ×2.5, want about %d (×1: %d)", st, b[st], want, n)
		}
	}
	if last, lastB := base[len(base)-1].Arrival, twice[len(twice)-1].Arrival; float64(lastB) < 0.9*float64(last) || float64(lastB) > 1.1*float64(last) {
		t.Errorf("the ×2.5 ladder ends at %v, the written one at %v: durations must stay", lastB, last)
	}
}
