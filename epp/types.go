package epp

import (
	"slices"

	"github.com/eppsim/eppsim/internal/memo"
)

// Metrics is what core-metrics-extractor stores for an endpoint at each
// scrape (spec §7.1). Scorers read the copy made at request time (§2.1 step 6).
type Metrics struct {
	WaitingQueueSize    int     // vllm:num_requests_waiting
	RunningRequestsSize int     // vllm:num_requests_running
	KVCacheUsagePercent float64 // vllm:kv_cache_usage_perc, 0..1
	CacheBlockSize      int     // vllm:cache_config_info{block_size}
	CacheNumBlocks      int     // vllm:cache_config_info{num_gpu_blocks}
	// CacheCPUCapacityTokens is the engine's CPU offload tier in tokens
	// (vllm:kv_offload_cpu_capacity_tokens, proposed by vLLM PR #51615 and
	// read only by the approx-prefix-cache-producer's llm-d-router PR
	// #2292 option; 0 = not reported).
	CacheCPUCapacityTokens int
	// LoRA state from vllm:lora_requests_info: adapter name -> count.
	ActiveModels    map[string]int
	WaitingModels   map[string]int
	MaxActiveModels int
	// UpdateTime is the simulated time (ns) of the scrape that produced these
	// values; 0 means never scraped.
	UpdateTime int64
}

// EndpointInfo is the static identity of one model-server pod.
type EndpointInfo struct {
	// Name is the pod's "namespace/name" id; the approximate indexer, the
	// in-flight counters and no-hit-lru key endpoints by it.
	Name string
	// Address is "ip:port"; the precise (KV-event) index keys pods by it.
	Address string
	Labels  map[string]string
}

// Endpoint is the per-request snapshot of one candidate (spec §2.1 step 6):
// identity, the last scraped metrics, and the attributes data producers
// attach for this request.
type Endpoint struct {
	*EndpointInfo
	Metrics Metrics
	attrs   attributes
}

type attribute struct {
	key   DataKey
	value any
}

// attributes is a small key-value store; a linear scan beats a map for the
// handful of keys a request carries.
type attributes []attribute

func (a attributes) get(key DataKey) (any, bool) {
	for i := range a {
		if a[i].key == key {
			return a[i].value, true
		}
	}
	return nil, false
}

func (a *attributes) put(key DataKey, v any) {
	for i := range *a {
		if (*a)[i].key == key {
			(*a)[i].value = v
			return
		}
	}
	*a = append(*a, attribute{key, v})
}

// Attr reads an endpoint attribute of type T stored by value or by pointer;
// a nil pointer or a value of another type counts as missing.
func Attr[T any](e *Endpoint, key DataKey) (T, bool) {
	var zero T
	v, ok := e.Get(key)
	if !ok {
		return zero, false
	}
	switch x := v.(type) {
	case T:
		return x, true
	case *T:
		if x != nil {
			return *x, true
		}
	}
	return zero, false
}

// Get returns the attribute stored under key for this request.
func (e *Endpoint) Get(key DataKey) (any, bool) { return e.attrs.get(key) }

// Put stores an attribute for this request, replacing any earlier value.
func (e *Endpoint) Put(key DataKey, v any) { e.attrs.put(key, v) }

// DataKey names a piece of produced data: "<dataType>/<producerName>"
// (spec §1.3 step 6).
type DataKey struct {
	Type     string
	Producer string
}

func (k DataKey) String() string { return k.Type + "/" + k.Producer }

// KeyOf returns the key of data type typ from producer, or from
// defaultProducer when producer is empty (upstream
// DataKey.WithNonEmptyProducerName).
func KeyOf(typ, producer, defaultProducer string) DataKey {
	if producer == "" {
		producer = defaultProducer
	}
	return DataKey{Type: typ, Producer: producer}
}

