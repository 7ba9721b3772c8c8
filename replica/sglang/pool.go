package sglang

import "fmt"

// tokenPool is the KV slot allocator (sglang-engine.md A.1) kept as a count.
// With page size 1 it stands for TokenToKVPoolAllocator (free list of slots
// 1..size, slot 0 reserved for padding and not counted); with page size P
// for the paged allocator (available = free pages × P, allocations in whole
// pages after filling the request's partly used last page). Which slot ids
// are handed out, and the free order (appended for slots, prepended for
// pages), decide nothing the simulator observes — a slot has no reference
// count and belongs to one request row or one tree node (A.1) — so the pool
// tracks only how many slots are free, and every allocation and free is
// O(1) whatever its size.
type tokenPool struct {
	size, page, free int
}

func newTokenPool(size, page int) tokenPool { return tokenPool{size: size, page: page, free: size} }

// available is available_size().
func (p *tokenPool) available() int { return p.free }

// alloc takes n slots (a multiple of the page size) or fails, changing
// nothing, as alloc returns None when fewer are free.
func (p *tokenPool) alloc(n int) bool {
	if n%p.page != 0 {
		panic(fmt.Sprintf("sglang: allocation of %d slots with page size %d", n, p.page))
	}
	if n > p.free {
		return false
	}
	p.free -= n
	return true
}

// release returns n slots.
func (p *tokenPool) release(n int) {
	p.free += n
	if p.free > p.size || n < 0 {
		panic(fmt.Sprintf("sglang: token pool over-freed: %d free of %d after releasing %d", p.free, p.size, n))
	}
}

// ceil rounds n up to whole pages (ceil_P).
func (p *tokenPool) ceil(n int) int { return (n + p.page - 1) / p.page * p.page }

// floor rounds n down to whole pages (floor_P).
func (p *tokenPool) floor(n int) int { return n / p.page * p.page }
