package replica

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"sigs.k8s.io/yaml"

	"github.com/eppsim/eppsim/arch"
	"github.com/eppsim/eppsim/internal/suggest"
)

// Coefficients are the fitted constants of the calibrated step-time model
// (CalibratedModel; docs/latency.md "The step-time model"). Every term of
// the model is a datasheet quantity of the model and GPU (bytes, FLOPs,
// bandwidths) divided by one of these efficiencies, or one of these
// overheads; none depends on a particular model or GPU, so a calibration
// carries to models and GPUs it was not fitted on.
type Coefficients struct {
	// StepUs is the fixed cost of one engine step (scheduling, input
	// preparation, sampling, the launch of the forward pass), µs.
	StepUs float64 `json:"step_us"`
	// LayerUs is the per-layer cost of a step that no byte or FLOP
	// explains (kernel launches and small kernels: norms, rotary,
	// activation), µs per layer.
	LayerUs float64 `json:"layer_us"`
	// SeqUs is the cost per scheduled sequence (its input rows, sampling
	// and output handling), µs.
	SeqUs float64 `json:"seq_us"`
	// EtaWeights is the fraction of the GPU's memory bandwidth that
	// streaming the weights achieves; EtaKV that of reading the KV cache.
	EtaWeights float64 `json:"eta_weights"`
	EtaKV      float64 `json:"eta_kv"`
	// EtaExperts is the fraction of the memory bandwidth that the routed
	// experts of an unquantised mixture of experts stream at: vLLM and
	// SGLang read them in their fused MoE kernel (one launch per layer and
	// projection over every expert), not in the dense GEMMs that
	// EtaWeights measures, and that kernel's measured efficiency is higher
	// (docs/latency.md, "Mixtures of experts": 0.84, vllm-project/vllm PR
	// #44152). Quantised experts (FP8, INT, MXFP4) run other kernels that
	// nothing here measured and stream at EtaWeights. 0 (absent, as in a
	// calibration written before it existed): EtaWeights, so such a file
	// predicts as it did.
	EtaExperts float64 `json:"eta_experts,omitempty"`
	// EtaKVMHA is the fraction of the memory bandwidth that reading the
	// KV cache achieves for a model with multi-head attention (a key and
	// a value per query head, arch.Model.MultiHeadKV); EtaKV is then that
	// of every other model (grouped-query attention, MLA). Fitted: among
	// the shared runs, Llama-2-7B is the one such model, and fits without
	// it read the other models' KV at about 0.7 of the bandwidth where
	// with it one efficiency settles at 0.85 (docs/latency.md, "The
	// knee"). 0 (absent, as in a calibration written before it existed):
	// EtaKV for every model, so such a file predicts as it did.
	EtaKVMHA float64 `json:"eta_kv_mha,omitempty"`
	// MFU is the fraction of the datasheet tensor peak that the matrix
	// multiplies and attention achieve when compute-bound.
	MFU float64 `json:"mfu"`
	// RooflineExponent p blends streaming and compute time as
	// (mem^p + cmp^p)^(1/p): large p is the sharp roofline max(mem, cmp),
	// p = 1 their sum. Real kernels fall short of the roofline where the
	// two are close (matrix multiplies of a few hundred rows); p ≥ 1.
	RooflineExponent float64 `json:"roofline_exponent"`
	// AllReduceUs is the latency of one tensor-parallel all-reduce (two
	// per layer), µs: the launch and the flag exchange between the ranks,
	// whatever the size; EtaLink the fraction of the GPU-to-GPU link's
	// one-way bandwidth the bytes of NCCL's ring achieve (allreduce.go:
	// vLLM's algorithm choice sets the bytes; its custom kernels receive at
	// the measured customLinkShare instead).
	AllReduceUs float64 `json:"all_reduce_us"`
	EtaLink     float64 `json:"eta_link"`
	// IngestUs is the time between a request reaching the server and its
	// first token reaching the client that the engine does not spend
	// (HTTP, tokenisation, the hand-off to the engine, detokenising and
	// streaming the first token), µs: added to TTFT and E2E, never to a
	// step. PerOutputTokenUs is added to E2E per output token likewise.
	IngestUs         float64 `json:"ingest_us"`
	PerOutputTokenUs float64 `json:"per_output_token_us"`
	// IngestJitter is the share of the ingest delay that varies from
	// request to request: each request's ingest is IngestUs·((1−j) +
	// j·E) with E exponential of mean 1, drawn from the run's seed — the
	// mean stays IngestUs, and j in [0, 1] sets the tail (the API server
	// is one process whose event loop every request shares).
	IngestJitter float64 `json:"ingest_jitter,omitempty"`
}

// ExpertEfficiency is the efficiency an unquantised mixture of experts'
// routed experts stream at: EtaExperts, or EtaWeights where it is absent
// (0), as in a calibration written before it existed.
func (c Coefficients) ExpertEfficiency() float64 {
	if c.EtaExperts > 0 {
		return c.EtaExperts
	}
	return c.EtaWeights
}

// KVEfficiency is the efficiency the KV reads of a model stream at:
// EtaKVMHA for multi-head attention when present, EtaKV otherwise.
func (c Coefficients) KVEfficiency(multiHead bool) float64 {
	if multiHead && c.EtaKVMHA > 0 {
		return c.EtaKVMHA
	}
	return c.EtaKV
}

// OptionalCoefficients are the coefficients a calibration may lack (0,
// as in a file written before they existed), each with the coefficient
// that stands for it then: the experts stream at eta_weights, a
// multi-head model's KV at eta_kv.
var OptionalCoefficients = map[string]string{"eta_experts": "eta_weights", "eta_kv_mha": "eta_kv"}

