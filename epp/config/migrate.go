package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/eppsim/eppsim/epp/producer"
)

// Older configurations. The llm-d benchmarks of July–September 2025
// (../shared/benchmarks) were run with llm-d-inference-scheduler v0.2.x on
// gateway-api-inference-extension (GIE) v0.5.x; their configs use names
// and parameters that llm-d-router ebab687 no longer has. Load translates
// them to today's schema in memory and warns with one line per
// translation; Migrate writes the translated document. What is translated:
//
//   - apiVersion inference.networking.x-k8s.io/v1alpha1 → llm-d.ai/v1alpha1
//     (GIE's group; ebab687 still accepts it with a deprecation warning).
//   - kv-cache-scorer → kv-cache-utilization-scorer (GIE #1238, first
//     released in GIE v1.0.0, which llm-d-inference-scheduler v0.3.0 built
//     on); same score, 1 − KV-cache usage.
//   - prefix-cache-scorer with v0.2.x parameters
//     (pkg/plugins/scorer/prefix_cache.go @ llm-d-inference-scheduler
//     v0.2.1: mode estimate, the default, with hashBlockSize /
//     maxPrefixBlocksToMatch / lruCapacityPerServer; or mode cache_tracking
//     with indexerConfig / kvEventsConfig):
//     estimate → prefix-cache-scorer + approx-prefix-cache-producer with
//     the same characters per block, prompt span and LRU span at 4
//     characters per estimate token; cache_tracking →
//     precise-prefix-cache-scorer, the type v0.3.0 split it into
//     (llm-d-inference-scheduler #323). Both change behaviour, and say so;
//     Options.Release = ReleaseLLMDv02 instead gives the scorer the type
//     llm-d-v0.2-prefix-cache-scorer, eppsim's model of the v0.2.x plugin
//     (epp/producer V02PrefixCacheScorerType), parameters unchanged.
//
// A v0.2.x prefix-cache-scorer without parameters is estimate mode with
// defaults; it is translated when the document is of that era beyond
// doubt (the old apiVersion and a kv-cache-scorer or another v0.2.x
// prefix-cache-scorer) or with the release option; otherwise the same
// entry is valid today and loads as before.

// ReleaseLLMDv02 names llm-d-inference-scheduler v0.2.0/v0.2.1 (GIE
// v0.5.0/v0.5.1, kv-cache-manager v0.2.0): `--epp-release llm-d-v0.2`.
const ReleaseLLMDv02 = "llm-d-v0.2"

// Releases are the values of Options.Release with what each models.
var Releases = map[string]string{
	ReleaseLLMDv02: "an old config's prefix-cache-scorer behaves as in llm-d-inference-scheduler v0.2.x (GIE v0.5.1 character-hashing estimate; cache_tracking scored min-max as v0.2.1), instead of translating to today's producers",
}

// ErrOldSchema: an older configuration that cannot be translated.
var ErrOldSchema = errors.New("older schema")

// Translation is one change made to an older configuration.
type Translation struct {
	// Line and Path locate what was translated in the original document
	// (Line 0 when unknown).
	Line int    `json:"line,omitempty"`
	Path string `json:"path"`
	// Text says what was done and which upstream release made the change.
	Text string `json:"text"`
	// Differs, when set, says how the translated configuration behaves
	// differently and which option reproduces the old release.
	Differs string `json:"differs,omitempty"`
	// at is where Migrate's output puts the comment ("" = the top).
	at string
	// api marks the apiVersion translation, which Load already warns of.
	api bool
}

// String is "line N: TEXT[; behaviour differs: DIFFERS]".
func (t Translation) String() string {
	s := t.Text
	if t.Line > 0 {
		s = "line " + strconv.Itoa(t.Line) + ": " + s
	}
	if t.Differs != "" {
		s += "; behaviour differs: " + t.Differs
	}
	return s
}

