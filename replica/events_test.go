package replica

import (
	"reflect"
	"testing"
)

// TestEventLogShared: the emission an engine other than vLLM's uses as is
// (replica/sglang: one BlockStored and one BlockRemoved per page). A
// disabled log queues nothing; an enabled one hands its queue to every
// subscriber as one batch in order, at the time given, then is empty.
func TestEventLogShared(t *testing.T) {
	var off EventLog
	var nilLog *EventLog
	off.Stored([]uint64{1}, 0, false, []uint32{1, 2}, 2, nil, nil, 0)
	off.Removed(1)
	nilLog.Cleared()
	if off.Enabled() || nilLog.Enabled() || len(off.take()) != 0 {
		t.Fatal("a disabled log queued events")
	}

	var l EventLog
	l.SetEnabled(true)
	a, b := &recorder{}, &recorder{}
	l.Subscribe(a)
	l.Subscribe(b)
	page := []uint32{7, 8, 9, 10}
	l.Stored([]uint64{11}, 0, false, page[:2], 2, nil, nil, 0)
	l.Stored([]uint64{12}, 11, true, page[2:], 2, nil, nil, 2)
	l.Removed(12)
	l.Cleared()
	want := []Event{
		{Kind: BlockStored, BlockHashes: []uint64{11}, TokenIDs: []uint32{7, 8}, BlockSize: 2},
		{Kind: BlockStored, BlockHashes: []uint64{12}, ParentHash: 11, HasParent: true, TokenIDs: []uint32{9, 10}, BlockSize: 2, PromptOffset: 2},
		{Kind: BlockRemoved, BlockHashes: []uint64{12}},
		{Kind: AllBlocksCleared},
	}
	l.Publish(5)
	for _, r := range []*recorder{a, b} {
		if !reflect.DeepEqual(r.events, want) {
			t.Errorf("batch %+v, want %+v", r.events, want)
		}
	}
	a.events = nil
	l.Publish(6)
	if a.events != nil {
		t.Errorf("an empty log published %+v", a.events)
	}
}
