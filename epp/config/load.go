package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/eppsim/eppsim/epp"
	"github.com/eppsim/eppsim/epp/flowcontrol"
	closest "github.com/eppsim/eppsim/internal/suggest"
)

// Options control Load.
type Options struct {
	// Registry resolves plugin types; required (plugins.Builtin() in eppsim).
	Registry *epp.Registry
	// Seed derives every plugin's random stream (epp.Handle.Rand).
	Seed uint64
	// File names the configuration in errors and warnings.
	File string
	// Release, when set (Releases), makes an older configuration's plugins
	// behave as in that upstream release instead of translating them to
	// today's (migrate.go). It changes nothing in a configuration of
	// today's schema.
	Release string
}

// Origin tells how a plugin came to be in the effective configuration.
type Origin string

// Plugin origins.
const (
	// OriginConfig: listed under plugins in the configuration (or in the
	// built-in default configuration, spec §1.2).
	OriginConfig Origin = "config"
	// OriginSystemDefault: registered by a system default (spec §1.3 step 3:
	// profile handler, picker, flow-control policies, parsers, saturation
	// detector, data layer).
	OriginSystemDefault Origin = "system-default"
	// OriginAutoProducer: created by CreateMissingDataProducers (spec §1.3
	// step 6) for a required data key nobody produced.
	OriginAutoProducer Origin = "auto-producer"
)

// PluginInfo describes one instantiated plugin of the effective config.
type PluginInfo struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Parameters json.RawMessage `json:"parameters,omitempty"`
	Origin     Origin          `json:"origin"`
	// Roles lists what the plugin implements: filter, scorer, picker,
	// profile-handler, producer, consumer, pre-request, response, kv-events,
	// parser, saturation-detector.
	Roles []string `json:"roles"`
	// Produces and Requires are the data keys ("Type/producer") the plugin
	// produces and consumes as Required dependencies.
	Produces []string `json:"produces,omitempty"`
	Requires []string `json:"requires,omitempty"`
	// RequiredBy says, for an auto-created producer, which data key and
	// consumer caused it.
	RequiredBy string `json:"requiredBy,omitempty"`
	// NotSimulated is the plugin's "not simulated: ...; fallback: ..." text.
	NotSimulated string `json:"notSimulated,omitempty"`
	// Plugin is the instance.
	Plugin epp.Plugin `json:"-"`
}

// ScorerRef is a scorer in a profile with its effective weight.
type ScorerRef struct {
	Name   string  `json:"name"`
	Weight float64 `json:"weight"`
}

// ProfileInfo is one scheduling profile of the effective config, slotted as
// the scheduler uses it.
type ProfileInfo struct {
	Name    string      `json:"name"`
	Filters []string    `json:"filters,omitempty"`
	Scorers []ScorerRef `json:"scorers,omitempty"`
	Picker  string      `json:"picker"`
}

// NotSimulatedItem is one configured feature eppsim accepts but does not
// simulate, with the reason and the fallback.
type NotSimulatedItem struct {
	Name   string `json:"name"`
	Type   string `json:"type"`
	Reason string `json:"reason"`
}

// String words the item once: "NAME (TYPE): what happens instead",
// without the "not simulated:" prefix of Reason (the list it is shown in
// says so), without "(TYPE)" when it equals the name, and without the
// name at all when the reason already starts with it.
func (n NotSimulatedItem) String() string {
	r := strings.TrimSpace(n.Reason)
	const prefix = "not simulated:"
	if len(r) >= len(prefix) && strings.EqualFold(r[:len(prefix)], prefix) {
		r = strings.TrimSpace(r[len(prefix):])
	}
	switch {
	case strings.HasPrefix(r, n.Name+" "):
		return r
	case n.Type != "" && n.Type != n.Name:
		return n.Name + " (" + n.Type + "): " + r
	}
	return n.Name + ": " + r
}

// Loaded is an effective, validated configuration with its plugin
// instances. Router assembles an epp.Router over those instances.
type Loaded struct {
	// File is the configuration's name ("" for the built-in default).
	File string `json:"file,omitempty"`
	// BuiltinDefault is true when no configuration was given (spec §1.2).
	BuiltinDefault bool `json:"builtinDefault,omitempty"`
	// Config is the effective configuration: every plugin (configured,
	// system defaults, auto-created producers) with name, type and raw
	// parameters; profiles with explicit weights and pickers; parsers,
	// saturation detector and data-layer sources filled in. Marshal writes it
	// back as a loadable EndpointPickerConfig.
	Config *EndpointPickerConfig `json:"config"`
	// FeatureGates are the effective gate values (registered defaults
	// overridden by the configuration).
	FeatureGates map[string]bool `json:"featureGates"`
	// Plugins in instantiation order (= hook registration order).
	Plugins []PluginInfo `json:"plugins"`
	// Profiles in configuration order.
	Profiles       []ProfileInfo `json:"profiles"`
	ProfileHandler string        `json:"profileHandler"`
	// Producers are the data producers' names in execution order.
	Producers []string `json:"producers"`
	// AutoProducers are the producers CreateMissingDataProducers created, in
	// creation order.
	AutoProducers      []string `json:"autoProducers,omitempty"`
	Parsers            []string `json:"parsers"`
	SaturationDetector string   `json:"saturationDetector"`
	// FlowControl is the flow-control layer with the flowControl gate on
	// (nil: the legacy gate, flow-control.md §4).
	FlowControl  *FlowControlInfo   `json:"flowControl,omitempty"`
	NotSimulated []NotSimulatedItem `json:"notSimulated,omitempty"`
	Warnings     []string           `json:"warnings,omitempty"`
	// Translations are the changes made to an older configuration before
	// loading it (migrate.go); each is also a warning.
	Translations []Translation `json:"translations,omitempty"`

	src  []byte
	opts Options
	// migrationWarnings are the warnings of Translations (and of a release
	// that changed nothing), for callers that show only those.
	migrationWarnings []string
	byName            map[string]int // Plugins' index by name
	profiles          []*epp.Profile
	handler           epp.ProfileHandler
	producers         []epp.DataProducer
	flow              *flowcontrol.Controller
}

// Plugin returns the instance named name, or nil. It is a map lookup
// (configurations may have many thousands of plugins); a Loaded whose
// Plugins were changed after loading is searched instead.
func (l *Loaded) Plugin(name string) epp.Plugin {
	if i, ok := l.byName[name]; ok && i < len(l.Plugins) && l.Plugins[i].Name == name {
		return l.Plugins[i].Plugin
	}
	for i := range l.Plugins {
		if l.Plugins[i].Name == name {
			return l.Plugins[i].Plugin
		}
	}
	return nil
}

