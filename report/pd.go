package report

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/eppsim/eppsim/sim"
)

// PDSummary is the prefill/decode disaggregation part of a run
// (../shared/spec/pd-offload.md A), present when the EPP's profile
// handler decided on disaggregation for some measured request. Every
// field is defined in docs/metrics.md.
type PDSummary struct {
	// Requests are the measured requests with a decision; Disaggregated
	// those whose prefill ran on a prefill pod.
	Requests           int     `json:"requests"`
	Disaggregated      int     `json:"disaggregated"`
	DisaggregatedShare float64 `json:"disaggregated_share"`
	// Reasons counts the decisions by reason (epp.PDReason*).
	Reasons map[string]int `json:"reasons"`
	// Decider holds what the prefill decider read: the prompt's tokens
	// minus the cached tokens it believed the decode pick held, for the
	// disaggregated and for the decode-only requests.
	Decider struct {
		UncachedDisaggregated Dist `json:"uncached_tokens_disaggregated"`
		UncachedDecodeOnly    Dist `json:"uncached_tokens_decode_only"`
	} `json:"decider"`
	// Transfer describes the KV reads of the disaggregated requests.
	Transfer struct {
		MiBPerRank Dist `json:"mib_per_rank"`
		TimeMs     Dist `json:"time_ms"`
		Blocks     Dist `json:"pulled_blocks"`
		// WaitMs runs from a read's end to the step that promotes its
		// request (the step granularity, longer with async scheduling).
		WaitMs   Dist    `json:"wait_ms"`
		TotalGiB float64 `json:"total_gib_per_rank"`
		// DecodeHitShare is Σ decode-pod hits ÷ Σ prompt tokens: the part
		// of the prompts the decode pod held and did not read (undefined
		// without a disaggregated request).
		DecodeHitShare Num `json:"decode_hit_share"`
	} `json:"transfer"`
	// Pools are the replicas grouped by their llm-d.ai/role label
	// ("unlabeled" without one).
	Pools map[string]*PoolSummary `json:"pools"`
}

// PoolSummary is one role's replicas: the legs they served and their
// scraped gauges.
type PoolSummary struct {
	Replicas int `json:"replicas"`
	// PrefillLegs and DecodeLegs are the measured requests' legs the pool
	// served: a disaggregated request's prefill leg on its prefill pod;
	// every request's decode leg (its whole work when decode-only) on its
	// decode pod.
	PrefillLegs int `json:"prefill_legs"`
	DecodeLegs  int `json:"decode_legs"`
	// LoadImbalance is the busiest replica's legs ÷ the pool's mean
	// (undefined when the pool served no leg).
	LoadImbalance Num `json:"load_imbalance"`
	// PrefillLegMs runs from a prefill leg's arrival to its one token;
	// DecodeLegMs from a decode leg's arrival to its first token (the
	// read, or the prefill when decode-only, included); QueueMs from a
	// leg's arrival to its admission; TPOTMs over the decode legs.
	PrefillLegMs Dist `json:"prefill_leg_ms"`
	DecodeLegMs  Dist `json:"decode_leg_ms"`
	QueueMs      Dist `json:"queue_ms"`
	TPOTMs       Dist `json:"tpot_ms"`
	// Means of the replicas' scraped gauges over the run.
	MeanKVUsage float64 `json:"mean_kv_usage"`
	PeakKVUsage float64 `json:"peak_kv_usage"`
	MeanWaiting float64 `json:"mean_waiting"`
	MeanRunning float64 `json:"mean_running"`
}

// legs are one replica's measured legs (ms).
type legs struct {
	prefill, decode, queue, tpot []float64
}

// pdAcc accumulates a PDSummary.
type pdAcc struct {
	requests, disagg                    int
	reasons                             map[string]int
	uncachedDisagg, uncachedDecode      []float64
	mib, xferMs, blocks, waitMs         []float64
	totalBytes, decodeHit, disaggPrompt int64
	perReplica                          map[int]*legs
}

func (p *pdAcc) leg(i int) *legs {
	l := p.perReplica[i]
	if l == nil {
		l = &legs{}
		p.perReplica[i] = l
	}
	return l
}

const msPerNs = 1e-6

