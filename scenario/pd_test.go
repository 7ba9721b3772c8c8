package scenario

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/sim"
)

const sharedPD = "../testdata/shared/epp-configs/pd-epp-config.yaml"

// pdSpec is testSpec with the first replica labelled prefill and the
// second decode: the two-pod P/D scenario.
func pdSpec(t *testing.T, n int, roles ...string) *Spec {
	spec := testSpec(t, n)
	for i := range spec.Fleet {
		spec.Fleet[i].Labels = map[string]string{sim.RoleLabel: roles[i]}
	}
	return spec
}

// TestRunPDByteIdentical: the shipped P/D config on one prefill and one
// decode pod disaggregates, reports its figures and estimates, and two
// runs give the same summary byte for byte.
func TestRunPDByteIdentical(t *testing.T) {
	if _, err := os.Stat(sharedPD); err != nil {
		t.Skip("shared configs not found")
	}
	spec := pdSpec(t, 200, "prefill", "decode")
	a, err := Run(spec, ForSource(sharedPD), Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Run(spec, ForSource(sharedPD), Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	pd := a.PD
	if pd == nil || pd.Disaggregated == 0 || pd.Pools["prefill"] == nil || pd.Pools["prefill"].PrefillLegs != pd.Disaggregated ||
		pd.Pools["decode"].DecodeLegs != a.Requests.Complete || len(a.Config.NotSimulated) != 0 {
		t.Fatalf("P/D summary %+v, not simulated %q", pd, a.Config.NotSimulated)
	}
	if len(a.Config.Estimates) != 2 || !strings.Contains(a.Config.Estimates[0], "handshake") || a.Config.Environment["pd_hop"] != "1ms" || len(a.Config.Warnings) != 0 {
		t.Fatalf("config: estimates %q, environment %v, warnings %q", a.Config.Estimates, a.Config.Environment, a.Config.Warnings)
	}
	if ja, jb := summaryJSON(t, a), summaryJSON(t, b); !bytes.Equal(ja, jb) {
		t.Fatal("two runs of the P/D scenario differ")
	}
	// Without P/D nothing of it appears.
	c, err := Run(spec, ForSource("default"), Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	if c.PD != nil || len(c.Config.Estimates) != 0 || c.Config.Environment["pd_hop"] != nil {
		t.Fatalf("P/D fields without P/D: %+v %q", c.PD, c.Config.Estimates)
	}
}

// TestRunPDWithoutPrefillPods: the P/D config on a fleet without a
// prefill role runs decode-only and says why.
func TestRunPDWithoutPrefillPods(t *testing.T) {
	if _, err := os.Stat(sharedPD); err != nil {
		t.Skip("shared configs not found")
	}
	s, err := Run(pdSpec(t, 30, "decode", "decode"), ForSource(sharedPD), Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	if s.PD == nil || s.PD.Disaggregated != 0 || s.PD.Reasons["no-prefill-endpoint"] == 0 || len(s.Config.Warnings) != 1 ||
		!strings.Contains(s.Config.Warnings[0], "no replica has a prefill role") {
		t.Fatalf("P/D summary %+v, warnings %q", s.PD, s.Config.Warnings)
	}
}

// TestShippedEPDConfigsRun: the encode stage of the E/P/D and E/PD
// configs is not simulated (their multimodal decider is reported), and
// their P/D part runs.
func TestShippedEPDConfigsRun(t *testing.T) {
	dir := filepath.Dir(sharedPD)
	for file, disagg := range map[string]bool{"sim-e-p-d-epp-config.yaml": true, "sim-e-pd-epp-config.yaml": false} {
		path := filepath.Join(dir, file)
		if _, err := os.Stat(path); err != nil {
			t.Skip("shared configs not found")
		}
		s, err := Run(pdSpec(t, 40, "prefill", "decode"), ForSource(path), Hooks{})
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Config.NotSimulated) != 1 || !strings.HasPrefix(s.Config.NotSimulated[0], "always-disagg-multimodal-decider") {
			t.Errorf("%s: not simulated %q", file, s.Config.NotSimulated)
		}
		if (s.PD != nil) != disagg || (disagg && s.PD.Disaggregated == 0) || s.Requests.Complete != 40 {
			t.Errorf("%s: P/D %+v, %d completed", file, s.PD, s.Requests.Complete)
		}
	}
}
