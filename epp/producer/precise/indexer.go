package precise

import (
	"math/bits"
	"slices"
	"sort"
	"strings"

	"github.com/eppsim/eppsim/epp"
	"github.com/eppsim/eppsim/internal/blockmap"
	"github.com/eppsim/eppsim/internal/memo"
)

// Tier names.
const (
	// DefaultEventTier is the tier of a BlockStored/BlockRemoved without a
	// medium (upstream defaultEventSourceDeviceTier).
	DefaultEventTier = "gpu"
	// SpeculativeTier is the cachedBlocksByTier key of speculative entries.
	SpeculativeTier = "speculative"
)

const specBit = uint64(1) << maxTiers

// Indexer is the precise prefix-cache state of one producer: the block-key
// hasher, the KV-block index, KV-event ingestion with remove de-duplication
// (upstream kvevents.Pool), tier-weighted longest-prefix matching
// (kvcache.LongestPrefixScorer) and speculative entries with a TTL.
//
// Pods are identified by their "ip:port" address, as upstream.
// An Indexer is not safe for concurrent use.
type Indexer struct {
	hasher    *Hasher
	index     *Index
	weights   map[string]float64
	defWeight float64
	tierW     []float64

	// refs counts stores per (pod, tier, engine hash) so that duplicate
	// removes do not evict a block another store still references
	// (upstream eventDedupFilter): refs[pod][tier] maps hash -> count. A
	// blockmap.Map per (pod, tier): every KV event looks up each of its
	// blocks, and a pointer-free table with a touch operation lets a batch
	// of events overlap those lookups' cache misses (touchRemovals).
	refs [][]blockmap.Map

	spec []specItem // speculative entries, in expiry order

	removed []uint64 // scratch of touchRemovals

	// scratch for Match
	candOf []int32
	st     []candState
	stamp  uint32
}

type specItem struct {
	expiry  int64
	keys    [][]uint64
	entries []entry
}

type candState struct {
	stamp  uint32
	w      float64
	mask   uint64
	alive  bool
	tmask  uint64
	score  float64
	cached int
	tiers  [maxTiers + 1]int
}

// NewIndexer wires a hasher and an index. weights maps device tiers to
// scoring weights; tiers not listed weigh defaultWeight (1.0 at ebab687).
func NewIndexer(h *Hasher, ix *Index, weights map[string]float64, defaultWeight float64) *Indexer {
	return &Indexer{
		hasher:    h,
		index:     ix,
		weights:   weights,
		defWeight: defaultWeight,
	}
}

// Hasher returns the block-key hasher.
func (x *Indexer) Hasher() *Hasher { return x.hasher }

// Index returns the KV-block index.
func (x *Indexer) Index() *Index { return x.index }

func normalizeTier(medium string) string {
	if medium == "" {
		return DefaultEventTier
	}
	return strings.ToLower(medium)
}

// HandleEvents applies one batch of KV events from pod (its "ip:port"),
// whose engine serves model (spec §6.3). Malformed events are dropped one
// by one, as upstream logs and continues.
func (x *Indexer) HandleEvents(pod, model string, batch []epp.KVEvent) {
	x.touchRemovals(pod, batch)
	// The entry of the batch's removals: vLLM reports each evicted block
	// in an event of its own, all of one pod and nearly always of one
	// medium, so the entry is interned once per medium run.
	var rm removal
	for i := range batch {
		ev := &batch[i]
		switch ev.Kind {
		case epp.BlockStored:
			x.blockStored(pod, model, ev)
		case epp.BlockRemoved:
			if !rm.set || rm.medium != ev.Medium {
				rm.medium, rm.set = ev.Medium, true
				rm.ent, rm.ok = x.index.makeEntry(pod, normalizeTier(ev.Medium), false)
			}
			if rm.ok {
				x.blockRemoved(rm.ent, ev.BlockHashes)
			}
		case epp.AllBlocksCleared:
			x.ClearPod(pod)
		}
	}
}

