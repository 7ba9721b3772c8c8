package scenario

import (
	"fmt"
	"math"

	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/report"
	"github.com/eppsim/eppsim/sim"
)

// NearKnee is the utilization at which a replica counts as near its knee
// when its steps are as slow as the calibration's ITL interval allows (as
// latency.NearKnee, for the runs validate latency checks).
const NearKnee = 0.9

// kneeOf estimates where the run's fleet stops keeping up with its traffic
// (report.Knee): every replica's sustainable rate for the run's mean
// request, and the load its routing gave it at the traffic's busiest stage
// (report.StageSummary's rate, arrivals ÷ send span; traffic without
// stages: the offered load). Nil when the run measured nothing or a
// replica's limits cannot be estimated.
func kneeOf(fleet []sim.ReplicaSpec, s *report.Summary) (*report.Knee, error) {
	done := float64(s.Requests.Complete)
	rate, out := s.Throughput.RequestsPerS.Float(), s.Throughput.OutputTokensPerS.Float()
	offered := s.OfferedLoad.RequestsPerS.Float()
	for _, st := range s.Stages {
		if st.RequestsPerS.Defined() {
			offered = max(offered, st.RequestsPerS.Float())
		}
	}
	if done == 0 || !(rate > 0) || !(offered > 0) || s.Cache.PromptTokens == 0 || math.IsNaN(s.Cache.TrueHitRatio.Float()) {
		return nil, nil
	}
	prompt := float64(s.Cache.PromptTokens) / done
	mix := replica.Mix{PromptTokens: prompt, CachedTokens: prompt * s.Cache.TrueHitRatio.Float(), OutputTokens: max(out/rate, 1)}
	engines, err := sim.ExpandDataParallel(fleet)
	if err != nil {
		return nil, err
	}
	total := 0
	for _, n := range s.Routing.PerReplica {
		total += n
	}
	if total == 0 {
		return nil, nil
	}
	k := &report.Knee{BusiestUtilization: report.Undefined()}
	var sum float64
	// Engines alike (a uniform fleet, a group's replicas: the same model,
	// GPU, step model and limits) share one estimate.
	known := map[string]replica.Knee{}
	for _, r := range engines {
		key, err := sim.KneeKey(r)
		if err != nil {
			return nil, fmt.Errorf("knee of %s: %w", r.Name, err)
		}
		kn, ok := known[key]
		if !ok {
			if kn, err = sim.SustainableRate(r, mix); err != nil {
				return nil, nil // a mix the estimate cannot take (e.g. outputs of under one token)
			}
			known[key] = kn
		}
		sum += kn.MaxRate
		u := offered * float64(s.Routing.PerReplica[r.Name]) / float64(total) / kn.MaxRate
		if !k.BusiestUtilization.Defined() || u > k.BusiestUtilization.Float() {
			k.BusiestReplica, k.BusiestUtilization, k.Binding = r.Name, report.Num(u), kn.Binding
		}
	}
	k.MaxRequestsPerS = report.Num(sum)
	k.Utilization = report.Num(offered / sum)
	return k, nil
}

// calibrationOf is the calibration of the fleet's first calibrated
// replica (nil: none), whose out-of-sample factors give a run's latency
// intervals.
func calibrationOf(fleet []sim.ReplicaSpec) *replica.Calibration {
	for _, r := range fleet {
		if c := r.Preset.Calibration; c != nil && len(c.Intervals) > 0 {
			return c
		}
	}
	return nil
}

// fleetFactors is the interval factors of a run on the fleet: its
// calibration's (calibrationOf) for the models and placements of the
// replicas it calibrates (replica.Calibration.IntervalsFor), the
// protocol they come from, and the sentences of every model, TP size or
// GPU beyond what it was fitted on. Nil factors without a calibration.
func fleetFactors(fleet []sim.ReplicaSpec) (*replica.Calibration, map[string]replica.Interval, string, []string) {
	c := calibrationOf(fleet)
	if c == nil {
		return nil, nil, "", nil
	}
	var at []replica.Placement
	id := c.ID()
	for _, r := range fleet {
		if rc := r.Preset.Calibration; rc != nil && (rc == c || rc.ID() == id) {
			at = append(at, replica.PlacementOf(&r.Preset))
		}
	}
	f, basis, notes := c.IntervalsFor(at...)
	return c, f, basis, notes
}

