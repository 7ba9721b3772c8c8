package latency

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The results-directory fixtures (testdata/results/) are measured runs of
// ../shared/latency/experiments.json written back in the format
// inference-perf gave them: its resolved config.yaml (the run's
// workload_raw, verbatim), summary_lifecycle_metrics.json and one
// stage_N_lifecycle_metrics.json per stage (the run's measured values,
// seconds again), and an engine.yaml with the run's model, GPU, TP and
// engine arguments. go test -run TestResultsFixtures -update-fixtures
// rewrites them; without the flag the test checks that they are what the
// generator writes.
var updateFixtures = flag.Bool("update-fixtures", false, "rewrite testdata/results from ../shared/latency/experiments.json")

// experimentsFile is the measured runs of ../shared.
const experimentsFile = "../../shared/latency/experiments.json"

// resultsFixture is one results directory of testdata/results.
type resultsFixture struct {
	dir string // under testdata/results
	id  string // the experiments.json run
	// engineID is the engine file's id ("" to let the run be named by its
	// directory).
	engineID string
}

var resultsFixtures = []resultsFixture{
	{dir: "llama-2-7b-tp1-codegen", id: "training/default_args/20260217-155451-llama-2-7b-tp1-codegen"},
	{dir: "mixtral-8x7b-tp2-roleplay", id: "training/default_args/20260218-141024-mixtral-8x7b-v0-1-tp2-roleplay", engineID: "mixtral-8x7b-tp2-roleplay (inference-perf results)"},
	{dir: "llama-2-7b-tp1-reasoning-overloaded", id: "training/default_args/20260217-170634-llama-2-7b-tp1-reasoning"},
}

func fixtureDir(f resultsFixture) string { return filepath.Join("testdata", "results", f.dir) }