// removal caches the entry of a batch's BlockRemoved events by medium.
type removal struct {
	set, ok bool
	medium  string
	ent     entry
}

// touchRemovals loads the table entries that the batch's BlockRemoved
// events will read (see Index.touchRemoval), all at once: vLLM reports each
// evicted block in an event of its own, so a batch holds many small
// removals whose cache misses would otherwise come one after the other.
// It changes nothing.
func (x *Indexer) touchRemovals(pod string, batch []epp.KVEvent) {
	hashes := x.removed[:0]
	for i := range batch {
		if batch[i].Kind == epp.BlockRemoved {
			hashes = append(hashes, batch[i].BlockHashes...)
		}
	}
	x.removed = hashes
	if len(hashes) == 0 {
		return
	}
	// The store counts of the default tier, where vLLM's GPU blocks are.
	id, ok := x.index.podIDs[pod]
	tier, tok := x.index.tierIDs[DefaultEventTier]
	if ok && tok && int(id) < len(x.refs) && int(tier) < len(x.refs[id]) {
		b := &x.refs[id][tier]
		sink := x.index.sink
		for _, h := range hashes {
			sink ^= b.Touch(h)
		}
		x.index.sink = sink
	}
	x.index.touchRemoval(hashes)
}

func (x *Indexer) blockStored(pod, model string, ev *epp.KVEvent) {
	ent, ok := x.index.makeEntry(pod, normalizeTier(ev.Medium), false)
	if !ok {
		return
	}
	// As upstream, a zero parent hash means "no parent" (vLLM's None decodes
	// to 0); HasParent is not consulted.
	var parent uint64
	if ev.ParentBlockHash != 0 {
		rk, ok := x.index.requestKey(ev.ParentBlockHash)
		if !ok {
			// Unknown parent: the chain cannot be continued; upstream drops
			// the event.
			return
		}
		parent = rk
	}
	if ev.LoraName != "" {
		model = ev.LoraName
	}
	x.touchStored(ent, ev.BlockHashes)
	rks := x.originKeys(ev, parent, model)
	if rks == nil {
		rks = x.hasher.Keys(parent, ev.TokenIDs, model, x.realign(ev))
	}
	if len(rks) == 0 {
		// Location-only event (no tokens, e.g. an offload to CPU): resolve
		// the engine keys already mapped and add this tier.
		if len(ev.TokenIDs) != 0 || len(ev.BlockHashes) == 0 {
			return
		}
		var resolved []uint64
		seen := map[uint64]bool{}
		for _, ek := range ev.BlockHashes {
			if rk, ok := x.index.requestKey(ek); ok && !seen[rk] {
				seen[rk] = true
				resolved = append(resolved, rk)
			}
		}
		if len(resolved) == 0 {
			return
		}
		x.index.add(nil, resolved, []entry{ent})
		x.trackStore(ent, ev.BlockHashes)
		return
	}
	x.index.add(ev.BlockHashes, rks, []entry{ent})
	x.trackStore(ent, ev.BlockHashes)
}

