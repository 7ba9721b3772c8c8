package capacity

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eppsim/eppsim/scenario"
)

// logSearch is a small two-configuration, two-seed rate search on Poisson
// traffic to one constant-step replica.
func logSearch(t *testing.T) Search {
	t.Helper()
	path := poissonTrace(t, short(1200), 20, 13)
	terms, err := ParseSLO([]string{"ttft_p99<=60ms"})
	if err != nil {
		t.Fatal(err)
	}
	return Search{Spec: queueSpec(t, path, 1, constantPreset(t, 10_000)), SLO: terms, Seeds: 2, Tolerance: 0.02,
		EPPs: []scenario.EPP{scenario.ForSource("round-robin"), scenario.ForSource("least-queue")}}
}

func resultJSON(t *testing.T, r *Result) []byte {
	t.Helper()
	b, err := r.JSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func lines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.SplitAfter(strings.TrimSuffix(string(b), "\n"), "\n")
}

// TestRunLogResumes: a search that logs its runs, run again on its log,
// simulates nothing (the log gains no line) and answers byte for byte
// the same; cut to its first runs and a torn last line (an interrupted
// search), it resumes and still answers the same; another search refuses
// the log, naming it, unless told to start over.
func TestRunLogResumes(t *testing.T) {
	s := logSearch(t)
	want := resultJSON(t, must(Do(context.Background(), s)))
	dir := t.TempDir()
	s.RunLog = filepath.Join(dir, RunsFile)
	if got := resultJSON(t, must(Do(context.Background(), s))); !bytes.Equal(got, want) {
		t.Fatalf("a logged search answers differently from an unlogged one:\n%s\nwant\n%s", got, want)
	}
	all := lines(t, s.RunLog)
	runs := 0
	for _, c := range must(Do(context.Background(), s)).Configs {
		runs += len(c.Points) * 2
	}
	if len(all) != 1+runs {
		t.Fatalf("run log has %d lines, want the header and %d runs", len(all), runs)
	}
	if again := lines(t, s.RunLog); len(again) != len(all) {
		t.Errorf("a search read entirely from its log appended %d lines", len(again)-len(all))
	}

	// An interrupted search: the header, three runs and half a fourth.
	cut := strings.Join(all[:4], "") + all[4][:len(all[4])/2]
	if err := os.WriteFile(s.RunLog, []byte(cut), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := resultJSON(t, must(Do(context.Background(), s))); !bytes.Equal(got, want) {
		t.Errorf("the resumed search answers differently")
	}
	if n := len(lines(t, s.RunLog)); n != 1+runs {
		t.Errorf("after resuming, the log has %d lines, want %d", n, 1+runs)
	}

	other := s
	other.Tolerance = 0.05
	_, err := Do(context.Background(), other)
	if !scenario.IsInputError(err) || !strings.Contains(err.Error(), s.RunLog) || !strings.Contains(err.Error(), "another search") {
		t.Errorf("another search on the log: %v, want an input error naming %s", err, s.RunLog)
	}
	other.Fresh = true
	if _, err := Do(context.Background(), other); err != nil {
		t.Errorf("starting over: %v", err)
	}
}

func must(r *Result, err error) *Result {
	if err != nil {
		panic(err)
	}
	return r
}

// TestSharedSearch: two shards of a shared search, running at once on
// one directory, each simulate part of every round (both logs hold runs,
// none twice) and both write the answer of the unshared search with the
// same points per round; that answer brackets the bisection's (one point
// per round) on this monotone queue, within the tolerance, in fewer
// rounds.
func TestSharedSearch(t *testing.T) {
	base := logSearch(t)
	base.EPPs = base.EPPs[:1]
	base.Seeds = 1
	share := t.TempDir()
	res := make([]*Result, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			s := base
			s.Share, s.Shard.I, s.Shard.N = share, i, 2
			s.ShareWait.Poll = 5 * time.Millisecond
			res[i], errs[i] = Do(context.Background(), s)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("shard %d: %v", i, err)
		}
	}
	unshared := base
	unshared.PointsPerRound = 2 // the shared search's default: 2 shards, one configuration, one seed
	want := resultJSON(t, must(Do(context.Background(), unshared)))
	for i, r := range res {
		if got := resultJSON(t, r); !bytes.Equal(got, want) {
			t.Errorf("shard %d's result differs from the unshared search's with 2 points per round:\n%s\nwant\n%s", i, got, want)
		}
	}
	total := 0
	for i := range 2 {
		n := len(lines(t, filepath.Join(share, SharedRunsFile(i, 2)))) - 1
		if n == 0 {
			t.Errorf("shard %d simulated nothing", i)
		}
		total += n
	}
	if pts := len(res[0].Configs[0].Points); total != pts {
		t.Errorf("the shards logged %d runs, want one per point (%d)", total, pts)
	}

	one := must(Do(context.Background(), base)).Configs[0]
	two := res[0].Configs[0]
	if !one.Found || !two.Found || two.MaxRate > one.NextRate || one.MaxRate > two.NextRate {
		t.Errorf("two points per round found %.3f (next %.3f), one point %.3f (next %.3f): the brackets must overlap",
			two.MaxRate, two.NextRate, one.MaxRate, one.NextRate)
	}
	if m := two.NextRate/two.MaxRate - 1; m > base.Tolerance+1e-12 {
		t.Errorf("two points per round end at a margin of %.4f, above the tolerance %g", m, base.Tolerance)
	}
	rounds := func(c Config, k int) int { return int(math.Ceil(float64(len(c.Points)) / float64(k))) }
	t.Logf("one point per round: %.3f req/s in %d points; two: %.3f in %d points (%d rounds)", one.MaxRate, len(one.Points), two.MaxRate, len(two.Points), rounds(two, 2))
	if rounds(two, 2) >= rounds(one, 1) {
		t.Errorf("two points per round took %d rounds (%d points), one point %d", rounds(two, 2), len(two.Points), rounds(one, 1))
	}
}