// CoefficientExercised reports whether the step time of model m depends
// on coefficient name. Every coefficient does but the optional ones:
// eta_experts only in a mixture of experts whose routed experts are
// unquantised (they run the fused MoE kernel; quantised experts stream at
// eta_weights, as newCalibratedModel has it), eta_kv_mha only with
// multi-head attention (arch.Model.MultiHeadKV). A fit on runs of which
// none exercises a coefficient has nothing to fit it on.
func CoefficientExercised(name string, m *arch.Model) bool {
	switch name {
	case "eta_experts":
		return m.MoE != nil && m.MoE.Experts > 0 && fusedMoEExperts(m)
	case "eta_kv_mha":
		return m.MultiHeadKV()
	}
	return true
}

// fusedMoEExperts reports whether a mixture of experts' routed experts
// run vLLM's fused MoE kernel, whose efficiency eta_experts is: when they
// are unquantised (quantised experts run other kernels and stream at
// eta_weights).
func fusedMoEExperts(m *arch.Model) bool { return m.Quant.WeightBits == 0 }

// CoefficientNames lists the coefficients in the order of Vector.
var CoefficientNames = []string{"step_us", "layer_us", "seq_us", "eta_weights", "eta_kv", "mfu",
	"roofline_exponent", "all_reduce_us", "eta_link", "ingest_us", "per_output_token_us", "ingest_jitter", "eta_experts", "eta_kv_mha"}

// Vector returns the coefficients in CoefficientNames order.
func (c Coefficients) Vector() []float64 {
	return []float64{c.StepUs, c.LayerUs, c.SeqUs, c.EtaWeights, c.EtaKV, c.MFU,
		c.RooflineExponent, c.AllReduceUs, c.EtaLink, c.IngestUs, c.PerOutputTokenUs, c.IngestJitter, c.EtaExperts, c.EtaKVMHA}
}

// CoefficientsFromVector is the inverse of Vector.
func CoefficientsFromVector(v []float64) Coefficients {
	return Coefficients{StepUs: v[0], LayerUs: v[1], SeqUs: v[2], EtaWeights: v[3], EtaKV: v[4], MFU: v[5],
		RooflineExponent: v[6], AllReduceUs: v[7], EtaLink: v[8], IngestUs: v[9], PerOutputTokenUs: v[10], IngestJitter: v[11],
		EtaExperts: v[12], EtaKVMHA: v[13]}
}

// Validate checks that every coefficient is physically meaningful: the
// overheads are finite and not negative, the efficiencies in (0, 1]
// (an OptionalCoefficients entry may also be 0: absent, its stand-in
// applies).
func (c Coefficients) Validate() error {
	for i, v := range c.Vector() {
		name := CoefficientNames[i]
		switch {
		case math.IsNaN(v) || math.IsInf(v, 0):
			return fmt.Errorf("%s: %v is not a number", name, v)
		case v == 0 && OptionalCoefficients[name] != "":
			// Absent: its stand-in applies.
		case strings.HasPrefix(name, "eta_") || name == "mfu":
			if v <= 0 || v > 1 {
				return fmt.Errorf("%s: %v must be in (0, 1] (a fraction of a datasheet peak)", name, v)
			}
		case name == "ingest_jitter":
			if v < 0 || v > 1 {
				return fmt.Errorf("%s: %v must be in [0, 1]", name, v)
			}
		case name == "roofline_exponent":
			if v < 1 {
				return fmt.Errorf("%s: %v must be at least 1", name, v)
			}
		case v < 0:
			return fmt.Errorf("%s: %v must not be negative", name, v)
		}
	}
	return nil
}

// Calibration is a named, documented set of coefficients: what `eppsim
// calibrate` writes and `--calibration` reads.
type Calibration struct {
	// Name labels the calibration in summaries.
	Name string `json:"name"`
	// FittedOn says what it was fitted on (runs, file, objective); Notes
	// anything else a reader should know.
	FittedOn string `json:"fitted_on,omitempty"`
	Notes    string `json:"notes,omitempty"`
	// EppsimVersion is the eppsim that fitted it.
	EppsimVersion string       `json:"eppsim_version,omitempty"`
	Coefficients  Coefficients `json:"coefficients"`
	// Fit reports how well it fits, per metric (MAPE %, in sample and
	// under each out-of-sample protocol), as calibrate measured it.
	Fit map[string]float64 `json:"fit,omitempty"`
	// Folds are the refits of calibrate's out-of-sample protocols, each
	// fitted without the runs it names: validate latency predicts those
	// runs with them (docs/latency.md, "How well it predicts").
	Folds []CalibrationFold `json:"folds,omitempty"`
	// Intervals are, per latency metric, the factors that bound 90% of
	// the calibration's out-of-sample errors (measured ÷ predicted, whole
	// runs, leave one model out): a prediction p has the interval [p·Low,
	// p·High] (docs/latency.md, "Intervals"). Empty without protocol runs.
	Intervals map[string]Interval `json:"intervals,omitempty"`
	// Extrapolation records, per axis of the runs it was fitted on
	// (ExtrapolationAxes: the TP size, the GPU), the values the fit saw
	// and the interval factors of the protocol that held each value out
	// in turn. A run at a value the fit never saw takes those factors as
	// well (IntervalsFor; docs/latency.md, "Intervals"). Empty in files
	// written before 2026-12-03's session 15.
	Extrapolation map[string]Extrapolation `json:"extrapolation,omitempty"`
	// SeenModels records the models the calibration was fitted on and the
	// interval factors of a run of a fitted deployment at another load:
	// the held-out errors of the protocol that left each model's
	// highest-load runs out (calibrate --protocol load). A fleet of
	// deployments it has step offsets for (FittedDeployment) takes these
	// factors instead of Intervals, which measure a model the fit never
	// saw (IntervalsFor). Absent in files written before 2026-12-07's
	// session 19, which give every run Intervals.
	SeenModels *SeenModels `json:"seen_models,omitempty"`
	// Offsets are the step offsets of the deployments the calibration was
	// fitted on (docs/latency.md, "Deployment offsets"): a replica of one
	// of them runs every step × its factor. The coefficients are fitted
	// without them; ID names the coefficients alone. Absent in files
	// written before 2026-12-07's session 19.
	Offsets []StepOffset `json:"offsets,omitempty"`
	// FullBatch is how much slower than predicted the calibration's runs
	// measured past their knee decoded at full batch (docs/latency.md,
	// "The knee"): the slow end of every knee simulation is at least its
	// factor. Absent when no such run was given, and in files written
	// before 2026-12-07's session 20.
	FullBatch *FullBatch `json:"full_batch,omitempty"`
}

