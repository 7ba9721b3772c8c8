package latency

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
)

// A Protocol measures how a calibration carries to runs it never saw: it
// splits the fitted runs into folds, refits the calibration once per fold
// on the other runs — from the same starting point and with the same
// budget as the full fit, so that nothing the held-out runs taught the
// full fit reaches the refit — and predicts the fold's runs with it
// (docs/latency.md, "How well it predicts").
type Protocol struct {
	// Name is the protocol's key (calibrate --protocol, the calibration
	// file's folds, the Fit map's "<Key>_mape_<metric>" entries).
	Name string
	// Key is the short name of its figures: lomo, lolo, lotpo, logo.
	Key string
	// Label describes it in tables.
	Label string
	// folds splits runs into held-out groups.
	folds func(runs []*Experiment) []Fold
	// group is the held-out group a run belongs to (its fold's Group);
	// nil: every run belongs to the protocol's one fold.
	group func(*Experiment) string
}

// Fold is one held-out group of a protocol: the runs a refit without
// them predicts.
type Fold struct {
	Protocol string
	// Group names what is held out (a model, a TP size, a GPU, "highest
	// load of each model").
	Group string
	Test  []*Experiment
}

// MinTrainRuns is the fewest runs a fold's refit may be fitted on: with
// fewer, the ten free coefficients are not identified and the refit would
// measure the optimiser's start, not the calibration. Such folds are
// skipped and reported as skipped.
const MinTrainRuns = 5

// Protocols are the out-of-sample protocols, in the order reports list
// them.
var Protocols = []Protocol{
	{Name: "model", Key: "lomo", Label: "leave one model out", folds: byGroup("model", modelGroup), group: modelGroup},
	{Name: "load", Key: "lolo", Label: "leave the highest load out", folds: highestLoadFold},
	{Name: "tp", Key: "lotpo", Label: "leave one TP size out", folds: byGroup("tp", tpGroup), group: tpGroup},
	{Name: "gpu", Key: "logo", Label: "leave one GPU out", folds: byGroup("gpu", gpuOf), group: gpuOf},
}

func modelGroup(e *Experiment) string { return e.Model }
func tpGroup(e *Experiment) string    { return fmt.Sprintf("TP %d", e.TP) }

// HoldsOut reports whether a fold of p that held out group would have
// held out e too: e is of that model, TP size or GPU. The load
// protocol's one fold holds out every model's heaviest load, so it holds
// out any run heavier than the fitted ones, the overloaded runs among
// them.
func (p Protocol) HoldsOut(group string, e *Experiment) bool {
	if p.group == nil {
		return true
	}
	return p.group(e) == group
}

// LookupProtocol returns the protocol of a name or key.
func LookupProtocol(name string) (Protocol, error) {
	for _, p := range Protocols {
		if p.Name == name || p.Key == name {
			return p, nil
		}
	}
	var names []string
	for _, p := range Protocols {
		names = append(names, p.Name)
	}
	return Protocol{}, fmt.Errorf("unknown protocol %q (have %s)", name, strings.Join(names, ", "))
}

// Folds splits runs into p's folds, in a fixed order.
func (p Protocol) Folds(runs []*Experiment) []Fold { return p.folds(runs) }

// byGroup makes one fold per distinct key, sorted by key.
func byGroup(name string, key func(*Experiment) string) func([]*Experiment) []Fold {
	return func(runs []*Experiment) []Fold {
		var keys []string
		by := map[string][]*Experiment{}
		for _, e := range runs {
			k := key(e)
			if _, ok := by[k]; !ok {
				keys = append(keys, k)
			}
			by[k] = append(by[k], e)
		}
		slices.Sort(keys)
		out := make([]Fold, len(keys))
		for i, k := range keys {
			out[i] = Fold{Protocol: name, Group: k, Test: by[k]}
		}
		return out
	}
}

// LoadLevel is a run's load: the mean number of requests in flight in its
// busiest stage, by Little's law from the measurement (the stage's rate ×
// its measured E2E mean; the whole run's E2E mean for a stage measured
// alone). It is what sets the decode batch, KV usage and queueing, so it
// orders a model's runs by how close they came to its knee whatever their
// prompt and output lengths. 0 when nothing is measured.
func (e *Experiment) LoadLevel() float64 {
	var best float64
	whole, hasWhole := e.Measured["summary"]
	for i, s := range e.Workload.Stages {
		m, ok := e.Measured[fmt.Sprintf("stage_%d", i)]
		if !ok || math.IsNaN(m.E2E.Mean) {
			if !hasWhole || math.IsNaN(whole.E2E.Mean) {
				continue
			}
			m = whole
		}
		best = max(best, s.RateRPS*m.E2E.Mean/1000)
	}
	return best
}

// highestLoadFold holds out, of every model with at least two runs, its
// run of the highest LoadLevel (ties: the later id): one fold, which a
// calibration fitted on each model's lighter runs predicts. It is the
// question a capacity plan asks — the same model under more load than
// was measured.
func highestLoadFold(runs []*Experiment) []Fold {
	by := map[string][]*Experiment{}
	for _, e := range runs {
		by[e.Model] = append(by[e.Model], e)
	}
	var test []*Experiment
	for _, model := range modelsOf(runs) {
		rs := by[model]
		if len(rs) < 2 {
			continue
		}
		test = append(test, slices.MaxFunc(rs, func(a, b *Experiment) int {
			return cmp.Or(cmp.Compare(a.LoadLevel(), b.LoadLevel()), cmp.Compare(a.ID, b.ID))
		}))
	}
	if len(test) == 0 {
		return nil
	}
	return []Fold{{Protocol: "load", Group: "highest load of each model", Test: test}}
}

// trainOf returns runs without the fold's runs.
func (f Fold) trainOf(runs []*Experiment) []*Experiment {
	var out []*Experiment
	for _, e := range runs {
		if !slices.Contains(f.Test, e) {
			out = append(out, e)
		}
	}
	return out
}

// ids returns the fold's run ids.
func (f Fold) ids() []string {
	out := make([]string, len(f.Test))
	for i, e := range f.Test {
		out[i] = e.ID
	}
	return out
}
