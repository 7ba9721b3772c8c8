package workload

import (
	"testing"
)

func TestAlibabaFixture(t *testing.T) {
	for _, mode := range []Mode{ModeOpenLoop, ModeClosedLoop} {
		reqs := readFile(t, "testdata/alibaba.jsonl", Options{Mode: mode})
		checkInvariants(t, reqs)
		// chat 3 continues chat 1, chat 5 continues 3; chat 4's parent 99 is
		// not in the trace: it names the session, the turn comes from the
		// trace (turn 3 -> 2).
		want := []struct {
			session string
			turn    int
			prev    int64
			arrival int64
			in      int
			think   int64
		}{
			{"1", 0, -1, 500e6, 40, 0},
			{"2", 0, -1, 1250e6, 16, 0},
			{"1", 1, 0, 3000e6, 70, 2500e6},
			{"99", 2, -1, 4000e6, 20, 0},
			{"1", 2, 2, 4000001000, 90, 1000001000},
		}
		if len(reqs) != len(want) {
			t.Fatalf("%d requests", len(reqs))
		}
		for i, w := range want {
			r := reqs[i]
			think := int64(0)
			if mode == ModeClosedLoop {
				think = w.think
			}
			if r.Session != w.session || r.Turn != w.turn || r.Prev != w.prev || r.Arrival != w.arrival ||
				len(r.PromptTokens) != w.in || r.HashBlockSize != 16 || r.ThinkTime != think || r.AfterPrevious != (think > 0) {
				t.Errorf("%v request %d = {%s %d %d %d %d think %d}, want %+v", mode, i, r.Session, r.Turn, r.Prev, r.Arrival, len(r.PromptTokens), r.ThinkTime, w)
			}
		}
		// Shared 16-token hash ids 1, 2 (32 tokens) between chats 1, 3, 5; 1, 2, 4, 5 (64) between 3 and 5.
		if !hasPrefix(reqs[2].PromptTokens, reqs[0].PromptTokens[:32]) || !hasPrefix(reqs[4].PromptTokens, reqs[2].PromptTokens[:64]) {
			t.Error("shared hash ids do not give shared tokens")
		}
	}
}

func TestAlibabaBadLines(t *testing.T) {
	tests := []struct{ line, want string }{
		{`{"parent_chat_id": -1, "timestamp": 1, "input_length": 16, "output_length": 1, "hash_ids": [1]}`,
			"ali.jsonl:1: chat_id: missing"},
		{`{"chat_id": 1, "parent_chat_id": -1, "timestamp": 1, "input_length": 33, "output_length": 1, "hash_ids": [1, 2]}`,
			"ali.jsonl:1: hash_ids: 2 ids for input_length 33 (block size 16 needs 3)"},
		{`{"chat_id": 1, "parent_chat_id": -1, "timestamp": "soon", "input_length": 16, "output_length": 1, "hash_ids": [1]}`,
			`ali.jsonl:1: timestamp: expected a number, got "soon"`},
	}
	for _, tt := range tests {
		err := firstError(t, "ali.jsonl", tt.line, Options{Format: FormatAlibaba, NoTokens: true})
		if err == nil || err.Error() != tt.want {
			t.Errorf("error %v\nwant  %s", err, tt.want)
		}
	}
}
