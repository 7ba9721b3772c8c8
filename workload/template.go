package workload

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
)

// Chat template (Llama-3 style), rendered directly to token ids:
//
//	<|begin_of_text|>
//	for each message:
//	    <|start_header_id|> ROLE <|end_header_id|> "\n\n" CONTENT <|eot_id|>
//	<|start_header_id|> "assistant" <|end_header_id|> "\n\n"      (generation prompt)
//
// ROLE, "\n\n" and every CONTENT segment (a string content, or each text
// part of an array content) are tokenized separately with cl100k and
// concatenated; contents are not trimmed. Tokenizing per segment (instead of
// rendering the whole text and tokenizing it once, as a server would) makes
// the prompt of turn n+1 an exact token extension of turn n's prompt plus
// turn n's output, because the answer's tokens enc(answer) + <|eot_id|> are
// precisely what follows the generation prompt in the next turn. Real
// templates tokenize across segment boundaries; the difference is a few
// tokens per message and does not change prefix structure.

// Message is one chat message; Content holds its text segments. A single
// segment is sent as a plain string, several as OpenAI text parts.
type Message struct {
	Role    string
	Content []string
}

// chatEncoder renders messages to tokens with a segment cache.
type chatEncoder struct {
	cache *segCache
	nl2   []uint32
	roles map[string][]uint32
}

func newChatEncoder(tok *Tokenizer, cacheBytes int) (*chatEncoder, error) {
	e := &chatEncoder{cache: newSegCache(tok, cacheBytes), roles: make(map[string][]uint32)}
	var err error
	if e.nl2, err = tok.Encode("\n\n"); err != nil {
		return nil, err
	}
	for _, r := range []string{"system", "user", "assistant", "tool", "ipython", "developer"} {
		if e.roles[r], err = tok.Encode(r); err != nil {
			return nil, err
		}
	}
	return e, nil
}

func (e *chatEncoder) role(r string) ([]uint32, error) {
	if ids, ok := e.roles[r]; ok {
		return ids, nil
	}
	return e.cache.tok.Encode(r)
}

// appendHeader appends <|start_header_id|> ROLE <|end_header_id|> "\n\n".
func (e *chatEncoder) appendHeader(dst []uint32, role string) ([]uint32, error) {
	r, err := e.role(role)
	if err != nil {
		return nil, err
	}
	dst = append(dst, TokStartHeader)
	dst = append(dst, r...)
	dst = append(dst, TokEndHeader)
	return append(dst, e.nl2...), nil
}

// appendContent appends the segments' tokens.
func (e *chatEncoder) appendContent(dst []uint32, parts []string) ([]uint32, error) {
	for _, p := range parts {
		ids, err := e.cache.encode(p)
		if err != nil {
			return nil, err
		}
		dst = append(dst, ids...)
	}
	return dst, nil
}

// prompt renders a whole conversation plus the generation prompt.
func (e *chatEncoder) prompt(msgs []Message) ([]uint32, error) {
	var c conv
	for _, m := range msgs {
		if err := c.add(e, m); err != nil {
			return nil, err
		}
	}
	return c.prompt(e)
}

// generationPrompt reports whether prompt ends with the chat template's
// generation prompt, the assistant's header.
func (e *chatEncoder) generationPrompt(prompt []uint32) bool {
	h, err := e.appendHeader(nil, "assistant")
	return err == nil && len(prompt) > len(h) && slices.Equal(prompt[len(prompt)-len(h):], h)
}

// answer returns the output tokens of a chat answer: enc(text) <|eot_id|>.
func (e *chatEncoder) answer(text string) ([]uint32, error) {
	ids, err := e.cache.encode(text)
	if err != nil {
		return nil, err
	}
	out := make([]uint32, 0, len(ids)+1)
	out = append(out, ids...)
	return append(out, TokEOT), nil
}

// conv is a conversation's token stream, grown message by message. Prompts
// handed out share its backing array: a prompt ends with the generation
// prompt, and when the next message is the assistant's answer the header
// already in place is reused, so earlier prompts are never overwritten.
type conv struct {
	toks    []uint32
	genOpen bool // toks ends with the generation prompt
	genLen  int
}