// SaturationDetectorPlugin returns the configured saturation detector
// (flowControl.saturationDetector), or nil when that plugin does not
// implement SaturationDetector.
func (l *Loaded) SaturationDetectorPlugin() SaturationDetector {
	sd, _ := l.Plugin(l.SaturationDetector).(SaturationDetector)
	return sd
}

// Reload instantiates the same configuration again with fresh plugin state
// and the given seed (e.g. one Router per simulation run).
func (l *Loaded) Reload(seed uint64) (*Loaded, error) {
	opts := l.opts
	opts.Seed = seed
	if l.BuiltinDefault {
		return Default(opts)
	}
	return Load(l.src, opts)
}

// maxFileBytes bounds a configuration file LoadFile reads: real ones are
// a few kilobytes.
const maxFileBytes = 16 << 20

// LoadFile reads and loads a configuration file of at most 16 MiB (a pipe
// works; a device that never ends is refused, not read into memory).
func LoadFile(path string, opts Options) (*Loaded, error) {
	data, err := readFile(path, maxFileBytes)
	if err != nil {
		return nil, err
	}
	if opts.File == "" {
		opts.File = path
	}
	return Load(data, opts)
}

// readFile reads path whole if it holds at most limit bytes.
func readFile(path string, limit int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("epp config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("epp config: %w", err)
	}
	if len(data) > limit {
		size := fmt.Sprintf("%d bytes", limit)
		if limit >= 1<<20 && limit%(1<<20) == 0 {
			size = fmt.Sprintf("%d MiB", limit>>20)
		}
		return nil, &Error{File: path, Err: fmt.Errorf("larger than %s, the limit of a configuration file (not an EndpointPickerConfig?)", size)}
	}
	return data, nil
}

// Load decodes, defaults, validates and instantiates a configuration. Empty
// input means the built-in default configuration (spec §1.2).
func Load(data []byte, opts Options) (*Loaded, error) {
	// A UTF-8 byte order mark (some editors write one) is not content: the
	// YAML decoder skips it, and without it the line index sees the first
	// key as it is.
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	if len(bytes.TrimSpace(data)) == 0 {
		return Default(opts)
	}
	if opts.Registry == nil {
		return nil, errors.New("epp config: no plugin registry")
	}
	d, err := decode(data, opts.File)
	if err != nil {
		return nil, err
	}
	trans, err := migrate(d.cfg, d.lines, opts.File, d.oldAPI, opts.Release)
	if err != nil {
		return nil, err
	}
	ld := newLoader(opts, d.cfg, d.lines)
	ld.warnings = append(ld.warnings, d.warnings...)
	// The loader warns of each translation but the apiVersion's (decode
	// warned of that one); MigrationWarnings names every one, once there
	// is anything beyond the apiVersion to say.
	var mw []string
	released := false
	for _, t := range trans {
		if !t.api {
			mw = append(mw, "older schema, translated: "+t.String())
		}
		released = released || strings.Contains(t.Text, "--epp-release")
	}
	if opts.Release != "" && !released {
		mw = append(mw, fmt.Sprintf("release %s changes nothing in this config: it has no prefix-cache-scorer of that release (an old apiVersion with v0.2.x parameters, or none)", opts.Release))
	}
	ld.warnings = append(ld.warnings, mw...)
	if len(mw) > 0 && len(trans) > 0 && trans[0].api {
		mw = append([]string{"older schema, translated: " + trans[0].String()}, mw...)
	}
	out, err := ld.run()
	if err != nil {
		return nil, err
	}
	if len(trans) > 1 || len(trans) == 1 && !trans[0].api {
		// The apiVersion alone is today's schema (deprecated): such a
		// config loads exactly as it did.
		out.Translations = trans
	}
	out.migrationWarnings = mw
	out.src = bytes.Clone(data)
	return out, nil
}

// Default loads the built-in default configuration (spec §1.2):
// queue-scorer 2, kv-cache-utilization-scorer 2, prefix-cache-scorer 3 in
// profile "default", with metrics-data-source and core-metrics-extractor.
func Default(opts Options) (*Loaded, error) {
	if opts.Registry == nil {
		return nil, errors.New("epp config: no plugin registry")
	}
	file := opts.File
	opts.File = ""
	ld := newLoader(opts, DefaultConfig(), nil)
	out, err := ld.run()
	if err != nil {
		return nil, fmt.Errorf("built-in default config: %w", err)
	}
	out.BuiltinDefault = true
	out.opts.File = file
	return out, nil
}

// DefaultConfig returns the built-in default configuration document of spec
// §1.2 (upstream loadDefaultConfig), before any defaulting.
func DefaultConfig() *EndpointPickerConfig {
	w := func(v float64) *float64 { return &v }
	return &EndpointPickerConfig{
		APIVersion:   APIVersion,
		Kind:         Kind,
		FeatureGates: []string{},
		Plugins: []PluginSpec{
			{Type: "queue-scorer"},
			{Type: "kv-cache-utilization-scorer"},
			{Type: "prefix-cache-scorer"},
			{Type: TypeMetricsDataSource},
			{Type: TypeCoreMetricsExtractor},
		},
		SchedulingProfiles: []SchedulingProfile{{
			Name: "default",
			Plugins: []SchedulingPlugin{
				{PluginRef: "queue-scorer", Weight: w(2)},
				{PluginRef: "kv-cache-utilization-scorer", Weight: w(2)},
				{PluginRef: "prefix-cache-scorer", Weight: w(3)},
			},
		}},
		DataLayer: &DataLayerConfig{
			Sources: []DataLayerSource{{
				PluginRef:  TypeMetricsDataSource,
				Extractors: []PluginRef{{PluginRef: TypeCoreMetricsExtractor}},
			}},
		},
	}
}

// Type strings the loader itself refers to (spec §1.3).
const (
	TypeSingleProfileHandler  = "single-profile-handler"
	TypeMaxScorePicker        = "max-score-picker"
	TypeFCFSOrderingPolicy    = "fcfs-ordering-policy"
	TypeGlobalStrictFairness  = "global-strict-fairness-policy"
	TypeStaticUsageLimit      = "static-usage-limit-policy"
	TypeOpenAIParser          = "openai-parser"
	TypeAnthropicParser       = "anthropic-parser"
	TypeVLLMHTTPParser        = "vllmhttp-parser"
	TypePassthroughParser     = "passthrough-parser"
	TypeVLLMGRPCParser        = "vllmgrpc-parser"
	TypeSGLangHTTPParser      = "sglanghttp-parser"
	TypeUtilizationDetector   = "utilization-detector"
	TypeConcurrencyDetector   = "concurrency-detector"
	TypeMetricsDataSource     = "metrics-data-source"
	TypeCoreMetricsExtractor  = "core-metrics-extractor"
	TypeDisaggProfileHandler  = "disagg-profile-handler"
	TypePDProfileHandler      = "pd-profile-handler"
	FeatureGateFlowControl    = "flowControl"
	FeatureGateHAPopulateNonL = "haPopulateNonLeaderDatastore"
)

