package scenario

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eppsim/eppsim/internal/gctune"
	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/sim"
	"github.com/eppsim/eppsim/workload"
)

// scalePoint is one run of BenchmarkScale: a synthesized Mooncake-format
// trace of Requests conversation turns at RatePerReplica requests per
// second per replica on Replicas replicas of Llama-3.1-8B on H100 behind
// the default config.
type scalePoint struct {
	Replicas       int
	Requests       int
	RatePerReplica float64
}

// scaleResult is what a point's process measured.
type scaleResult struct {
	scalePoint
	WallSeconds float64 // the simulation (RunContext), trace synthesis excluded
	CPUSeconds  float64 // of the simulation
	PeakRSSMiB  float64 // of the whole process
	Completed   int
}

// scaleTrace is the synthesized workload of a point: conversations (a new
// turn extends the previous prompt by up to 1,500 tokens, up to 8,000
// tokens) over 16 shared system prompts, 200 conversations open per
// replica, outputs of 1 to 400 tokens.
func scaleTrace(p scalePoint) hashIDTrace {
	return hashIDTrace{Format: "mooncake", Requests: p.Requests, Sessions: 200 * p.Replicas,
		RatePerS: p.RatePerReplica * float64(p.Replicas), BlockSize: 512, MaxPrompt: 8000, SystemPrompts: 16, Seed: 1}
}

// scaleEnv names the point a child process of BenchmarkScale runs.
const scaleEnv = "EPPSIM_SCALE_POINT"

// TestScalePoint runs the point that BenchmarkScale passes in its
// environment (in a process of its own, so that the peak RSS is the
// point's) and prints its scaleResult as one JSON line. Without it, it
// does nothing.
func TestScalePoint(t *testing.T) {
	arg := os.Getenv(scaleEnv)
	if arg == "" {
		t.Skip("run by BenchmarkScale")
	}
	var p scalePoint
	if err := json.Unmarshal([]byte(arg), &p); err != nil {
		t.Fatal(err)
	}
	gctune.Start(gctune.DefaultLimit) // as eppsim's main does
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	writeHashIDTrace(t, path, scaleTrace(p))
	preset, err := replica.LookupPreset("llama-3.1-8b-h100")
	if err != nil {
		t.Fatal(err)
	}
	spec := &Spec{Version: "bench", Trace: path, Workload: workload.Options{Seed: 1},
		Fleet: sim.UniformFleet(p.Replicas, preset), Env: sim.Options{Seed: 1}}
	cpu0, start := cpuSeconds(), time.Now()
	s, err := Run(spec, ForSource("default"), Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	r := scaleResult{scalePoint: p, WallSeconds: time.Since(start).Seconds(), CPUSeconds: cpuSeconds() - cpu0,
		PeakRSSMiB: peakRSSBytes() / (1 << 20), Completed: s.Requests.Complete}
	b, _ := json.Marshal(r)
	fmt.Printf("scale-result %s\n", b)
}

// Scale series: the fleet at constant load per replica and simulated
// duration (the requests grow with the replicas), and the trace length on
// 64 replicas.
var (
	scaleFleets   = []int{4, 8, 16, 32, 64, 128, 256, 512}
	scaleLengths  = []int{10_000, 30_000, 100_000, 300_000, 1_000_000}
	scaleDuration = 900.0 // simulated seconds of the fleet series
	scaleRate     = 0.5   // requests per second per replica
)

// BenchmarkScale measures how the simulator's cost grows (issue #17, item
// 4): simulated requests per wall second and peak RSS against fleet size
// (4 to 512 replicas at 0.5 requests/s per replica for 15 simulated
// minutes) and against trace length (10k to 1M requests on 64 replicas).
// Each point runs in a process of its own (TestScalePoint), for its own
// peak RSS. With EPPSIM_SCALE_OUT=DIR it also writes scale.csv and the
// plots scale.svg and scale.png there (README, Performance). It takes a
// few minutes; run it with -benchtime 1x.
func BenchmarkScale(b *testing.B) {
	var points []scalePoint
	for _, n := range scaleFleets {
		points = append(points, scalePoint{Replicas: n, Requests: int(scaleRate * scaleDuration * float64(n)), RatePerReplica: scaleRate})
	}
	for _, n := range scaleLengths {
		points = append(points, scalePoint{Replicas: 64, Requests: n, RatePerReplica: scaleRate})
	}
	var results []scaleResult
	for i, p := range points {
		series := "fleet"
		if i >= len(scaleFleets) {
			series = "length"
		}
		b.Run(fmt.Sprintf("%s/replicas=%d/requests=%d", series, p.Replicas, p.Requests), func(b *testing.B) {
			var r scaleResult
			for b.Loop() {
				r = runScalePoint(b, p)
			}
			b.ReportMetric(float64(r.Completed)/r.WallSeconds, "requests/s")
			b.ReportMetric(float64(r.Completed)/r.CPUSeconds, "requests/cpu-s")
			b.ReportMetric(r.CPUSeconds, "cpu-s")
			b.ReportMetric(r.PeakRSSMiB, "peak-RSS-MiB")
			results = append(results, r)
		})
	}
	if dir := os.Getenv("EPPSIM_SCALE_OUT"); dir != "" && len(results) == len(points) {
		if err := writeScale(dir, results); err != nil {
			b.Fatal(err)
		}
	}
}

// runScalePoint runs p in a child process and returns its result.
func runScalePoint(b *testing.B, p scalePoint) scaleResult {
	b.Helper()
	arg, _ := json.Marshal(p)
	cmd := exec.Command(os.Args[0], "-test.run=^TestScalePoint$", "-test.v", "-test.count=1", "-test.timeout=1h")
	cmd.Env = append(os.Environ(), scaleEnv+"="+string(arg))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		b.Fatalf("point %+v: %v\n%s", p, err, out.String())
	}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "scale-result "); ok {
			var r scaleResult
			if err := json.Unmarshal([]byte(rest), &r); err != nil {
				b.Fatal(err)
			}
			if r.Completed == 0 {
				b.Fatalf("point %+v: nothing completed", p)
			}
			return r
		}
	}
	b.Fatalf("point %+v: no result\n%s", p, out.String())
	return scaleResult{}
}

// TestWriteScale checks scale.csv's derived columns on two made-up points
// (rates by hand: 1000/2 = 500 per wall second, 1000/4 = 250 per CPU
// second) and that both plots are written.
func TestWriteScale(t *testing.T) {
	dir := t.TempDir()
	var rs []scaleResult
	for i := range len(scaleFleets) + len(scaleLengths) {
		rs = append(rs, scaleResult{scalePoint: scalePoint{Replicas: 4, Requests: 1000, RatePerReplica: 0.5},
			WallSeconds: 2, CPUSeconds: 4, PeakRSSMiB: 100 + float64(i), Completed: 1000})
	}
	if err := writeScale(dir, rs); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "scale.csv"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 1+len(rs) {
		t.Fatalf("%d lines, want %d", len(lines), 1+len(rs))
	}
	if want := "fleet,4,1000,1000,2.000,4.000,500,250,100"; lines[1] != want {
		t.Errorf("first row %q, want %q", lines[1], want)
	}
	if want := fmt.Sprintf("length,4,1000,1000,2.000,4.000,500,250,%d", 100+len(scaleFleets)); lines[1+len(scaleFleets)] != want {
		t.Errorf("first length row %q, want %q", lines[1+len(scaleFleets)], want)
	}
	for _, f := range []string{"scale.svg", "scale.png"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}
