package workload

import (
	"io"
	"math"
	"os"
	"testing"
)

// stripHashIDs hides HashIDs so that Inspect hashes the materialized tokens.
type stripHashIDs struct{ src Source }

func (s stripHashIDs) Next() (*Request, error) {
	r, err := s.src.Next()
	if r != nil {
		r.HashIDs = nil
	}
	return r, err
}

func TestInspectMooncakeFixture(t *testing.T) {
	// Hand-computed at 16-token blocks (num_tokens-1 cap in parentheses):
	//   r0 [0 1 2] 1100: nothing cached                       hit 0
	//   r1 [0 3]    700: block 0 cached (512), 3 new          hit 512 (cap 688)
	//   r2 [0 1 4 5] 1700: blocks 0, 1 cached, 4 new          hit 1024 (cap 1696)
	//   r3 [0]      512: block 0 cached, capped at 511 → 496  hit 496
	//   r4 [0 1 4 6 7] 2100: 0, 1, 4 cached (r2 had 4 full)  hit 1536 (cap 2096)
	//   r5 [0 3]   1024: block 0 + the 188 tokens of 3 that r1 had, floored to 176
	//                                                         hit 688 (cap 1008)
	// Σhit = 4256, Σprompt = 7136. Full 16-token blocks 68+43+106+32+131+64 = 444,
	// of which cached before: 0+32+64+32+96+43 = 267.
	want := Summary{
		Requests: 6, Sessions: 3, Continuations: 3, MaxTurns: 3, DurationSec: 4, RatePerSec: 1.5,
		Input:          Lengths{Mean: 7136.0 / 6, P50: 1024, P90: 2100, P99: 2100, Max: 2100},
		Output:         Lengths{Mean: 155.0 / 6, P50: 20, P90: 50, P99: 50, Max: 50},
		TraceBlockSize: 512, TraceBlocks: 17, DistinctTraceBlocks: 8, RepeatedTraceBlocks: 9.0 / 17,
		BlockSize: 16, Blocks: 444, RepeatedBlocks: 267.0 / 444,
		PromptTokens: 7136, HitTokens: 4256, HitRatio: 4256.0 / 7136,
	}
	for _, tokens := range []bool{false, true} {
		s, err := Open("testdata/mooncake.jsonl", opts(Options{NoTokens: !tokens}))
		if err != nil {
			t.Fatal(err)
		}
		var src Source = s
		if tokens {
			src = stripHashIDs{s}
		}
		got, err := Inspect(src, 16)
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		got.Source, got.Format, got.Mode = "", "", ""
		w := want
		if tokens {
			// The token path does not see the trace's block ids.
			w.TraceBlockSize, w.TraceBlocks, w.DistinctTraceBlocks, w.RepeatedTraceBlocks = 0, 0, 0, 0
		}
		if !summariesEqual(*got, w) {
			t.Errorf("tokens=%v:\n got %+v\nwant %+v", tokens, *got, w)
		}
	}
}

func summariesEqual(a, b Summary) bool {
	feq := func(x, y float64) bool { return math.Abs(x-y) < 1e-9 }
	if !feq(a.DurationSec, b.DurationSec) || !feq(a.RatePerSec, b.RatePerSec) || !feq(a.HitRatio, b.HitRatio) ||
		!feq(a.RepeatedBlocks, b.RepeatedBlocks) || !feq(a.RepeatedTraceBlocks, b.RepeatedTraceBlocks) ||
		!feq(a.Input.Mean, b.Input.Mean) || !feq(a.Output.Mean, b.Output.Mean) {
		return false
	}
	a.DurationSec, a.RatePerSec, a.HitRatio, a.RepeatedBlocks, a.RepeatedTraceBlocks = 0, 0, 0, 0, 0
	b.DurationSec, b.RatePerSec, b.HitRatio, b.RepeatedBlocks, b.RepeatedTraceBlocks = 0, 0, 0, 0, 0
	a.Input.Mean, a.Output.Mean, b.Input.Mean, b.Output.Mean = 0, 0, 0, 0
	return a == b
}

