package prefixhash

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unsafe"
)

// Request-body checking: what the EPP's request parsers reject before
// anything else runs (spec §2.1 step 0). The openai, anthropic and vllmhttp
// parsers of llm-d-router ebab687 decode the body twice with encoding/json:
// into a map[string]any (so the body must be a JSON object or null, and
// every number anywhere must fit a float64) and into the typed request
// struct of its API (requesthandling/types.go), where a value of the wrong
// JSON type for a declared field is an error (encoding/json reports it and
// the parser fails the request), unknown keys are ignored, keys match field
// names case-insensitively and every occurrence of a repeated key is
// decoded. CheckBody decides exactly that, in one pass over the body that
// decodes nothing (one small allocation for the field path); the typed
// structs of body.go,
// decoded with encoding/json, are the reference it is tested against
// (FuzzCheckBodyMatchesReference).

// maxNesting is encoding/json's limit on nested arrays and objects.
const maxNesting = 10000

// ParseError is a request body the EPP's parser rejects (spec §2.1 step 0).
type ParseError struct {
	Kind Kind
	// Field is where the problem is, e.g. "messages[0].tool_calls"; "" for
	// the body as a whole (invalid JSON, not an object).
	Field string
	// Offset is the byte offset of the offending value or character.
	Offset int
	// Problem says what is wrong, e.g. "got a string, want an array".
	Problem string
}

func (e *ParseError) Error() string {
	where := e.Field
	if where == "" {
		where = "body"
	}
	return fmt.Sprintf("%s request: %s: %s", e.Kind, where, e.Problem)
}

// CheckBody reports whether body decodes as a request of kind the way the
// EPP's parser decodes it (spec §2.1 step 0): nil, or a *ParseError naming
// the first problem. Invalid JSON is reported first, then a number outside
// the float64 range, then the first value whose JSON type does not fit its
// declared field, each in body order. KindUnknown is checked as
// completions, the API the openai-parser assumes for a request without a
// path.
func CheckBody(kind Kind, body []byte) error {
	root := bodySchemas[kind]
	if root == nil {
		kind = KindCompletions
		root = bodySchemas[KindCompletions]
	}
	var pathBuf [8]pathSeg
	c := checker{fscan: fscan{b: body, quote: -1, backslash: -1}, path: pathBuf[:0]}
	ok := c.value(root, 0)
	if ok {
		c.ws()
		if c.i < len(c.b) {
			ok = c.syntax("invalid JSON: unexpected %s after the top-level value", c.describeByte())
		}
	}
	var e *ParseError
	switch {
	case !ok:
		e = c.synErr
	case c.numErr != nil:
		e = c.numErr
	default:
		e = c.typeErr
	}
	if e == nil {
		return nil
	}
	e.Kind = kind
	return e
}

// vkind is the Go type a JSON value is decoded into.
type vkind uint8

const (
	vAny       vkind = iota // interface{} or json.RawMessage: any value
	vString                 // string
	vBool                   // bool
	vInt                    // int
	vTokenID                // float64 that must be a token ID (GenerateRequest.TokenIDs)
	vArray                  // slice of elem
	vMap                    // map[string]elem
	vObject                 // struct with fields (also a pointer to one)
	vContent                // a string or a slice of elem (chat Content, AnthropicContent)
	vPrompt                 // completions Prompt / EmbeddingsInput (custom decoder)
	vTopObject              // the body: a JSON object or null, decoded as fields
)

type schema struct {
	kind   vkind
	want   string // the expected value, for type errors
	elem   *schema
	fields []member
	// what prefixes the prompt decoder's own messages ("prompt",
	// "embeddings input").
	what string
}

type member struct {
	name string
	s    *schema
}

var (
	sAny    = &schema{kind: vAny}
	sString = &schema{kind: vString, want: "a string"}
	sBool   = &schema{kind: vBool, want: "a boolean"}
	sInt    = &schema{kind: vInt, want: "an integer"}
	sArrAny = &schema{kind: vArray, want: "an array", elem: sAny}
	sMapAny = &schema{kind: vMap, want: "an object", elem: sAny}
)

