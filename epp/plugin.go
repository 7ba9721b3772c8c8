package epp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sort"

	"github.com/eppsim/eppsim/internal/memo"
)

// Plugin is implemented by every EPP plugin.
type Plugin interface {
	// Type is the registered type string, e.g. "queue-scorer".
	Type() string
	// Name is the configured instance name (defaults to Type, spec §1.3).
	Name() string
}

// TypedName implements Plugin; plugins embed it.
type TypedName struct {
	PluginType string
	PluginName string
}

// Type returns the plugin type.
func (t TypedName) Type() string { return t.PluginType }

// Name returns the plugin instance name.
func (t TypedName) Name() string { return t.PluginName }

// Cycle carries what every plugin call of one request may need besides the
// request: the current simulated time.
type Cycle struct {
	Now int64 // simulated ns
}

// Filter narrows the candidate set (spec §2.3, §9). It must return a subset
// of eps in their input order.
type Filter interface {
	Plugin
	Filter(c *Cycle, req *Request, eps []*Endpoint) []*Endpoint
}

// Scorer scores each candidate; scores[i] belongs to eps[i] and is zeroed
// before the call. The profile clamps each score to [0,1] and multiplies by
// the scorer's weight (spec §2.3).
type Scorer interface {
	Plugin
	Score(c *Cycle, req *Request, eps []*Endpoint, scores []float64)
}

// Picker chooses the targets from the scored candidates (spec §3). scored is
// in candidate order; the picker may reorder it in place.
type Picker interface {
	Plugin
	Pick(c *Cycle, req *Request, scored []ScoredEndpoint) []*Endpoint
}

// DataProducer attaches data to the request or its candidates before
// scheduling (spec §2.1 step 8).
type DataProducer interface {
	Plugin
	Produces() []DataKey
	Produce(c *Cycle, req *Request, eps []*Endpoint) error
}

// DataConsumer is implemented by plugins that read produced data.
type DataConsumer interface {
	Consumes() []Dependency
}

// RequestParser is a request parser (requestHandler.parsers): it decodes a
// request's body before anything else runs; an error fails the request with
// HTTP 400 (spec §2.1 step 0).
type RequestParser interface {
	Plugin
	// Claim tells whether the parser handles req.
	Claim(req *Request) Claim
	// ParseRequest decodes req's body. A non-nil error rejects the request.
	ParseRequest(req *Request) error
}

// Claim is how a parser relates to a request: upstream parsers claim path
// suffixes; of the configured parsers claiming a request's path, the one
// with the longest claimed suffix parses it (the first configured on a
// tie; see SuffixClaimer), and one that claims no paths is the fallback for
// unclaimed requests.
type Claim uint8

// Claims.
const (
	ClaimNone     Claim = iota // claims other paths
	ClaimPath                  // claims the request's path
	ClaimFallback              // claims no paths: parses what no other parser claims
)

// A SuffixClaimer is a RequestParser that tells how long the path suffix is
// by which it claims a request (meaningful when Claim is ClaimPath).
// Upstream resolves a path claimed by several parsers to the longest
// matching suffix whatever the configured order (pkg/epp/handlers/
// parsers.go, Resolve; a strictly longer suffix replaces the match, so the
// first configured wins a tie): with both vllmhttp-parser
// ("inference/v1/generate") and sglanghttp-parser ("generate") configured,
// /inference/v1/generate goes to vllmhttp-parser. A parser that is not a
// SuffixClaimer claims with length 0.
type SuffixClaimer interface {
	ClaimedSuffixLen(req *Request) int
}

// PreRequestHook runs after scheduling, before the request is sent to its
// target (spec §2.1 step 12).
type PreRequestHook interface {
	PreRequest(c *Cycle, req *Request, res *Result)
}

// ResponseHook observes the response stream: the first body chunk and the
// end of the stream (spec §2.1; §8 releases in-flight counters here).
type ResponseHook interface {
	ResponseFirstChunk(c *Cycle, req *Request, res *Result)
	ResponseComplete(c *Cycle, req *Request, res *Result)
}

// ProfileHandler decides which profiles run and combines their results
// (spec §2.2).
type ProfileHandler interface {
	Plugin
	// PickProfiles returns the names of the profiles to run next given the
	// results so far; an empty return ends the loop.
	PickProfiles(c *Cycle, req *Request, profiles []*Profile, results map[string]*ProfileResult) []string
	// ProcessResults combines the profile results into the final Result.
	ProcessResults(c *Cycle, req *Request, results map[string]*ProfileResult) (*Result, error)
}

