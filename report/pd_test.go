package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/sim"
)

const msNs = int64(1e6)

// pdRecords are three P/D-era records on a fleet of one prefill pod (r0)
// and two decode pods (r1, r2): two disaggregated requests and one
// decode-only.
func pdRecords() []sim.Record {
	return []sim.Record{
		{ID: 1, Replica: 1, PromptTokens: 1000, OutputTokens: 3, CachedTokens: 200, TTFT: 60 * msNs, E2E: 80 * msNs, Outcome: sim.Completed,
			PD: &sim.PDRecord{Disaggregated: true, Reason: "disaggregated", DeciderPromptTokens: 1000, DeciderCachedTokens: 64, PrefillReplica: 0,
				PrefillQueue: 10 * msNs, PrefillTime: 30 * msNs, DecodeQueue: 2 * msNs, TransferTime: 20 * msNs, PullWait: 4 * msNs, DecodeTime: 27 * msNs,
				PulledBlocks: 60, TransferBytes: 60 << 21, DecodeHitTokens: 48}},
		{ID: 2, Replica: 2, PromptTokens: 500, OutputTokens: 1, CachedTokens: 0, TTFT: 40 * msNs, E2E: 40 * msNs, Outcome: sim.Completed,
			PD: &sim.PDRecord{Disaggregated: true, Reason: "disaggregated", DeciderPromptTokens: 520, DeciderCachedTokens: 0, PrefillReplica: 0,
				PrefillQueue: 0, PrefillTime: 20 * msNs, DecodeQueue: 0, TransferTime: 10 * msNs, PullWait: 0, DecodeTime: 12 * msNs,
				PulledBlocks: 32, TransferBytes: 32 << 21, DecodeHitTokens: 0}},
		{ID: 3, Replica: 1, PromptTokens: 300, OutputTokens: 5, CachedTokens: 288, TTFT: 5 * msNs, E2E: 25 * msNs, Outcome: sim.Completed,
			PD: &sim.PDRecord{Reason: "cached-prefix", DeciderPromptTokens: 300, DeciderCachedTokens: 320, PrefillReplica: -1,
				DecodeQueue: 1 * msNs, DecodeTime: 5 * msNs, DecodeHitTokens: 288}},
	}
}

