package workload

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// InferencePerfConfig is what eppsim reads of an inference-perf
// (kubernetes-sigs/inference-perf) configuration: the sections that decide
// the traffic (api, data, load, server). ParseInferencePerf fills the
// defaults inference-perf gives absent fields; docs/workloads.md
// ("inference-perf configs") describes every field and how eppsim turns it
// into requests.
type InferencePerfConfig struct {
	File   string // name used in error messages
	API    InferencePerfAPI
	Data   InferencePerfData
	Load   InferencePerfLoad
	Server InferencePerfServer
	// Headers are api.headers, sent with every request (keys lower-cased):
	// an InferenceObjective or fairness ID header reaches the EPP's flow
	// control (flow-control.md §2).
	Headers map[string]string
	// Notes name keys that were read but change nothing (the legacy
	// shared_prefix keys); callers may show them to the user.
	Notes []string
}

// InferencePerfAPI is the api section.
type InferencePerfAPI struct {
	Type      string // "completion" (default) or "chat"
	Streaming bool
}

// InferencePerfData is the data section.
type InferencePerfData struct {
	Type         string // "shared_prefix", "random" or "synthetic"
	SharedPrefix InferencePerfSharedPrefix
	// Input and Output are input_distribution and output_distribution
	// (random and synthetic data).
	Input, Output InferencePerfDistribution
}

// InferencePerfSharedPrefix is data.shared_prefix.
type InferencePerfSharedPrefix struct {
	NumGroups          int // num_groups (default 10)
	NumPromptsPerGroup int // num_prompts_per_group (default 10)
	SystemPromptLen    int // system_prompt_len, tokens (default 100)
	QuestionLen        int // question_len, tokens (default 50)
	OutputLen          int // output_len, tokens (default 50)
	// Legacy holds the keys of llm-d-benchmark profiles that the
	// inference-perf build of the recorded runs ignored (see
	// InferencePerfOptions.AliasKeys).
	Legacy InferencePerfLegacy
}

// InferencePerfLegacy are the shared_prefix keys of llm-d-benchmark
// profiles (profile.yaml) that the inference-perf build of the recorded runs
// ignored; newer inference-perf reads the first two as aliases of
// num_groups and num_prompts_per_group.
type InferencePerfLegacy struct {
	NumUniqueSystemPrompts  int  // num_unique_system_prompts (0: absent)
	NumUsersPerSystemPrompt int  // num_users_per_system_prompt (0: absent)
	EnableMultiTurnChat     bool // enable_multi_turn_chat
	MultiTurnLine           int  // the line of enable_multi_turn_chat: true
}

// InferencePerfDistribution is a length distribution (input_distribution,
// output_distribution): total_count lengths drawn up front, each clipped to
// [Min, Max] and rounded.
type InferencePerfDistribution struct {
	// Type is "normal" (the default: mean and std_dev), "lognormal" (shifted
	// so that min maps to 0, with the given mean and std_dev), "uniform" on
	// [min, max], or "fixed" (every length int(mean)).
	Type       string
	Min, Max   int     // defaults 10 and 1024
	Mean       float64 // default 512
	StdDev     float64 // default 200
	TotalCount int     // required
}

// InferencePerfLoad is the load section.
type InferencePerfLoad struct {
	Type string // "constant" (default) or "poisson"
	// Interval is the pause (s) after a stage's requests have all
	// completed before the next stage starts (default 1).
	Interval float64
	Stages   []InferencePerfStage
	// The client's concurrency: num_workers processes with
	// worker_max_concurrency requests in flight each (0: not given;
	// HasNumWorkers tells num_workers: 0, inference-perf's single-process
	// path, from an absent key). The client model caps the requests in
	// flight at their product (ClientPlan, docs/workloads.md).
	NumWorkers           int
	HasNumWorkers        bool
	WorkerMaxConcurrency int
	// RequestTimeout is load.request_timeout in seconds (0: none), the
	// client model's per-request timeout when given (ClientPlan).
	RequestTimeout float64
}

