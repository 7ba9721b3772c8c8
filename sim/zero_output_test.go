package sim

import (
	"strings"
	"testing"

	"github.com/eppsim/eppsim/workload"
)

// TestZeroOutputLength: a trace's output length of 0 is simulated as the
// one token vLLM generates at least (the prefill's), and recorded as one,
// as trace convert writes it (workload.TestZeroOutputLength).
func TestZeroOutputLength(t *testing.T) {
	for _, tt := range []struct {
		format workload.Format
		data   string
	}{
		{workload.FormatMooncake, `{"timestamp": 0, "input_length": 20, "output_length": 0, "hash_ids": [0]}`},
		{workload.FormatAzure, "TIMESTAMP,ContextTokens,GeneratedTokens\n0,20,0\n"},
		{workload.FormatOpenAI, `{"model":"m","prompt":"hello","x_output_tokens":0}`},
	} {
		src, err := workload.NewSource(strings.NewReader(tt.data), "t", workload.Options{Format: tt.format})
		if err != nil {
			t.Fatal(err)
		}
		var recs []Record
		res, err := Run(src, testRouter(), testFleet(t, 1, 100), Options{OnRecord: func(r *Record) { recs = append(recs, *r) }})
		if err != nil {
			t.Fatal(err)
		}
		if res.Completed != 1 || len(recs) != 1 || recs[0].OutputTokens != 1 {
			t.Fatalf("%s: result %+v, records %+v", tt.format, res, recs)
		}
		// One token: the prefill's; no decode step computes another.
		if st := res.Replicas[0].Stats; st.ComputedTokens != int64(recs[0].PromptTokens) {
			t.Errorf("%s: %d tokens computed for a %d-token prompt", tt.format, st.ComputedTokens, recs[0].PromptTokens)
		}
	}
}