// Data types produced and consumed by the built-in plugins, with the default
// producer type that CreateMissingDataProducers instantiates for each.
const (
	PrefixCacheMatchInfoType  = "PrefixCacheMatchInfoDataKey"
	TokenizedPromptType       = "TokenizedPrompt"
	InFlightLoadType          = "InFlightLoadDataKey"
	UncachedRequestTokensType = "UncachedRequestTokens"
	SessionIDType             = "SessionID"
	LatencyPredictionType     = "LatencyPredictionInfo"
	EncoderCacheMatchInfoType = "EncoderCacheMatchInfo"

	ApproxPrefixProducer  = "approx-prefix-cache-producer"
	TokenProducer         = "token-producer"
	InFlightLoadProducer  = "inflight-load-producer"
	SessionIDProducer     = "session-id-producer"
	LatencyProducer       = "predicted-latency-producer"
	MMEmbeddingsProducer  = "mm-embeddings-cache-producer"
	PrecisePrefixProducer = "precise-prefix-cache-producer"
)

// PrefixPrediction is implemented by prefix producers of a type other than
// the two above whose PrefixCacheMatchInfo the simulator should still
// record as a prediction: PredictionApprox (history-based) or
// PredictionPrecise (KV-event based). eppsim's models of older releases
// implement it.
type PrefixPrediction interface {
	PrefixPrediction() string
}

// PrefixPrediction kinds.
const (
	PredictionApprox  = "approx"
	PredictionPrecise = "precise"
)

// Dependency is one data key a plugin consumes. Only Required dependencies
// order producers and trigger CreateMissingDataProducers (spec §1.3 steps 6–7).
type Dependency struct {
	Key      DataKey
	Required bool
}

// PrefixCacheMatchInfo is the per-endpoint prefix match a prefix producer
// attaches (spec §5.8).
type PrefixCacheMatchInfo struct {
	MatchBlocks      int
	TotalBlocks      int
	BlockSizeTokens  int
	CachedBlockCount int            // unweighted contiguous count; equals MatchBlocks for the approximate producer
	CachedByTier     map[string]int // precise producer only
}

// EncoderCacheMatchInfo is what mm-embeddings-cache-producer attaches per
// endpoint (flow-control.md §14.3): the request's distinct multimodal items
// (Total) and how many of them the endpoint's encoder cache holds
// (Matched); mm-embeddings-cache-scorer reads Matched ÷ Total.
type EncoderCacheMatchInfo struct {
	Matched, Total int
}

// InFlightLoad is the live in-flight counter of an endpoint (spec §8).
type InFlightLoad struct {
	Requests int
	Tokens   int
}

// UncachedRequestTokens is the inflight-load producer's per-endpoint estimate
// of the tokens this request adds to the endpoint (spec §8), read by
// token-load-scorer.
type UncachedRequestTokens struct {
	Tokens int
}

// Where produced data lives, by data type:
//   - PrefixCacheMatchInfoType: per endpoint, value PrefixCacheMatchInfo;
//   - InFlightLoadType: per endpoint, value InFlightLoad;
//   - UncachedRequestTokensType: per endpoint, value UncachedRequestTokens;
//   - TokenizedPromptType: the request's Tokenized field;
//   - SessionIDType: per request (Request.Put), value string.

