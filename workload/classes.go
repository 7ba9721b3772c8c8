package workload

import (
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"strings"
)

// Request headers of the EPP's request identity (flow-control.md §2).
const (
	ObjectiveHeader      = "x-llm-d-inference-objective"
	ObjectiveHeaderAlias = "x-gateway-inference-objective"
	FairnessHeader       = "x-llm-d-inference-fairness-id"
	FairnessHeaderAlias  = "x-gateway-inference-fairness-id"
)

// PriorityClass is one class of a workload's priority mix: an
// InferenceObjective (Name, with its Priority) given to a Share of the
// sessions (shares are weights, normalised over the classes).
type PriorityClass struct {
	Name     string
	Priority int
	Share    float64
}

// Fairness ID sources (Options.FairnessID).
const (
	FairnessNone    = ""        // no header: the EPP's default-flow
	FairnessSession = "session" // the session id
	FairnessClass   = "class"   // the request's objective (class name)
)

// ParsePriorityClass reads NAME=PRIORITY:SHARE.
func ParsePriorityClass(s string) (PriorityClass, error) {
	name, rest, ok := strings.Cut(s, "=")
	prio, share, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 || strings.TrimSpace(name) == "" {
		return PriorityClass{}, fmt.Errorf("priority class %q: want NAME=PRIORITY:SHARE (e.g. critical=10:0.2)", s)
	}
	p, err := strconv.Atoi(strings.TrimSpace(prio))
	if err != nil {
		return PriorityClass{}, fmt.Errorf("priority class %q: priority %q is not an integer", s, prio)
	}
	w, err := strconv.ParseFloat(strings.TrimSpace(share), 64)
	if err != nil || !(w > 0) || math.IsInf(w, 0) {
		return PriorityClass{}, fmt.Errorf("priority class %q: share %q must be a number > 0", s, share)
	}
	return PriorityClass{Name: strings.TrimSpace(name), Priority: p, Share: w}, nil
}

// ParseFairnessID checks a fairness ID source.
func ParseFairnessID(s string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "none", "default":
		return FairnessNone, nil
	case FairnessSession:
		return FairnessSession, nil
	case FairnessClass, "objective":
		return FairnessClass, nil
	}
	return "", fmt.Errorf("fairness ID source %q: want none, session or class", s)
}

func validateClasses(cs []PriorityClass) error {
	seen := map[string]bool{}
	for _, c := range cs {
		if c.Name == "" {
			return fmt.Errorf("priority class with no name")
		}
		if seen[c.Name] {
			return fmt.Errorf("priority class %q given twice", c.Name)
		}
		seen[c.Name] = true
		if !(c.Share > 0) || math.IsInf(c.Share, 0) {
			return fmt.Errorf("priority class %q: share %v must be > 0", c.Name, c.Share)
		}
	}
	return nil
}

// classAssigner gives requests their class and fairness ID headers: a
// request that already carries an objective header (from its trace)
// keeps it; otherwise its session (or, without one, the request itself)
// draws a class from the shares with a hash of the seed and the session
// id, so that every turn of a session has the same class and the draw does
// not depend on the order of reading.
type classAssigner struct {
	seed     uint64
	classes  []PriorityClass
	cum      []float64
	fairness string
}

func newClassAssigner(o Options) *classAssigner {
	if len(o.Classes) == 0 && o.FairnessID == FairnessNone {
		return nil
	}
	a := &classAssigner{seed: uint64(o.Seed), classes: o.Classes, fairness: o.FairnessID}
	total := 0.0
	for _, c := range o.Classes {
		total += c.Share
	}
	acc := 0.0
	for _, c := range o.Classes {
		acc += c.Share / total
		a.cum = append(a.cum, acc)
	}
	return a
}

// draw returns a uniform [0,1) value of key.
func (a *classAssigner) draw(key string) float64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	z := h.Sum64() ^ a.seed*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>11) / (1 << 53)
}

func (a *classAssigner) apply(r *Request) {
	_, hasObj := r.Headers[ObjectiveHeader]
	if !hasObj {
		_, hasObj = r.Headers[ObjectiveHeaderAlias]
	}
	objective := r.Headers[ObjectiveHeader]
	if !hasObj && len(a.classes) > 0 {
		key := "s:" + r.Session
		if r.Session == "" {
			key = "r:" + strconv.FormatInt(r.ID, 10)
		}
		u := a.draw(key)
		i := 0
		for i < len(a.cum)-1 && u >= a.cum[i] {
			i++
		}
		objective = a.classes[i].Name
		a.set(r, ObjectiveHeader, objective)
	}
	if _, ok := r.Headers[FairnessHeader]; ok {
		return
	}
	if _, ok := r.Headers[FairnessHeaderAlias]; ok {
		return
	}
	switch a.fairness {
	case FairnessSession:
		if r.Session != "" {
			a.set(r, FairnessHeader, r.Session)
		}
	case FairnessClass:
		if objective != "" {
			a.set(r, FairnessHeader, objective)
		}
	}
}

// set adds a header, copying the map first: sources may share one map
// between requests.
func (a *classAssigner) set(r *Request, k, v string) {
	h := make(map[string]string, len(r.Headers)+1)
	for hk, hv := range r.Headers {
		h[hk] = hv
	}
	h[k] = v
	r.Headers = h
}
