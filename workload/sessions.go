package workload

// turnRef is what session inference remembers about an earlier request.
type turnRef struct {
	id      int64
	session string
	turn    int
	arrival int64 // unscaled trace time, ns
}

type queued[K comparable] struct {
	key     K
	id      int64
	arrival int64
}

// sessionTable maps keys (a prefix hash, a chat id, a session id) to the
// latest request registered under them. Memory is bounded: entries older
// than window (by trace time) are forgotten, and at most max are kept
// (oldest first out), so it grows with the rate times the window, never with
// the trace length.
type sessionTable[K comparable] struct {
	m      map[K]turnRef
	q      []queued[K]
	head   int
	window int64
	max    int
}

func newSessionTable[K comparable](window int64, max int) *sessionTable[K] {
	return &sessionTable[K]{m: make(map[K]turnRef), window: window, max: max}
}

// get returns the entry for k if it is within the window of now.
func (t *sessionTable[K]) get(k K, now int64) (turnRef, bool) {
	v, ok := t.m[k]
	if !ok || now-v.arrival > t.window {
		return turnRef{}, false
	}
	return v, true
}

// put registers v under k (replacing any older entry) and evicts what fell
// out of the window or over the cap.
func (t *sessionTable[K]) put(k K, v turnRef) {
	t.m[k] = v
	t.q = append(t.q, queued[K]{key: k, id: v.id, arrival: v.arrival})
	for t.head < len(t.q) {
		e := t.q[t.head]
		if v.arrival-e.arrival <= t.window && len(t.m) <= t.max && len(t.q)-t.head <= 2*t.max {
			break
		}
		if cur, ok := t.m[e.key]; ok && cur.id == e.id {
			delete(t.m, e.key)
		}
		var zero queued[K]
		t.q[t.head] = zero
		t.head++
	}
	if t.head > 1024 && t.head*2 > len(t.q) {
		n := copy(t.q, t.q[t.head:])
		clear(t.q[n:])
		t.q = t.q[:n]
		t.head = 0
	}
}

func (t *sessionTable[K]) len() int { return len(t.m) }
