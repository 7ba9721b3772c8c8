package sim

import (
	"reflect"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/epp"
	"github.com/eppsim/eppsim/epp/config"
	"github.com/eppsim/eppsim/epp/plugins"
	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/workload"
)

// pdConfig is pd-epp-config.yaml with the vLLM /render token backend
// (real token counts, so the decider's T is the prompt length) and the
// given prefill decider.
func pdConfig(decider string) string {
	return `apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: token-producer
  parameters: {modelName: m}
- type: approx-prefix-cache-producer
- type: prefix-cache-scorer
- type: queue-scorer
- type: prefill-filter
- type: decode-filter
- type: max-score-picker
- type: ` + decider + `
- type: disagg-profile-handler
  parameters:
    deciders: {prefill: ` + strings.Fields(decider)[0] + `}
schedulingProfiles:
- name: prefill
  plugins:
  - pluginRef: prefill-filter
  - pluginRef: max-score-picker
  - pluginRef: prefix-cache-scorer
    weight: 2
  - pluginRef: queue-scorer
    weight: 1
- name: decode
  plugins:
  - pluginRef: decode-filter
  - pluginRef: max-score-picker
  - pluginRef: prefix-cache-scorer
    weight: 2
  - pluginRef: queue-scorer
    weight: 1
`
}

const prefixDecider = "prefix-based-pd-decider\n  parameters: {nonCachedTokens: 16}"

