package config

import (
	"bytes"
	"fmt"
	"math"
	"strings"

	"github.com/eppsim/eppsim/epp"
	yaml "sigs.k8s.io/yaml/goyaml.v2"
)

// Router assembles an epp.Router over the loaded plugin instances: the
// request parsers in requestHandler.parsers order (spec §2.1 step 0), data
// producers in execution order (spec §1.3 step 7), the profiles with their
// filters, weighted scorers and picker (§2.3), the profile handler, and the
// PreRequest hooks, response hooks and KV-event consumers in plugin
// instantiation order (upstream registers hooks in the plugin handle's map
// order; eppsim fixes instantiation order: configured plugins in reference
// order, then system defaults, then auto-created producers).
//
// Every call returns a new Router, but the plugins (and their state, e.g.
// the approximate index) are shared with earlier Routers of the same Loaded;
// use Reload for fresh instances.
func (l *Loaded) Router() *epp.Router {
	r := &epp.Router{
		Producers: append([]epp.DataProducer(nil), l.producers...),
		Handler:   l.handler,
	}
	for _, name := range l.Parsers {
		if p, ok := l.Plugin(name).(epp.RequestParser); ok {
			r.Parsers = append(r.Parsers, p)
		}
	}
	for _, p := range l.profiles {
		cp := &epp.Profile{
			Name:    p.Name,
			Filters: append([]epp.Filter(nil), p.Filters...),
			Scorers: append([]epp.WeightedScorer(nil), p.Scorers...),
			Picker:  p.Picker,
		}
		r.Profiles = append(r.Profiles, cp)
	}
	r.Detector = l.SaturationDetectorPlugin()
	// Admit plugins run in configuration declaration order
	// (flow-control.md §16.5).
	for _, ps := range l.Config.Plugins {
		if a, ok := l.Plugin(ps.Name).(epp.Admitter); ok {
			r.Admitters = append(r.Admitters, a)
		}
	}
	if l.flow != nil {
		r.Flow = l.flow
		l.flow.SetPool(r.LivePool)
	}
	r.GPUPolls = l.gpuPolls()
	for _, in := range l.Plugins {
		if h, ok := in.Plugin.(epp.PreRequestHook); ok {
			r.PreRequest = append(r.PreRequest, h)
		}
		if h, ok := in.Plugin.(epp.ResponseHook); ok {
			r.Response = append(r.Response, h)
		}
		if k, ok := in.Plugin.(epp.KVEventConsumer); ok {
			r.KVConsumers = append(r.KVConsumers, k)
		}
	}
	return r
}

// gpuPolls lists the dataLayer sources that are dcgm-data-sources with at
// least one dcgm-extractor among their extractors (epp/gpu.go). A
// dcgm-extractor wired to another source finds no DCGM gauges in what that
// source fetches, and a dcgm-data-source without one stores nothing: both
// do nothing, and cost nothing.
func (l *Loaded) gpuPolls() []epp.GPUPoll {
	if l.Config.DataLayer == nil {
		return nil
	}
	var out []epp.GPUPoll
	for _, s := range l.Config.DataLayer.Sources {
		src, ok := l.Plugin(s.PluginRef).(epp.GPUTelemetrySource)
		if !ok {
			continue
		}
		for _, e := range s.Extractors {
			if _, ok := l.Plugin(e.PluginRef).(epp.GPUTelemetryExtractor); ok {
				out = append(out, epp.GPUPoll{Source: src.Name(), Interval: src.GPUPollInterval()})
				break
			}
		}
	}
	return out
}

// Marshal writes cfg as EndpointPickerConfig YAML that Load accepts.
// Plugin parameters keep their key order.
func Marshal(cfg *EndpointPickerConfig) ([]byte, error) {
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("epp config: marshal: %w", err)
	}
	return out, nil
}

// YAML writes the effective configuration as a loadable
// EndpointPickerConfig, headed by comments naming the plugins that defaults
// added. Loading it gives the same effective configuration.
func (l *Loaded) YAML() ([]byte, error) {
	body, err := Marshal(l.Config)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	src := l.File
	if l.BuiltinDefault {
		src = "the built-in default configuration"
	}
	if src != "" {
		fmt.Fprintf(&b, "# Effective EndpointPickerConfig of %s, as loaded by eppsim (all defaults applied).\n", src)
	} else {
		b.WriteString("# Effective EndpointPickerConfig, as loaded by eppsim (all defaults applied).\n")
	}
	var defs, autos []string
	for _, in := range l.Plugins {
		switch in.Origin {
		case OriginSystemDefault:
			defs = append(defs, in.Name)
		case OriginAutoProducer:
			autos = append(autos, in.Name)
		}
	}
	if len(defs) > 0 {
		fmt.Fprintf(&b, "# System defaults: %s\n", strings.Join(defs, ", "))
	}
	if len(autos) > 0 {
		fmt.Fprintf(&b, "# Auto-created data producers: %s\n", strings.Join(autos, ", "))
	}
	b.Write(body)
	return b.Bytes(), nil
}

// SetWeight sets the weight of the scorer reference pluginRef in profile
// (e.g. a tuned weight before Marshal). It fails when the profile or the
// reference does not exist or the weight is not finite.
func SetWeight(cfg *EndpointPickerConfig, profile, pluginRef string, w float64) error {
	if math.IsNaN(w) || math.IsInf(w, 0) {
		return fmt.Errorf("epp config: weight %v of %q is not finite", w, pluginRef)
	}
	for i := range cfg.SchedulingProfiles {
		p := &cfg.SchedulingProfiles[i]
		if p.Name != profile {
			continue
		}
		for j := range p.Plugins {
			if p.Plugins[j].PluginRef == pluginRef {
				v := w
				p.Plugins[j].Weight = &v
				return nil
			}
		}
		return fmt.Errorf("epp config: profile %q has no plugin %q", profile, pluginRef)
	}
	return fmt.Errorf("epp config: no profile %q", profile)
}
