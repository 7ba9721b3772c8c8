package sweep

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eppsim/eppsim/scenario"
	"github.com/eppsim/eppsim/sim"
	"github.com/eppsim/eppsim/workload"
)

// DefaultMaxPoints bounds a sweep's points (Sweep.MaxPoints 0, the CLI's
// --max-points): a sweep of a million points is a week of simulations on
// one machine, most likely a typo in a range (0:999:1 for 0:9:1), so a
// larger one needs saying so (--max-points N or --yes).
const DefaultMaxPoints = 100_000

// MaxPoints is the most points a sweep can have at all: the plan, the log
// and the result files hold every point (--yes raises the bound to it).
const MaxPoints = 10_000_000

// Sweep defines a sweep: the traffic, fleet and environment of every
// point (Spec), the base EPP configuration and the dimensions to vary.
type Sweep struct {
	// Version is the eppsim version (recorded and hashed).
	Version string
	Spec    *scenario.Spec
	// EPP is the base configuration (--epp-config: file, "default",
	// baseline, or inline YAML).
	EPP scenario.EPP
	// Fleet describes the fleet for people ("4 × llama-3.1-8b-h100").
	Fleet string
	Dims  []Dim
	// Random > 0 samples that many distinct grid points (seeded by
	// RandomSeed) instead of running the whole grid.
	Random     int
	RandomSeed uint64
	// MaxPoints bounds the points (0: DefaultMaxPoints; at most
	// MaxPoints).
	MaxPoints int
}

// SpecDoc is a sweep's specification as points.jsonl and sweep.json
// record it. Everything that determines the simulations is in it; Hash
// covers those parts (file paths are replaced by content hashes).
type SpecDoc struct {
	Version string `json:"version"`
	Trace   string `json:"trace"`
	// TraceSHA256 identifies a trace file by content.
	TraceSHA256 string `json:"trace_sha256,omitempty"`
	EPPConfig   string `json:"epp_config"`
	// Baseline names the built-in baseline the base config is, if any.
	Baseline string `json:"baseline,omitempty"`
	Fleet    string `json:"fleet"`
	// Workload is workload.Options; Replicas the fleet ([]sim.ReplicaSpec).
	Workload    json.RawMessage `json:"workload"`
	Replicas    json.RawMessage `json:"replicas"`
	Environment EnvDoc          `json:"environment"`
	// BaseEPP is the base configuration's effective EndpointPickerConfig.
	BaseEPP    string   `json:"base_epp_config"`
	Dims       []DimDoc `json:"dims"`
	Random     int      `json:"random,omitempty"`
	RandomSeed uint64   `json:"random_seed,omitempty"`
	// Points is the number of points of the whole sweep (all shards).
	Points int `json:"points"`
}

// EnvDoc is the simulation environment of every point (before knobs).
type EnvDoc struct {
	Seed           uint64 `json:"seed"`
	ScrapeInterval string `json:"refresh_metrics_interval"`
	KVEventLag     string `json:"kv_event_lag"`
	EPPLatency     string `json:"epp_latency"`
	NetworkLatency string `json:"network_latency"`
	MaxRequests    int    `json:"max_requests,omitempty"`
	Duration       string `json:"duration,omitempty"`
	Warmup         string `json:"warmup,omitempty"`
	// GatewayMaxRequests is --gateway-max-requests (absent: no limit, so
	// the plans of earlier sweeps keep their hash).
	GatewayMaxRequests int `json:"gateway_max_requests,omitempty"`
}

// DimDoc is a dimension with its values.
type DimDoc struct {
	Name   string   `json:"name"`
	Values []string `json:"values"`
}

