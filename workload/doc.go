// Package workload produces the requests that eppsim replays: it reads real
// trace formats (Mooncake and Alibaba hash-id traces, OpenAI request JSONL,
// ShareGPT conversation dumps, Azure LLM inference CSV), synthesizes
// multi-turn chat traffic from a YAML spec, and derives for every request
// everything the rest of the simulator needs consistently: the HTTP body the
// client sends (all the router sees), the prompt token IDs the model server
// computes (Llama-3-style chat template + cl100k BPE), the output length and,
// where known, the output token IDs.
//
// All sources stream: memory is bounded by the number of concurrently active
// sessions and the session-inference window, never by the trace length.
// Requests come out in non-decreasing Arrival order; see Request for the
// closed-loop contract. docs/workloads.md documents formats, replay modes,
// the chat template and the text synthesis for hash-id traces.
package workload