// TestPDSummary: every P/D figure of pdRecords by hand.
func TestPDSummary(t *testing.T) {
	a := NewAggregator()
	recs := pdRecords()
	for i := range recs {
		a.Add(&recs[i])
	}
	res := &sim.Result{Replicas: []sim.ReplicaResult{
		{Name: "p0", Role: "prefill", MeanKVUsage: 0.5, PeakKVUsage: 0.9, MeanWaiting: 2},
		{Name: "d1", Role: "decode", MeanKVUsage: 0.2, PeakKVUsage: 0.3, MeanRunning: 4},
		{Name: "d2", Role: "decode", MeanKVUsage: 0.4, PeakKVUsage: 0.6, MeanRunning: 2},
	}}
	s := a.Summary(res)
	pd := s.PD
	if pd == nil || pd.Requests != 3 || pd.Disaggregated != 2 || pd.DisaggregatedShare != 2.0/3 ||
		pd.Reasons["disaggregated"] != 2 || pd.Reasons["cached-prefix"] != 1 {
		t.Fatalf("decisions %+v", pd)
	}
	// Uncached by the decider: 936 and 520 disaggregated, −20 decode-only.
	if d := pd.Decider.UncachedDisaggregated; d.P50 != 520 || d.Max != 936 || d.Mean != 728 || pd.Decider.UncachedDecodeOnly.P50 != -20 {
		t.Errorf("decider %+v", pd.Decider)
	}
	tr := pd.Transfer
	if tr.MiBPerRank.P50 != 64 || tr.MiBPerRank.Max != 120 || tr.TimeMs.Mean != 15 || tr.Blocks.P50 != 32 || tr.WaitMs.Max != 4 ||
		tr.TotalGiB != 92.0*2/1024 || tr.DecodeHitShare != 48.0/1500 {
		t.Errorf("transfer %+v", tr)
	}
	p, d := pd.Pools["prefill"], pd.Pools["decode"]
	if p == nil || d == nil || len(pd.Pools) != 2 {
		t.Fatalf("pools %+v", pd.Pools)
	}
	// Prefill pool: 2 prefill legs (30, 20 ms), queues 10 and 0 ms.
	if p.Replicas != 1 || p.PrefillLegs != 2 || p.DecodeLegs != 0 || p.PrefillLegMs.Max != 30 || p.PrefillLegMs.P50 != 20 ||
		p.QueueMs.Mean != 5 || p.LoadImbalance != 1 || p.MeanKVUsage != 0.5 || p.PeakKVUsage != 0.9 || p.MeanWaiting != 2 {
		t.Errorf("prefill pool %+v", p)
	}
	// Decode pool: d1 served 2 decode legs, d2 one: busiest 2 ÷ mean 1.5.
	// TPOT of the requests with more than one token: 10 ms, 5 ms.
	if d.Replicas != 2 || d.DecodeLegs != 3 || d.PrefillLegs != 0 || d.DecodeLegMs.Max != 27 || d.QueueMs.Max != 2 ||
		d.LoadImbalance != 2/1.5 || d.TPOTMs.P50 != 5 || d.TPOTMs.Max != 10 ||
		d.MeanKVUsage != 0.30000000000000004 || d.PeakKVUsage != 0.6 || d.MeanRunning != 3 {
		t.Errorf("decode pool %+v", d)
	}
	// A disaggregated request counts on both its pods; its reuse belongs to
	// the prefill pod that computed the prompt.
	if s.Routing.PerReplica["p0"] != 2 || s.Routing.PerReplica["d1"] != 2 || s.Routing.PerReplica["d2"] != 1 || s.Routing.IdleReplicas != 0 {
		t.Errorf("routing %+v", s.Routing.PerReplica)
	}
	if s.Cache.PerReplica["p0"] != 200.0/1500 || s.Cache.PerReplica["d1"] != 288.0/300 {
		t.Errorf("per-replica hits %+v", s.Cache.PerReplica)
	}
	// The P/D reads' external queries do not make a CPU tier.
	res.Replicas[1].Stats = replica.Stats{ExternalQueries: 952, PulledTokens: 952}
	if a.Summary(res).Cache.Offload != nil {
		t.Error("offload summary from P/D reads")
	}
	want1 := "pd disaggregates 66.7% of requests (decode-only: cached 33.3%); a KV read moves 64 MiB per rank in 10.0 ms (p50), " +
		"and the decode pods already held 3.2% of those prompts; prefill legs wait 0.0 ms and take 20.0 ms (p50) on 1 prefill pods " +
		"at 50.0% mean KV usage; decode legs reach their first token in 12.0 ms (p50) on 2 decode pods (load imbalance 1.33)."
	if got := pdSentence(NamedSummary{"pd", s}); got != want1 {
		t.Errorf("finding\n%s\nwant\n%s", got, want1)
	}
	// Headline rows: the P/D group and one group per pool.
	rows := HeadlineRows([]NamedSummary{{"agg", a2(t)}, {"pd", s}})
	var got []string
	for _, r := range rows {
		if strings.HasPrefix(r.Group, "P/D") || strings.HasSuffix(r.Group, " pool") {
			if r.Label != "" {
				got = append(got, r.Group+": "+r.Label+" = "+strings.Join(r.Cells, " | "))
			}
		}
	}
	want := []string{
		"P/D disaggregation: disaggregated (share of requests) = – | 66.7%",
		"P/D disaggregation: decode-only because = – | cached 33.3%",
		"P/D disaggregation: KV read per request p50 / p99 (MiB per rank) = – | 64.0 / 120.0",
		"P/D disaggregation: KV read time p50 / p99 (ms) = – | 10.00 / 20.00",
		"P/D disaggregation: wait from read to promotion p50 (ms) = – | 0.00",
		"prefill pool: replicas; prefill / decode legs = – | 1; 2 / 0",
		"prefill pool: prefill leg p50 / p99 (ms) = – | 20.0 / 30.0",
		"prefill pool: decode leg to first token p50 / p99 (ms) = – | –",
		"prefill pool: queue wait p50 / p99 (ms) = – | 0.0 / 10.0",
		"prefill pool: TPOT p50 (ms) = – | –",
		"prefill pool: mean KV usage; mean waiting = – | 50.0%; 2.0",
		"prefill pool: load imbalance (max/mean) = – | 1.00",
		"decode pool: replicas; prefill / decode legs = – | 2; 0 / 3",
		"decode pool: prefill leg p50 / p99 (ms) = – | –",
		"decode pool: decode leg to first token p50 / p99 (ms) = – | 12.0 / 27.0",
		"decode pool: queue wait p50 / p99 (ms) = – | 1.0 / 2.0",
		"decode pool: TPOT p50 (ms) = – | 5.00",
		"decode pool: mean KV usage; mean waiting = – | 30.0%; 0.0",
		"decode pool: load imbalance (max/mean) = – | 1.33",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rows\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// a2 is a summary without P/D.
func a2(t *testing.T) *Summary {
	t.Helper()
	a := NewAggregator()
	a.Add(&sim.Record{ID: 1, PromptTokens: 10, OutputTokens: 1, Outcome: sim.Completed})
	s := a.Summary(&sim.Result{Replicas: []sim.ReplicaResult{{Name: "r"}}})
	if s.PD != nil {
		t.Fatal("P/D summary without P/D records")
	}
	return s
}

// TestPDColumns: with Meta.PD requests.csv gains the P/D columns, empty
// for a record without a P/D part; without it the file is as before.
func TestPDColumns(t *testing.T) {
	for _, pd := range []bool{false, true} {
		dir := t.TempDir()
		o, err := NewOutput(dir, Meta{Seed: 1, PD: pd})
		if err != nil {
			t.Fatal(err)
		}
		w := o.BeginRun("c", "p0", "d1", "d2")
		recs := pdRecords()
		recs = append(recs, sim.Record{ID: 4, Replica: 2, PromptTokens: 10, OutputTokens: 1, Outcome: sim.Completed})
		for i := range recs {
			w.AddRecord(&recs[i])
		}
		w.End(NewAggregator().Summary(nil), []string{"p0", "d1", "d2"})
		if err := o.Close(); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(dir, RequestsFile))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		header := RequestsHeader
		if pd {
			header += "," + PDColumns
		}
		if lines[0] != header {
			t.Fatalf("PD %v: header %s", pd, lines[0])
		}
		for _, l := range lines {
			if n := strings.Count(l, ","); n != strings.Count(header, ",") {
				t.Fatalf("PD %v: %d commas in %s", pd, n, l)
			}
		}
		if !pd {
			continue
		}
		if got := lines[1][strings.Index(lines[1], "true,disaggregated"):]; got != "true,disaggregated,1000,64,p0,10.000,30.000,2.000,20.000,4.000,27.000,60,125829120,48,0" {
			t.Errorf("disaggregated row's P/D columns %s", got)
		}
		if got := lines[3][strings.Index(lines[3], "false,cached-prefix"):]; got != "false,cached-prefix,300,320,,,,1.000,,,5.000,0,0,288,0" {
			t.Errorf("decode-only row's P/D columns %s", got)
		}
		if !strings.HasSuffix(lines[4], ",false"+strings.Repeat(",", 15)) {
			t.Errorf("row without P/D: %s", lines[4])
		}
	}
}
