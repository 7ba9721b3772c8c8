package producer

import (
	"encoding/json"
	"fmt"

	"github.com/eppsim/eppsim/epp"
)

// BurstPrefixParams are the burst-prefix-cache-producer parameters (spec
// §6.5), accepted so that configurations load.
type BurstPrefixParams struct {
	WindowDurationMs       int `json:"windowDurationMs"`
	MaxPerReplica          int `json:"maxPerReplica"`
	BlockSizeTokens        int `json:"blockSizeTokens"`
	MaxPrefixTokensToMatch int `json:"maxPrefixTokensToMatch"`
	MinColocateBlocks      int `json:"minColocateBlocks"`
	MaxBatchSize           int `json:"maxBatchSize"`
}

// BurstPrefix stands in for the alpha burst-prefix-cache-producer, which
// eppsim does not simulate: it produces nothing, so a prefix-cache-scorer
// reading it scores 0 everywhere.
type BurstPrefix struct {
	epp.TypedName
	key epp.DataKey
}

func burstFactory(name string, params json.RawMessage, _ *epp.Handle) (epp.Plugin, error) {
	p := BurstPrefixParams{WindowDurationMs: 100, MaxPerReplica: -1, BlockSizeTokens: 64, MaxBatchSize: 1000}
	if err := epp.DecodeParams(BurstPrefixType, name, params, &p); err != nil {
		return nil, err
	}
	if p.WindowDurationMs <= 0 || p.WindowDurationMs > 10000 {
		return nil, fmt.Errorf("plugin %q (type %s): windowDurationMs must be in (0, 10000], got %d", name, BurstPrefixType, p.WindowDurationMs)
	}
	return &BurstPrefix{
		TypedName: epp.TypedName{PluginType: BurstPrefixType, PluginName: name},
		key:       epp.DataKey{Type: epp.PrefixCacheMatchInfoType, Producer: name},
	}, nil
}

// NotSimulatedReason implements epp.NotSimulated.
func (b *BurstPrefix) NotSimulatedReason() string {
	return "burst-prefix-cache-producer (alpha) batches requests in a wall-clock window before routing; " +
		"eppsim does not model the window, so it produces no prefix match info (prefix-cache-scorer reading it scores 0)"
}

// Produces is PrefixCacheMatchInfo/<name>.
func (b *BurstPrefix) Produces() []epp.DataKey { return []epp.DataKey{b.key} }

// Consumes is TokenizedPrompt/token-producer, required.
func (b *BurstPrefix) Consumes() []epp.Dependency {
	return []epp.Dependency{{Key: TokenizedPromptKey, Required: true}}
}

// Produce writes nothing.
func (b *BurstPrefix) Produce(*epp.Cycle, *epp.Request, []*epp.Endpoint) error { return nil }
