package latency

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/workload"
)

func loadFixture(t *testing.T, fx resultsFixture) *Experiment {
	t.Helper()
	dir := fixtureDir(fx)
	eng, err := LoadEngineFile(filepath.Join(dir, EngineFile))
	if err != nil {
		t.Fatal(err)
	}
	e, err := LoadResultsDir(dir, eng)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestResultsDirMatchesExperiments: each fixture, read as a results
// directory, gives the run experiments.json describes: the same measured
// latencies in every scope (to the bit: the fixtures' seconds × 1000 are
// experiments.json's ms), the same engine, stages, output length and
// overload flags.
func TestResultsDirMatchesExperiments(t *testing.T) {
	f := loadSharedRuns(t)
	for _, fx := range resultsFixtures {
		t.Run(fx.dir, func(t *testing.T) {
			got := loadFixture(t, fx)
			want := findExperiment(t, f, fx.id)
			wantID := fx.engineID
			if wantID == "" {
				wantID = fixtureDir(fx)
			}
			if got.ID != wantID {
				t.Errorf("ID %q, want %q", got.ID, wantID)
			}
			if len(got.Measured) != len(want.Measured) {
				t.Errorf("scopes %v, want %v", keys(got.Measured), keys(want.Measured))
			}
			for scope, w := range want.Measured {
				g, ok := got.Measured[scope]
				if !ok {
					t.Errorf("%s: not measured", scope)
					continue
				}
				if !sameDist(g.E2E, w.E2E) || !sameDist(g.TTFT, w.TTFT) {
					t.Errorf("%s: measured %+v, want %+v", scope, g, w)
				}
				if !reflect.DeepEqual(got.MeasuredValues(scope), want.MeasuredValues(scope)) {
					t.Errorf("%s: metrics %v, want %v", scope, got.MeasuredValues(scope), want.MeasuredValues(scope))
				}
			}
			if got.Model != want.Model || got.TP != want.TP || got.OutputLen() != want.OutputLen() {
				t.Errorf("model %s tp %d output %g, want %s %d %g", got.Model, got.TP, got.OutputLen(), want.Model, want.TP, want.OutputLen())
			}
			ge, we := got.Engine, want.Engine
			if ge.MaxNumSeqs != we.MaxNumSeqs || ge.MaxNumBatchedTokens != we.MaxNumBatchedTokens || ge.MaxModelLen != we.MaxModelLen ||
				ge.BlockSize != we.BlockSize || ge.GPUMemoryUtilization != we.GPUMemoryUtilization || ge.TotalGPUKVBlocks != we.TotalGPUKVBlocks ||
				!reflect.DeepEqual(ge.EnablePrefixCaching, we.EnablePrefixCaching) {
				t.Errorf("engine %+v, want %+v", ge, we)
			}
			var wantStages []Stage
			for _, s := range want.Workload.Stages {
				wantStages = append(wantStages, Stage{RateRPS: s.RateRPS, DurationS: s.DurationS})
			}
			if !reflect.DeepEqual(got.Workload.Stages, wantStages) {
				t.Errorf("stages %v, want %v", got.Workload.Stages, wantStages)
			}
			if got.Overloaded() != want.Overloaded() || !slices.Equal(got.RegimeFlags, want.RegimeFlags) {
				t.Errorf("regime flags %q, want %q", got.RegimeFlags, want.RegimeFlags)
			}
			if gm, err := got.ArchModel(); err != nil {
				t.Error(err)
			} else if wm, _ := want.ArchModel(); !reflect.DeepEqual(gm, wm) {
				t.Errorf("model %s differs from the experiments file's", gm.Name)
			}
		})
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestResultsDirSimulatesLikeExperiment: the codegen run's config.yaml
// and the experiments.json entry's reconstruction (InferencePerfYAML)
// differ only in keys that do not shape the traffic (the client's
// num_workers, worker_max_concurrency, ...: recorded, not simulated), so
// the results directory's run predicts exactly what the entry does.
func TestResultsDirSimulatesLikeExperiment(t *testing.T) {
	f := loadSharedRuns(t)
	fx := resultsFixtures[0]
	got := loadFixture(t, fx)
	want := findExperiment(t, f, fx.id)

	raw, name := got.WorkloadYAML()
	gc, err := workload.ParseInferencePerf(raw, name)
	if err != nil {
		t.Fatal(err)
	}
	norm, nname := want.WorkloadYAML()
	wc, err := workload.ParseInferencePerf(norm, nname)
	if err != nil {
		t.Fatal(err)
	}
	gc.File, wc.File = "", ""
	gc.Load.NumWorkers, gc.Load.HasNumWorkers, gc.Load.WorkerMaxConcurrency = 0, false, 0
	for i := range gc.Load.Stages {
		gc.Load.Stages[i].Line, wc.Load.Stages[i].Line = 0, 0
	}
	if !reflect.DeepEqual(gc, wc) {
		t.Fatalf("the configs differ in more than the client's concurrency:\n%+v\n%+v", gc, wc)
	}

	c := replica.DefaultCalibration()
	o := Options{Seed: 1, StageLimit: 20}
	gr, err := Simulate(context.Background(), got, c, o)
	if err != nil {
		t.Fatal(err)
	}
	wr, err := Simulate(context.Background(), want, c, o)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gr.Predicted, wr.Predicted) || !reflect.DeepEqual(gr.Completed, wr.Completed) {
		t.Errorf("results directory predicts %v (%v completed), the experiments entry %v (%v)", gr.Predicted, gr.Completed, wr.Predicted, wr.Completed)
	}
	if len(gr.Predicted) != 3 {
		t.Errorf("scopes %v, want summary, stage_0, stage_1", keys(gr.Predicted))
	}
}

// TestLoadInputsPools: an experiments file and results directories pool
// into one file; ids must stay unique.
func TestLoadInputsPools(t *testing.T) {
	dirs := []string{fixtureDir(resultsFixtures[0]), fixtureDir(resultsFixtures[1])}
	f, err := LoadInputs(dirs, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Experiments) != 2 || f.Experiments[0].ID != dirs[0] || f.Experiments[1].ID != resultsFixtures[1].engineID {
		t.Fatalf("pooled %d runs: %v", len(f.Experiments), f.Models())
	}
	if _, err := os.Stat(experimentsFile); err == nil {
		f, err := LoadInputs(append([]string{experimentsFile}, dirs...), "")
		if err != nil {
			t.Fatal(err)
		}
		if len(f.Experiments) != 32 {
			t.Errorf("pooled %d runs, want 30 + 2", len(f.Experiments))
		}
	}
	// --engine for every directory.
	f, err = LoadInputs(dirs[:1], filepath.Join(dirs[1], EngineFile))
	if err != nil {
		t.Fatal(err)
	}
	if e := f.Experiments[0]; e.Model != "mistralai/Mixtral-8x7B-v0.1" || e.TP != 2 {
		t.Errorf("--engine not used: %s tp %d", e.Model, e.TP)
	}
}

// badDir copies a fixture into a temporary directory and lets edit change
// it.
func badDir(t *testing.T, fx resultsFixture, edit func(dir string)) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "results")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src := fixtureDir(fx)
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range entries {
		data, err := os.ReadFile(filepath.Join(src, de.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, de.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if edit != nil {
		edit(dir)
	}
	return dir
}

func editFile(t *testing.T, path string, f func(string) string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(f(string(data))), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// inMS rewrites a lifecycle report's latencies in ms.
func inMS(t *testing.T, report string) string {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal([]byte(report), &doc); err != nil {
		t.Fatal(err)
	}
	lat := doc["successes"].(map[string]any)["latency"].(map[string]any)
	for _, d := range lat {
		for k, v := range d.(map[string]any) {
			d.(map[string]any)[k] = v.(float64) * 1000
		}
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestResultsDirBadInput: every bad results directory or engine file is
// refused with the file and the field named, never a panic.
func TestResultsDirBadInput(t *testing.T) {
	codegen, overloaded := resultsFixtures[0], resultsFixtures[2]
	sum := func(d string) string { return filepath.Join(d, SummaryFile) }
	eng := func(d string) string { return filepath.Join(d, EngineFile) }
	// replaceIn edits the first occurrence of old in file name of the dir.
	replaceIn := func(name, old, repl string) func(string) {
		return func(d string) {
			editFile(t, filepath.Join(d, name), func(s string) string {
				if !strings.Contains(s, old) {
					t.Fatalf("%s has no %q", name, old)
				}
				return strings.Replace(s, old, repl, 1)
			})
		}
	}
	ttftMean := `"time_to_first_token": {
        "mean": 0.027981806303111346,`
	cases := []struct {
		name string
		fx   resultsFixture
		edit func(dir string)
		want []string // substrings of the error
	}{
		{"no summary report", codegen, func(d string) { os.Remove(sum(d)) }, []string{"summary_lifecycle_metrics.json: missing", "not an inference-perf results directory"}},
		{"no config", codegen, func(d string) { os.Remove(filepath.Join(d, ConfigFile)) }, []string{"config.yaml: missing"}},
		{"no engine file", codegen, func(d string) { os.Remove(eng(d)) }, []string{"engine.yaml: missing", "--engine"}},
		{"ttft mean missing", codegen, replaceIn(SummaryFile, ttftMean, `"time_to_first_token": {`),
			[]string{"summary_lifecycle_metrics.json: successes.latency.time_to_first_token.mean: missing"}},
		{"ttft null", codegen, func(d string) {
			editFile(t, sum(d), func(s string) string {
				i := strings.Index(s, `"time_to_first_token": {`)
				j := i + strings.Index(s[i:], "}")
				return s[:i] + `"time_to_first_token": null` + s[j+1:]
			})
		}, []string{"successes.latency.time_to_first_token: null", "api.streaming"}},
		{"ttft NaN as Python writes it", codegen, replaceIn(SummaryFile, `"mean": 0.027981806303111346`, `"mean": NaN`),
			[]string{"successes.latency.time_to_first_token.mean: expected a number, got NaN"}},
		{"ttft mean a string", codegen, replaceIn(SummaryFile, `"mean": 0.027981806303111346`, `"mean": "28ms"`),
			[]string{"time_to_first_token.mean: expected a number, got \"28ms\""}},
		{"latency in ms", codegen, func(d string) { editFile(t, sum(d), func(s string) string { return inMS(t, s) }) },
			[]string{"summary_lifecycle_metrics.json: successes.latency", "s per output token", "inference-perf writes seconds"}},
		{"percentiles out of order", codegen, replaceIn(SummaryFile, `"p99": 2.5619649274001906`, `"p99": 2.0`), []string{"request_latency.p99: 2 is less than p90"}},
		{"negative latency", codegen, replaceIn(SummaryFile, `"p90": 2.386523092900052`, `"p90": -2.3`), []string{"request_latency.p90: -2.3: a latency cannot be negative"}},
		{"experiments.json shape", codegen, func(d string) {
			writeFile(t, sum(d), `{"sent": 9000, "e2e_ms": {"mean": 2080.7}, "ttft_ms": {"mean": 27.9}}`)
		}, []string{"summary_lifecycle_metrics.json: successes: missing (have e2e_ms, sent, ttft_ms)"}},
		{"not JSON", codegen, func(d string) { writeFile(t, sum(d), "load_summary:\n  count: 3\n") }, []string{"summary_lifecycle_metrics.json: invalid JSON"}},
		{"empty report", codegen, func(d string) { writeFile(t, sum(d), "") }, []string{"summary_lifecycle_metrics.json: empty file"}},
		{"an array", codegen, func(d string) { writeFile(t, sum(d), "[1, 2]") }, []string{"summary_lifecycle_metrics.json: expected an object, got an array"}},
		{"stage beyond the config's", codegen, func(d string) {
			data, _ := os.ReadFile(filepath.Join(d, StageFile(1)))
			writeFile(t, filepath.Join(d, StageFile(2)), string(data))
		}, []string{"stage_2_lifecycle_metrics.json: a report of stage 2", "has 2 load stages"}},
		{"stage of another run", codegen, replaceIn(StageFile(1), `"requested_rate": 10.0`, `"requested_rate": 20.0`),
			[]string{"stage_1_lifecycle_metrics.json: load_summary.requested_rate: 20, but load.stages[1].rate", "not of one run"}},
		{"two runs' reports", codegen, func(d string) {
			data, _ := os.ReadFile(sum(d))
			writeFile(t, filepath.Join(d, "other_"+SummaryFile), string(data))
		}, []string{"the reports of 2 runs"}},
		{"not streamed", codegen, replaceIn(ConfigFile, "streaming: true", "streaming: false"), []string{"config.yaml: api.streaming: false"}},
		{"no ignore_eos", codegen, replaceIn(ConfigFile, "ignore_eos: true", "ignore_eos: false"), []string{"config.yaml: server.ignore_eos: false"}},
		{"config typo", codegen, replaceIn(ConfigFile, "num_groups: 10", "num_group: 10"), []string{"config.yaml:", "data.shared_prefix.num_group: unknown key"}},
		{"output_len 1", codegen, replaceIn(ConfigFile, "output_len: 247", "output_len: 1"), []string{"data.shared_prefix.output_len: a nominal output length of 1 tokens"}},
		{"unknown GPU", codegen, replaceIn(EngineFile, "gpu: H100-80GB-HBM3 (SXM)", "gpu: H900"), []string{"engine.yaml:4: gpu: unknown GPU \"H900\""}},
		{"no GPU", codegen, replaceIn(EngineFile, "gpu: H100-80GB-HBM3 (SXM)\n", ""), []string{"engine.yaml:3: gpu: missing"}},
		{"unknown model", codegen, replaceIn(EngineFile, "model: meta-llama/Llama-2-7b-hf", "model: meta-llama/Llama-9"), []string{"engine.yaml:3: model: unknown model \"meta-llama/Llama-9\""}},
		{"max-num-seqs 0", codegen, replaceIn(EngineFile, "max-num-seqs: 128", "max-num-seqs: 0"), []string{"engine.yaml:6: max-num-seqs: 0: must be at least 1"}},
		{"max-num-seqs text", codegen, replaceIn(EngineFile, "max-num-seqs: 128", "max-num-seqs: many"), []string{"max-num-seqs: expected a whole number, got \"many\""}},
		{"gpu memory utilization 1.5", codegen, replaceIn(EngineFile, "gpu-memory-utilization: 0.9", "gpu-memory-utilization: 1.5"), []string{"gpu-memory-utilization: 1.5: must be in (0, 1]"}},
		{"engine typo", codegen, replaceIn(EngineFile, "max-num-seqs: 128", "max-num-seq: 128"), []string{"max-num-seq: unknown key; did you mean max-num-seqs?"}},
		{"key twice", codegen, replaceIn(EngineFile, "max-num-seqs: 128", "max-num-seqs: 128\nmax_num_seqs: 64"), []string{"max_num_seqs: given twice (also line 6)"}},
		{"data parallel 0", codegen, replaceIn(EngineFile, "max-num-seqs: 128", "max-num-seqs: 128\ndata-parallel-size: 0"), []string{"engine.yaml:7: data-parallel-size: 0: must be at least 1"}},
		{"tensor parallel 3", codegen, replaceIn(EngineFile, "tensor-parallel-size: 1", "tensor-parallel-size: 3"), []string{"engine.yaml:5: tensor-parallel-size:"}},
		{"block counts disagree", codegen, replaceIn(EngineFile, "total-gpu-kv-blocks: 7463", "total-gpu-kv-blocks: 7463\nnum-gpu-blocks-override: 9000"), []string{"num-gpu-blocks-override: 9000 disagrees"}},
		{"model does not fit", codegen, func(d string) {
			editFile(t, eng(d), func(s string) string {
				s = strings.Replace(s, "gpu-memory-utilization: 0.9", "gpu-memory-utilization: 0.1", 1)
				return strings.Replace(s, "total-gpu-kv-blocks: 7463\n", "", 1)
			})
		}, []string{"engine.yaml: ", "does not fit"}},
		{"engine not YAML", codegen, func(d string) { writeFile(t, eng(d), "model: [") }, []string{"engine.yaml: invalid YAML"}},
		{"engine a list", codegen, func(d string) { writeFile(t, eng(d), "- model: x\n") }, []string{"engine.yaml:1: expected a mapping"}},
		{"overloaded run's failures malformed", overloaded, replaceIn(SummaryFile, `"count": 4068`, `"count": -3`), []string{"failures.count: expected a count, got -3"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := badDir(t, c.fx, c.edit)
			_, err := LoadInputs([]string{dir}, "")
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if c.name != "no engine file" && !strings.Contains(err.Error(), dir) {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
}

// TestLoadInputsBadInput: the inputs themselves.
func TestLoadInputsBadInput(t *testing.T) {
	codegen := fixtureDir(resultsFixtures[0])
	sameID := badDir(t, resultsFixtures[1], nil)
	editFile(t, filepath.Join(sameID, EngineFile), func(s string) string {
		return strings.Replace(s, "id: mixtral-8x7b-tp2-roleplay (inference-perf results)", "id: "+codegen, 1)
	})
	cases := []struct {
		name   string
		paths  []string
		engine string
		want   string
	}{
		{"none", nil, "", "no input"},
		{"missing", []string{"testdata/nope"}, "", "testdata/nope"},
		{"a report, not its directory", []string{filepath.Join(codegen, SummaryFile)}, "", "give its directory"},
		{"repeated id", []string{codegen, sameID}, "", "is also a run of"},
		{"same directory twice", []string{codegen, codegen}, "", "run ids must be unique"},
		{"engine without a directory", []string{filepath.Join(codegen, ConfigFile)}, filepath.Join(codegen, EngineFile), "give its directory"},
		{"missing engine file", []string{codegen}, "testdata/nope.yaml", "engine file"},
	}
	if _, err := os.Stat(experimentsFile); err == nil {
		cases = append(cases, struct {
			name   string
			paths  []string
			engine string
			want   string
		}{"engine with an experiments file only", []string{experimentsFile}, filepath.Join(codegen, EngineFile), "no results directory among the inputs"})
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		// A device that never ends is refused, not read into memory.
		cases = append(cases, struct {
			name   string
			paths  []string
			engine string
			want   string
		}{"a device", []string{"/dev/zero"}, "", "experiments: /dev/zero: not a regular file"})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := LoadInputs(c.paths, c.engine)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
		})
	}
}

// TestReadBounded: a file is read whole up to the limit and refused past
// it, saying what it is not.
func TestReadBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "e.json")
	for _, size := range []int{10, 11} {
		if err := os.WriteFile(path, []byte(strings.Repeat(" ", size)), 0o644); err != nil {
			t.Fatal(err)
		}
		data, err := readBounded(path, 10, "an experiments file")
		if size == 10 && (err != nil || len(data) != 10) {
			t.Errorf("%d bytes: %d read, error %v", size, len(data), err)
		}
		if want := path + ": larger than 10 bytes; not an experiments file"; size == 11 && (err == nil || err.Error() != want) {
			t.Errorf("%d bytes: error %v, want %s", size, err, want)
		}
	}
}

// TestResultsDirPrefix: inference-perf's report_file_prefix is found from
// the summary report's name.
func TestResultsDirPrefix(t *testing.T) {
	dir := badDir(t, resultsFixtures[0], func(d string) {
		for _, n := range []string{ConfigFile, SummaryFile, StageFile(0), StageFile(1)} {
			if err := os.Rename(filepath.Join(d, n), filepath.Join(d, "run7_"+n)); err != nil {
				t.Fatal(err)
			}
		}
	})
	f, err := LoadInputs([]string{dir}, "")
	if err != nil {
		t.Fatal(err)
	}
	if e := f.Experiments[0]; len(e.Measured) != 3 || e.IPerfConfigName != filepath.Join(dir, "run7_"+ConfigFile) {
		t.Errorf("scopes %v, config %s", keys(e.Measured), e.IPerfConfigName)
	}
}

// TestEngineModelFile: model may name a config.json (or its directory),
// relative to the engine file; it wins over an embedded config.
func TestEngineModelFile(t *testing.T) {
	dir := badDir(t, resultsFixtures[0], nil)
	cfg, err := os.ReadFile("../arch/models/meta-llama/Llama-2-7b-hf.json")
	if err != nil {
		t.Fatal(err)
	}
	// A smaller model: half the layers.
	small := strings.Replace(string(cfg), `"num_hidden_layers": 32`, `"num_hidden_layers": 16`, 1)
	if small == string(cfg) {
		t.Fatal("config has no num_hidden_layers: 32")
	}
	if err := os.MkdirAll(filepath.Join(dir, "my-model"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "my-model", "config.json"), small)
	for _, ref := range []string{"my-model", "./my-model/config.json"} {
		editFile(t, filepath.Join(dir, EngineFile), func(s string) string {
			i := strings.Index(s, "model: ")
			j := i + strings.Index(s[i:], "\n")
			return s[:i] + "model: " + ref + s[j:]
		})
		f, err := LoadInputs([]string{dir}, "")
		if err != nil {
			t.Fatal(err)
		}
		m, err := f.Experiments[0].ArchModel()
		if err != nil {
			t.Fatal(err)
		}
		if m.Layers != 16 {
			t.Errorf("model %s: %d layers, want the file's 16", ref, m.Layers)
		}
	}
}

// TestNominalOutputLen: the output length itl_mean divides by, for every
// data type the reader generates.
func TestNominalOutputLen(t *testing.T) {
	stages := "load:\n  stages:\n  - rate: 1\n    duration: 10\n"
	dist := func(d string) string {
		return "data:\n  type: random\n  input_distribution: {mean: 100, min: 10, max: 200, std_dev: 10, total_count: 100}\n  output_distribution: " + d + "\n" + stages
	}
	cases := []struct {
		name, cfg string
		want      float64
		err       string
	}{
		{"shared_prefix", "data:\n  type: shared_prefix\n  shared_prefix: {output_len: 247}\n" + stages, 247, ""},
		{"shared_prefix default", "data:\n  type: shared_prefix\n  shared_prefix: {question_len: 10}\n" + stages, 50, ""},
		{"normal", dist("{mean: 300, std_dev: 50, min: 10, max: 1024, total_count: 100}"), 300, ""},
		{"lognormal", dist("{type: lognormal, mean: 300, std_dev: 50, min: 10, max: 1024, total_count: 100}"), 300, ""},
		{"lognormal mean above max", dist("{type: lognormal, mean: 3000, std_dev: 50, min: 10, max: 1024, total_count: 100}"), 1024, ""},
		{"uniform", dist("{type: uniform, min: 100, max: 425, total_count: 100}"), 262.5, ""},
		{"fixed", dist("{type: fixed, mean: 128.7, total_count: 100}"), 128, ""},
		{"synthetic", strings.Replace(dist("{type: fixed, mean: 64, total_count: 100}"), "type: random", "type: synthetic", 1), 64, ""},
		{"one token", dist("{type: fixed, mean: 1, total_count: 100}"), 0, "data.output_distribution.mean: a nominal output length of 1 tokens"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := workload.ParseInferencePerf([]byte(c.cfg), "config.yaml")
			if err != nil {
				t.Fatal(err)
			}
			got, err := NominalOutputLen(cfg)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Errorf("%g, %v; want %g", got, err, c.want)
			}
		})
	}
}

// TestResultsDirRandomData: a run of random data simulates its own
// config, and itl_mean divides by the output distribution's mean.
func TestResultsDirRandomData(t *testing.T) {
	dir := badDir(t, resultsFixtures[0], func(d string) {
		editFile(t, filepath.Join(d, ConfigFile), func(s string) string {
			i := strings.Index(s, "data:\n")
			j := strings.Index(s, "load:\n")
			return s[:i] + "data:\n  type: random\n  input_distribution: {mean: 560, std_dev: 20, min: 500, max: 600, total_count: 6000}\n" +
				"  output_distribution: {type: uniform, min: 200, max: 300, total_count: 6000}\n" + s[j:]
		})
	})
	f, err := LoadInputs([]string{dir}, "")
	if err != nil {
		t.Fatal(err)
	}
	e := &f.Experiments[0]
	if e.OutputLen() != 250 || e.Workload.DataType != "random" {
		t.Fatalf("output length %g, data %q", e.OutputLen(), e.Workload.DataType)
	}
	r, err := Simulate(context.Background(), e, replica.DefaultCalibration(), Options{Seed: 1, StageLimit: 10})
	if err != nil {
		t.Fatal(err)
	}
	p := r.Predicted["summary"]
	if want := (p["e2e_mean"] - p["ttft_mean"]) / 249; math.Abs(p["itl_mean"]-want) > 1e-9*want {
		t.Errorf("itl_mean %g, want %g", p["itl_mean"], want)
	}
	if r.Completed["stage_0"] != 50 || r.Completed["stage_1"] != 100 {
		t.Errorf("completed %v, want 50 and 100 (10 s at 5 and 10 requests/s)", r.Completed)
	}
}