// intervalsOf is the headline latencies' 90% intervals from the fleet's
// factors (fleetFactors): TTFT p50 takes ttft_mean's, TTFT p99
// ttft_p99's, TPOT p50 itl_mean's and E2E p99 e2e_p99's (the calibration
// measures means and tails of whole runs; these are their nearest
// counterparts). Nil without factors.
func intervalsOf(fleet []sim.ReplicaSpec, s *report.Summary) *report.LatencyIntervals {
	c, f, basis, notes := fleetFactors(fleet)
	if c == nil {
		return nil
	}
	get := func(v report.Num, metric string) [2]report.Num {
		iv, ok := f[metric]
		if !ok || !v.Defined() {
			return [2]report.Num{report.Undefined(), report.Undefined()}
		}
		return [2]report.Num{report.Num(v.Float() * iv.Low), report.Num(v.Float() * iv.High)}
	}
	b := "the calibration's out-of-sample errors (" + c.ID() + ", " + basis
	for _, n := range notes {
		b += "; " + n
	}
	return &report.LatencyIntervals{
		Basis:   b + ")",
		Beyond:  notes,
		TTFTP50: get(s.Latency.TTFT.P50, "ttft_mean"),
		TTFTP99: get(s.Latency.TTFT.P99, "ttft_p99"),
		TPOTP50: get(s.Latency.TPOT.P50, "itl_mean"),
		E2EP99:  get(s.Latency.E2E.P99, "e2e_p99"),
	}
}

// StepScales returns the step-time factors of a run's knee simulations:
// the ITL interval of the fleet's factors (the out-of-sample error of the
// decode step, fleetFactors), its slow end raised to the calibration's
// full-batch factor when that is larger (replica.Calibration.SlowEnd: a
// decode at full batch measured that much slower than predicted), and
// whether the run is near its knee, its busiest replica reaching
// NearKnee with steps at the slow end. ok is false when the run has no
// knee or its calibration no factors.
func StepScales(fleet []sim.ReplicaSpec, s *report.Summary) (low, high float64, near, ok bool) {
	c, f, _, _ := fleetFactors(fleet)
	if c == nil || s.Knee == nil || !s.Knee.BusiestUtilization.Defined() {
		return 0, 0, false, false
	}
	itl, has := f["itl_mean"]
	if !has {
		return 0, 0, false, false
	}
	high = c.SlowEnd(itl.High)
	return itl.Low, high, s.Knee.BusiestUtilization.Float()*high >= NearKnee, true
}

// WidenIntervals widens s's intervals to the headline latencies of the
// same run simulated with every step at the ends of the step-time
// interval (slow and fast, StepScales), and records the scales.
func WidenIntervals(s, fast, slow *report.Summary, low, high float64) {
	iv := s.Intervals
	if iv == nil {
		return
	}
	widen := func(b *[2]report.Num, lo, hi report.Num) {
		if lo.Defined() && (!b[0].Defined() || lo < b[0]) {
			b[0] = lo
		}
		if hi.Defined() && (!b[1].Defined() || hi > b[1]) {
			b[1] = hi
		}
	}
	widen(&iv.TTFTP50, fast.Latency.TTFT.P50, slow.Latency.TTFT.P50)
	widen(&iv.TTFTP99, fast.Latency.TTFT.P99, slow.Latency.TTFT.P99)
	widen(&iv.TPOTP50, fast.Latency.TPOT.P50, slow.Latency.TPOT.P50)
	widen(&iv.E2EP99, fast.Latency.E2E.P99, slow.Latency.E2E.P99)
	iv.Scales = []report.Num{report.Num(low), report.Num(high)}
	iv.Basis += fmt.Sprintf(", and near the knee the run repeated with every step ×%.3g and ×%.3g", low, high)
}

// ScaleSteps returns a copy of fleet with every replica's steps multiplied
// by scale (replica.Preset.StepScale).
func ScaleSteps(fleet []sim.ReplicaSpec, scale float64) []sim.ReplicaSpec {
	out := make([]sim.ReplicaSpec, len(fleet))
	copy(out, fleet)
	for i := range out {
		out[i].Preset.StepScale = scale
	}
	return out
}
