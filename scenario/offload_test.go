package scenario

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/eppsim/eppsim/epp/producer"
	"github.com/eppsim/eppsim/report"
)

// offloadSpec is testSpec with small GPU caches (600 blocks) and a 2 GiB
// CPU tier (1,024 blocks) on both replicas.
func offloadSpec(t *testing.T, n int) *Spec {
	spec := testSpec(t, n)
	for i := range spec.Fleet {
		e := &spec.Fleet[i].Preset.Engine
		e.NumGPUBlocksOverride, e.KVOffloadingSize = 600, 2
	}
	return spec
}

// summaryJSON is a summary without its wall-clock fields.
func summaryJSON(t *testing.T, s *report.Summary) []byte {
	t.Helper()
	s.Sim.WallSeconds, s.Sim.RequestsPerWallS = 0, 0
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRunOffloadByteIdentical(t *testing.T) {
	spec := offloadSpec(t, 300)
	a, err := Run(spec, ForSource("default"), Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Run(spec, ForSource("default"), Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	o := a.Cache.Offload
	if o == nil || o.CPUHitTokens == 0 || o.Loads == 0 || a.Prediction["approx-prefix-cache-producer"].ByTier == nil {
		t.Fatalf("no CPU tier activity: %+v", o)
	}
	if len(a.Config.Estimates) != 2 || a.Config.Fleet[0].Engine.Offload == nil || a.Config.Fleet[0].Engine.Offload.CPUBlocks != 1024 {
		t.Fatalf("config: estimates %q, engine %+v", a.Config.Estimates, a.Config.Fleet[0].Engine)
	}
	if ja, jb := summaryJSON(t, a), summaryJSON(t, b); !bytes.Equal(ja, jb) {
		t.Fatal("two runs of the offload scenario differ")
	}
}

func TestUpstreamOptions(t *testing.T) {
	l, err := ForSource("default").Load(1)
	if err != nil {
		t.Fatal(err)
	}
	if err := applyUpstream(l.Loaded, []string{"pr9999"}); err == nil {
		t.Fatal("unknown option accepted")
	}
	if err := applyUpstream(l.Loaded, []string{producer.UpstreamPR2292}); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range l.Plugins {
		if a, ok := p.Plugin.(*producer.ApproxPrefix); ok {
			n++
			if !a.OffloadLRU() {
				t.Errorf("%s: option not applied", p.Name)
			}
		}
	}
	if n == 0 {
		t.Fatal("the default config has no approx producer")
	}
	spec := offloadSpec(t, 20)
	spec.Upstream = []string{producer.UpstreamPR2292}
	s, err := Run(spec, ForSource("default"), Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.Config.EPP.Upstream, []string{"pr2292"}) {
		t.Fatalf("summary records upstream options %q", s.Config.EPP.Upstream)
	}
	spec.Upstream = []string{"nope"}
	if _, err := Run(spec, ForSource("default"), Hooks{}); !IsInputError(err) {
		t.Fatalf("unknown option: %v", err)
	}
}
