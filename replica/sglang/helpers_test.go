package sglang

import (
	"testing"

	"github.com/eppsim/eppsim/replica"
)

// fixedModel gives every step 1 ms.
type fixedModel struct{ batches [][]replica.BatchEntry }

func (m *fixedModel) StepTime(b []replica.BatchEntry) int64 {
	m.batches = append(m.batches, append([]replica.BatchEntry(nil), b...))
	return 1_000_000
}

// testConfig is the D-scenario setting: page 1, chunk 8192,
// max_prefill_tokens 16384, ratio 0.7, lru, newest code.
func testConfig(pool int) Config {
	init, mn, dec := Ratios(1)
	return Config{
		MaxTotalNumTokens: pool, PageSize: 1, MaxRunningRequests: 1000, ChunkedPrefillSize: 8192,
		MaxPrefillTokens: 16384, DecodeLogInterval: 40, ContextLen: 1 << 20,
		InitNewTokenRatio: init, MinNewTokenRatio: mn, NewTokenRatioDecay: dec, CheckInvariants: true,
	}
}

func newTestEngine(t testing.TB, cfg Config) (*Engine, *fixedModel) {
	t.Helper()
	m := &fixedModel{}
	e, err := NewEngine(cfg, m)
	if err != nil {
		t.Fatal(err)
	}
	return e, m
}

// seqTokens returns [lo, lo+1, ..., hi].
func seqTokens(lo, hi uint32) []uint32 {
	var out []uint32
	for v := lo; v <= hi; v++ {
		out = append(out, v)
	}
	return out
}

func cat(parts ...[]uint32) []uint32 {
	var out []uint32
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// step runs one step at now and ends it 1 ms later; ok false if idle.
func step(t testing.TB, e *Engine, now int64) (*replica.StepOutput, bool) {
	t.Helper()
	d, ok := e.BeginStep(now)
	if !ok {
		return nil, false
	}
	return e.EndStep(now + d), true
}

// drain runs steps until the engine is idle; it returns the final time.
func drain(t testing.TB, e *Engine, now int64) int64 {
	t.Helper()
	for i := 0; ; i++ {
		if i > 1_000_000 {
			t.Fatal("engine did not drain")
		}
		d, ok := e.BeginStep(now)
		if !ok {
			return now
		}
		now += d
		e.EndStep(now)
	}
}
