// Package flowcontrol is the EPP's flow-control admission layer at
// llm-d-router ebab687 (../shared/spec/flow-control.md; § below refers to
// it): the registry of priority bands and per-flow queues, enqueue with
// byte and request capacity limits, the dispatch cycle gated by the
// saturation detector and the usage-limit policy, the expiry sweep,
// in-flight eviction, and the plugin types of its policies:
//
//   - ordering: fcfs-ordering-policy, edf-ordering-policy,
//     slo-deadline-ordering-policy (§9);
//   - fairness: global-strict-fairness-policy, round-robin-fairness-policy,
//     program-aware-fairness (§8);
//   - usage limits: static-usage-limit-policy, priority-holdback-policy,
//     soft-reflective-ceiling-policy (§10).
//
// The Controller is a pure state machine: it never reads a clock. The
// simulator runs what upstream leaves to goroutines and tickers as events
// on the spec's grids (§16.3): a dispatch cycle after every enqueue and at
// grid points k·1 ms, the expiry sweep at k·1 s, both anchored at t = 0.
// Cycles that cannot change anything are skipped, exactly (§16.3
// "Skipping ticks"): the simulator calls Observe before every input of the
// saturation detector changes, and the Controller accounts the skipped grid
// cycles' effect on stateful policies (soft-reflective's tick counter) with
// the inputs that held during them. NextCycle says when the next cycle must
// run: at the next grid point while requests leave, or — when every queued
// request is gated — at the next input change, the next open cycle of
// soft-reflective's alternation, the detector's staleness horizon, or the
// reopening of the eviction gate.
//
// Deterministic conventions (§16.5): equal ordering keys go by arrival
// sequence; global-strict takes the lowest head sequence among equal
// heads; program-aware ties go to the lowest fairness ID; eviction victims
// with equal keys go newest dispatch first, then highest sequence.
//
// What eppsim's setting leaves out, and why it changes nothing there: the
// fleet is static and non-empty, so the 50 ms candidate cache (§1.4) never
// shows a change, the regime stays non-empty from t = 0 and
// RejectedNoEndpoints / EvictedNoEndpoints do not occur (they are
// implemented for an empty pool); simulated clients never disconnect, so
// there are no zombies (§6.5), and the backstop deadline (enqueue + max
// TTL + 2 s) always falls after the sweep that expires the request (at
// most 1 s after its TTL), so it never fires.
package flowcontrol