// registeredFeatureGates are the gates of spec §1.1 with their defaults.
func registeredFeatureGates() map[string]bool {
	return map[string]bool{FeatureGateFlowControl: false, FeatureGateHAPopulateNonL: true}
}

// Parser is implemented by request-parser plugins (requestHandler.parsers).
// The parser types of spec §1.4 are recognised by type as well.
type Parser interface {
	epp.Plugin
	RequestParser()
}

// SaturationDetector is implemented by plugins usable as
// flowControl.saturationDetector (spec §7.3; epp/filter's utilization- and
// concurrency-detector): Saturation returns the pool saturation of eps at
// simulated time now (≥ 1 means saturated). The detector types of spec §1.4
// are recognised by type as well.
type SaturationDetector = epp.SaturationDetector

func isParser(p epp.Plugin) bool {
	if _, ok := p.(Parser); ok {
		return true
	}
	if _, ok := p.(epp.RequestParser); ok {
		return true
	}
	switch p.Type() {
	case TypeOpenAIParser, TypeAnthropicParser, TypeVLLMHTTPParser, TypePassthroughParser, TypeVLLMGRPCParser, TypeSGLangHTTPParser:
		return true
	}
	return false
}

func isSaturationDetector(p epp.Plugin) bool {
	if _, ok := p.(SaturationDetector); ok {
		return true
	}
	switch p.Type() {
	case TypeUtilizationDetector, TypeConcurrencyDetector:
		return true
	}
	return false
}

// loader carries one Load through its steps.
type loader struct {
	opts     Options
	file     string
	cfg      *EndpointPickerConfig
	lines    *lineIndex
	reg      *epp.Registry
	h        *epp.Handle
	infos    []PluginInfo
	byName   map[string]int
	warnings []string
	gates    map[string]bool
}

func newLoader(opts Options, cfg *EndpointPickerConfig, lines *lineIndex) *loader {
	return &loader{
		opts:   opts,
		file:   opts.File,
		cfg:    cfg,
		lines:  lines,
		reg:    opts.Registry,
		h:      epp.NewHandle(opts.Seed),
		byName: map[string]int{},
	}
}

// errAt builds a located error; the line is that of path, or of the nearest
// enclosing path the index knows.
func (l *loader) errAt(path string, err error) error {
	line := 0
	for p := path; p != "" && line == 0; p = parentOf(p) {
		line = l.lines.line(p)
	}
	return &Error{File: l.file, Line: line, Path: path, Err: err}
}

func parentOf(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i <= 0 {
		return ""
	}
	return p[:i]
}

func (l *loader) plugin(name string) epp.Plugin {
	if i, ok := l.byName[name]; ok {
		return l.infos[i].Plugin
	}
	return nil
}

func (l *loader) run() (*Loaded, error) {
	// §1.3 step 1: static defaults.
	for i := range l.cfg.Plugins {
		if l.cfg.Plugins[i].Name == "" {
			l.cfg.Plugins[i].Name = l.cfg.Plugins[i].Type
		}
	}
	if l.cfg.FeatureGates == nil {
		l.cfg.FeatureGates = []string{}
	}
	if err := l.featureGates(); err != nil {
		return nil, err
	}
	if err := l.validatePlugins(); err != nil {
		return nil, err
	}
	// §1.3 step 2.
	if err := l.instantiate(); err != nil {
		return nil, err
	}
	// §1.3 step 3.
	if err := l.systemDefaults(); err != nil {
		return nil, err
	}
	// §1.3 step 4.
	if err := l.validate(); err != nil {
		return nil, err
	}
	// §1.3 step 5.
	profiles, profInfo, handler, err := l.buildScheduler()
	if err != nil {
		return nil, err
	}
	// §1.3 steps 6–7.
	auto, err := l.createMissingDataProducers()
	if err != nil {
		return nil, err
	}
	producers, err := l.orderProducers()
	if err != nil {
		return nil, err
	}
	out := &Loaded{
		File:           l.file,
		Config:         l.cfg,
		FeatureGates:   l.gates,
		Profiles:       profInfo,
		ProfileHandler: handler.Name(),
		AutoProducers:  auto,
		opts:           l.opts,
		profiles:       profiles,
		handler:        handler,
		producers:      producers,
	}
	for _, p := range producers {
		out.Producers = append(out.Producers, p.Name())
	}
	for _, pc := range l.cfg.RequestHandler.Parsers {
		out.Parsers = append(out.Parsers, pc.PluginRef)
	}
	out.SaturationDetector = l.cfg.FlowControl.SaturationDetector.PluginRef
	for i := range l.infos {
		l.describe(&l.infos[i])
		if r := l.infos[i].NotSimulated; r != "" {
			out.NotSimulated = append(out.NotSimulated, NotSimulatedItem{Name: l.infos[i].Name, Type: l.infos[i].Type, Reason: r})
		}
	}
	if l.gates[FeatureGateFlowControl] {
		ctl, info, err := l.buildFlowControl()
		if err != nil {
			return nil, err
		}
		out.flow, out.FlowControl = ctl, info
	}
	out.Plugins = l.infos
	out.byName = l.byName
	out.Warnings = l.warnings
	return out, nil
}

// featureGates validates and resolves the gates (spec §1.1).
func (l *loader) featureGates() error {
	l.gates = registeredFeatureGates()
	for i, g := range l.cfg.FeatureGates {
		name, val, hasVal := strings.Cut(g, "=")
		name = strings.TrimSpace(name)
		v := true
		if hasVal {
			b, err := strconv.ParseBool(strings.ToLower(strings.TrimSpace(val)))
			if err != nil {
				return l.errAt(fmt.Sprintf("featureGates[%d]", i), fmt.Errorf("%w: %q: value %q is not a boolean", ErrFeatureGate, g, val))
			}
			v = b
		}
		if _, ok := l.gates[name]; !ok {
			return l.errAt(fmt.Sprintf("featureGates[%d]", i), fmt.Errorf("%w: unknown feature gate %q (known: %s, %s)", ErrFeatureGate, name, FeatureGateFlowControl, FeatureGateHAPopulateNonL))
		}
		l.gates[name] = v
	}
	return nil
}

