package replica

import (
	"fmt"
	"math"
	"strings"
)

// Deployment is what a calibration's step offsets are keyed by: one model
// with its weights stored one way, served by one engine on one GPU type at
// one tensor-parallel size.
type Deployment struct {
	// Model is the Hugging Face id (compared without regard to case).
	Model string `json:"model"`
	// GPU is the catalogue name; TP the tensor-parallel size (at least 1);
	// Engine the engine type (vllm, sglang).
	GPU    string `json:"gpu"`
	TP     int    `json:"tp"`
	Engine string `json:"engine"`
	// Weights says how the linear layers' weights are stored: the
	// checkpoint's quantisation method and bits, or its dtype.
	Weights string `json:"weights"`
}

// DeploymentOf is the deployment p serves (p's model and GPU resolved).
func DeploymentOf(p *Preset) Deployment {
	d := Deployment{Model: p.ModelRef, GPU: p.GPU.Name, TP: max(p.TensorParallelSize, 1), Engine: p.EngineTypeOf()}
	if p.Arch != nil {
		d.Weights = string(p.Arch.Dtype)
		if q := p.Arch.Quant; q.Method != "" {
			d.Weights = fmt.Sprintf("%s/%d", q.Method, q.WeightBits)
		}
	}
	return d
}

// Matches reports whether d and o are the same deployment.
func (d Deployment) Matches(o Deployment) bool {
	return strings.EqualFold(d.Model, o.Model) && d.GPU == o.GPU && max(d.TP, 1) == max(o.TP, 1) && d.Engine == o.Engine && d.Weights == o.Weights
}

// String names d in sentences ("meta-llama/Llama-2-7b-hf (float16, vllm)
// on H100 at TP 1").
func (d Deployment) String() string {
	return fmt.Sprintf("%s (%s, %s) on %s at TP %d", d.Model, d.Weights, d.Engine, d.GPU, max(d.TP, 1))
}

// StepOffset is a deployment's step offset: the calibrated step model's
// steps are multiplied by Factor for replicas of that deployment. It is
// what the measured runs of the deployment say the coefficients miss for
// it (docs/latency.md, "Deployment offsets").
type StepOffset struct {
	Deployment
	// Runs is the number of measured runs it rests on.
	Runs int `json:"runs"`
	// Factor multiplies every step.
	Factor float64 `json:"factor"`
}

// ShrunkOffset is a deployment's offset from the log-ratios of measured ÷
// predicted ITL mean of its n runs (predicted without an offset): the
// exponential of their mean shrunk by n/(n+1), as if one more run had
// measured no bias, so that a deployment known from one run takes half of
// that run's residual and one known from four takes four fifths. 1 for
// no runs.
func ShrunkOffset(logRatios []float64) float64 {
	n := float64(len(logRatios))
	if n == 0 {
		return 1
	}
	var sum float64
	for _, v := range logRatios {
		sum += v
	}
	return math.Exp(sum / (n + 1))
}

// OffsetFor is the step factor of deployment d among offs (1 when none
// names it).
func OffsetFor(offs []StepOffset, d Deployment) float64 {
	for _, o := range offs {
		if o.Deployment.Matches(d) {
			return o.Factor
		}
	}
	return 1
}

// HasOffset reports whether offs names deployment d.
func HasOffset(offs []StepOffset, d Deployment) bool {
	for _, o := range offs {
		if o.Deployment.Matches(d) {
			return true
		}
	}
	return false
}

// checkOffsets checks a file's offsets under field.
func checkOffsets(offs []StepOffset, field string) error {
	for i, o := range offs {
		switch {
		case o.Model == "" || o.GPU == "" || o.Engine == "":
			return fmt.Errorf("%s[%d]: model, gpu and engine are required", field, i)
		case o.TP < 1:
			return fmt.Errorf("%s[%d].tp: want at least 1, got %d", field, i, o.TP)
		case o.Runs < 1:
			return fmt.Errorf("%s[%d].runs: want at least 1, got %d", field, i, o.Runs)
		case !(o.Factor > 0) || math.IsInf(o.Factor, 0):
			return fmt.Errorf("%s[%d].factor: want a positive number, got %v", field, i, o.Factor)
		}
	}
	return nil
}