// InferencePerfStage is one entry of load.stages.
type InferencePerfStage struct {
	Rate     float64 // requests per second
	Duration int     // seconds
	Line     int     // line of the entry in the file
}

// Requests is the number of requests inference-perf sends in the stage:
// int(rate × duration).
func (s InferencePerfStage) Requests() int { return int(s.Rate * float64(s.Duration)) }

// InferencePerfServer is the server section.
type InferencePerfServer struct {
	ModelName string // model_name ("" if absent)
	IgnoreEOS bool   // ignore_eos (default true)
}

// Limits of what an inference-perf config may ask for.
const (
	maxIPerfSegment  = 1 << 20 // tokens of one system prompt, question or distribution length
	maxIPerfPool     = 1 << 24 // shared_prefix prompts (num_groups × num_prompts_per_group)
	maxIPerfCount    = 1 << 24 // total_count of a distribution
	maxIPerfRate     = 1e6     // requests per second
	maxIPerfDuration = 1e8     // seconds per stage
	maxIPerfRequests = 1 << 34 // requests over all stages
)

// inferencePerfIgnored are top-level sections that do not shape the traffic.
var inferencePerfIgnored = []string{"report", "storage", "metrics", "tokenizer", "circuit_breakers"}

// ParseInferencePerf reads an inference-perf configuration (YAML or JSON).
// The sections that do not shape the traffic (report, storage, metrics,
// tokenizer, circuit_breakers) are skipped; inside api, data, load and
// server every key must be one inference-perf defines, so that a typo is an
// error rather than a silent default. Errors are *InputError naming the
// file, the line and the field: "profile.yaml:12: load.stages[1].rate: must
// be > 0".
func ParseInferencePerf(data []byte, file string) (*InferencePerfConfig, error) {
	p := &iperfParser{file: file}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, p.syntaxErr(err)
	}
	c := &InferencePerfConfig{
		File: file,
		API:  InferencePerfAPI{Type: "completion"},
		Data: InferencePerfData{SharedPrefix: InferencePerfSharedPrefix{
			NumGroups: 10, NumPromptsPerGroup: 10, SystemPromptLen: 100, QuestionLen: 50, OutputLen: 50,
		}},
		Load:   InferencePerfLoad{Type: "constant", Interval: 1},
		Server: InferencePerfServer{IgnoreEOS: true},
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, &InputError{File: file, Line: 1, Msg: "empty file (want an inference-perf config with load.stages)"}
	}
	root := resolve(doc.Content[0])
	if isNull(root) {
		return nil, p.at(root, "", "empty config (want an inference-perf config with load.stages)")
	}
	var seenData, seenStages bool
	err := p.members(root, "", func(k string, kn, v *yaml.Node, f string) error {
		switch k {
		case "api":
			return p.api(v, f, &c.API, &c.Headers)
		case "data":
			seenData = true
			return p.data(v, f, c)
		case "load":
			return p.load(v, f, &c.Load, &seenStages)
		case "server":
			return p.server(v, f, &c.Server)
		}
		if slices.Contains(inferencePerfIgnored, k) {
			return nil
		}
		return p.at(kn, f, "unknown section (eppsim reads api, data, load and server, and skips %s)",
			strings.Join(inferencePerfIgnored, ", "))
	})
	if err != nil {
		return nil, err
	}
	if !seenData {
		return nil, p.at(root, "data.type", `missing: inference-perf's default "mock" data needs its mock server; eppsim generates shared_prefix, random and synthetic data`)
	}
	if !seenStages {
		return nil, p.at(root, "load.stages", "missing: give at least one {rate, duration} stage")
	}
	if err := p.check(c); err != nil {
		return nil, err
	}
	return c, nil
}