// v0.2.x prefix-cache-scorer parameter names, with their nested fields
// (kv-cache-manager v0.2.0 kvcache.Config, kvevents.Config); nil = any.
var v02PrefixSchema = schema{
	"mode": nil, "hashBlockSize": nil, "maxPrefixBlocksToMatch": nil, "lruCapacityPerServer": nil,
	"indexerConfig": {
		"prefixStoreConfig":    nil,
		"tokenProcessorConfig": {"blockSize": nil, "hashSeed": nil},
		"kvBlockIndexConfig": {
			"inMemoryConfig": {"size": nil, "podCacheSize": nil}, "redisConfig": nil,
			"enableMetrics": nil, "metricsLoggingInterval": nil,
		},
		"tokenizersPoolConfig": nil,
	},
	"kvEventsConfig": {"zmqEndpoint": nil, "topicFilter": nil, "concurrency": nil},
}

// todayPrefixKeys are prefix-cache-scorer's parameters at ebab687.
var todayPrefixKeys = []string{"prefixMatchInfoProducerName", "matchLengthWeight", "matchLengthScaleTokens"}

type schema map[string]schema

// unknownKey returns the dotted path of the first key (in sorted order) of
// the JSON object raw that s lacks, or "".
func (s schema) unknownKey(raw json.RawMessage) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return ""
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		sub, ok := s[k]
		if !ok {
			return k
		}
		if sub != nil {
			if u := sub.unknownKey(m[k]); u != "" {
				return k + "." + u
			}
		}
	}
	return ""
}

// migration carries one translation pass.
type migration struct {
	cfg     *EndpointPickerConfig
	lines   *lineIndex
	file    string
	release string
	out     []Translation
	names   map[string]bool // plugin names in use (explicit or defaulted)
}

func (m *migration) errAt(path string, err error) error {
	line := 0
	for p := path; p != "" && line == 0; p = parentOf(p) {
		line = m.lines.line(p)
	}
	return &Error{File: m.file, Line: line, Path: path, Err: err}
}

func (m *migration) add(path, at, text, differs string) {
	line := 0
	for p := path; p != "" && line == 0; p = parentOf(p) {
		line = m.lines.line(p)
	}
	m.out = append(m.out, Translation{Line: line, Path: path, Text: text, Differs: differs, at: at})
}

// migrate translates an older configuration in place (see the comment at
// the top of this file). oldAPI tells that the document had the
// deprecated apiVersion. It returns the translations made, none for a
// document of today's schema (which it leaves untouched).
func migrate(cfg *EndpointPickerConfig, lines *lineIndex, file string, oldAPI bool, release string) ([]Translation, error) {
	if release != "" {
		if _, ok := Releases[release]; !ok {
			return nil, fmt.Errorf("epp config: unknown release %q (have %s)", release, strings.Join(slices.Sorted(maps.Keys(Releases)), ", "))
		}
	}
	m := &migration{cfg: cfg, lines: lines, file: file, release: release, names: map[string]bool{}}
	for _, p := range cfg.Plugins {
		m.names[nameOrType(p)] = true
	}
	if oldAPI {
		m.add("apiVersion", "apiVersion", "apiVersion "+DeprecatedAPIVersion+" → "+APIVersion+" (GIE's API group; llm-d-router's config group is llm-d.ai, which ebab687 prefers)", "")
		m.out[len(m.out)-1].api = true
	}
	// A bare prefix-cache-scorer is v0.2.x's estimate mode with defaults
	// only in a document of that era: the old apiVersion and either the
	// release option or another plugin that exists in no later schema.
	bareIsOld := false
	if oldAPI {
		bareIsOld = release != ""
		for _, p := range cfg.Plugins {
			bareIsOld = bareIsOld || p.Type == "kv-cache-scorer" || p.Type == "prefix-cache-scorer" && hasV02Keys(p.Parameters)
		}
	}
	n := len(cfg.Plugins)
	for i := 0; i < n; i++ {
		p := &cfg.Plugins[i]
		path := fmt.Sprintf("plugins[%d]", i)
		switch p.Type {
		case "kv-cache-scorer":
			m.retype(i, "kv-cache-utilization-scorer")
			m.add(path+".type", path, "plugin type kv-cache-scorer → kv-cache-utilization-scorer (renamed by GIE #1238, first released in GIE v1.0.0, the base of llm-d-inference-scheduler v0.3.0; same score, 1 − KV-cache usage)", "")
		case "prefix-cache-scorer":
			if err := m.prefix(i, bareIsOld); err != nil {
				return nil, err
			}
		}
	}
	return m.out, nil
}