// Hash is the hex SHA-256 of the parts of d that determine the points'
// simulations.
func (d *SpecDoc) Hash() string {
	h := *d
	if h.TraceSHA256 != "" {
		h.Trace = ""
	}
	h.EPPConfig, h.Fleet = "", ""
	b, _ := json.Marshal(&h)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Plan is a validated sweep with its points numbered.
type Plan struct {
	spec *scenario.Spec
	base *base
	dims []Dim
	// sizes are the dimensions' value counts; random holds the sampled
	// points' value indices (nil for a grid).
	sizes  []int
	random [][]int32
	n      int
	doc    SpecDoc
	hash   string
	hasEPP bool // some dimension addresses the EPP config
}

// NewPlan validates a sweep (NewPlanContext without a context).
func NewPlan(sw Sweep) (*Plan, error) { return NewPlanContext(context.Background(), sw) }

// NewPlanContext validates a sweep: every dimension must address something
// that exists, the number of points must be within the bound
// (Sweep.MaxPoints), every value of a plugin dimension must give a
// configuration that loads on its own (an unknown parameter fails the
// plugin's strict decoding) and the largest fleet the knobs make must fit
// the fleet memory bound (sim.CheckFleetMemory). Each value is checked
// once, not each point: points are built as they run (Point), and a
// combination of values that the configuration refuses is that point's
// error. Cancelling ctx stops the checks (an error wrapping
// ErrInterrupted).
func NewPlanContext(ctx context.Context, sw Sweep) (*Plan, error) {
	if sw.Spec == nil {
		return nil, errors.New("sweep: no scenario")
	}
	if len(sw.Dims) == 0 {
		return nil, errors.New("nothing to vary: give at least one --vary NAME=VALUES")
	}
	if sw.Random < 0 {
		return nil, fmt.Errorf("--random %d: must not be negative", sw.Random)
	}
	limit := sw.MaxPoints
	switch {
	case limit == 0:
		limit = DefaultMaxPoints
	case limit < 0 || limit > MaxPoints:
		return nil, fmt.Errorf("--max-points %d: must be in 1..%d", limit, MaxPoints)
	}
	// The size first: nothing is loaded for a sweep that is refused.
	p := &Plan{dims: sw.Dims}
	seen := map[string]bool{}
	for _, d := range sw.Dims {
		if seen[d.Name] {
			return nil, fmt.Errorf("--vary %s given twice", d.Name)
		}
		seen[d.Name] = true
		if len(d.Values) == 0 {
			return nil, fmt.Errorf("--vary %s: no values", d.Name)
		}
		p.sizes = append(p.sizes, len(d.Values))
	}
	grid := GridSize(sw.Dims)
	n := grid
	if sw.Random > 0 {
		if float64(sw.Random) > grid {
			return nil, fmt.Errorf("--random %d: the space has only %.0f points; drop --random to run them all", sw.Random, grid)
		}
		n = float64(sw.Random)
	}
	if n > float64(limit) {
		what := fmt.Sprintf("the grid has %s points (%s)", fmtCount(grid), DescribeSize(sw.Dims))
		if sw.Random > 0 {
			what = fmt.Sprintf("--random %d", sw.Random)
		}
		hint := "raise --max-points or pass --yes to run them all, or sample it with --random N"
		if n > MaxPoints {
			hint = fmt.Sprintf("at most %s points can run at all; sample it with --random N", fmtCount(MaxPoints))
		}
		return nil, &sizeError{fmt.Sprintf("%s, more than the bound of %s (--max-points): %s", what, fmtCount(float64(limit)), hint)}
	}
	if sw.EPP.Source == "" && sw.EPP.YAML == nil {
		sw.EPP.Source = "default"
	}
	b, err := loadBase(sw.EPP)
	if err != nil {
		return nil, err
	}
	p.base = b
	spec := *sw.Spec
	if spec.Workload.Tokenizer == nil {
		// One tokenizer shared by every point's workload stream.
		tok, err := workload.NewTokenizer()
		if err != nil {
			return nil, err
		}
		spec.Workload.Tokenizer = tok
	}
	if b.builtin == "oracle" {
		spec.Env.KVEventLag = 0 // as scenario.Run does for the oracle baseline
	}
	p.spec = &spec
	for _, d := range sw.Dims {
		if err := b.check(d); err != nil {
			return nil, fmt.Errorf("--vary %s: %w", d, err)
		}
		if d.kind == kindWeight || d.kind == kindParam {
			p.hasEPP = true
			if b.builtin == "round-robin" {
				return nil, fmt.Errorf("--vary %s: the round-robin baseline has no configurable plugins; use a config file", d.Name)
			}
		}
		if d.Name == "replicas" && !uniformFleet(spec.Fleet) {
			return nil, errors.New("--vary replicas needs a uniform fleet (--replicas/--preset, not a --fleet file with groups or labels)")
		}
	}
	for _, d := range sw.Dims {
		if d.kind == kindParam {
			if err := p.checkValues(ctx, d); err != nil {
				return nil, err
			}
		}
	}
	if err := p.checkFleetMemory(); err != nil {
		return nil, err
	}
	if sw.Random > 0 {
		p.random = sample(p.sizes, grid, sw.Random, sw.RandomSeed)
	}
	p.n = int(n)
	if p.doc, err = specDoc(sw, &spec, b, p.n); err != nil {
		return nil, err
	}
	p.hash = p.doc.Hash()
	return p, nil
}

// ErrTooManyPoints is wrapped by NewPlan's error for a sweep past its
// points bound.
var ErrTooManyPoints = errors.New("too many points")

// sizeError is a sweep past its points bound (ErrTooManyPoints).
type sizeError struct{ msg string }

func (e *sizeError) Error() string { return e.msg }
func (e *sizeError) Unwrap() error { return ErrTooManyPoints }

// GridSize is the number of points of the grid the dimensions span.
func GridSize(dims []Dim) float64 {
	grid := 1.0
	for _, d := range dims {
		grid *= float64(len(d.Values))
	}
	return grid
}

// DescribeSize is "NAME 6 × NAME 1000", the dimensions' value counts.
func DescribeSize(dims []Dim) string {
	parts := make([]string, len(dims))
	for i, d := range dims {
		parts[i] = fmt.Sprintf("%s %d", d.Name, len(d.Values))
	}
	return strings.Join(parts, " × ")
}

// fmtCount writes a count with thousands separators (1,000,000).
func fmtCount(v float64) string {
	if v >= 1e15 {
		return strconv.FormatFloat(v, 'g', 4, 64)
	}
	s := strconv.FormatInt(int64(v), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// checkValues loads the base config with each of d's values alone, so an
// error names the --vary flag and the value. (Weights need no load: any
// finite weight is valid, and parsing made them finite.)
func (p *Plan) checkValues(ctx context.Context, d Dim) error {
	for _, v := range d.Values {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("checking --vary %s: %w", d.Name, ErrInterrupted)
		}
		_, y, err := p.base.configFor([]Dim{d}, []string{v})
		if err == nil {
			err = validateConfig(y, d.Name+"="+v)
		}
		if err != nil {
			return fmt.Errorf("--vary %s: value %s: %w", d.Name, v, err)
		}
	}
	return nil
}

// memoryKnobs are the knobs that change the fleet's memory.
var memoryKnobs = []string{"replicas", "num-gpu-blocks-override", "kv-blocks", "block-size"}

// checkFleetMemory checks the fleet of every combination of the smallest
// and largest values of the knobs that change its memory (the estimate
// grows with replicas and blocks and falls with the block size) against
// the scenario's bound.
func (p *Plan) checkFleetMemory() error {
	var idx []int
	for i, d := range p.dims {
		if slices.Contains(memoryKnobs, d.Name) {
			idx = append(idx, i)
		}
	}
	vals := make([]string, len(p.dims))
	for i, d := range p.dims {
		vals[i] = d.Values[0]
	}
	for combo := range 1 << len(idx) {
		for k, i := range idx {
			lo, hi := intExtremes(p.dims[i].Values)
			vals[i] = lo
			if combo&(1<<k) != 0 {
				vals[i] = hi
			}
		}
		spec, err := applyKnobs(p.spec, p.dims, vals)
		if err != nil {
			return fmt.Errorf("--vary (%s): %w", describe(p.dims, vals), err)
		}
		if err := sim.CheckFleetMemory(spec.Fleet, spec.Env.MaxFleetBytes); err != nil {
			var me *sim.MemoryError
			if errors.As(err, &me) && len(idx) > 0 {
				var at []string
				for _, i := range idx {
					at = append(at, p.dims[i].Name+"="+vals[i])
				}
				return fmt.Errorf("--vary %s: %w; lower those values, or raise --max-fleet-memory", strings.Join(at, " "), err)
			}
			return err
		}
	}
	return nil
}

// intExtremes returns the smallest and largest of integer values (as
// given).
func intExtremes(values []string) (lo, hi string) {
	lo, hi = values[0], values[0]
	l, _ := strconv.ParseInt(lo, 10, 64)
	h := l
	for _, v := range values[1:] {
		x, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			continue
		}
		if x < l {
			l, lo = x, v
		}
		if x > h {
			h, hi = x, v
		}
	}
	return lo, hi
}

// sample draws n distinct grid points uniformly (a sparse Fisher-Yates
// shuffle over the grid's row-major numbering when it fits in an int64,
// rejection of repeats otherwise).
func sample(sizes []int, grid float64, n int, seed uint64) [][]int32 {
	rng := rand.New(rand.NewPCG(seed, 0x5eed5eed))
	out := make([][]int32, 0, n)
	decode := func(k uint64) []int32 {
		idx := make([]int32, len(sizes))
		for i := len(sizes) - 1; i >= 0; i-- {
			idx[i] = int32(k % uint64(sizes[i]))
			k /= uint64(sizes[i])
		}
		return idx
	}
	if grid < 1<<62 {
		g := uint64(grid)
		swapped := map[uint64]uint64{}
		at := func(k uint64) uint64 {
			if v, ok := swapped[k]; ok {
				return v
			}
			return k
		}
		for i := range uint64(n) {
			j := i + rng.Uint64N(g-i)
			vi, vj := at(i), at(j)
			swapped[i], swapped[j] = vj, vi
			out = append(out, decode(vj))
		}
		return out
	}
	seen := map[string]bool{}
	for len(out) < n {
		idx := make([]int32, len(sizes))
		for i, s := range sizes {
			idx[i] = int32(rng.IntN(s))
		}
		key := fmt.Sprint(idx)
		if !seen[key] {
			seen[key] = true
			out = append(out, idx)
		}
	}
	return out
}

// specDoc records the sweep's specification.
func specDoc(sw Sweep, spec *scenario.Spec, b *base, n int) (SpecDoc, error) {
	d, err := TrafficDoc(spec)
	if err != nil {
		return d, err
	}
	d.Version, d.EPPConfig, d.Baseline, d.Fleet, d.BaseEPP, d.Random, d.Points = sw.Version, sw.EPP.Source, b.builtin, sw.Fleet, string(b.yaml), sw.Random, n
	if sw.EPP.YAML != nil {
		d.EPPConfig = sw.EPP.Name
	}
	if sw.Random > 0 {
		d.RandomSeed = sw.RandomSeed
	}
	for _, dim := range sw.Dims {
		d.Dims = append(d.Dims, DimDoc{Name: dim.Name, Values: dim.Values})
	}
	return d, nil
}

// TrafficDoc records what of spec determines its simulations: the trace
// (a file by the SHA-256 of its content), the workload options, the
// fleet and the environment. The capacity search's resumable run log
// identifies its traffic with it too.
func TrafficDoc(spec *scenario.Spec) (SpecDoc, error) {
	d := SpecDoc{Trace: spec.Trace}
	if !strings.HasPrefix(spec.Trace, workload.BuiltinPrefix) {
		// An inference-perf config is identified by the config file.
		sum, err := fileSHA256(strings.TrimPrefix(spec.Trace, workload.InferencePerfPrefix))
		if err != nil {
			return d, fmt.Errorf("--trace: %w", err)
		}
		d.TraceSHA256 = sum
	}
	w := spec.Workload
	w.Tokenizer = nil
	var err error
	if d.Workload, err = json.Marshal(w); err != nil {
		return d, fmt.Errorf("recording the workload options: %w", err)
	}
	if d.Replicas, err = json.Marshal(spec.Fleet); err != nil {
		return d, fmt.Errorf("recording the fleet: %w", err)
	}
	e := spec.Env
	d.Environment = EnvDoc{Seed: e.Seed, ScrapeInterval: time.Duration(e.ScrapeInterval).String(),
		KVEventLag: time.Duration(e.KVEventLag).String(), EPPLatency: time.Duration(e.EPPLatency).String(),
		NetworkLatency: time.Duration(e.NetworkLatency).String(), MaxRequests: e.MaxRequests,
		GatewayMaxRequests: e.GatewayMaxRequests}
	if e.Duration > 0 {
		d.Environment.Duration = time.Duration(e.Duration).String()
	}
	if e.Warmup > 0 {
		d.Environment.Warmup = time.Duration(e.Warmup).String()
	}
	return d, nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Len is the number of points of the whole sweep.
func (p *Plan) Len() int { return p.n }

// Dims returns the varied dimensions in order.
func (p *Plan) Dims() []Dim { return p.dims }

// Doc returns the sweep's specification.
func (p *Plan) Doc() SpecDoc { return p.doc }

// Hash returns the hash of the sweep's specification.
func (p *Plan) Hash() string { return p.hash }

func (p *Plan) indices(i int) []int {
	idx := make([]int, len(p.sizes))
	if p.random != nil {
		for k, v := range p.random[i] {
			idx[k] = int(v)
		}
		return idx
	}
	for k := len(p.sizes) - 1; k >= 0; k-- {
		idx[k] = i % p.sizes[k]
		i /= p.sizes[k]
	}
	return idx
}

// Values returns point i's values, aligned with Dims. Grid points are
// numbered row-major: the last dimension varies fastest.
func (p *Plan) Values(i int) []string {
	out := make([]string, len(p.dims))
	for k, j := range p.indices(i) {
		out[k] = p.dims[k].Values[j]
	}
	return out
}

// describe is "name=value, name=value" for errors and best.yaml.
func describe(dims []Dim, values []string) string {
	parts := make([]string, len(dims))
	for i, d := range dims {
		parts[i] = d.Name + "=" + values[i]
	}
	return strings.Join(parts, ", ")
}

// Point returns what point i simulates: the scenario with its knobs
// applied and its EPP configuration.
func (p *Plan) Point(i int) (*scenario.Spec, scenario.EPP, error) {
	if i < 0 || i >= p.n {
		return nil, scenario.EPP{}, fmt.Errorf("point %d out of range 0..%d", i, p.n-1)
	}
	vals := p.Values(i)
	spec, err := applyKnobs(p.spec, p.dims, vals)
	if err != nil {
		return nil, scenario.EPP{}, fmt.Errorf("point %d (%s): %w", i, describe(p.dims, vals), err)
	}
	name := fmt.Sprintf("point-%d", i)
	if p.base.builtin == "round-robin" {
		// Only knobs vary: the baseline's picker swap needs its name.
		return spec, scenario.EPP{Name: name, Source: p.base.builtin}, nil
	}
	_, y, err := p.base.configFor(p.dims, vals)
	if err != nil {
		return nil, scenario.EPP{}, fmt.Errorf("point %d (%s): %w", i, describe(p.dims, vals), err)
	}
	return spec, scenario.EPP{Name: name, YAML: y}, nil
}
