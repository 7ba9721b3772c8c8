package epp

import "fmt"

// GPU telemetry: dcgm-data-source and dcgm-extractor (../shared/spec/epp.md
// §1.4, alpha).
//
// Upstream, dcgm-data-source polls each pod's NVIDIA dcgm-exporter and
// dcgm-extractor turns its DCGM_FI_DEV_GPU_UTIL gauges (0–100, the share of
// the exporter's sampling period during which a kernel ran, one per GPU)
// into the endpoint attribute GPUUtilization: the maximum over the pod's
// GPUs divided by 100. eppsim's convention (docs/epp.md, "GPU telemetry"):
//
//   - a replica's GPUs are busy while one of its engine steps is in flight;
//     with tensor parallelism every GPU is equally busy, so the maximum over
//     them is that share;
//   - the exporter publishes at 0, W, 2W, … (W its collect interval,
//     sim.Options.DCGMCollectInterval): at kW the busy share of
//     ((k−1)W, kW], and 0 at time 0;
//   - the source polls at every N-th metrics scrape after the start
//     (GPUPollEvery), and the extractor stores the latest published value
//     on the endpoint, where every later scheduling cycle's candidates find
//     it (Router.SetAttribute). Before the first poll the attribute is
//     missing.
//
// The simulator (package sim) runs the exporter and the polls; this package
// only describes what the configuration asks for.

// GPU telemetry plugin types and the data key the extractor fills.
const (
	DCGMSourceType     = "dcgm-data-source"
	DCGMExtractorType  = "dcgm-extractor"
	GPUUtilizationType = "GPUUtilization"
)

// GPUUtilizationKey is the key dcgm-extractor stores under: its producer is
// the plugin type whatever the instance's name (upstream's extractor keys
// by type).
var GPUUtilizationKey = DataKey{Type: GPUUtilizationType, Producer: DCGMExtractorType}

// GPUPoll is one dcgm-data-source that has a dcgm-extractor: Interval is
// its polling interval in ns (0: every metrics scrape).
type GPUPoll struct {
	Source   string
	Interval int64
}

// GPUTelemetrySource is implemented by dcgm-data-source.
type GPUTelemetrySource interface {
	Plugin
	// GPUPollInterval is the configured polling interval (ns; 0 = every
	// metrics scrape).
	GPUPollInterval() int64
}

// GPUTelemetryExtractor is implemented by dcgm-extractor.
type GPUTelemetryExtractor interface {
	Plugin
	// GPUUtilizationExtractor marks the extractor.
	GPUUtilizationExtractor()
}

// GPUPollEvery is how many metrics scrapes of period scrape one poll of a
// source with the given interval spans: the interval rounded to the
// nearest multiple of scrape (a half rounds up), at least 1. Upstream
// rounds a data source's interval to the EPP's --refresh-metrics-interval
// the same way.
func GPUPollEvery(interval, scrape int64) int {
	if scrape <= 0 {
		panic(fmt.Sprintf("epp: scrape interval %d must be positive", scrape))
	}
	n := interval / scrape
	if 2*(interval%scrape) >= scrape {
		n++
	}
	return int(max(n, 1))
}

// SetAttribute stores a data-layer attribute of the named endpoint: from
// now on every scheduling cycle's candidate of that endpoint carries it
// (Candidates), until it is set again.
func (r *Router) SetAttribute(name string, key DataKey, v any) error {
	i, ok := r.index[name]
	if !ok {
		return fmt.Errorf("epp: unknown endpoint %q", name)
	}
	r.attrs[i].put(key, v)
	return nil
}

// Attribute returns the data-layer attribute key of the named endpoint.
func (r *Router) Attribute(name string, key DataKey) (any, bool) {
	i, ok := r.index[name]
	if !ok {
		return nil, false
	}
	return r.attrs[i].get(key)
}