func nameOrType(p PluginSpec) string {
	if p.Name != "" {
		return p.Name
	}
	return p.Type
}

// retype gives plugin i the type typ. A plugin whose name defaulted to its
// old type gets the new type's name and its profile references follow,
// unless that name is taken; then the old name is kept explicitly.
func (m *migration) retype(i int, typ string) {
	p := &m.cfg.Plugins[i]
	old := p.Type
	p.Type = typ
	if p.Name != "" {
		return
	}
	if m.names[typ] || m.referencedOutsideProfiles(old) {
		p.Name = old
		return
	}
	delete(m.names, old)
	m.names[typ] = true
	for pi := range m.cfg.SchedulingProfiles {
		for j := range m.cfg.SchedulingProfiles[pi].Plugins {
			if r := &m.cfg.SchedulingProfiles[pi].Plugins[j]; r.PluginRef == old {
				r.PluginRef = typ
			}
		}
	}
}

// referencedOutsideProfiles reports whether name is referenced anywhere
// but a scheduling profile (a data-layer source, a parser, a saturation
// detector, a plugin's parameters): retype then keeps the name.
func (m *migration) referencedOutsideProfiles(name string) bool {
	c := *m.cfg
	c.SchedulingProfiles = nil
	c.Plugins = nil
	raw, _ := json.Marshal(c)
	for _, p := range m.cfg.Plugins {
		raw = append(raw, p.Parameters...)
	}
	return bytes.Contains(raw, []byte(strconv.Quote(name)))
}

// hasV02Keys reports whether params (a JSON object) has a v0.2.x
// prefix-cache-scorer parameter.
func hasV02Keys(params json.RawMessage) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(orEmpty(params), &m) != nil {
		return false
	}
	for k := range m {
		if _, ok := v02PrefixSchema[k]; ok {
			return true
		}
	}
	return false
}