// FullBatch is the largest decode error at full batch among a
// calibration's runs measured overloaded whose predictions bind at the
// engine's slots (max_num_seqs; SGLang's max_running_requests): measured ÷ predicted decode time per output token (whole
// runs; no fit sees an overloaded run, so each is out of sample).
type FullBatch struct {
	// Factor is the largest ratio, Runs how many runs were compared.
	Factor float64 `json:"factor"`
	Runs   int     `json:"runs"`
}

// SlowEnd is the step-time factor of a knee simulation's slow end: the
// step-time interval's high end itl, or the full-batch factor when that
// is larger (a decode at full batch measured that much slower than
// predicted).
func (c *Calibration) SlowEnd(itl float64) float64 {
	if c != nil && c.FullBatch != nil && c.FullBatch.Factor > itl {
		return c.FullBatch.Factor
	}
	return itl
}

// SeenModels is a calibration's fitted models and the interval factors
// of another load of a fitted deployment.
type SeenModels struct {
	// Models are the Hugging Face ids of the fitted runs' models, sorted.
	Models []string `json:"models"`
	// Intervals are, per latency metric, the factors of the
	// leave-the-highest-load-out errors (measured ÷ predicted, whole
	// runs, as Intervals are); empty when that protocol did not run or
	// predicted fewer than 5 runs.
	Intervals map[string]Interval `json:"intervals,omitempty"`
}

// Has reports whether model (a Hugging Face id, compared without regard
// to case, as the Hub does) is one of s's models.
func (s *SeenModels) Has(model string) bool {
	if s == nil || model == "" {
		return false
	}
	return slices.ContainsFunc(s.Models, func(m string) bool { return strings.EqualFold(m, model) })
}

// Extrapolation is a calibration's reach along one axis of its runs.
type Extrapolation struct {
	// Seen lists the axis's values among the runs fitted on (TP sizes as
	// decimal numbers, GPUs by catalogue name), sorted.
	Seen []string `json:"seen"`
	// Intervals are, per latency metric, the factors of the held-out
	// errors of the axis's protocol (calibrate --protocol tp or gpu),
	// measured ÷ predicted over whole runs as Intervals are; empty when
	// the protocol did not run or predicted fewer than 5 runs.
	Intervals map[string]Interval `json:"intervals,omitempty"`
}

// ExtrapolationAxis is one axis a calibration records its reach along.
type ExtrapolationAxis struct {
	// Key is the axis's key in Calibration.Extrapolation, which is also
	// the name of the protocol that holds its values out (latency
	// package: "tp", "gpu").
	Key string
	// Plural names the axis's values in sentences ("TP sizes").
	Plural string
	// Protocol names the protocol in sentences.
	Protocol string
}

// ExtrapolationAxes are the axes calibrate records, in the order
// IntervalsFor reports them.
var ExtrapolationAxes = []ExtrapolationAxis{
	{Key: "tp", Plural: "TP sizes", Protocol: "leave-one-TP-size-out"},
	{Key: "gpu", Plural: "GPUs", Protocol: "leave-one-GPU-out"},
}

// Placement is what a run's replicas run and where, as a calibration's
// intervals depend on it: Model (a Hugging Face id; empty: not known) in
// tensor-parallel groups of TP GPUs (0 counts as 1) named GPU (a
// catalogue name; empty: not known).
type Placement struct {
	Model string
	TP    int
	GPU   string
	// Engine and Weights complete the deployment (Deployment: the engine
	// type, the weights' format), which a calibration's step offsets are
	// keyed by.
	Engine, Weights string
}

// PlacementOf is preset p's placement.
func PlacementOf(p *Preset) Placement {
	d := DeploymentOf(p)
	return Placement{Model: d.Model, TP: d.TP, GPU: d.GPU, Engine: d.Engine, Weights: d.Weights}
}

// Deployment is the deployment p describes.
func (p Placement) Deployment() Deployment {
	return Deployment{Model: p.Model, GPU: p.GPU, TP: max(p.TP, 1), Engine: p.Engine, Weights: p.Weights}
}

// AxisValue is p's value on the axis of key ("tp": the TP size as a
// decimal number, "gpu": the GPU's name), as Extrapolation.Seen lists it.
func (p Placement) AxisValue(key string) string {
	if key == "tp" {
		return strconv.Itoa(max(p.TP, 1))
	}
	return p.GPU
}

// label names p's value on the axis of key in sentences ("TP 8", "H200").
func (p Placement) label(key string) string {
	if key == "tp" {
		return "TP " + p.AxisValue(key)
	}
	return p.GPU
}

