// Package precise is the KV-event side of the precise prefix cache (spec
// ../shared/spec/epp.md §6; upstream llm-d-router pkg/kvcache and
// pkg/kvevents): block keys (§6.2, cbor-fnv with a hand-written canonical
// CBOR encoder, or xxh64), the in-memory KV-block index with its per-key
// pod LRU and engine-key → request-key mapping (§6.3), KV-event ingestion
// with reference-counted removes, tier-weighted longest-prefix matching
// (§6.4) and speculative entries with a TTL in simulated time.
//
// Conventions: lookups stop at the first key no candidate holds (upstream
// also stops at keys absent from the index — the scores are the same
// either way); speculative entries expire when now ≥ insertion + TTL, checked
// before every Produce, PreRequest and event batch; tier sets are bit masks,
// so at most 63 distinct device tiers are tracked (events for more are
// dropped).
package precise
