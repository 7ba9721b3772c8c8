package latency

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/eppsim/eppsim/replica"
)

// deploymentOf is the deployment run e measured (replica.DeploymentOf of
// the preset it is simulated with).
func deploymentOf(e *Experiment) (replica.Deployment, error) {
	p, err := e.enginePreset()
	if err != nil {
		return replica.Deployment{}, err
	}
	return replica.DeploymentOf(&p), nil
}

// Offsets are the step offsets of the deployments of results, runs
// predicted without offsets (docs/latency.md, "Deployment offsets"): per
// deployment, replica.ShrunkOffset of log(measured ÷ predicted ITL mean)
// over its runs that are measured and not overloaded, rounded to 4
// decimals as a calibration file keeps them; sorted by model, GPU, TP,
// engine and weights.
func Offsets(results []*Result) ([]replica.StepOffset, error) {
	type group struct {
		d    replica.Deployment
		logs []float64
	}
	var groups []*group
	for _, r := range results {
		e := r.Experiment
		if !e.HasMeasurement() || e.Overloaded() {
			continue
		}
		a, ok := e.MeasuredValues("summary")["itl_mean"]
		p := r.Predicted["summary"]["itl_mean"]
		if !ok || !(a > 0) || !(p > 0) {
			continue
		}
		d, err := deploymentOf(e)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.ID, err)
		}
		i := slices.IndexFunc(groups, func(g *group) bool { return g.d.Matches(d) })
		if i < 0 {
			groups = append(groups, &group{d: d})
			i = len(groups) - 1
		}
		groups[i].logs = append(groups[i].logs, math.Log(a/p))
	}
	out := make([]replica.StepOffset, len(groups))
	for i, g := range groups {
		out[i] = replica.StepOffset{Deployment: g.d, Runs: len(g.logs), Factor: round(replica.ShrunkOffset(g.logs), 4)}
	}
	slices.SortFunc(out, func(a, b replica.StepOffset) int {
		return cmp.Or(cmp.Compare(a.Model, b.Model), cmp.Compare(a.GPU, b.GPU), cmp.Compare(a.TP, b.TP), cmp.Compare(a.Engine, b.Engine), cmp.Compare(a.Weights, b.Weights))
	})
	return out, nil
}

// foldOffsets are a fold's own step offsets: its training runs of the
// deployments its held-out runs share with them, predicted with c (the
// fold's coefficients, no offsets), so that no held-out run's residual
// informs them. Nil when the held-out runs share no deployment with the
// training runs (a model, TP size or GPU held out).
func foldOffsets(ctx context.Context, c replica.Calibration, train, test []*Experiment, o Options, workers int) ([]replica.StepOffset, error) {
	var shared []replica.Deployment
	for _, e := range test {
		d, err := deploymentOf(e)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.ID, err)
		}
		shared = append(shared, d)
	}
	var runs []*Experiment
	for _, e := range train {
		d, err := deploymentOf(e)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.ID, err)
		}
		if slices.ContainsFunc(shared, d.Matches) {
			runs = append(runs, e)
		}
	}
	if len(runs) == 0 {
		return nil, nil
	}
	c.Offsets = nil
	rs, err := SimulateAll(ctx, runs, c, o, workers)
	if err != nil {
		return nil, err
	}
	return Offsets(rs)
}

// SetFoldOffsets gives every fold of c its own step offsets (foldOffsets),
// its training runs being f's runs that are measured and not overloaded
// minus the fold's. calibrate --continue uses it for the folds it carries.
func SetFoldOffsets(ctx context.Context, f *File, c *replica.Calibration, o Options, workers int) error {
	runs := FitRuns(f)
	for i, fold := range c.Folds {
		train, test := splitFold(runs, fold)
		fc := *c
		fc.Coefficients = fold.Coefficients
		offs, err := foldOffsets(ctx, fc, train, test, o, workers)
		if err != nil {
			return fmt.Errorf("%s fold without %s: %w", fold.Protocol, fold.HeldOut, err)
		}
		c.Folds[i].Offsets = offs
	}
	return nil
}

// splitFold splits runs into a recorded fold's training runs and the
// runs it held out (fold.Runs), in runs' order.
func splitFold(runs []*Experiment, fold replica.CalibrationFold) (train, test []*Experiment) {
	for _, e := range runs {
		if slices.Contains(fold.Runs, e.ID) {
			test = append(test, e)
		} else {
			train = append(train, e)
		}
	}
	return train, test
}
