// Package sweep evaluates many EPP configurations on the same traffic:
// grid and random sweeps over scorer weights, plugin parameters and fleet
// or environment knobs (Plan, Run), shards of a sweep and their merge
// (Merge), and black-box tuning of scorer weights with gonum/optimize
// (Tune).
//
// A sweep point is one simulation (scenario.Run) of the shared workload,
// fleet and seed with the point's values applied: "plugin.weight" sets the
// weight of that scorer reference in every scheduling profile,
// "plugin.param" (or a dotted path such as
// "plugin.tokenProcessorConfig.blockSizeTokens") sets a key in the plugin's
// parameters, and a bare knob name (replicas, num-gpu-blocks-override, ...) changes the
// fleet or the environment. Points are numbered in a fixed order (grid:
// row-major over the dimensions in the order given; random: the seeded
// sample order), and that number is what --shard I/N selects on
// (index mod N == I).
//
// Every finished point is appended to DIR/points.jsonl and flushed, so an
// interrupted sweep loses only the points in flight and re-running it
// skips what is done. The first line of that file holds the sweep's
// specification and a hash of everything that determines the simulations;
// a resume or a merge refuses a file whose hash differs. The final files
// (points.csv, best.yaml, sweep.json, plots) are computed from that log
// sorted by point index, so they do not depend on --workers or on how the
// points were split into shards.
package sweep
