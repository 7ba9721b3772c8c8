package prefixhash

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// The request-body types below mirror the EPP's parsed body
// (requesthandling.InferenceRequestBody and friends): the same field names,
// the same Go types and therefore the same encoding/json behaviour —
// case-insensitive keys, "last key wins", the same errors — and, where the
// estimate backend re-serialises a value, the same json.Marshal output.

// Kind is the API a request body belongs to.
type Kind uint8

// Body kinds, as the EPP's parsers tell them apart.
const (
	KindUnknown Kind = iota
	KindChatCompletions
	KindCompletions
	KindMessages // Anthropic /v1/messages
	KindResponses
	KindConversations
	KindEmbeddings
	KindGenerate
)

func (k Kind) String() string {
	switch k {
	case KindChatCompletions:
		return "chat-completions"
	case KindCompletions:
		return "completions"
	case KindMessages:
		return "messages"
	case KindResponses:
		return "responses"
	case KindConversations:
		return "conversations"
	case KindEmbeddings:
		return "embeddings"
	case KindGenerate:
		return "generate"
	}
	return "unknown"
}

// KindOf picks the body kind. A request path decides when it names an API
// (as the EPP's openai/anthropic/vllmhttp parsers route by path); without a
// path the body decides: "messages" → chat completions, "prompt" →
// completions, "token_ids" → generate.
func KindOf(path string, body []byte) Kind {
	if k := KindOfPath(path); k != KindUnknown {
		return k
	}
	var probe struct {
		Messages json.RawMessage `json:"messages"`
		Prompt   json.RawMessage `json:"prompt"`
		TokenIDs json.RawMessage `json:"token_ids"`
	}
	if json.Unmarshal(body, &probe) != nil {
		return KindUnknown
	}
	switch {
	case probe.Messages != nil:
		return KindChatCompletions
	case probe.Prompt != nil:
		return KindCompletions
	case probe.TokenIDs != nil:
		return KindGenerate
	}
	return KindUnknown
}

// KindOfPath is the kind a request path names (KindUnknown if none), by
// suffix as the EPP's parsers claim paths; a query string or a trailing
// slash is ignored.
func KindOfPath(path string) Kind {
	p := path
	if i := strings.IndexByte(p, '?'); i >= 0 {
		p = p[:i]
	}
	p = strings.TrimSuffix(p, "/")
	switch {
	case p == "":
	case strings.HasSuffix(p, "/chat/completions"):
		return KindChatCompletions
	case strings.HasSuffix(p, "/completions"):
		return KindCompletions
	case strings.HasSuffix(p, "/messages"):
		return KindMessages
	case strings.HasSuffix(p, "/responses"):
		return KindResponses
	case strings.Contains(p, "/conversations"):
		return KindConversations
	case strings.HasSuffix(p, "/embeddings"):
		return KindEmbeddings
	case strings.HasSuffix(p, "/generate"):
		return KindGenerate
	}
	return KindUnknown
}

// ErrUnsupportedBody is returned for a body the estimate backend cannot read.
var ErrUnsupportedBody = errors.New("unsupported request body type")

// chatBody is /v1/chat/completions (ChatCompletionsRequest). The
// chat-template fields are not read, but their declared types decide which
// bodies the parser rejects (spec §2.1 step 0).
type chatBody struct {
	Messages                  []chatMessage  `json:"messages,omitempty"`
	Tools                     []any          `json:"tools,omitempty"`
	Documents                 []any          `json:"documents,omitempty"`
	ChatTemplate              string         `json:"chat_template,omitempty"`
	ReturnAssistantTokensMask bool           `json:"return_assistant_tokens_mask,omitempty"`
	ContinueFinalMessage      bool           `json:"continue_final_message,omitempty"`
	AddGenerationPrompt       bool           `json:"add_generation_prompt,omitempty"`
	ChatTemplateKWArgs        map[string]any `json:"chat_template_kwargs,omitempty"`
	CacheSalt                 string         `json:"cache_salt,omitempty"`
}

type chatMessage struct {
	Role      string      `json:"role,omitempty"`
	Content   chatContent `json:"content"`
	ToolCalls []any       `json:"tool_calls,omitempty"`
}

// chatContent is a message content: a plain string or a list of blocks.
type chatContent struct {
	Raw        string
	Structured []contentBlock
}