// Request is the EPP's view of one inference request.
type Request struct {
	ID string
	// TargetModel is the model after rewrite; the prefix hashers seed with it.
	TargetModel string
	// Headers are the request headers, keys lower-cased.
	Headers map[string]string
	// Path is the API path, e.g. "/v1/chat/completions" or "/v1/completions".
	Path string
	// Body is the HTTP body exactly as the client sent it.
	Body []byte
	// Priority from the InferenceObjective; < 0 is sheddable (spec §2.1).
	Priority int
	// Objective is the request's InferenceObjective name and FairnessID
	// its flow-control fairness ID (flow-control.md §2; Router.Identify).
	Objective  string
	FairnessID string
	// Usage is the response's usage block (prompt and completion tokens)
	// as the end-of-stream hooks read it; nil when the response carries
	// none.
	Usage *Usage
	// ServerPromptTokens are the prompt token IDs the model server computes
	// (chat template applied, then its tokenizer). A token-producer configured
	// with a vLLM /render backend returns exactly these: the simulator has
	// them already, so no network call is made.
	ServerPromptTokens []uint32
	// Tokenized is set by a token producer (nil when the prompt has no tokens,
	// spec §5.1). It may be shared with other requests' routers (Memo):
	// never change it, replace it.
	Tokenized *TokenizedRequest
	// Generate is the pre-tokenized prompt a parser decoded from a native
	// generate body into typed fields (sglanghttp-parser: upstream's
	// InferenceRequestBody.Generate), which the producers then read instead
	// of the body. nil for every other request: their producers decode the
	// body by its path. It may be shared with other requests' routers (Memo):
	// never change it.
	Generate *GenerateRequest
	// Memo, when set, holds what routers derive from this request's body
	// alone (the parser's verdict, the estimate tokens, the approximate
	// prefix hashes), shared by the routers of every simulation that
	// replays the request so that each is computed once (Router.Prepare
	// computes them ahead). nil: computed at routing, as upstream does.
	Memo *memo.Memo

	attrs  attributes
	parsed bool // Parse accepted the body
	// pending is a scheduling cycle suspended by a waiting producer.
	pending *pending
}

// Usage is an OpenAI response's usage block.
type Usage struct {
	PromptTokens, CompletionTokens int
}

// Get returns request-scoped data stored under key.
func (r *Request) Get(key DataKey) (any, bool) { return r.attrs.get(key) }

// Put stores request-scoped data (e.g. a producer's state between Produce
// and PreRequest).
func (r *Request) Put(key DataKey, v any) { r.attrs.put(key, v) }

// GenerateRequest is a pre-tokenized generate request as a parser decoded
// it (upstream requesthandling.GenerateRequest and the body's
// MaxOutputTokens).
type GenerateRequest struct {
	TokenIDs  []uint32
	CacheSalt string
	// MaxOutputTokens is the client's output cap; nil when the body sets
	// none (or a negative one).
	MaxOutputTokens *int64
	Stream          bool
}

// TokenizedRequest is the token producer's output (spec §5.1–5.2).
type TokenizedRequest struct {
	// Prompts holds one token list per prompt; completions with several
	// prompt strings have several.
	Prompts   [][]uint32
	CacheSalt string
	// MultiModal lists the placeholders of multimodal items (spec §5.2.1).
	MultiModal []MultiModalFeature
	// FromServer marks tokens the model server computed (the vLLM render
	// or UDS backends), as opposed to the estimate backend's pseudo-tokens.
	FromServer bool
}

// MultiModalFeature records one multimodal placeholder run in the tokens.
type MultiModalFeature struct {
	Modality string
	Hash     string // hex of xxh64(url or data)
	Offset   int    // token offset
	Count    int    // placeholder tokens
}

// TokenCount is the total number of tokens over all prompts.
func (t *TokenizedRequest) TokenCount() int {
	if t == nil {
		return 0
	}
	n := 0
	for _, p := range t.Prompts {
		n += len(p)
	}
	return n
}

// ScoredEndpoint is an endpoint with its weighted total from one profile run.
type ScoredEndpoint struct {
	Endpoint *Endpoint
	Score    float64
}

// ProfileResult is the outcome of one scheduling profile run.
type ProfileResult struct {
	// Targets are the picked endpoints, best first.
	Targets []*Endpoint
	// Trace is filled when the Router records decisions.
	Trace *ProfileTrace
}

// Result is the scheduling result across profiles (spec §2.2).
type Result struct {
	PrimaryProfile string
	Profiles       map[string]*ProfileResult
	// PD is the prefill/decode decision of a disaggregation profile
	// handler (pd-offload.md A.2–A.3); nil with any other handler.
	PD *PDDecision
}

