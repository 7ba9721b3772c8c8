// Package capacity answers capacity questions by search over simulations:
// the highest rate at which a fleet holds every term of an SLO (a rate
// multiplier on the traffic's arrivals, bracketed, then bisected
// geometrically to a tolerance), or, at a given rate, the fewest replicas
// of a preset that hold it (integer bisection). It runs the search's
// points in rounds: every configuration's next point, on every seed, at
// once, the runs of one seed reading one scenario.Feed (a trace that fits
// its retain budget is read once for the whole search, a larger one once
// per round); the traffic is scaled after the reading
// (scenario.Spec.ArrivalScale), so all rates share it.
//
// A simulation whose SLO can no longer hold stops early (Stopper, through
// sim.Options.Stop): its run is recorded as stopped, a violation and
// nothing else. Points carry each term's value per seed, the run's knee
// (report.Knee: utilization and the binding replica limit) and latency
// intervals; the outputs are the answer table, "What this run shows",
// capacity.json, curves.csv, capacity.md and plots (output.go). --shard
// I/N splits the configurations across processes and Merge joins their
// results into the unsharded search's (docs/capacity.md).
package capacity
