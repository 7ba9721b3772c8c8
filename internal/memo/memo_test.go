package memo

import (
	"sync"
	"sync/atomic"
	"testing"
)

type keyA struct{ n int }
type keyB struct{ n int }

// TestMemo: a value is computed once per key, concurrent callers included;
// keys of different types never collide; a nil Memo computes every time.
func TestMemo(t *testing.T) {
	var m Memo
	var calls atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for k := range 5 {
				if v := Get(&m, keyA{k}, func() int { calls.Add(1); return k * 10 }); v != k*10 {
					t.Errorf("keyA{%d}: %d", k, v)
				}
				if v := Get(&m, keyB{k}, func() string { calls.Add(1); return "b" }); v != "b" {
					t.Errorf("keyB{%d}: %q", k, v)
				}
			}
		})
	}
	wg.Wait()
	if calls.Load() != 10 {
		t.Errorf("%d computations, want 10", calls.Load())
	}
	if !m.Has(keyA{4}) || m.Has(keyA{5}) || m.Len() != 10 {
		t.Errorf("Has, Len %d", m.Len())
	}
	var nilMemo *Memo
	n := 0
	for range 3 {
		Get(nilMemo, keyA{1}, func() int { n++; return n })
	}
	if n != 3 || nilMemo.Has(keyA{1}) {
		t.Errorf("a nil memo computed %d times, want 3", n)
	}
}

// TestPeek: Peek sees a value only once Do has finished computing it,
// never computes, never waits for a computation under way, and checks the
// value's type.
func TestPeek(t *testing.T) {
	var m Memo
	if _, ok := Peek[int](&m, keyA{1}); ok {
		t.Error("Peek of a key never computed: ok")
	}
	started, release := make(chan struct{}), make(chan struct{})
	done := make(chan struct{})
	go func() {
		Get(&m, keyA{1}, func() int { close(started); <-release; return 7 })
		close(done)
	}()
	<-started
	if _, ok := Peek[int](&m, keyA{1}); ok {
		t.Error("Peek during the computation: ok")
	}
	close(release)
	<-done
	if v, ok := Peek[int](&m, keyA{1}); !ok || v != 7 {
		t.Errorf("Peek after the computation: %d, %v; want 7, true", v, ok)
	}
	if _, ok := Peek[string](&m, keyA{1}); ok {
		t.Error("Peek as the wrong type: ok")
	}
	if _, ok := Peek[int](&m, keyB{1}); ok {
		t.Error("Peek of another key type: ok")
	}
	if _, ok := Peek[int](nil, keyA{1}); ok {
		t.Error("Peek on a nil Memo: ok")
	}
}