// IntervalsFor is the interval factors of a run placed at at, the
// protocol they come from (basis: "leave the highest load out" or "leave
// one model out") and, per thing the run has that the fit never saw, a
// sentence saying what the intervals rest on. A run whose every placement
// is a deployment the calibration has a step offset for (Offsets; by
// model alone, SeenModels, in a calibration without offsets) takes the
// factors of another load of such a deployment (SeenModels.Intervals);
// any other run those of a model the fit never saw (Intervals), with a
// sentence naming each model, or deployment of a fitted model, it was not
// fitted on. Either is then widened for TP sizes and GPUs beyond the fit
// (Widen).
//
// The choice, where the issue that asked for intervals is silent: an
// interval should measure the error of the question the run asks. A run
// of a fitted deployment, at a rate or on a workload the fit did not see,
// is what the load protocol predicted: a refit that saw the deployment's
// other runs, corrected by their offset. A fitted model on a new GPU or
// TP size has no offset, and its error is not that; the model-out errors
// are the nearer measure (docs/latency.md, "Intervals", says this was
// decided after seeing the load protocol's coverage).
func (c *Calibration) IntervalsFor(at ...Placement) (factors map[string]Interval, basis string, notes []string) {
	base, basis := c.Intervals, "leave one model out"
	fitted := len(at) > 0 && c.SeenModels != nil && len(c.SeenModels.Intervals) > 0
	var unseen []string
	for _, p := range at {
		switch {
		case c.FittedDeployment(p):
		case !c.SeenModels.Has(p.Model):
			fitted = false
			if c.SeenModels != nil && p.Model != "" && !slices.Contains(unseen, p.Model) {
				unseen = append(unseen, p.Model)
				notes = append(notes, fmt.Sprintf("%s is not a model the calibration was fitted on; the intervals are its leave-one-model-out errors", p.Model))
			}
		default:
			fitted = false
			if d := p.Deployment().String(); !slices.Contains(unseen, d) {
				unseen = append(unseen, d)
				notes = append(notes, fmt.Sprintf("%s is not a deployment the calibration was fitted on (it has no step offset); the intervals are its leave-one-model-out errors", d))
			}
		}
	}
	if fitted {
		base, basis = c.SeenModels.Intervals, "leave the highest load out"
	}
	factors, more := c.Widen(base, at...)
	return factors, basis, append(notes, more...)
}

// FittedDeployment reports whether a run placed at p is one the
// calibration's narrow intervals (SeenModels.Intervals) describe: a
// deployment it has a step offset for, or, in a calibration without
// offsets, a model it was fitted on.
func (c *Calibration) FittedDeployment(p Placement) bool {
	if !c.SeenModels.Has(p.Model) {
		return false
	}
	return len(c.Offsets) == 0 || HasOffset(c.Offsets, p.Deployment())
}

// Widen returns base (a copy; factors per latency metric) widened for
// runs placed at any of at: for every axis on which some placement has
// a value the fit never saw, each metric takes the lower of the two lows
// and the higher of the two highs of base and the axis's factors (a
// metric only the axis has comes as it is), once per axis however many
// placements are beyond it. It also returns one sentence per such value,
// saying what the interval rests on. Placements the calibration covers
// leave base as it is, with no sentence.
//
// The choice, where the issue that asked for intervals is silent: a run
// beyond the fit's TP sizes or GPUs is predicted by physics the fit only
// checked at other values (the all-reduce, the datasheet ratios), and
// the protocol that held a value out measured what that costs, so its
// errors bound the run's as well as the model-out errors do. Nothing
// narrows an interval: the union keeps both sources of error.
func (c *Calibration) Widen(base map[string]Interval, at ...Placement) (map[string]Interval, []string) {
	out := maps.Clone(base)
	var notes []string
	for _, ax := range ExtrapolationAxes {
		x, ok := c.Extrapolation[ax.Key]
		if !ok || len(x.Seen) == 0 {
			continue
		}
		var unseen []string
		for _, p := range at {
			v := p.AxisValue(ax.Key)
			if v == "" || slices.Contains(x.Seen, v) || slices.Contains(unseen, v) {
				continue
			}
			unseen = append(unseen, v)
			note := fmt.Sprintf("%s is outside the calibration's %s (%s)", p.label(ax.Key), ax.Plural, strings.Join(x.Seen, ", "))
			if len(x.Intervals) == 0 {
				note += "; no " + ax.Protocol + " errors measure it (too few runs held out, or the protocol was not run), so the intervals leave it out"
			} else {
				note += "; the intervals include its " + ax.Protocol + " errors"
			}
			notes = append(notes, note)
		}
		if len(unseen) == 0 || len(x.Intervals) == 0 {
			continue
		}
		if out == nil {
			out = map[string]Interval{}
		}
		for m, iv := range x.Intervals {
			if b, has := out[m]; has {
				iv = Interval{Low: min(b.Low, iv.Low), High: max(b.High, iv.High), Runs: b.Runs + iv.Runs}
			}
			out[m] = iv
		}
	}
	return out, notes
}

// Interval is a pair of factors around a prediction.
type Interval struct {
	Low  float64 `json:"low"`
	High float64 `json:"high"`
	// Runs is the number of out-of-sample errors the factors come from.
	Runs int `json:"runs"`
}

