package sglang

// stored queues one page's BlockStored (sglang-engine.md A.13: one hash per
// event, the page's tokens, block_size = len(tokens), parent = the previous
// page's hash, none under a root) on the engine's replica.EventLog, which
// publishes them at the metric points (A.13 cadence: after each prefill
// batch, every DecodeLogInterval-th decode step, and when the engine goes
// idle). start is where the page begins in s's token sequence; when the
// page lies inside s's prompt the event aliases the prompt and names s's
// request as its Origin.
func (t *tree) stored(h, parent uint64, hasParent bool, toks []uint32, s *seq, start int) {
	if s != nil && start+len(toks) <= len(s.r.Prompt) {
		t.events.StoredOne(h, parent, hasParent, s.r.Prompt[start:start+len(toks):start+len(toks)], s.r, start)
		return
	}
	t.events.StoredOne(h, parent, hasParent, toks, nil, 0)
}