func (c *conv) add(e *chatEncoder, m Message) error {
	var err error
	if len(c.toks) == 0 {
		c.toks = append(c.toks, TokBeginOfText)
	}
	if c.genOpen {
		c.genOpen = false
		if m.Role == "assistant" {
			if c.toks, err = e.appendContent(c.toks, m.Content); err != nil {
				return err
			}
			c.toks = append(c.toks, TokEOT)
			return nil
		}
		// Drop the generation prompt; clip so that the next append copies
		// instead of overwriting the prompt handed out last.
		c.toks = slices.Clip(c.toks[:len(c.toks)-c.genLen])
	}
	if c.toks, err = e.appendHeader(c.toks, m.Role); err != nil {
		return err
	}
	if c.toks, err = e.appendContent(c.toks, m.Content); err != nil {
		return err
	}
	c.toks = append(c.toks, TokEOT)
	return nil
}

// prompt returns the conversation so far plus the generation prompt.
func (c *conv) prompt(e *chatEncoder) ([]uint32, error) {
	if len(c.toks) == 0 {
		c.toks = append(c.toks, TokBeginOfText)
	}
	if !c.genOpen {
		n := len(c.toks)
		var err error
		if c.toks, err = e.appendHeader(c.toks, "assistant"); err != nil {
			return nil, err
		}
		c.genOpen, c.genLen = true, len(c.toks)-n
	}
	return c.toks[:len(c.toks):len(c.toks)], nil
}

// ChatPrompt renders msgs with the chat template, generation prompt included.
func (t *Tokenizer) ChatPrompt(msgs []Message) ([]uint32, error) {
	e, err := newChatEncoder(t, 1<<20)
	if err != nil {
		return nil, err
	}
	return e.prompt(msgs)
}

// ChatAnswer returns the output tokens of a chat answer: enc(text) <|eot_id|>.
func (t *Tokenizer) ChatAnswer(text string) ([]uint32, error) {
	ids, err := t.Encode(text)
	if err != nil {
		return nil, err
	}
	return append(ids, TokEOT), nil
}

// chatBody builds an OpenAI chat-completions body: what json.Encoder (HTML
// escaping off) writes for
//
//	struct {
//		Model     string `json:"model"`
//		Messages  []msg  `json:"messages"` // {"role", "content"}
//		MaxTokens int    `json:"max_tokens"`
//		CacheSalt string `json:"cache_salt,omitempty"`
//	}
//
// where a content is "" for no segment, the segment for one, and text parts
// {"type": "text", "text": ...} for several (chatBodyJSON in the tests).
func chatBody(model string, msgs []Message, maxTokens int, cacheSalt string) []byte {
	n := len(model) + len(cacheSalt) + 64
	for _, m := range msgs {
		n += len(m.Role) + 32
		for _, p := range m.Content {
			n += len(p) + len(p)/8 + 32
		}
	}
	b := make([]byte, 0, n)
	b = append(b, `{"model":`...)
	b = appendJSONString(b, model)
	b = append(b, `,"messages":[`...)
	for i, m := range msgs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"role":`...)
		b = appendJSONString(b, m.Role)
		b = append(b, `,"content":`...)
		switch len(m.Content) {
		case 0:
			b = append(b, `""`...)
		case 1:
			b = appendJSONString(b, m.Content[0])
		default:
			b = append(b, '[')
			for j, p := range m.Content {
				if j > 0 {
					b = append(b, ',')
				}
				b = append(b, `{"type":"text","text":`...)
				b = appendJSONString(b, p)
				b = append(b, '}')
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	b = append(b, `],"max_tokens":`...)
	b = strconv.AppendInt(b, int64(maxTokens), 10)
	if cacheSalt != "" {
		b = append(b, `,"cache_salt":`...)
		b = appendJSONString(b, cacheSalt)
	}
	return append(b, '}')
}

// marshalCompact encodes v without HTML escaping and without the trailing newline.
func marshalCompact(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic("workload: marshal: " + err.Error()) // only plain structs of strings and ints reach here
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}