// prefix translates a v0.2.x prefix-cache-scorer at plugins[i]; bareIsOld
// says that one without parameters is v0.2.x's too.
func (m *migration) prefix(i int, bareIsOld bool) error {
	p := &m.cfg.Plugins[i]
	path := fmt.Sprintf("plugins[%d]", i)
	ppath := path + ".parameters"
	var params map[string]json.RawMessage
	if len(p.Parameters) > 0 && string(p.Parameters) != "null" {
		if err := json.Unmarshal(p.Parameters, &params); err != nil {
			return nil // not an object: today's factory reports it
		}
	}
	old, today := []string{}, []string{}
	for _, k := range slices.Sorted(maps.Keys(params)) {
		if _, ok := v02PrefixSchema[k]; ok {
			old = append(old, k)
		} else if slices.Contains(todayPrefixKeys, k) {
			today = append(today, k)
		}
	}
	switch {
	case len(old) == 0 && !(len(params) == 0 && bareIsOld):
		return nil // today's prefix-cache-scorer
	case len(today) > 0:
		return m.errAt(ppath+"."+today[0], fmt.Errorf("%w: prefix-cache-scorer mixes llm-d-inference-scheduler v0.2.x parameters (%s) with today's (%s): keep one set (translate the v0.2.x ones with `eppsim epp migrate`)",
			ErrOldSchema, strings.Join(old, ", "), strings.Join(today, ", ")))
	}
	if u := v02PrefixSchema.unknownKey(p.Parameters); u != "" {
		return m.errAt(ppath+"."+u, fmt.Errorf("%w: prefix-cache-scorer parameter %s is not one llm-d-inference-scheduler v0.2.x knew (it ignored unknown fields): delete it or correct its spelling", ErrOldSchema, u))
	}
	var v producer.V02PrefixParams
	dec := json.NewDecoder(bytes.NewReader(orEmpty(p.Parameters)))
	if err := dec.Decode(&v); err != nil {
		return m.errAt(ppath, fmt.Errorf("%w: prefix-cache-scorer (v0.2.x parameters): %w", ErrOldSchema, err))
	}
	mode := v.Mode
	if mode == "" {
		mode = producer.V02ModeEstimate
	}
	if mode != producer.V02ModeEstimate && mode != producer.V02ModeCacheTracking {
		return m.errAt(ppath+".mode", fmt.Errorf("%w: prefix-cache-scorer mode %q: v0.2.x had estimate (the default) and cache_tracking", ErrOldSchema, v.Mode))
	}
	if err := m.checkV02(ppath, mode, params, v); err != nil {
		return err
	}
	if _, err := producer.NewV02Prefix(nameOrType(*p), v); err != nil {
		return m.errAt(ppath, fmt.Errorf("%w: prefix-cache-scorer (v0.2.x %s mode): %w", ErrOldSchema, mode, err))
	}
	if m.release == ReleaseLLMDv02 {
		if p.Name == "" {
			p.Name = p.Type // the profiles refer to it by that name
		}
		p.Type = producer.V02PrefixCacheScorerType
		text := fmt.Sprintf("plugin type prefix-cache-scorer (%s mode) → %s: eppsim's model of llm-d-inference-scheduler v0.2.x's scorer (--epp-release %s), parameters unchanged", mode, producer.V02PrefixCacheScorerType, ReleaseLLMDv02)
		if mode == producer.V02ModeCacheTracking {
			bs := 16
			if v.IndexerConfig != nil && v.IndexerConfig.TokenProcessorConfig != nil && v.IndexerConfig.TokenProcessorConfig.BlockSize != 0 {
				bs = v.IndexerConfig.TokenProcessorConfig.BlockSize
			}
			text += fmt.Sprintf("; v0.2.0 looked up the engines' own block hashes, so it matches only replicas whose vLLM block size is %d (--block-size %d)", bs, bs)
		}
		m.add(path+".type", path, text, "")
		return nil
	}
	if mode == producer.V02ModeCacheTracking {
		return m.cacheTracking(i, v)
	}
	return m.estimate(i, v)
}

func orEmpty(b json.RawMessage) []byte {
	if len(b) == 0 || string(b) == "null" {
		return []byte("{}")
	}
	return b
}

// checkV02 refuses the v0.2.x parameters eppsim cannot give a meaning:
// another mode's parameters (v0.2.x ignored them) and non-positive block
// sizes or limits (v0.2.x looped forever on a block size of 0 and matched
// only the model's block with a limit of 0), naming the field.
func (m *migration) checkV02(ppath, mode string, params map[string]json.RawMessage, v producer.V02PrefixParams) error {
	other := []string{"indexerConfig", "kvEventsConfig"}
	owner := producer.V02ModeCacheTracking
	if mode == producer.V02ModeCacheTracking {
		other = []string{"hashBlockSize", "maxPrefixBlocksToMatch", "lruCapacityPerServer"}
		owner = producer.V02ModeEstimate
	}
	for _, k := range other {
		if _, ok := params[k]; ok {
			return m.errAt(ppath+"."+k, fmt.Errorf("%w: prefix-cache-scorer parameter %s belongs to mode %s; v0.2.x ignored it in mode %s: delete it", ErrOldSchema, k, owner, mode))
		}
	}
	if mode != producer.V02ModeEstimate {
		return nil
	}
	for _, f := range []struct {
		key string
		v   *int
		def int
	}{{"hashBlockSize", v.HashBlockSize, producer.V02DefaultHashBlockSize}, {"maxPrefixBlocksToMatch", v.MaxPrefixBlocksToMatch, producer.V02DefaultMaxPrefixBlocks}} {
		if f.v != nil && *f.v <= 0 {
			return m.errAt(ppath+"."+f.key, fmt.Errorf("%w: prefix-cache-scorer %s must be > 0, got %d: set a positive value (the v0.2.x default is %d)", ErrOldSchema, f.key, *f.v, f.def))
		}
	}
	return nil
}

