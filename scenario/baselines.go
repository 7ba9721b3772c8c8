package scenario

import (
	"fmt"

	"github.com/eppsim/eppsim/epp"
	"github.com/eppsim/eppsim/epp/picker"
)

// Built-in baselines selectable by name with --epp-config. Each is a real
// EndpointPickerConfig except round-robin and vllm-dp-lb, whose pickers are
// not upstream plugins (they are swapped in after loading).
// pickerOnly is a profile of one picker and no scorer: the baselines that
// swap their own picker in for max-score-picker (round-robin, vllm-dp-lb).
const pickerOnly = `apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: max-score-picker
`

var baselines = map[string]string{
	"random": `apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: random-picker
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: random-picker
`,
	"least-queue": `apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: queue-scorer
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: queue-scorer
  - pluginRef: max-score-picker
`,
	"round-robin": pickerOnly,
	// vllm-dp-lb: no EPP at all but vLLM's own API server balancing the
	// fleet's engines as its data-parallel ranks (picker.VLLMDPLB), as a
	// vLLM server with --data-parallel-size does internally; the latency
	// runs with dp > 1 are simulated behind it.
	"vllm-dp-lb": pickerOnly,
	// oracle: the precise (KV-event) producer over the server's own tokens
	// at the engine's 16-token blocks, delivered with zero lag, plus the
	// default config's load scorers and weights.
	"oracle": `apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: token-producer
  parameters: {modelName: eppsim-oracle}
- type: precise-prefix-cache-producer
  parameters: {tokenProcessorConfig: {blockSizeTokens: 16}}
- type: prefix-cache-scorer
  parameters: {prefixMatchInfoProducerName: precise-prefix-cache-producer}
- type: queue-scorer
- type: kv-cache-utilization-scorer
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: prefix-cache-scorer
    weight: 3
  - pluginRef: queue-scorer
    weight: 2
  - pluginRef: kv-cache-utilization-scorer
    weight: 2
`,
}

// router assembles the EPP, swapping in the round-robin picker or vLLM's
// data-parallel load balancer for those baselines.
func (l *Loaded) router() (*epp.Router, error) {
	r := l.Router()
	if !l.baseline || (l.source != "round-robin" && l.source != "vllm-dp-lb") {
		return r, nil
	}
	if len(r.Profiles) != 1 {
		return nil, fmt.Errorf("%s baseline: want one profile, got %d", l.source, len(r.Profiles))
	}
	if l.source == "round-robin" {
		r.Profiles[0].Picker = picker.NewRoundRobin("round-robin")
	} else {
		o := picker.DefaultDPLBOptions()
		if l.dplb != nil {
			o = *l.dplb
		}
		r.Profiles[0].Picker = picker.NewVLLMDPLB("vllm-dp-lb", o)
	}
	return r, nil
}
