package producer

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/eppsim/eppsim/epp"
	"github.com/eppsim/eppsim/epp/prefixhash"
)

// BurstPrefixParams are the burst-prefix-cache-producer parameters
// (flow-control.md §14.1).
type BurstPrefixParams struct {
	WindowDurationMs       *int   `json:"windowDurationMs"`
	MaxPerReplica          *int   `json:"maxPerReplica"`
	BlockSizeTokens        *int   `json:"blockSizeTokens"`
	MaxPrefixTokensToMatch int    `json:"maxPrefixTokensToMatch"`
	MinColocateBlocks      int    `json:"minColocateBlocks"`
	MaxBatchSize           *int   `json:"maxBatchSize"`
	BalanceBy              string `json:"balanceBy"`
}

// Burst-producer constants (§14.1).
const (
	burstDefaultMaxBlocks = 2048
	burstUnlimited        = -1
	// BurstBalanceRequests and BurstBalanceTokens are balanceBy's values.
	BurstBalanceRequests = "requests"
	BurstBalanceTokens   = "tokens"
)

// BurstPrefix is burst-prefix-cache-producer (α, flow-control.md §14.1;
// epp.md §6.5). A request arriving while no batch is open opens one,
// sealed window ms later; every member waits for the seal (Produce returns
// an *epp.WaitError, and the director calls it again at the seal time).
// At the seal the batch is placed jointly: requests with identical prompts
// (and, with minColocateBlocks > 0, prompts sharing that many leading
// blocks) are co-located, at most maxPerReplica of a group per replica,
// balanced over the replicas. A member's output is PrefixCacheMatchInfo
// (total, total, blockSizeTokens) on its assigned replica and (0, total,
// blockSizeTokens) elsewhere; unassigned members get 0 everywhere. A
// request arriving when the batch already has maxBatchSize members fails
// at once (no match info, no wait).
//
// DES mapping (§14.1, §16.3): one open batch; the seal is the first call
// at or after t_first + window (a member's resumption, or an arrival,
// which then opens the next batch); members resume in arrival order.
type BurstPrefix struct {
	epp.TypedName
	key            epp.DataKey
	window         int64
	k, bs          int
	maxBlocks      int
	minColocate    int
	maxBatch       int
	byTokens       bool
	open           *burstBatch
	results        map[*epp.Request]*burstEntry // sealed members not yet resumed
	sealed, placed int                          // batches sealed and members placed (for tests)
}

type burstBatch struct {
	seal    int64
	entries []*burstEntry
}

type burstEntry struct {
	req      *epp.Request
	hashes   [][]uint64
	total    int
	pods     []*epp.Endpoint
	assigned string // endpoint name, "" when unassigned
}

func burstFactory(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
	var p BurstPrefixParams
	if err := epp.DecodeParams(BurstPrefixType, name, params, &p); err != nil {
		return nil, err
	}
	b, err := NewBurstPrefix(name, p)
	if err != nil {
		return nil, fmt.Errorf("plugin %q (type %s): %w", name, BurstPrefixType, err)
	}
	return b, nil
}

