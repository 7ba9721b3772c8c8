package workload

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/eppsim/eppsim/traces"
	"sigs.k8s.io/yaml"
)

// Spec is a synthesizer workload, read from YAML (strictly: unknown keys are
// errors). Token lengths are targets for the generated text; the real counts
// come from tokenizing it. docs/workloads.md describes every field.
type Spec struct {
	Name string `json:"name,omitempty"`
	// Base names a built-in preset whose values this spec starts from.
	Base     string       `json:"base,omitempty"`
	Model    string       `json:"model,omitempty"`
	Sessions int          `json:"sessions,omitempty"`
	Arrivals ArrivalSpec  `json:"arrivals"`
	Turns    TurnSpec     `json:"turns"`
	Think    DurationDist `json:"thinkTime"`
	Tenants  TenantSpec   `json:"tenants"`
	User     LengthDist   `json:"userMessage"`
	Answer   LengthDist   `json:"answer"`
	RAG      RAGSpec      `json:"rag"`
	// FollowUpRole is the role of the messages after the first user message:
	// "user" (default) or "tool" (agentic tool results).
	FollowUpRole string `json:"followUpRole,omitempty"`
	// MaxContextTokens ends a session when its next prompt would exceed it.
	MaxContextTokens int `json:"maxContextTokens,omitempty"`
	// BytesPerToken sets the density of the generated text (default 4).
	BytesPerToken float64 `json:"bytesPerToken,omitempty"`
}

// ArrivalSpec describes session starts.
type ArrivalSpec struct {
	Process string  `json:"process,omitempty"` // poisson (default) or gamma
	Rate    float64 `json:"rate,omitempty"`    // sessions per second
	CV      float64 `json:"cv,omitempty"`      // gamma: coefficient of variation of the gaps
}

// TurnSpec describes turns per session: 1 + geometric, mean Mean, capped at Max.
type TurnSpec struct {
	Mean float64 `json:"mean,omitempty"`
	Max  int     `json:"max,omitempty"`
}

// TenantSpec describes the applications whose system prompts sessions share.
type TenantSpec struct {
	Count        int        `json:"count,omitempty"`
	Zipf         float64    `json:"zipf,omitempty"`
	SystemPrompt LengthDist `json:"systemPrompt"`
	// CacheSalt gives each tenant its own cache_salt (isolated caches).
	CacheSalt bool `json:"cacheSalt,omitempty"`
}

// RAGSpec describes documents shared across sessions.
type RAGSpec struct {
	Probability float64    `json:"probability,omitempty"` // per user turn
	Documents   int        `json:"documents,omitempty"`
	Zipf        float64    `json:"zipf,omitempty"`
	Document    LengthDist `json:"document"`
}

// LengthDist is a lognormal token length.
type LengthDist struct {
	Median float64 `json:"median,omitempty"`
	Sigma  float64 `json:"sigma,omitempty"`
	Min    int     `json:"min,omitempty"`
	Max    int     `json:"max,omitempty"`
}

func (d LengthDist) dist() LogNormal {
	return LogNormal{Median: d.Median, Sigma: d.Sigma, Min: float64(d.Min), Max: float64(d.Max)}
}

// DurationDist is a lognormal duration.
type DurationDist struct {
	Median Duration `json:"median,omitempty"`
	Sigma  float64  `json:"sigma,omitempty"`
	Min    Duration `json:"min,omitempty"`
	Max    Duration `json:"max,omitempty"`
}

func (d DurationDist) dist() LogNormal {
	return LogNormal{Median: float64(d.Median), Sigma: d.Sigma, Min: float64(d.Min), Max: float64(d.Max)}
}

// Duration is a time.Duration written as "120s" / "2m" or a number of seconds.
type Duration time.Duration

// UnmarshalJSON accepts a Go duration string or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("bad duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("bad duration %s: want \"120s\" or seconds", b)
	}
	*d = Duration(f * float64(time.Second))
	return nil
}

// MarshalJSON writes the duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// PresetSpec returns the built-in preset (chat, agentic, rag).
func PresetSpec(name string) (*Spec, error) {
	data, err := traces.Preset(name)
	if err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	s, err := ParseSpec(data)
	if err != nil {
		return nil, fmt.Errorf("workload: preset %s: %w", name, err)
	}
	return s, nil
}