// freeName returns want if no plugin uses it, else want-2, want-3, ...
func (m *migration) freeName(want string) string {
	name := want
	for k := 2; m.names[name]; k++ {
		name = want + "-" + strconv.Itoa(k)
	}
	m.names[name] = true
	return name
}

// ceilDiv is ⌈a/b⌉ for a ≥ 0, b > 0.
func ceilDiv(a, b int) int {
	if a <= 0 {
		return 0
	}
	return (a-1)/b + 1
}

// mulCeilDiv is ⌈a·b/d⌉ for positive a, b, d, saturating rather than
// overflowing.
func mulCeilDiv(a, b, d int) int {
	const limit = 1 << 40
	if a > limit/b {
		return limit / d
	}
	return ceilDiv(a*b, d)
}

// estimate translates estimate mode to today's split.
func (m *migration) estimate(i int, v producer.V02PrefixParams) error {
	p := &m.cfg.Plugins[i]
	path := fmt.Sprintf("plugins[%d]", i)
	est, _ := producer.NewV02Estimate(nameOrType(*p), v) // validated by prefix
	chars, maxBlocks, capacity := est.Params()
	tokens := ceilDiv(chars, 4)
	eff := max(tokens, producer.MinApproxBlockSizeTokens)
	maxTokens := max(mulCeilDiv(maxBlocks, chars, 4), eff)
	lru := max(1, mulCeilDiv(capacity, chars, 4*eff))
	prod := m.freeName(producer.ApproxPrefixType)
	params := map[string]any{"autoTune": false, "blockSizeTokens": tokens, "maxPrefixTokensToMatch": maxTokens, "lruCapacityPerServer": lru}
	raw, err := marshalOrdered(params, "autoTune", "blockSizeTokens", "maxPrefixTokensToMatch", "lruCapacityPerServer")
	if err != nil {
		return m.errAt(path, err)
	}
	spec := PluginSpec{Type: producer.ApproxPrefixType, Parameters: raw}
	if prod != producer.ApproxPrefixType {
		spec.Name = prod
	}
	p.Parameters = nil
	if prod != producer.ApproxPrefixType {
		p.Parameters, _ = marshalOrdered(map[string]any{"prefixMatchInfoProducerName": prod}, "prefixMatchInfoProducerName")
	}
	m.cfg.Plugins = append(m.cfg.Plugins, spec)
	out := fmt.Sprintf("plugins[%d]", len(m.cfg.Plugins)-1)
	clamp := ""
	if eff != tokens {
		clamp = fmt.Sprintf(" (raised to %d tokens = %d characters at request time)", eff, eff*4)
	}
	m.add(path+".parameters", path, fmt.Sprintf("prefix-cache-scorer estimate mode (hashBlockSize %d characters, maxPrefixBlocksToMatch %d, lruCapacityPerServer %d) → prefix-cache-scorer reading %s (%s: autoTune false, blockSizeTokens %d%s, maxPrefixTokensToMatch %d, lruCapacityPerServer %d: the same prompt span and LRU span in characters at 4 characters per estimate token); llm-d-router split the estimator into that producer",
		chars, maxBlocks, capacity, prod, out, tokens, clamp, maxTokens, lru), fmt.Sprintf(
		"v0.2.x hashed %d-character blocks of the chat-templated prompt string (GIE v0.5.1), with a block for the model name, no partial last block, no hashes for a prompt shorter than one block, and the first 8 characters of every later block overwritten; today's producer hashes blocks of at least 64 estimate tokens of the role+content bytes and keeps a partial last block; --epp-release %s reproduces v0.2.x", chars, ReleaseLLMDv02))
	m.out[len(m.out)-1].at = path
	return nil
}

