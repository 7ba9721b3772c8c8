// Package profile implements the EPP profile handlers (spec §2.2; llm-d-router
// ebab687, pkg/epp/framework/plugins/scheduling/profilehandler).
//
// single-profile-handler, the disaggregation handlers
// (disagg-profile-handler, its deprecated alias pd-profile-handler, and
// their deciders; ../shared/spec/pd-offload.md A.2–A.3, disagg.go and
// decider.go) and the deprecated data-parallel-profile-handler
// (../shared/spec/flow-control.md §14.2, over the rank endpoints of a
// --data-parallel-size fleet) are simulated.
package profile

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"

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
	RegisterDataParallel(r)
	RegisterDisagg(r)
}

// RegisterDataParallel adds data-parallel-profile-handler.
func RegisterDataParallel(r *epp.Registry) { r.Register(DataParallelType, dataParallelFactory) }

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
// handlers.
const DefaultDecodeProfile = "decode"

// DataParallelParams are data-parallel-profile-handler's parameters.
type DataParallelParams struct {
	PrimaryPort *int `json:"primaryPort"`
}

// DataParallel is the deprecated data-parallel-profile-handler
// (flow-control.md §14.2): exactly one profile is required (with any other
// number PickProfiles returns none and scheduling fails); after scheduling
// the request gets header x-data-parallel-host-port = the chosen rank
// endpoint's ip:port, and every target is replaced by a clone with port
// primaryPort, the same ID (<pod>-rank-<i>), the same metrics and no
// attributes. The simulator serves the request on the chosen rank (by
// ID); PreRequest hooks that read target attributes find none.
type DataParallel struct {
	epp.TypedName
	port string
}

func dataParallelFactory(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
	var p DataParallelParams
	if err := epp.DecodeParams(DataParallelType, name, params, &p); err != nil {
		return nil, err
	}
	port := 8000
	if p.PrimaryPort != nil {
		// An explicit 0 is accepted (port "0"), as upstream does.
		if port = *p.PrimaryPort; port != 0 && (port < 1 || port > 65535) {
			return nil, fmt.Errorf("plugin %q (type %s): invalid primaryPort: must be between 1 and 65535, got %d", name, DataParallelType, port)
		}
	}
	return &DataParallel{TypedName: epp.TypedName{PluginType: DataParallelType, PluginName: name}, port: strconv.Itoa(port)}, nil
}

// PickProfiles implements epp.ProfileHandler: the one profile, once.
func (h *DataParallel) PickProfiles(_ *epp.Cycle, _ *epp.Request, profiles []*epp.Profile, results map[string]*epp.ProfileResult) []string {
	if len(profiles) != 1 {
		return nil
	}
	if _, ran := results[profiles[0].Name]; ran {
		return nil
	}
	return []string{profiles[0].Name}
}

// ProcessResults implements epp.ProfileHandler.
func (h *DataParallel) ProcessResults(_ *epp.Cycle, req *epp.Request, results map[string]*epp.ProfileResult) (*epp.Result, error) {
	if len(results) != 1 {
		return nil, fmt.Errorf("%s: expected one profile result, got %d", DataParallelType, len(results))
	}
	res, err := onlyResult(results)
	if err != nil {
		return nil, err
	}
	pr := res.Profiles[res.PrimaryProfile]
	if req.Headers == nil {
		req.Headers = map[string]string{}
	}
	req.Headers[epp.DataParallelHeader] = pr.Targets[0].Address
	clones := make([]*epp.Endpoint, len(pr.Targets))
	for i, t := range pr.Targets {
		addr := t.Address
		if host, _, err := net.SplitHostPort(addr); err == nil {
			addr = net.JoinHostPort(host, h.port)
		}
		info := &epp.EndpointInfo{Name: t.Name, Address: addr, Labels: t.Labels}
		clones[i] = &epp.Endpoint{EndpointInfo: info, Metrics: t.Metrics}
	}
	res.Profiles[res.PrimaryProfile] = &epp.ProfileResult{Targets: clones, Trace: pr.Trace}
	return res, nil
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
	_ epp.ProfileHandler = (*DataParallel)(nil)
)
