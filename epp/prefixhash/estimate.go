package prefixhash

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unsafe"

	"github.com/cespare/xxhash/v2"

	"github.com/eppsim/eppsim/epp"
	"github.com/eppsim/eppsim/internal/memo"
)

// Estimator is the token-producer's estimate backend (spec §5.2): request
// body in, pseudo-tokens out, no tokenizer. The zero value uses the built-in
// multimodal defaults. An Estimator is immutable and safe for concurrent use.
type Estimator struct {
	cfg *EstimateConfig
	key string // cfg as JSON: equal for estimators that tokenize alike
}

// NewEstimator returns an estimator with the given `estimate` parameters
// (nil = defaults).
func NewEstimator(cfg *EstimateConfig) (*Estimator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	key, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("estimate config: %w", err)
	}
	return &Estimator{cfg: cfg, key: string(key)}, nil
}

// tokenizeKey memoizes an estimator's tokens of a request body
// (epp.Request.Memo): estimators with equal configs share them.
type tokenizeKey struct{ estimator, path string }

type tokenized struct {
	tr  *epp.TokenizedRequest
	err error
}

// sharedTokens marks a TokenizedRequest that a memo holds (GetBlockHashes
// memoizes only the hashes of those).
type sharedTokens struct{ tr *epp.TokenizedRequest }

// TokenizeShared is Tokenize of m's request body, memoized in m (nil: not
// memoized). The result is shared: callers must not change it.
func (e *Estimator) TokenizeShared(m *memo.Memo, path string, body []byte) (*epp.TokenizedRequest, error) {
	if m == nil {
		return e.Tokenize(path, body)
	}
	key := tokenizeKey{path: path}
	if e != nil {
		key.estimator = e.key
	}
	t := memo.Get(m, key, func() tokenized {
		tr, err := e.Tokenize(path, body)
		if tr != nil {
			m.Do(sharedTokens{tr}, func() any { return true })
		}
		return tokenized{tr, err}
	})
	return t.tr, t.err
}

// Modalities of multimodal placeholders.
const (
	ModalityImage = "image"
	ModalityVideo = "video"
	ModalityAudio = "audio"
)

// Tokenize turns a request body into pseudo-tokens. path selects the API
// (see KindOf; "" lets the body decide). The result carries the body's
// cache_salt. It is nil, with a nil error, when the body yields no tokens
// (the token-producer then leaves the request untokenized, spec §5.1). A body
// that does not parse as its API returns an error.
func (e *Estimator) Tokenize(path string, body []byte) (*epp.TokenizedRequest, error) {
	if e == nil {
		e = &Estimator{}
	}
	if tr, ok := fastTokenize(path, body); ok {
		if tr.TokenCount() == 0 {
			return nil, nil
		}
		return tr, nil
	}
	return e.tokenizeReference(path, body)
}

// tokenizeReference is Tokenize through encoding/json and the typed body
// structs — the definition the fast path must agree with.
func (e *Estimator) tokenizeReference(path string, body []byte) (*epp.TokenizedRequest, error) {
	kind := KindOf(path, body)
	tr, err := e.tokenize(kind, body)
	if err != nil {
		return nil, fmt.Errorf("estimate tokenizer: %s body: %w", kind, err)
	}
	if tr.TokenCount() == 0 {
		return nil, nil
	}
	return tr, nil
}

