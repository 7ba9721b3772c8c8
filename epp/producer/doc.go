// Package producer holds the EPP's data producers (spec
// ../shared/spec/epp.md §1.3 steps 6–7, §5, §6, §8) and the deprecated
// precise-prefix-cache-scorer wrapper:
//
//   - token-producer (legacy alias "tokenizer", §5.1–5.2): the estimate
//     backend by default; with `vllm` or `modelName` set it returns the
//     request's ServerPromptTokens — the tokens the model server computes
//     (chat template applied), which the simulator already has, so no
//     network call is made — as one prompt;
//   - approx-prefix-cache-producer (§5.3–5.7): the approximate prefix index
//     with per-pod LRUs, the global-walk match and the PreRequest insert,
//     including the stale-entry behaviour; tail-first insertion (post-ebab687
//     PR #2661) is an option the config layer sets (SetTailFirst);
//   - precise-prefix-cache-producer (§6): the KV-event index (package
//     producer/precise) with tier weights and speculative indexing;
//   - inflight-load-producer (§8): live per-endpoint counters and the
//     prefix discount;
//   - session-id-producer: the session id header (or cookie) as a request
//     attribute;
//   - burst-prefix-cache-producer (flow-control.md §14.1): the batching
//     window (members wait for the seal: Produce returns *epp.WaitError)
//     and the joint placement of the batch;
//   - mm-embeddings-cache-producer (flow-control.md §14.3): the per-endpoint
//     encoder-cache LRU of multimodal hashes.
//
// Simulation conventions (spec §13):
//   - The approximate index update that upstream runs in a goroutine after
//     PreRequest is applied synchronously, i.e. at dispatch time: a request
//     scheduled right after sees it.
//   - Wherever upstream iterates a map of profile results, producers iterate
//     profile names in sorted order (the effects commute).
//   - Time (speculative TTL, session binding TTL) is the simulated
//     epp.Cycle.Now, never the wall clock.
//   - The precise producer's event side needs the model the engine serves
//     (upstream reads it from the ZMQ topic kv@<pod>@<model>): see
//     PrecisePrefix.SetEventModel.
//
// Data keys are "<Type>/<producerName>" (epp.DataKey); each producer's
// Produces/Consumes lists them exactly as upstream.
package producer
