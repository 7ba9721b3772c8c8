package producer

import (
	"encoding/json"
	"fmt"
	"math"
	"math/bits"

	"github.com/eppsim/eppsim/epp"
	"github.com/eppsim/eppsim/epp/prefixhash"

	"github.com/eppsim/eppsim/internal/blockmap"
	"github.com/eppsim/eppsim/internal/keylru"
)

// Approximate prefix producer defaults (spec §5.4, upstream types.go).
const (
	DefaultApproxBlockSizeTokens = 16
	MinApproxBlockSizeTokens     = 64 // minBlockSizeTokens (#1158)
	DefaultMaxPrefixBlocks       = 2048
	DefaultMaxPrefixTokens       = 131072
	DefaultLRUCapacityPerServer  = 31250
)

// ApproxPrefixParams are the approx-prefix-cache-producer parameters (spec
// §5.4), decoded strictly as upstream.
type ApproxPrefixParams struct {
	AutoTune               bool `json:"autoTune"`
	BlockSizeTokens        int  `json:"blockSizeTokens"`
	BlockSize              int  `json:"blockSize"` // deprecated
	MaxPrefixBlocksToMatch int  `json:"maxPrefixBlocksToMatch"`
	MaxPrefixTokensToMatch int  `json:"maxPrefixTokensToMatch"`
	LRUCapacityPerServer   int  `json:"lruCapacityPerServer"`
}

// DefaultApproxPrefixParams are the upstream defaults (autoTune on).
func DefaultApproxPrefixParams() ApproxPrefixParams {
	return ApproxPrefixParams{
		AutoTune:               true,
		BlockSizeTokens:        DefaultApproxBlockSizeTokens,
		MaxPrefixBlocksToMatch: DefaultMaxPrefixBlocks,
		MaxPrefixTokensToMatch: DefaultMaxPrefixTokens,
		LRUCapacityPerServer:   DefaultLRUCapacityPerServer,
	}
}

// ApproxPrefix is the approx-prefix-cache-producer (spec §5.3–5.7).
//
// Produce hashes the request's tokens at the effective block size and writes
// PrefixCacheMatchInfo (match, total, block size) on every candidate;
// PreRequest inserts the hashes for the primary target and the "prefill"
// profile's target. The index update upstream makes asynchronously is
// applied synchronously here (at dispatch).
type ApproxPrefix struct {
	epp.TypedName
	cfg        ApproxPrefixParams
	tailFirst  bool
	offloadLRU bool
	key        epp.DataKey
	stateKey   epp.DataKey
	idx        approxIndex
	counts     []int // scratch: match count per pod id
}

// NewApproxPrefix validates p (after the deprecated blockSize mapping) and
// returns a producer with an empty index.
func NewApproxPrefix(name string, p ApproxPrefixParams) (*ApproxPrefix, error) {
	if p.BlockSize > 0 {
		if p.BlockSizeTokens == DefaultApproxBlockSizeTokens {
			p.BlockSizeTokens = p.BlockSize
		}
		p.BlockSize = 0
	}
	if !p.AutoTune && p.BlockSizeTokens <= 0 {
		return nil, fmt.Errorf("blockSizeTokens must be > 0 when autoTune is disabled (got %d)", p.BlockSizeTokens)
	}
	if p.MaxPrefixTokensToMatch < 0 {
		return nil, fmt.Errorf("maxPrefixTokensToMatch must be >= 0 (got %d)", p.MaxPrefixTokensToMatch)
	}
	if p.MaxPrefixBlocksToMatch < 0 {
		return nil, fmt.Errorf("maxPrefixBlocksToMatch must be >= 0 (got %d)", p.MaxPrefixBlocksToMatch)
	}
	return &ApproxPrefix{
		TypedName: epp.TypedName{PluginType: ApproxPrefixType, PluginName: name},
		cfg:       p,
		key:       epp.DataKey{Type: epp.PrefixCacheMatchInfoType, Producer: name},
		stateKey:  epp.DataKey{Type: "ApproxPrefixState", Producer: name},
		idx:       newApproxIndex(),
	}, nil
}

