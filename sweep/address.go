package sweep

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eppsim/eppsim/epp/config"
	"github.com/eppsim/eppsim/epp/plugins"
	"github.com/eppsim/eppsim/scenario"
	"github.com/eppsim/eppsim/sim"
)

// base is a sweep's base EPP configuration: the effective configuration
// (all defaults applied) of --epp-config, which every point copies and
// modifies.
type base struct {
	source string
	// builtin is the baseline name when the base is one ("" otherwise).
	builtin string
	cfg     *config.EndpointPickerConfig
	yaml    []byte
	// scorerProfiles maps a plugin name to the profiles that use it as a
	// scorer; plugins lists every plugin name.
	scorerProfiles map[string][]string
	weights        map[string]float64 // a scorer's weight in its first profile
	plugins        []string
}

// loadBase loads e and records what the sweep can address in it.
func loadBase(e scenario.EPP) (*base, error) {
	l, err := e.Load(1)
	if err != nil {
		return nil, fmt.Errorf("--epp-config: %w", err)
	}
	b, err := newBase(l.Config)
	if err != nil {
		return nil, fmt.Errorf("--epp-config: %w", err)
	}
	b.source = e.Source
	if e.YAML == nil && scenario.IsBuiltin(e.Source) && e.Source != "default" {
		b.builtin = e.Source
	}
	return b, nil
}

// baseFromYAML rebuilds a base from its effective configuration (as a
// points file stores it).
func baseFromYAML(y []byte, builtin string) (*base, error) {
	l, err := config.Load(y, config.Options{Registry: plugins.Builtin(), File: "base EPP config"})
	if err != nil {
		return nil, err
	}
	b, err := newBase(l.Config)
	if err != nil {
		return nil, err
	}
	b.builtin = builtin
	return b, nil
}

// newBase indexes an effective configuration. Profiles' scorers are found
// by loading it, so that "is a scorer" means what the EPP makes of it.
func newBase(cfg *config.EndpointPickerConfig) (*base, error) {
	y, err := config.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	l, err := config.Load(y, config.Options{Registry: plugins.Builtin(), File: "base EPP config"})
	if err != nil {
		return nil, err
	}
	b := &base{cfg: l.Config, yaml: y, scorerProfiles: map[string][]string{}, weights: map[string]float64{}}
	if b.yaml, err = config.Marshal(b.cfg); err != nil {
		return nil, err
	}
	for _, p := range l.Profiles {
		for _, s := range p.Scorers {
			if _, ok := b.weights[s.Name]; !ok {
				b.weights[s.Name] = s.Weight
			}
			b.scorerProfiles[s.Name] = append(b.scorerProfiles[s.Name], p.Name)
		}
	}
	for _, p := range b.cfg.Plugins {
		b.plugins = append(b.plugins, p.Name)
	}
	return b, nil
}

// clone returns a deep copy of the base configuration.
func (b *base) clone() (*config.EndpointPickerConfig, error) {
	raw, err := json.Marshal(b.cfg)
	if err != nil {
		return nil, fmt.Errorf("copying the base config: %w", err)
	}
	var c config.EndpointPickerConfig
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("copying the base config: %w", err)
	}
	return &c, nil
}

// check reports whether d addresses something in the base configuration.
func (b *base) check(d Dim) error {
	if d.kind != kindWeight && d.kind != kindParam {
		return nil
	}
	if !slices.Contains(b.plugins, d.plugin) {
		return fmt.Errorf("unknown plugin %q%s (plugins of the effective config: %s)", d.plugin, suggestName(d.plugin, b.plugins),
			strings.Join(b.plugins, ", "))
	}
	if d.kind == kindWeight && len(b.scorerProfiles[d.plugin]) == 0 {
		var scorers []string
		for name := range b.scorerProfiles {
			scorers = append(scorers, name)
		}
		slices.Sort(scorers)
		return fmt.Errorf("plugin %q is not a scorer in any scheduling profile, so it has no weight (scorers: %s)",
			d.plugin, strings.Join(scorers, ", "))
	}
	return nil
}

// apply sets d's value v in cfg.
func (b *base) apply(cfg *config.EndpointPickerConfig, d Dim, v string) error {
	switch d.kind {
	case kindWeight:
		w, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("%s: weight %q: %w", d.Name, v, err)
		}
		for _, prof := range b.scorerProfiles[d.plugin] {
			if err := config.SetWeight(cfg, prof, d.plugin, w); err != nil {
				return fmt.Errorf("%s: %w", d.Name, err)
			}
		}
		return nil
	case kindParam:
		for i := range cfg.Plugins {
			if cfg.Plugins[i].Name != d.plugin {
				continue
			}
			raw, err := setJSONPath(cfg.Plugins[i].Parameters, d.path, paramJSON(v))
			if err != nil {
				return fmt.Errorf("%s: %w", d.Name, err)
			}
			cfg.Plugins[i].Parameters = raw
			return nil
		}
		return fmt.Errorf("%s: unknown plugin %q", d.Name, d.plugin)
	}
	return nil
}

// configFor returns the base configuration with values (aligned with
// dims) applied to the plugin dimensions, and its YAML.
func (b *base) configFor(dims []Dim, values []string) (*config.EndpointPickerConfig, []byte, error) {
	cfg, err := b.clone()
	if err != nil {
		return nil, nil, err
	}
	for i, d := range dims {
		if err := b.apply(cfg, d, values[i]); err != nil {
			return nil, nil, err
		}
	}
	y, err := config.Marshal(cfg)
	if err != nil {
		return nil, nil, err
	}
	return cfg, y, nil
}

