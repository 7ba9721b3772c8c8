package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/eppsim/eppsim/epp"
	"github.com/eppsim/eppsim/epp/config"
	"github.com/eppsim/eppsim/epp/plugins"
)

// newEPPCmd is the `eppsim epp` verb: tools around the EPP configuration and
// its scheduling decisions (docs/epp.md).
func newEPPCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "epp",
		Short: "Inspect EPP configurations and scheduling decisions",
		Long: "Tools around the llm-d Endpoint Picker as eppsim re-implements it: validate\n" +
			"EndpointPickerConfig files and show their effective configuration, print the\n" +
			"approximate prefix block hashes of a request, and explain one scheduling decision\n" +
			"on a described state. See docs/epp.md.",
	}
	cmd.AddCommand(newEPPValidateCmd(), newEPPHashCmd(), newEPPExplainCmd(), newEPPMigrateCmd())
	return cmd
}

// loadEPPConfig loads path, or the built-in default configuration when path
// is empty.
func loadEPPConfig(path string, seed uint64) (*config.Loaded, error) {
	opts := config.Options{Registry: plugins.Builtin(), Seed: seed}
	if path == "" {
		return config.Default(opts)
	}
	return config.LoadFile(path, opts)
}

func newEPPValidateCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "validate [CONFIG...]",
		Short: "Load, default and validate EndpointPickerConfig files; print the effective configuration",
		Long: "Load each EndpointPickerConfig, apply the EPP's defaults and validate it, then print the\n" +
			"effective configuration: plugins (with how each got there), profiles with weights,\n" +
			"auto-created data producers, the producer order, what eppsim does not simulate (with\n" +
			"the fallback) and warnings. With no CONFIG, the built-in default configuration is shown.\n" +
			"Exits 2 if any configuration is invalid (each error is printed once).",
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "yaml" && output != "json" {
				return withExitCode(2, fmt.Errorf("--output: want text, yaml or json, got %q", output))
			}
			paths := args
			if len(paths) == 0 {
				paths = []string{""}
			}
			out := cmd.OutOrStdout()
			var failed []string
			var firstErr error
			for i, p := range paths {
				l, err := loadEPPConfig(p, 1)
				if err != nil {
					if len(paths) > 1 {
						// Each error once, here; the final error only counts.
						fmt.Fprintf(cmd.ErrOrStderr(), "eppsim: %v\n", err)
					}
					failed = append(failed, p)
					if firstErr == nil {
						firstErr = err
					}
					continue
				}
				if i > 0 && output != "json" {
					fmt.Fprintln(out)
				}
				switch output {
				case "yaml":
					if len(paths) > 1 {
						fmt.Fprintln(out, "---")
					}
					y, err := l.YAML()
					if err != nil {
						return err
					}
					out.Write(y)
				case "json":
					b, err := json.MarshalIndent(l, "", "  ")
					if err != nil {
						return err
					}
					fmt.Fprintf(out, "%s\n", b)
				default:
					printEffective(out, l)
				}
			}
			switch len(failed) {
			case 0:
				return nil
			case len(paths):
				if len(paths) == 1 {
					return withExitCode(2, firstErr)
				}
			}
			return withExitCode(2, fmt.Errorf("%d of %d configurations are invalid: %s", len(failed), len(paths), strings.Join(failed, ", ")))
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text, yaml (the effective EndpointPickerConfig) or json")
	return cmd
}

