package report

import (
	"math"
	"strconv"
	"time"
)

// NamedSummary is one config of a run set: its name and summary (nil when
// the run has none).
type NamedSummary struct {
	Name    string
	Summary *Summary
}

// Row is one row of the headline table. A row with no Label is the
// heading of a group of rows: Group names it and Cells is empty.
type Row struct {
	Group string
	Label string
	Cells []string
}

// rowDef computes one headline row's cell from a summary.
type rowDef struct {
	label string
	value func(*Summary) string
}

const dash = "–"

func ff(v float64, prec int) string { return strconv.FormatFloat(v, 'f', prec, 64) }

// pct formats a share as a percentage with one decimal ("17.6%").
func pct(v float64) string { return ff(100*v, 1) + "%" }

// MTokens formats a token count in millions, rounded to three significant
// digits ("24.5", "0.322", "0.000016"; "0" for 0): the one unit every
// report, table and plot uses for regret and the queue effect.
func MTokens(tokens int64) string {
	v := float64(tokens) / 1e6
	if v == 0 {
		return "0"
	}
	scale := math.Pow10(2 - int(math.Floor(math.Log10(math.Abs(v)))))
	return strconv.FormatFloat(math.Round(v*scale)/scale, 'f', -1, 64)
}

// SimDuration formats simulated seconds as a duration rounded to the
// second (to the millisecond below a minute).
func SimDuration(s float64) string {
	d := time.Duration(s * float64(time.Second))
	if d >= time.Minute {
		return d.Round(time.Second).String()
	}
	return d.Round(time.Millisecond).String()
}

// Producer type names, as Summary.Prediction keys them.
const (
	approxProducer  = "approx-prefix-cache-producer"
	preciseProducer = "precise-prefix-cache-producer"
)

// producers lists the prefix producers with a short label, approximate
// first.
var producers = []struct{ key, label, long string }{
	{approxProducer, "approx", "approximate producer"},
	{preciseProducer, "precise", "precise producer"},
}