// fixed yields the given requests.
type fixed []*Request

func (f *fixed) Next() (*Request, error) {
	if len(*f) == 0 {
		return nil, io.EOF
	}
	r := (*f)[0]
	*f = (*f)[1:]
	return r, nil
}

func TestInspectTokenPath(t *testing.T) {
	seq := func(from, n int) []uint32 {
		out := make([]uint32, n)
		for i := range out {
			out[i] = uint32(from + i)
		}
		return out
	}
	// r0: 40 prompt tokens, output 9 tokens; cached afterwards: blocks of
	// prompt+output[:8] = 48 tokens = 3 full blocks.
	// r1: prompt = r0 prompt + output (49 tokens): blocks 0, 1, 2 hit (48),
	//     capped at (49-1)/16*16 = 48.
	// r2: same prompt as r0 but salted: no hit.
	// r3: 16 tokens equal to r0's first block: hit capped to 0.
	p0, o0 := seq(100, 40), seq(500, 9)
	reqs := fixed{
		{PromptTokens: p0, PromptLen: 40, OutputTokenIDs: o0, OutputTokens: 9, Prev: -1},
		{PromptTokens: append(append([]uint32{}, p0...), o0...), PromptLen: 49, Prev: 0, Turn: 1, Arrival: 2e9},
		{PromptTokens: p0, PromptLen: 40, CacheSalt: "x", Prev: -1, Arrival: 3e9},
		{PromptTokens: p0[:16], PromptLen: 16, Prev: -1, Arrival: 3e9},
	}
	got, err := Inspect(&reqs, 16)
	if err != nil {
		t.Fatal(err)
	}
	if got.HitTokens != 48 || got.PromptTokens != 145 || got.Blocks != 2+3+2+1 || got.Sessions != 3 || got.MaxTurns != 2 || !got.OutputBlocksInserted {
		t.Fatalf("%+v", got)
	}
	// Repeated blocks: r1's 3 and r3's 1.
	if got.RepeatedBlocks != 4.0/8 {
		t.Errorf("repeated share %v, want 0.5", got.RepeatedBlocks)
	}
}

func TestInspectSharedMooncakeTrace(t *testing.T) {
	const path = "../../shared/traces/mooncake_conversation_trace.jsonl"
	if _, err := os.Stat(path); err != nil {
		t.Skip("shared Mooncake trace not present")
	}
	s, err := Open(path, opts(Options{NoTokens: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := Inspect(s, 16)
	if err != nil {
		t.Fatal(err)
	}
	// traces.md C.1: 12,031 requests, 288,500 block occurrences of which
	// 182,790 distinct (36.6 % repeat), 8,028 chains with 4,003
	// continuations and at most 43 turns, input p50 6,909, p99 85,401, max
	// 126,195, output max 2,000, duration 3,537 s; the infinite-cache hit
	// ratio is about 37 % (37.3 % at 512-token granularity).
	if got.Requests != 12031 || got.TraceBlocks != 288500 || got.DistinctTraceBlocks != 182790 ||
		got.Sessions != 8028 || got.Continuations != 4003 || got.MaxTurns != 43 ||
		got.Input.P50 != 6909 || got.Input.P99 != 85401 || got.Input.Max != 126195 || got.Output.Max != 2000 ||
		math.Round(got.DurationSec) != 3537 {
		t.Errorf("summary %+v", got)
	}
	if got.HitRatio < 0.370 || got.HitRatio > 0.377 {
		t.Errorf("hit ratio %.4f, want about 0.373", got.HitRatio)
	}
	if math.Abs(got.RepeatedTraceBlocks-0.366) > 0.001 {
		t.Errorf("repeated block share %.4f, want 0.366", got.RepeatedTraceBlocks)
	}
}
