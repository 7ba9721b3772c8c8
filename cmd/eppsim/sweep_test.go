package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/eppsim/eppsim/epp/config"
	"github.com/eppsim/eppsim/epp/plugins"
)

// tiny are the flags that keep CLI sweeps fast under the race detector.
var tiny = []string{"--max-requests", "30", "--replicas", "2", "--progress", "never", "--dpi", "20"}

func sameFile(t *testing.T, a, b string) {
	t.Helper()
	x, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(x, y) {
		t.Errorf("%s and %s differ", a, b)
	}
}

func TestSweepCLI(t *testing.T) {
	dir := t.TempDir()
	args := append([]string{"sweep", "--vary", "prefix-cache-scorer.weight=0,2", "--vary", "queue-scorer.weight=1",
		"--objective", "ttft_p99", "--objective=-throughput", "--constraint", "rejected<=0", "--out", dir, "--workers", "2"}, tiny...)
	out, _, err := runCLI(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"sweep " + dir + ": 2 points · 2 simulated now, 0 done before · 2 workers",
		"best: point ", "\nnoise: improvement over the next best point (", "on one seed; unverified against seed noise: every point ran one seed; add --vary seed=1,2,3 to measure it\n",
		"Pareto front (", "wrote points.jsonl, points.csv, sweep.json, best.yaml, heatmap.svg/png, pareto.svg/png"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if _, err := config.LoadFile(filepath.Join(dir, "best.yaml"), config.Options{Registry: plugins.Builtin()}); err != nil {
		t.Errorf("best.yaml: %v", err)
	}
	// The same command resumes (nothing left to do).
	out, _, err = runCLI(t, args...)
	if err != nil || !strings.Contains(out, "0 simulated now, 2 done before") {
		t.Errorf("resume: %v\n%s", err, out)
	}
	// A different sweep in the same directory is refused.
	_, _, err = runCLI(t, append([]string{"sweep", "--vary", "prefix-cache-scorer.weight=0,3", "--out", dir}, tiny...)...)
	if err == nil || !strings.Contains(err.Error(), "holds a different sweep") {
		t.Errorf("different sweep: %v", err)
	}
}

func TestSweepCLIBadInput(t *testing.T) {
	out := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sweep", "--vary", "queue-scorer.weight=1"}, "--out is required"},
		{[]string{"sweep", "--out", out}, "nothing to vary"},
		{[]string{"sweep", "--out", out, "--vary", "nope.weight=1"}, `unknown plugin "nope"`},
		{[]string{"sweep", "--out", out, "--vary", "approx-prefix-cache-producer.bogus=1"}, `unknown field "bogus"`},
		{[]string{"sweep", "--out", out, "--vary", "queue-scorer.weight=x"}, `"x" is not a number`},
		{[]string{"sweep", "--out", out, "--vary", "queue-scorer.weight=1", "--objective", "ttft_p42"}, "unknown metric"},
		{[]string{"sweep", "--out", out, "--vary", "queue-scorer.weight=1", "--constraint", "ttft_p99=1"}, "--constraint"},
		{[]string{"sweep", "--out", out, "--vary", "queue-scorer.weight=1", "--shard", "2/2"}, "--shard"},
		{[]string{"sweep", "--out", out, "--vary", "queue-scorer.weight=1", "--workers", "0"}, "--workers"},
		{[]string{"sweep", "--out", out, "--vary", "queue-scorer.weight=1", "--trace", "/nonexistent.jsonl"}, "--trace"},
		{[]string{"sweep", "merge", out}, "--out is required"},
		{[]string{"sweep", "merge", out, "--out", t.TempDir()}, "points.jsonl"},
		{[]string{"tune", "--out", out, "--param", "replicas"}, "tune optimises scorer weights"},
		{[]string{"tune", "--out", out, "--budget", "2"}, "--budget 2"},
		{[]string{"tune", "--param", "queue-scorer.weight"}, "--out is required"},
	} {
		_, _, err := runCLI(t, tc.args...)
		if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v (exit %d), want exit 2 and %q", tc.args, err, exitCode(err), tc.want)
		}
	}
}

func TestTuneCLI(t *testing.T) {
	dir := t.TempDir()
	out, _, err := runCLI(t, append([]string{"tune", "--param", "prefix-cache-scorer.weight=0:5", "--param", "queue-scorer.weight",
		"--objective", "regret", "--budget", "5", "--seeds", "2", "--out", dir}, tiny...)...)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"tune (nelder-mead): 5 evaluations", "start", "best", "improvement over the start",
		"\nnoise: improvement over the start (base config weights), paired by seed over 2 seeds: ",
		"wrote trajectory.csv, best.yaml, tune.json, trajectory.svg/png in " + dir} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, f := range []string{"trajectory.csv", "best.yaml", "tune.json", "trajectory.png"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}