// printEffective writes the human-readable effective configuration.
func printEffective(w io.Writer, l *config.Loaded) {
	name := l.File
	if l.BuiltinDefault {
		name = "built-in default configuration (spec §1.2)"
	}
	fmt.Fprintf(w, "%s: valid\n", name)
	fmt.Fprintln(w, "\nplugins (instantiation order):")
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  NAME\tTYPE\tORIGIN\tROLES")
	for _, p := range l.Plugins {
		roles := strings.Join(p.Roles, ",")
		if p.NotSimulated != "" {
			roles = strings.TrimPrefix(roles+",not-simulated", ",")
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", p.Name, p.Type, p.Origin, roles)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nprofiles (handler %s)\n", l.ProfileHandler)
	for _, p := range l.Profiles {
		fmt.Fprintf(w, "  %s\n", p.Name)
		if len(p.Filters) > 0 {
			fmt.Fprintf(w, "    filters: %s\n", strings.Join(p.Filters, ", "))
		}
		if len(p.Scorers) > 0 {
			var s []string
			for _, sc := range p.Scorers {
				s = append(s, fmt.Sprintf("%s ×%g", sc.Name, sc.Weight))
			}
			fmt.Fprintf(w, "    scorers: %s\n", strings.Join(s, ", "))
		}
		fmt.Fprintf(w, "    picker:  %s\n", p.Picker)
	}
	fmt.Fprintf(w, "\ndata producers (execution order): %s\n", orNone(strings.Join(l.Producers, " → ")))
	var autos []string
	for _, p := range l.Plugins {
		if p.Origin == config.OriginAutoProducer {
			autos = append(autos, fmt.Sprintf("%s (for %s)", p.Name, p.RequiredBy))
		}
	}
	fmt.Fprintf(w, "auto-created producers: %s\n", orNone(strings.Join(autos, ", ")))
	fmt.Fprintf(w, "parsers: %s\n", strings.Join(l.Parsers, ", "))
	fmt.Fprintf(w, "saturation detector: %s\n", l.SaturationDetector)
	printAdmission(w, l)
	var gates []string
	for g, v := range l.FeatureGates {
		gates = append(gates, fmt.Sprintf("%s=%t", g, v))
	}
	sort.Strings(gates)
	fmt.Fprintf(w, "feature gates: %s\n", strings.Join(gates, ", "))
	// Infrastructure plugins, grouped by what the simulator does instead.
	var notes []string
	byNote := map[string][]string{}
	for _, p := range l.Plugins {
		if in, ok := p.Plugin.(plugins.Infrastructure); ok {
			n := in.Infrastructure()
			if _, seen := byNote[n]; !seen {
				notes = append(notes, n)
			}
			byNote[n] = append(byNote[n], p.Name)
		}
	}
	if len(notes) > 0 {
		fmt.Fprintln(w, "\ninfrastructure:")
		for _, n := range notes {
			fmt.Fprintf(w, "  %s: %s\n", strings.Join(byNote[n], ", "), n)
		}
	}
	if len(l.NotSimulated) > 0 {
		fmt.Fprintln(w, "\nnot simulated:")
		for _, n := range l.NotSimulated {
			fmt.Fprintf(w, "  %s\n", n)
		}
	}
	if len(l.Warnings) > 0 {
		fmt.Fprintln(w, "\nwarnings:")
		for _, s := range l.Warnings {
			fmt.Fprintf(w, "  %s\n", s)
		}
	}
}

// printAdmission describes director steps 4 and 9: the legacy gate or flow
// control's bands and policies, and the Admit plugins.
func printAdmission(w io.Writer, l *config.Loaded) {
	fc := l.FlowControl
	if fc == nil {
		fmt.Fprintf(w, "admission: legacy gate (flowControl off): a request of priority < 0 is rejected (HTTP 429) when %s's saturation is ≥ 1\n", l.SaturationDetector)
	} else {
		fmt.Fprintf(w, "admission: flow control: TTL %s (%s without endpoints), usage-limit policy %s, global caps %s bytes / %s requests, eviction %t\n",
			fc.DefaultRequestTTL, fc.NoEndpointRequestTTL, fc.UsageLimitPolicy, capOrNone(fc.MaxBytes), capOrNone(fc.MaxRequests), fc.EnableEviction)
		for _, b := range fc.Bands {
			fmt.Fprintf(w, "  band %d: %s, %s, ≤ %d bytes, ≤ %d requests\n", b.Priority, b.FairnessPolicy, b.OrderingPolicy, b.MaxBytes, b.MaxRequests)
		}
		d := fc.DefaultPriorityBand
		fmt.Fprintf(w, "  bands of other objective priorities: %s, %s, ≤ %d bytes, ≤ %d requests\n", d.FairnessPolicy, d.OrderingPolicy, d.MaxBytes, d.MaxRequests)
	}
	var adm []string
	for _, a := range l.Router().Admitters {
		adm = append(adm, a.Name())
	}
	fmt.Fprintf(w, "admit plugins: %s\n", orNone(strings.Join(adm, ", ")))
}

func capOrNone(v int64) string {
	if v == 0 {
		return "unlimited"
	}
	return strconv.FormatInt(v, 10)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// explainEndpoints is the --endpoints file of `epp explain` (docs/epp.md).
type explainEndpoints struct {
	Endpoints []explainEndpoint `json:"endpoints"`
}

type explainEndpoint struct {
	Name    string            `json:"name"`
	Address string            `json:"address"`
	Labels  map[string]string `json:"labels"`
	Metrics explainMetrics    `json:"metrics"`
	// History lists requests previously routed to this endpoint, oldest
	// first; they are replayed through the data producers and the
	// PreRequest (and, unless inFlight, response) hooks to build the EPP's
	// state, e.g. the approximate prefix index.
	History []explainRequest `json:"history"`
}

type explainMetrics struct {
	WaitingQueueSize    int            `json:"waitingQueueSize"`
	RunningRequestsSize int            `json:"runningRequestsSize"`
	KVCacheUsagePercent float64        `json:"kvCacheUsagePercent"`
	CacheBlockSize      int            `json:"cacheBlockSize"`
	CacheNumBlocks      int            `json:"cacheNumBlocks"`
	ActiveModels        map[string]int `json:"activeModels"`
	WaitingModels       map[string]int `json:"waitingModels"`
	MaxActiveModels     int            `json:"maxActiveModels"`
	// NeverScraped leaves UpdateTime at 0 (stale metrics).
	NeverScraped bool `json:"neverScraped"`
}

// explainRequest is a request of `epp explain`: a raw OpenAI body, or the
// shorthands model/prompt/messages, plus routing context.
type explainRequest struct {
	Body         json.RawMessage   `json:"body"`
	Model        string            `json:"model"`
	Prompt       any               `json:"prompt"`
	Messages     []json.RawMessage `json:"messages"`
	Headers      map[string]string `json:"headers"`
	Path         string            `json:"path"`
	Priority     int               `json:"priority"`
	PromptTokens []uint32          `json:"promptTokens"`
	InFlight     bool              `json:"inFlight"`
}

// toRequest builds the epp.Request.
func (r explainRequest) toRequest(id string) (*epp.Request, error) {
	body := []byte(r.Body)
	if len(body) == 0 {
		m := map[string]any{}
		if r.Model != "" {
			m["model"] = r.Model
		}
		switch {
		case r.Messages != nil && r.Prompt != nil:
			return nil, errors.New("give either prompt or messages, not both")
		case r.Messages != nil:
			m["messages"] = r.Messages
		case r.Prompt != nil:
			m["prompt"] = r.Prompt
		default:
			return nil, errors.New("no body, prompt or messages")
		}
		b, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		body = b
	}
	var head struct {
		Model    string          `json:"model"`
		Messages json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(body, &head); err != nil {
		return nil, fmt.Errorf("body: %w", err)
	}
	req := &epp.Request{ID: id, Body: body, Priority: r.Priority, Path: r.Path, ServerPromptTokens: r.PromptTokens,
		TargetModel: head.Model, Headers: map[string]string{}}
	if r.Model != "" {
		req.TargetModel = r.Model
	}
	if req.Path == "" {
		req.Path = "/v1/completions"
		if len(head.Messages) > 0 {
			req.Path = "/v1/chat/completions"
		}
	}
	for k, v := range r.Headers {
		req.Headers[strings.ToLower(k)] = v
	}
	return req, nil
}

// readExplainRequest reads a request file: the wrapper of explainRequest,
// or (when the file is not a valid wrapper) a raw OpenAI request body.
func readExplainRequest(path string) (explainRequest, error) {
	data, err := readFileOrStdin(path)
	if err != nil {
		return explainRequest{}, err
	}
	var r explainRequest
	wrapErr := yaml.UnmarshalStrict(data, &r)
	if wrapErr == nil {
		return r, nil
	}
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return explainRequest{}, fmt.Errorf("%s: %w", path, err)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(j, &obj); err != nil {
		return explainRequest{}, fmt.Errorf("%s: want a request object: %w", path, err)
	}
	// Keys only the wrapper has: the file meant to be a wrapper.
	for _, k := range []string{"body", "headers", "path", "priority", "promptTokens", "inFlight"} {
		if _, ok := obj[k]; ok {
			return explainRequest{}, fmt.Errorf("%s: %w", path, wrapErr)
		}
	}
	return explainRequest{Body: j}, nil
}

func readFileOrStdin(path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(path)
}

func newEPPExplainCmd() *cobra.Command {
	var cfgPath, epPath, reqPath string
	var seed uint64
	cmd := &cobra.Command{
		Use:   "explain --endpoints FILE --request FILE [--config CONFIG]",
		Short: "Explain one scheduling decision on a described state",
		Long: "Run the EPP once on a described state and print every step: the data the producers\n" +
			"attached, each filter's survivors, each scorer's raw and weighted score per endpoint,\n" +
			"the totals and the pick. The endpoints file gives names, addresses, labels, metrics\n" +
			"and optional history (previously routed requests, replayed to build e.g. the\n" +
			"approximate prefix index); the request file is an OpenAI request body or a wrapper.\n" +
			"Without --config the built-in default configuration is used. Formats: docs/epp.md.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Every failure before the decision is the input's (exit
			// 2); a request the EPP rejects or cannot schedule is the
			// decision explained (exit 1).
			if epPath == "" || reqPath == "" {
				return withExitCode(2, errors.New("--endpoints and --request are required"))
			}
			l, err := loadEPPConfig(cfgPath, seed)
			if err != nil {
				return withExitCode(2, fmt.Errorf("--config: %w", err))
			}
			data, err := readFileOrStdin(epPath)
			if err != nil {
				return withExitCode(2, fmt.Errorf("--endpoints: %w", err))
			}
			var eps explainEndpoints
			if err := yaml.UnmarshalStrict(data, &eps); err != nil {
				return withExitCode(2, fmt.Errorf("--endpoints %s: %w", epPath, err))
			}
			rq, err := readExplainRequest(reqPath)
			if err != nil {
				return withExitCode(2, fmt.Errorf("--request: %w", err))
			}
			err = explain(cmd.OutOrStdout(), l, eps, rq, seed)
			var bad *explainInputError
			if errors.As(err, &bad) {
				file := epPath
				if bad.flag == "--request" {
					file = reqPath
				}
				return withExitCode(2, fmt.Errorf("%s %s: %w", bad.flag, file, bad.err))
			}
			return err
		},
	}
	cmd.Flags().StringVar(&cfgPath, "config", "", "EndpointPickerConfig file (default: the built-in default configuration)")
	cmd.Flags().StringVar(&epPath, "endpoints", "", "endpoints file (YAML or JSON; - for stdin)")
	cmd.Flags().StringVar(&reqPath, "request", "", "request file (YAML or JSON; - for stdin)")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "seed of the plugins' random streams (tie-breaks, random pickers)")
	return cmd
}

const ms = int64(1_000_000)

// explainInputError is an invalid endpoints (or request) file, found by
// explain: flag names the file's flag.
type explainInputError struct {
	flag string
	err  error
}

func (e *explainInputError) Error() string { return e.flag + ": " + e.err.Error() }
func (e *explainInputError) Unwrap() error { return e.err }

func badEndpoints(err error) error { return &explainInputError{"--endpoints", err} }

// explain replays the endpoints' history and runs one decision with tracing.
func explain(w io.Writer, l *config.Loaded, eps explainEndpoints, rq explainRequest, seed uint64) error {
	if len(eps.Endpoints) == 0 {
		return badEndpoints(errors.New("lists no endpoints"))
	}
	r := l.Router()
	nHist := 0
	for i, e := range eps.Endpoints {
		if e.Name == "" {
			return badEndpoints(fmt.Errorf("endpoints[%d] has no name", i))
		}
		if slices.ContainsFunc(eps.Endpoints[:i], func(o explainEndpoint) bool { return o.Name == e.Name }) {
			return badEndpoints(fmt.Errorf("endpoints[%d]: duplicate name %q", i, e.Name))
		}
		addr := e.Address
		if addr == "" {
			addr = fmt.Sprintf("10.0.0.%d:8000", i+1)
		}
		r.AddEndpoint(epp.EndpointInfo{Name: e.Name, Address: addr, Labels: e.Labels})
		nHist += len(e.History)
	}
	now := int64(nHist+1) * ms
	for _, e := range eps.Endpoints {
		m := e.Metrics
		em := epp.Metrics{
			WaitingQueueSize: m.WaitingQueueSize, RunningRequestsSize: m.RunningRequestsSize,
			KVCacheUsagePercent: m.KVCacheUsagePercent, CacheBlockSize: m.CacheBlockSize, CacheNumBlocks: m.CacheNumBlocks,
			ActiveModels: m.ActiveModels, WaitingModels: m.WaitingModels, MaxActiveModels: m.MaxActiveModels,
			UpdateTime: now,
		}
		if m.NeverScraped {
			em.UpdateTime = 0
		}
		if err := r.UpdateMetrics(e.Name, em); err != nil {
			return badEndpoints(fmt.Errorf("endpoint %q: metrics: %w", e.Name, err))
		}
	}
	primary := l.Profiles[0].Name
	for _, p := range l.Profiles {
		if p.Name == "decode" {
			primary = "decode"
		}
	}
	// Replay history in file order, 1 ms apart.
	k := 0
	for i, e := range eps.Endpoints {
		for j, h := range e.History {
			k++
			req, err := h.toRequest(fmt.Sprintf("history-%s-%d", e.Name, j))
			if err != nil {
				return badEndpoints(fmt.Errorf("endpoints[%d].history[%d]: %w", i, j, err))
			}
			// A history body the parser rejects would never have been
			// routed (spec §2.1 step 0).
			if err := r.Parse(req); err != nil {
				return badEndpoints(fmt.Errorf("endpoints[%d].history[%d]: %w", i, j, err))
			}
			c := &epp.Cycle{Now: int64(k) * ms}
			cands := r.Candidates()
			for _, p := range r.Producers {
				_ = p.Produce(c, req, cands)
			}
			res := &epp.Result{PrimaryProfile: primary, Profiles: map[string]*epp.ProfileResult{
				primary: {Targets: []*epp.Endpoint{cands[i]}},
			}}
			for _, hk := range r.PreRequest {
				hk.PreRequest(c, req, res)
			}
			if !h.InFlight {
				r.ResponseFirstChunk(c, req, res)
				r.ResponseComplete(c, req, res)
			}
		}
	}

	req, err := rq.toRequest("explain")
	if err != nil {
		return &explainInputError{"--request", err}
	}
	src := l.File
	if l.BuiltinDefault {
		src = "built-in default"
	}
	fmt.Fprintf(w, "config: %s (seed %d)\n", src, seed)
	fmt.Fprintf(w, "request: model %q, path %s, priority %d", req.TargetModel, req.Path, req.Priority)
	if nHist > 0 {
		fmt.Fprintf(w, ", after replaying %d history requests", nHist)
	}
	fmt.Fprintln(w)
	for _, n := range l.NotSimulated {
		fmt.Fprintf(w, "note: %s (%s) %s\n", n.Name, n.Type, n.Reason)
	}
	r.Record = true
	c := &epp.Cycle{Now: now}
	cands := r.Candidates()
	res, schedErr := r.ScheduleOn(c, req, cands)
	var wait *epp.WaitError
	if errors.As(schedErr, &wait) {
		// A data producer holds the request (the burst window): the
		// decision is made when it lets go, with no other request in its
		// batch.
		fmt.Fprintf(w, "note: a data producer held the request for %v (burst window); the decision follows at its end\n", time.Duration(wait.Until-now))
		c = &epp.Cycle{Now: wait.Until}
		res, schedErr = r.Resume(c, req)
	}
	if errors.Is(schedErr, epp.ErrBadRequest) {
		// Rejected before any plugin ran (spec §2.1 step 0).
		fmt.Fprintf(w, "\nrequest rejected: %v\n", schedErr)
		return withExitCode(1, schedErr)
	}

	printProduced(w, r, req, cands)
	if schedErr != nil {
		fmt.Fprintf(w, "\nscheduling failed: %v\n", schedErr)
		// Show where the candidates ran out.
		for _, p := range r.Profiles {
			fmt.Fprintf(w, "\nprofile %q (filters only):\n", p.Name)
			left := cands
			for _, f := range p.Filters {
				left = f.Filter(c, req, left)
				fmt.Fprintf(w, "  %s: %s\n", f.Name(), survivors(left, len(cands)))
				if len(left) == 0 {
					break
				}
			}
		}
		return withExitCode(1, schedErr)
	}
	var names []string
	for name := range res.Profiles {
		names = append(names, name)
	}
	// Profiles in configuration order.
	sort.SliceStable(names, func(a, b int) bool { return profileIndex(r, names[a]) < profileIndex(r, names[b]) })
	for _, name := range names {
		pr := res.Profiles[name]
		fmt.Fprintf(w, "\nprofile %q:\n", name)
		if pr == nil {
			fmt.Fprintln(w, "  failed (no endpoints)")
			continue
		}
		printTrace(w, pr.Trace, len(cands))
	}
	t := res.Target()
	if t == nil {
		fmt.Fprintln(w, "\nresult: no target")
		return nil
	}
	fmt.Fprintf(w, "\nresult: primary profile %q → %s (%s)\n", res.PrimaryProfile, t.Name, t.Address)
	return nil
}

func profileIndex(r *epp.Router, name string) int {
	for i, p := range r.Profiles {
		if p.Name == name {
			return i
		}
	}
	return len(r.Profiles)
}

func survivors(eps []*epp.Endpoint, total int) string {
	if len(eps) == 0 {
		return fmt.Sprintf("none (0 of %d)", total)
	}
	return fmt.Sprintf("%s (%d of %d)", strings.Join(epp.Names(eps), ", "), len(eps), total)
}

// printTrace prints one profile's filters, score table, totals and pick.
func printTrace(w io.Writer, tr *epp.ProfileTrace, total int) {
	if tr == nil {
		fmt.Fprintln(w, "  (no trace)")
		return
	}
	if len(tr.Filters) > 0 {
		fmt.Fprintln(w, "  filters:")
		for _, f := range tr.Filters {
			fmt.Fprintf(w, "    %s: %s\n", f.Filter, survivorNames(f.Survivors, total))
		}
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "  endpoint\t")
	for _, s := range tr.Scorers {
		fmt.Fprintf(tw, "%s ×%g\t", s.Scorer, s.Weight)
	}
	fmt.Fprint(tw, "total\t\n")
	for i, name := range tr.Candidates {
		fmt.Fprintf(tw, "  %s\t", name)
		for _, s := range tr.Scorers {
			raw := s.Raw[i]
			fmt.Fprintf(tw, "%.4f → %.4f\t", raw, min(max(raw, 0), 1)*s.Weight)
		}
		fmt.Fprintf(tw, "%.4f\t\n", tr.Totals[i])
	}
	fmt.Fprintln(w, "  scores (raw → clamped × weight):")
	tw.Flush()
	tie := ""
	if tr.Tied {
		tie = " (tie on the top total, broken by the picker)"
	}
	fmt.Fprintf(w, "  picked: %s%s\n", strings.Join(tr.Picked, ", "), tie)
}

func survivorNames(names []string, total int) string {
	if len(names) == 0 {
		return fmt.Sprintf("none (0 of %d)", total)
	}
	return fmt.Sprintf("%s (%d of %d)", strings.Join(names, ", "), len(names), total)
}

// printProduced prints what the data producers attached for this request.
func printProduced(w io.Writer, r *epp.Router, req *epp.Request, cands []*epp.Endpoint) {
	if len(r.Producers) == 0 {
		return
	}
	fmt.Fprintln(w, "\ndata producers (execution order):")
	for _, p := range r.Producers {
		fmt.Fprintf(w, "  %s (%s)\n", p.Name(), p.Type())
		for _, k := range p.Produces() {
			if k.Type == epp.TokenizedPromptType {
				if req.Tokenized == nil {
					fmt.Fprintf(w, "    %s: no tokens\n", k)
					continue
				}
				fmt.Fprintf(w, "    %s: %d prompt(s), %d tokens\n", k, len(req.Tokenized.Prompts), req.Tokenized.TokenCount())
				continue
			}
			if v, ok := req.Get(k); ok {
				fmt.Fprintf(w, "    %s: %s\n", k, formatValue(v))
			}
			seen := false
			for _, e := range cands {
				if v, ok := e.Get(k); ok {
					if !seen {
						fmt.Fprintf(w, "    %s:\n", k)
						seen = true
					}
					fmt.Fprintf(w, "      %s: %s\n", e.Name, formatValue(v))
				}
			}
		}
	}
}

func formatValue(v any) string {
	switch t := v.(type) {
	case *epp.PrefixCacheMatchInfo:
		if t == nil {
			return "nil"
		}
		return formatValue(*t)
	case epp.PrefixCacheMatchInfo:
		return fmt.Sprintf("match %d of %d blocks (block %d tokens)", t.MatchBlocks, t.TotalBlocks, t.BlockSizeTokens)
	case *epp.InFlightLoad:
		if t == nil {
			return "nil"
		}
		return formatValue(*t)
	case epp.InFlightLoad:
		return fmt.Sprintf("%d requests, %d tokens in flight", t.Requests, t.Tokens)
	case *epp.UncachedRequestTokens:
		if t == nil {
			return "nil"
		}
		return formatValue(*t)
	case epp.UncachedRequestTokens:
		return fmt.Sprintf("%d uncached tokens", t.Tokens)
	default:
		return fmt.Sprintf("%+v", v)
	}
}
