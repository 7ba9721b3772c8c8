package prefixhash

import (
	"encoding/binary"
	"encoding/json"
	"errors"

	"github.com/cespare/xxhash/v2"
)

// The prefix estimate of llm-d-inference-scheduler v0.2.x (`eppsim
// --epp-release llm-d-v0.2`). That scheduler registered, for
// prefix-cache-scorer in its default "estimate" mode, the plugin of
// gateway-api-inference-extension v0.5.1
// (pkg/epp/scheduling/framework/plugins/multi/prefix/plugin.go @ v0.5.1,
// wired in by pkg/plugins/scorer/prefix_cache.go @ llm-d-inference-scheduler
// v0.2.1). It hashed characters of the prompt string, not tokens:
//
//   - the prompt is the completions "prompt" string, or for a chat body the
//     messages rendered as "<|im_start|>ROLE\nCONTENT<|im_end|>\n" each
//     (pkg/epp/util/request/body.go @ GIE v0.5.1; see V02Prompt);
//   - a prompt shorter than one block gives no hashes at all; a longer one
//     is cut to maxBlocks·blockChars characters first;
//   - the first hash is xxh64(model name), a block of its own that every
//     request for the model shares; block i (full blocks only, a partial
//     tail is dropped) hashes to xxh64(block bytes ++ LE64(previous hash));
//   - upstream appended the previous hash to a sub-slice of the prompt's
//     byte buffer, and the append wrote into that buffer in place: the 8
//     bytes after each block were overwritten by the previous hash before
//     the next block was read. So every block after the first hashes the
//     little-endian hash two links back instead of its own first 8
//     characters. V02BlockHashes reproduces that (it changes which prompts
//     collide, not just the values).

// ErrV02Prompt is returned by V02Prompt for a body GIE v0.5.1 rejected
// before scheduling (HTTP 400).
var ErrV02Prompt = errors.New("no prompt string")

// V02Prompt returns the prompt string GIE v0.5.1's director handed to the
// scheduler for an OpenAI body: when the body has a "messages" key, the
// concatenation over its messages of "<|im_start|>" + role + "\n" + content
// + "<|im_end|>\n", skipping messages that are not objects or whose role or
// content is not a string (content blocks are not read); otherwise the
// "prompt" value, which must be a string. A body without either, with a
// non-list or empty messages, or a non-string prompt is an error (upstream
// answered 400).
func V02Prompt(body []byte) (string, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return "", errors.Join(ErrV02Prompt, err)
	}
	if raw, ok := top["messages"]; ok {
		var msgs []json.RawMessage
		if err := json.Unmarshal(raw, &msgs); err != nil || msgs == nil {
			return "", errors.Join(ErrV02Prompt, errors.New("messages is not a list"))
		}
		if len(msgs) == 0 {
			return "", errors.Join(ErrV02Prompt, errors.New("messages is empty"))
		}
		var out []byte
		for _, m := range msgs {
			var fields map[string]json.RawMessage
			if json.Unmarshal(m, &fields) != nil || fields == nil {
				continue
			}
			content, ok1 := jsonString(fields["content"])
			role, ok2 := jsonString(fields["role"])
			if !ok1 || !ok2 {
				continue
			}
			out = append(out, "<|im_start|>"...)
			out = append(out, role...)
			out = append(out, '\n')
			out = append(out, content...)
			out = append(out, "<|im_end|>\n"...)
		}
		return string(out), nil
	}
	raw, ok := top["prompt"]
	if !ok {
		return "", errors.Join(ErrV02Prompt, errors.New("prompt not found in request"))
	}
	p, ok := jsonString(raw)
	if !ok {
		return "", errors.Join(ErrV02Prompt, errors.New("prompt is not a string"))
	}
	return p, nil
}

// jsonString decodes raw when it is a JSON string.
func jsonString(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// V02BlockHashes returns the block hashes of prompt as GIE v0.5.1's
// prefix plugin computed them (hashPrompt), model hash first: nil when
// prompt is shorter than blockChars; otherwise 1 + ⌊min(len, maxBlocks·
// blockChars)/blockChars⌋ hashes. blockChars and maxBlocks must be
// positive (the caller validates them).
//
// The in-place overwrite described in the package comment is applied to a
// copy of prompt. Upstream wrote the 8 bytes only when the buffer's
// capacity, counted from the block's start, held them; with blocks of at
// least 8 characters that is always so where a later block reads them.
// For smaller blocks the capacity Go's allocator rounds to decides it at
// the prompt's very end; eppsim takes the capacity to be the prompt's
// length.
func V02BlockHashes(model string, prompt string, blockChars, maxBlocks int) []uint64 {
	if blockChars <= 0 || maxBlocks <= 0 || len(prompt) < blockChars {
		return nil
	}
	capacity, n := len(prompt), len(prompt)
	if n/blockChars >= maxBlocks {
		n = maxBlocks * blockChars
	}
	buf := []byte(prompt[:n])
	out := make([]uint64, 1, 1+n/blockChars)
	out[0] = xxhash.Sum64String(model)
	var le [8]byte
	var d xxhash.Digest
	for i := 0; i+blockChars <= n; i += blockChars {
		binary.LittleEndian.PutUint64(le[:], out[len(out)-1])
		d.Reset()
		_, _ = d.Write(buf[i : i+blockChars])
		_, _ = d.Write(le[:])
		out = append(out, d.Sum64())
		if i+blockChars+8 <= capacity {
			copy(buf[i+blockChars:], le[:]) // what lies past n no block reads
		}
	}
	return out
}
