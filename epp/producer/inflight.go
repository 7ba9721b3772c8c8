package producer

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"

	"github.com/eppsim/eppsim/epp"
	"github.com/eppsim/eppsim/epp/prefixhash"
)

// DefaultOutputRatio is the inflight-load-producer's default estimated
// output/input token ratio.
const DefaultOutputRatio = 1.5

// InFlightLoadParams are the inflight-load-producer parameters (spec §8).
type InFlightLoadParams struct {
	AddEstimatedOutputTokens    bool     `json:"addEstimatedOutputTokens"`
	OutputRatio                 *float64 `json:"outputRatio,omitempty"`
	MaxEstimatedOutputTokens    *int64   `json:"maxEstimatedOutputTokens,omitempty"`
	PrefixMatchInfoProducerName string   `json:"prefixMatchInfoProducerName,omitempty"`
	// SyncCrossReplicaState only matters with several EPP replicas; the
	// simulator runs one, so it is accepted and has no effect.
	SyncCrossReplicaState *bool `json:"syncCrossReplicaState,omitempty"`
}

// InFlightLoad is the inflight-load-producer (spec §8): live request and
// token counters per endpoint (by Name), incremented at PreRequest and
// released on the response stream.
type InFlightLoad struct {
	epp.TypedName
	addOutput   bool
	outputRatio float64
	maxOutput   *int64
	prefixKey   epp.DataKey
	loadKey     epp.DataKey
	uncachedKey epp.DataKey
	stateKey    epp.DataKey
	counters    map[string]*inflightCounter
}

type inflightCounter struct {
	requests int64
	tokens   int64
}

// inflightEntry is one profile target's contribution (upstream
// addedTokensEntry); tokens and requests drop to 0 once released.
type inflightEntry struct {
	endpoint string
	profile  string
	counter  *inflightCounter
	tokens   int64
	requests int64
}

// NewInFlightLoad validates p and returns a producer with zero counters.
func NewInFlightLoad(name string, p InFlightLoadParams) (*InFlightLoad, error) {
	ratio := DefaultOutputRatio
	if p.OutputRatio != nil {
		if *p.OutputRatio < 0 {
			return nil, fmt.Errorf("outputRatio must be non-negative, got %v", *p.OutputRatio)
		}
		ratio = *p.OutputRatio
	}
	if p.MaxEstimatedOutputTokens != nil && *p.MaxEstimatedOutputTokens < 0 {
		return nil, fmt.Errorf("maxEstimatedOutputTokens must be non-negative, got %d", *p.MaxEstimatedOutputTokens)
	}
	prefix := p.PrefixMatchInfoProducerName
	if prefix == "" {
		prefix = epp.ApproxPrefixProducer
	}
	return &InFlightLoad{
		TypedName:   epp.TypedName{PluginType: InFlightLoadType, PluginName: name},
		addOutput:   p.AddEstimatedOutputTokens,
		outputRatio: ratio,
		maxOutput:   p.MaxEstimatedOutputTokens,
		prefixKey:   epp.DataKey{Type: epp.PrefixCacheMatchInfoType, Producer: prefix},
		loadKey:     epp.DataKey{Type: epp.InFlightLoadType, Producer: name},
		uncachedKey: epp.DataKey{Type: epp.UncachedRequestTokensType, Producer: name},
		stateKey:    epp.DataKey{Type: "InFlightLoadState", Producer: name},
		counters:    map[string]*inflightCounter{},
	}, nil
}

func inflightFactory(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
	var p InFlightLoadParams
	if err := epp.DecodeParams(InFlightLoadType, name, params, &p); err != nil {
		return nil, err
	}
	f, err := NewInFlightLoad(name, p)
	if err != nil {
		return nil, fmt.Errorf("plugin %q (type %s): %w", name, InFlightLoadType, err)
	}
	return f, nil
}