// KVEventConsumer receives a replica's KV events after their delivery lag
// (spec §6.3). Address is the endpoint's "ip:port". The batch slice is the
// caller's and valid only during the call (the slices inside its events
// stay valid): a consumer copies what it keeps.
type KVEventConsumer interface {
	HandleKVEvents(c *Cycle, address string, batch []KVEvent)
}

// KVEventKind tells the KV event variants apart (vLLM kv_events.py).
type KVEventKind uint8

// KV event kinds.
const (
	BlockStored KVEventKind = iota + 1
	BlockRemoved
	AllBlocksCleared
)

// KVEvent is one vLLM KV-cache event as the EPP decodes it (vllm-engine.md
// A.7). Block hashes are the engine's opaque 64-bit values.
type KVEvent struct {
	Kind            KVEventKind
	BlockHashes     []uint64
	ParentBlockHash uint64
	HasParent       bool
	TokenIDs        []uint32
	BlockSize       int
	LoraName        string
	Medium          string // "" means GPU
	// ExtraKeys holds each stored block's extra keys, aligned with
	// BlockHashes (nil when no block has any): multimodal identifiers and,
	// on a request's first block, its cache salt (vllm-engine.md A.1).
	ExtraKeys [][]string
	// Origin is the simulator's, not part of vLLM's event (zero when
	// unknown): where TokenIDs come from.
	Origin TokenOrigin
}

// TokenOrigin says that a BlockStored's TokenIDs are
// Prompt[Offset:Offset+len(TokenIDs)], the same array, where Prompt is the
// ServerPromptTokens of the routed request whose Memo is Memo and whose
// cache salt is CacheSalt. A consumer may then reuse what it memoized for
// that prompt (the precise producer's request keys) instead of hashing
// the same tokens again; the values are the same by construction.
type TokenOrigin struct {
	Memo      *memo.Memo
	Prompt    []uint32
	Offset    int
	CacheSalt string
}

// NotSimulated is implemented by plugins eppsim accepts in a configuration
// but cannot simulate (they need an outside service); the run reports them.
type NotSimulated interface {
	NotSimulatedReason() string
}

// Handle gives plugin factories access to run-wide facilities.
type Handle struct {
	seed uint64
	// Plugins are the instantiated plugins so far, by name; factories of
	// plugins that reference others (e.g. disagg deciders) look them up here.
	Plugins map[string]Plugin
}

// NewHandle returns a Handle whose random streams derive from seed.
func NewHandle(seed uint64) *Handle {
	return &Handle{seed: seed, Plugins: map[string]Plugin{}}
}

// Rand returns a random stream for the named plugin. Streams are independent:
// one plugin drawing more numbers never changes another's sequence, and the
// same seed and name always give the same sequence. A nil Handle (plugins
// built directly in tests) behaves as seed 0.
func (h *Handle) Rand(pluginName string) *rand.Rand {
	var seed uint64
	if h != nil {
		seed = h.seed
	}
	f := fnv.New64a()
	f.Write([]byte(pluginName))
	return rand.New(rand.NewPCG(seed, f.Sum64()))
}

// Factory builds a plugin from its configured name and raw JSON parameters.
// Parameters must be decoded strictly (unknown fields are errors, spec §1.1);
// params is nil when the config gives none.
type Factory func(name string, params json.RawMessage, h *Handle) (Plugin, error)

// Registry maps plugin type strings to factories (spec §1.4).
type Registry struct {
	factories map[string]Factory
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{factories: map[string]Factory{}} }

// Register adds a factory for typ; registering a type twice is a programming
// error and panics at start-up.
func (r *Registry) Register(typ string, f Factory) {
	if _, dup := r.factories[typ]; dup {
		panic(fmt.Sprintf("epp: plugin type %q registered twice", typ))
	}
	r.factories[typ] = f
}

// Lookup returns the factory for typ.
func (r *Registry) Lookup(typ string) (Factory, bool) {
	f, ok := r.factories[typ]
	return f, ok
}

// Types returns the registered type strings, sorted.
func (r *Registry) Types() []string {
	out := make([]string, 0, len(r.factories))
	for t := range r.factories {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// DecodeParams strictly decodes a plugin's JSON parameters into dst; nil or
// empty params leave dst unchanged. Errors name the plugin.
func DecodeParams(typ, name string, params json.RawMessage, dst any) error {
	if len(params) == 0 || string(params) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return fmt.Errorf("plugin %q (type %s): parameters: %w", name, typ, err)
	}
	return nil
}
