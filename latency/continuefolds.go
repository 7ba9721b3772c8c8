package latency

import (
	"context"
	"fmt"
	"strings"

	"github.com/eppsim/eppsim/replica"
)

// ContinueFolds continues every out-of-sample fold of cal, a calibration
// whose folds were fitted on f's runs (calibrate --continue
// --refit-folds): each fold's search starts from its own coefficients and
// frees o.Free, with o.FoldBudget evaluations (0: o.Budget, as Calibrate
// has it), on its own training runs
// (f's fitted runs without the ones it held out), so a stage added after
// the full fit is added to every fold alike and no fold sees its held-out
// runs. A fold whose training runs do not match its record (another file,
// other runs) is an error. The folds' step offsets are not touched: the
// caller measures them again (SetFoldOffsets).
func ContinueFolds(ctx context.Context, f *File, cal *replica.Calibration, o CalibrateOptions) error {
	runs := FitRuns(f)
	if o.Free == nil {
		o.Free = DefaultFree
	}
	free, err := freeIndexes(o.Free)
	if err != nil {
		return err
	}
	if o.FoldBudget <= 0 {
		o.FoldBudget = o.Budget
	}
	if o.FoldBudget <= 0 {
		return fmt.Errorf("calibrate: continuing the folds needs a fold budget of at least 1, got %d", o.FoldBudget)
	}
	// Every fold is checked before the first is fitted: a mismatch found
	// after hours of refits would lose them.
	if err := CheckFolds(f, cal.Folds); err != nil {
		return err
	}
	if o.Pool == nil {
		o.Pool = NewPool()
		defer o.Pool.Close()
	}
	for i := range cal.Folds {
		fd := &cal.Folds[i]
		train, _ := splitFold(runs, *fd)
		label := fd.Protocol + " without " + fd.HeldOut + ", continued"
		// An optional coefficient these runs do not exercise stays as it
		// is (absent: it stands in by the one it names), not at a copy of
		// that one's value before the search moved it.
		start := startOf(fd.Coefficients, exercised(free, train))
		co, _, _, err := fitOn(ctx, train, start, free, o.FoldBudget, o, fd.Weights, label)
		if err != nil {
			return fmt.Errorf("fold %s/%s: %w", fd.Protocol, fd.HeldOut, err)
		}
		fd.Coefficients = co
	}
	if len(cal.Folds) > 0 {
		cal.Notes = strings.TrimSpace(cal.Notes + fmt.Sprintf(" Every fold continued from its own coefficients (free: %s; %d evaluations each%s).", strings.Join(o.Free, ", "), o.FoldBudget, offsetsNote(o.OffsetAware)))
	}
	return nil
}

// CheckFolds reports an error unless every recorded fold describes f's
// fitted runs (FitRuns): all the runs it held out are among them, and the
// others are as many as it was fitted on. Folds recorded on another file,
// or on other runs of it, fail; the check needs no simulation, so
// calibrate makes it before its fit.
func CheckFolds(f *File, folds []replica.CalibrationFold) error {
	runs := FitRuns(f)
	for _, fd := range folds {
		train, test := splitFold(runs, fd)
		if len(test) != len(fd.Runs) || len(train) != fd.TrainedOn {
			return fmt.Errorf("calibrate: fold %s/%s held out %d runs and was fitted on %d; of these inputs' %d fitted runs it would hold out %d and fit on %d",
				fd.Protocol, fd.HeldOut, len(fd.Runs), fd.TrainedOn, len(runs), len(test), len(train))
		}
	}
	return nil
}