// TestSharedSearchWaits: a shard alone waits for the other's runs and
// gives up after ShareWait.Max, naming the shard it waited for.
func TestSharedSearchWaits(t *testing.T) {
	s := logSearch(t)
	s.EPPs, s.Seeds = s.EPPs[:1], 1
	s.Share, s.Shard.I, s.Shard.N = t.TempDir(), 0, 2
	s.ShareWait.Poll, s.ShareWait.Max = time.Millisecond, 50*time.Millisecond
	_, err := Do(context.Background(), s)
	if err == nil || !strings.Contains(err.Error(), "shard 1 of 2") {
		t.Errorf("a shard alone: %v, want it to name the missing shard 1 of 2", err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	s.ShareWait.Max = time.Hour
	go func() { time.Sleep(20 * time.Millisecond); cancel(errors.New("stop")) }()
	if _, err := Do(ctx, s); err == nil || err.Error() != "stop" {
		t.Errorf("a cancelled wait: %v, want the cause", err)
	}
}

// TestMinReplicasPerRound: the replica search is exact whatever the
// points per round: on the linear fleet of TestMinReplicasLinear, three
// points per round find ⌈R / 100⌉ replicas too.
func TestMinReplicasPerRound(t *testing.T) {
	terms, err := ParseSLO([]string{"queue_p99<=1ms"})
	if err != nil {
		t.Fatal(err)
	}
	path := constantTrace(t, 2000, 50)
	for _, k := range []int{1, 3} {
		res, err := Do(context.Background(), Search{Spec: queueSpec(t, path, 4, constantPreset(t, 10_000)),
			EPPs: []scenario.EPP{scenario.ForSource("round-robin")}, SLO: terms, Rate: 1210, PointsPerRound: k})
		if err != nil {
			t.Fatal(err)
		}
		if c := res.Configs[0]; !c.Found || c.MinReplicas != 13 || c.NextReplicas != 12 {
			t.Errorf("%d points per round: min replicas %d (next %d), want 13 (next 12)", k, c.MinReplicas, c.NextReplicas)
		}
	}
}

// FuzzRunLog: reading any file as a run log either fails with an error
// or yields runs, never panics, and a valid prefix is never longer than
// the file.
func FuzzRunLog(f *testing.F) {
	f.Add([]byte(`{"format":"eppsim-capacity-runs/1","hash":"h"}` + "\n" + `{"config":0,"x":1.5,"seed":1,"run":{"seed":1,"holds":true,"final_requests":3,"requests":3,"offered_rate_per_s":2}}` + "\n"))
	f.Add([]byte(`{"format":"eppsim-capacity-runs/1","hash":"other"}` + "\n"))
	f.Add([]byte(`{"format":"eppsim-capacity-runs/1","hash":"h"}` + "\n" + `{"config":0,"x":`))
	f.Add([]byte("not json\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), RunsFile)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		l := &runLog{hash: "h", runs: map[runKey]Run{}}
		n, err := l.read(path, true)
		if err == nil && (n <= 0 || n > int64(len(data))) {
			t.Errorf("valid length %d of a %d-byte file", n, len(data))
		}
	})
}