func approxFactory(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
	p := DefaultApproxPrefixParams()
	if err := epp.DecodeParams(ApproxPrefixType, name, params, &p); err != nil {
		return nil, err
	}
	a, err := NewApproxPrefix(name, p)
	if err != nil {
		return nil, fmt.Errorf("plugin %q (type %s): %w", name, ApproxPrefixType, err)
	}
	return a, nil
}

// Params returns the effective parameters.
func (a *ApproxPrefix) Params() ApproxPrefixParams { return a.cfg }

// SetTailFirst selects the post-ebab687 insertion order (llm-d-router PR
// #2661): a prompt's hashes enter the pod LRU tail first, so its head block
// is the most recent entry and evictions trim tails. The default (false) is
// ebab687's head-first order. The flag is not part of the upstream
// parameter schema; the config layer sets it from an eppsim option.
func (a *ApproxPrefix) SetTailFirst(on bool) { a.tailFirst = on }

// TailFirst reports the insertion order.
func (a *ApproxPrefix) TailFirst() bool { return a.tailFirst }

// UpstreamPR2292 is the name of the eppsim option for the behaviour
// llm-d-router PR #2292 (open) proposes for issue #1650: with autoTune, a
// pod whose engine reports the capacity of a CPU offload tier gets an LRU
// of max(num_gpu_blocks, CPU capacity) entries instead of num_gpu_blocks
// (pd-offload.md B.12; max, not sum, because the CPU tier holds a copy of
// what the GPU holds). The CPU capacity is read in tokens and converted to
// engine blocks, the unit num_gpu_blocks already has. vLLM 2f41c894
// reports no CPU capacity (vLLM PR #51615 proposes
// vllm:kv_offload_cpu_capacity_tokens); simulated replicas report it, so
// the option shows what the PR would do once both land. The PR's in-place
// resize when a reported size changes is not modelled: a simulated pod's
// capacities never change.
const UpstreamPR2292 = "pr2292"

// SetOffloadLRU turns the UpstreamPR2292 behaviour on or off (default off:
// ebab687 sizes the LRU to the GPU cache only). Like SetTailFirst it is an
// eppsim option, not an upstream parameter.
func (a *ApproxPrefix) SetOffloadLRU(on bool) { a.offloadLRU = on }

// OffloadLRU reports whether the UpstreamPR2292 behaviour is on.
func (a *ApproxPrefix) OffloadLRU() bool { return a.offloadLRU }

// Produces is PrefixCacheMatchInfo/<name>.
func (a *ApproxPrefix) Produces() []epp.DataKey { return []epp.DataKey{a.key} }

// Consumes is TokenizedPrompt/token-producer, required.
func (a *ApproxPrefix) Consumes() []epp.Dependency {
	return []epp.Dependency{{Key: TokenizedPromptKey, Required: true}}
}

// BlockSize is the effective block size for a candidate list (upstream
// GetBlockSize): the configured size, or with autoTune the first
// candidate's vllm:cache_config_info block_size when positive; never below
// 64.
func (a *ApproxPrefix) BlockSize(eps []*epp.Endpoint) int {
	bs := a.cfg.BlockSizeTokens
	if a.cfg.AutoTune && len(eps) > 0 && eps[0] != nil && eps[0].Metrics.CacheBlockSize > 0 {
		bs = eps[0].Metrics.CacheBlockSize
	}
	return max(bs, MinApproxBlockSizeTokens)
}

// MaxBlocks is the per-prompt block cap at block size bs (upstream
// resolveMaxBlocks): maxPrefixTokensToMatch/bs when that is set, else
// maxPrefixBlocksToMatch, unlimited when both are 0.
func (a *ApproxPrefix) MaxBlocks(bs int) int {
	if a.cfg.MaxPrefixTokensToMatch > 0 && bs > 0 {
		return a.cfg.MaxPrefixTokensToMatch / bs
	}
	if a.cfg.MaxPrefixBlocksToMatch == 0 {
		return math.MaxInt
	}
	return a.cfg.MaxPrefixBlocksToMatch
}

// approxState is what Produce leaves for PreRequest.
type approxState struct {
	perPrompt [][]uint64
	blockSize int
}

