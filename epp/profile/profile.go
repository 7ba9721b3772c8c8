// Package profile implements the EPP profile handlers (spec §2.2; llm-d-router
// ebab687, pkg/epp/framework/plugins/scheduling/profilehandler).
//
// single-profile-handler and the disaggregation handlers
// (disagg-profile-handler, its deprecated alias pd-profile-handler, and
// their deciders; ../shared/spec/pd-offload.md A.2–A.3, disagg.go and
// decider.go) are simulated. The deprecated data-parallel-profile-handler
// rewrites the target to a rank port, which eppsim's fleet does not model:
// it is accepted with its upstream parameters, implements epp.NotSimulated,
// and falls back to a documented single-profile behaviour (run only the
// decode profile, or the first profile when there is none).
package profile

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/eppsim/eppsim/epp"
)

// Registered type strings (spec §1.4).
const (
	SingleType       = "single-profile-handler"
	DisaggType       = "disagg-profile-handler"
	PDType           = "pd-profile-handler"            // deprecated
	DataParallelType = "data-parallel-profile-handler" // deprecated
)

// Register adds the profile handler types to r.
func Register(r *epp.Registry) {
	r.Register(SingleType, func(name string, _ json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
		return NewSingle(name), nil
	})
	r.Register(DataParallelType, dataParallelFactory)
	RegisterDisagg(r)
}

// RegisterDisagg adds the disaggregation handlers (disagg-profile-handler,
// pd-profile-handler) and the three deciders they reference.
func RegisterDisagg(r *epp.Registry) {
	r.Register(DisaggType, disaggFactory(DisaggType))
	r.Register(PDType, disaggFactory(PDType))
	registerDeciders(r)
}

// Single is single-profile-handler (spec §2.2): PickProfiles returns every
// profile not yet run (all of them on the first call, none afterwards);
// ProcessResults requires exactly one result, fails when that profile failed
// (nil result), and makes it the primary profile.
type Single struct{ epp.TypedName }

// NewSingle returns a single-profile-handler.
func NewSingle(name string) *Single {
	return &Single{epp.TypedName{PluginType: SingleType, PluginName: name}}
}

// PickProfiles implements epp.ProfileHandler. Upstream returns all profiles
// unless every profile already has a result; eppsim returns them in
// configuration order.
func (h *Single) PickProfiles(_ *epp.Cycle, _ *epp.Request, profiles []*epp.Profile, results map[string]*epp.ProfileResult) []string {
	if len(results) >= len(profiles) {
		return nil
	}
	out := make([]string, 0, len(profiles))
	for _, p := range profiles {
		if _, ran := results[p.Name]; !ran {
			out = append(out, p.Name)
		}
	}
	return out
}

// ProcessResults implements epp.ProfileHandler.
func (h *Single) ProcessResults(_ *epp.Cycle, _ *epp.Request, results map[string]*epp.ProfileResult) (*epp.Result, error) {
	if len(results) != 1 {
		return nil, errors.New("single profile handler is intended to be used with a single profile, failed to process multiple profiles")
	}
	return onlyResult(results)
}

// DefaultDecodeProfile is the decode profile name of the disaggregation
// handlers, and the profile the data-parallel fallback looks for first.
const DefaultDecodeProfile = "decode"

// Fallback is the handler eppsim uses in place of the deprecated
// data-parallel-profile-handler: it runs only the decode profile (or, when
// no profile has that name, the first configured profile), fails when that
// profile fails, and makes it primary. It implements epp.NotSimulated with
// a reason naming the fallback.
type Fallback struct {
	epp.TypedName
	decode string
	reason string
}

// DataParallelParams are data-parallel-profile-handler's parameters.
type DataParallelParams struct {
	PrimaryPort int `json:"primaryPort"`
}

func dataParallelFactory(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
	p := DataParallelParams{PrimaryPort: 8000}
	if err := epp.DecodeParams(DataParallelType, name, params, &p); err != nil {
		return nil, err
	}
	if p.PrimaryPort != 0 && (p.PrimaryPort < 1 || p.PrimaryPort > 65535) {
		return nil, fmt.Errorf("plugin %q (type %s): invalid primaryPort: must be between 1 and 65535, got %d", name, DataParallelType, p.PrimaryPort)
	}
	reason := fmt.Sprintf("%s rewrites the target to a data-parallel rank port (primaryPort %d), which the simulator does not model; "+
		"eppsim runs only the %q profile (or the first profile if there is none) as a single-profile handler and routes to the picked endpoint",
		DataParallelType, p.PrimaryPort, DefaultDecodeProfile)
	return &Fallback{
		TypedName: epp.TypedName{PluginType: DataParallelType, PluginName: name},
		decode:    DefaultDecodeProfile,
		reason:    reason,
	}, nil
}

// NotSimulatedReason implements epp.NotSimulated.
func (h *Fallback) NotSimulatedReason() string { return h.reason }

// DecodeProfile returns the profile name the fallback looks for first.
func (h *Fallback) DecodeProfile() string { return h.decode }

func (h *Fallback) target(profiles []*epp.Profile) string {
	for _, p := range profiles {
		if p.Name == h.decode {
			return p.Name
		}
	}
	if len(profiles) > 0 {
		return profiles[0].Name
	}
	return ""
}

// PickProfiles implements epp.ProfileHandler: the fallback profile once.
func (h *Fallback) PickProfiles(_ *epp.Cycle, _ *epp.Request, profiles []*epp.Profile, results map[string]*epp.ProfileResult) []string {
	name := h.target(profiles)
	if name == "" {
		return nil
	}
	if _, ran := results[name]; ran {
		return nil
	}
	return []string{name}
}

// ProcessResults implements epp.ProfileHandler.
func (h *Fallback) ProcessResults(_ *epp.Cycle, _ *epp.Request, results map[string]*epp.ProfileResult) (*epp.Result, error) {
	if len(results) != 1 {
		return nil, fmt.Errorf("%s fallback expects exactly one profile result, got %d", h.PluginType, len(results))
	}
	return onlyResult(results)
}

// onlyResult makes the single entry of results the primary profile, or
// fails when that profile failed.
func onlyResult(results map[string]*epp.ProfileResult) (*epp.Result, error) {
	var name string
	var r *epp.ProfileResult
	for name, r = range results {
	}
	if r == nil {
		return nil, fmt.Errorf("failed to run scheduler profile '%s'", name)
	}
	return &epp.Result{PrimaryProfile: name, Profiles: results}, nil
}

var (
	_ epp.ProfileHandler = (*Single)(nil)
	_ epp.ProfileHandler = (*Fallback)(nil)
	_ epp.NotSimulated   = (*Fallback)(nil)
)
