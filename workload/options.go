package workload

import (
	"fmt"
	"strings"
	"time"
)

// Format names a trace format.
type Format string

// Trace formats.
const (
	FormatAuto     Format = "auto"
	FormatMooncake Format = "mooncake"     // JSONL: timestamp (ms), input_length, output_length, hash_ids (512-token blocks)
	FormatAlibaba  Format = "alibaba"      // JSONL: chat_id, parent_chat_id, timestamp (s), input/output_length, turn, hash_ids (16-token blocks)
	FormatOpenAI   Format = "openai-jsonl" // JSONL: batch-API lines {custom_id, url, body} or bare bodies, with x_* replay fields
	FormatShareGPT Format = "sharegpt"     // JSON array (or JSONL) of {id, conversations: [{from, value}]}
	FormatAzure    Format = "azure-csv"    // CSV: TIMESTAMP, ContextTokens, GeneratedTokens
	FormatSynth    Format = "synth"        // the synthesizer (builtin:NAME)
	// FormatInferencePerf is an inference-perf config (YAML) whose traffic
	// is generated: "inference-perf:FILE.yaml" or this format with a file.
	FormatInferencePerf Format = "inference-perf"
)

// ParseFormat accepts a format name or a common alias.
func ParseFormat(s string) (Format, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "auto":
		return FormatAuto, nil
	case "mooncake":
		return FormatMooncake, nil
	case "alibaba", "qwen", "bailian":
		return FormatAlibaba, nil
	case "openai-jsonl", "openai", "jsonl":
		return FormatOpenAI, nil
	case "sharegpt":
		return FormatShareGPT, nil
	case "azure-csv", "azure", "csv":
		return FormatAzure, nil
	case "inference-perf", "inferenceperf":
		return FormatInferencePerf, nil
	}
	return "", fmt.Errorf("unknown trace format %q (want auto, mooncake, alibaba, openai-jsonl, sharegpt, azure-csv or inference-perf)", s)
}

// Mode is the replay mode.
type Mode int

// Replay modes.
const (
	// ModeDefault picks the format's natural mode: open-loop for timestamped
	// traces (Mooncake, Alibaba, Azure, OpenAI JSONL), closed-loop for
	// conversation dumps (ShareGPT) and the synthesizer.
	ModeDefault Mode = iota
	// ModeOpenLoop sends every request at its Arrival.
	ModeOpenLoop
	// ModeClosedLoop releases later turns of a session ThinkTime after the
	// previous turn completes.
	ModeClosedLoop
)

// ParseMode accepts "default", "open" / "open-loop", "closed" / "closed-loop".
func ParseMode(s string) (Mode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "default", "auto":
		return ModeDefault, nil
	case "open", "open-loop":
		return ModeOpenLoop, nil
	case "closed", "closed-loop":
		return ModeClosedLoop, nil
	}
	return 0, fmt.Errorf("unknown replay mode %q (want default, open-loop or closed-loop)", s)
}

func (m Mode) String() string {
	switch m {
	case ModeOpenLoop:
		return "open-loop"
	case ModeClosedLoop:
		return "closed-loop"
	}
	return "default"
}

func (m Mode) closed(def Mode) bool {
	if m == ModeDefault {
		m = def
	}
	return m == ModeClosedLoop
}

// Options configure a trace source. The zero value is usable.
type Options struct {
	Format Format // FormatAuto (or "") detects the format from the content
	Mode   Mode
	// Seed drives everything synthesized: hash-id text and tokens, arrivals
	// and think times of untimestamped traces, the synthesizer.
	Seed int64
	// TimeScale multiplies every arrival and think time (0.5 replays twice as
	// fast). 0 means 1.
	TimeScale float64
	// Rate (requests/s), for timestamped traces, rescales time so that the
	// trace's mean request rate becomes Rate (Open makes a first pass over
	// the file to measure it; exclusive with TimeScale). For untimestamped
	// traces (ShareGPT, OpenAI lines without x_arrival_ms) and the
	// synthesizer it is the session arrival rate. 0 keeps the trace's own.
	Rate float64
	// SkipInvalid skips malformed lines instead of failing; they are counted
	// (Stream.Skipped) and the first few errors kept.
	SkipInvalid bool
	// BlockSize is the tokens per hash id (0: Mooncake 512, Alibaba 16).
	BlockSize int
	// BytesPerToken is the text density of synthesized prompts (0: 4).
	BytesPerToken float64
	// Model names the model in bodies that eppsim builds (0: DefaultModel).
	Model string
	// ThinkTime is the closed-loop think-time distribution for traces
	// without timing (zero: DefaultThinkTime()); values in ns.
	ThinkTime LogNormal
	// SessionWindow bounds session inference (Mooncake, Alibaba, OpenAI
	// x_session_id): a request can continue only a request that arrived at
	// most this long before it (0: 1h of trace time).
	SessionWindow time.Duration
	// MaxSessions bounds the number of sessions tracked for inference at
	// once; the oldest are forgotten first (0: 1<<20).
	MaxSessions int
	// SystemPromptTokens gives every Azure request a shared system prompt of
	// this many tokens (at most 65536).
	SystemPromptTokens int
	// DefaultOutputTokens is the output length of OpenAI lines that give none
	// (0: 256).
	DefaultOutputTokens int
	// MaxPromptTokens rejects longer prompts as invalid (0: 1<<21).
	MaxPromptTokens int
	// MaxLineBytes bounds one line of a JSONL trace (without its line end),
	// one record of an Azure CSV trace and one conversation of a ShareGPT
	// dump (0: 256 MiB). Longer input stops reading with an *InputError
	// naming the limit, where it would otherwise be buffered whole (a
	// device such as /dev/zero, or a file that is not text, never ends its
	// first line).
	MaxLineBytes int
	// NoTokens skips materializing Body and PromptTokens (PromptLen and
	// HashIDs are still set) for hash-id traces (Mooncake, Alibaba); used for
	// fast statistics. Other formats always tokenize.
	NoTokens bool
	// Classes is a priority mix (flow-control.md §2): every session (a
	// request without one on its own) that carries no objective header
	// gets the objective of a class drawn by share from the seed and its
	// session id. The classes are the run's InferenceObjectives.
	Classes []PriorityClass
	// FairnessID is the source of the fairness ID header of requests that
	// carry none: FairnessNone (the EPP's default-flow), FairnessSession
	// or FairnessClass.
	FairnessID string
	// API is the request API the requests are sent through (APIDefault:
	// each format's own, see API). Formats without an API of their own —
	// hash-id, Azure, ShareGPT, the synthesizer — can be sent through any
	// API but chat for token-only prompts (hash-id, Azure); a pre-tokenized
	// API (completions for a chat format, vllm-generate, sglang-generate)
	// carries the request's PromptTokens as they are. OpenAI JSONL and
	// inference-perf configs name their own and take only APIDefault.
	API API
	// InferencePerf tunes the traffic of inference-perf configs.
	InferencePerf InferencePerfOptions
	// Tokenizer may be shared between sources; nil creates one.
	Tokenizer *Tokenizer
}