// CalibrationFold is one refit of an out-of-sample protocol.
type CalibrationFold struct {
	// Protocol is the protocol's name (model, load, tp, gpu); HeldOut
	// names the group it held out, Runs the ids of its runs.
	Protocol string   `json:"protocol"`
	HeldOut  string   `json:"held_out"`
	Runs     []string `json:"runs"`
	// TrainedOn is the number of runs the refit was fitted on; Weights
	// the metric weights its objective used (empty: all 1).
	TrainedOn int                `json:"trained_on"`
	Weights   map[string]float64 `json:"weights,omitempty"`
	// Draws is how many arrival draws predicted a run near its knee in
	// the refit's objective (calibrate --draws); absent or 1: one draw,
	// as every refit before --draws (2026-12-03) was fitted.
	Draws        int          `json:"draws,omitempty"`
	Coefficients Coefficients `json:"coefficients"`
	// Offsets are the fold's own step offsets, from its training runs
	// predicted with its coefficients, for the deployments its held-out
	// runs share with them (none when they share none).
	Offsets []StepOffset `json:"offsets,omitempty"`
}

// defaultCalibrationYAML is the calibration that ships: fitted by `eppsim
// calibrate` on ../shared/latency/experiments.json (docs/latency.md).
//
//go:embed calibrations/default.yaml
var defaultCalibrationYAML []byte

// priorCalibrationYAML is the documented prior where calibrate starts
// (calibrations/prior.yaml).
//
//go:embed calibrations/prior.yaml
var priorCalibrationYAML []byte

// PriorCalibration returns the documented prior of the calibration: round
// physical magnitudes, not fitted, where `eppsim calibrate` starts its
// full fit and every out-of-sample refit.
func PriorCalibration() Calibration {
	c, err := parsedPrior()
	if err != nil {
		panic(err) // embedded and tested: a failure is a build error
	}
	return c.Clone()
}

// DefaultCalibration returns the shipped calibration.
func DefaultCalibration() Calibration {
	c, err := parsedDefault()
	if err != nil {
		panic(err) // embedded and tested: a failure is a build error
	}
	return c.Clone()
}

// The embedded calibrations are parsed once per process and handed out as
// copies (Clone), which no caller can change the originals through:
// parsing the shipped one (its folds make it about 500 lines of YAML) was
// nine tenths of the time of an eppsim command that fails on a flag,
// since every built-in preset resolves it.
var (
	parsedDefault = sync.OnceValues(func() (Calibration, error) {
		return ParseCalibration(defaultCalibrationYAML, "calibrations/default.yaml")
	})
	parsedPrior = sync.OnceValues(func() (Calibration, error) {
		return ParseCalibration(priorCalibrationYAML, "calibrations/prior.yaml")
	})
)

// Clone returns a copy of c that shares no map or slice with it.
func (c Calibration) Clone() Calibration {
	c.Fit = maps.Clone(c.Fit)
	c.Intervals = maps.Clone(c.Intervals)
	if c.Extrapolation != nil {
		x := make(map[string]Extrapolation, len(c.Extrapolation))
		for k, v := range c.Extrapolation {
			v.Seen, v.Intervals = slices.Clone(v.Seen), maps.Clone(v.Intervals)
			x[k] = v
		}
		c.Extrapolation = x
	}
	if c.SeenModels != nil {
		c.SeenModels = &SeenModels{Models: slices.Clone(c.SeenModels.Models), Intervals: maps.Clone(c.SeenModels.Intervals)}
	}
	c.Offsets = slices.Clone(c.Offsets)
	if c.FullBatch != nil {
		fb := *c.FullBatch
		c.FullBatch = &fb
	}
	if c.Folds != nil {
		folds := make([]CalibrationFold, len(c.Folds))
		for i, f := range c.Folds {
			f.Runs = slices.Clone(f.Runs)
			f.Weights = maps.Clone(f.Weights)
			f.Offsets = slices.Clone(f.Offsets)
			folds[i] = f
		}
		c.Folds = folds
	}
	return c
}

