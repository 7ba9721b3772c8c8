package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"sigs.k8s.io/yaml"
)

// capacityTrace is a small Mooncake-format trace: 400 requests 100 ms
// apart, each 600 prompt tokens (two blocks, the first shared by every
// fifth request) and 20 output tokens.
func capacityTrace(t *testing.T) string {
	t.Helper()
	var b bytes.Buffer
	for i := range 400 {
		fmt.Fprintf(&b, `{"timestamp": %d, "input_length": 600, "output_length": 20, "hash_ids": [%d, %d]}`+"\n", 100*i, i%5, 100+i)
	}
	path := filepath.Join(t.TempDir(), "cap.jsonl")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCapacityCLI(t *testing.T) {
	trace := capacityTrace(t)
	base := []string{"capacity", "--trace", trace, "--mode", "open-loop", "--replicas", "2", "--progress", "never", "--dpi", "20",
		"--tolerance", "0.2", "--epp-config", "round-robin", "--epp-config", "default", "--slo", "ttft_p99<=80ms", "--slo", "success>=0.99"}
	dir := filepath.Join(t.TempDir(), "all")
	out, _, err := runCLI(t, append(base, "--out", dir)...)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"capacity: highest rate on 2 replicas (the traffic as given: 10.025 req/s)",
		"config       max rate", "binding SLO term", "round-robin  ", "\nWhat this run shows:\n- ", "stopped early once the SLO could no longer hold",
		"wrote capacity.json, curves.csv, capacity.md and the plots in " + dir} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, f := range []string{"capacity.json", "curves.csv", "capacity.md", "slo-ttft_p99.svg", "slo-success.png", "replicas.svg"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	// Two shards, merged, give the unsharded search's files.
	var shards []string
	for i := range 2 {
		d := filepath.Join(t.TempDir(), fmt.Sprint("shard-", i))
		if _, _, err := runCLI(t, append(base, "--shard", fmt.Sprintf("%d/2", i), "--out", d)...); err != nil {
			t.Fatal(err)
		}
		shards = append(shards, d)
	}
	merged := filepath.Join(t.TempDir(), "merged")
	if _, _, err := runCLI(t, append([]string{"capacity", "merge", "--dpi", "20", "--out", merged}, shards...)...); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"capacity.json", "curves.csv", "capacity.md", "slo-ttft_p99.svg", "replicas.png"} {
		sameFile(t, filepath.Join(dir, f), filepath.Join(merged, f))
	}
	if _, _, err := runCLI(t, "capacity", "merge", "--out", filepath.Join(t.TempDir(), "m"), shards[0]); exitCode(err) != 2 {
		t.Errorf("a merge missing a shard: %v (exit %d), want exit 2", err, exitCode(err))
	}
	// The replica question.
	out, _, err = runCLI(t, append(base[:len(base)-4], "--slo", "ttft_p99<=80ms", "--rate", "1500")...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "capacity: fewest replicas at 1500.000 req/s") || !strings.Contains(out, " replicas  ") {
		t.Errorf("replica search output:\n%s", out)
	}
}

func TestCapacityBadInput(t *testing.T) {
	trace := capacityTrace(t)
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"capacity", "--trace", trace, "--replicas", "1", "--progress", "never"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "--slo: at least one term"},
		{[]string{"--slo", "ttft_p98<=1s"}, `--slo "ttft_p98<=1s": unknown metric`},
		{[]string{"--slo", "ttft_p99<=1s", "--rate", "-1"}, "--rate -1"},
		{[]string{"--slo", "ttft_p99<=1s", "--tolerance", "0"}, "--tolerance 0"},
		{[]string{"--slo", "ttft_p99<=1s", "--tolerance", "NaN"}, "--tolerance"},
		{[]string{"--slo", "ttft_p99<=1s", "--seeds", "0"}, "--seeds 0"},
		{[]string{"--slo", "ttft_p99<=1s", "--shard", "2/2"}, "shard"},
		{[]string{"--slo", "ttft_p99<=1s", "--epp-config", "nope"}, "--epp-config nope"},
		{[]string{"--slo", "ttft_p99<=1s", "--out", full}, "already holds earlier results"},
		{[]string{"--slo", "ttft_p99<=1s", "--points-per-round", "-1"}, "--points-per-round -1"},
		{[]string{"--slo", "ttft_p99<=1s", "--share", full}, "needs --shard I/N"},
		{[]string{"--slo", "ttft_p99<=1s", "--shard", "0/2", "--share", filepath.Join(full, "x")}, "--share"},
		{[]string{"--slo", "ttft_p99<=1s", "--shard", "0/2", "--share", full, "--share-wait", "0s"}, "--share-wait 0s"},
	} {
		_, _, err := runCLI(t, append(base, tc.args...)...)
		if exitCode(err) != 2 || err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v (exit %d), want exit 2 and %q", tc.args, err, exitCode(err), tc.want)
		}
	}
}