// originKeys returns the request keys of a BlockStored whose tokens are a
// routed request's prompt (ev.Origin) when routing already computed them:
// the slice of the prompt's keys in the request's memo (RequestKeysShared)
// that hashing the event's tokens from parent would give. They are the
// same values by construction when the memoized keys were computed by this
// hasher's parameters for this model over the same token array, the event
// starts at a block boundary of the prompt, it carries no extra keys, and
// the chain before it is the same: parent is the prompt's key of the block
// before (or, at the prompt's first block, parent is 0 and the request has
// no cache salt, whose key block 0 would carry). Otherwise, or when the
// memo does not hold the keys yet, it returns nil and the caller hashes.
// The result is shared: it must not be changed.
func (x *Indexer) originKeys(ev *epp.KVEvent, parent uint64, model string) []uint64 {
	o := &ev.Origin
	h := x.hasher
	bs := h.blockSize
	if o.Memo == nil || len(ev.ExtraKeys) != 0 || len(ev.TokenIDs) < bs || o.Offset%bs != 0 ||
		o.Offset+len(ev.TokenIDs) > len(o.Prompt) || &o.Prompt[o.Offset] != &ev.TokenIDs[0] {
		return nil
	}
	j := o.Offset / bs
	if j == 0 && (parent != 0 || o.CacheSalt != "") {
		return nil
	}
	key := requestKeysKey{blockSize: bs, xxh: h.xxh, init: h.init, model: model, salt: o.CacheSalt, prompt: &o.Prompt[0], n: len(o.Prompt)}
	perPrompt, ok := memo.Peek[[][]uint64](o.Memo, key)
	if !ok || len(perPrompt) != 1 {
		return nil
	}
	keys := perPrompt[0]
	n := len(ev.TokenIDs) / bs
	if j+n > len(keys) || (j > 0 && keys[j-1] != parent) {
		return nil
	}
	return keys[j : j+n : j+n]
}

// realign maps an event's per-engine-block extra keys onto the indexer's
// blocks by token position (spec §6.3: extras are re-aligned to the EPP
// block size).
func (x *Indexer) realign(ev *epp.KVEvent) [][]string {
	if len(ev.ExtraKeys) == 0 || ev.BlockSize <= 0 {
		return nil
	}
	bs := x.hasher.blockSize
	out := make([][]string, len(ev.TokenIDs)/bs)
	if len(out) == 0 {
		return nil
	}
	for i, keys := range ev.ExtraKeys {
		b := i * ev.BlockSize / bs
		if b >= len(out) {
			break
		}
		out[b] = append(out[b], keys...)
	}
	return out
}

// touchStored loads the engine-map entries and store counts that storing
// these engine keys will update, before their tokens are hashed, so that
// those cache misses overlap with the hashing, which only computes. It
// changes nothing.
func (x *Indexer) touchStored(ent entry, hashes []uint64) {
	sink := x.index.sink
	e2r := x.index.e2r
	for _, h := range hashes {
		sink ^= e2r.Touch(h)
	}
	if int(ent.pod) < len(x.refs) && int(ent.tier) < len(x.refs[ent.pod]) {
		b := &x.refs[ent.pod][ent.tier]
		for _, h := range hashes {
			sink ^= b.Touch(h)
		}
	}
	x.index.sink = sink
}

func (x *Indexer) trackStore(ent entry, hashes []uint64) {
	if len(hashes) == 0 {
		return
	}
	if int(ent.pod) >= len(x.refs) {
		x.refs = append(x.refs, make([][]blockmap.Map, int(ent.pod)+1-len(x.refs))...)
	}
	tiers := x.refs[ent.pod]
	if int(ent.tier) >= len(tiers) {
		tiers = append(tiers, make([]blockmap.Map, int(ent.tier)+1-len(tiers))...)
		x.refs[ent.pod] = tiers
	}
	b := &tiers[ent.tier]
	sink := x.index.sink
	for _, h := range hashes {
		sink ^= b.Touch(h)
	}
	x.index.sink = sink
	for _, h := range hashes {
		*b.Ref(h)++
	}
}

// blockRemoved applies a BlockRemoved of these engine keys whose pod and
// tier are ent's.
func (x *Indexer) blockRemoved(ent entry, hashes []uint64) {
	var b *blockmap.Map
	if int(ent.pod) < len(x.refs) && int(ent.tier) < len(x.refs[ent.pod]) {
		b = &x.refs[ent.pod][ent.tier]
	}
	recs := [1]entry{ent}
	for _, h := range hashes {
		if b != nil {
			if pos, ok := b.Lookup(h); ok {
				if n := b.Val(pos); *n > 1 {
					*n-- // still referenced by another store
					continue
				}
				b.DeleteAt(pos)
			}
		}
		x.index.evictEngineKey(h, recs[:])
	}
	if b != nil && b.Len() == 0 {
		*b = blockmap.Map{} // release the table
	}
}