// PDDecision records how a disaggregation profile handler decided whether
// a request's prefill runs on a separate pod (pd-offload.md A.2, A.3), and
// what its prefill decider read. Upstream only counts the outcome
// (llm_d_epp_pd_decision_total); eppsim keeps the inputs so that a run can
// say why requests were or were not disaggregated.
type PDDecision struct {
	// Decider is the prefill decider's name ("" when none is configured).
	Decider string
	// Disaggregated is true when the prefill profile ran and picked an
	// endpoint: the request carries x-prefiller-host-port.
	Disaggregated bool
	// Reason is one of the PDReason* values.
	Reason string
	// PromptTokens is the decider's T (TokenizedRequest.TokenCount(), 0
	// without a tokenized prompt); CachedTokens is cachedBlockCount ×
	// blockSizeTokens of the approximate producer's match on the decode
	// pick. Both are 0 when the decider stopped before reading them.
	PromptTokens int
	CachedTokens int
}

// PrefillHeader is the request header a disaggregation profile handler
// sets to the prefill pick's "ip:port" (pd-offload.md A.2): the decode
// pod's routing sidecar runs the P/D request path when it is present.
const PrefillHeader = "x-prefiller-host-port"

// Reasons of a PDDecision.
const (
	// The request is disaggregated.
	PDReasonDisaggregated = "disaggregated"
	// Decode-only: the prefill decider approved but the prefill profile
	// found no endpoint (its filters left none, A.9).
	PDReasonNoPrefillEndpoint = "no-prefill-endpoint"
	// Decode-only: the prompt's uncached part on the decode pick is below
	// nonCachedTokens (A.3 condition 6).
	PDReasonCached = "cached-prefix"
	// Decode-only: the prompt is shorter than nonCachedTokens (A.3
	// condition 4) or than promptTokens (condition 3).
	PDReasonShortPrompt = "short-prompt"
	// Decode-only: the decode pick has no approximate prefix match info
	// (A.3 condition 5).
	PDReasonNoMatchInfo = "no-match-info"
	// Decode-only: the decider is disabled (nonCachedTokens 0, condition
	// 1) or not simulated.
	PDReasonDisabled = "decider-disabled"
	// Decode-only: the configuration has no prefill profile.
	PDReasonNoPrefillProfile = "no-prefill-profile"
)

// Target returns the routed endpoint: the primary profile's first target.
func (r *Result) Target() *Endpoint {
	if r == nil {
		return nil
	}
	pr := r.Profiles[r.PrimaryProfile]
	if pr == nil || len(pr.Targets) == 0 {
		return nil
	}
	return pr.Targets[0]
}

// ProfileTrace records one profile run for explanation and reporting.
type ProfileTrace struct {
	Profile string
	// Filters lists, per filter in order, the names of the survivors.
	Filters []FilterTrace
	// Candidates are the endpoints that reached scoring, in scoring order.
	Candidates []string
	// Scorers lists, per scorer in order, the raw score of each candidate
	// (aligned with Candidates) and its weight.
	Scorers []ScorerTrace
	// Totals are the weighted sums, aligned with Candidates.
	Totals []float64
	// Picked are the picker's choices.
	Picked []string
	// Tied is true when the first pick shared the top total with another
	// candidate.
	Tied bool
}

// FilterTrace is one filter's step in a ProfileTrace.
type FilterTrace struct {
	Filter    string
	Survivors []string
}

// ScorerTrace is one scorer's step in a ProfileTrace.
type ScorerTrace struct {
	Scorer string
	Weight float64
	Raw    []float64
}

// Names returns the endpoint names of eps, in order.
func Names(eps []*Endpoint) []string {
	out := make([]string, len(eps))
	for i, e := range eps {
		out[i] = e.Name
	}
	return out
}

// Contains reports whether eps holds the endpoint named name.
func Contains(eps []*Endpoint, name string) bool {
	return slices.ContainsFunc(eps, func(e *Endpoint) bool { return e.Name == name })
}