// iperfParser walks the YAML node tree; every error names file, line, field.
type iperfParser struct {
	file string
	// Lines of nodes needed by the checks after decoding.
	dataLine, typeLine, inputLine, outputLine, sharedLine int
}

var reYAMLLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func (p *iperfParser) syntaxErr(err error) error {
	msg := err.Error()
	if m := reYAMLLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &InputError{File: p.file, Line: line, Msg: "invalid YAML: " + m[2], Err: err}
	}
	return &InputError{File: p.file, Msg: "invalid YAML: " + strings.TrimPrefix(msg, "yaml: "), Err: err}
}

func (p *iperfParser) at(n *yaml.Node, field, format string, args ...any) error {
	return p.atLine(n.Line, field, format, args...)
}

func (p *iperfParser) atLine(line int, field, format string, args ...any) error {
	return &InputError{File: p.file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// resolve follows aliases to the anchored node.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

// members calls fn for each key of mapping n (null counts as empty), in
// order; keys must be plain strings and appear once.
func (p *iperfParser) members(n *yaml.Node, path string, fn func(k string, kn, v *yaml.Node, field string) error) error {
	n = resolve(n)
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return p.at(n, path, "expected a mapping, got %s", describe(n))
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn := resolve(n.Content[i])
		if kn.Kind != yaml.ScalarNode || kn.ShortTag() == "!!merge" {
			return p.at(kn, path, "keys must be plain strings")
		}
		k := kn.Value
		if seen[k] {
			return p.at(kn, join(path, k), "duplicate key")
		}
		seen[k] = true
		if err := fn(k, kn, resolve(n.Content[i+1]), join(path, k)); err != nil {
			return err
		}
	}
	return nil
}

func (p *iperfParser) unknown(n *yaml.Node, field string, known ...string) error {
	return p.at(n, field, "unknown key (inference-perf defines %s here)", strings.Join(known, ", "))
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	switch n.ShortTag() {
	case "!!str":
		return strconv.Quote(n.Value)
	case "!!null":
		return "null"
	}
	return n.Value
}

func (p *iperfParser) str(n *yaml.Node, field string) (string, error) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		return "", p.at(n, field, "expected a string, got %s", describe(n))
	}
	return n.Value, nil
}

// optStr is a string or null ("").
func (p *iperfParser) optStr(n *yaml.Node, field string) (string, error) {
	if isNull(n) {
		return "", nil
	}
	return p.str(n, field)
}

func (p *iperfParser) boolean(n *yaml.Node, field string) (bool, error) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
		return false, p.at(n, field, "expected true or false, got %s", describe(n))
	}
	var b bool
	if err := n.Decode(&b); err != nil {
		return false, p.at(n, field, "expected true or false, got %s", describe(n))
	}
	return b, nil
}

// number is a finite !!int or !!float.
func (p *iperfParser) number(n *yaml.Node, field string) (float64, error) {
	if n.Kind == yaml.ScalarNode && (n.ShortTag() == "!!int" || n.ShortTag() == "!!float") {
		var f float64
		if err := n.Decode(&f); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
			return f, nil
		}
	}
	return 0, p.at(n, field, "expected a number, got %s", describe(n))
}

// integer is a whole number (600 or 600.0, as pydantic accepts for int)
// within [lo, hi].
func (p *iperfParser) integer(n *yaml.Node, field string, lo, hi int) (int, error) {
	f, err := p.number(n, field)
	if err != nil || f != math.Trunc(f) {
		return 0, p.at(n, field, "expected a whole number, got %s", describe(n))
	}
	if f < float64(lo) || f > float64(hi) {
		if hi >= math.MaxInt32 {
			return 0, p.at(n, field, "must be >= %d, got %s", lo, n.Value)
		}
		return 0, p.at(n, field, "must be in [%d, %d], got %s", lo, hi, n.Value)
	}
	return int(f), nil
}