// Produce computes the request's block hashes and writes each candidate's
// PrefixCacheMatchInfo (spec §5.5). A request without tokens gets (0, 0, bs)
// everywhere.
func (a *ApproxPrefix) Produce(_ *epp.Cycle, req *epp.Request, eps []*epp.Endpoint) error {
	bs := a.BlockSize(eps)
	perPrompt := prefixhash.GetBlockHashes(req, bs, a.MaxBlocks(bs))
	counts := a.counts[:0]
	for range a.idx.pods {
		counts = append(counts, 0)
	}
	a.counts = counts
	total := 0
	for _, hashes := range perPrompt {
		a.idx.matchLongestPrefix(hashes, counts)
		total += len(hashes)
	}
	for _, e := range eps {
		m := 0
		if id, ok := a.idx.ids[e.Name]; ok {
			m = counts[id]
		}
		e.Put(a.key, epp.PrefixCacheMatchInfo{MatchBlocks: m, TotalBlocks: total, BlockSizeTokens: bs, CachedBlockCount: m})
	}
	req.Put(a.stateKey, &approxState{perPrompt: perPrompt, blockSize: bs})
	return nil
}

// Prepare implements epp.Preparer: the request's block hashes at the
// configured block size (the size Produce uses unless autoTune reads
// another from the endpoints), into req.Memo.
func (a *ApproxPrefix) Prepare(req *epp.Request) {
	bs := a.BlockSize(nil)
	prefixhash.GetBlockHashes(req, bs, a.MaxBlocks(bs))
}

// PreRequest inserts the request's hashes for the primary profile's first
// target and, if present, the "prefill" profile's first target (spec §5.7).
// Upstream does this in a goroutine; eppsim applies it immediately.
func (a *ApproxPrefix) PreRequest(_ *epp.Cycle, req *epp.Request, res *epp.Result) {
	v, ok := req.Get(a.stateKey)
	if !ok {
		return
	}
	st, _ := v.(*approxState)
	req.Put(a.stateKey, (*approxState)(nil))
	if st == nil {
		return
	}
	primary, prefill, ok := pickedTargets(res)
	if !ok {
		return
	}
	for _, t := range []*epp.Endpoint{primary, prefill} {
		if t == nil || t.EndpointInfo == nil {
			continue
		}
		capacity := DefaultLRUCapacityPerServer
		if a.cfg.AutoTune && t.Metrics.CacheNumBlocks > 0 {
			capacity = t.Metrics.CacheNumBlocks
			if m := &t.Metrics; a.offloadLRU && m.CacheCPUCapacityTokens > 0 && m.CacheBlockSize > 0 {
				capacity = max(capacity, m.CacheCPUCapacityTokens/m.CacheBlockSize)
			}
		} else if a.cfg.LRUCapacityPerServer > 0 {
			capacity = a.cfg.LRUCapacityPerServer
		}
		for _, hashes := range st.perPrompt {
			a.idx.add(hashes, t.Name, capacity, a.tailFirst)
		}
	}
}

// RequestHashes returns the block hashes Produce computed for req and the
// block size they were computed at (nil after PreRequest consumed them).
func (a *ApproxPrefix) RequestHashes(req *epp.Request) ([][]uint64, int) {
	v, ok := req.Get(a.stateKey)
	if !ok {
		return nil, 0
	}
	st, _ := v.(*approxState)
	if st == nil {
		return nil, 0
	}
	return st.perPrompt, st.blockSize
}

// MatchBlocks is what the index predicts for one endpoint: the blocks of
// perPrompt it holds within the globally matched prefix, summed over
// prompts (the value Produce writes as matchBlocks). It does not change the
// index.
func (a *ApproxPrefix) MatchBlocks(perPrompt [][]uint64, endpointName string) int {
	n := 0
	for _, hashes := range perPrompt {
		n += a.idx.matchBlocks(hashes, endpointName)
	}
	return n
}

// PodBlocks is the number of entries in the endpoint's LRU.
func (a *ApproxPrefix) PodBlocks(endpointName string) int {
	id, ok := a.idx.ids[endpointName]
	if !ok || a.idx.pods[id].lru == nil {
		return 0
	}
	return a.idx.pods[id].lru.Len()
}