// validatePlugins checks type presence, name uniqueness and registration
// (spec §1.5).
func (l *loader) validatePlugins() error {
	seen := map[string]int{}
	for i, p := range l.cfg.Plugins {
		path := fmt.Sprintf("plugins[%d]", i)
		if p.Type == "" {
			if p.Name == "" {
				return l.errAt(path, fmt.Errorf("%w: plugin has no type", ErrPlugin))
			}
			return l.errAt(path, fmt.Errorf("%w: plugin %q has no type", ErrPlugin, p.Name))
		}
		if j, dup := seen[p.Name]; dup {
			hint := ""
			if l.cfg.Plugins[j].Type == p.Type {
				hint = " (the name defaults to the type: give one of them a name)"
			}
			return l.errAt(path, fmt.Errorf("%w: duplicate plugin name %q (also plugins[%d])%s", ErrPlugin, p.Name, j, hint))
		}
		seen[p.Name] = i
		if repl, dep := deprecatedType(p.Type); dep {
			l.warnings = append(l.warnings, fmt.Sprintf("plugin %q: type %s is deprecated%s", p.Name, p.Type, repl))
		}
		if _, ok := l.reg.Lookup(p.Type); !ok {
			msg := fmt.Sprintf("plugin %q: type %q is not registered", p.Name, p.Type)
			if s := suggest(p.Type, l.reg.Types()); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			return l.errAt(path+".type", fmt.Errorf("%w: %s", ErrPlugin, msg))
		}
	}
	return nil
}

// deprecatedType reports plugin types upstream registers as deprecated (it
// logs a DEPRECATION warning), with the replacement.
func deprecatedType(typ string) (string, bool) {
	switch typ {
	case TypePDProfileHandler:
		return "; use disagg-profile-handler", true
	case "data-parallel-profile-handler":
		return "", true
	case "by-label-selector", "by-label":
		return "; use label-selector-filter", true
	case "precise-prefix-cache-scorer":
		return "; use precise-prefix-cache-producer with prefix-cache-scorer", true
	case "tokenizer":
		return "; use token-producer", true
	}
	return "", false
}

// instantiate builds the configured plugins in a topological order of their
// plugin references, ties in config order (spec §1.3 step 2).
func (l *loader) instantiate() error {
	n := len(l.cfg.Plugins)
	index := make(map[string]int, n)
	for i, p := range l.cfg.Plugins {
		index[p.Name] = i
	}
	deps := make([][]int, n)
	for i, p := range l.cfg.Plugins {
		for _, ref := range pluginReferences(p.Type, p.Parameters) {
			j, ok := index[ref.name]
			if !ok {
				return l.errAt(fmt.Sprintf("plugins[%d].parameters.%s", i, ref.field),
					fmt.Errorf("%w: plugin %q references undefined plugin %q", ErrReference, p.Name, ref.name))
			}
			if j == i {
				return l.errAt(fmt.Sprintf("plugins[%d].parameters.%s", i, ref.field),
					fmt.Errorf("%w: plugin %q references itself", ErrReference, p.Name))
			}
			deps[i] = append(deps[i], j)
		}
	}
	order, cyc := topoOrder(n, deps)
	if cyc != nil {
		names := make([]string, len(cyc))
		for k, i := range cyc {
			names[k] = l.cfg.Plugins[i].Name
		}
		return l.errAt("plugins", fmt.Errorf("%w: plugin references form a cycle among %s", ErrReference, strings.Join(names, ", ")))
	}
	for _, i := range order {
		spec := l.cfg.Plugins[i]
		if err := l.create(spec.Name, spec.Type, spec.Parameters, OriginConfig, fmt.Sprintf("plugins[%d]", i)); err != nil {
			return err
		}
	}
	return nil
}

// create instantiates one plugin through the registry and records it.
func (l *loader) create(name, typ string, params json.RawMessage, origin Origin, path string) error {
	f, ok := l.reg.Lookup(typ)
	if !ok {
		return l.errAt(path, fmt.Errorf("%w: plugin %q: type %q is not registered", ErrPlugin, name, typ))
	}
	p, err := f(name, params, l.h)
	if err != nil {
		at := path
		if len(params) > 0 && l.lines.line(path+".parameters") > 0 {
			at = path + ".parameters"
		}
		return l.errAt(at, fmt.Errorf("%w: plugin %q (type %s): %w", ErrPlugin, name, typ, trimPrefixErr(err, name, typ)))
	}
	if p == nil {
		return l.errAt(path, fmt.Errorf("%w: plugin %q (type %s): factory returned no plugin", ErrPlugin, name, typ))
	}
	l.h.Plugins[name] = p
	l.byName[name] = len(l.infos)
	l.infos = append(l.infos, PluginInfo{Name: name, Type: typ, Parameters: params, Origin: origin, Plugin: p})
	return nil
}

// registerDefault instantiates a system-default plugin with nil parameters,
// name = type, and appends it to the configuration (upstream
// registerDefaultPlugin).
func (l *loader) registerDefault(typ, why string) error {
	if p := l.plugin(typ); p != nil {
		return l.errAt("plugins", fmt.Errorf("%w: cannot add default plugin %q (%s): the name is taken by a plugin of type %q", ErrPlugin, typ, why, p.Type()))
	}
	if _, ok := l.reg.Lookup(typ); !ok {
		return l.errAt("plugins", fmt.Errorf("%w: default plugin type %q (%s) is not registered", ErrPlugin, typ, why))
	}
	if err := l.create(typ, typ, nil, OriginSystemDefault, "plugins"); err != nil {
		return err
	}
	l.cfg.Plugins = append(l.cfg.Plugins, PluginSpec{Name: typ, Type: typ})
	return nil
}