func (e *Estimator) tokenize(kind Kind, body []byte) (*epp.TokenizedRequest, error) {
	switch kind {
	case KindChatCompletions:
		var b chatBody
		if err := json.Unmarshal(body, &b); err != nil {
			return nil, err
		}
		raw, feats := e.chatBytes(&b)
		return &epp.TokenizedRequest{Prompts: [][]uint32{PackBytes(raw)}, CacheSalt: b.CacheSalt, MultiModal: feats}, nil
	case KindMessages:
		var b messagesBody
		if err := json.Unmarshal(body, &b); err != nil {
			return nil, err
		}
		raw, feats := e.messagesBytes(&b)
		return &epp.TokenizedRequest{Prompts: [][]uint32{PackBytes(raw)}, CacheSalt: b.CacheSalt, MultiModal: feats}, nil
	case KindCompletions:
		var b completionsBody
		if err := json.Unmarshal(body, &b); err != nil {
			return nil, err
		}
		tr := &epp.TokenizedRequest{CacheSalt: b.CacheSalt}
		switch {
		case len(b.Prompt.TokenIDs) > 0:
			tr.Prompts = [][]uint32{b.Prompt.TokenIDs}
		case len(b.Prompt.Strings) > 1:
			tr.Prompts = make([][]uint32, len(b.Prompt.Strings))
			for i, s := range b.Prompt.Strings {
				tr.Prompts[i] = PackString(s)
			}
		default:
			tr.Prompts = [][]uint32{PackString(b.Prompt.plainText())}
		}
		return tr, nil
	case KindGenerate:
		var b generateBody
		if err := json.Unmarshal(body, &b); err != nil {
			return nil, err
		}
		return &epp.TokenizedRequest{Prompts: [][]uint32{b.TokenIDs}, CacheSalt: b.CacheSalt}, nil
	case KindEmbeddings:
		var b embeddingsBody
		if err := json.Unmarshal(body, &b); err != nil {
			return nil, err
		}
		if len(b.Input.TokenIDs) > 0 {
			return &epp.TokenizedRequest{Prompts: [][]uint32{b.Input.TokenIDs}, CacheSalt: b.CacheSalt}, nil
		}
		raw, err := json.Marshal(b.Input)
		if err != nil {
			return nil, err
		}
		return &epp.TokenizedRequest{Prompts: [][]uint32{PackBytes(raw)}, CacheSalt: b.CacheSalt}, nil
	case KindResponses:
		var b responsesBody
		if err := json.Unmarshal(body, &b); err != nil {
			return nil, err
		}
		var combined []map[string]any
		if b.Instructions != nil {
			combined = append(combined, map[string]any{"instructions": b.Instructions})
		}
		if b.Tools != nil {
			combined = append(combined, map[string]any{"tools": b.Tools})
		}
		combined = append(combined, map[string]any{"input": b.Input})
		raw, err := json.Marshal(combined)
		if err != nil {
			return nil, err
		}
		return &epp.TokenizedRequest{Prompts: [][]uint32{PackBytes(raw)}, CacheSalt: b.CacheSalt}, nil
	case KindConversations:
		var b conversationsBody
		if err := json.Unmarshal(body, &b); err != nil {
			return nil, err
		}
		raw, err := json.Marshal(b.Items)
		if err != nil {
			return nil, err
		}
		return &epp.TokenizedRequest{Prompts: [][]uint32{PackBytes(raw)}, CacheSalt: b.CacheSalt}, nil
	}
	return nil, ErrUnsupportedBody
}

// chatBytes flattens a chat request: tools JSON, then per message the role
// and the content, with multimodal placeholders (spec §5.2, §5.2.1).
func (e *Estimator) chatBytes(b *chatBody) ([]byte, []epp.MultiModalFeature) {
	size := 0
	for i := range b.Messages {
		m := &b.Messages[i]
		size += len(m.Role) + len(m.Content.Raw)
		for j := range m.Content.Structured {
			size += len(m.Content.Structured[j].Text)
		}
	}
	out := make([]byte, 0, size+BytesPerToken)
	var feats []epp.MultiModalFeature
	if len(b.Tools) > 0 {
		if raw, err := json.Marshal(b.Tools); err == nil {
			out = append(out, raw...)
		}
	}
	for i := range b.Messages {
		m := &b.Messages[i]
		out = append(out, m.Role...)
		if m.Content.Raw != "" {
			out = append(out, m.Content.Raw...)
			continue
		}
		for _, blk := range m.Content.Structured {
			switch blk.Type {
			case "text":
				out = append(out, blk.Text...)
			case "image_url":
				out, feats = appendMM(out, feats, ModalityImage, blk.ImageURL.URL, e.cfg.imageCount(blk.ImageURL.URL))
			case "video_url":
				out, feats = appendMM(out, feats, ModalityVideo, blk.VideoURL.URL, e.cfg.videoCount())
			case "input_audio", "audio_url":
				// Both read input_audio: the asset is data+format, counted
				// by its own length (spec §5.2.1). An audio_url block's URL
				// is not a field upstream, so it hashes "" with count 1.
				asset := blk.InputAudio.Data + blk.InputAudio.Format
				out, feats = appendMM(out, feats, ModalityAudio, asset, audioCount(asset))
			}
		}
	}
	return out, feats
}

const anthropicBillingHeaderPrefix = "x-anthropic-billing-header"