// cacheTracking translates cache_tracking mode to precise-prefix-cache-scorer.
func (m *migration) cacheTracking(i int, v producer.V02PrefixParams) error {
	p := &m.cfg.Plugins[i]
	path := fmt.Sprintf("plugins[%d]", i)
	type kv = struct {
		k string
		v any
	}
	var top []kv
	var dropped []string
	var tp []kv
	bs, seed := 16, ""
	if ic := v.IndexerConfig; ic != nil {
		if t := ic.TokenProcessorConfig; t != nil {
			if t.BlockSize != 0 {
				bs = t.BlockSize
			}
			seed = t.HashSeed
		}
		if len(ic.PrefixStoreConfig) > 0 {
			dropped = append(dropped, "indexerConfig.prefixStoreConfig (v0.2.0's cache of tokenized prompt text; the engine's tokens are used now)")
		}
		if len(ic.TokenizersPoolConfig) > 0 {
			dropped = append(dropped, "indexerConfig.tokenizersPoolConfig (tokenization is a token-producer's now)")
		}
	}
	tp = append(tp, kv{"blockSizeTokens", bs})
	if seed != "" {
		tp = append(tp, kv{"hashSeed", seed})
	}
	top = append(top, kv{"tokenProcessorConfig", tp})
	var orig, oic, okb map[string]json.RawMessage
	_ = json.Unmarshal(orEmpty(p.Parameters), &orig)
	_ = json.Unmarshal(orEmpty(orig["indexerConfig"]), &oic)
	_ = json.Unmarshal(orEmpty(oic["kvBlockIndexConfig"]), &okb)
	ic := []kv{}
	if okb != nil {
		sub := []kv{}
		for _, k := range []string{"inMemoryConfig", "redisConfig", "enableMetrics", "metricsLoggingInterval"} {
			if r, ok := okb[k]; ok {
				x, err := jsonToYAML(r)
				if err != nil {
					return m.errAt(path+".parameters.indexerConfig.kvBlockIndexConfig."+k, fmt.Errorf("%w: %w", ErrOldSchema, err))
				}
				sub = append(sub, kv{k, x})
			}
		}
		ic = append(ic, kv{"kvBlockIndexConfig", sub})
	}
	top = append(top, kv{"indexerConfig", ic})
	if r, ok := orig["kvEventsConfig"]; ok {
		x, err := jsonToYAML(r)
		if err != nil {
			return m.errAt(path+".parameters.kvEventsConfig", fmt.Errorf("%w: %w", ErrOldSchema, err))
		}
		top = append(top, kv{"kvEventsConfig", x})
	}
	var enc func(v any) any
	enc = func(v any) any {
		if l, ok := v.([]kv); ok {
			out := yamlMapSlice{}
			for _, e := range l {
				out = append(out, yamlMapItem{Key: e.k, Value: enc(e.v)})
			}
			return out
		}
		return v
	}
	raw, err := yamlToJSON(enc(top))
	if err != nil {
		return m.errAt(path, err)
	}
	m.retype(i, producer.PrecisePrefixScorerType)
	p.Parameters = raw
	text := fmt.Sprintf("prefix-cache-scorer cache_tracking mode → precise-prefix-cache-scorer (split out by llm-d-inference-scheduler #323, first released in v0.3.0; tokenProcessorConfig.blockSize %d → blockSizeTokens)", bs)
	if len(dropped) > 0 {
		text += "; dropped " + strings.Join(dropped, ", ")
	}
	m.add(path+".parameters.mode", path, text, fmt.Sprintf(
		"v0.2.1 min-max normalised the pods' matched block counts (the best pod 1, the least-matching pod with a hit 0) where today's scorer gives matched/total blocks; v0.2.0 matched the engines' own block hashes, so its blockSize and hashSeed had to equal vLLM's block size and PYTHONHASHSEED, where today's index recomputes keys from the events' tokens; --epp-release %s reproduces the v0.2.1 score", ReleaseLLMDv02))
	return nil
}

