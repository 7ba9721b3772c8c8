// Package prefixhash implements the two halves of the llm-d EPP's
// approximate prefix identity (spec ../shared/spec/epp.md §5.2–5.3):
//
//   - the token-producer's "estimate" backend (§5.2), which turns an
//     OpenAI/Anthropic request body into pseudo-tokens without a real
//     tokenizer: the prompt text is flattened (chat: role and content bytes
//     with no separators, tools JSON first) and packed four bytes per token,
//     little-endian, zero-padded; multimodal items become placeholder runs
//     (§5.2.1); and
//   - GetBlockHashes (§5.3), the chained xxhash64 block hashes the
//     approximate prefix producer indexes: seed = xxh64(model ++ cache_salt),
//     block id = xxh64(block tokens as little-endian uint32 bytes), hash =
//     xxh64(LE64(block id) ++ LE64(previous hash)); the last, partial block is
//     kept; empty prompts are skipped.
//
// Both reproduce the values the real code (llm-d-router ebab687) produces;
// ../shared/golden/epp-golden.json "hash_cases" is the conformance suite.
// V02Prompt and V02BlockHashes (v02.go) are the older character-based
// estimate of GIE v0.5.1 that llm-d-inference-scheduler v0.2.x used
// (`--epp-release llm-d-v0.2`).
// Audio blocks (input_audio and audio_url alike, §5.2.1) hash
// input_audio.data+format and count max(1, ceil(len(data+format)/4))
// placeholder tokens; an audio_url block's own URL is ignored.
//
// CheckBody (parse.go) decides which bodies the EPP's request parsers
// reject before anything else runs (§2.1 step 0): invalid JSON, a number
// outside the float64 range, or a value whose JSON type does not fit a
// field the parser's typed request structs declare.
//
// Conventions chosen where the spec leaves a gap (documented here and in
// README-level docs by the caller):
//   - Body kind is chosen from the request path when one is given (as the
//     EPP's parsers do), otherwise from the body: "messages" → chat
//     completions, "prompt" → completions, "token_ids" → generate.
//   - Images whose URL is not a decodable base64 data URL count as the
//     default 640×360 image: 640·360/1024 = 225 placeholder tokens. Videos
//     use the configured/default estimator (10 s × 2 fps × 225 = 4500
//     tokens); the x-llm-d-video-* request headers are not read.
//   - JSON values that the EPP re-serialises (chat tools, Responses,
//     Conversations and Embeddings inputs) are decoded with encoding/json into
//     interface values and re-encoded with json.Marshal: compact, object keys
//     sorted, HTML-escaped, numbers through float64.
package prefixhash