// Produces is InFlightLoad/<name> and UncachedRequestTokens/<name>.
func (f *InFlightLoad) Produces() []epp.DataKey {
	return []epp.DataKey{f.loadKey, f.uncachedKey}
}

// Consumes is TokenizedPrompt/token-producer (required) and the prefix
// producer's PrefixCacheMatchInfo (optional: no ordering edge, spec §1.3
// step 7, so whether the discount applies at Produce time depends on the
// producer order).
func (f *InFlightLoad) Consumes() []epp.Dependency {
	return []epp.Dependency{
		{Key: TokenizedPromptKey, Required: true},
		{Key: f.prefixKey, Required: false},
	}
}

// Load returns an endpoint's live counters.
func (f *InFlightLoad) Load(endpointName string) epp.InFlightLoad {
	c := f.counters[endpointName]
	if c == nil {
		return epp.InFlightLoad{}
	}
	return epp.InFlightLoad{Requests: int(c.requests), Tokens: int(c.tokens)}
}

// PutLive implements epp.LiveAttributes: each endpoint's live counters, as
// the datastore endpoints that the admission layer's detector reads carry
// them (flow-control.md §11).
func (f *InFlightLoad) PutLive(eps []*epp.Endpoint) {
	for _, e := range eps {
		e.Put(f.loadKey, f.Load(e.Name))
	}
}

// RemoveEndpoint forgets an endpoint's counters (endpoint deleted).
func (f *InFlightLoad) RemoveEndpoint(endpointName string) { delete(f.counters, endpointName) }

// inputTokens is the TokenizedRequest token count (0 without one).
func inputTokens(req *epp.Request) int64 {
	if req == nil {
		return 0
	}
	return int64(req.Tokenized.TokenCount())
}

// uncached is the prompt tokens the endpoint must compute (spec §8): with
// the prefix producer's match info, (total−match)·bs plus any tail beyond
// the indexed blocks; otherwise the whole input.
func (f *InFlightLoad) uncached(e *epp.Endpoint, input int64) int64 {
	if info, ok := epp.Attr[epp.PrefixCacheMatchInfo](e, f.prefixKey); ok && info.BlockSizeTokens > 0 {
		bs := int64(info.BlockSizeTokens)
		indexed := int64(info.TotalBlocks) * bs
		return max(0, indexed-int64(info.MatchBlocks)*bs) + max(0, input-indexed)
	}
	return max(0, input)
}

// estimatedOutput is min(round(input·ratio), client cap if > 0, operator cap).
// A cap a parser decoded (sglanghttp-parser's max_new_tokens) applies from
// 0, as upstream applies Body.MaxOutputTokens when it is set and ≥ 0
// (inflightload/token_estimator.go, EstimateOutput).
func (f *InFlightLoad) estimatedOutput(req *epp.Request, input int64) int64 {
	est := int64(math.Round(float64(input) * f.outputRatio))
	if c, ok := clientMaxTokens(req); ok && c < est {
		est = c
	}
	if f.maxOutput != nil && *f.maxOutput < est {
		est = *f.maxOutput
	}
	return est
}

// clientMaxTokens reads the client's output cap: for a request whose
// parser decoded a generate body (sglanghttp-parser), that body's cap
// (sampling_params.max_new_tokens), ok when set; for vLLM's
// /inference/v1/generate (vllmhttp-parser), sampling_params.max_tokens,
// ok when set (both from 0, as their parsers read them); otherwise the
// body's max_completion_tokens, else max_tokens, else max_output_tokens,
// ok when > 0.
func clientMaxTokens(req *epp.Request) (int64, bool) {
	if req == nil {
		return 0, false
	}
	if req.Generate != nil {
		if m := req.Generate.MaxOutputTokens; m != nil {
			return *m, true
		}
		return 0, false
	}
	if len(req.Body) == 0 {
		return 0, false
	}
	if prefixhash.IsVLLMGeneratePath(req.Path) {
		return prefixhash.GenerateMaxTokens(req.Body)
	}
	c := prefixhash.MaxOutputTokens(req.Body)
	return c, c > 0
}

