package scenario

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/eppsim/eppsim/workload"
)

// sharedConfigs is llm-d's shipped configurations (DESIGN.md, "Reference
// documents").
const sharedConfigs = "../testdata/shared/epp-configs"

// hashIDTrace describes a synthesized hash-id trace: conversations whose
// turns extend their previous prompt, over a few system prompts shared by
// every conversation, with repeated conversations starting afresh.
type hashIDTrace struct {
	Format        string // "mooncake" (512-token blocks) or "alibaba" (16)
	Requests      int
	Sessions      int     // conversations open at once
	RatePerS      float64 // requests per second
	BlockSize     int
	MaxPrompt     int // tokens
	SystemPrompts int
	Seed          uint64
}

// writeHashIDTrace writes the trace to path.
func writeHashIDTrace(t testing.TB, path string, h hashIDTrace) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	if err := h.write(w); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func (h hashIDTrace) write(w io.Writer) error {
	rng := rand.New(rand.NewPCG(h.Seed, 0x68617368))
	bs := h.BlockSize
	type conv struct {
		id     int
		ids    []int64
		tokens int
		turn   int
	}
	next := int64(h.SystemPrompts * 8)
	newConv := func(id int) *conv {
		sys := rng.IntN(h.SystemPrompts)
		c := &conv{id: id}
		for k := range 1 + sys%4 {
			c.ids = append(c.ids, int64(sys*8+k))
		}
		c.tokens = len(c.ids)*bs - rng.IntN(bs/2+1)
		return c
	}
	convs := make([]*conv, h.Sessions)
	for i := range convs {
		convs[i] = newConv(i)
	}
	ts := 0.0
	for n := range h.Requests {
		c := convs[rng.IntN(len(convs))]
		// The turn appends the previous answer and a new question.
		grow := 1 + rng.IntN(3*bs)
		if c.tokens+grow > h.MaxPrompt {
			c = newConv(c.id)
			convs[c.id] = c
		}
		total := c.tokens + grow
		full := c.tokens / bs // blocks the previous prompt filled
		c.ids = c.ids[:full]
		for len(c.ids)*bs < total {
			c.ids = append(c.ids, next)
			next++
		}
		c.tokens = total
		c.turn++
		ts += rng.ExpFloat64() / h.RatePerS * 1000
		ids := make([]string, len(c.ids))
		for i, id := range c.ids {
			ids[i] = fmt.Sprint(id)
		}
		out := 1 + rng.IntN(400)
		var err error
		switch h.Format {
		case "alibaba":
			chat := fmt.Sprintf("c%d-%d", c.id, n)
			_, err = fmt.Fprintf(w, `{"chat_id": %q, "timestamp": %.3f, "input_length": %d, "output_length": %d, "turn": %d, "hash_ids": [%s]}`+"\n",
				chat, ts/1000, total, out, c.turn, strings.Join(ids, ", "))
		default:
			_, err = fmt.Fprintf(w, `{"timestamp": %d, "input_length": %d, "output_length": %d, "hash_ids": [%s]}`+"\n",
				int64(ts), total, out, strings.Join(ids, ", "))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// requestSum is a checksum of everything a simulation may read of a
// request.
func requestSum(r *workload.Request) uint64 {
	h := fnv.New64a()
	put := func(vs ...int64) {
		for _, v := range vs {
			_ = binary.Write(h, binary.LittleEndian, v)
		}
	}
	b := func(v bool) int64 {
		if v {
			return 1
		}
		return 0
	}
	put(r.ID, int64(r.Turn), r.Prev, r.Arrival, b(r.AfterPrevious), r.ThinkTime, int64(r.PromptLen), int64(r.OutputTokens),
		int64(r.HashBlockSize), int64(r.Stage), int64(r.Line), int64(len(r.PromptTokens)), int64(len(r.OutputTokenIDs)), int64(len(r.HashIDs)))
	for _, s := range []string{r.Session, r.Model, r.Endpoint, r.OutputText, r.CacheSalt, string(r.Body)} {
		put(int64(len(s)))
		_, _ = io.WriteString(h, s)
	}
	for _, ts := range [][]uint32{r.PromptTokens, r.OutputTokenIDs} {
		_ = binary.Write(h, binary.LittleEndian, ts)
	}
	_ = binary.Write(h, binary.LittleEndian, r.HashIDs)
	return h.Sum64()
}

// TestSharedRequestsUnchanged runs every configuration that applies (the
// baselines, the default, llm-d's shipped configs when ../shared is there,
// the regression gate's precise config) at once on the requests of one
// feed, and checks that no run changes any request: the checksums of all
// requests are the same after the runs as before, and under the race
// detector (make test) any write by one run to what another reads fails
// the test.
func TestSharedRequestsUnchanged(t *testing.T) {
	dir := t.TempDir()
	mooncake := filepath.Join(dir, "mooncake.jsonl")
	writeHashIDTrace(t, mooncake, hashIDTrace{Format: "mooncake", Requests: 120, Sessions: 12, RatePerS: 4,
		BlockSize: 512, MaxPrompt: 9000, SystemPrompts: 3, Seed: 1})
	alibaba := filepath.Join(dir, "alibaba.jsonl")
	writeHashIDTrace(t, alibaba, hashIDTrace{Format: "alibaba", Requests: 120, Sessions: 12, RatePerS: 4,
		BlockSize: 16, MaxPrompt: 3000, SystemPrompts: 3, Seed: 2})
	configs := []string{"default", "round-robin", "random", "least-queue", "oracle", "../testdata/regress/precise-prefix-cache.yaml"}
	configs = append(configs, loadableShipped()...)
	for _, tr := range []struct {
		name  string
		trace string
		opts  workload.Options
	}{
		{"builtin-chat", workload.DefaultWorkload, workload.Options{Seed: 3}},
		{"mooncake", mooncake, workload.Options{Seed: 3}},
		{"alibaba", alibaba, workload.Options{Seed: 3}},
		{"openai", "../workload/testdata/openai.jsonl", workload.Options{Seed: 3}},
	} {
		t.Run(tr.name, func(t *testing.T) {
			spec := testSpec(t, 150)
			spec.Trace, spec.Workload = tr.trace, tr.opts
			feed := NewFeed(SpecOpener(spec), FeedOptions{RetainBytes: 1 << 40})
			defer feed.Close()
			all, err := feed.Join(nil)
			if err != nil {
				t.Fatal(err)
			}
			var reqs []*workload.Request
			var sums []uint64
			for {
				r, err := all.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				reqs = append(reqs, r)
				sums = append(sums, requestSum(r))
			}
			ran := make([]int, len(configs))
			var wg sync.WaitGroup
			for i, c := range configs {
				rd, err := feed.Join(nil)
				if err != nil {
					t.Fatal(err)
				}
				wg.Go(func() {
					s, err := RunReader(t.Context(), spec, ForSource(c), Hooks{}, rd)
					switch {
					case err != nil:
						t.Errorf("%s: %v", c, err)
					default:
						ran[i] = s.Requests.Total
					}
				})
			}
			wg.Wait()
			for i, r := range reqs {
				if requestSum(r) != sums[i] {
					t.Errorf("request %d (line %d) changed during the runs", r.ID, r.Line)
				}
			}
			for i, n := range ran {
				if want := min(len(reqs), 150); n != want && !t.Failed() {
					t.Errorf("%s: %d requests, want %d", configs[i], n, want)
				}
			}
		})
	}
}