func (p *iperfParser) api(n *yaml.Node, path string, a *InferencePerfAPI, headers *map[string]string) error {
	return p.members(n, path, func(k string, kn, v *yaml.Node, f string) error {
		var err error
		switch k {
		case "type":
			if a.Type, err = p.str(v, f); err != nil {
				return err
			}
			if a.Type != "completion" && a.Type != "chat" {
				return p.at(v, f, "%q is not simulated (eppsim sends completion and chat requests)", a.Type)
			}
		case "streaming":
			a.Streaming, err = p.boolean(v, f)
		case "headers":
			err = p.members(v, f, func(k string, _, hv *yaml.Node, hf string) error {
				val, err := p.str(hv, hf)
				if err != nil {
					return err
				}
				if *headers == nil {
					*headers = map[string]string{}
				}
				(*headers)[strings.ToLower(k)] = val
				return nil
			})
		default:
			return p.unknown(kn, f, "type", "streaming", "headers")
		}
		return err
	})
}

// dataTypeHints explains the data types eppsim does not generate.
var dataTypeHints = map[string]string{
	"mock":                  "needs inference-perf's mock model server",
	"shareGPT":              "reads a ShareGPT dataset (data.path); replay the file with --trace FILE --format sharegpt instead",
	"cnn_dailymail":         "reads a Hugging Face dataset",
	"infinity_instruct":     "reads a Hugging Face dataset",
	"billsum_conversations": "reads a Hugging Face dataset",
}

func (p *iperfParser) data(n *yaml.Node, path string, c *InferencePerfConfig) error {
	d := &c.Data
	p.dataLine = n.Line
	typed := false
	err := p.members(n, path, func(k string, kn, v *yaml.Node, f string) error {
		var err error
		switch k {
		case "type":
			if d.Type, err = p.str(v, f); err != nil {
				return err
			}
			typed = true
			p.typeLine = v.Line
			switch d.Type {
			case "shared_prefix", "random", "synthetic":
			default:
				hint := dataTypeHints[d.Type]
				if hint == "" {
					hint = "is not generated by eppsim"
				}
				return p.at(v, f, "%q %s; eppsim generates shared_prefix, random and synthetic data", d.Type, hint)
			}
		case "path":
			// Only dataset types read it.
			_, err = p.optStr(v, f)
		case "input_distribution", "output_distribution":
			if isNull(v) {
				return nil
			}
			dist := &d.Input
			if k == "output_distribution" {
				dist, p.outputLine = &d.Output, v.Line
			} else {
				p.inputLine = v.Line
			}
			*dist = InferencePerfDistribution{Type: "normal", Min: 10, Max: 1024, Mean: 512, StdDev: 200}
			err = p.distribution(v, f, dist)
		case "shared_prefix":
			if isNull(v) {
				return nil
			}
			p.sharedLine = v.Line
			err = p.sharedPrefix(v, f, c)
		case "trace":
			if !isNull(v) {
				return p.at(v, f, "trace-driven data is not generated; convert the trace and replay it with --trace")
			}
		default:
			return p.unknown(kn, f, "type", "path", "input_distribution", "output_distribution", "shared_prefix", "trace")
		}
		return err
	})
	if err != nil {
		return err
	}
	if !typed {
		return p.at(n, join(path, "type"), `missing: inference-perf's default "mock" data needs its mock server; eppsim generates shared_prefix, random and synthetic data`)
	}
	return nil
}

