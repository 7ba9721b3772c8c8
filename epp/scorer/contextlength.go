package scorer

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/eppsim/eppsim/epp"
)

// DefaultContextLengthLabel is the endpoint label holding a "min-max" range.
const DefaultContextLengthLabel = "llm-d.ai/context-length-range"

// ContextLengthAwareParams are context-length-aware's parameters (spec §4.2).
type ContextLengthAwareParams struct {
	// Label is the endpoint label with the "min-max" token range (default
	// llm-d.ai/context-length-range); must not be empty.
	Label string `json:"label"`
	// EnableFiltering turns on the filter behaviour (default false).
	EnableFiltering bool `json:"enableFiltering"`
}

// ContextLengthAware is context-length-aware (spec §4.2,
// scorer/contextlengthaware): one plugin that is both a Scorer and a Filter.
//
// The context length L is the request's token count from the token producer
// (Request.Tokenized, all prompts; 0 when absent, spec §4 table). It consumes
// TokenizedPrompt/token-producer as a Required dependency, so the config
// layer orders the token producer first and auto-creates the estimate one
// when none is configured; otherwise L would always be 0.
//
// Score: no label → 0.5; unparsable label → 0; L in [a,b]: width 0 → 1.0,
// else 0.3 + 0.7·(0.7/(1+width/10000) + 0.3·(b−L)/width); out of range at
// distance d from the nearest bound: 0.3/(1+d/1000).
//
// Filter (only with enableFiltering; otherwise a pass-through): keep
// unlabeled endpoints and those with a ≤ L ≤ b; drop unparsable labels.
type ContextLengthAware struct {
	epp.TypedName
	label     string
	filtering bool
}

func contextLengthAwareFactory(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
	p := ContextLengthAwareParams{Label: DefaultContextLengthLabel}
	if err := epp.DecodeParams(ContextLengthAwareType, name, params, &p); err != nil {
		return nil, err
	}
	return NewContextLengthAware(name, p)
}

// NewContextLengthAware returns a context-length-aware plugin.
func NewContextLengthAware(name string, p ContextLengthAwareParams) (*ContextLengthAware, error) {
	if p.Label == "" {
		return nil, fmt.Errorf("plugin %q (type %s): 'label' must be specified", name, ContextLengthAwareType)
	}
	return &ContextLengthAware{
		TypedName: epp.TypedName{PluginType: ContextLengthAwareType, PluginName: name},
		label:     p.Label,
		filtering: p.EnableFiltering,
	}, nil
}

// FilteringEnabled reports whether enableFiltering is set.
func (p *ContextLengthAware) FilteringEnabled() bool { return p.filtering }

// Consumes implements epp.DataConsumer: TokenizedPrompt/token-producer,
// required.
func (p *ContextLengthAware) Consumes() []epp.Dependency {
	return []epp.Dependency{{Key: epp.DataKey{Type: epp.TokenizedPromptType, Producer: epp.TokenProducer}, Required: true}}
}

func contextLength(req *epp.Request) int {
	if req == nil {
		return 0
	}
	return req.Tokenized.TokenCount()
}

// Score implements epp.Scorer.
func (p *ContextLengthAware) Score(_ *epp.Cycle, req *epp.Request, eps []*epp.Endpoint, scores []float64) {
	l := contextLength(req)
	for i, e := range eps {
		v, ok := e.Labels[p.label]
		if !ok {
			scores[i] = 0.5
			continue
		}
		lo, hi, err := parseContextRange(v)
		if err != nil {
			scores[i] = 0
			continue
		}
		scores[i] = contextRangeScore(l, lo, hi)
	}
}

// Filter implements epp.Filter.
func (p *ContextLengthAware) Filter(_ *epp.Cycle, req *epp.Request, eps []*epp.Endpoint) []*epp.Endpoint {
	if !p.filtering {
		return eps
	}
	l := contextLength(req)
	out := make([]*epp.Endpoint, 0, len(eps))
	for _, e := range eps {
		v, ok := e.Labels[p.label]
		if !ok {
			out = append(out, e)
			continue
		}
		lo, hi, err := parseContextRange(v)
		if err != nil {
			continue
		}
		if l >= lo && l <= hi {
			out = append(out, e)
		}
	}
	return out
}

// parseContextRange parses "min-max" (integers, spaces around each bound
// allowed, min ≤ max).
func parseContextRange(s string) (lo, hi int, err error) {
	if s == "" {
		return 0, 0, errors.New("empty range string")
	}
	parts := strings.Split(s, "-")
	if len(parts) != 2 {
		return 0, 0, fmt.Errorf("invalid range format %q (expected 'min-max')", s)
	}
	lo, err = strconv.Atoi(strings.TrimSpace(parts[0]))
	if err != nil {
		return 0, 0, fmt.Errorf("invalid min value %q", parts[0])
	}
	hi, err = strconv.Atoi(strings.TrimSpace(parts[1]))
	if err != nil {
		return 0, 0, fmt.Errorf("invalid max value %q", parts[1])
	}
	if lo > hi {
		return 0, 0, fmt.Errorf("min (%d) cannot be greater than max (%d)", lo, hi)
	}
	return lo, hi, nil
}

// contextRangeScore is the §4.2 formula, evaluated in upstream's operation
// order so results match bit for bit.
func contextRangeScore(l, lo, hi int) float64 {
	const maxFallback = 0.3
	if l >= lo && l <= hi {
		width := hi - lo
		if width == 0 {
			return 1.0
		}
		widthScore := 1.0 / (1.0 + float64(width)/10000.0)
		position := float64(hi-l) / float64(width)
		raw := 0.7*widthScore + 0.3*position
		return maxFallback + raw*(1.0-maxFallback)
	}
	d := lo - l
	if l > hi {
		d = l - hi
	}
	return maxFallback / (1.0 + float64(d)/1000.0)
}