// PodCapacity is the LRU capacity fixed at the endpoint's first insert (0 if
// it has none).
func (a *ApproxPrefix) PodCapacity(endpointName string) int {
	id, ok := a.idx.ids[endpointName]
	if !ok || a.idx.pods[id].lru == nil {
		return 0
	}
	return a.idx.pods[id].capacity
}

// RemovePod drops an endpoint's LRU; its eviction callbacks clean the hash
// map (entries left stale by an over-long insert stay, as upstream).
func (a *ApproxPrefix) RemovePod(endpointName string) { a.idx.dropPod(endpointName) }

// approxIndex is upstream's indexer: hash → set of pods, pod → LRU of hashes
// (capacity fixed at creation, eviction callback removes the pod from the
// hash's set). Upstream's LRU is hashicorp golang-lru; keylru.LRU
// reproduces its semantics without a heap object per entry.
//
// A hash is in the index while at least one pod is in its set: hashToPods
// holds the bit mask of the pods with ids below 64 and highPods the others
// (only fleets of more than 64 endpoints have any), each keyed by a hash
// only while non-empty.
type approxIndex struct {
	hashToPods blockmap.Map
	highPods   map[uint64][]int32
	ids        map[string]int32
	pods       []approxPod
	// Scratch of add, kept to spare allocations per request.
	evicted, fresh []uint64
	// sink receives the words that the touch loops load (see blockmap.Map.Touch).
	sink uint64
}

type approxPod struct {
	name     string
	lru      *keylru.LRU[struct{}] // upstream's simplelru.LRU[uint64, struct{}]
	capacity int
}

func newApproxIndex() approxIndex {
	return approxIndex{highPods: map[uint64][]int32{}, ids: map[string]int32{}}
}

// held reports whether any pod holds h.
func (ix *approxIndex) held(h uint64) bool {
	return ix.hashToPods.Get(h) != 0 || (len(ix.highPods) > 0 && len(ix.highPods[h]) > 0)
}

// matchBlocks is the number of hashes the named pod holds within the
// prefix of hashes that some pod holds (its share of the global walk).
func (ix *approxIndex) matchBlocks(hashes []uint64, name string) int {
	id, ok := ix.ids[name]
	if !ok {
		return 0
	}
	n := 0
	for _, h := range hashes {
		if !ix.held(h) {
			break
		}
		if ix.holds(h, id) {
			n++
		}
	}
	return n
}

// holds reports whether pod id holds h.
func (ix *approxIndex) holds(h uint64, id int32) bool {
	if id < 64 {
		return ix.hashToPods.Get(h)&(1<<uint(id)) != 0
	}
	for _, x := range ix.highPods[h] {
		if x == id {
			return true
		}
	}
	return false
}

// addPod puts pod id in h's set.
func (ix *approxIndex) addPod(h uint64, id int32) {
	if id < 64 {
		*ix.hashToPods.Ref(h) |= 1 << uint(id)
		return
	}
	hi := ix.highPods[h]
	for _, x := range hi {
		if x == id {
			return
		}
	}
	ix.highPods[h] = append(hi, id)
}

// removePod takes pod id out of h's set, dropping the set when it empties.
func (ix *approxIndex) removePod(h uint64, id int32) {
	if id < 64 {
		m := &ix.hashToPods
		if pos, ok := m.Lookup(h); ok {
			if v := *m.Val(pos) &^ (1 << uint(id)); v == 0 {
				m.DeleteAt(pos)
			} else {
				*m.Val(pos) = v
			}
		}
		return
	}
	hi := ix.highPods[h]
	for i, x := range hi {
		if x == id {
			hi = append(hi[:i], hi[i+1:]...)
			break
		}
	}
	if len(hi) == 0 {
		delete(ix.highPods, h)
	} else {
		ix.highPods[h] = hi
	}
}