func (p *iperfParser) distribution(n *yaml.Node, path string, d *InferencePerfDistribution) error {
	hasCount := false
	err := p.members(n, path, func(k string, kn, v *yaml.Node, f string) error {
		var err error
		switch k {
		case "type":
			if d.Type, err = p.str(v, f); err != nil {
				return err
			}
			switch d.Type {
			case "normal", "lognormal", "uniform", "fixed":
			default:
				return p.at(v, f, "%q is not normal, lognormal, uniform or fixed", d.Type)
			}
		case "min":
			d.Min, err = p.integer(v, f, 0, maxIPerfSegment)
		case "max":
			d.Max, err = p.integer(v, f, 0, maxIPerfSegment)
		case "mean":
			if d.Mean, err = p.number(v, f); err == nil && (d.Mean < 0 || d.Mean > maxIPerfSegment) {
				err = p.at(v, f, "must be in [0, %d], got %s", maxIPerfSegment, v.Value)
			}
		case "std_dev":
			if d.StdDev, err = p.number(v, f); err == nil && (d.StdDev < 0 || d.StdDev > maxIPerfSegment) {
				err = p.at(v, f, "must be in [0, %d], got %s", maxIPerfSegment, v.Value)
			}
		case "total_count":
			if isNull(v) {
				return nil
			}
			hasCount = true
			d.TotalCount, err = p.integer(v, f, 1, maxIPerfCount)
		default:
			return p.unknown(kn, f, "type", "min", "max", "mean", "std_dev", "total_count")
		}
		return err
	})
	if err != nil {
		return err
	}
	switch {
	case !hasCount:
		return p.at(n, join(path, "total_count"), "missing: inference-perf draws total_count lengths up front")
	case d.Min > d.Max:
		return p.at(n, join(path, "min"), "%d is greater than max %d", d.Min, d.Max)
	case d.Type == "normal" && (d.Mean < float64(d.Min) || d.Mean > float64(d.Max)):
		return p.at(n, join(path, "mean"), "%g is outside [min, max] = [%d, %d]", d.Mean, d.Min, d.Max)
	case d.Type == "fixed" && int(d.Mean) < 1:
		return p.at(n, join(path, "mean"), "a fixed length must be >= 1, got %g", d.Mean)
	case d.Type != "fixed" && d.Max < 1:
		return p.at(n, join(path, "max"), "must be >= 1, got %d", d.Max)
	}
	return nil
}

func (p *iperfParser) sharedPrefix(n *yaml.Node, path string, c *InferencePerfConfig) error {
	sp := &c.Data.SharedPrefix
	return p.members(n, path, func(k string, kn, v *yaml.Node, f string) error {
		var err error
		switch k {
		case "num_groups":
			sp.NumGroups, err = p.integer(v, f, 1, maxIPerfPool)
		case "num_prompts_per_group":
			sp.NumPromptsPerGroup, err = p.integer(v, f, 1, maxIPerfPool)
		case "system_prompt_len":
			sp.SystemPromptLen, err = p.integer(v, f, 0, maxIPerfSegment)
		case "question_len":
			sp.QuestionLen, err = p.integer(v, f, 1, maxIPerfSegment)
		case "output_len":
			sp.OutputLen, err = p.integer(v, f, 1, maxIPerfSegment)
		case "num_unique_system_prompts", "num_users_per_system_prompt":
			var x int
			if x, err = p.integer(v, f, 1, maxIPerfPool); err != nil {
				return err
			}
			alias := "num_groups"
			if k == "num_unique_system_prompts" {
				sp.Legacy.NumUniqueSystemPrompts = x
			} else {
				sp.Legacy.NumUsersPerSystemPrompt, alias = x, "num_prompts_per_group"
			}
			c.Notes = append(c.Notes, fmt.Sprintf("%s:%d: %s: %d is a legacy key; the inference-perf build of the recorded runs ignored it (newer inference-perf reads it as %s, and so does eppsim with --iperf-alias-keys)",
				p.file, v.Line, f, x, alias))
		case "enable_multi_turn_chat":
			if sp.Legacy.EnableMultiTurnChat, err = p.boolean(v, f); err != nil || !sp.Legacy.EnableMultiTurnChat {
				return err
			}
			sp.Legacy.MultiTurnLine = v.Line
			c.Notes = append(c.Notes, fmt.Sprintf("%s:%d: %s: true is a legacy key; the inference-perf build of the recorded runs ignored it and sent single-turn prompts (system prompt + question), as eppsim does (multi-turn chat, which newer inference-perf runs, is not simulated)",
				p.file, v.Line, f))
		default:
			return p.unknown(kn, f, "num_groups", "num_prompts_per_group", "system_prompt_len", "question_len", "output_len",
				"num_unique_system_prompts", "num_users_per_system_prompt", "enable_multi_turn_chat")
		}
		return err
	})
}

