// Package memo memoizes pure computations on one object — a request that
// several simulations replay — so that what every simulation would derive
// from it alone (the EPP's body check, estimate tokens and prefix hashes;
// the engine's block-hash chain) is computed once and shared. It knows
// nothing of what it stores: each user keys its values with a comparable
// key of an unexported type of its own, which cannot collide with
// another package's.
package memo

import (
	"sync"
	"sync/atomic"
)

// A Memo holds the values computed for one object, by key. The zero Memo
// is empty; a nil *Memo memoizes nothing (Do calls f every time). It is
// safe for concurrent use. Values are shared: whoever gets one must not
// change it.
type Memo struct {
	mu    sync.Mutex
	cells []cell // few: a linear scan beats a map
}

type cell struct {
	key any
	r   *result
}

type result struct {
	once sync.Once
	v    any
	done atomic.Bool // v is set: Peek may read it
}

// Do returns the value memoized for key, computing it with f the first
// time; concurrent callers of one key wait for the one computing it. key
// must be comparable.
func (m *Memo) Do(key any, f func() any) any {
	if m == nil {
		return f()
	}
	m.mu.Lock()
	var r *result
	for i := range m.cells {
		if m.cells[i].key == key {
			r = m.cells[i].r
			break
		}
	}
	if r == nil {
		r = &result{}
		m.cells = append(m.cells, cell{key, r})
	}
	m.mu.Unlock()
	r.once.Do(func() {
		r.v = f()
		r.done.Store(true)
	})
	return r.v
}

// Has reports whether a value for key has been, or is being, computed.
func (m *Memo) Has(key any) bool {
	if m == nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.cells {
		if m.cells[i].key == key {
			return true
		}
	}
	return false
}

// Len is the number of values computed or being computed.
func (m *Memo) Len() int {
	if m == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.cells)
}

// Get is Do for values of type T.
func Get[T any](m *Memo, key any, f func() T) T {
	if m == nil {
		return f()
	}
	v, _ := m.Do(key, func() any { return f() }).(T) // a nil interface value is T's zero value
	return v
}

// Peek returns the value memoized for key if Do has finished computing
// it, without computing it or waiting for a computation under way; ok is
// false otherwise, or when the value is not a T.
func Peek[T any](m *Memo, key any) (v T, ok bool) {
	if m == nil {
		return v, false
	}
	var r *result
	m.mu.Lock()
	for i := range m.cells {
		if m.cells[i].key == key {
			r = m.cells[i].r
			break
		}
	}
	m.mu.Unlock()
	if r == nil || !r.done.Load() {
		return v, false
	}
	v, ok = r.v.(T)
	return v, ok
}