// ClearPod drops every entry and store count of pod (AllBlocksCleared, or
// the endpoint leaving the pool).
func (x *Indexer) ClearPod(pod string) {
	x.index.clearPod(pod)
	if id, ok := x.index.podIDs[pod]; ok && int(id) < len(x.refs) {
		x.refs[id] = nil
	}
}

// RequestKeys computes a request's per-prompt block keys (spec §6.2): full
// blocks only, prompts with no full block skipped; multimodal extras apply
// to single-prompt requests; the cache salt joins block 0's extras. It
// returns nil when no prompt has a full block.
func (x *Indexer) RequestKeys(model string, tr *epp.TokenizedRequest) [][]uint64 {
	if tr == nil {
		return nil
	}
	bs := x.hasher.blockSize
	var out [][]uint64
	for _, p := range tr.Prompts {
		if len(p) < bs {
			continue
		}
		var mm []epp.MultiModalFeature
		if len(tr.Prompts) == 1 {
			mm = tr.MultiModal
		}
		keys := x.hasher.Keys(0, p, model, RequestExtras(len(p), bs, mm, tr.CacheSalt))
		if len(keys) > 0 {
			out = append(out, keys)
		}
	}
	return out
}

// requestKeysKey identifies, within a request's memo, the keys that
// RequestKeys computes for a single-prompt request without multimodal
// items: the hasher's parameters, the model, the cache salt and the prompt
// (by its backing array: a request's tokens are shared read-only).
type requestKeysKey struct {
	blockSize int
	xxh       bool
	init      uint64
	model     string
	salt      string
	prompt    *uint32
	n         int
}

// RequestKeysShared is RequestKeys memoized in m, the memo of the request
// that tr tokenizes: the routers of every simulation replaying the request
// with the same token processor settings share one computation, which
// Router.Prepare may do ahead on the feed's goroutine. Requests with
// several prompts or multimodal items are computed each time. The result
// is shared: callers must not change it.
func (x *Indexer) RequestKeysShared(m *memo.Memo, model string, tr *epp.TokenizedRequest) [][]uint64 {
	if m == nil || tr == nil || len(tr.Prompts) != 1 || len(tr.MultiModal) != 0 || len(tr.Prompts[0]) < x.hasher.blockSize {
		return x.RequestKeys(model, tr)
	}
	p := tr.Prompts[0]
	h := x.hasher
	key := requestKeysKey{blockSize: h.blockSize, xxh: h.xxh, init: h.init, model: model, salt: tr.CacheSalt, prompt: &p[0], n: len(p)}
	return memo.Get(m, key, func() [][]uint64 { return x.RequestKeys(model, tr) })
}

// Match is one candidate's precise match (spec §6.4).
type Match struct {
	// Score is the tier-weighted longest-prefix score summed over prompts
	// (matchBlocks = int(Score)).
	Score float64
	// Cached is the unweighted contiguous block count from key 0.
	Cached int
	// ByTier counts contiguous blocks per tier while the intersection of the
	// pod's tier sets stays non-empty; nil when zero everywhere.
	ByTier map[string]int
}

func (x *Indexer) weight(tier uint8) float64 {
	for len(x.tierW) < len(x.index.tierNames) {
		name := x.index.tierNames[len(x.tierW)]
		w, ok := x.weights[name]
		if !ok {
			w = x.defWeight
		}
		x.tierW = append(x.tierW, w)
	}
	return x.tierW[tier]
}

