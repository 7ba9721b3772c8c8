package report

import (
	"strings"
	"testing"
)

// emptySummary is testSummary's run after a change that made every
// request fail: nothing measured, so latency, throughput and the ladder
// are null and the producer has no entry.
func emptySummary(seed uint64) *Summary {
	s := testSummary(seed, 100)
	s.Requests.Complete, s.Requests.Rejected = 0, 100
	s.Latency.TTFT, s.Latency.E2E, s.Latency.TPOT, s.Latency.Queue = dist(nil), dist(nil), dist(nil), dist(nil)
	s.Throughput.RequestsPerS, s.Throughput.OutputTokensPerS, s.Throughput.InputTokensPerS = Undefined(), Undefined(), Undefined()
	s.Cache.TrueHitRatio, s.Cache.OracleHitRatio = Undefined(), Undefined()
	s.Cache.PerReplica = nil
	s.Prediction = nil
	return s
}

// TestDiffNullCurrentFails (issue #25): a baseline that measured TTFT p99
// 100 ms against a current run that measured nothing. The old summaries
// wrote 0 and diff called it a 100% improvement; now the four checked
// metrics the baseline has (TTFT p99, E2E p99, throughput, true hit
// ratio) are not comparable and fail the comparison, the table shows
// null, and nothing is called improved.
func TestDiffNullCurrentFails(t *testing.T) {
	base := writeDoc(t, map[string]*Summary{"default": testSummary(1, 100)})
	cur := writeDoc(t, map[string]*Summary{"default": emptySummary(1)})
	res, err := diffDirs(t, base, cur, DiffOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"latency_ms.ttft.p99", "latency_ms.e2e.p99", "throughput.requests_per_s", "cache.true_hit_ratio"} {
		r := row(t, res, 0, m)
		if r.Verdict != VerdictNotComparable || !r.Fails || r.CurrentNull != 1 || r.Current != nil || r.Baseline == nil || r.RelChange != nil {
			t.Errorf("%s: %+v", m, r)
		}
	}
	// An info row (no threshold) is not comparable but fails nothing.
	if r := row(t, res, 0, "latency_ms.ttft.p50"); r.Verdict != VerdictNotComparable || r.Fails {
		t.Errorf("ttft p50: %+v", r)
	}
	// The producer is gone from current: missing, as before.
	if r := row(t, res, 0, "prediction.approx-prefix-cache-producer.mae"); r.Verdict != VerdictMissing || r.Fails {
		t.Errorf("mae: %+v", r)
	}
	if res.Regressions != 4 || res.Verdict != "regression" {
		t.Fatalf("%d regressions, verdict %s", res.Regressions, res.Verdict)
	}
	md := string(res.Markdown())
	for _, want := range []string{
		"## eppsim diff: REGRESSION",
		"**4 checked metrics undefined (null) in current: nothing there to check.**",
		"| `latency_ms.ttft.p99` | 100 | null | – | +5% | **NOT COMPARABLE**: undefined in current, the check cannot pass |",
		"| `latency_ms.ttft.p50` | 40 | null | – | – | not comparable: undefined in current |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "improved") {
		t.Errorf("markdown calls nothing measured an improvement:\n%s", md)
	}
	if got := res.RegressedMetrics(); len(got) != 4 || got[0] != "default: latency_ms.ttft.p99 (undefined in current)" {
		t.Errorf("regressed metrics %q", got)
	}
	if _, err := res.JSON(); err != nil {
		t.Fatal(err)
	}
}

// TestDiffNullBaselineDoesNotFail: the baseline measured nothing and the
// current run does: not comparable (no change to speak of), and no
// failure; both null: not comparable, no failure either.
func TestDiffNullBaselineDoesNotFail(t *testing.T) {
	empty := writeDoc(t, map[string]*Summary{"default": emptySummary(1)})
	full := writeDoc(t, map[string]*Summary{"default": testSummary(1, 100)})
	for _, tc := range []struct {
		name, base, cur string
		side            string
	}{
		{"baseline null", empty, full, "not comparable: undefined in baseline"},
		{"both null", empty, empty, "not comparable: undefined in baseline and current"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := diffDirs(t, tc.base, tc.cur, DiffOptions{})
			if err != nil {
				t.Fatal(err)
			}
			r := row(t, res, 0, "latency_ms.ttft.p99")
			if r.Verdict != VerdictNotComparable || r.Fails || res.Regressions != 0 || res.Verdict != "ok" {
				t.Fatalf("row %+v; %d regressions, verdict %s", r, res.Regressions, res.Verdict)
			}
			if md := string(res.Markdown()); !strings.Contains(md, tc.side) {
				t.Fatalf("markdown lacks %q:\n%s", tc.side, md)
			}
		})
	}
}

// TestDiffNullInOneSeed: a side whose metric is null in one of its seeds
// has no mean (it would hide the seed that measured nothing).
func TestDiffNullInOneSeed(t *testing.T) {
	base := writeDoc(t, map[string]*Summary{"default seed=1": testSummary(1, 100), "default seed=2": testSummary(2, 110)})
	cur := writeDoc(t, map[string]*Summary{"default seed=1": testSummary(1, 100), "default seed=2": emptySummary(2)})
	res, err := diffDirs(t, base, cur, DiffOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := row(t, res, 0, "latency_ms.ttft.p99")
	if r.Verdict != VerdictNotComparable || !r.Fails || r.CurrentNull != 1 || r.Current != nil || r.Baseline == nil || r.Baseline.N != 2 {
		t.Fatalf("row %+v", r)
	}
	if got := r.currentCell(); got != "null in 1 of 2 runs" {
		t.Fatalf("current cell %q", got)
	}
}

// TestDiffStrictNull: in strict mode (the regression gate) a number that
// became null is a changed field, and null against null is no change.
func TestDiffStrictNull(t *testing.T) {
	base := writeDoc(t, map[string]*Summary{"default": testSummary(1, 100)})
	cur := writeDoc(t, map[string]*Summary{"default": emptySummary(1)})
	res, err := diffDirs(t, base, cur, DiffOptions{Tolerance: 1e-9})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range res.Pairs[0].Changes {
		if c.Field == "latency_ms.ttft.p99" {
			found = c.Baseline == "100" && c.Current == "null"
		}
	}
	if !found {
		t.Fatalf("no change 100 → null of latency_ms.ttft.p99 in %+v", res.Pairs[0].Changes)
	}
	same, err := diffDirs(t, cur, cur, DiffOptions{Tolerance: 1e-9})
	if err != nil {
		t.Fatal(err)
	}
	if len(same.Pairs[0].Changes) != 0 || same.Regressions != 0 {
		t.Fatalf("null vs null: %+v, %d regressions", same.Pairs[0].Changes, same.Regressions)
	}
}