func (p *iperfParser) load(n *yaml.Node, path string, l *InferencePerfLoad, seenStages *bool) error {
	return p.members(n, path, func(k string, kn, v *yaml.Node, f string) error {
		var err error
		switch k {
		case "type":
			if l.Type, err = p.str(v, f); err != nil {
				return err
			}
			switch l.Type {
			case "constant", "poisson":
			case "concurrent":
				return p.at(v, f, `"concurrent" (a fixed number of requests in flight) is not simulated; eppsim generates constant and poisson load`)
			default:
				return p.at(v, f, "%q is not simulated; eppsim generates constant and poisson load", l.Type)
			}
		case "interval":
			if l.Interval, err = p.number(v, f); err == nil && (l.Interval < 0 || l.Interval > maxIPerfDuration) {
				err = p.at(v, f, "must be in [0, %g] seconds, got %s", float64(maxIPerfDuration), v.Value)
			}
		case "stages":
			*seenStages = true
			err = p.stages(v, f, l)
		case "sweep":
			if !isNull(v) {
				return p.at(v, f, "stages derived from the measured saturation of a live server cannot be simulated; give load.stages")
			}
		case "num_workers":
			if !isNull(v) {
				l.NumWorkers, err = p.integer(v, f, 0, math.MaxInt32)
				l.HasNumWorkers = true
			}
		case "worker_max_concurrency":
			if !isNull(v) {
				l.WorkerMaxConcurrency, err = p.integer(v, f, 1, math.MaxInt32)
			}
		case "worker_max_tcp_connections", "circuit_breakers":
			// Client plumbing; no effect on what is sent.
		case "request_timeout":
			if !isNull(v) {
				if l.RequestTimeout, err = p.number(v, f); err == nil && !(l.RequestTimeout > 0) {
					err = p.at(v, f, "must be > 0 seconds, got %s", v.Value)
				}
			}
		case "trace", "lora_traffic_split":
			if !isNull(v) {
				return p.at(v, f, "not simulated (eppsim generates constant and poisson load of one model)")
			}
		default:
			return p.unknown(kn, f, "type", "interval", "stages", "sweep", "num_workers", "worker_max_concurrency",
				"worker_max_tcp_connections", "circuit_breakers", "request_timeout", "trace", "lora_traffic_split")
		}
		return err
	})
}

func (p *iperfParser) stages(n *yaml.Node, path string, l *InferencePerfLoad) error {
	if n.Kind != yaml.SequenceNode {
		return p.at(n, path, "expected a list of {rate, duration} stages, got %s", describe(n))
	}
	if len(n.Content) == 0 {
		return p.at(n, path, "empty: give at least one {rate, duration} stage")
	}
	total := 0
	for i, sn := range n.Content {
		sn = resolve(sn)
		f := fmt.Sprintf("%s[%d]", path, i)
		st := InferencePerfStage{Line: sn.Line}
		var hasRate, hasDur bool
		err := p.members(sn, f, func(k string, kn, v *yaml.Node, ff string) error {
			var err error
			switch k {
			case "rate":
				hasRate = true
				if st.Rate, err = p.number(v, ff); err == nil && !(st.Rate > 0 && st.Rate <= maxIPerfRate) {
					err = p.at(v, ff, "must be > 0 (and at most %g requests/s), got %s", float64(maxIPerfRate), v.Value)
				}
			case "duration":
				hasDur = true
				st.Duration, err = p.integer(v, ff, 1, maxIPerfDuration)
			case "num_requests", "concurrency_level":
				if !isNull(v) {
					return p.at(v, ff, "only for load.type concurrent, which is not simulated")
				}
			default:
				return p.unknown(kn, ff, "rate", "duration")
			}
			return err
		})
		if err != nil {
			return err
		}
		if sn.Kind != yaml.MappingNode {
			return p.at(sn, f, "expected a {rate, duration} mapping, got %s", describe(sn))
		}
		if !hasRate {
			return p.at(sn, f+".rate", "missing")
		}
		if !hasDur {
			return p.at(sn, f+".duration", "missing")
		}
		if st.Requests() < 1 {
			return p.at(sn, f, "rate %g × duration %d s gives no request (inference-perf sends int(rate × duration))", st.Rate, st.Duration)
		}
		if total += st.Requests(); total > maxIPerfRequests {
			return p.at(sn, f, "more than %d requests in all", int64(maxIPerfRequests))
		}
		l.Stages = append(l.Stages, st)
	}
	return nil
}