// Match scores candidates (by address) against per-prompt keys; out[i]
// belongs to candidates[i] and is overwritten.
func (x *Indexer) Match(perPrompt [][]uint64, candidates []string, out []Match) {
	ix := x.index
	for len(x.candOf) < len(ix.podNames) {
		x.candOf = append(x.candOf, -1)
	}
	if cap(x.st) < len(candidates) {
		x.st = make([]candState, len(candidates))
	}
	st := x.st[:len(candidates)]
	ids := make([]int32, 0, len(candidates))
	for c, addr := range candidates {
		st[c] = candState{}
		out[c] = Match{}
		if id, ok := ix.podIDs[addr]; ok {
			x.candOf[id] = int32(c)
			ids = append(ids, id)
		}
	}
	defer func() {
		for _, id := range ids {
			x.candOf[id] = -1
		}
	}()
	if len(ids) == 0 {
		return
	}
	for _, keys := range perPrompt {
		for c := range st {
			st[c].alive, st[c].tmask, st[c].score = false, 0, 0
		}
		for i, key := range keys {
			v, ok := ix.data.Get(key)
			if !ok {
				break
			}
			x.stamp++
			hit := false
			for _, e := range ix.entries(key, v) {
				c := x.candOf[e.pod]
				if c < 0 {
					continue
				}
				s := &st[c]
				w := x.weight(e.tier)
				bit := uint64(1) << e.tier
				if e.spec {
					bit = specBit
				}
				if s.stamp != x.stamp {
					s.stamp, s.w, s.mask = x.stamp, w, 0
				} else if w > s.w {
					s.w = w
				}
				s.mask |= bit
				hit = true
			}
			if !hit {
				break
			}
			anyAlive := false
			for c := range st {
				s := &st[c]
				present := s.stamp == x.stamp
				if i == 0 {
					if !present {
						continue
					}
					s.alive, s.score, s.tmask = true, s.w, s.mask
				} else {
					if !s.alive {
						continue
					}
					if !present {
						s.alive = false
						continue
					}
					s.score += s.w
					s.tmask &= s.mask
				}
				anyAlive = true
				s.cached++
				for m := s.tmask; m != 0; m &= m - 1 {
					s.tiers[bits.TrailingZeros64(m)]++
				}
			}
			if !anyAlive {
				break
			}
		}
		for c := range st {
			out[c].Score += st[c].score
		}
	}
	for c := range st {
		s := &st[c]
		out[c].Cached = s.cached
		for t, n := range s.tiers {
			if n == 0 {
				continue
			}
			if out[c].ByTier == nil {
				out[c].ByTier = map[string]int{}
			}
			name := SpeculativeTier
			if uint64(1)<<t != specBit {
				name = ix.tierNames[t]
			}
			out[c].ByTier[name] += n
		}
	}
}

// AddSpeculative inserts speculative entries (tier "", weight per the
// default) for pods under every key, to be removed at now+ttl (spec §6.4).
func (x *Indexer) AddSpeculative(now, ttl int64, perPrompt [][]uint64, pods []string) {
	x.Expire(now)
	var ents []entry
	for _, p := range pods {
		ent, ok := x.index.makeEntry(p, "", true)
		if !ok {
			continue
		}
		ents = append(ents, ent)
		for _, keys := range perPrompt {
			x.index.add(nil, keys, []entry{ent})
		}
	}
	if len(ents) == 0 {
		return
	}
	it := specItem{expiry: now + ttl, keys: perPrompt, entries: ents}
	i := sort.Search(len(x.spec), func(i int) bool { return x.spec[i].expiry > it.expiry })
	x.spec = slices.Insert(x.spec, i, it)
}

// Expire removes the speculative entries whose TTL ended at or before now.
func (x *Indexer) Expire(now int64) {
	n := 0
	for n < len(x.spec) && x.spec[n].expiry <= now {
		it := &x.spec[n]
		for _, keys := range it.keys {
			for _, rk := range keys {
				x.index.evictRequestKey(rk, it.entries)
			}
		}
		n++
	}
	if n > 0 {
		clear(x.spec[:n])
		x.spec = x.spec[n:]
	}
}

// PendingSpeculative is the number of speculative insertions not yet
// expired.
func (x *Indexer) PendingSpeculative() int { return len(x.spec) }
