package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// benchSet is one published llm-d benchmark of ../shared/benchmarks and
// the eppsim fleet that stands for its pods (docs/benchmarks.md, "The
// fleets"). The fleet flags restate the set's published.json "fleet":
// model, tensor parallelism, pods, KV tokens per pod (vLLM's logged "GPU
// KV cache size", blocks × block size, so --num-gpu-blocks-override is
// that ÷ 64) and block size 64; where the GPU is not stated, H100.
type benchSet struct {
	dir   string
	fleet []string
	// sameAs names the set this one duplicates (the benchmarks README,
	// "Duplicates"): its own tables are compared, its traffic is the
	// other's.
	sameAs string
	// whatIf, when set, is a second fleet simulated for comparison only
	// (docs/benchmarks.md, "The 20-token sets"): chosen after the
	// published figures were seen, so it is not a reproduction.
	whatIf []string
}

var benchSets = []benchSet{
	// 73-capacity's gateway let 1024 requests through at once: in its
	// re-run every stage of N > 1024 requests lost exactly N − 1024 under
	// every router (published.json rerun_2025_10_06_failures), the
	// signature of Envoy's default circuit breaker on the EPP's ext_proc
	// cluster (docs/benchmarks.md, "The gateway").
	{dir: "73-capacity", fleet: []string{"--model-config", "Qwen/Qwen3-32B", "--gpu", "H100", "--tp", "2", "--replicas", "8",
		"--block-size", "64", "--max-model-len", "12000", "--num-gpu-blocks-override", "4802", "--gateway-max-requests", "1024"}},
	{dir: "standard-scale-64p-cache-load", fleet: llama70B("4", "2204", "H100")},
	{dir: "standard-scale-75p-cache-load", fleet: llama70B("4", "2204", "H100"), sameAs: "standard-scale-64p-cache-load"},
	{dir: "cache-overload-60-users-4k-tokens", fleet: llama70B("2", "625", "H100"), whatIf: slow20},
	{dir: "medium-scale-frequent-evictions", fleet: llama70B("2", "625", "H100"), sameAs: "cache-overload-60-users-4k-tokens"},
	{dir: "cache-overload-80-users-3k-tokens", fleet: llama70B("2", "625", "H100"), whatIf: slow20},
	{dir: "medium-scale-frequent-evictions-60-users-high-qps", fleet: llama70B("2", "625", "H100"), whatIf: slow20},
}

// slow20 is the what-if of the 20-token sets: A100-80GB pods instead of
// H100, and inference-perf's concurrency capped at the ~160 requests in
// flight that Little's law finds in their tables (the benchmarks README,
// caveat e; docs/workloads.md, "Client concurrency").
var slow20 = append(llama70B("2", "625", "A100-80GB"), "--iperf-max-concurrency", "160")

// llama70B is the four Llama-3.1-70B-Instruct pods of the 64p/75p
// (TP 4, 141,056 KV tokens) and the 20-token sets (TP 2, 40k KV tokens).
// At TP 2 the weights leave an H100 almost no memory, so the published
// 40k tokens are given as blocks, not computed.
func llama70B(tp, blocks, gpu string) []string {
	return []string{"--model-config", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", gpu, "--tp", tp, "--replicas", "4",
		"--block-size", "64", "--num-gpu-blocks-override", blocks}
}

// published is the part of a set's published.json the comparison reads.
type published struct {
	Configs map[string]string                  `json:"configs"` // table label → config file
	Stages  map[string]map[string]publishedRow `json:"stages"`  // requested QPS → label → row
	Summary map[string]publishedRow            `json:"summary"`
	// QueueKV is the whole-run waiting queue and KV usage per label, where
	// a set publishes them (73-capacity).
	QueueKV map[string]queueKV `json:"queue_kv"`
	order   []string           // labels, sorted
	rates   []string           // stage keys by rate
}