// marshalOrdered writes m as a JSON object with keys in the given order.
func marshalOrdered(m map[string]any, keys ...string) (json.RawMessage, error) {
	out := yamlMapSlice{}
	for _, k := range keys {
		out = append(out, yamlMapItem{Key: k, Value: m[k]})
	}
	return yamlToJSON(out)
}

// MigrateOptions control Migrate.
type MigrateOptions struct {
	// File names the document in errors and in the output's header.
	File string
	// Release, when set, translates to eppsim's model of that release
	// (Releases) instead of today's plugins.
	Release string
}

// Migration is Migrate's result.
type Migration struct {
	// YAML is the translated document with a comment above each
	// translated entry (the input unchanged when nothing was translated).
	YAML         []byte
	Translations []Translation
}

// Migrate translates an older EndpointPickerConfig to today's schema (see
// the comment at the top of this file). Errors name file, line and field,
// and say what translation to apply by hand.
func Migrate(data []byte, opts MigrateOptions) (*Migration, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, &Error{File: opts.File, Err: fmt.Errorf("%w: empty document (an empty config is the built-in default; nothing to migrate)", ErrSyntax)}
	}
	d, err := decode(data, opts.File)
	if err != nil {
		return nil, err
	}
	trans, err := migrate(d.cfg, d.lines, opts.File, d.oldAPI, opts.Release)
	if err != nil {
		return nil, err
	}
	if len(trans) == 0 {
		return &Migration{YAML: bytes.Clone(data)}, nil
	}
	body, err := Marshal(d.cfg)
	if err != nil {
		return nil, err
	}
	idx := buildLineIndex(body)
	comments := map[int][]string{}
	var head []string
	for _, t := range trans {
		line := idx.line(t.at)
		c := "eppsim epp migrate: " + t.String()
		if line == 0 {
			head = append(head, c)
			continue
		}
		comments[line] = append(comments[line], c)
	}
	var b bytes.Buffer
	src := opts.File
	if src == "" {
		src = "the input"
	}
	fmt.Fprintf(&b, "# Translated from %s by eppsim epp migrate: %d translation(s), each named above what it changed.\n", src, len(trans))
	for _, c := range head {
		writeComment(&b, "", c)
	}
	for i, line := range bytes.SplitAfter(body, []byte("\n")) {
		if cs := comments[i+1]; len(cs) > 0 {
			indent := string(line[:len(line)-len(bytes.TrimLeft(line, " "))])
			for _, c := range cs {
				writeComment(&b, indent, c)
			}
		}
		b.Write(line)
	}
	return &Migration{YAML: b.Bytes(), Translations: trans}, nil
}

// writeComment writes c as "# " comment lines at indent, wrapped at about
// 100 columns on spaces.
func writeComment(b *bytes.Buffer, indent, c string) {
	const width = 100
	words := strings.Fields(c)
	line := indent + "#"
	for _, w := range words {
		if len(line)+1+len(w) > width && line != indent+"#" {
			b.WriteString(line + "\n")
			line = indent + "#  "
		}
		line += " " + w
	}
	b.WriteString(line + "\n")
}

// MigrateFile reads path (at most 16 MiB, as LoadFile) and migrates it;
// opts.File defaults to path.
func MigrateFile(path string, opts MigrateOptions) (*Migration, error) {
	data, err := readFile(path, maxFileBytes)
	if err != nil {
		return nil, err
	}
	if opts.File == "" {
		opts.File = path
	}
	return Migrate(data, opts)
}
