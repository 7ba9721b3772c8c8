package producer

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/epp"
)

// TestDCGMSourceParams: the source takes upstream's optional parameters
// and refuses unknown keys and values outside their ranges, naming the
// plugin; its interval is kept in ns (0 without one).
func TestDCGMSourceParams(t *testing.T) {
	for _, c := range []struct {
		params   string
		interval int64
		err      string
	}{
		{``, 0, ""},
		{`{}`, 0, ""},
		{`{"port":9400,"interval":"1s"}`, 1e9, ""},
		{`{"scheme":"https","path":"/m","port":1,"insecureSkipVerify":false,"useNodeAddress":true,"interval":"125ms"}`, 125e6, ""},
		{`{"port":65535,"interval":"0s"}`, 0, ""},
		{`{"prot":9400}`, 0, `plugin "gpu" (type dcgm-data-source): parameters: json: unknown field "prot"`},
		{`{"scheme":"grpc"}`, 0, `plugin "gpu" (type dcgm-data-source): parameters: scheme "grpc": want http or https`},
		{`{"scheme":"HTTP"}`, 0, `scheme "HTTP"`},
		{`{"port":0}`, 0, `plugin "gpu" (type dcgm-data-source): parameters: port 0: want 1..65535`},
		{`{"port":65536}`, 0, `port 65536: want 1..65535`},
		{`{"port":"9400"}`, 0, `plugin "gpu" (type dcgm-data-source): parameters: json: cannot unmarshal string`},
		{`{"interval":"1 second"}`, 0, `plugin "gpu" (type dcgm-data-source): parameters: interval "1 second": want a duration`},
		{`{"interval":1}`, 0, `cannot unmarshal number`},
		{`{"interval":"-1s"}`, 0, `plugin "gpu" (type dcgm-data-source): parameters: interval "-1s": must not be negative`},
	} {
		p, err := dcgmSourceFactory("gpu", json.RawMessage(c.params), epp.NewHandle(0))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err %v, want %q", c.params, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.params, err)
			continue
		}
		if got := p.(epp.GPUTelemetrySource).GPUPollInterval(); got != c.interval {
			t.Errorf("%s: interval %d, want %d", c.params, got, c.interval)
		}
	}
}

// TestDCGMDescriptions: both plugins say what the simulator does for them
// (epp validate's infrastructure list); the extractor has no parameters.
func TestDCGMDescriptions(t *testing.T) {
	src, err := dcgmSourceFactory("dcgm-source", json.RawMessage(`{"interval":"1s"}`), epp.NewHandle(0))
	if err != nil {
		t.Fatal(err)
	}
	want := "simulated: polls each replica's simulated dcgm-exporter every 1s (rounded to a multiple of --refresh-metrics-interval); " +
		"the exporter publishes the replica's busy share (engine steps in flight) of each --dcgm-collect-interval"
	if got := src.(interface{ Infrastructure() string }).Infrastructure(); got != want {
		t.Errorf("source: %q", got)
	}
	src, _ = dcgmSourceFactory("s", nil, epp.NewHandle(0))
	if got := src.(interface{ Infrastructure() string }).Infrastructure(); !strings.Contains(got, " every metrics scrape;") {
		t.Errorf("source without interval: %q", got)
	}
	ex, err := dcgmExtractorFactory("x", nil, epp.NewHandle(0))
	if err != nil || ex.Type() != DCGMExtractorType || ex.Name() != "x" {
		t.Fatalf("extractor %v %v", ex, err)
	}
	if got := ex.(interface{ Infrastructure() string }).Infrastructure(); !strings.HasSuffix(got, "as attribute GPUUtilization/dcgm-extractor") {
		t.Errorf("extractor: %q", got)
	}
	if _, err := dcgmExtractorFactory("x", json.RawMessage(`{"metric":"DCGM_FI_DEV_GPU_UTIL"}`), epp.NewHandle(0)); err == nil ||
		!strings.Contains(err.Error(), `plugin "x" (type dcgm-extractor): parameters: json: unknown field "metric"`) {
		t.Errorf("extractor parameters: %v", err)
	}
}
