package workload

import (
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
)

// testTokenizer is shared by the tests (a Tokenizer is safe for concurrent use).
var testTokenizer = sync.OnceValue(func() *Tokenizer {
	t, err := NewTokenizer()
	if err != nil {
		panic(err)
	}
	return t
})

func opts(o Options) Options {
	o.Tokenizer = testTokenizer()
	return o
}

func readAll(t testing.TB, name, data string, o Options) []*Request {
	t.Helper()
	s, err := NewSource(strings.NewReader(data), name, opts(o))
	if err != nil {
		t.Fatalf("NewSource: %v", err)
	}
	reqs, err := Drain(s)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return reqs
}

func readFile(t testing.TB, path string, o Options) []*Request {
	t.Helper()
	s, err := Open(path, opts(o))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	reqs, err := Drain(s)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return reqs
}

// firstError reads until the first error and returns it (nil at EOF).
func firstError(t testing.TB, name, data string, o Options) error {
	t.Helper()
	s, err := NewSource(strings.NewReader(data), name, opts(o))
	if err != nil {
		return err
	}
	for {
		_, err := s.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func hasPrefix(a, prefix []uint32) bool {
	if len(prefix) > len(a) {
		return false
	}
	for i := range prefix {
		if a[i] != prefix[i] {
			return false
		}
	}
	return true
}

// checkInvariants asserts the ordering contract of Request.
func checkInvariants(t testing.TB, reqs []*Request) {
	t.Helper()
	byID := map[int64]*Request{}
	var last int64
	for i, r := range reqs {
		if r.ID != int64(i) {
			t.Fatalf("request %d has ID %d", i, r.ID)
		}
		if r.Arrival < last {
			t.Fatalf("request %d: arrival %d before %d", r.ID, r.Arrival, last)
		}
		last = r.Arrival
		if r.PromptTokens != nil && len(r.PromptTokens) != r.PromptLen {
			t.Fatalf("request %d: PromptLen %d, %d tokens", r.ID, r.PromptLen, len(r.PromptTokens))
		}
		if r.Prev >= 0 {
			p, ok := byID[r.Prev]
			if !ok {
				t.Fatalf("request %d: Prev %d not seen before", r.ID, r.Prev)
			}
			if r.AfterPrevious && r.Arrival > p.Arrival+r.ThinkTime {
				t.Fatalf("request %d: arrival %d > prev %d + think %d", r.ID, r.Arrival, p.Arrival, r.ThinkTime)
			}
		} else if r.AfterPrevious {
			t.Fatalf("request %d: AfterPrevious without Prev", r.ID)
		}
		byID[r.ID] = r
	}
}