// messagesBytes flattens an Anthropic /v1/messages request (spec §5.2).
func (e *Estimator) messagesBytes(b *messagesBody) ([]byte, []epp.MultiModalFeature) {
	var out []byte
	var feats []epp.MultiModalFeature
	if len(b.Tools) > 0 {
		if raw, err := json.Marshal(b.Tools); err == nil {
			out = append(out, raw...)
		}
	}
	if b.System.Raw != "" {
		out = append(out, b.System.Raw...)
	} else {
		for _, blk := range b.System.Structured {
			if blk.Type == "text" && blk.Text != "" && !strings.HasPrefix(blk.Text, anthropicBillingHeaderPrefix) {
				out = append(out, blk.Text...)
			}
		}
	}
	for _, m := range b.Messages {
		out = append(out, m.Role...)
		if m.Content.Raw != "" {
			out = append(out, m.Content.Raw...)
			continue
		}
		for _, blk := range m.Content.Structured {
			switch blk.Type {
			case "text":
				out = append(out, blk.Text...)
			case "image":
				if content, count := e.anthropicImage(blk.Source); content != "" {
					out, feats = appendMM(out, feats, ModalityImage, content, count)
				}
			case "thinking":
				out = append(out, blk.Thinking...)
			case "tool_use":
				out = append(out, blk.ID...)
				out = append(out, blk.Name...)
				out = append(out, blk.Input...)
			case "tool_result":
				if blk.Content.Raw != "" {
					out = append(out, blk.Content.Raw...)
					continue
				}
				var parts []string
				var images []string
				for _, it := range blk.Content.Structured {
					switch it.Type {
					case "text":
						parts = append(parts, it.Text)
					case "image":
						if url := anthropicImageURL(it.Source); url != "" {
							images = append(images, url)
						}
					}
				}
				out = append(out, strings.Join(parts, "\n")...)
				for _, url := range images {
					out, feats = appendMM(out, feats, ModalityImage, url, e.cfg.imageCount(url))
				}
			}
		}
	}
	return out, feats
}

// anthropicImage returns the content hashed for an image block and its
// placeholder count; "" means skip.
func (e *Estimator) anthropicImage(src *anthropicSource) (string, int) {
	if src == nil {
		return "", 0
	}
	if src.URL != "" {
		return src.URL, e.cfg.imageCount(src.URL)
	}
	if src.Data != "" {
		w, h, ok := payloadDimensions(src.Data)
		return src.Data, e.cfg.imageCountDims(w, h, ok)
	}
	return "", 0
}

// anthropicImageURL converts an Anthropic image source to a URL.
func anthropicImageURL(src *anthropicSource) string {
	if src == nil {
		return ""
	}
	if src.Type == "url" || src.URL != "" {
		return src.URL
	}
	if src.Data == "" {
		return ""
	}
	mt := src.MediaType
	if mt == "" {
		mt = "image/jpeg"
	}
	return "data:" + mt + ";base64," + src.Data
}

// appendMM pads out to a token boundary and appends count copies of the
// low 32 bits of xxh64(content) (spec §5.2.1).
func appendMM(out []byte, feats []epp.MultiModalFeature, modality, content string, count int) ([]byte, []epp.MultiModalFeature) {
	out = align(out)
	offset := len(out) / BytesPerToken
	sum := xxhash.Sum64String(content)
	var tok [BytesPerToken]byte
	binary.LittleEndian.PutUint32(tok[:], uint32(sum))
	for range count {
		out = append(out, tok[:]...)
	}
	feats = append(feats, epp.MultiModalFeature{
		Modality: modality,
		Hash:     strconv.FormatUint(sum, 16),
		Offset:   offset,
		Count:    count,
	})
	return out, feats
}

// align zero-pads b to a multiple of BytesPerToken.
func align(b []byte) []byte {
	if r := len(b) % BytesPerToken; r != 0 {
		b = append(b, make([]byte, BytesPerToken-r)...)
	}
	return b
}

// PackBytes packs bytes into little-endian uint32 pseudo-tokens, zero-padding
// the tail (spec §5.2 step 3). Empty input gives nil.
func PackBytes(raw []byte) []uint32 {
	if len(raw) == 0 {
		return nil
	}
	n := (len(raw) + BytesPerToken - 1) / BytesPerToken
	out := make([]uint32, n)
	if littleEndian {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), 4*n), raw)
		return out
	}
	full := len(raw) / BytesPerToken
	for i := range full {
		out[i] = binary.LittleEndian.Uint32(raw[4*i:])
	}
	if full < n {
		var tail [BytesPerToken]byte
		copy(tail[:], raw[4*full:])
		out[full] = binary.LittleEndian.Uint32(tail[:])
	}
	return out
}

// PackString is PackBytes for a string.
func PackString(s string) []uint32 {
	if s == "" {
		return nil
	}
	n := (len(s) + BytesPerToken - 1) / BytesPerToken
	out := make([]uint32, n)
	full := len(s) / BytesPerToken
	for i := range full {
		j := 4 * i
		out[i] = uint32(s[j]) | uint32(s[j+1])<<8 | uint32(s[j+2])<<16 | uint32(s[j+3])<<24
	}
	if full < n {
		var v uint32
		for k := 4 * full; k < len(s); k++ {
			v |= uint32(s[k]) << (8 * uint(k-4*full))
		}
		out[full] = v
	}
	return out
}

// UnpackTokens is the inverse of PackBytes: the zero-padded byte image of
// pseudo-tokens.
func UnpackTokens(tokens []uint32) []byte {
	out := make([]byte, 4*len(tokens))
	for i, t := range tokens {
		binary.LittleEndian.PutUint32(out[4*i:], t)
	}
	return out
}