func pdRouter(t *testing.T, decider string) *epp.Router {
	t.Helper()
	l, err := config.Load([]byte(pdConfig(decider)), config.Options{Registry: plugins.Builtin(), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return l.Router()
}

// pdFleet is testFleet with roles and, when exact, 1 ms steps (the linear
// model), no ingest delay and synchronous scheduling, so that every time
// is computed by hand.
func pdFleet(t *testing.T, blocks int, exact bool, roles ...string) []ReplicaSpec {
	t.Helper()
	fleet := testFleet(t, len(roles), blocks)
	for i := range fleet {
		fleet[i].Labels = map[string]string{RoleLabel: roles[i]}
		if exact {
			p := &fleet[i].Preset
			p.StepModel, p.Linear = "linear", replica.Linear{StepUs: 1000}
			p.IngestUs, p.PerOutputTokenUs = 0, 0
			off := false
			p.Engine.AsyncScheduling = &off
		}
	}
	return fleet
}

func completion(r *workload.Request) *workload.Request {
	r.Endpoint, r.Body = workload.EndpointCompletions, []byte(`{"model":"m","prompt":"p"}`)
	return r
}

func runPD(t *testing.T, router *epp.Router, reqs []*workload.Request, fleet []ReplicaSpec, opts Options) ([]Record, *Result) {
	t.Helper()
	var recs []Record
	opts.OnRecord = func(r *Record) {
		c := *r
		if r.PD != nil {
			pd := *r.PD
			c.PD = &pd
		}
		recs = append(recs, c)
	}
	res, err := Run(&sliceSource{reqs: reqs}, router, fleet, opts)
	if err != nil {
		t.Fatal(err)
	}
	return recs, res
}

// TestPDTwoPods: one decode pod (r0) and one prefill pod (r1), every time
// by hand (pd-offload.md A.4, A.7, A.8; C.4 defaults: 1 ms hops, 1 ms
// response, 1 ms notification, 20 ms handshake, 25 GB/s, 50 µs).
//
// Request 0 (100 tokens, 3 out, t = 0): the decider reads T = 100, m_D = 0:
// P/D. The prefill leg reaches r1 at 1 ms (hop), is computed in [1, 2) ms;
// the response reaches the sidecar at 2 + 1 + 1 = 4 ms; r1 holds 7 blocks
// meanwhile. The decode leg's read of 7 blocks (14 680 064 B) starts at
// 4 ms: 20 ms + 50 µs + 587 202.56 ns → ends at 24 637 203 ns; r1 is
// notified 1 ms later. Promotion, the 1-token step: first token at
// 25 637 203 ns; two decode steps: done at 27 637 203 ns.
//
// Request 1 (t = 100 ms) extends request 0's prompt to 164 tokens: the
// decode pod matches 1 of its 3 router blocks (64 tokens), 164 − 64 ≥ 16:
// P/D. r1 reuses the 96 tokens request 0 left cached there and computes
// 68 in [101, 102) ms; r0 holds 96 too, so it reads ⌈164/16⌉ − 6 = 5
// blocks (no handshake): 50 µs + 419 430.4 ns → 469 430 ns from 104 ms.
//
// Request 2 (t = 200 ms) repeats request 1: the decode pod matches all 3
// router blocks (192 ≥ 164 tokens), so it is decode-only on r0, reusing
// ⌊163/16⌋·16 = 160 tokens: first token after one 1 ms step.
func TestPDTwoPods(t *testing.T) {
	const ms = int64(1e6)
	p0 := tokens(1000, 100)
	p1 := append(append([]uint32(nil), p0...), tokens(5000, 64)...)
	reqs := []*workload.Request{
		completion(req(0, 0, p0, 3)),
		completion(req(1, 100*ms, p1, 1)),
		completion(req(2, 200*ms, p1, 1)),
	}
	recs, res := runPD(t, pdRouter(t, prefixDecider), reqs, pdFleet(t, 1000, true, "decode", "prefill"), Options{Seed: 1})
	if len(recs) != 3 || res.Completed != 3 || res.HeldAtEnd != 0 {
		t.Fatalf("%d records, result %+v", len(recs), res)
	}
	type want struct {
		ttft, e2e     int64
		disagg        bool
		reason        string
		prefill       int
		cached        int // T: the computing pod's reuse
		routed        int
		deciderCached int
		xfer          int64
		blocks        int
		decodeHit     int
		predicted     float64
	}
	wants := []want{
		{25637203, 27637203, true, epp.PDReasonDisaggregated, 1, 0, 0, 0, 20*ms + 637203, 7, 0, 0},
		{105469430 - 100*ms, 105469430 - 100*ms, true, epp.PDReasonDisaggregated, 1, 96, 96, 64, 469430, 5, 96, 1.0 / 3},
		{1 * ms, 1 * ms, false, epp.PDReasonCached, -1, 160, 160, 192, 0, 0, 160, 1},
	}
	for i, w := range wants {
		r := recs[i]
		pd := r.PD
		if r.Outcome != Completed || pd == nil {
			t.Fatalf("request %d: %+v", i, r)
		}
		if r.TTFT != w.ttft || r.E2E != w.e2e || r.Replica != 0 || pd.Disaggregated != w.disagg || pd.Reason != w.reason ||
			pd.PrefillReplica != w.prefill || r.CachedTokens != w.cached || r.RoutedCachedTokens != w.routed ||
			pd.DeciderPromptTokens != r.PromptTokens || pd.DeciderCachedTokens != w.deciderCached ||
			pd.TransferTime != w.xfer || pd.PulledBlocks != w.blocks || pd.TransferBytes != int64(w.blocks)<<21 ||
			pd.DecodeHitTokens != w.decodeHit || r.Predicted != w.predicted {
			t.Errorf("request %d: record %+v\nPD %+v\nwant %+v", i, r, *pd, w)
		}
	}
	// The legs: prefill 1 ms in its pod's engine, no queue anywhere, the
	// read ends exactly at promotion (the decode pod was idle).
	if pd := recs[0].PD; pd.PrefillQueue != 0 || pd.PrefillTime != 1*ms || pd.DecodeQueue != 0 || pd.PullWait != 0 || recs[0].Queue != 0 {
		t.Errorf("legs %+v", *pd)
	}
	// Both pods' engines count their legs: r1 computed 100 + 68 prompt
	// tokens, r0 the last prompt token of each P/D request, 4 for the
	// decode-only one, and the output tokens after the first.
	st0, st1 := res.Replicas[0].Stats, res.Replicas[1].Stats
	if st1.ComputedTokens != 168 || st1.Completed != 2 || st0.Pulls != 2 || st0.PulledBlocks != 12 || st0.ComputedTokens != 1+2+1+4 {
		t.Errorf("decode stats %+v\nprefill stats %+v", st0, st1)
	}
	if res.Replicas[0].Role != "decode" || res.Replicas[1].Role != "prefill" {
		t.Errorf("roles %q %q", res.Replicas[0].Role, res.Replicas[1].Role)
	}
}

// TestPDThresholdInSim: the decider's threshold at N−1, N and N+1
// uncached tokens, end to end. A 64-token prompt (itself P/D: 64 ≥ 16)
// makes the approximate producer index its router block on both pods; an
// extension by 15 tokens then leaves 15 uncached on the decode pod and
// stays decode-only, by 16 or 17 it is disaggregated (pd-offload.md A.3:
// T − 64·m_D ≥ 16 with m_D = 1).
func TestPDThresholdInSim(t *testing.T) {
	const ms = int64(1e6)
	base := tokens(1000, 64)
	for _, c := range []struct {
		extra  int
		disagg bool
	}{{15, false}, {16, true}, {17, true}} {
		p := append(append([]uint32(nil), base...), tokens(9000, c.extra)...)
		reqs := []*workload.Request{completion(req(0, 0, base, 1)), completion(req(1, 100*ms, p, 1))}
		recs, _ := runPD(t, pdRouter(t, prefixDecider), reqs, pdFleet(t, 1000, true, "decode", "prefill"), Options{Seed: 1})
		pd := recs[1].PD
		if pd.Disaggregated != c.disagg || pd.DeciderCachedTokens != 64 || pd.DeciderPromptTokens != 64+c.extra {
			t.Errorf("%d uncached tokens: %+v, want disaggregated %v", c.extra, *pd, c.disagg)
		}
	}
}

// TestPDConservationAndDeterminism: sessions on 2 prefill and 3 decode
// pods with small caches and default (calibrated, asynchronous) engines:
// every request ends once, both legs are accounted for, every held
// prefill leg is released, the ladder holds, and the run is a function of
// its inputs.
func TestPDConservationAndDeterminism(t *testing.T) {
	mk := func() []*workload.Request {
		var out []*workload.Request
		for i := range 150 {
			// Pairs of identical prompts: the second is decode-only.
			j := i / 2
			prompt := append(tokens(j%9*5000, 600+j%5*100), tokens(100000+j*1000, 20+j*13%300)...)
			out = append(out, completion(req(int64(i), int64(i)*15_000_000, prompt, 1+i*7%60)))
		}
		// Too long for any pod: rejected by the prefill pod.
		out = append(out, completion(req(150, 151*15_000_000, tokens(0, 40000), 10)))
		return out
	}
	fleet := pdFleet(t, 400, false, "prefill", "decode", "prefill", "decode", "decode")
	recs1, res1 := runPD(t, pdRouter(t, prefixDecider), mk(), fleet, Options{Seed: 3})
	if res1.Injected != 151 || res1.Completed+res1.Rejected != 151 || res1.InFlight != 0 || res1.HeldAtEnd != 0 || len(recs1) != 151 || res1.Rejected != 1 {
		t.Fatalf("conservation: %+v, %d records", res1, len(recs1))
	}
	seen := map[int64]bool{}
	var disagg, decodeOnly, pulls int
	var prefillTokens int64
	for _, r := range recs1 {
		if seen[r.ID] {
			t.Fatalf("request %d recorded twice", r.ID)
		}
		seen[r.ID] = true
		if r.Outcome != Completed {
			if r.ID != 150 || !strings.HasPrefix(r.Reason, "prefill pod: ") {
				t.Fatalf("rejected %+v", r)
			}
			continue
		}
		pd := r.PD
		if pd == nil || r.TTFT <= 0 || r.E2E < r.TTFT || r.InfiniteCachedTokens < r.OracleCachedTokens || r.OracleCachedTokens < r.RoutedCachedTokens {
			t.Fatalf("record %+v", r)
		}
		if fleet[r.Replica].Labels[RoleLabel] != "decode" {
			t.Fatalf("request %d decoded on %s", r.ID, fleet[r.Replica].Name)
		}
		if pd.Disaggregated {
			disagg++
			pulls++
			if fleet[pd.PrefillReplica].Labels[RoleLabel] != "prefill" || pd.PulledBlocks < 1 || pd.TransferTime <= 0 || pd.PullWait < 0 ||
				pd.PrefillTime <= 0 || r.TTFT < pd.PrefillTime+pd.TransferTime || r.Queue != pd.PrefillQueue+pd.DecodeQueue ||
				pd.PulledBlocks != (r.PromptTokens+15)/16-pd.DecodeHitTokens/16 {
				t.Fatalf("P/D record %+v %+v", r, *pd)
			}
			prefillTokens += int64(r.PromptTokens - r.CachedTokens)
		} else {
			decodeOnly++
			if pd.PrefillReplica != -1 || pd.PulledBlocks != 0 {
				t.Fatalf("decode-only record %+v", *pd)
			}
		}
	}
	if disagg == 0 || decodeOnly == 0 {
		t.Fatalf("%d disaggregated, %d decode-only", disagg, decodeOnly)
	}
	// Legs on the pods: every read and every prefill leg counted once.
	var gotPulls, prefillCompleted int64
	for i, rr := range res1.Replicas {
		gotPulls += rr.Stats.Pulls
		if fleet[i].Labels[RoleLabel] == "prefill" {
			prefillCompleted += rr.Stats.Completed
			if rr.Stats.Pulls != 0 {
				t.Fatalf("prefill pod %s pulled", rr.Name)
			}
		}
	}
	if gotPulls != int64(pulls) || prefillCompleted != int64(disagg) {
		t.Fatalf("%d reads and %d prefill legs for %d P/D requests", gotPulls, prefillCompleted, disagg)
	}
	recs2, res2 := runPD(t, pdRouter(t, prefixDecider), mk(), fleet, Options{Seed: 3})
	if !reflect.DeepEqual(recs1, recs2) || !reflect.DeepEqual(res1, res2) {
		t.Fatal("same inputs and seed gave different results")
	}
}

// TestPDFleetWithoutPrefillPods: a P/D configuration on a fleet without a
// prefill role runs decode-only (the prefill profile finds no endpoint,
// pd-offload.md A.9), and a "both" fleet disaggregates onto itself.
func TestPDFleetWithoutPrefillPods(t *testing.T) {
	reqs := func() []*workload.Request {
		return []*workload.Request{completion(req(0, 0, tokens(0, 500), 2)), completion(req(1, 1e8, tokens(0, 700), 2))}
	}
	recs, res := runPD(t, pdRouter(t, prefixDecider), reqs(), pdFleet(t, 500, false, "decode", "decode"), Options{})
	for _, r := range recs {
		if r.Outcome != Completed || r.PD == nil || r.PD.Disaggregated || r.PD.Reason != epp.PDReasonNoPrefillEndpoint {
			t.Errorf("record %+v %+v", r, r.PD)
		}
	}
	if res.Completed != 2 {
		t.Fatalf("result %+v", res)
	}
	recs, res = runPD(t, pdRouter(t, "always-disagg-pd-decider"), reqs(), pdFleet(t, 500, false, "both"), Options{})
	for _, r := range recs {
		// The prefill leg's blocks are in the pod's own cache, so the
		// read is the prompt's last block: ⌈N/16⌉ − ⌊(N−1)/16⌋ = 1.
		if r.Outcome != Completed || !r.PD.Disaggregated || r.PD.PrefillReplica != 0 || r.PD.PulledBlocks != 1 {
			t.Errorf("both: record %+v %+v", r, r.PD)
		}
	}
	if res.HeldAtEnd != 0 {
		t.Fatalf("result %+v", res)
	}
	// Without a disaggregating handler nothing of P/D is recorded.
	recs, _ = run(t, reqs(), testFleet(t, 2, 500), Options{})
	for _, r := range recs {
		if r.PD != nil {
			t.Errorf("P/D record without P/D: %+v", r.PD)
		}
	}
	// A bad parameter is an error, not a crash.
	_, err := Run(&sliceSource{reqs: reqs()}, pdRouter(t, prefixDecider), pdFleet(t, 500, false, "decode", "prefill"),
		Options{PD: &PDOptions{TransferGBps: 0}})
	if err == nil || !strings.Contains(err.Error(), "bandwidth") {
		t.Fatalf("zero bandwidth: %v", err)
	}
}

// TestPDWithOffload: P/D with a CPU tier on every pod, NIXL first in the
// connector chain (pd-offload.md B.7): a decode pod reads everything
// beyond its GPU hit from the prefill pod and never loads from its own CPU
// tier, but stores the read blocks there; prefill pods serve CPU hits.
func TestPDWithOffload(t *testing.T) {
	fleet := pdFleet(t, 200, false, "prefill", "decode")
	for i := range fleet {
		fleet[i].Preset.Engine.KVOffloadingSize = 1
	}
	var reqs []*workload.Request
	for i := range 60 {
		// Seven 1,000-token prefixes that the 200-block GPU caches cannot
		// keep, revisited.
		p := append(tokens(i%7*5000, 1000), tokens(100000+i*1000, 40)...)
		reqs = append(reqs, completion(req(int64(i), int64(i)*200_000_000, p, 4)))
	}
	recs, res := runPD(t, pdRouter(t, "always-disagg-pd-decider"), reqs, fleet, Options{Seed: 1})
	cpu := 0
	for _, r := range recs {
		if r.Outcome != Completed || !r.PD.Disaggregated {
			t.Fatalf("record %+v %+v", r, r.PD)
		}
		cpu += r.CPUCachedTokens
	}
	p, d := res.Replicas[0].Stats, res.Replicas[1].Stats
	if d.OffloadLoads != 0 || d.OffloadStoredBlocks == 0 || p.OffloadLoads == 0 || cpu == 0 || res.HeldAtEnd != 0 {
		t.Fatalf("prefill %+v\ndecode %+v\nCPU-tier tokens %d", p, d, cpu)
	}
}