// TestCapacityResumes: --out keeps the run log; the same command again
// reads every run from it and writes the same files, without --force;
// another search on that directory is refused (exit 2, naming the log)
// unless --force starts it over.
func TestCapacityResumes(t *testing.T) {
	trace := capacityTrace(t)
	dir := filepath.Join(t.TempDir(), "cap")
	base := []string{"capacity", "--trace", trace, "--mode", "open-loop", "--replicas", "2", "--progress", "never", "--dpi", "20",
		"--tolerance", "0.2", "--epp-config", "round-robin", "--slo", "ttft_p99<=80ms", "--out", dir}
	if _, _, err := runCLI(t, base...); err != nil {
		t.Fatal(err)
	}
	first, err := os.ReadFile(filepath.Join(dir, "capacity.json"))
	if err != nil {
		t.Fatal(err)
	}
	log, err := os.ReadFile(filepath.Join(dir, "runs.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := runCLI(t, base...); err != nil {
		t.Fatalf("resuming a finished search: %v", err)
	}
	again, _ := os.ReadFile(filepath.Join(dir, "capacity.json"))
	log2, _ := os.ReadFile(filepath.Join(dir, "runs.jsonl"))
	if !bytes.Equal(first, again) || !bytes.Equal(log, log2) {
		t.Errorf("the resumed search changed capacity.json (%v) or simulated again (log %d → %d bytes)", !bytes.Equal(first, again), len(log), len(log2))
	}
	other := append(slices.Clone(base), "--slo", "success>=0.99")
	_, _, err = runCLI(t, other...)
	if exitCode(err) != 2 || !strings.Contains(fmt.Sprint(err), filepath.Join(dir, "runs.jsonl")) {
		t.Errorf("another search on the directory: %v (exit %d), want exit 2 naming runs.jsonl", err, exitCode(err))
	}
	if _, _, err := runCLI(t, append(other, "--force")...); err != nil {
		t.Errorf("--force: %v", err)
	}
}

// TestK8sCapacitySharedJob parses deploy/k8s/capacity-shared-job.yaml and
// runs its pods' command lines locally and at once (each round waits for
// every pod), with volume paths pointing at temporary directories, a small
// trace and two replicas: every pod writes the capacity.json of the
// unshared search with --points-per-round N (one configuration, one
// seed).
func TestK8sCapacitySharedJob(t *testing.T) {
	raw, err := os.ReadFile("../../deploy/k8s/capacity-shared-job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var job k8sJob
	if err := yaml.Unmarshal(raw, &job); err != nil {
		t.Fatalf("manifest: %v", err)
	}
	n := job.Spec.Completions
	if job.Metadata.Name != "eppsim-capacity-shared" || job.Spec.CompletionMode != "Indexed" || n < 2 || job.Spec.Parallelism != n {
		t.Fatalf("manifest: want an Indexed Job eppsim-capacity-shared of 2 or more completions, all running at once")
	}
	c := job.Spec.Template.Spec.Containers[0]
	if !slices.Contains(c.Args, fmt.Sprintf("--shard=$(JOB_COMPLETION_INDEX)/%d", n)) || c.Args[0] != "capacity" {
		t.Errorf("args %v: want capacity … --shard=$(JOB_COMPLETION_INDEX)/%d", c.Args, n)
	}
	paths := map[string]string{}
	for _, m := range c.VolumeMounts {
		paths[m.MountPath] = t.TempDir()
	}
	trace := capacityTrace(t)
	overrides := []string{"--trace=" + trace, "--mode=open-loop", "--replicas=2", "--slo=ttft_p99<=80ms", "--dpi=20", "--tolerance=0.05"}
	command := func(index int) []string {
		var out []string
		for _, a := range c.Args {
			if strings.HasPrefix(a, "--replicas=") || strings.HasPrefix(a, "--trace=") || strings.HasPrefix(a, "--slo=") {
				continue
			}
			a = strings.ReplaceAll(a, "$(JOB_COMPLETION_INDEX)", fmt.Sprint(index))
			for from, to := range paths {
				a = strings.ReplaceAll(a, from, to)
			}
			out = append(out, a)
		}
		return append(out, overrides...)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { _, _, errs[i] = runCLI(t, command(i)...) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("pod %d: %v", i, err)
		}
	}
	var plain []string
	for _, a := range command(0) {
		if !strings.HasPrefix(a, "--shard=") && !strings.HasPrefix(a, "--out=") && !strings.HasPrefix(a, "--share=") {
			plain = append(plain, a)
		}
	}
	ref := t.TempDir()
	if _, _, err := runCLI(t, append(plain, "--out="+ref, fmt.Sprintf("--points-per-round=%d", n))...); err != nil {
		t.Fatalf("unshared: %v", err)
	}
	for i := range n {
		sameFile(t, filepath.Join(ref, "capacity.json"), filepath.Join(paths["/data/out"], fmt.Sprintf("result-%d", i), "capacity.json"))
		if _, err := os.Stat(filepath.Join(paths["/data/out"], "share", fmt.Sprintf("runs-%d-of-%d.jsonl", i, n))); err != nil {
			t.Errorf("pod %d kept no run log: %v", i, err)
		}
	}
}

// TestK8sCapacityJob parses deploy/k8s/capacity-job.yaml and runs its
// command lines locally, as TestK8sSweepJob does for the sweep's: every
// shard of the Indexed Job (volume paths pointing at temporary
// directories, a small trace, two replicas and a tight SLO), then the
// merge Job; the merged files equal the unsharded search's.
func TestK8sCapacityJob(t *testing.T) {
	raw, err := os.ReadFile("../../deploy/k8s/capacity-job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var job, mergeJob *k8sJob
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(raw), -1) {
		var j k8sJob
		if err := yaml.Unmarshal([]byte(doc), &j); err != nil {
			t.Fatalf("manifest: %v", err)
		}
		switch j.Metadata.Name {
		case "eppsim-capacity":
			job = &j
		case "eppsim-capacity-merge":
			mergeJob = &j
		}
	}
	if job == nil || mergeJob == nil || job.Spec.CompletionMode != "Indexed" || job.Spec.Completions < 2 {
		t.Fatalf("manifest: want an Indexed Job eppsim-capacity of 2 or more completions and a Job eppsim-capacity-merge")
	}
	n := job.Spec.Completions
	c, mc := job.Spec.Template.Spec.Containers[0], mergeJob.Spec.Template.Spec.Containers[0]
	if !slices.Contains(c.Args, fmt.Sprintf("--shard=$(JOB_COMPLETION_INDEX)/%d", n)) || c.Args[0] != "capacity" {
		t.Errorf("eppsim-capacity args %v: want capacity … --shard=$(JOB_COMPLETION_INDEX)/%d", c.Args, n)
	}
	var shardDirs []string
	for i := range n {
		shardDirs = append(shardDirs, fmt.Sprintf("/data/out/shard-%d", i))
	}
	if strings.Join(mc.Args, " ") != "capacity merge "+strings.Join(shardDirs, " ")+" --out=/data/out/merged --force" {
		t.Errorf("eppsim-capacity-merge args %v: want every shard directory", mc.Args)
	}
	paths := map[string]string{}
	for _, m := range c.VolumeMounts {
		paths[m.MountPath] = t.TempDir()
	}
	subst := func(s string, index int) string {
		s = strings.ReplaceAll(s, "$(JOB_COMPLETION_INDEX)", fmt.Sprint(index))
		for from, to := range paths {
			s = strings.ReplaceAll(s, from, to)
		}
		return s
	}
	trace := capacityTrace(t)
	overrides := []string{"--trace=" + trace, "--mode=open-loop", "--replicas=2", "--slo=ttft_p99<=80ms", "--dpi=20", "--tolerance=0.2"}
	command := func(args []string, index int) []string {
		var out []string
		for _, a := range args {
			if !strings.HasPrefix(a, "--replicas=") && !strings.HasPrefix(a, "--trace=") && !strings.HasPrefix(a, "--slo=") {
				out = append(out, subst(a, index))
			}
		}
		return append(out, overrides...)
	}
	for i := range n {
		if _, _, err := runCLI(t, command(c.Args, i)...); err != nil {
			t.Fatalf("shard %d: %v", i, err)
		}
	}
	if _, _, err := runCLI(t, append(command(mc.Args, 0)[:len(mc.Args)], "--dpi=20")...); err != nil {
		t.Fatalf("merge: %v", err)
	}
	var plain []string
	for _, a := range command(c.Args, 0) {
		if !strings.HasPrefix(a, "--shard=") && !strings.HasPrefix(a, "--out=") {
			plain = append(plain, a)
		}
	}
	ref := t.TempDir()
	if _, _, err := runCLI(t, append(plain, "--out="+ref)...); err != nil {
		t.Fatalf("unsharded: %v", err)
	}
	merged := filepath.Join(paths["/data/out"], "merged")
	for _, f := range []string{"capacity.json", "curves.csv", "capacity.md", "replicas.svg"} {
		sameFile(t, filepath.Join(ref, f), filepath.Join(merged, f))
	}
}