// outputFor is the request's estimated output tokens (0 unless
// addEstimatedOutputTokens); it depends on the request only.
func (f *InFlightLoad) outputFor(req *epp.Request, input int64) int64 {
	if !f.addOutput {
		return 0
	}
	return f.estimatedOutput(req, input)
}

// Produce writes each candidate's live InFlightLoad and this request's
// UncachedRequestTokens (spec §8).
func (f *InFlightLoad) Produce(_ *epp.Cycle, req *epp.Request, eps []*epp.Endpoint) error {
	input := inputTokens(req)
	out := f.outputFor(req, input)
	for _, e := range eps {
		e.Put(f.loadKey, f.Load(e.Name))
		e.Put(f.uncachedKey, epp.UncachedRequestTokens{Tokens: int(f.uncached(e, input) + out)})
	}
	return nil
}

// PreRequest adds the request to the first target of every profile result:
// requests += 1, tokens += its estimate on that endpoint (the routed
// snapshot's prefix match info gives the discount).
func (f *InFlightLoad) PreRequest(_ *epp.Cycle, req *epp.Request, res *epp.Result) {
	if res == nil || len(res.Profiles) == 0 || req == nil {
		return
	}
	input := inputTokens(req)
	out := f.outputFor(req, input)
	var entries []*inflightEntry
	for _, name := range sortedProfiles(res) {
		pr := res.Profiles[name]
		if pr == nil || len(pr.Targets) == 0 || pr.Targets[0] == nil || pr.Targets[0].EndpointInfo == nil {
			continue
		}
		e := pr.Targets[0]
		c := f.counters[e.Name]
		if c == nil {
			c = &inflightCounter{}
			f.counters[e.Name] = c
		}
		t := f.uncached(e, input) + out
		c.requests++
		c.tokens += t
		entries = append(entries, &inflightEntry{endpoint: e.Name, profile: name, counter: c, tokens: t, requests: 1})
	}
	if len(entries) > 0 {
		req.Put(f.stateKey, entries)
	}
}

func (f *InFlightLoad) entries(req *epp.Request) []*inflightEntry {
	v, ok := req.Get(f.stateKey)
	if !ok {
		return nil
	}
	es, _ := v.([]*inflightEntry)
	return es
}

func decClamped(v *int64, d int64) {
	if *v <= 0 {
		return
	}
	*v = max(0, *v-d)
}

func (e *inflightEntry) releaseTokens() {
	if e.tokens != 0 {
		decClamped(&e.counter.tokens, e.tokens)
		e.tokens = 0
	}
}

func (e *inflightEntry) release() {
	e.releaseTokens()
	if e.requests != 0 {
		decClamped(&e.counter.requests, e.requests)
		e.requests = 0
	}
}

// ResponseFirstChunk releases at the first body chunk (spec §8): without
// estimated output tokens every profile's tokens are freed and the prefill
// profile's entry is released entirely; with them only the prefill entry is
// released.
func (f *InFlightLoad) ResponseFirstChunk(_ *epp.Cycle, req *epp.Request, _ *epp.Result) {
	for _, e := range f.entries(req) {
		switch {
		case e.profile == prefillProfile:
			e.release()
		case !f.addOutput:
			e.releaseTokens()
		}
	}
}

// ResponseComplete releases whatever is still held (end of stream).
func (f *InFlightLoad) ResponseComplete(_ *epp.Cycle, req *epp.Request, _ *epp.Result) {
	es := f.entries(req)
	for _, e := range es {
		e.release()
	}
	if es != nil {
		req.Put(f.stateKey, []*inflightEntry(nil))
	}
}

// sortedProfiles lists a result's profile names in sorted order.
func sortedProfiles(res *epp.Result) []string {
	names := make([]string, 0, len(res.Profiles))
	for n := range res.Profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