// ParseSpec reads a YAML spec strictly. If it names a base preset, the
// preset's values are the defaults it overrides.
func ParseSpec(data []byte) (*Spec, error) {
	var head struct {
		Base string `json:"base"`
	}
	if err := yaml.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	s := &Spec{}
	if head.Base != "" {
		base, err := traces.Preset(head.Base)
		if err != nil {
			return nil, fmt.Errorf("spec: base: %w", err)
		}
		if err := yaml.UnmarshalStrict(base, s); err != nil {
			return nil, fmt.Errorf("spec: base %s: %w", head.Base, err)
		}
		if s.Base != "" {
			return nil, fmt.Errorf("spec: base %s: presets cannot have a base", head.Base)
		}
	}
	if err := yaml.UnmarshalStrict(data, s); err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	return s, nil
}

// Validate checks ranges and fills defaults.
func (s *Spec) Validate() error {
	if s.Model == "" {
		s.Model = DefaultModel
	}
	if s.Sessions <= 0 {
		return errors.New("sessions: must be > 0")
	}
	switch s.Arrivals.Process {
	case "", "poisson":
		s.Arrivals.Process = "poisson"
	case "gamma":
		if !(s.Arrivals.CV > 0) || s.Arrivals.CV > 100 {
			return errors.New("arrivals.cv: must be in (0, 100] for a gamma process")
		}
	default:
		return fmt.Errorf("arrivals.process: %q is not poisson or gamma", s.Arrivals.Process)
	}
	if !(s.Arrivals.Rate > 0) || s.Arrivals.Rate > 1e6 {
		return errors.New("arrivals.rate: must be in (0, 1e6] sessions per second")
	}
	if s.Turns.Mean == 0 {
		s.Turns.Mean = 1
	}
	if !(s.Turns.Mean >= 1) || s.Turns.Mean > 1000 {
		return errors.New("turns.mean: must be in [1, 1000]")
	}
	if s.Turns.Max == 0 {
		s.Turns.Max = 100
	}
	if s.Turns.Max < 1 || s.Turns.Max > 10000 {
		return errors.New("turns.max: must be in [1, 10000]")
	}
	if s.Think.Median == 0 {
		d := DefaultThinkTime()
		s.Think = DurationDist{Median: Duration(d.Median), Sigma: d.Sigma}
	}
	if err := s.Think.dist().validate(); err != nil {
		return fmt.Errorf("thinkTime: %w", err)
	}
	if s.Tenants.Count == 0 {
		s.Tenants.Count = 1
	}
	if s.Tenants.Count < 0 || s.Tenants.Count > 10000 {
		return errors.New("tenants.count: must be in [1, 10000]")
	}
	if s.Tenants.Zipf < 0 || s.Tenants.Zipf > 10 {
		return errors.New("tenants.zipf: must be in [0, 10]")
	}
	lengths := []struct {
		name     string
		d        *LengthDist
		optional bool
	}{
		{"tenants.systemPrompt", &s.Tenants.SystemPrompt, true},
		{"userMessage", &s.User, false},
		{"answer", &s.Answer, false},
		{"rag.document", &s.RAG.Document, s.RAG.Probability == 0},
	}
	for _, l := range lengths {
		if l.optional && l.d.Median == 0 {
			continue
		}
		if err := l.d.dist().validate(); err != nil {
			return fmt.Errorf("%s: %w", l.name, err)
		}
		if l.d.Max == 0 {
			l.d.Max = 1 << 17
		}
		if l.d.Max > 1<<17 {
			return fmt.Errorf("%s.max: at most %d tokens", l.name, 1<<17)
		}
	}
	if s.RAG.Probability < 0 || s.RAG.Probability > 1 {
		return errors.New("rag.probability: must be in [0, 1]")
	}
	if s.RAG.Probability > 0 && (s.RAG.Documents <= 0 || s.RAG.Documents > 1e6) {
		return errors.New("rag.documents: must be in [1, 1e6] when rag.probability > 0")
	}
	if s.RAG.Zipf < 0 || s.RAG.Zipf > 10 {
		return errors.New("rag.zipf: must be in [0, 10]")
	}
	switch s.FollowUpRole {
	case "":
		s.FollowUpRole = "user"
	case "user", "tool":
	default:
		return fmt.Errorf("followUpRole: %q is not user or tool", s.FollowUpRole)
	}
	if s.MaxContextTokens == 0 {
		s.MaxContextTokens = 32768
	}
	if s.MaxContextTokens < 16 || s.MaxContextTokens > defaultMaxPrompt {
		return fmt.Errorf("maxContextTokens: must be in [16, %d]", defaultMaxPrompt)
	}
	if s.BytesPerToken == 0 {
		s.BytesPerToken = DefaultBytesPerToken
	}
	if s.BytesPerToken < minBytesPerToken || s.BytesPerToken > maxBytesPerToken {
		return fmt.Errorf("bytesPerToken: must be in [%g, %g]", minBytesPerToken, maxBytesPerToken)
	}
	return nil
}