// publishedRow holds the columns used here; a column a table lacks is nil.
type publishedRow struct {
	OutTokS  *float64 `json:"out_tok_s"`
	ReqS     *float64 `json:"req_s"`
	Success  *float64 `json:"success_rate_pct"`
	TTFTMean *float64 `json:"ttft_mean_s"`
	TTFTP90  *float64 `json:"ttft_p90_s"`
	ITLMean  *float64 `json:"itl_mean_s"`
}

// queueKV is a published whole-run "Wait Queue" and "KV Cache %" row.
type queueKV struct {
	WaitMean  *float64 `json:"wait_queue_mean"`
	WaitP90   *float64 `json:"wait_queue_p90"`
	WaitMax   *float64 `json:"wait_queue_max"`
	KVPctMean *float64 `json:"kv_cache_pct_mean"`
	KVPctP90  *float64 `json:"kv_cache_pct_p90"`
	KVPctMax  *float64 `json:"kv_cache_pct_max"`
}

// simGauges is a run's summary.json "staged_gauges", as far as read here.
type simGauges struct {
	Waiting struct{ Mean, P90, Max *float64 } `json:"waiting"`
	KVUsage struct{ Mean, P90, Max *float64 } `json:"kv_usage"`
}

func readPublished(path string) (*published, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var p published
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for k := range p.Stages {
		p.rates = append(p.rates, k)
	}
	slices.SortFunc(p.rates, func(a, b string) int { return cmp.Compare(rateOf(a), rateOf(b)) })
	for l := range p.Configs {
		p.order = append(p.order, l)
	}
	slices.Sort(p.order)
	return &p, nil
}

func rateOf(key string) float64 {
	v, _ := strconv.ParseFloat(key, 64)
	return v
}

// simStage is one summary.json "stages" entry, as far as read here.
type simStage struct {
	Rate     *float64 `json:"requested_rate"`
	Requests int      `json:"requests"`
	Complete int      `json:"completed"`
	Success  *float64 `json:"success_rate"`
	ReqS     *float64 `json:"requests_per_s"`
	OutTokS  *float64 `json:"output_tokens_per_s"`
	TTFT     struct {
		Mean *float64 `json:"mean"`
		P90  *float64 `json:"p90"`
	} `json:"ttft_ms"`
	ITLMean   *float64 `json:"itl_mean_ms"`
	ITLStream *float64 `json:"itl_stream_mean_ms"`
}

// itl is the stage's ITL as inference-perf counts it (over stream
// events), or its TPOT where the requests were not streamed.
func (s simStage) itl() *float64 {
	if s.ITLStream != nil {
		return s.ITLStream
	}
	return s.ITLMean
}

// benchRun is one set simulated: per config label, the stage that stands
// for each published stage key.
type benchRun struct {
	set    benchSet
	pub    *published
	args   []string
	stages map[string]map[string]simStage // label → stage key → stage
	gauges map[string]simGauges           // label → gauges over all stages
}

// benchArgs is the `eppsim run` of a set with paths relative to the
// repository's parent (as docs/benchmarks.md shows them); root is
// prepended to every ../shared path.
func benchArgs(s benchSet, fleet []string, p *published, root string) []string {
	dir := filepath.Join(root, "../shared/benchmarks", s.dir)
	args := []string{"run", "--trace", "inference-perf:" + filepath.Join(dir, "inference-perf.yaml")}
	args = append(args, fleet...)
	// The published runs' router: llm-d-inference-scheduler v0.2.x
	// (the benchmarks README, caveat d).
	args = append(args, "--epp-release", "llm-d-v0.2")
	for _, l := range p.order {
		args = append(args, "--epp-config", filepath.Join(dir, p.Configs[l]))
	}
	return args
}