func object(fields ...member) *schema {
	return &schema{kind: vObject, want: "an object", fields: fields}
}
func arrayOf(elem *schema) *schema { return &schema{kind: vArray, want: "an array", elem: elem} }
func mapOf(elem *schema) *schema   { return &schema{kind: vMap, want: "an object", elem: elem} }
func top(fields ...member) *schema {
	return &schema{kind: vTopObject, want: "a JSON object", fields: fields}
}
func prompt(what string) *schema {
	return &schema{kind: vPrompt, want: "a string or an array", what: what}
}

// bodySchemas are the typed request structs of llm-d-router ebab687
// (requesthandling/types.go), field by field, per API. Only the JSON type
// of each declared field matters here; body.go holds the same structs for
// decoding.
var bodySchemas = func() map[Kind]*schema {
	// ChatCompletionsRequest, Message, Content, ContentBlock and its
	// ImageBlock, AudioBlock, VideoBlock.
	urlObj := object(member{"url", sString})
	block := object(
		member{"type", sString},
		member{"text", sString},
		member{"image_url", urlObj},
		member{"input_audio", object(member{"data", sString}, member{"format", sString})},
		member{"video_url", urlObj},
	)
	content := &schema{kind: vContent, want: "a string or an array of content blocks", elem: block}
	message := object(
		member{"role", sString},
		member{"content", content},
		member{"tool_calls", sArrAny},
	)
	chat := top(
		member{"messages", arrayOf(message)},
		member{"tools", sArrAny},
		member{"documents", sArrAny},
		member{"chat_template", sString},
		member{"return_assistant_tokens_mask", sBool},
		member{"continue_final_message", sBool},
		member{"add_generation_prompt", sBool},
		member{"chat_template_kwargs", sMapAny},
		member{"cache_salt", sString},
	)

	// MessagesRequest, AnthropicMessage, AnthropicContent,
	// AnthropicContentBlock (recursive through tool_result content),
	// AnthropicImageSource.
	aBlock := &schema{kind: vObject, want: "an object"}
	aContent := &schema{kind: vContent, want: "a string or an array of content blocks", elem: aBlock}
	aBlock.fields = []member{
		{"type", sString},
		{"text", sString},
		{"source", object(member{"type", sString}, member{"media_type", sString}, member{"data", sString}, member{"url", sString})},
		{"id", sString},
		{"name", sString},
		{"input", sAny}, // json.RawMessage
		{"tool_use_id", sString},
		{"content", aContent},
		{"thinking", sString},
	}
	messages := top(
		member{"messages", arrayOf(object(member{"role", sString}, member{"content", aContent}))},
		member{"system", aContent},
		member{"tools", sArrAny},
		member{"cache_salt", sString},
	)

	// GenerateRequest decodes through its own UnmarshalJSON: token_ids as
	// []float64, each an integer in [0, 2^32), and the multimodal features.
	placeholder := object(member{"offset", sInt}, member{"length", sInt})
	generate := top(
		member{"token_ids", arrayOf(&schema{kind: vTokenID, want: "a number"})},
		member{"cache_salt", sString},
		member{"features", object(
			member{"mm_hashes", mapOf(arrayOf(sString))},
			member{"mm_placeholders", mapOf(arrayOf(placeholder))},
		)},
	)

	return map[Kind]*schema{
		KindChatCompletions: chat,
		KindCompletions:     top(member{"prompt", prompt("prompt")}, member{"cache_salt", sString}),
		KindMessages:        messages,
		KindResponses: top(member{"input", sAny}, member{"instructions", sAny}, member{"tools", sAny},
			member{"cache_salt", sString}),
		KindConversations: top(
			member{"items", arrayOf(object(member{"type", sString}, member{"role", sString}, member{"content", sAny}))},
			member{"metadata", sMapAny},
			member{"cache_salt", sString},
		),
		KindEmbeddings: top(member{"input", prompt("embeddings input")}, member{"cache_salt", sString}),
		KindGenerate:   generate,
	}
}()