func (p *iperfParser) server(n *yaml.Node, path string, s *InferencePerfServer) error {
	return p.members(n, path, func(k string, kn, v *yaml.Node, f string) error {
		var err error
		switch k {
		case "model_name":
			s.ModelName, err = p.optStr(v, f)
		case "ignore_eos":
			s.IgnoreEOS, err = p.boolean(v, f)
		case "type", "base_url", "api_key", "cert_path", "key_path":
			// Where and how to connect; the simulated fleet stands in.
			_, err = p.optStr(v, f)
		default:
			return p.unknown(kn, f, "type", "model_name", "base_url", "ignore_eos", "api_key", "cert_path", "key_path")
		}
		return err
	})
}

// check validates what depends on several sections.
func (p *iperfParser) check(c *InferencePerfConfig) error {
	line := func(l int) int {
		if l == 0 {
			l = p.dataLine
		}
		return l
	}
	d := &c.Data
	switch d.Type {
	case "shared_prefix":
		sp := d.SharedPrefix
		if p.sharedLine == 0 {
			return p.atLine(line(p.typeLine), "data.shared_prefix", "missing: shared_prefix data needs its settings")
		}
		if sp.NumGroups*sp.NumPromptsPerGroup > maxIPerfPool {
			return p.atLine(line(p.sharedLine), "data.shared_prefix", "%d × %d prompts exceed the limit of %d",
				sp.NumGroups, sp.NumPromptsPerGroup, maxIPerfPool)
		}
	case "random", "synthetic":
		if p.sharedLine != 0 {
			return p.atLine(line(p.sharedLine), "data.shared_prefix", "only used with data.type shared_prefix (inference-perf rejects it for %s data)", d.Type)
		}
		for _, x := range []struct {
			name string
			d    *InferencePerfDistribution
			line int
			min  int
		}{{"input_distribution", &d.Input, p.inputLine, 1}, {"output_distribution", &d.Output, p.outputLine, 1}} {
			field := "data." + x.name
			if x.d.Type == "" {
				return p.atLine(line(p.typeLine), field, "missing: %s data draws its lengths from it", d.Type)
			}
			lo := x.d.Min
			if x.d.Type == "fixed" {
				lo = int(x.d.Mean)
			}
			if lo < x.min {
				return p.atLine(line(x.line), field+".min", "lengths must be >= %d, got %d", x.min, lo)
			}
			// inference-perf indexes the lengths by the request's number
			// within its stage.
			for i, st := range c.Load.Stages {
				if st.Requests() > x.d.TotalCount {
					return p.atLine(line(x.line), field+".total_count",
						"%d lengths for the %d requests of load.stages[%d]: inference-perf takes the n-th length for the n-th request of a stage, so total_count must cover the largest stage",
						x.d.TotalCount, st.Requests(), i)
				}
			}
		}
	}
	return nil
}
