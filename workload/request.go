package workload

import (
	"io"

	"github.com/eppsim/eppsim/internal/memo"
)

// Endpoints that requests target.
const (
	EndpointChat        = "/v1/chat/completions"
	EndpointCompletions = "/v1/completions"
)

// DefaultModel is the model name used in bodies that eppsim builds itself
// (hash-id, Azure, ShareGPT and synthesized traffic) unless Options.Model or
// the spec says otherwise.
const DefaultModel = "meta-llama/Llama-3.1-8B-Instruct"

// Request is one LLM request as eppsim replays it.
//
// Ordering contract of every Source in this package:
//   - requests come out in non-decreasing Arrival order;
//   - a request with Prev >= 0 comes after the request with ID Prev;
//   - if AfterPrevious is set, Arrival <= Arrival(Prev) + ThinkTime, so the
//     closed-loop release time (completion of Prev + ThinkTime) is never
//     earlier than Arrival. A simulator that pulls requests lazily by Arrival
//     therefore always has a closed-loop turn in hand before it is due.
//
// PromptTokens of successive turns of one session may share a backing array;
// treat all slices as read-only.
type Request struct {
	ID      int64  // 0-based sequence number in trace order
	Session string // session id ("" if none)
	Turn    int    // 0-based turn within the session
	// Prev is the ID of the request this one continues (the previous turn of
	// its session), or -1. It is set in both replay modes.
	Prev int64
	// Arrival is in ns of simulated time: the open-loop arrival, or for a
	// closed-loop turn the trace's (nominal) value, a lower bound of its release.
	Arrival int64
	// AfterPrevious: released ThinkTime ns after request Prev completes (the
	// simulator does that). Only set in closed-loop replay.
	AfterPrevious bool
	ThinkTime     int64
	Model         string
	// Body is the HTTP body exactly as the client sends it (OpenAI
	// chat-completions or completions JSON, or a native generate API's:
	// Options.API). Nil if Options.NoTokens.
	Body []byte
	// Endpoint is EndpointChat, EndpointCompletions, EndpointVLLMGenerate
	// or EndpointSGLangGenerate.
	Endpoint string
	// PromptTokens are the token IDs the model server computes (chat template
	// applied, then BPE). Nil if Options.NoTokens.
	PromptTokens []uint32
	// PromptLen is the prompt length in tokens; it equals len(PromptTokens)
	// whenever PromptTokens is materialized.
	PromptLen    int
	OutputTokens int // output length in tokens
	// OutputTokenIDs are the output token ids when the trace has the answer
	// text (chat answers end with <|eot_id|>); nil otherwise (the simulator
	// synthesizes them, see SyntheticOutput).
	OutputTokenIDs []uint32
	OutputText     string // answer text when known
	CacheSalt      string
	// HashIDs are the trace's block ids for hash-id traces (Mooncake,
	// Alibaba), nil otherwise; each covers HashBlockSize tokens except the
	// last, which covers the rest of PromptLen.
	HashIDs       []int64
	HashBlockSize int
	// Headers are request headers the client sends besides the body, keys
	// lower-case: the InferenceObjective (x-llm-d-inference-objective), the
	// fairness ID (x-llm-d-inference-fairness-id), SLO headers
	// (flow-control.md §2, §9, §13). Nil when none.
	Headers map[string]string
	// Stage is the 0-based index of the load stage the request belongs to,
	// for workloads that run in stages (inference-perf configs: the index in
	// load.stages; OpenAI JSONL: x_stage), so that latency can be reported
	// per stage. It is 0 for traces without stages.
	Stage int
	// StageStart is when the request's load stage begins its schedule (ns,
	// on Arrival's clock): Arrival - StageStart is the request's place in
	// its stage's schedule. Only inference-perf configs set it (0
	// otherwise): inference-perf starts a stage once the previous one has
	// completed, which a client model (ClientPlan) knows only as it
	// simulates, so it shifts each stage's arrivals to where that stage
	// really begins.
	StageStart int64
	Line       int // 1-based source line (0 for synthesized requests)
	// Memo, when set, holds what simulations derive from this request
	// alone (the engines' block-hash chain, the EPP's body-derived values),
	// computed once for all the simulations that replay it (scenario's
	// Feed sets it). The only part of a Request that changes after it is
	// read, and safe for concurrent use.
	Memo *memo.Memo
}

// Source streams requests in arrival order with constant memory in the trace
// length. Next returns io.EOF at the end.
type Source interface {
	Next() (*Request, error)
}

// Drain reads src to the end and returns all requests. It is meant for tests
// and small traces; it materializes the whole trace.
func Drain(src Source) ([]*Request, error) {
	var out []*Request
	for {
		r, err := src.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
}