// systemDefaults applies spec §1.3 step 3 in upstream order.
func (l *loader) systemDefaults() error {
	cfg := l.cfg
	// Scheduling layer.
	if len(cfg.SchedulingProfiles) == 0 {
		prof := SchedulingProfile{Name: "default"}
		for _, spec := range cfg.Plugins {
			switch l.plugin(spec.Name).(type) {
			case epp.Filter, epp.Scorer, epp.Picker:
				prof.Plugins = append(prof.Plugins, SchedulingPlugin{PluginRef: spec.Name})
			}
		}
		cfg.SchedulingProfiles = []SchedulingProfile{prof}
		l.warnings = append(l.warnings, `no schedulingProfiles: created profile "default" with every filter, scorer and picker plugin in config order`)
	}
	if len(cfg.SchedulingProfiles) == 1 {
		has := false
		for _, in := range l.infos {
			if _, ok := in.Plugin.(epp.ProfileHandler); ok {
				has = true
				break
			}
		}
		if !has {
			if err := l.registerDefault(TypeSingleProfileHandler, "one profile and no profile handler"); err != nil {
				return err
			}
		}
	}
	pickerName := ""
	for _, spec := range cfg.Plugins {
		if _, ok := l.plugin(spec.Name).(epp.Picker); ok {
			pickerName = spec.Name
			break
		}
	}
	if pickerName == "" {
		if err := l.registerDefault(TypeMaxScorePicker, "no picker configured"); err != nil {
			return err
		}
		pickerName = TypeMaxScorePicker
	}
	for i := range cfg.SchedulingProfiles {
		prof := &cfg.SchedulingProfiles[i]
		hasPicker := false
		for j := range prof.Plugins {
			p := l.plugin(prof.Plugins[j].PluginRef)
			if _, ok := p.(epp.Scorer); ok && prof.Plugins[j].Weight == nil {
				w := 1.0
				prof.Plugins[j].Weight = &w
			}
			if _, ok := p.(epp.Picker); ok {
				hasPicker = true
			}
		}
		if !hasPicker {
			prof.Plugins = append(prof.Plugins, SchedulingPlugin{PluginRef: pickerName})
		}
	}
	// Flow-control layer (policies are looked up by name, as upstream).
	for _, typ := range []string{TypeFCFSOrderingPolicy, TypeGlobalStrictFairness, TypeStaticUsageLimit} {
		if l.plugin(typ) == nil {
			if err := l.registerDefault(typ, "flow-control default policy"); err != nil {
				return err
			}
		}
	}
	// Parsers.
	if cfg.RequestHandler == nil {
		cfg.RequestHandler = &RequestHandlerConfig{}
	}
	if len(cfg.RequestHandler.Parsers) == 0 {
		for _, t := range []string{TypeOpenAIParser, TypeAnthropicParser, TypeVLLMHTTPParser, TypePassthroughParser} {
			cfg.RequestHandler.Parsers = append(cfg.RequestHandler.Parsers, PluginRef{PluginRef: t})
		}
	}
	for i, pc := range cfg.RequestHandler.Parsers {
		if pc.PluginRef == "" {
			return l.errAt(fmt.Sprintf("requestHandler.parsers[%d]", i), fmt.Errorf("%w: parser entry has no pluginRef", ErrReference))
		}
		if l.plugin(pc.PluginRef) == nil {
			if _, ok := l.reg.Lookup(pc.PluginRef); !ok {
				return l.errAt(fmt.Sprintf("requestHandler.parsers[%d].pluginRef", i),
					fmt.Errorf("%w: parser %q is neither a defined plugin nor a registered plugin type", ErrReference, pc.PluginRef))
			}
			if err := l.registerDefault(pc.PluginRef, "referenced parser"); err != nil {
				return err
			}
		}
	}
	// Saturation detector.
	if cfg.FlowControl == nil {
		cfg.FlowControl = &FlowControlConfig{}
	}
	if cfg.FlowControl.SaturationDetector == nil {
		cfg.FlowControl.SaturationDetector = &PluginRef{}
	}
	if cfg.FlowControl.SaturationDetector.PluginRef == "" {
		cfg.FlowControl.SaturationDetector.PluginRef = TypeUtilizationDetector
	}
	if cfg.FlowControl.SaturationDetector.PluginRef == TypeUtilizationDetector && l.plugin(TypeUtilizationDetector) == nil {
		if err := l.registerDefault(TypeUtilizationDetector, "default saturation detector"); err != nil {
			return err
		}
	}
	// Data layer.
	inject := cfg.DataLayer == nil || cfg.DataLayer.InjectDefaults == nil || *cfg.DataLayer.InjectDefaults
	if inject && cfg.DataLayer != nil {
		for _, s := range cfg.DataLayer.Sources {
			if s.PluginRef == TypeMetricsDataSource {
				inject = false
			}
		}
	}
	if inject {
		for _, typ := range []string{TypeMetricsDataSource, TypeCoreMetricsExtractor} {
			if l.plugin(typ) == nil {
				if err := l.registerDefault(typ, "default data layer"); err != nil {
					return err
				}
			}
		}
		if cfg.DataLayer == nil {
			cfg.DataLayer = &DataLayerConfig{}
		}
		cfg.DataLayer.Sources = append(cfg.DataLayer.Sources, DataLayerSource{
			PluginRef:  TypeMetricsDataSource,
			Extractors: []PluginRef{{PluginRef: TypeCoreMetricsExtractor}},
		})
	}
	return nil
}