// pathSeg is one step of the path to the value being checked: an object
// key (raw, still escaped) or an array index.
type pathSeg struct {
	key []byte
	idx int
}

// checker walks a body against a schema. Type and range errors are
// recorded (the first of each) and the walk goes on, as encoding/json does;
// a syntax error ends it.
type checker struct {
	fscan
	path            []pathSeg
	synErr          *ParseError
	numErr, typeErr *ParseError
}

func (c *checker) field() string {
	var b strings.Builder
	for _, p := range c.path {
		if p.key == nil {
			fmt.Fprintf(&b, "[%d]", p.idx)
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.Write(p.key)
	}
	return b.String()
}

// syntax records a syntax error at c.i and returns false.
func (c *checker) syntax(format string, args ...any) bool {
	if c.synErr == nil {
		c.synErr = &ParseError{Offset: c.i, Problem: fmt.Sprintf(format, args...)}
	}
	return false
}

// syntaxHere is syntax for an unexpected byte (or the end) at c.i.
func (c *checker) syntaxHere() bool {
	return c.syntax("invalid JSON: unexpected %s", c.describeByte())
}

func (c *checker) describeByte() string {
	if c.i >= len(c.b) {
		return "end of input"
	}
	return fmt.Sprintf("%q at byte %d", c.b[c.i], c.i)
}

// typeMismatch records that the value at c.i (first byte ch) is not of
// the wanted type.
func (c *checker) typeMismatch(ch byte, want string) {
	c.typeError(fmt.Sprintf("got %s, want %s", jsonTypeName(ch), want))
}

func (c *checker) typeError(problem string) {
	if c.typeErr == nil {
		c.typeErr = &ParseError{Field: c.field(), Offset: c.i, Problem: problem}
	}
}

func jsonTypeName(ch byte) string {
	switch ch {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// value checks the value at c.i against sc. depth is the number of arrays
// and objects that enclose it. It returns false on a syntax error.
func (c *checker) value(sc *schema, depth int) bool {
	ch := c.peek()
	switch {
	case c.i >= len(c.b):
		return c.syntaxHere()
	case sc.kind == vAny:
		return c.anyValue(depth)
	case ch == 'n':
		if !c.literal("null") {
			return c.syntaxHere()
		}
		if sc.kind == vPrompt {
			// The prompt decoder is called for null too, and rejects it.
			c.typeMismatchAt(ch, sc)
		}
		return true
	}
	switch sc.kind {
	case vString:
		if ch == '"' {
			return c.stringValue()
		}
	case vBool:
		if ch == 't' || ch == 'f' {
			return c.anyValue(depth)
		}
	case vInt:
		if isNumberStart(ch) {
			return c.intValue()
		}
	case vTokenID:
		if isNumberStart(ch) {
			return c.tokenIDValue()
		}
	case vArray:
		if ch == '[' {
			return c.array(sc.elem, depth)
		}
	case vMap:
		if ch == '{' {
			return c.object(nil, sc.elem, depth)
		}
	case vObject, vTopObject:
		if ch == '{' {
			return c.object(sc.fields, nil, depth)
		}
	case vContent:
		// Content.UnmarshalJSON: a string, else a list of blocks.
		switch ch {
		case '"':
			return c.stringValue()
		case '[':
			return c.array(sc.elem, depth)
		}
	case vPrompt:
		switch ch {
		case '"':
			return c.stringValue()
		case '[':
			return c.promptArray(sc, depth)
		}
	}
	c.typeMismatchAt(ch, sc)
	return c.anyValue(depth)
}

func (c *checker) typeMismatchAt(ch byte, sc *schema) {
	if sc.kind == vTopObject {
		// The map[string]any decode of the whole body fails first.
		c.typeError(fmt.Sprintf("got %s, want a JSON object", jsonTypeName(ch)))
		return
	}
	c.typeMismatch(ch, sc.want)
}

func isNumberStart(ch byte) bool { return ch == '-' || '0' <= ch && ch <= '9' }

// stringValue skips a string (opening quote at c.i).
func (c *checker) stringValue() bool {
	if !c.skipString() {
		return c.syntax("invalid JSON: bad string (invalid escape, control character or missing quote) before byte %d", c.i)
	}
	return true
}

// number scans a number at c.i and checks that it fits a float64 (the
// map[string]any decode); it returns the literal, or ok=false on a syntax
// error.
func (c *checker) number() (lit []byte, ok bool) {
	start := c.i
	if !c.skipNumber() {
		return nil, c.syntaxHere()
	}
	lit = c.b[start:c.i]
	// Without an exponent only a literal of more than 308 digits can
	// overflow; anything else is parsed.
	if len(lit) > 308 || bytes.ContainsAny(lit, "eE") {
		if _, err := strconv.ParseFloat(unsafeString(lit), 64); err != nil && c.numErr == nil {
			c.numErr = &ParseError{Field: c.field(), Offset: start,
				Problem: fmt.Sprintf("number %s is outside the float64 range", truncate(lit))}
		}
	}
	return lit, true
}

// intValue is a number decoded into an int: an integer literal in range.
func (c *checker) intValue() bool {
	start := c.i
	lit, ok := c.number()
	if !ok {
		return false
	}
	if _, err := strconv.ParseInt(unsafeString(lit), 10, 64); err != nil && c.typeErr == nil {
		c.typeErr = &ParseError{Field: c.field(), Offset: start, Problem: fmt.Sprintf("got number %s, want an integer", truncate(lit))}
	}
	return true
}

// tokenIDValue is a GenerateRequest token id: a number that is an integer
// in [0, 2^32).
func (c *checker) tokenIDValue() bool {
	start := c.i
	lit, ok := c.number()
	if !ok {
		return false
	}
	if f, err := strconv.ParseFloat(unsafeString(lit), 64); err == nil && !isTokenID(f) && c.typeErr == nil {
		c.typeErr = &ParseError{Field: c.field(), Offset: start, Problem: fmt.Sprintf("invalid token ID %s (want an integer in [0, 4294967295])", truncate(lit))}
	}
	return true
}

func isTokenID(f float64) bool { return f >= 0 && f <= math.MaxUint32 && f == math.Trunc(f) }

func truncate(lit []byte) string {
	if len(lit) > 40 {
		return string(lit[:37]) + "..."
	}
	return string(lit)
}

func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// array checks an array whose elements decode as elem.
func (c *checker) array(elem *schema, depth int) bool {
	if depth+1 > maxNesting {
		return c.syntax("invalid JSON: nested deeper than %d at byte %d", maxNesting, c.i)
	}
	c.i++ // '['
	if c.consume(']') {
		return true
	}
	n := len(c.path)
	c.path = append(c.path, pathSeg{})
	for idx := 0; ; idx++ {
		c.path[n] = pathSeg{idx: idx}
		if !c.value(elem, depth+1) {
			return false
		}
		if c.consume(',') {
			continue
		}
		c.path = c.path[:n]
		if !c.consume(']') {
			return c.syntaxHere()
		}
		return true
	}
}

// object checks an object: against fields when decoded into a struct
// (unknown keys are skipped, still validated), or with every value as elem
// when decoded into a map.
func (c *checker) object(fields []member, elem *schema, depth int) bool {
	if depth+1 > maxNesting {
		return c.syntax("invalid JSON: nested deeper than %d at byte %d", maxNesting, c.i)
	}
	c.i++ // '{'
	if c.consume('}') {
		return true
	}
	n := len(c.path)
	c.path = append(c.path, pathSeg{})
	for {
		if c.peek() != '"' {
			return c.syntaxHere()
		}
		quote := c.i
		if !c.stringValue() {
			return false
		}
		key := c.b[quote+1 : c.i-1]
		c.path[n] = pathSeg{key: key}
		if !c.consume(':') {
			return c.syntaxHere()
		}
		sc := elem
		if elem == nil {
			sc = sAny
			if f := c.matchField(fields, key, quote); f >= 0 {
				sc = fields[f].s
			}
		}
		if !c.value(sc, depth+1) {
			return false
		}
		if c.consume(',') {
			continue
		}
		c.path = c.path[:n]
		if !c.consume('}') {
			return c.syntaxHere()
		}
		return true
	}
}

// matchField returns the index of the field that key (raw, still escaped;
// its opening quote at b[quote]) decodes into, or -1. encoding/json matches names
// exactly, else under Unicode case folding (bytes.EqualFold).
func (c *checker) matchField(fields []member, key []byte, quote int) int {
	if bytes.IndexByte(key, '\\') >= 0 {
		// An escaped key is decoded. Invalid UTF-8 would decode to U+FFFD,
		// which folds to no ASCII letter: such a key matches no field.
		ks := fscan{b: c.b, i: quote, quote: -1, backslash: -1}
		dec, ok := ks.appendString(nil)
		if !ok {
			return -1
		}
		key = dec
	}
	ascii := true
	for _, ch := range key {
		if ch >= 0x80 {
			ascii = false
			break
		}
	}
	for i := range fields {
		name := fields[i].name
		if ascii && len(key) != len(name) {
			continue
		}
		if string(key) == name || bytes.EqualFold(key, []byte(name)) {
			return i
		}
	}
	return -1
}

// anyValue checks any JSON value, decoded into interface{}: only its
// syntax and its numbers' range matter.
func (c *checker) anyValue(depth int) bool {
	switch ch := c.peek(); ch {
	case '"':
		return c.stringValue()
	case '{':
		return c.object(nil, sAny, depth)
	case '[':
		return c.array(sAny, depth)
	case 't':
		if c.literal("true") {
			return true
		}
	case 'f':
		if c.literal("false") {
			return true
		}
	case 'n':
		if c.literal("null") {
			return true
		}
	default:
		if isNumberStart(ch) {
			_, ok := c.number()
			return ok
		}
	}
	return c.syntaxHere()
}

// promptArray checks an array given as a completions prompt or embeddings
// input (Prompt/EmbeddingsInput.UnmarshalJSON): empty, all strings, or all
// numbers that are token IDs. Like upstream it decodes the array first, so
// its syntax and numbers are checked throughout.
func (c *checker) promptArray(sc *schema, depth int) bool {
	if depth+1 > maxNesting {
		return c.syntax("invalid JSON: nested deeper than %d at byte %d", maxNesting, c.i)
	}
	c.i++ // '['
	if c.consume(']') {
		return true
	}
	n := len(c.path)
	c.path = append(c.path, pathSeg{})
	var first byte
	for idx := 0; ; idx++ {
		c.path[n] = pathSeg{idx: idx}
		ch := c.peek()
		switch {
		case idx == 0:
			first = ch
			if ch != '"' && !isNumberStart(ch) {
				c.typeError(sc.what + ": unsupported array element type (" + jsonTypeName(ch) + "; want strings or token IDs)")
			}
		case first == '"' && ch != '"', isNumberStart(first) && !isNumberStart(ch):
			c.typeError(sc.what + ": mixed types in array")
		}
		var ok bool
		if isNumberStart(first) && isNumberStart(ch) {
			ok = c.promptTokenID(sc)
		} else {
			ok = c.anyValue(depth + 1)
		}
		if !ok {
			return false
		}
		if c.consume(',') {
			continue
		}
		c.path = c.path[:n]
		if !c.consume(']') {
			return c.syntaxHere()
		}
		return true
	}
}

// promptTokenID checks one number of a token-ID prompt: upstream keeps it
// when float64(uint32(f)) == f, that is an integer in [0, 2^32).
func (c *checker) promptTokenID(sc *schema) bool {
	start := c.i
	lit, ok := c.number()
	if !ok {
		return false
	}
	if f, err := strconv.ParseFloat(unsafeString(lit), 64); err == nil && !isTokenID(f) && c.typeErr == nil {
		c.typeErr = &ParseError{Field: c.field(), Offset: start,
			Problem: fmt.Sprintf("%s: number %s is not a valid token ID (want an integer in [0, 4294967295])", sc.what, truncate(lit))}
	}
	return true
}