// k8sJob is the part of a batch/v1 Job the manifest test reads.
type k8sJob struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		CompletionMode string `json:"completionMode"`
		Completions    int    `json:"completions"`
		Parallelism    int    `json:"parallelism"`
		Template       struct {
			Spec struct {
				Containers []struct {
					Command []string `json:"command"`
					Args    []string `json:"args"`
					Env     []struct {
						Name      string `json:"name"`
						ValueFrom struct {
							FieldRef struct {
								FieldPath string `json:"fieldPath"`
							} `json:"fieldRef"`
						} `json:"valueFrom"`
					} `json:"env"`
					VolumeMounts []struct {
						Name      string `json:"name"`
						MountPath string `json:"mountPath"`
					} `json:"volumeMounts"`
				} `json:"containers"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

// tinyMooncake writes a small Mooncake-format trace: five sessions whose
// turns share their earlier hash ids.
func tinyMooncake(t *testing.T, path string) {
	t.Helper()
	var b strings.Builder
	for i := range 40 {
		s, turn := i%5, i/5
		var ids []string
		for k := 0; k <= turn+1; k++ {
			ids = append(ids, fmt.Sprint(s*100+k))
		}
		fmt.Fprintf(&b, `{"timestamp": %d, "input_length": %d, "output_length": 40, "hash_ids": [%s]}`+"\n",
			i*400, 512*len(ids)-100, strings.Join(ids, ", "))
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestK8sSweepJob parses deploy/k8s/sweep-job.yaml and runs its command
// lines locally: every shard of the Indexed Job (with the volume paths
// pointing at temporary directories holding a tiny trace), then the merge
// Job; the merged files equal those of the same sweep run unsharded.
func TestK8sSweepJob(t *testing.T) {
	raw, err := os.ReadFile("../../deploy/k8s/sweep-job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var sweepJob, mergeJob *k8sJob
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(raw), -1) {
		var j k8sJob
		if err := yaml.Unmarshal([]byte(doc), &j); err != nil {
			t.Fatalf("manifest: %v", err)
		}
		switch j.Metadata.Name {
		case "eppsim-sweep":
			sweepJob = &j
		case "eppsim-sweep-merge":
			mergeJob = &j
		}
	}
	if sweepJob == nil || mergeJob == nil || sweepJob.Kind != "Job" || mergeJob.Kind != "Job" {
		t.Fatalf("manifest: want Jobs eppsim-sweep and eppsim-sweep-merge")
	}
	if sweepJob.Spec.CompletionMode != "Indexed" || sweepJob.Spec.Completions < 2 || sweepJob.Spec.Parallelism < 1 {
		t.Fatalf("eppsim-sweep: completionMode %q, completions %d, parallelism %d", sweepJob.Spec.CompletionMode,
			sweepJob.Spec.Completions, sweepJob.Spec.Parallelism)
	}
	n := sweepJob.Spec.Completions
	c := sweepJob.Spec.Template.Spec.Containers[0]
	if len(c.Env) == 0 || c.Env[0].Name != "JOB_COMPLETION_INDEX" ||
		c.Env[0].ValueFrom.FieldRef.FieldPath != "metadata.annotations['batch.kubernetes.io/job-completion-index']" {
		t.Errorf("eppsim-sweep env: %+v", c.Env)
	}
	if !slices.Contains(c.Args, fmt.Sprintf("--shard=$(JOB_COMPLETION_INDEX)/%d", n)) {
		t.Errorf("eppsim-sweep args %v: want --shard=$(JOB_COMPLETION_INDEX)/%d (N = completions)", c.Args, n)
	}
	mc := mergeJob.Spec.Template.Spec.Containers[0]
	var shardDirs []string
	for i := range n {
		shardDirs = append(shardDirs, fmt.Sprintf("/data/out/shard-%d", i))
	}
	if strings.Join(mc.Args, " ") != "sweep merge "+strings.Join(shardDirs, " ")+" --out=/data/out/merged --force" {
		t.Errorf("eppsim-sweep-merge args %v: want every shard directory", mc.Args)
	}

	// The volumes become temporary directories; the trace one holds a
	// tiny trace under the manifest's file name.
	paths := map[string]string{}
	for _, m := range c.VolumeMounts {
		paths[m.MountPath] = t.TempDir()
	}
	traceFlag := ""
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--trace="); ok {
			traceFlag = v
		}
	}
	subst := func(s string, index int) string {
		s = strings.ReplaceAll(s, "$(JOB_COMPLETION_INDEX)", fmt.Sprint(index))
		for from, to := range paths {
			s = strings.ReplaceAll(s, from, to)
		}
		return s
	}
	tinyMooncake(t, subst(traceFlag, 0))
	// Small and fast: two replicas, 30 requests, cheap PNGs.
	overrides := []string{"--replicas=2", "--max-requests=30", "--dpi=20"}
	command := func(args []string, index int) []string {
		var out []string
		for _, a := range args {
			if !strings.HasPrefix(a, "--replicas=") {
				out = append(out, subst(a, index))
			}
		}
		return out
	}
	if c.Command[0] != "eppsim" || mc.Command[0] != "eppsim" {
		t.Fatalf("commands %v, %v: want eppsim", c.Command, mc.Command)
	}
	for i := range n {
		if _, _, err := runCLI(t, append(command(c.Args, i), overrides...)...); err != nil {
			t.Fatalf("shard %d: %v", i, err)
		}
	}
	if _, _, err := runCLI(t, append(command(mc.Args, 0), "--dpi=20")...); err != nil {
		t.Fatalf("merge: %v", err)
	}
	// The same sweep unsharded.
	var plain []string
	for _, a := range command(c.Args, 0) {
		if !strings.HasPrefix(a, "--shard=") && !strings.HasPrefix(a, "--out=") {
			plain = append(plain, a)
		}
	}
	ref := t.TempDir()
	if _, _, err := runCLI(t, append(plain, append(overrides, "--out="+ref)...)...); err != nil {
		t.Fatalf("unsharded: %v", err)
	}
	merged := filepath.Join(paths["/data/out"], "merged")
	for _, f := range []string{"points.csv", "best.yaml", "sweep.json"} {
		sameFile(t, filepath.Join(ref, f), filepath.Join(merged, f))
	}
}

// TestSweepMergeOut: sweep merge refuses an --out that holds earlier
// results unless --force, as run does, and an --out that is one of its
// inputs (however spelled) even with --force, exit 2, leaving the inputs
// as they were (issue #25 D13).
func TestSweepMergeOut(t *testing.T) {
	root := t.TempDir()
	shard := func(i int) string {
		d := filepath.Join(root, fmt.Sprintf("shard-%d", i))
		if _, _, err := runCLI(t, append([]string{"sweep", "--vary", "queue-scorer.weight=1,2", "--shard", fmt.Sprintf("%d/2", i), "--out", d}, tiny...)...); err != nil {
			t.Fatal(err)
		}
		return d
	}
	a, b := shard(0), shard(1)
	log := filepath.Join(a, "points.jsonl")
	orig, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	results := filepath.Join(root, "earlier")
	if err := os.Mkdir(results, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(results, "summary.json"), "{}\n")
	if err := os.Symlink(a, filepath.Join(root, "alias")); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(root, "file")
	writeFile(t, file, "x")
	for _, tc := range []struct {
		name string
		out  string
		more []string
		want string // "" for success
	}{
		{"new directory", filepath.Join(root, "merged"), nil, ""},
		{"earlier results", results, nil, "--out " + results + " already holds earlier results (summary.json): pass --force"},
		{"earlier results, --force", results, []string{"--force"}, ""},
		{"an input", a, nil, "--out " + a + " is the input directory " + a},
		{"an input, --force", a, []string{"--force"}, "is the input directory"},
		{"an input, spelled otherwise", a + "/.", []string{"--force"}, "is the input directory"},
		{"an input through a link", filepath.Join(root, "alias"), []string{"--force"}, "is the input directory"},
		{"a file", file, []string{"--force"}, "--out " + file + ": not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runCLI(t, append([]string{"sweep", "merge", a, b, "--out", tc.out, "--dpi", "20"}, tc.more...)...)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if _, err := os.Stat(filepath.Join(tc.out, "points.csv")); err != nil {
					t.Error(err)
				}
				return
			}
			if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v (exit %d), want exit 2 and %q", err, exitCode(err), tc.want)
			}
			if now, err := os.ReadFile(log); err != nil || !bytes.Equal(now, orig) {
				t.Fatalf("the input's points.jsonl changed: %v", err)
			}
		})
	}
}