// validate checks the relationships of spec §1.5 (upstream validateConfig
// plus the reference checks of the data-layer, parser and flow-control
// builders).
func (l *loader) validate() error {
	cfg := l.cfg
	seen := map[string]int{}
	for i, prof := range cfg.SchedulingProfiles {
		path := fmt.Sprintf("schedulingProfiles[%d]", i)
		if prof.Name == "" {
			return l.errAt(path, fmt.Errorf("%w: schedulingProfiles[%d] has no name", ErrProfile, i))
		}
		if j, dup := seen[prof.Name]; dup {
			return l.errAt(path+".name", fmt.Errorf("%w: duplicate profile name %q (also schedulingProfiles[%d])", ErrProfile, prof.Name, j))
		}
		seen[prof.Name] = i
		for j, ref := range prof.Plugins {
			rp := fmt.Sprintf("%s.plugins[%d]", path, j)
			if ref.PluginRef == "" {
				return l.errAt(rp, fmt.Errorf("%w: profile %q: plugin entry has no pluginRef", ErrProfile, prof.Name))
			}
			p := l.plugin(ref.PluginRef)
			if p == nil {
				return l.errAt(rp+".pluginRef", fmt.Errorf("%w: profile %q references undefined plugin %q", ErrReference, prof.Name, ref.PluginRef))
			}
			if ref.Weight != nil {
				if math.IsNaN(*ref.Weight) || math.IsInf(*ref.Weight, 0) {
					return l.errAt(rp+".weight", fmt.Errorf("%w: profile %q: weight of %q is not a finite number", ErrProfile, prof.Name, ref.PluginRef))
				}
				if _, ok := p.(epp.Scorer); !ok {
					l.warnings = append(l.warnings, fmt.Sprintf("%s: weight on %q (type %s) ignored: it is not a scorer", rp, ref.PluginRef, p.Type()))
				}
			}
		}
	}
	sd := cfg.FlowControl.SaturationDetector.PluginRef
	if p := l.plugin(sd); p == nil {
		return l.errAt("flowControl.saturationDetector.pluginRef", fmt.Errorf("%w: saturation detector references undefined plugin %q", ErrReference, sd))
	} else if !isSaturationDetector(p) {
		return l.errAt("flowControl.saturationDetector.pluginRef", fmt.Errorf("%w: saturation detector %q (type %s) is not a saturation detector", ErrReference, sd, p.Type()))
	}
	if len(cfg.RequestHandler.Parsers) == 0 {
		return l.errAt("requestHandler.parsers", fmt.Errorf("%w: no parsers configured", ErrReference))
	}
	for i, pc := range cfg.RequestHandler.Parsers {
		if p := l.plugin(pc.PluginRef); p != nil && !isParser(p) {
			return l.errAt(fmt.Sprintf("requestHandler.parsers[%d].pluginRef", i), fmt.Errorf("%w: plugin %q (type %s) is not a parser", ErrReference, pc.PluginRef, p.Type()))
		}
	}
	if dl := cfg.DataLayer; dl != nil {
		check := func(path, what, ref string) error {
			if ref == "" {
				return l.errAt(path, fmt.Errorf("%w: %s has no pluginRef", ErrReference, what))
			}
			if l.plugin(ref) == nil {
				return l.errAt(path, fmt.Errorf("%w: %s references undefined plugin %q", ErrReference, what, ref))
			}
			return nil
		}
		for i, s := range dl.Sources {
			if err := check(fmt.Sprintf("dataLayer.sources[%d].pluginRef", i), "data source", s.PluginRef); err != nil {
				return err
			}
			for j, e := range s.Extractors {
				if err := check(fmt.Sprintf("dataLayer.sources[%d].extractors[%d].pluginRef", i, j), "data extractor", e.PluginRef); err != nil {
					return err
				}
			}
		}
		if dl.Discovery != nil {
			if err := check("dataLayer.discovery.pluginRef", "endpoint discovery", dl.Discovery.PluginRef); err != nil {
				return err
			}
		}
		if dl.PeerDiscovery != nil {
			if err := check("dataLayer.peerDiscovery.pluginRef", "peer discovery", dl.PeerDiscovery.PluginRef); err != nil {
				return err
			}
		}
		if dl.CrossReplicaSyncerPluginRef != "" {
			if err := check("dataLayer.crossReplicaSyncerPluginRef", "cross-replica syncer", dl.CrossReplicaSyncerPluginRef); err != nil {
				return err
			}
		}
	}
	if fc := cfg.FlowControl; !l.gates[FeatureGateFlowControl] && flowControlSet(fc) {
		l.warnings = append(l.warnings, "flowControl settings other than saturationDetector are ignored: featureGates flowControl is off")
	}
	// Flow-control references are resolved only when the layer is built,
	// i.e. with the flowControl gate on (upstream buildFlowControlConfig).
	if fc := cfg.FlowControl; l.gates[FeatureGateFlowControl] {
		refs := []struct{ path, what, ref string }{}
		if fc.UsageLimitPolicyPluginRef != "" {
			refs = append(refs, struct{ path, what, ref string }{"flowControl.usageLimitPolicyPluginRef", "usage limit policy", fc.UsageLimitPolicyPluginRef})
		}
		band := func(path string, b *PriorityBandConfig) {
			if b == nil {
				return
			}
			if b.FairnessPolicyRef != "" {
				refs = append(refs, struct{ path, what, ref string }{path + ".fairnessPolicyRef", "fairness policy", b.FairnessPolicyRef})
			}
			if b.OrderingPolicyRef != "" {
				refs = append(refs, struct{ path, what, ref string }{path + ".orderingPolicyRef", "ordering policy", b.OrderingPolicyRef})
			}
		}
		band("flowControl.defaultPriorityBand", fc.DefaultPriorityBand)
		band("flowControl.defaultNegativePriorityBand", fc.DefaultNegativePriorityBand)
		for i := range fc.PriorityBands {
			band(fmt.Sprintf("flowControl.priorityBands[%d]", i), &fc.PriorityBands[i])
		}
		for _, r := range refs {
			if l.plugin(r.ref) == nil {
				return l.errAt(r.path, fmt.Errorf("%w: %s references undefined plugin %q", ErrReference, r.what, r.ref))
			}
		}
	}
	return nil
}

// flowControlSet reports whether fc sets anything besides the saturation
// detector.
func flowControlSet(fc *FlowControlConfig) bool {
	c := *fc
	c.SaturationDetector = nil
	return c.MaxBytes != nil || c.MaxRequests != nil || c.DefaultRequestTTL != nil || c.NoEndpointRequestTTL != nil ||
		c.DefaultPriorityBand != nil || c.DefaultNegativePriorityBand != nil || len(c.PriorityBands) > 0 ||
		c.UsageLimitPolicyPluginRef != "" || c.EnableEviction
}

// buildScheduler slots each profile's references (spec §1.3 step 5, §2.3)
// and finds the one profile handler.
func (l *loader) buildScheduler() ([]*epp.Profile, []ProfileInfo, epp.ProfileHandler, error) {
	var profiles []*epp.Profile
	var infos []ProfileInfo
	for i, cp := range l.cfg.SchedulingProfiles {
		prof := &epp.Profile{Name: cp.Name}
		info := ProfileInfo{Name: cp.Name}
		for j, ref := range cp.Plugins {
			p := l.plugin(ref.PluginRef)
			used := false
			if s, ok := p.(epp.Scorer); ok {
				w := 1.0
				if ref.Weight != nil {
					w = *ref.Weight
				}
				prof.Scorers = append(prof.Scorers, epp.WeightedScorer{Scorer: s, Weight: w})
				info.Scorers = append(info.Scorers, ScorerRef{Name: ref.PluginRef, Weight: w})
				used = true
			}
			if f, ok := p.(epp.Filter); ok {
				prof.Filters = append(prof.Filters, f)
				info.Filters = append(info.Filters, ref.PluginRef)
				used = true
			}
			if pk, ok := p.(epp.Picker); ok {
				if prof.Picker != nil {
					return nil, nil, nil, l.errAt(fmt.Sprintf("schedulingProfiles[%d].plugins[%d].pluginRef", i, j),
						fmt.Errorf("%w: profile %q: cannot add picker %q: already have picker %q", ErrProfile, cp.Name, ref.PluginRef, prof.Picker.Name()))
				}
				prof.Picker = pk
				info.Picker = ref.PluginRef
				used = true
			}
			if !used {
				l.warnings = append(l.warnings, fmt.Sprintf("profile %q: plugin %q (type %s) is not a filter, scorer or picker; ignored in the profile (as upstream)", cp.Name, ref.PluginRef, p.Type()))
			}
		}
		profiles = append(profiles, prof)
		infos = append(infos, info)
	}
	var handler epp.ProfileHandler
	for _, in := range l.infos {
		if ph, ok := in.Plugin.(epp.ProfileHandler); ok {
			if handler != nil {
				return nil, nil, nil, l.errAt("plugins", fmt.Errorf("%w: multiple profile handlers (%q, %q); exactly one is allowed", ErrScheduler, handler.Name(), in.Name))
			}
			handler = ph
		}
	}
	if handler == nil {
		return nil, nil, nil, l.errAt("plugins", fmt.Errorf("%w: no profile handler: with %d scheduling profiles one must be configured (e.g. disagg-profile-handler)", ErrScheduler, len(profiles)))
	}
	if handler.Type() == TypeSingleProfileHandler && len(profiles) > 1 {
		return nil, nil, nil, l.errAt("schedulingProfiles", fmt.Errorf("%w: single-profile-handler %q cannot run %d scheduling profiles", ErrScheduler, handler.Name(), len(profiles)))
	}
	return profiles, infos, handler, nil
}