func (c *chatContent) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err == nil {
		c.Raw = s
		return nil
	}
	var blocks []contentBlock
	if err := json.Unmarshal(data, &blocks); err == nil {
		c.Structured = blocks
		return nil
	}
	return errors.New("content format not supported")
}

// contentBlock is upstream's ContentBlock. It has no audio_url field: an
// "audio_url" key is unknown, whatever its value, and an audio_url block
// reads input_audio like an input_audio block (spec §5.2.1).
type contentBlock struct {
	Type       string     `json:"type"`
	Text       string     `json:"text,omitempty"`
	ImageURL   urlBlock   `json:"image_url"`
	InputAudio audioBlock `json:"input_audio"`
	VideoURL   urlBlock   `json:"video_url"`
}

type urlBlock struct {
	URL string `json:"url,omitempty"`
}

type audioBlock struct {
	Data   string `json:"data,omitempty"`
	Format string `json:"format,omitempty"`
}

// completionsBody is /v1/completions.
type completionsBody struct {
	Prompt    promptInput `json:"prompt"`
	CacheSalt string      `json:"cache_salt,omitempty"`
}

// promptInput is a completions prompt or an embeddings input: a string, an
// array of strings, or an array of token IDs.
type promptInput struct {
	Raw      string
	Strings  []string
	TokenIDs []uint32
}

func (p *promptInput) UnmarshalJSON(data []byte) error {
	var raw any
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	switch v := raw.(type) {
	case string:
		p.Raw = v
		return nil
	case []any:
		if len(v) == 0 {
			return nil
		}
		switch v[0].(type) {
		case string:
			ss := make([]string, len(v))
			for i, x := range v {
				s, ok := x.(string)
				if !ok {
					return errors.New("prompt: mixed types in array")
				}
				ss[i] = s
			}
			p.Strings = ss
			return nil
		case float64:
			ids := make([]uint32, len(v))
			for i, x := range v {
				f, ok := x.(float64)
				if !ok {
					return errors.New("prompt: mixed types in array")
				}
				id, ok := tokenID(f)
				if !ok {
					return fmt.Errorf("prompt: number %v is not a valid token ID", f)
				}
				ids[i] = id
			}
			p.TokenIDs = ids
			return nil
		default:
			return errors.New("prompt: unsupported array element type")
		}
	default:
		return errors.New("prompt: must be a string or an array")
	}
}

// tokenID converts a JSON number to a token ID when it is an integer in
// [0, 2^32).
func tokenID(f float64) (uint32, bool) {
	if f >= 0 && f <= 4294967295 && f == float64(uint32(f)) {
		return uint32(f), true
	}
	return 0, false
}

// plainText is the prompt as one string (strings joined by a space).
func (p promptInput) plainText() string {
	if p.Raw != "" {
		return p.Raw
	}
	return strings.Join(p.Strings, " ")
}

// embeddingsBody is /v1/embeddings. Input has no custom marshaller upstream,
// so the estimate backend's json.Marshal(input) yields the struct form
// {"Raw":…,"Strings":…,"TokenIDs":…}; eppsim reproduces that.
type embeddingsBody struct {
	Input     embeddingsInput `json:"input,omitempty"`
	CacheSalt string          `json:"cache_salt,omitempty"`
}

type embeddingsInput struct {
	Raw      string
	Strings  []string
	TokenIDs []uint32
}

func (e *embeddingsInput) UnmarshalJSON(data []byte) error {
	var p promptInput
	if err := p.UnmarshalJSON(data); err != nil {
		return fmt.Errorf("embeddings input: %w", err)
	}
	*e = embeddingsInput(p)
	return nil
}

// responsesBody is /v1/responses.
type responsesBody struct {
	Input        any    `json:"input,omitempty"`
	Instructions any    `json:"instructions,omitempty"`
	Tools        any    `json:"tools,omitempty"`
	CacheSalt    string `json:"cache_salt,omitempty"`
}

// conversationsBody is /v1/conversations.
type conversationsBody struct {
	Items     []conversationItem `json:"items,omitempty"`
	Metadata  map[string]any     `json:"metadata,omitempty"`
	CacheSalt string             `json:"cache_salt,omitempty"`
}