// HeadlineRows is the headline table of a run set, one column per config:
// the CLI prints it and report.md/report.html show it, grouped as
// requests, load, latency, throughput, the hit-rate ladder, each prefix
// producer's prediction error (for the producers some config has) and
// routing. Every row is defined in docs/metrics.md.
func HeadlineRows(runs []NamedSummary) []Row {
	var out []Row
	group := func(name string, defs ...rowDef) {
		out = append(out, Row{Group: name})
		for _, d := range defs {
			r := Row{Group: name, Label: d.label}
			for _, ns := range runs {
				if ns.Summary == nil {
					r.Cells = append(r.Cells, dash)
					continue
				}
				r.Cells = append(r.Cells, d.value(ns.Summary))
			}
			out = append(out, r)
		}
	}
	group("requests",
		rowDef{"completed / total", func(s *Summary) string {
			return strconv.Itoa(s.Requests.Complete) + " / " + strconv.Itoa(s.Requests.Total)
		}},
		rowDef{"rejected", func(s *Summary) string { return strconv.Itoa(s.Requests.Rejected) }},
		rowDef{"in flight at end", func(s *Summary) string { return strconv.Itoa(s.Requests.InFlight) }},
	)
	group("load",
		rowDef{"simulated duration", func(s *Summary) string { return SimDuration(s.Sim.SimSeconds) }},
		rowDef{"offered load (req/s)", func(s *Summary) string { return fn(s.OfferedLoad.RequestsPerS, 2) }},
		rowDef{"offered prompt tokens/s", func(s *Summary) string { return fn(s.OfferedLoad.PromptTokensPerS, 0) }},
	)
	group("latency (ms)",
		rowDef{"TTFT p50", func(s *Summary) string { return fn(s.Latency.TTFT.P50, 1) }},
		rowDef{"TTFT p99", func(s *Summary) string { return fn(s.Latency.TTFT.P99, 1) }},
		rowDef{"queue wait p50", func(s *Summary) string { return fn(s.Latency.Queue.P50, 1) }},
		rowDef{"TPOT p50", func(s *Summary) string { return fn(s.Latency.TPOT.P50, 2) }},
		rowDef{"E2E p99", func(s *Summary) string { return fn(s.Latency.E2E.P99, 1) }},
	)
	intervals, knee := false, false
	for _, ns := range runs {
		intervals = intervals || (ns.Summary != nil && ns.Summary.Intervals != nil)
		knee = knee || (ns.Summary != nil && ns.Summary.Knee != nil)
	}
	if intervals {
		// The calibration's out-of-sample error, and near the knee the
		// step-time interval (docs/latency.md, "Intervals").
		group("latency, 90% interval (ms)",
			rowDef{"TTFT p50", func(s *Summary) string {
				return intervalCell(s.Intervals, func(i *LatencyIntervals) [2]Num { return i.TTFTP50 }, 1)
			}},
			rowDef{"TTFT p99", func(s *Summary) string {
				return intervalCell(s.Intervals, func(i *LatencyIntervals) [2]Num { return i.TTFTP99 }, 1)
			}},
			rowDef{"TPOT p50", func(s *Summary) string {
				return intervalCell(s.Intervals, func(i *LatencyIntervals) [2]Num { return i.TPOTP50 }, 2)
			}},
			rowDef{"E2E p99", func(s *Summary) string {
				return intervalCell(s.Intervals, func(i *LatencyIntervals) [2]Num { return i.E2EP99 }, 1)
			}},
		)
	}
	if knee {
		kn := func(f func(*Knee) string) func(*Summary) string {
			return func(s *Summary) string {
				if s.Knee == nil {
					return dash
				}
				return f(s.Knee)
			}
		}
		group("knee (steady state)",
			rowDef{"sustainable rate (req/s)", kn(func(k *Knee) string { return fn(k.MaxRequestsPerS, 2) })},
			rowDef{"utilization: offered ÷ sustainable", kn(func(k *Knee) string { return pctN(k.Utilization) })},
			rowDef{"busiest replica's utilization", kn(func(k *Knee) string { return pctN(k.BusiestUtilization) })},
			rowDef{"binding limit", kn(func(k *Knee) string { return k.Binding })},
		)
	}
	group("throughput",
		rowDef{"completed req/s", func(s *Summary) string { return fn(s.Throughput.RequestsPerS, 2) }},
		rowDef{"output tokens/s", func(s *Summary) string { return fn(s.Throughput.OutputTokensPerS, 0) }},
	)
	group("hit-rate ladder (share of prompt tokens)",
		rowDef{"infinite-cache bound", func(s *Summary) string { return fn(s.Cache.InfiniteHitRatio, 3) }},
		rowDef{"oracle: best replica at routing", func(s *Summary) string { return fn(s.Cache.OracleHitRatio, 3) }},
		rowDef{"routed: chosen replica at routing", func(s *Summary) string { return fn(s.Cache.RoutedHitRatio, 3) }},
		rowDef{"true: reused (routed + queue effect)", func(s *Summary) string { return fn(s.Cache.TrueHitRatio, 3) }},
		rowDef{"regret: oracle − routed (M tokens)", func(s *Summary) string { return MTokens(s.Cache.RegretTokens) }},
		rowDef{"queue effect: true − routed (M tokens)", func(s *Summary) string { return MTokens(s.Cache.QueueEffectTokens) }},
	)
	offload := false
	for _, ns := range runs {
		offload = offload || (ns.Summary != nil && ns.Summary.Cache.Offload != nil)
	}
	if offload {
		// Only with a CPU tier (--kv-offloading-size): the true hits by
		// tier and the approximate producer's share of CPU-tier hits it
		// did not predict (llm-d-router #1650).
		tier := func(f func(*OffloadCache) string) func(*Summary) string {
			return func(s *Summary) string {
				if o := s.Cache.Offload; o != nil {
					return f(o)
				}
				return dash
			}
		}
		group("KV tiers (share of prompt tokens)",
			rowDef{"true hits from GPU", tier(func(o *OffloadCache) string { return fn(o.GPUHitRatio, 3) })},
			rowDef{"true hits from CPU", tier(func(o *OffloadCache) string { return fn(o.CPUHitRatio, 3) })},
			rowDef{"CPU-tier hits the approx producer missed", func(s *Summary) string {
				if p := s.Prediction[approxProducer]; p != nil && p.ByTier != nil && p.ByTier.CPU.TrueTokens > 0 {
					return fn(p.ByTier.CPU.UnderpredictedShare, 3)
				}
				return dash
			}},
		)
	}
	pdRows(runs, group)
	classRows(runs, group)
	for _, p := range producers {
		present := false
		for _, ns := range runs {
			present = present || (ns.Summary != nil && ns.Summary.Prediction[p.key] != nil)
		}
		if !present {
			continue
		}
		pred := func(f func(*Prediction) string) func(*Summary) string {
			return func(s *Summary) string {
				if pr := s.Prediction[p.key]; pr != nil {
					return f(pr)
				}
				return dash
			}
		}
		group("prediction, "+p.long,
			rowDef{"bias (mean predicted − true fraction)", pred(func(pr *Prediction) string { return signedFF(pr.Bias, 3) })},
			rowDef{"MAE (per request)", pred(func(pr *Prediction) string { return ff(pr.MAE, 3) })},
			rowDef{"over-predicted (share of predicted tokens)", pred(func(pr *Prediction) string { return fn(pr.OverPredictedTokens, 3) })},
			rowDef{"under-predicted (share of true tokens)", pred(func(pr *Prediction) string { return fn(pr.UnderPredictedTokens, 3) })},
		)
	}
	group("routing",
		rowDef{"idle replicas", func(s *Summary) string {
			if !s.Routing.IdleReplicas.Defined() {
				return na
			}
			return fn(s.Routing.IdleReplicas, 0) + " of " + strconv.Itoa(s.Routing.Replicas)
		}},
		rowDef{"busiest replica's share", func(s *Summary) string { return pctN(s.Routing.BusiestShare) }},
		rowDef{"load imbalance (max/mean)", func(s *Summary) string { return fn(s.Routing.Imbalance, 2) }},
		rowDef{"tie-break share", func(s *Summary) string { return fn(s.Routing.TieShare, 3) }},
		rowDef{"preemptions", func(s *Summary) string { return strconv.FormatInt(s.Cache.Preemptions, 10) }},
		rowDef{"evictions", func(s *Summary) string { return strconv.FormatInt(s.Cache.Evictions, 10) }},
	)
	return out
}

// signedFF formats v with an explicit sign ("+0.110", "-0.020", "0.000").
func signedFF(v float64, prec int) string {
	s := ff(v, prec)
	switch {
	case s == ff(0, prec) || s == "-"+ff(0, prec):
		return ff(0, prec)
	case v > 0:
		return "+" + s
	default:
		return s
	}
}