// defaultProducers maps a data type to the producer type registered as its
// default (spec §1.3 step 6). A consumed key "T/P" has a default only when P
// is that producer type; the producer is created with name = type.
func defaultProducer(k epp.DataKey) (string, bool) {
	def := map[string]string{
		epp.PrefixCacheMatchInfoType:  epp.ApproxPrefixProducer,
		epp.TokenizedPromptType:       epp.TokenProducer,
		epp.InFlightLoadType:          epp.InFlightLoadProducer,
		epp.UncachedRequestTokensType: epp.InFlightLoadProducer,
		epp.LatencyPredictionType:     epp.LatencyProducer,
		epp.EncoderCacheMatchInfoType: epp.MMEmbeddingsProducer,
		epp.SessionIDType:             epp.SessionIDProducer,
	}[k.Type]
	if def == "" || k.Producer != def {
		return "", false
	}
	return def, true
}

func requiredKeys(p epp.Plugin) []epp.DataKey {
	c, ok := p.(epp.DataConsumer)
	if !ok {
		return nil
	}
	var out []epp.DataKey
	for _, d := range c.Consumes() {
		if d.Required {
			out = append(out, d.Key)
		}
	}
	return out
}

func producedKeys(p epp.Plugin) []epp.DataKey {
	if pr, ok := p.(epp.DataProducer); ok {
		return pr.Produces()
	}
	return nil
}

// createMissingDataProducers is upstream CreateMissingDataProducers, run to a
// fixed point: consumers are visited in instantiation order, their keys in
// declaration order.
func (l *loader) createMissingDataProducers() ([]string, error) {
	var created []string
	warned := map[epp.DataKey]bool{}
	for {
		produced := map[epp.DataKey]bool{}
		for _, in := range l.infos {
			for _, k := range producedKeys(in.Plugin) {
				produced[k] = true
			}
		}
		progress := false
		for ci := 0; ci < len(l.infos); ci++ {
			consumer := l.infos[ci]
			for _, k := range requiredKeys(consumer.Plugin) {
				if produced[k] {
					continue
				}
				typ, ok := defaultProducer(k)
				if !ok {
					hint := ""
					if k.Type == epp.PrefixCacheMatchInfoType || k.Type == epp.TokenizedPromptType {
						hint = fmt.Sprintf(" (configure a producer named %q)", k.Producer)
					}
					return nil, l.errAt(l.pluginPath(consumer.Name), fmt.Errorf("%w: plugin %q requires data key %q, which no plugin produces and which has no default producer%s",
						ErrDataDependency, consumer.Name, k.String(), hint))
				}
				if existing := l.plugin(typ); existing != nil {
					if !warned[k] {
						warned[k] = true
						l.warnings = append(l.warnings, fmt.Sprintf("data key %q required by %q has no producer, and the default producer %q was not created because a plugin of type %s already has that name",
							k.String(), consumer.Name, typ, existing.Type()))
					}
					continue
				}
				if _, ok := l.reg.Lookup(typ); !ok {
					return nil, l.errAt(l.pluginPath(consumer.Name), fmt.Errorf("%w: default producer type %q for data key %q (required by %q) is not registered",
						ErrDataDependency, typ, k.String(), consumer.Name))
				}
				if err := l.create(typ, typ, nil, OriginAutoProducer, "plugins"); err != nil {
					return nil, err
				}
				in := &l.infos[len(l.infos)-1]
				if _, ok := in.Plugin.(epp.DataProducer); !ok {
					return nil, l.errAt(l.pluginPath(consumer.Name), fmt.Errorf("%w: default producer %q for data key %q is not a data producer", ErrDataDependency, typ, k.String()))
				}
				in.RequiredBy = fmt.Sprintf("%s (required by %s)", k.String(), consumer.Name)
				l.cfg.Plugins = append(l.cfg.Plugins, PluginSpec{Name: typ, Type: typ})
				created = append(created, typ)
				for _, pk := range producedKeys(in.Plugin) {
					produced[pk] = true
				}
				progress = true
			}
		}
		if !progress {
			return created, nil
		}
	}
}

func (l *loader) pluginPath(name string) string {
	for i, p := range l.cfg.Plugins {
		if p.Name == name {
			return fmt.Sprintf("plugins[%d]", i)
		}
	}
	return "plugins"
}

// orderProducers returns the data producers in execution order: a
// topological order of Required dependencies only (spec §1.3 step 7), ties
// in instantiation order.
func (l *loader) orderProducers() ([]epp.DataProducer, error) {
	var prods []epp.DataProducer
	for _, in := range l.infos {
		if p, ok := in.Plugin.(epp.DataProducer); ok {
			prods = append(prods, p)
		}
	}
	producersOf := map[epp.DataKey][]int{} // in instantiation order
	for j, q := range prods {
		for _, k := range q.Produces() {
			if js := producersOf[k]; len(js) == 0 || js[len(js)-1] != j {
				producersOf[k] = append(js, j)
			}
		}
	}
	deps := make([][]int, len(prods))
	for i, p := range prods {
		seen := map[int]bool{}
		for _, k := range requiredKeys(p) {
			for _, j := range producersOf[k] {
				if j != i && !seen[j] {
					seen[j] = true
					deps[i] = append(deps[i], j)
				}
			}
		}
	}
	order, cyc := topoOrder(len(prods), deps)
	if cyc != nil {
		names := make([]string, len(cyc))
		for k, i := range cyc {
			names[k] = prods[i].Name()
		}
		return nil, l.errAt("plugins", fmt.Errorf("%w: data producers depend on each other in a cycle: %s", ErrDataDependency, strings.Join(names, ", ")))
	}
	out := make([]epp.DataProducer, len(order))
	for k, i := range order {
		out[k] = prods[i]
	}
	return out, nil
}