// validate loads y as a point's configuration would be loaded.
func validateConfig(y []byte, name string) error {
	_, err := config.Load(y, config.Options{Registry: plugins.Builtin(), File: name})
	return err
}

// setJSONPath sets path inside the JSON object raw to val, keeping the
// order of existing keys and adding missing ones (and missing
// intermediate objects) at the end.
func setJSONPath(raw json.RawMessage, path []string, val json.RawMessage) (json.RawMessage, error) {
	if len(path) == 0 {
		return val, nil
	}
	fields, err := decodeObject(raw)
	if err != nil {
		return nil, err
	}
	for i := range fields {
		if fields[i].key == path[0] {
			if t := bytes.TrimSpace(fields[i].val); len(path) > 1 && len(t) > 0 && t[0] != '{' && string(t) != "null" {
				return nil, fmt.Errorf("parameter %q is %s, %w", path[0], t, errNotObject)
			}
			nv, err := setJSONPath(fields[i].val, path[1:], val)
			if err != nil {
				return nil, err
			}
			fields[i].val = nv
			return encodeObject(fields)
		}
	}
	nv, err := setJSONPath(nil, path[1:], val)
	if err != nil {
		return nil, err
	}
	return encodeObject(append(fields, jsonField{path[0], nv}))
}

type jsonField struct {
	key string
	val json.RawMessage
}

// errNotObject is wrapped when a parameter path goes through a value that
// is not an object.
var errNotObject = errors.New("not an object")

// decodeObject splits a JSON object into its fields in order; empty input
// and null are the empty object.
func decodeObject(raw json.RawMessage) ([]jsonField, error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return nil, nil
	}
	if t[0] != '{' {
		return nil, fmt.Errorf("parameters are %s, %w", t, errNotObject)
	}
	dec := json.NewDecoder(bytes.NewReader(t))
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("parameters: %w", err)
	}
	var out []jsonField
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("parameters: %w", err)
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("parameters: %w", err)
		}
		out = append(out, jsonField{key, v})
	}
	return out, nil
}

func encodeObject(fields []jsonField) (json.RawMessage, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range fields {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(f.key)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		if err := json.Compact(&b, f.val); err != nil {
			return nil, fmt.Errorf("parameter %s: %w", f.key, err)
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// uniformFleet reports whether every replica has the same preset and no
// labels (a fleet --replicas/--preset builds), which --vary replicas can
// resize.
func uniformFleet(fleet []sim.ReplicaSpec) bool {
	for _, r := range fleet {
		if len(r.Labels) > 0 || !reflect.DeepEqual(r.Preset, fleet[0].Preset) {
			return false
		}
	}
	return len(fleet) > 0
}

// applyKnobs applies the knob dimensions' values to a copy of spec.
// replicas is applied first, so engine knobs reach every new replica.
func applyKnobs(spec *scenario.Spec, dims []Dim, values []string) (*scenario.Spec, error) {
	s := *spec
	s.Fleet = slices.Clone(spec.Fleet)
	for i, d := range dims {
		if d.Name == "replicas" {
			n, err := strconv.Atoi(values[i])
			if err != nil {
				return nil, fmt.Errorf("replicas %q: %w", values[i], err)
			}
			if !uniformFleet(s.Fleet) {
				return nil, errors.New("--vary replicas needs a uniform fleet (--replicas/--preset, not a --fleet file with groups or labels)")
			}
			s.Fleet = sim.UniformFleet(n, s.Fleet[0].Preset)
		}
	}
	for i, d := range dims {
		v := values[i]
		switch d.kind {
		case kindInt:
			n, err := strconv.Atoi(v)
			if err != nil {
				return nil, fmt.Errorf("%s %q: %w", d.Name, v, err)
			}
			for j := range s.Fleet {
				e := &s.Fleet[j].Preset.Engine
				switch d.Name {
				case "num-gpu-blocks-override", "kv-blocks":
					e.NumGPUBlocksOverride = n
				case "max-num-seqs":
					e.MaxNumSeqs = n
				case "max-num-batched-tokens", "max-batched-tokens":
					e.MaxNumBatchedTokens = n
				case "block-size":
					e.BlockSize = n
				}
			}
		case kindUint:
			u, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s %q: %w", d.Name, v, err)
			}
			s.Env.Seed, s.Workload.Seed = u, int64(u)
		case kindDuration:
			dur, err := time.ParseDuration(v)
			if err != nil {
				return nil, fmt.Errorf("%s %q: %w", d.Name, v, err)
			}
			switch d.Name {
			case "kv-event-lag":
				s.Env.KVEventLag = int64(dur)
			case "refresh-metrics-interval":
				s.Env.ScrapeInterval = int64(dur)
			case "epp-latency":
				s.Env.EPPLatency = int64(dur)
			case "network-latency":
				s.Env.NetworkLatency = int64(dur)
			}
		}
	}
	return &s, nil
}

// suggestName returns ` (did you mean "x"?)` for the closest of names
// within edit distance 3, or "".
func suggestName(s string, names []string) string {
	best := config.ClosestName(s, names, 3)
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}