// add accounts a measured completed record with a P/D decision.
func (p *pdAcc) add(r *sim.Record) {
	pd := r.PD
	p.requests++
	p.reasons[pd.Reason]++
	uncached := float64(pd.DeciderPromptTokens - pd.DeciderCachedTokens)
	d := p.leg(r.Replica)
	d.decode = append(d.decode, float64(pd.DecodeTime)*msPerNs)
	d.queue = append(d.queue, float64(pd.DecodeQueue)*msPerNs)
	if r.OutputTokens > 1 {
		d.tpot = append(d.tpot, float64(r.E2E-r.TTFT)*msPerNs/float64(r.OutputTokens-1))
	}
	if !pd.Disaggregated {
		p.uncachedDecode = append(p.uncachedDecode, uncached)
		return
	}
	p.disagg++
	p.uncachedDisagg = append(p.uncachedDisagg, uncached)
	p.mib = append(p.mib, float64(pd.TransferBytes)/(1<<20))
	p.xferMs = append(p.xferMs, float64(pd.TransferTime)*msPerNs)
	p.blocks = append(p.blocks, float64(pd.PulledBlocks))
	p.waitMs = append(p.waitMs, float64(pd.PullWait)*msPerNs)
	p.totalBytes += pd.TransferBytes
	p.decodeHit += int64(pd.DecodeHitTokens)
	p.disaggPrompt += int64(r.PromptTokens)
	pl := p.leg(pd.PrefillReplica)
	pl.prefill = append(pl.prefill, float64(pd.PrefillTime)*msPerNs)
	pl.queue = append(pl.queue, float64(pd.PrefillQueue)*msPerNs)
}

// UnlabeledPool names the replicas without a role label.
const UnlabeledPool = "unlabeled"

func (p *pdAcc) summary(res *sim.Result) *PDSummary {
	if p == nil || p.requests == 0 {
		return nil
	}
	s := &PDSummary{Requests: p.requests, Disaggregated: p.disagg, Reasons: p.reasons, Pools: map[string]*PoolSummary{}}
	s.DisaggregatedShare = float64(p.disagg) / float64(p.requests)
	s.Decider.UncachedDisaggregated, s.Decider.UncachedDecodeOnly = dist(p.uncachedDisagg), dist(p.uncachedDecode)
	s.Transfer.MiBPerRank, s.Transfer.TimeMs, s.Transfer.Blocks, s.Transfer.WaitMs = dist(p.mib), dist(p.xferMs), dist(p.blocks), dist(p.waitMs)
	s.Transfer.TotalGiB = float64(p.totalBytes) / (1 << 30)
	s.Transfer.DecodeHitShare = ratio(float64(p.decodeHit), float64(p.disaggPrompt))
	if res == nil {
		return s
	}
	type pool struct {
		ps     *PoolSummary
		legs   legs
		counts []int
	}
	pools := map[string]*pool{}
	for i, rr := range res.Replicas {
		role := cmp.Or(rr.Role, UnlabeledPool)
		pl := pools[role]
		if pl == nil {
			pl = &pool{ps: &PoolSummary{}}
			pools[role] = pl
		}
		ps := pl.ps
		ps.Replicas++
		ps.MeanKVUsage += rr.MeanKVUsage
		ps.PeakKVUsage = max(ps.PeakKVUsage, rr.PeakKVUsage)
		ps.MeanWaiting += rr.MeanWaiting
		ps.MeanRunning += rr.MeanRunning
		n := 0
		if l := p.perReplica[i]; l != nil {
			pl.legs.prefill = append(pl.legs.prefill, l.prefill...)
			pl.legs.decode = append(pl.legs.decode, l.decode...)
			pl.legs.queue = append(pl.legs.queue, l.queue...)
			pl.legs.tpot = append(pl.legs.tpot, l.tpot...)
			ps.PrefillLegs += len(l.prefill)
			ps.DecodeLegs += len(l.decode)
			n = len(l.prefill) + len(l.decode)
		}
		pl.counts = append(pl.counts, n)
	}
	for role, pl := range pools {
		ps := pl.ps
		k := float64(ps.Replicas)
		ps.MeanKVUsage /= k
		ps.MeanWaiting /= k
		ps.MeanRunning /= k
		ps.PrefillLegMs, ps.DecodeLegMs, ps.QueueMs, ps.TPOTMs = dist(pl.legs.prefill), dist(pl.legs.decode), dist(pl.legs.queue), dist(pl.legs.tpot)
		ps.LoadImbalance = Undefined()
		if total := ps.PrefillLegs + ps.DecodeLegs; total > 0 {
			ps.LoadImbalance = Num(float64(slices.Max(pl.counts)) / (float64(total) / k))
		}
		s.Pools[role] = ps
	}
	return s
}