// ParseCalibration decodes a calibration file strictly; errors name the
// file and the field.
func ParseCalibration(data []byte, file string) (Calibration, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return Calibration{}, fmt.Errorf("%s: %w", file, err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	var c Calibration
	if err := dec.Decode(&c); err != nil {
		return Calibration{}, fmt.Errorf("%s: %w", file, suggest.UnknownField(err, c, nil))
	}
	if c.Name == "" {
		return Calibration{}, fmt.Errorf("%s: name: required", file)
	}
	if err := c.Coefficients.Validate(); err != nil {
		return Calibration{}, fmt.Errorf("%s: coefficients.%w", file, err)
	}
	if err := checkIntervals(c.Intervals, "intervals"); err != nil {
		return Calibration{}, fmt.Errorf("%s: %w", file, err)
	}
	if s := c.SeenModels; s != nil {
		if len(s.Models) == 0 {
			return Calibration{}, fmt.Errorf("%s: seen_models.models: required", file)
		}
		if err := checkIntervals(s.Intervals, "seen_models.intervals"); err != nil {
			return Calibration{}, fmt.Errorf("%s: %w", file, err)
		}
	}
	for k, x := range c.Extrapolation {
		if !slices.ContainsFunc(ExtrapolationAxes, func(a ExtrapolationAxis) bool { return a.Key == k }) {
			return Calibration{}, fmt.Errorf("%s: extrapolation.%s: unknown axis (have tp, gpu)", file, k)
		}
		if len(x.Seen) == 0 {
			return Calibration{}, fmt.Errorf("%s: extrapolation.%s.seen: required", file, k)
		}
		if err := checkIntervals(x.Intervals, "extrapolation."+k+".intervals"); err != nil {
			return Calibration{}, fmt.Errorf("%s: %w", file, err)
		}
	}
	if err := checkOffsets(c.Offsets, "offsets"); err != nil {
		return Calibration{}, fmt.Errorf("%s: %w", file, err)
	}
	if fb := c.FullBatch; fb != nil {
		if !(fb.Factor > 0) || math.IsInf(fb.Factor, 0) {
			return Calibration{}, fmt.Errorf("%s: full_batch.factor: want a positive number, got %v", file, fb.Factor)
		}
		if fb.Runs < 1 {
			return Calibration{}, fmt.Errorf("%s: full_batch.runs: want at least 1, got %d", file, fb.Runs)
		}
	}
	for i, f := range c.Folds {
		if err := f.Coefficients.Validate(); err != nil {
			return Calibration{}, fmt.Errorf("%s: folds[%d].coefficients.%w", file, i, err)
		}
		if err := checkOffsets(f.Offsets, fmt.Sprintf("folds[%d].offsets", i)); err != nil {
			return Calibration{}, fmt.Errorf("%s: %w", file, err)
		}
		if f.Protocol == "" || len(f.Runs) == 0 {
			return Calibration{}, fmt.Errorf("%s: folds[%d]: protocol and runs are required", file, i)
		}
	}
	return c, nil
}

// checkIntervals checks a file's interval factors under field: 0 < low ≤
// high, finite.
func checkIntervals(f map[string]Interval, field string) error {
	for _, m := range slices.Sorted(maps.Keys(f)) {
		iv := f[m]
		if !(iv.Low > 0) || !(iv.High >= iv.Low) || math.IsInf(iv.High, 0) {
			return fmt.Errorf("%s.%s: want 0 < low ≤ high, got %v and %v", field, m, iv.Low, iv.High)
		}
	}
	return nil
}

// LoadCalibration reads a calibration file (a regular file of at most
// 16 MiB, as every configuration file).
func LoadCalibration(path string) (Calibration, error) {
	data, err := arch.ReadConfigFile(path)
	if err != nil {
		return Calibration{}, err // *PathError: names the file
	}
	return ParseCalibration(data, path)
}

// MarshalYAML renders the calibration as a commented YAML file.
func (c Calibration) MarshalYAML() ([]byte, error) {
	js, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	y, err := yaml.JSONToYAML(js)
	if err != nil {
		return nil, err
	}
	head := "# eppsim step-time calibration (docs/latency.md). Read by `eppsim run --calibration FILE`\n" +
		"# and by the calibration key of preset and fleet files; written by `eppsim calibrate`.\n"
	return append([]byte(head), y...), nil
}

// ID identifies the coefficients (name and a hash of their values), as
// summaries record it.
func (c Calibration) ID() string {
	js, _ := json.Marshal(c.Coefficients)
	sum := sha256.Sum256(js)
	return c.Name + "@" + hex.EncodeToString(sum[:4])
}

// CalibratedModel is eppsim's default step-time model (docs/latency.md):
// per engine step,
//
//	t = step_us + layer_us·L + seq_us·B
//	  + R(W/(BW·η_w) + X/(BW·η_x),  F_lin/(P·mfu))   linear layers: weights streamed, compute
//	  + R(K/(BW·η_kv), F_attn/(P·mfu))       attention: KV cache streamed, compute
//	  + [TP > 1] 2L·(all_reduce_us + [two-stage] 5.5 µs + bytes_in(N·d·2 B, TP) / (link/2·η))
//
// with η = customLinkShare (0.52, measured) for vLLM's custom all-reduce
// kernels and η_link for NCCL's ring (allreduce.go),
//
// where R(m, c) = (m^p + c^p)^(1/p) with p = roofline_exponent (a smooth
// roofline: max(m, c) for large p)
//
// per GPU of a tensor-parallel group, with L layers, B scheduled
// sequences, N new tokens, BW the memory bandwidth, P the dense tensor
// peak for the weights' type and link the GPU-to-GPU bandwidth, both
// directions (arch's catalogue); bytes_in is what one GPU receives in the
// all-reduce algorithm vLLM picks for that size (allreduce.go). W is the dense weight bytes the step reads (every weight
// but the routed experts), X those of the routed experts its N tokens
// reach in each MoE layer, E·(1−(1−k/E)^N) of E with top-k routing
// (tokens routed independently), streamed by the fused MoE kernel at η_x
// (Coefficients.EtaExperts; η_w for quantised experts). K is
// the KV bytes of every scheduled sequence's context and new tokens
// (cached prefix included). F_lin is 2·(active linear parameters) per new
// token plus the lm_head for each sampled token; F_attn is
// AttentionFLOPsPerPair per (query, context) pair, causal within a chunk
// (vllm-engine.md B.1). The linear layers and attention are separate
// kernels, so their times add; within each, streaming and compute overlap
// (a roofline, smoothed where they are close). The coefficients
// (Coefficients) are fitted on measured runs by `eppsim calibrate`.
type CalibratedModel struct {
	co Coefficients
	// Per replica, per GPU.
	layers, hidden, tp    float64
	denseBytes            float64 // every weight read each step but the routed experts
	expertBytes           float64 // one routed expert of one MoE layer
	etaExperts            float64 // the efficiency the routed experts stream at (Coefficients.EtaExperts)
	moeLayers, experts, k float64
	kvPerToken            float64
	etaKV                 float64 // the efficiency the KV reads stream at (Coefficients.KVEfficiency)
	linFlops, lmFlops     float64 // per new token, per sampled token
	attnFlops             float64 // per (query, context) pair
	bw, peak              float64 // bytes/s, FLOP/s
	group                 tensorParallel
	// shards is the data-parallel ranks a mixture of experts' expert
	// layers span (1: none), expertGroup their GPUs.
	shards      float64
	expertGroup tensorParallel
	// graphs is the CUDA-graph capture list a step's tokens are padded
	// to (cudagraph.go; empty: unpadded).
	graphs cudaGraphSizes
	// window is the sliding window of the slide share of the layers
	// (arch.Model.SlidingLayers; 0: none): they read and attend to at
	// most the last window tokens of the context.
	window, slide float64
	// memo caches the blend factor (see blend) by its ratio's bits.
	memo *[blendMemoSize]blendMemo
	// kernels, for a mixture of experts on vLLM, says which steps compile
	// a fused-MoE kernel class at first use (moejit.go; nil: none).
	kernels *moeKernels
	// tritonExperts: the routed experts are unquantised, which vLLM runs
	// in its Triton fused MoE kernel (moejit.go).
	tritonExperts bool
}

// blendMemo is one entry of the blend factor's cache: the factor of the
// ratio whose bits are key (an empty entry holds a NaN's bits, which no
// ratio has).
type blendMemo struct {
	key uint64
	val float64
}

// blendMemoSize entries, direct-mapped. Decode steps, the bulk of a run,
// repeat their ratios: the linear term's depends only on the batch size,
// and the attention term's, with one new token per sequence, only on
// rounding (its pairs equal its KV tokens).
const (
	blendMemoBits = 10
	blendMemoSize = 1 << blendMemoBits
	blendMemoNone = 0x7ff8dead00000001 // a NaN
)

// NewCalibratedModel binds coefficients to model m on tensor-parallel GPUs
// g with kvElem bytes per cached K or V element.
func NewCalibratedModel(co Coefficients, m *arch.Model, g *arch.GPU, tp, kvElem int) (*CalibratedModel, error) {
	return newCalibratedModel(co, m, g, tp, 1, kvElem)
}

// newCalibratedModel is NewCalibratedModel for one of expertShards
// data-parallel ranks of a mixture of experts whose expert layers span
// all the ranks' GPUs (Preset.ExpertShards): each GPU holds
// 1/(expertShards·tp) of the routed experts and, the ranks stepping in
// lockstep with about equal batches, its share of expertShards times the
// rank's tokens, so it reads the experts those tokens reach and the MoE
// layer's all-reduce spans the expertShards·tp GPUs.
func newCalibratedModel(co Coefficients, m *arch.Model, g *arch.GPU, tp, expertShards, kvElem int) (*CalibratedModel, error) {
	if err := co.Validate(); err != nil {
		return nil, fmt.Errorf("calibration: %w", err)
	}
	if g.MemoryBandwidthTBps <= 0 {
		return nil, fmt.Errorf("gpu %s: memory_bandwidth_tbps must be positive", g.Name)
	}
	fp8 := m.Quant.Float && m.Quant.WeightBits == 8
	if g.TFLOPS(fp8) <= 0 {
		return nil, fmt.Errorf("gpu %s: no tensor peak for the model's weights", g.Name)
	}
	t := float64(max(tp, 1))
	p := m.Params()
	nvlink, oneWay := g.Interconnect == "nvlink", g.InterconnectGBps*1e9/2
	// The all-reduce carries the activations: BF16 for a bfloat16
	// checkpoint, and for a float32 one, which vLLM's --dtype auto serves
	// in the platform's first 16-bit type (BF16 on GPUs that have it);
	// float16 otherwise. Symmetric memory takes BF16 only (allreduce.go).
	bf16 := m.Dtype == arch.BF16 || m.Dtype == arch.FP32
	c := &CalibratedModel{co: co, layers: float64(m.Layers), hidden: float64(m.Hidden), tp: t,
		kvPerToken: float64(m.KVBytesPerToken(kvElem, tp)),
		etaKV:      co.KVEfficiency(m.MultiHeadKV()),
		linFlops:   2 * float64(m.LinearParams()) / t,
		lmFlops:    2 * float64(m.Hidden) * float64(m.Vocab) / t,
		attnFlops:  m.AttentionFLOPsPerPair() / t,
		bw:         g.MemoryBandwidthTBps * 1e12,
		peak:       g.TFLOPS(fp8) * 1e12,
		group:      tensorParallel{ranks: max(tp, 1), nvlink: nvlink, oneWay: oneWay, capability: g.ComputeCapability, bf16: bf16},
		shards:     1,
	}
	if m.SlidingLayers > 0 {
		c.window, c.slide = float64(m.SlidingWindow), float64(m.SlidingLayers)/float64(m.Layers)
	}
	all := (m.LinearWeightBytes() + m.LMHeadBytes()) / t
	if e := m.MoE; e != nil && e.Experts > 0 {
		routed := float64(p.RoutedExperts) * m.RoutedExpertWidth() / t
		c.moeLayers, c.experts, c.k = float64(e.Layers), float64(e.Experts), float64(e.ExpertsPerToken)
		c.shards = float64(max(expertShards, 1))
		c.expertBytes = routed / (c.moeLayers * c.experts) / c.shards
		c.denseBytes = all - routed
		// Unquantised experts run the fused MoE kernel whose efficiency
		// eta_experts is; quantised ones stream at eta_weights. This
		// departs from vllm-engine.md B.1/B.3, which stream every weight
		// byte at one η_w (the roofline step model keeps them).
		c.etaExperts = co.EtaWeights
		if fusedMoEExperts(m) {
			c.etaExperts = co.ExpertEfficiency()
			c.tritonExperts = true
		}
		c.expertGroup = tensorParallel{ranks: max(tp, 1) * max(expertShards, 1), nvlink: nvlink, oneWay: oneWay, capability: g.ComputeCapability, bf16: bf16}
	} else {
		c.denseBytes = all
	}
	if (tp > 1 || c.shards > 1) && oneWay <= 0 {
		return nil, fmt.Errorf("gpu %s: interconnect_gbps must be positive for tensor parallelism", g.Name)
	}
	c.memo = new([blendMemoSize]blendMemo)
	for i := range c.memo {
		c.memo[i].key = blendMemoNone
	}
	return c, nil
}

// padToCUDAGraphs makes c run each step of at most g's largest size as
// the next captured size, as vLLM does (cudagraph.go).
func (c *CalibratedModel) padToCUDAGraphs(g cudaGraphSizes) {
	c.graphs = g
}

// compileOnFirstUse makes c's engine compile the fused-MoE kernel classes
// its start-up did not (moejit.go): an engine of CUDA graphs g and a
// max_num_batched_tokens budget. It does nothing for a dense model or
// quantised experts (moejit.go says why).
func (c *CalibratedModel) compileOnFirstUse(g cudaGraphSizes, budget int) {
	if c.tritonExperts {
		c.kernels = newMoEKernels(int(c.k), g, budget)
	}
}

// compilesKernels implements kernelCompiler.
func (c *CalibratedModel) compilesKernels() bool { return c.kernels != nil }

// compileClass implements kernelCompiler.
func (c *CalibratedModel) compileClass(n int) (int, int64, bool) {
	if c.kernels == nil {
		return 0, 0, false
	}
	return c.kernels.class(n)
}

// withoutSymmetricMemory makes c's all-reduces skip symmetric memory, as
// an engine that does not enable it runs them (allreduce.go).
func (c *CalibratedModel) withoutSymmetricMemory() {
	c.group.capability, c.expertGroup.capability = "", ""
}

// StepTime implements StepModel.
func (c *CalibratedModel) StepTime(batch []BatchEntry) int64 {
	if len(batch) == 0 {
		return 0
	}
	var n, kv, pairs, kvw, pairsw float64
	for _, e := range batch {
		nn, ctx := float64(e.NewTokens), float64(e.Context)
		n += nn
		kv += ctx + nn
		pairs += nn * (ctx + (nn+1)/2)
		if c.window > 0 {
			// Sliding-window layers read the last window tokens before
			// the new ones and attend at most window back.
			kvw += min(ctx, c.window) + nn
			pairsw += nn * min(ctx+(nn+1)/2, c.window)
		}
	}
	if c.window > 0 {
		// The slide share of kvPerToken and attnFlops sees those instead.
		kv = (1-c.slide)*kv + c.slide*kvw
		pairs = (1-c.slide)*pairs + c.slide*pairsw
	}
	return int64(c.seconds(float64(len(batch)), n, kv, pairs)*1e9 + 0.5)
}

// seconds is the step time of B sequences with n new tokens, kv KV tokens
// read and pairs attention pairs.
func (c *CalibratedModel) seconds(b, n, kv, pairs float64) float64 {
	co := &c.co
	// The forward pass runs on the CUDA graph's padded rows (cudagraph.go):
	// the linear layers, the router and the all-reduces see them; attention
	// and the sampler (b sequences) do not.
	rows := float64(c.graphs.padded(int(n)))
	stream := c.denseBytes / (c.bw * co.EtaWeights)
	if c.experts > 0 {
		// Expected distinct experts that the rows, routed independently,
		// reach in one layer (each picks k of E), streamed by the fused
		// MoE kernel.
		reached := c.experts * (1 - math.Pow(1-c.k/c.experts, rows*c.shards))
		stream += c.moeLayers * reached * c.expertBytes / (c.bw * c.etaExperts)
	}
	flops := c.peak * co.MFU
	lin := c.blend(stream, (rows*c.linFlops+b*c.lmFlops)/flops)
	attn := c.blend(c.kvPerToken*kv/(c.bw*c.etaKV), pairs*c.attnFlops/flops)
	sec := (co.StepUs+co.LayerUs*c.layers+co.SeqUs*b)*1e-6 + lin + attn
	if c.tp > 1 || c.shards > 1 {
		size := rows * c.hidden * 2
		ar := c.group.seconds(size, co.AllReduceUs, co.EtaLink)
		if c.shards > 1 {
			// Each MoE layer's second all-reduce spans the expert group,
			// over every rank's tokens.
			sec += (2*c.layers-c.moeLayers)*ar + c.moeLayers*c.expertGroup.seconds(size*c.shards, co.AllReduceUs, co.EtaLink)
		} else {
			sec += 2 * c.layers * ar
		}
	}
	return sec
}

// blend is blend(a, b, RooflineExponent) with the factor
// (1 + (smaller/larger)^p)^(1/p) taken from c.memo when its ratio has
// been seen: the same value, without two math.Pow calls (which took about
// 15% of a Mooncake replay).
func (c *CalibratedModel) blend(a, b float64) float64 {
	hi, lo := max(a, b), min(a, b)
	if hi == 0 {
		return 0
	}
	x := lo / hi
	k := math.Float64bits(x)
	e := &c.memo[(k*0x9e3779b97f4a7c15)>>(64-blendMemoBits)]
	if e.key != k {
		p := c.co.RooflineExponent
		e.key, e.val = k, math.Pow(1+math.Pow(x, p), 1/p)
	}
	return hi * e.val
}

// blend is (a^p + b^p)^(1/p), computed stably: the larger times
// (1 + (smaller/larger)^p)^(1/p).
func blend(a, b, p float64) float64 {
	hi, lo := max(a, b), min(a, b)
	if hi == 0 {
		return 0
	}
	return hi * math.Pow(1+math.Pow(lo/hi, p), 1/p)
}
