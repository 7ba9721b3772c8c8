package precise

import (
	"fmt"
	"testing"

	"github.com/eppsim/eppsim/epp"
)

func benchIndexer(b *testing.B, pods, tokens int) (*Indexer, []uint32, []string) {
	h, _ := NewHasher(16, "", AlgoCBORFNV)
	ix, _ := NewIndex(0, pods) // room for every pod per key (the default keeps 10)
	x := NewIndexer(h, ix, map[string]float64{"gpu": 1, "cpu": 0.8}, 1)
	toks := make([]uint32, tokens)
	for i := range toks {
		toks[i] = uint32(i*7919) % 128000
	}
	addrs := make([]string, pods)
	for p := range addrs {
		addrs[p] = fmt.Sprintf("10.0.0.%d:8000", p)
		if p%2 == 0 {
			// Half the pods hold the first half of the prompt, 16 blocks per event.
			n := tokens / 2 / 16
			var parent uint64
			for blk := 0; blk < n; blk += 16 {
				m := min(16, n-blk)
				hashes := make([]uint64, m)
				for i := range hashes {
					hashes[i] = uint64(p)<<32 | uint64(blk+i+1)
				}
				x.HandleEvents(addrs[p], "m", []epp.KVEvent{{Kind: epp.BlockStored, BlockHashes: hashes, ParentBlockHash: parent, TokenIDs: toks[blk*16 : (blk+m)*16]}})
				parent = hashes[m-1]
			}
		}
	}
	return x, toks, addrs
}

// BenchmarkPreciseMatch: keys + match of a 12k-token request (750 keys at
// block size 16) against 64 pods, half holding the first 375 blocks.
func BenchmarkPreciseMatch64(b *testing.B) {
	x, toks, addrs := benchIndexer(b, 64, 12000)
	out := make([]Match, len(addrs))
	tr := &epp.TokenizedRequest{Prompts: [][]uint32{toks}}
	b.ReportAllocs()
	for b.Loop() {
		keys := x.RequestKeys("m", tr)
		x.Match(keys, addrs, out)
	}
	if out[0].Cached != 375 || out[1].Cached != 0 {
		b.Fatalf("cached %d %d", out[0].Cached, out[1].Cached)
	}
}

// BenchmarkBlockStoredEvent: one BlockStored of 16 engine blocks.
func BenchmarkBlockStoredEvent(b *testing.B) {
	h, _ := NewHasher(16, "", AlgoCBORFNV)
	ix, _ := NewIndex(0, 0)
	x := NewIndexer(h, ix, nil, 1)
	toks := make([]uint32, 256)
	hashes := make([]uint64, 16)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		for j := range hashes {
			hashes[j] = uint64(i*16 + j + 1)
		}
		toks[0] = uint32(i)
		x.HandleEvents("10.0.0.1:8000", "m", []epp.KVEvent{{Kind: epp.BlockStored, BlockHashes: hashes, TokenIDs: toks}})
		i++
	}
}
