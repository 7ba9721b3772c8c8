package latency

import (
	"fmt"
	"strings"

	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/replica/sglang"
)

// FullBatchError is one run's decode error at full batch: a run measured
// overloaded whose prediction binds at its slots (vLLM's max_num_seqs,
// SGLang's max_running_requests), so that both the real engine and the
// simulated one decode that many sequences at every step for most of the
// run. No fit sees an overloaded run, so every such error is out of
// sample for the calibration that predicted it (docs/latency.md, "The
// knee").
type FullBatchError struct {
	ID, Model string
	TP        int
	// Measured and Predicted are the decode time per output token
	// (itl_mean, whole run, ms); Rate the predicted sustainable rate of
	// the run's busiest engine (requests/s; 0: unknown).
	Measured, Predicted, Rate float64
}

// Short names the run by its model (the name after the organisation)
// and TP size, for lists that name several runs on one line.
func (fe FullBatchError) Short() string {
	m := fe.Model
	if i := strings.LastIndex(m, "/"); i >= 0 {
		m = m[i+1:]
	}
	return fmt.Sprintf("%s TP %d", m, fe.TP)
}

// Ratio is measured ÷ predicted decode time per output token.
func (fe FullBatchError) Ratio() float64 { return fe.Measured / fe.Predicted }

// Sentence says the error in words: the decode times, the ratio and the
// sustainable rate, predicted and at the measured decode time (where the
// slots bind, a request holds its slot for its decode, which dominates a
// long answer, so the rate scales as the inverse of the decode time).
func (fe FullBatchError) Sentence() string {
	s := fmt.Sprintf("decode %.1f ms per token measured, %.1f predicted (×%.3f)", fe.Measured, fe.Predicted, fe.Ratio())
	if fe.Rate > 0 {
		s += fmt.Sprintf("; sustainable rate %.2f requests/s predicted, about %.2f at the measured decode", fe.Rate, fe.Rate/fe.Ratio())
	}
	return s
}

// FullBatchErrors returns the full-batch decode errors of results, in
// their order: the runs measured overloaded whose predictions bind at
// their slots and whose decode time both sides define. A run bound by
// its KV blocks is left out: it decodes fewer sequences than its slots
// and preempts, which is not the step time at full batch.
func FullBatchErrors(results []*Result) []FullBatchError {
	var out []FullBatchError
	for _, r := range results {
		e := r.Experiment
		if !e.HasMeasurement() || !e.Overloaded() || r.Knee == nil || !slotsBind(r.Knee.Binding) {
			continue
		}
		a, ok := e.MeasuredValues("summary")["itl_mean"]
		p := r.Predicted["summary"]["itl_mean"]
		if !ok || !(a > 0) || !(p > 0) {
			continue
		}
		fe := FullBatchError{ID: e.ID, Model: e.Model, TP: e.TP, Measured: a, Predicted: p}
		if r.Knee.MaxRequestsPerS.Defined() {
			fe.Rate = r.Knee.MaxRequestsPerS.Float()
		}
		out = append(out, fe)
	}
	return out
}

// FullBatchOf is a calibration's full-batch factor from its predictions
// of results: the largest ratio of FullBatchErrors, rounded to 4
// decimals; nil when no run qualifies.
func FullBatchOf(results []*Result) *replica.FullBatch {
	errs := FullBatchErrors(results)
	if len(errs) == 0 {
		return nil
	}
	fb := &replica.FullBatch{Runs: len(errs)}
	for _, fe := range errs {
		fb.Factor = max(fb.Factor, fe.Ratio())
	}
	fb.Factor = round(fb.Factor, 4)
	return fb
}

// fullBatchFor is the full-batch factor of a run of model: the largest
// ratio among errs on other models' runs (no run's knee simulations are
// slowed by its own model's error), 0 when there is none.
func fullBatchFor(errs []FullBatchError, model string) float64 {
	var f float64
	for _, fe := range errs {
		if !strings.EqualFold(fe.Model, model) {
			f = max(f, fe.Ratio())
		}
	}
	return f
}

// slotsBind reports whether binding is an engine's limit on running
// requests: vLLM's max_num_seqs or SGLang's max_running_requests.
func slotsBind(binding string) bool {
	return binding == replica.LimitMaxNumSeqs || binding == sglang.LimitMaxRunningRequests
}