// topoOrder is Kahn's algorithm over nodes 0..n-1 where deps[i] must come
// before i; among ready nodes the lowest index goes first (a min-heap of
// the ready nodes: O((n + edges) log n)). On a cycle it returns the nodes
// left over (in index order).
func topoOrder(n int, deps [][]int) (order, cycle []int) {
	waiting := make([]int, n)      // unfinished dependencies (repeats counted)
	dependents := make([][]int, n) // the nodes that list i among their deps
	ready := &intHeap{}
	for i := range n {
		waiting[i] = len(deps[i])
		for _, d := range deps[i] {
			dependents[d] = append(dependents[d], i)
		}
		if waiting[i] == 0 {
			ready.push(i)
		}
	}
	order = make([]int, 0, n)
	for ready.len() > 0 {
		next := ready.pop()
		order = append(order, next)
		for _, j := range dependents[next] {
			if waiting[j]--; waiting[j] == 0 {
				ready.push(j)
			}
		}
	}
	if len(order) == n {
		return order, nil
	}
	for i := range n {
		if waiting[i] > 0 {
			cycle = append(cycle, i)
		}
	}
	return nil, cycle
}

// intHeap is a binary min-heap of ints.
type intHeap struct{ a []int }

func (h *intHeap) len() int { return len(h.a) }

func (h *intHeap) push(v int) {
	h.a = append(h.a, v)
	for i := len(h.a) - 1; i > 0; {
		p := (i - 1) / 2
		if h.a[p] <= h.a[i] {
			break
		}
		h.a[p], h.a[i] = h.a[i], h.a[p]
		i = p
	}
}

func (h *intHeap) pop() int {
	top := h.a[0]
	last := len(h.a) - 1
	h.a[0] = h.a[last]
	h.a = h.a[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < last && h.a[l] < h.a[m] {
			m = l
		}
		if r < last && h.a[r] < h.a[m] {
			m = r
		}
		if m == i {
			break
		}
		h.a[i], h.a[m] = h.a[m], h.a[i]
		i = m
	}
	return top
}

// describe fills the derived fields of a PluginInfo.
func (l *loader) describe(in *PluginInfo) {
	p := in.Plugin
	in.Roles = nil
	add := func(ok bool, role string) {
		if ok {
			in.Roles = append(in.Roles, role)
		}
	}
	_, f := p.(epp.Filter)
	_, s := p.(epp.Scorer)
	_, pk := p.(epp.Picker)
	_, ph := p.(epp.ProfileHandler)
	_, pr := p.(epp.DataProducer)
	_, co := p.(epp.DataConsumer)
	_, pre := p.(epp.PreRequestHook)
	_, resp := p.(epp.ResponseHook)
	_, kv := p.(epp.KVEventConsumer)
	add(f, "filter")
	add(s, "scorer")
	add(pk, "picker")
	add(ph, "profile-handler")
	add(pr, "producer")
	add(co, "consumer")
	add(pre, "pre-request")
	add(resp, "response")
	add(kv, "kv-events")
	add(isParser(p), "parser")
	add(isSaturationDetector(p), "saturation-detector")
	in.Produces, in.Requires = nil, nil
	for _, k := range producedKeys(p) {
		in.Produces = append(in.Produces, k.String())
	}
	for _, k := range requiredKeys(p) {
		in.Requires = append(in.Requires, k.String())
	}
	if ns, ok := p.(epp.NotSimulated); ok {
		in.NotSimulated = ns.NotSimulatedReason()
		if r := in.NotSimulated; !strings.HasPrefix(strings.ToLower(r), "not simulated") {
			in.NotSimulated = "not simulated: " + r
		}
	}
}

// reference is one plugin name a plugin's parameters refer to.
type reference struct {
	field string // parameter path, e.g. "deciders.prefill"
	name  string
}

// pluginReferences lists the plugin names a plugin's parameters refer to, for
// the plugin types upstream registers "with plugin dependencies" (fields
// tagged pluginRef): the deciders of disagg-profile-handler and its
// deprecated alias pd-profile-handler, in the nested format
// (deciders.prefill, deciders.encode) and the deprecated flat one
// (deciderPluginName, prefillDeciderPluginName, encodeDeciderPluginName,
// prefixPluginName). Malformed parameters yield no references; the factory
// reports them.
func pluginReferences(typ string, params json.RawMessage) []reference {
	if len(params) == 0 || (typ != TypeDisaggProfileHandler && typ != TypePDProfileHandler) {
		return nil
	}
	var p struct {
		Deciders struct {
			Prefill string `json:"prefill"`
			Encode  string `json:"encode"`
		} `json:"deciders"`
		DeciderPluginName        string `json:"deciderPluginName"`
		PrefillDeciderPluginName string `json:"prefillDeciderPluginName"`
		EncodeDeciderPluginName  string `json:"encodeDeciderPluginName"`
		PrefixPluginName         string `json:"prefixPluginName"`
	}
	if json.Unmarshal(params, &p) != nil {
		return nil
	}
	var refs []reference
	for _, r := range []reference{
		{"deciders.prefill", p.Deciders.Prefill},
		{"deciders.encode", p.Deciders.Encode},
		{"deciderPluginName", p.DeciderPluginName},
		{"prefillDeciderPluginName", p.PrefillDeciderPluginName},
		{"encodeDeciderPluginName", p.EncodeDeciderPluginName},
		{"prefixPluginName", p.PrefixPluginName},
	} {
		if r.name != "" {
			refs = append(refs, r)
		}
	}
	return refs
}

// trimPrefixErr drops a leading `plugin "name" (type typ): ` that factories
// using epp.DecodeParams put in their errors, keeping the error chain.
func trimPrefixErr(err error, name, typ string) error {
	prefix := fmt.Sprintf("plugin %q (type %s): ", name, typ)
	if msg := err.Error(); strings.HasPrefix(msg, prefix) {
		return &trimmedError{msg: strings.TrimPrefix(msg, prefix), err: err}
	}
	return err
}

type trimmedError struct {
	msg string
	err error
}

func (e *trimmedError) Error() string { return e.msg }
func (e *trimmedError) Unwrap() error { return e.err }

// suggest returns the registered type closest to typ by edit distance, if
// it is close enough to be a likely typo.
func suggest(typ string, types []string) string {
	return ClosestName(typ, types, min(3, len(typ)/4))
}

// ClosestName returns the first of names closest to s by edit distance
// (Levenshtein), if within maxDist edits, or "": the "did you mean" of
// error messages that name plugins (here) or sweep parameters.
func ClosestName(s string, names []string, maxDist int) string {
	return closest.Closest(s, names, maxDist)
}

// Release is the Options.Release the configuration was loaded with.
func (l *Loaded) Release() string { return l.opts.Release }

// MigrationWarnings are the warnings that name the translations made to
// an older configuration (every one, the apiVersion's included), and the
// note that a release option changed nothing; none for a configuration of
// today's schema loaded without a release.
func (l *Loaded) MigrationWarnings() []string { return l.migrationWarnings }