// NewBurstPrefix applies the defaults (window 100 ms, maxPerReplica -1,
// blockSizeTokens 64, maxBatchSize 1000, balanceBy requests) and validates
// p.
func NewBurstPrefix(name string, p BurstPrefixParams) (*BurstPrefix, error) {
	b := &BurstPrefix{TypedName: epp.TypedName{PluginType: BurstPrefixType, PluginName: name},
		key: epp.DataKey{Type: epp.PrefixCacheMatchInfoType, Producer: name}, window: 100e6, k: burstUnlimited, bs: 64,
		maxBlocks: burstDefaultMaxBlocks, minColocate: p.MinColocateBlocks, maxBatch: 1000, results: map[*epp.Request]*burstEntry{}}
	var errs []error
	if p.WindowDurationMs != nil {
		if w := *p.WindowDurationMs; w <= 0 || w > 10000 {
			errs = append(errs, fmt.Errorf("windowDurationMs must be in (0, 10000], got %d", w))
		} else {
			b.window = int64(w) * 1e6
		}
	}
	if p.MaxPerReplica != nil {
		if b.k = *p.MaxPerReplica; b.k != burstUnlimited && b.k < 1 {
			errs = append(errs, fmt.Errorf("maxPerReplica must be -1 (unlimited) or ≥ 1, got %d", b.k))
		}
	}
	if p.BlockSizeTokens != nil {
		if b.bs = *p.BlockSizeTokens; b.bs <= 0 {
			errs = append(errs, fmt.Errorf("blockSizeTokens must be > 0, got %d", b.bs))
		}
	}
	switch m := p.MaxPrefixTokensToMatch; {
	case m < 0 || m > 0 && b.bs > 0 && m < b.bs:
		errs = append(errs, fmt.Errorf("maxPrefixTokensToMatch must be 0 (%d blocks) or ≥ blockSizeTokens (%d), got %d", burstDefaultMaxBlocks, b.bs, m))
	case m > 0 && b.bs > 0:
		b.maxBlocks = m / b.bs
	}
	if p.MinColocateBlocks < 0 {
		errs = append(errs, fmt.Errorf("minColocateBlocks must be ≥ 0, got %d", p.MinColocateBlocks))
	}
	if p.MaxBatchSize != nil {
		if b.maxBatch = *p.MaxBatchSize; b.maxBatch != burstUnlimited && b.maxBatch < 1 {
			errs = append(errs, fmt.Errorf("maxBatchSize must be -1 (unlimited) or ≥ 1, got %d", b.maxBatch))
		}
	}
	switch p.BalanceBy {
	case "", BurstBalanceRequests:
	case BurstBalanceTokens:
		b.byTokens = true
	default:
		errs = append(errs, fmt.Errorf("balanceBy must be %q or %q, got %q", BurstBalanceRequests, BurstBalanceTokens, p.BalanceBy))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return b, nil
}

// Produces is PrefixCacheMatchInfo/<name>.
func (b *BurstPrefix) Produces() []epp.DataKey { return []epp.DataKey{b.key} }

// Consumes is TokenizedPrompt/token-producer, required.
func (b *BurstPrefix) Consumes() []epp.Dependency {
	return []epp.Dependency{{Key: TokenizedPromptKey, Required: true}}
}

// MayWait implements epp.Waiter: members wait for their batch's seal.
func (b *BurstPrefix) MayWait() bool { return true }

// errBatchFull is Produce's failure past maxBatchSize.
var errBatchFull = errors.New("burst batch is full (maxBatchSize)")

// Produce implements epp.DataProducer.
func (b *BurstPrefix) Produce(c *epp.Cycle, req *epp.Request, eps []*epp.Endpoint) error {
	now := c.Now
	if b.open != nil && now >= b.open.seal {
		b.sealBatch()
	}
	if e, ok := b.results[req]; ok {
		// Resumed after the seal: write the member's output.
		delete(b.results, req)
		b.write(e, eps)
		return nil
	}
	if b.open == nil {
		b.open = &burstBatch{seal: now + b.window}
	}
	if b.maxBatch != burstUnlimited && len(b.open.entries) >= b.maxBatch {
		return errBatchFull
	}
	hashes := prefixhash.GetBlockHashes(req, b.bs, b.maxBlocks)
	total := 0
	for _, h := range hashes {
		total += len(h)
	}
	e := &burstEntry{req: req, hashes: hashes, total: total, pods: eps}
	b.open.entries = append(b.open.entries, e)
	b.results[req] = e
	return &epp.WaitError{Until: b.open.seal}
}

// write puts a member's match info on its candidates.
func (b *BurstPrefix) write(e *burstEntry, eps []*epp.Endpoint) {
	for _, ep := range eps {
		m := 0
		if e.assigned != "" && ep.Name == e.assigned {
			m = e.total
		}
		ep.Put(b.key, epp.PrefixCacheMatchInfo{MatchBlocks: m, TotalBlocks: e.total, BlockSizeTokens: b.bs, CachedBlockCount: m})
	}
}

// sealBatch closes the open batch and places its members.
func (b *BurstPrefix) sealBatch() {
	batch := b.open
	b.open = nil
	b.sealed++
	b.assign(batch.entries)
}

// groupKey is the batch grouping key: every block hash of the request
// (prompts separated); "" for a request without blocks, never grouped.
func groupKey(hashes [][]uint64) string {
	return prefixKey(hashes, -1)
}

// prefixKey encodes the first n blocks (all when n < 0).
func prefixKey(hashes [][]uint64, n int) string {
	var sb strings.Builder
	count := 0
	for _, ph := range hashes {
		for _, h := range ph {
			if n >= 0 && count >= n {
				return sb.String()
			}
			var buf [8]byte
			for i := range buf {
				buf[i] = byte(h >> (8 * i))
			}
			sb.Write(buf[:])
			count++
		}
		sb.WriteByte('|')
	}
	if count == 0 {
		return ""
	}
	return sb.String()
}

func totalOf(hashes [][]uint64) int {
	n := 0
	for _, h := range hashes {
		n += len(h)
	}
	return n
}

// assign places a sealed batch (§14.1 Units and Placement).
func (b *BurstPrefix) assign(entries []*burstEntry) {
	groups := map[string][]*burstEntry{}
	var order []string
	var replicas []*epp.Endpoint
	for _, e := range entries {
		key := groupKey(e.hashes)
		if key == "" {
			continue
		}
		if _, ok := groups[key]; !ok {
			order = append(order, key)
		}
		groups[key] = append(groups[key], e)
		if replicas == nil {
			replicas = e.pods // the candidates of the first grouped entry
		}
	}
	if len(replicas) == 0 {
		return
	}
	// Singletons sharing ≥ minColocateBlocks leading blocks with another
	// request of the batch.
	shared := map[string]bool{}
	if b.minColocate > 0 {
		count := map[string]int{}
		sig := map[string]string{}
		for _, key := range order {
			h := groups[key][0].hashes
			if totalOf(h) < b.minColocate {
				continue
			}
			s := prefixKey(h, b.minColocate)
			sig[key] = s
			count[s] += len(groups[key])
		}
		for key, s := range sig {
			if count[s] >= 2 {
				shared[key] = true
			}
		}
	}
	var groupUnits, singleUnits []string
	total := 0
	for _, key := range order {
		n := len(groups[key])
		switch {
		case n >= 2:
			groupUnits = append(groupUnits, key)
		case shared[key]:
			singleUnits = append(singleUnits, key)
		default:
			continue
		}
		if b.byTokens {
			total += totalOf(groups[key][0].hashes)
		} else {
			total += n
		}
	}
	if len(groupUnits)+len(singleUnits) == 0 {
		return
	}
	byLen := func(keys []string) {
		slices.SortStableFunc(keys, func(x, y string) int { return totalOf(groups[y][0].hashes) - totalOf(groups[x][0].hashes) })
	}
	byLen(groupUnits)
	byLen(singleUnits)
	maxShare := (total + len(replicas) - 1) / len(replicas)
	idx := burstIndex{}
	load := map[string]int{}
	for _, key := range append(groupUnits, singleUnits...) {
		b.place(groups[key], replicas, maxShare, idx, load)
	}
}

// burstIndex records which replicas hold each block placed in this batch.
type burstIndex map[uint64]map[string]bool

func (x burstIndex) add(hashes [][]uint64, replica string) {
	for _, ph := range hashes {
		for _, h := range ph {
			if x[h] == nil {
				x[h] = map[string]bool{}
			}
			x[h][replica] = true
		}
	}
}

// longestPrefix is, per replica, the leading blocks it already holds.
func (x burstIndex) longestPrefix(hashes [][]uint64) map[string]int {
	res := map[string]int{}
	for _, ph := range hashes {
		for _, h := range ph {
			if len(x[h]) == 0 {
				return res
			}
			for r := range x[h] {
				res[r]++
			}
		}
	}
	return res
}

// place places one unit: the primary replica with the prefix preference
// (minColocateBlocks > 0) under the fair share, then runs of at most k
// members to the least-loaded replica with room.
func (b *BurstPrefix) place(members []*burstEntry, replicas []*epp.Endpoint, maxShare int, idx burstIndex, load map[string]int) {
	hashes := members[0].hashes
	blocks := totalOf(hashes)
	matches := idx.longestPrefix(hashes)
	prefer := b.minColocate > 0
	perReplica := map[string]int{}
	for i := 0; i < len(members); {
		target := b.pick(replicas, perReplica, load, matches, maxShare, prefer)
		run := len(members) - i
		if b.k != burstUnlimited {
			run = min(run, max(1, b.k-perReplica[target]))
		}
		for j := range run {
			members[i+j].assigned = target
		}
		if b.byTokens {
			if perReplica[target] == 0 {
				// A unit's first touch of a replica costs the blocks it
				// does not hold yet.
				load[target] += blocks - matches[target]
			}
		} else {
			load[target] += run
		}
		perReplica[target] += run
		b.placed += run
		i += run
		prefer = false
	}
	for _, m := range members {
		if m.assigned != "" {
			idx.add(hashes, m.assigned)
		}
	}
}

// pick is the replica of a unit's next run.
func (b *BurstPrefix) pick(replicas []*epp.Endpoint, perReplica, load, matches map[string]int, maxShare int, prefer bool) string {
	less := func(x, y *epp.Endpoint) bool {
		if load[x.Name] != load[y.Name] {
			return load[x.Name] < load[y.Name]
		}
		if x.Metrics.RunningRequestsSize != y.Metrics.RunningRequestsSize {
			return x.Metrics.RunningRequestsSize < y.Metrics.RunningRequestsSize
		}
		return x.Name < y.Name
	}
	full := func(r *epp.Endpoint) bool { return b.k != burstUnlimited && perReplica[r.Name] >= b.k }
	if prefer {
		var best *epp.Endpoint
		for _, r := range replicas {
			m := matches[r.Name]
			if full(r) || load[r.Name] >= maxShare || m < b.minColocate {
				continue
			}
			if best == nil || m > matches[best.Name] || m == matches[best.Name] && less(r, best) {
				best = r
			}
		}
		if best != nil {
			return best.Name
		}
	}
	var best *epp.Endpoint
	for _, r := range replicas {
		if !full(r) && (best == nil || less(r, best)) {
			best = r
		}
	}
	if best == nil {
		for _, r := range replicas {
			if best == nil || less(r, best) {
				best = r
			}
		}
	}
	return best.Name
}

// Stats returns the batches sealed and members placed so far.
func (b *BurstPrefix) Stats() (sealed, placed int) { return b.sealed, b.placed }
