package producer

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/eppsim/eppsim/epp"
)

// GPU telemetry plugin types (../shared/spec/epp.md §1.4, alpha; the model
// is epp/gpu.go's).
const (
	DCGMSourceType    = epp.DCGMSourceType
	DCGMExtractorType = epp.DCGMExtractorType
)

// DCGMSourceParams are dcgm-data-source's parameters. Scheme, Path, Port,
// InsecureSkipVerify and UseNodeAddress address the pod's dcgm-exporter
// upstream; eppsim checks them and has no use for them.
type DCGMSourceParams struct {
	Scheme             string `json:"scheme"`
	Path               string `json:"path"`
	Port               *int   `json:"port"`
	InsecureSkipVerify *bool  `json:"insecureSkipVerify"`
	UseNodeAddress     bool   `json:"useNodeAddress"`
	// Interval is the polling interval as a Go duration string; empty
	// means every metrics scrape.
	Interval string `json:"interval"`
}

// DCGMSource is dcgm-data-source: it polls each pod's simulated
// dcgm-exporter every Interval (rounded to the metrics scrape interval,
// epp.GPUPollEvery) for the dcgm-extractors wired to it in
// dataLayer.sources.
type DCGMSource struct {
	epp.TypedName
	p        DCGMSourceParams
	interval int64
}

// GPUPollInterval implements epp.GPUTelemetrySource.
func (s *DCGMSource) GPUPollInterval() int64 { return s.interval }

// Infrastructure says what the simulator does for the data source.
func (s *DCGMSource) Infrastructure() string {
	every := "every metrics scrape"
	if s.interval > 0 {
		every = "every " + time.Duration(s.interval).String() + " (rounded to a multiple of --refresh-metrics-interval)"
	}
	return "simulated: polls each replica's simulated dcgm-exporter " + every +
		"; the exporter publishes the replica's busy share (engine steps in flight) of each --dcgm-collect-interval"
}

func dcgmSourceFactory(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
	var p DCGMSourceParams
	if err := epp.DecodeParams(DCGMSourceType, name, params, &p); err != nil {
		return nil, err
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("plugin %q (type %s): parameters: %s", name, DCGMSourceType, fmt.Sprintf(format, a...))
	}
	switch p.Scheme {
	case "":
		p.Scheme = "http"
	case "http", "https":
	default:
		return nil, bad("scheme %q: want http or https", p.Scheme)
	}
	if p.Path == "" {
		p.Path = "/metrics"
	}
	if p.Port == nil {
		v := 9400
		p.Port = &v
	} else if *p.Port < 1 || *p.Port > 65535 {
		return nil, bad("port %d: want 1..65535", *p.Port)
	}
	if p.InsecureSkipVerify == nil {
		v := true
		p.InsecureSkipVerify = &v
	}
	s := &DCGMSource{TypedName: epp.TypedName{PluginType: DCGMSourceType, PluginName: name}, p: p}
	if p.Interval != "" {
		d, err := time.ParseDuration(p.Interval)
		if err != nil {
			return nil, bad("interval %q: want a duration such as \"1s\" or \"500ms\"", p.Interval)
		}
		if d < 0 {
			return nil, bad("interval %q: must not be negative", p.Interval)
		}
		s.interval = int64(d)
	}
	return s, nil
}

// DCGMExtractor is dcgm-extractor: from its source's poll it stores each
// endpoint's GPU utilization, in [0, 1], under epp.GPUUtilizationKey.
type DCGMExtractor struct{ epp.TypedName }

// GPUUtilizationExtractor implements epp.GPUTelemetryExtractor.
func (*DCGMExtractor) GPUUtilizationExtractor() {}

// Infrastructure says what the simulator does for the extractor.
func (*DCGMExtractor) Infrastructure() string {
	return "simulated: stores each endpoint's last polled GPU utilization, its pod's busiest GPU (DCGM_FI_DEV_GPU_UTIL / 100), as attribute " +
		epp.GPUUtilizationKey.String()
}

func dcgmExtractorFactory(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
	var p struct{}
	if err := epp.DecodeParams(DCGMExtractorType, name, params, &p); err != nil {
		return nil, err
	}
	return &DCGMExtractor{TypedName: epp.TypedName{PluginType: DCGMExtractorType, PluginName: name}}, nil
}