// runBenchSet simulates a set and pairs its stages with the published
// ones: a published stage key is a requested rate, and where the ladder
// has several stages of that rate (73-capacity's 15 req/s warm-up and
// ladder step, 64p's 10 req/s prewarm and ladder step) the later, the
// ladder's, stands for it (the benchmarks README, "Summary rows").
func runBenchSet(t *testing.T, s benchSet, fleet []string) *benchRun {
	t.Helper()
	dir := filepath.Join("../../../shared/benchmarks", s.dir)
	p, err := readPublished(filepath.Join(dir, "published.json"))
	if err != nil {
		t.Fatal(err)
	}
	args := benchArgs(s, fleet, p, "../..")
	out, stderr, err := runCLI(t, append(args, "--json", "--progress", "never")...)
	if err != nil {
		t.Fatalf("%s: %v\n%s", s.dir, err, stderr)
	}
	var doc struct {
		Runs map[string]struct {
			Stages []simStage `json:"stages"`
			Gauges simGauges  `json:"staged_gauges"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%s: %v", s.dir, err)
	}
	r := &benchRun{set: s, pub: p, args: benchArgs(s, fleet, p, ""), stages: map[string]map[string]simStage{}, gauges: map[string]simGauges{}}
	for _, l := range p.order {
		name := strings.TrimSuffix(p.Configs[l], filepath.Ext(p.Configs[l]))
		run, ok := doc.Runs[name]
		if !ok {
			t.Fatalf("%s: no run %q in the summary", s.dir, name)
		}
		m := map[string]simStage{}
		for _, st := range run.Stages {
			if st.Rate == nil {
				continue
			}
			for _, k := range p.rates {
				if math.Abs(rateOf(k)-*st.Rate) < 1e-9 {
					m[k] = st // the later stage of a rate wins
				}
			}
		}
		for _, k := range p.rates {
			if _, ok := m[k]; !ok {
				t.Fatalf("%s %s: no simulated stage at the published rate %s", s.dir, l, k)
			}
		}
		r.stages[l] = m
		r.gauges[l] = run.Gauges
	}
	return r
}

// benchTargets are issue #19's targets on one set.
type benchTargets struct {
	sameSide, cells  int                // (a) TTFT p90 on the published side of 10 s
	pubRank, simRank []string           // (b) labels by whole-ladder TTFT mean
	saturated        map[string]float64 // (c) label → simulated ÷ published top-stage TTFT p90, configs published ≥ 10 s there
	itlPub, itlSim   map[string]float64 // (d) label → top-stage ÷ lightest-stage ITL
}

func (r *benchRun) targets() benchTargets {
	p := r.pub
	tg := benchTargets{saturated: map[string]float64{}, itlPub: map[string]float64{}, itlSim: map[string]float64{}}
	simMean := map[string]float64{}
	for _, l := range p.order {
		var wsum, w float64
		for _, k := range p.rates {
			pub, sim := p.Stages[k][l], r.stages[l][k]
			if pub.TTFTP90 != nil && sim.TTFT.P90 != nil {
				tg.cells++
				if (*pub.TTFTP90 >= 10) == (*sim.TTFT.P90/1e3 >= 10) {
					tg.sameSide++
				}
			}
			if sim.TTFT.Mean != nil {
				wsum += float64(sim.Complete) * *sim.TTFT.Mean / 1e3
				w += float64(sim.Complete)
			}
		}
		if w > 0 {
			simMean[l] = wsum / w
		}
		lo, hi := p.rates[0], p.rates[len(p.rates)-1]
		if pub, sim := p.Stages[hi][l], r.stages[l][hi]; pub.TTFTP90 != nil && *pub.TTFTP90 >= 10 && sim.TTFT.P90 != nil {
			tg.saturated[l] = *sim.TTFT.P90 / 1e3 / *pub.TTFTP90
		}
		if a, b := p.Stages[hi][l].ITLMean, p.Stages[lo][l].ITLMean; a != nil && b != nil && *b > 0 {
			tg.itlPub[l] = *a / *b
		}
		if a, b := r.stages[l][hi].itl(), r.stages[l][lo].itl(); a != nil && b != nil && *b > 0 {
			tg.itlSim[l] = *a / *b
		}
	}
	tg.pubRank = slices.Clone(p.order)
	slices.SortStableFunc(tg.pubRank, func(a, b string) int { return cmp.Compare(val(p.Summary[a].TTFTMean), val(p.Summary[b].TTFTMean)) })
	tg.simRank = slices.Clone(p.order)
	slices.SortStableFunc(tg.simRank, func(a, b string) int { return cmp.Compare(simMean[a], simMean[b]) })
	return tg
}

func val(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

// cell prints a published and a simulated value side by side.
func cell(pub, sim *float64, scale float64, format string) string {
	f := func(p *float64, s float64) string {
		if p == nil || math.IsNaN(*p) {
			return "–"
		}
		return fmt.Sprintf(format, *p*s)
	}
	return f(pub, 1) + " / " + f(sim, scale)
}

// benchTable renders one set: its command, then per published stage and
// config the published and simulated columns.
func benchTable(r *benchRun) string {
	var b strings.Builder
	p := r.pub
	fmt.Fprintf(&b, "### %s\n\n", r.set.dir)
	if r.set.sameAs != "" {
		fmt.Fprintf(&b, "The same traffic, fleet and configs as %s (the benchmarks README, \"Duplicates\"); its tables are compared here on their own.\n\n", r.set.sameAs)
	}
	b.WriteString("```sh\neppsim " + strings.Join(r.args, " ") + " --out out/bench/" + r.set.dir + "\n```\n\n")
	b.WriteString("Each cell is published / eppsim. ITL is inference-perf's mean over the stream's events on both sides (eppsim's `itl_stream_mean_ms`, docs/metrics.md).\n\n")
	b.WriteString("| QPS | config | TTFT p90 (s) | TTFT mean (s) | ITL mean (ms) | output tok/s | req/s | success % |\n")
	b.WriteString("|--:|---|--:|--:|--:|--:|--:|--:|\n")
	for _, k := range p.rates {
		for _, l := range p.order {
			pub, sim := p.Stages[k][l], r.stages[l][k]
			var itlPub *float64
			if pub.ITLMean != nil {
				v := *pub.ITLMean * 1e3
				itlPub = &v
			}
			var succ *float64
			if sim.Success != nil {
				v := *sim.Success * 100
				succ = &v
			}
			ttftP90, ttftMean := scaled(sim.TTFT.P90, 1e-3), scaled(sim.TTFT.Mean, 1e-3)
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", strings.TrimSuffix(k, ".0"), l,
				cell(pub.TTFTP90, ttftP90, 1, "%.2f"), cell(pub.TTFTMean, ttftMean, 1, "%.2f"),
				cell(itlPub, sim.itl(), 1, "%.0f"), cell(pub.OutTokS, sim.OutTokS, 1, "%.0f"),
				cell(pub.ReqS, sim.ReqS, 1, "%.2f"), cell(pub.Success, succ, 1, "%.1f"))
		}
	}
	b.WriteString("\n")
	if len(p.QueueKV) > 0 {
		b.WriteString("Over the whole run, published / eppsim: the waiting queue and KV usage the EPP scraped from every pod (eppsim's `staged_gauges`, every stage's scrapes together, docs/metrics.md).\n\n")
		b.WriteString("| config | waiting mean | waiting p90 | waiting max | KV % mean | KV % p90 | KV % max |\n")
		b.WriteString("|---|--:|--:|--:|--:|--:|--:|\n")
		for _, l := range p.order {
			pub, g := p.QueueKV[l], r.gauges[l]
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", l,
				cell(pub.WaitMean, g.Waiting.Mean, 1, "%.1f"), cell(pub.WaitP90, g.Waiting.P90, 1, "%.0f"), cell(pub.WaitMax, g.Waiting.Max, 1, "%.0f"),
				cell(pub.KVPctMean, scaled(g.KVUsage.Mean, 100), 1, "%.1f"), cell(pub.KVPctP90, scaled(g.KVUsage.P90, 100), 1, "%.1f"), cell(pub.KVPctMax, scaled(g.KVUsage.Max, 100), 1, "%.1f"))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func scaled(p *float64, s float64) *float64 {
	if p == nil {
		return nil
	}
	v := *p * s
	return &v
}

// benchSummary renders the targets of every set.
func benchSummary(runs []*benchRun) string {
	var b strings.Builder
	b.WriteString("| set | (a) TTFT p90 on the published side of 10 s | (b) ranking by TTFT mean, published | eppsim | (c) saturated at the top stage: eppsim ÷ published TTFT p90 | (d) ITL top ÷ lightest stage, published / eppsim |\n")
	b.WriteString("|---|--:|---|---|---|---|\n")
	var same, cells int
	for _, r := range runs {
		tg := r.targets()
		same += tg.sameSide
		cells += tg.cells
		var sat, itl []string
		for _, l := range r.pub.order {
			if v, ok := tg.saturated[l]; ok {
				sat = append(sat, fmt.Sprintf("%s %.2f", l, v))
			}
			if a, ok := tg.itlPub[l]; ok {
				itl = append(itl, fmt.Sprintf("%s %.2f / %.2f", l, a, tg.itlSim[l]))
			}
		}
		if len(sat) == 0 {
			sat = []string{"none published ≥ 10 s"}
		}
		fmt.Fprintf(&b, "| %s | %d of %d | %s | %s | %s | %s |\n", r.set.dir, tg.sameSide, tg.cells,
			strings.Join(tg.pubRank, " < "), strings.Join(tg.simRank, " < "), strings.Join(sat, "; "), strings.Join(itl, "; "))
	}
	fmt.Fprintf(&b, "| all | %d of %d (%.0f%%) | | | | |\n\n", same, cells, 100*float64(same)/float64(max(cells, 1)))
	return b.String()
}

const (
	benchDoc   = "../../docs/benchmarks.md"
	benchBegin = "<!-- benchmark tables: generated by TestPublishedBenchmarks (cmd/eppsim/benchmarks_test.go) -->\n"
	benchEnd   = "<!-- end of the generated benchmark tables -->\n"
)

// TestPublishedBenchmarks simulates every set of ../shared/benchmarks with
// its published configs and checks that docs/benchmarks.md holds the
// tables the current code produces; with EPPSIM_UPDATE_DOCS=1 it rewrites
// them instead. It needs ../shared and takes about a minute, so it does
// not run with -short.
func TestPublishedBenchmarks(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates seven published benchmark ladders")
	}
	if _, err := os.Stat("../../../shared/benchmarks"); err != nil {
		t.Skip("../shared/benchmarks not found")
	}
	var runs, whatIfs []*benchRun
	for _, s := range benchSets {
		runs = append(runs, runBenchSet(t, s, s.fleet))
		if s.whatIf != nil {
			whatIfs = append(whatIfs, runBenchSet(t, s, s.whatIf))
		}
	}
	var b strings.Builder
	b.WriteString("#### The targets, set by set\n\n")
	b.WriteString(benchSummary(runs))
	b.WriteString("#### What-if: the 20-token sets on A100-80GB pods behind a client capped at 160 requests\n\n")
	b.WriteString("Not a reproduction: both choices were made after the published throughput was seen (\"The 20-token sets\", below).\n\n")
	b.WriteString(benchSummary(whatIfs))
	for _, r := range whatIfs {
		b.WriteString("```sh\neppsim " + strings.Join(r.args, " ") + "\n```\n\n")
	}
	for _, r := range runs {
		b.WriteString(benchTable(r))
	}
	checkGeneratedSection(t, benchDoc, benchBegin, benchEnd, b.String())
}