// loadSharedRuns reads ../shared's experiments file, skipping the test
// without it.
func loadSharedRuns(t testing.TB) *File {
	t.Helper()
	if _, err := os.Stat(experimentsFile); os.IsNotExist(err) {
		t.Skipf("%s not present", experimentsFile)
	}
	f, err := Load(experimentsFile)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// rawExperiment is the part of an experiments.json entry the generator
// writes out that Experiment does not decode.
type rawExperiment struct {
	ID          string                     `json:"id"`
	WorkloadRaw map[string]json.RawMessage `json:"workload_raw"`
	Measured    map[string]map[string]any  `json:"measured"`
}

func rawExperiments(t *testing.T) map[string]rawExperiment {
	t.Helper()
	data, err := os.ReadFile(experimentsFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Experiments []rawExperiment `json:"experiments"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	out := map[string]rawExperiment{}
	for _, e := range doc.Experiments {
		out[e.ID] = e
	}
	return out
}

func TestResultsFixtures(t *testing.T) {
	f := loadSharedRuns(t)
	raws := rawExperiments(t)
	for _, fx := range resultsFixtures {
		e := findExperiment(t, f, fx.id)
		files := fixtureFiles(t, fx, e, raws[fx.id])
		dir := fixtureDir(fx)
		if *updateFixtures {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for name, data := range files {
			path := filepath.Join(dir, name)
			if *updateFixtures {
				if err := os.WriteFile(path, data, 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test ./latency -run TestResultsFixtures -update-fixtures writes it)", err)
			}
			if !bytes.Equal(got, data) {
				t.Errorf("%s is not what the generator writes from %s (-update-fixtures rewrites it)", path, experimentsFile)
			}
		}
	}
}

func findExperiment(t testing.TB, f *File, id string) *Experiment {
	t.Helper()
	for i := range f.Experiments {
		if f.Experiments[i].ID == id {
			return &f.Experiments[i]
		}
	}
	t.Fatalf("%s: no run %s", experimentsFile, id)
	return nil
}

// fixtureFiles renders a fixture's files.
func fixtureFiles(t *testing.T, fx resultsFixture, e *Experiment, raw rawExperiment) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	var cfg string
	if err := json.Unmarshal(raw.WorkloadRaw["results/config.yaml"], &cfg); err != nil || cfg == "" {
		t.Fatalf("%s: workload_raw has no results/config.yaml", fx.id)
	}
	files[ConfigFile] = []byte(cfg)
	for scope, m := range raw.Measured {
		name := SummaryFile
		if scope != "summary" {
			k, err := strconv.Atoi(strings.TrimPrefix(scope, "stage_"))
			if err != nil {
				t.Fatalf("%s: scope %q", fx.id, scope)
			}
			name = StageFile(k)
		}
		files[name] = lifecycleReport(t, scope != "summary", m)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# The engine of %s\n# (experiments.json: model, hardware, tp, engine), in vLLM's argument names.\n", fx.id)
	if fx.engineID != "" {
		fmt.Fprintf(&b, "id: %s\n", fx.engineID)
	}
	en := e.Engine
	fmt.Fprintf(&b, "model: %s\ngpu: %s\ntensor-parallel-size: %d\n", e.Model, e.Hardware, e.TP)
	fmt.Fprintf(&b, "max-num-seqs: %d\nmax-num-batched-tokens: %d\nmax-model-len: %d\nblock-size: %d\ngpu-memory-utilization: %v\n",
		en.MaxNumSeqs, en.MaxNumBatchedTokens, en.MaxModelLen, en.BlockSize, en.GPUMemoryUtilization)
	if en.EnablePrefixCaching != nil {
		fmt.Fprintf(&b, "enable-prefix-caching: %t\n", *en.EnablePrefixCaching)
	}
	if en.TotalGPUKVBlocks > 0 {
		fmt.Fprintf(&b, "# The KV blocks vLLM logged.\ntotal-gpu-kv-blocks: %d\n", en.TotalGPUKVBlocks)
	}
	files[EngineFile] = []byte(b.String())
	return files
}

// lifecycleReport writes one scope of a run's measured values as the
// inference-perf build of the recorded runs wrote a lifecycle report:
// latencies in seconds, keys in its order, Python's json.dumps(indent=2)
// layout. The schedule delays are not in experiments.json and are left
// out.
func lifecycleReport(t *testing.T, stage bool, m map[string]any) []byte {
	t.Helper()
	num := func(k string) any {
		v, ok := m[k]
		if !ok || v == nil {
			t.Fatalf("measured: no %s", k)
		}
		return v
	}
	dist := func(k string, seconds bool) any {
		d, ok := m[k].(map[string]any)
		if !ok {
			return nil
		}
		var out ordered
		for _, key := range []string{"mean", "min", "p0.1", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99", "p99.9", "max"} {
			v, ok := d[key].(float64)
			if !ok {
				t.Fatalf("measured %s: no %s", k, key)
			}
			name := key
			if key == "p50" {
				name = "median"
			}
			if seconds {
				out = append(out, kv{name, pyFloat(fromMS(v))})
			} else {
				out = append(out, kv{name, pyFloat(v)})
			}
		}
		return out
	}
	load := ordered{{"count", int(num("sent").(float64))}}
	if stage {
		load = append(load, kv{"send_duration", pyFloat(num("send_duration_s").(float64))},
			kv{"requested_rate", pyFloat(num("requested_rate_rps").(float64))},
			kv{"achieved_rate", pyFloat(num("achieved_rate_rps").(float64))})
	}
	tp := m["throughput"].(map[string]any)
	failures := ordered{{"count", int(num("failed").(float64))}, {"request_latency", dist("failed_request_latency_ms", true)}}
	if failures[1].v == nil {
		failures = append(failures, kv{"prompt_len", nil})
	}
	report := ordered{
		{"load_summary", load},
		{"successes", ordered{
			{"count", int(num("completed").(float64))},
			{"latency", ordered{
				{"request_latency", dist("e2e_ms", true)},
				{"normalized_time_per_output_token", dist("ntpot_ms", true)},
				{"time_per_output_token", dist("tpot_ms", true)},
				{"time_to_first_token", dist("ttft_ms", true)},
				{"inter_token_latency", dist("itl_ms", true)},
			}},
			{"throughput", ordered{
				{"input_tokens_per_sec", pyFloat(tp["input_tokens_per_s"].(float64))},
				{"output_tokens_per_sec", pyFloat(tp["output_tokens_per_s"].(float64))},
				{"total_tokens_per_sec", pyFloat(tp["total_tokens_per_s"].(float64))},
				{"requests_per_sec", pyFloat(tp["requests_per_s"].(float64))},
			}},
			{"prompt_len", dist("prompt_len_tokens", false)},
			{"output_len", dist("output_len_tokens", false)},
		}},
		{"failures", failures},
	}
	var b bytes.Buffer
	writePyJSON(&b, report, 0)
	return b.Bytes()
}

// fromMS is ms in seconds, chosen so that ParseLifecycle's × 1000 gives
// back exactly ms (experiments.json's values are inference-perf's seconds
// × 1000, so the seconds are recovered to the last bit at most).
func fromMS(ms float64) float64 {
	s := ms / 1000
	for _, c := range []float64{s, math.Nextafter(s, math.Inf(1)), math.Nextafter(s, math.Inf(-1))} {
		if c*1000 == ms {
			return c
		}
	}
	return s
}

type kv struct {
	k string
	v any
}

type ordered []kv

// pyNumber is a float as Python's repr writes it.
type pyNumber string

func pyFloat(v float64) pyNumber {
	e := strconv.FormatFloat(v, 'e', -1, 64)
	exp, _ := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
	if v == 0 || (exp >= -4 && exp < 16) {
		s := strconv.FormatFloat(v, 'f', -1, 64)
		if !strings.ContainsAny(s, ".") {
			s += ".0"
		}
		return pyNumber(s)
	}
	return pyNumber(e)
}

// writePyJSON writes v as Python's json.dumps(v, indent=2) does.
func writePyJSON(b *bytes.Buffer, v any, depth int) {
	indent := strings.Repeat("  ", depth+1)
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case int:
		b.WriteString(strconv.Itoa(x))
	case pyNumber:
		b.WriteString(string(x))
	case ordered:
		b.WriteString("{\n")
		for i, p := range x {
			fmt.Fprintf(b, "%s%q: ", indent, p.k)
			writePyJSON(b, p.v, depth+1)
			if i < len(x)-1 {
				b.WriteString(",")
			}
			b.WriteString("\n")
		}
		b.WriteString(strings.Repeat("  ", depth) + "}")
	default:
		panic(fmt.Sprintf("writePyJSON: %T", v))
	}
}
