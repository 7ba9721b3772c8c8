package latency

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/eppsim/eppsim/replica"
)

// Selection is how a fit chose its metric weights among candidates: by an
// inner cross-validation on the fit's own training runs.
type Selection struct {
	Candidates []map[string]float64
	// Scores is each candidate's inner held-out objective: the
	// unweighted mean |log(predicted/actual)| of the inner folds' runs,
	// predicted by inner fits without them, averaged over the folds.
	Scores []float64
	Chosen int
	// InnerFolds lists the models of each inner fold.
	InnerFolds [][]string
}

// fitter fits coefficients to runs and scores coefficients on runs; the
// calibration's (simFitter) simulates, tests substitute their own.
type fitter interface {
	fit(ctx context.Context, runs []*Experiment, weights map[string]float64, budget int, label string) (replica.Coefficients, error)
	score(ctx context.Context, runs []*Experiment, co replica.Coefficients) (float64, error)
}

// simFitter fits by fitOn from o.Start and scores by the unweighted
// objective on the shortened runs.
type simFitter struct {
	o    CalibrateOptions
	free []int
}

func (f simFitter) fit(ctx context.Context, runs []*Experiment, weights map[string]float64, budget int, label string) (replica.Coefficients, error) {
	co, _, _, err := fitOn(ctx, runs, f.o.Start.Coefficients, f.free, budget, f.o, weights, label)
	return co, err
}

func (f simFitter) score(ctx context.Context, runs []*Experiment, co replica.Coefficients) (float64, error) {
	c := replica.Calibration{Name: "inner", Coefficients: co}
	return WeightedObjective(ctx, runs, c, Options{Seed: f.o.Seed, StageLimit: f.o.StageLimit, Draws: f.o.Draws, Pool: f.o.Pool}, f.o.Workers, nil)
}

// chooseWeights returns the metric weights a fit on runs uses: o.Weights,
// or the only candidate, or the one Select picks among several.
func chooseWeights(ctx context.Context, fr fitter, runs []*Experiment, o CalibrateOptions, label string) (map[string]float64, *Selection, error) {
	switch len(o.Candidates) {
	case 0:
		return o.Weights, nil, nil
	case 1:
		return o.Candidates[0], nil, nil
	}
	k := o.InnerFolds
	if k <= 0 {
		k = 3
	}
	budget := o.InnerBudget
	if budget <= 0 {
		budget = max(o.Budget/3, 1)
	}
	s, err := Select(ctx, fr, runs, o.Candidates, k, budget, label)
	if err != nil {
		return nil, nil, err
	}
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "calibrate (%s): weights %s chosen by inner cross-validation (scores %s)\n",
			label, describeWeights(s.Candidates[s.Chosen]), formatScores(s.Scores))
	}
	return s.Candidates[s.Chosen], s, nil
}

// Select chooses among candidate metric weights by a k-fold
// cross-validation over runs grouped by model (models sorted, the i-th
// in fold i mod k): each candidate fits once per inner fold on the other
// folds' runs and is scored on the fold's runs with the unweighted
// objective; the lowest mean score wins (ties: the earlier candidate).
// Only runs is seen, so when runs is an outer fold's training set, the
// outer fold's runs cannot inform the choice.
func Select(ctx context.Context, fr fitter, runs []*Experiment, candidates []map[string]float64, k, budget int, label string) (*Selection, error) {
	models := modelsOf(runs)
	if len(models) < 2 {
		return nil, fmt.Errorf("calibrate (%s): choosing among %d metric-weight candidates needs runs of at least 2 models, have %d", label, len(candidates), len(models))
	}
	k = min(k, len(models))
	s := &Selection{Candidates: candidates, Scores: make([]float64, len(candidates)), InnerFolds: make([][]string, k)}
	for i, m := range models {
		s.InnerFolds[i%k] = append(s.InnerFolds[i%k], m)
	}
	for ci, w := range candidates {
		var total float64
		for fi, inner := range s.InnerFolds {
			var train, test []*Experiment
			for _, e := range runs {
				if slices.Contains(inner, e.Model) {
					test = append(test, e)
				} else {
					train = append(train, e)
				}
			}
			co, err := fr.fit(ctx, train, w, budget, fmt.Sprintf("%s, inner fold %d/%d, weights %s", label, fi+1, k, describeWeights(w)))
			if err != nil {
				return nil, err
			}
			v, err := fr.score(ctx, test, co)
			if err != nil {
				return nil, err
			}
			total += v
		}
		s.Scores[ci] = total / float64(k)
		if s.Scores[ci] < s.Scores[s.Chosen] {
			s.Chosen = ci
		}
	}
	return s, nil
}

// describeWeights renders metric weights as "ttft_p99=3" ("uniform" for
// none).
func describeWeights(w map[string]float64) string {
	if len(w) == 0 {
		return "uniform"
	}
	var parts []string
	for _, m := range slices.Sorted(maps.Keys(w)) {
		parts = append(parts, fmt.Sprintf("%s=%g", m, w[m]))
	}
	return strings.Join(parts, ",")
}

func formatScores(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf("%.4f", x)
	}
	return strings.Join(parts, " / ")
}