// DefaultThinkTime is the closed-loop think time for traces without timing:
// lognormal, median 120 s, sigma 0.95 (p10 36 s, p90 406 s). It is a
// log-space least-squares fit of the Mooncake conversation trace's gaps
// between turns (p10/p50/p90 = 42/123/480 s, traces.md C.1), shifted down
// by about 10 s because those gaps include the previous turn's generation.
func DefaultThinkTime() LogNormal {
	return LogNormal{Median: 120 * float64(time.Second), Sigma: 0.95}
}

const (
	defaultSessionWindow  = time.Hour
	defaultMaxSessions    = 1 << 20
	defaultOutputTokens   = 256
	defaultMaxPrompt      = 1 << 21
	maxOutputTokens       = 1 << 21
	maxSystemPromptTokens = 1 << 16
	defaultSessionRate    = 1.0 // sessions/s for untimestamped conversation traces
)

// sessionRate is the rate at which traces without timestamps start
// sessions (sessions/s): Rate, or defaultSessionRate when unset.
func (o *Options) sessionRate() float64 {
	if o.Rate == 0 {
		return defaultSessionRate
	}
	return o.Rate
}

func (o *Options) withDefaults() (Options, error) {
	c := *o
	if c.Format == "" {
		c.Format = FormatAuto
	}
	if c.TimeScale == 0 {
		c.TimeScale = 1
	}
	if !(c.TimeScale > 0) || c.TimeScale > 1e6 {
		return c, fmt.Errorf("time scale %g: must be > 0", o.TimeScale)
	}
	if c.Rate < 0 || c.Rate != c.Rate {
		return c, fmt.Errorf("rate %g: must be >= 0", c.Rate)
	}
	if c.BlockSize < 0 || c.BlockSize > maxBlockSize {
		return c, fmt.Errorf("block size %d: must be in 1..%d", c.BlockSize, maxBlockSize)
	}
	if c.Model == "" {
		c.Model = DefaultModel
	}
	if err := validateClasses(c.Classes); err != nil {
		return c, err
	}
	if _, err := ParseFairnessID(c.FairnessID); err != nil {
		return c, err
	}
	api, err := ParseAPI(string(c.API))
	if err != nil {
		return c, err
	}
	c.API = api
	if c.ThinkTime == (LogNormal{}) {
		c.ThinkTime = DefaultThinkTime()
	}
	if err := c.ThinkTime.validate(); err != nil {
		return c, fmt.Errorf("think time: %w", err)
	}
	if c.SessionWindow == 0 {
		c.SessionWindow = defaultSessionWindow
	}
	if c.SessionWindow < 0 {
		return c, fmt.Errorf("session window %v: must be > 0", c.SessionWindow)
	}
	if c.MaxSessions == 0 {
		c.MaxSessions = defaultMaxSessions
	}
	if c.MaxSessions < 0 {
		return c, fmt.Errorf("max sessions %d: must be > 0", c.MaxSessions)
	}
	if c.SystemPromptTokens < 0 || c.SystemPromptTokens > maxSystemPromptTokens {
		return c, fmt.Errorf("system prompt tokens %d: must be in 0..%d", c.SystemPromptTokens, maxSystemPromptTokens)
	}
	if c.DefaultOutputTokens == 0 {
		c.DefaultOutputTokens = defaultOutputTokens
	}
	if c.DefaultOutputTokens < 0 {
		return c, fmt.Errorf("default output tokens %d: must be > 0", c.DefaultOutputTokens)
	}
	if c.MaxLineBytes == 0 {
		c.MaxLineBytes = maxLineBytes
	}
	if c.MaxLineBytes < 0 {
		return c, fmt.Errorf("max line bytes %d: must be > 0", c.MaxLineBytes)
	}
	if c.MaxPromptTokens == 0 {
		c.MaxPromptTokens = defaultMaxPrompt
	}
	if c.BytesPerToken == 0 {
		c.BytesPerToken = DefaultBytesPerToken
	}
	if c.Tokenizer == nil {
		t, err := sharedTokenizer()
		if err != nil {
			return c, err
		}
		c.Tokenizer = t
	}
	return c, nil
}