type conversationItem struct {
	Type    string `json:"type,omitempty"`
	Role    string `json:"role,omitempty"`
	Content any    `json:"content,omitempty"`
}

// generateBody is vLLM's tokens-in /generate (GenerateRequest). Upstream
// decodes it through its own UnmarshalJSON: the token IDs as float64s, each
// required to be an integer in [0, 2^32), and the multimodal features block
// (which eppsim does not use, but whose types can reject a body).
type generateBody struct {
	TokenIDs  []uint32
	CacheSalt string
}

func (g *generateBody) UnmarshalJSON(data []byte) error {
	var wire struct {
		TokenIDs  []float64 `json:"token_ids"`
		CacheSalt string    `json:"cache_salt,omitempty"`
		Features  *struct {
			MMHashes       map[string][]string `json:"mm_hashes"`
			MMPlaceholders map[string][]struct {
				Offset int `json:"offset"`
				Length int `json:"length"`
			} `json:"mm_placeholders"`
		} `json:"features,omitempty"`
	}
	if err := json.Unmarshal(data, &wire); err != nil {
		return err
	}
	ids := make([]uint32, len(wire.TokenIDs))
	for i, f := range wire.TokenIDs {
		id, ok := tokenID(f)
		if !ok {
			return fmt.Errorf("token_ids[%d]: %v is not a token ID", i, f)
		}
		ids[i] = id
	}
	g.TokenIDs, g.CacheSalt = ids, wire.CacheSalt
	return nil
}

// messagesBody is Anthropic /v1/messages.
type messagesBody struct {
	System    anthropicContent   `json:"system"`
	Messages  []anthropicMessage `json:"messages"`
	Tools     []any              `json:"tools,omitempty"`
	CacheSalt string             `json:"cache_salt,omitempty"`
}

type anthropicMessage struct {
	Role    string           `json:"role"`
	Content anthropicContent `json:"content"`
}

// anthropicContent is a string or a list of Anthropic content blocks.
type anthropicContent struct {
	Raw        string
	Structured []anthropicBlock
}

func (c *anthropicContent) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err == nil {
		c.Raw = s
		return nil
	}
	var blocks []anthropicBlock
	if err := json.Unmarshal(data, &blocks); err == nil {
		c.Structured = blocks
		return nil
	}
	return errors.New("anthropic content must be a string or an array of content blocks")
}

type anthropicBlock struct {
	Type      string           `json:"type"`
	Text      string           `json:"text,omitempty"`
	Thinking  string           `json:"thinking,omitempty"`
	ID        string           `json:"id,omitempty"`
	Name      string           `json:"name,omitempty"`
	Input     json.RawMessage  `json:"input,omitempty"`
	ToolUseID string           `json:"tool_use_id,omitempty"`
	Content   anthropicContent `json:"content"`
	Source    *anthropicSource `json:"source,omitempty"`
}

type anthropicSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

// saltOnly reads just the cache salt of any body kind.
type saltOnly struct {
	CacheSalt string `json:"cache_salt,omitempty"`
}

// CacheSalt returns the body's cache_salt (spec §5.1: every API body carries
// it under the same key). A body that does not parse, or has no salt, gives "".
func CacheSalt(body []byte) string {
	if salt, ok := fastCacheSalt(body); ok {
		return salt
	}
	var s saltOnly
	if json.Unmarshal(body, &s) != nil {
		return ""
	}
	return s.CacheSalt
}

// outputCaps are the client's output-token caps.
type outputCaps struct {
	MaxCompletionTokens *int64 `json:"max_completion_tokens"`
	MaxTokens           *int64 `json:"max_tokens"`
	MaxOutputTokens     *int64 `json:"max_output_tokens"`
}

// MaxOutputTokens returns the client's output cap from the body:
// max_completion_tokens, else max_tokens, else max_output_tokens; 0 when
// none is set or the body does not parse.
func MaxOutputTokens(body []byte) int64 {
	if v, ok := fastMaxOutputTokens(body); ok {
		return v
	}
	var c outputCaps
	if json.Unmarshal(body, &c) != nil {
		return 0
	}
	for _, p := range []*int64{c.MaxCompletionTokens, c.MaxTokens, c.MaxOutputTokens} {
		if p != nil {
			return *p
		}
	}
	return 0
}