// poolOrder lists pool names prefill first, then decode, then the others
// by name.
func poolOrder(names []string) []string {
	rank := func(n string) int {
		switch n {
		case "prefill":
			return 0
		case "decode":
			return 1
		}
		return 2
	}
	out := slices.Clone(names)
	slices.SortFunc(out, func(a, b string) int {
		if c := cmp.Compare(rank(a), rank(b)); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	return out
}

// pdRows are the headline rows of the P/D group (pdRows adds them only
// when some run has a PDSummary).
func pdRows(runs []NamedSummary, group func(string, ...rowDef)) {
	var pools []string
	present := false
	for _, ns := range runs {
		if ns.Summary == nil || ns.Summary.PD == nil {
			continue
		}
		present = true
		for n := range ns.Summary.PD.Pools {
			if !slices.Contains(pools, n) {
				pools = append(pools, n)
			}
		}
	}
	if !present {
		return
	}
	pd := func(f func(*PDSummary) string) func(*Summary) string {
		return func(s *Summary) string {
			if s.PD == nil {
				return dash
			}
			return f(s.PD)
		}
	}
	group("P/D disaggregation",
		rowDef{"disaggregated (share of requests)", pd(func(p *PDSummary) string { return pct(p.DisaggregatedShare) })},
		rowDef{"decode-only because", pd(func(p *PDSummary) string { return reasonCells(p) })},
		rowDef{"KV read per request p50 / p99 (MiB per rank)", pd(func(p *PDSummary) string { return p50p99(p.Transfer.MiBPerRank, 1) })},
		rowDef{"KV read time p50 / p99 (ms)", pd(func(p *PDSummary) string { return p50p99(p.Transfer.TimeMs, 2) })},
		rowDef{"wait from read to promotion p50 (ms)", pd(func(p *PDSummary) string { return fn(p.Transfer.WaitMs.P50, 2) })},
	)
	for _, name := range poolOrder(pools) {
		pool := func(f func(*PoolSummary) string) func(*Summary) string {
			return pd(func(p *PDSummary) string {
				if ps := p.Pools[name]; ps != nil {
					return f(ps)
				}
				return dash
			})
		}
		group(name+" pool",
			rowDef{"replicas; prefill / decode legs", pool(func(ps *PoolSummary) string {
				return strconv.Itoa(ps.Replicas) + "; " + strconv.Itoa(ps.PrefillLegs) + " / " + strconv.Itoa(ps.DecodeLegs)
			})},
			rowDef{"prefill leg p50 / p99 (ms)", pool(func(ps *PoolSummary) string {
				if ps.PrefillLegs == 0 {
					return dash
				}
				return p50p99(ps.PrefillLegMs, 1)
			})},
			rowDef{"decode leg to first token p50 / p99 (ms)", pool(func(ps *PoolSummary) string {
				if ps.DecodeLegs == 0 {
					return dash
				}
				return p50p99(ps.DecodeLegMs, 1)
			})},
			rowDef{"queue wait p50 / p99 (ms)", pool(func(ps *PoolSummary) string { return p50p99(ps.QueueMs, 1) })},
			rowDef{"TPOT p50 (ms)", pool(func(ps *PoolSummary) string {
				if ps.DecodeLegs == 0 {
					return dash
				}
				return fn(ps.TPOTMs.P50, 2)
			})},
			rowDef{"mean KV usage; mean waiting", pool(func(ps *PoolSummary) string {
				return pct(ps.MeanKVUsage) + "; " + ff(ps.MeanWaiting, 1)
			})},
			rowDef{"load imbalance (max/mean)", pool(func(ps *PoolSummary) string { return fn(ps.LoadImbalance, 2) })},
		)
	}
}

// reasonCells lists the decode-only reasons (short forms) with their
// share of the decisions, largest first ("cached 30.1%, short 7.5%"), or
// "none".
func reasonCells(p *PDSummary) string {
	type rc struct {
		r string
		n int
	}
	var rs []rc
	for _, r := range slices.Sorted(maps.Keys(p.Reasons)) {
		if r != disaggregatedReason {
			rs = append(rs, rc{r, p.Reasons[r]})
		}
	}
	if len(rs) == 0 {
		return "none"
	}
	slices.SortStableFunc(rs, func(a, b rc) int { return cmp.Compare(b.n, a.n) })
	parts := make([]string, len(rs))
	for i, x := range rs {
		parts[i] = cmp.Or(reasonLabels[x.r], x.r) + " " + pct(float64(x.n)/float64(p.Requests))
	}
	return strings.Join(parts, ", ")
}

// reasonLabels are the short forms of the decision reasons in tables and
// findings (docs/metrics.md, pd.reasons).
var reasonLabels = map[string]string{
	"cached-prefix":       "cached",
	"short-prompt":        "short",
	"no-prefill-endpoint": "no prefill pod",
	"no-match-info":       "no match info",
	"decider-disabled":    "disabled",
	"no-prefill-profile":  "no prefill profile",
}

// disaggregatedReason is epp.PDReasonDisaggregated (report does not import
// epp).
const disaggregatedReason = "disaggregated"
