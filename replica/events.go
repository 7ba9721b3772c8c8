package replica

// EventKind tells the KV event variants apart (vllm-engine.md A.7).
type EventKind uint8

// KV event kinds, as vLLM's kv_events.py names them.
const (
	BlockStored EventKind = iota + 1
	BlockRemoved
	AllBlocksCleared
)

func (k EventKind) String() string {
	switch k {
	case BlockStored:
		return "BlockStored"
	case BlockRemoved:
		return "BlockRemoved"
	case AllBlocksCleared:
		return "AllBlocksCleared"
	}
	return "?"
}

// Event is one KV-cache event. Hashes are the engine's 64-bit chained block
// hashes (vLLM emits the low 64 bits of its digest, A.1). TokenIDs alias the
// request's token storage and must not be modified.
type Event struct {
	Kind        EventKind
	BlockHashes []uint64
	// ParentHash is the hash of the block before the first stored block;
	// HasParent is false for a request's first block.
	ParentHash uint64
	HasParent  bool
	TokenIDs   []uint32
	BlockSize  int
	// ExtraKeys are the stored blocks' extra keys, aligned with
	// BlockHashes; only a request's first block has one, its cache salt
	// (A.1). Nil when no block has extra keys.
	ExtraKeys [][]string
	// Medium is the tier: "" for the GPU prefix cache (vLLM sends "GPU";
	// the EPP treats a missing medium as GPU) and MediumCPU for the CPU
	// tier (pd-offload.md B.8).
	Medium string
	// Origin is not part of vLLM's event: on a BlockStored whose TokenIDs
	// are a slice of a request's prompt, it is that request, and the
	// tokens are Origin.Prompt[PromptOffset:PromptOffset+len(TokenIDs)],
	// the same array. Nil otherwise (blocks holding output tokens, the CPU
	// tier). A subscriber may use it to find what it computed from the
	// same tokens before; it must not change the request.
	Origin       *Request
	PromptOffset int
}

// MediumCPU is the medium of the CPU tier's events (pd-offload.md B.8).
const MediumCPU = "CPU"

// Subscriber receives the events of each engine step, in the order they
// occurred, as one batch (vLLM publishes one KVEventBatch per step). now is
// the simulated time the step was scheduled. The batch slice is the
// engine's and valid only during the call; the slices inside the events
// (hashes, tokens, extra keys) stay valid and unchanged.
type Subscriber interface {
	KVEvents(now int64, batch []Event)
}

// EventLog is an engine's KV event emission, shared by the engines
// (vLLM's here, SGLang's in replica/sglang): it queues the events of a
// step (Stored, Removed, Cleared) and hands them to the subscribers as one
// batch (Publish). A nil or disabled log drops them, so a replica with no
// subscriber pays nothing. The zero value is disabled (SetEnabled).
type EventLog struct {
	enabled bool
	subs    []Subscriber
	buf     []Event
	// oneHashes backs the one-hash BlockHashes of BlockRemoved events
	// (vLLM and SGLang report each evicted block in an event of its own)
	// and of SGLang's BlockStored: slices of one array rather than an
	// allocation per block. Subscribers may keep those slices, so the
	// array is only ever appended to; when full, a new one takes over.
	oneHashes []uint64
}

// oneHashChunk is the size of the arrays behind oneHashes.
const oneHashChunk = 1024

// SetEnabled turns the log on (the engine's KV events are wanted) or off.
func (l *EventLog) SetEnabled(on bool) { l.enabled = on }

// Enabled reports whether the log queues events.
func (l *EventLog) Enabled() bool { return l != nil && l.enabled }

// Subscribe registers a subscriber of the published batches.
func (l *EventLog) Subscribe(s Subscriber) { l.subs = append(l.subs, s) }

// Publish delivers the queued events to every subscriber as one batch at
// now, and empties the log; nothing when none is queued.
func (l *EventLog) Publish(now int64) {
	if evs := l.take(); len(evs) > 0 {
		for _, s := range l.subs {
			s.KVEvents(now, evs)
		}
	}
}

// Stored queues a BlockStored of hashes (which become the event's) after
// parent; origin and offset are Event.Origin and Event.PromptOffset.
func (l *EventLog) Stored(hashes []uint64, parent uint64, hasParent bool, tokens []uint32, bs int, extra [][]string, origin *Request, offset int) {
	if l == nil || !l.enabled {
		return
	}
	l.buf = append(l.buf, Event{Kind: BlockStored, BlockHashes: hashes, ParentHash: parent, HasParent: hasParent, TokenIDs: tokens, BlockSize: bs, ExtraKeys: extra,
		Origin: origin, PromptOffset: offset})
}

// StoredOne queues a BlockStored of the one block hash h (SGLang reports
// every page in an event of its own, sglang-engine.md A.13), its tokens'
// count the block size.
func (l *EventLog) StoredOne(h, parent uint64, hasParent bool, tokens []uint32, origin *Request, offset int) {
	if l == nil || !l.enabled {
		return
	}
	l.buf = append(l.buf, Event{Kind: BlockStored, BlockHashes: l.one(h), ParentHash: parent, HasParent: hasParent, TokenIDs: tokens,
		BlockSize: len(tokens), Origin: origin, PromptOffset: offset})
}

// Removed queues a BlockRemoved of the one block hash h (an event per
// block, as vLLM and SGLang report evictions).
func (l *EventLog) Removed(h uint64) {
	if l == nil || !l.enabled {
		return
	}
	l.buf = append(l.buf, Event{Kind: BlockRemoved, BlockHashes: l.one(h)})
}

// one returns a one-element slice holding h, cut from an append-only
// array (subscribers may keep it).
func (l *EventLog) one(h uint64) []uint64 {
	if len(l.oneHashes) == cap(l.oneHashes) {
		l.oneHashes = make([]uint64, 0, oneHashChunk)
	}
	l.oneHashes = append(l.oneHashes, h)
	n := len(l.oneHashes)
	return l.oneHashes[n-1 : n : n]
}

// cpuStored queues the placeholder BlockStored of one CPU chunk (B.8):
// the chunk's last block hash only, no parent, no tokens, block size 0.
func (l *EventLog) cpuStored(h uint64) {
	if l == nil || !l.enabled {
		return
	}
	l.buf = append(l.buf, Event{Kind: BlockStored, BlockHashes: []uint64{h}, Medium: MediumCPU})
}

// cpuRemoved queues one BlockRemoved for the CPU chunks one store
// preparation evicted (B.5, B.8). hashes becomes the event's.
func (l *EventLog) cpuRemoved(hashes []uint64) {
	if l == nil || !l.enabled || len(hashes) == 0 {
		return
	}
	l.buf = append(l.buf, Event{Kind: BlockRemoved, BlockHashes: hashes, Medium: MediumCPU})
}

// Cleared queues an AllBlocksCleared.
func (l *EventLog) Cleared() {
	if l == nil || !l.enabled {
		return
	}
	l.buf = append(l.buf, Event{Kind: AllBlocksCleared})
}

// take returns the queued events and empties the log. The returned slice is
// the log's buffer, valid until the next event is queued. (The buffer keeps
// the slices of its last events reachable until they are overwritten: at
// most one step's worth.)
func (l *EventLog) take() []Event {
	if l == nil || len(l.buf) == 0 {
		return nil
	}
	out := l.buf
	l.buf = out[:0]
	return out[:len(out):len(out)]
}