// matchLongestPrefix adds to counts[pod] the number of hashes each pod holds
// in the prefix that at least one pod holds (the global walk, spec §5.5).
//
// The walk goes a chunk of hashes at a time, touching the chunk's slots
// first (see blockmap.Map.Touch): the walk's lookups would otherwise wait for
// their cache misses one after the other, and touching everything at once
// is wasted when the walk stops early.
func (ix *approxIndex) matchLongestPrefix(hashes []uint64, counts []int) {
	const chunk = 16
	for start := 0; start < len(hashes); start += chunk {
		part := hashes[start:min(start+chunk, len(hashes))]
		sink := ix.sink
		for _, h := range part {
			sink ^= ix.hashToPods.Touch(h)
		}
		ix.sink = sink
		for _, h := range part {
			m := ix.hashToPods.Get(h)
			var hi []int32
			if len(ix.highPods) > 0 {
				hi = ix.highPods[h]
			}
			if m == 0 && len(hi) == 0 {
				return
			}
			for ; m != 0; m &= m - 1 {
				counts[bits.TrailingZeros64(m)]++
			}
			for _, id := range hi {
				counts[id]++
			}
		}
	}
}

func (ix *approxIndex) podID(name string) int32 {
	if id, ok := ix.ids[name]; ok {
		return id
	}
	id := int32(len(ix.pods))
	ix.ids[name] = id
	ix.pods = append(ix.pods, approxPod{name: name})
	return id
}

// add is upstream indexer.Add for one prompt: all LRU insertions first
// (evictions fire callbacks), then the hash → pod entries. A prompt longer
// than the LRU therefore leaves its evicted hashes in hashToPods (stale).
//
// The LRU insertions read nothing but the LRU, so the callbacks' removals
// are deferred until after them, in their order, with the same result.
// Each pass is preceded by a touch of the table groups it is about to use
// (see blockmap.Map.Touch) — for the LRU pass, those of every hash and of the
// records next in line for eviction — so that their cache misses overlap
// instead of stalling the pass one by one.
func (ix *approxIndex) add(hashes []uint64, name string, capacity int, tailFirst bool) {
	id := ix.podID(name)
	p := &ix.pods[id]
	if p.lru == nil {
		if capacity <= 0 {
			capacity = DefaultLRUCapacityPerServer
		}
		p.lru = keylru.New[struct{}](capacity)
		p.capacity = capacity
	}
	l := p.lru
	sink := ix.sink
	for _, h := range hashes {
		sink ^= l.Touch(h)
	}
	// As many evictions as hashes at most; counting the new hashes first
	// would cost more than touching a few records too many.
	sink ^= l.TouchOldest(min(len(hashes), l.Len()+len(hashes)-l.Capacity()))
	evicted, fresh := ix.evicted[:0], ix.fresh[:0]
	for i := range hashes {
		if tailFirst {
			i = len(hashes) - 1 - i
		}
		_, held, old, ok := l.Add(hashes[i])
		if ok {
			evicted = append(evicted, old)
		}
		if !held {
			fresh = append(fresh, hashes[i])
		}
	}
	ix.evicted, ix.fresh = evicted, fresh
	// A hash the LRU held already has the pod in its set, and keeps it:
	// only a prompt longer than the LRU can evict, within this call, a hash
	// it has moved to the front (every hash it touched is more recent
	// than all the others). So only the new hashes need the pod added,
	// unless the prompt is that long.
	toAdd := fresh
	if len(hashes) > l.Capacity() {
		toAdd = hashes
	}
	for _, h := range evicted {
		sink ^= ix.hashToPods.Touch(h)
	}
	for _, h := range toAdd {
		sink ^= ix.hashToPods.Touch(h)
	}
	ix.sink = sink
	for _, old := range evicted {
		ix.removePod(old, id)
	}
	for _, h := range toAdd {
		ix.addPod(h, id)
	}
}

func (ix *approxIndex) dropPod(name string) {
	id, ok := ix.ids[name]
	if !ok || ix.pods[id].lru == nil {
		return
	}
	l := ix.pods[id].lru
	for _, h := range l.Keys() {
		if l.Remove(h) {
			ix.removePod(h, id)
		}
	}
	ix.pods[id].lru = nil
	ix.pods[id].capacity = 0
}
