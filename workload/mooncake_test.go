package workload

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestMooncakeFixture(t *testing.T) {
	reqs := readFile(t, "testdata/mooncake.jsonl", Options{})
	// Sessions by hand (traces.md C.7.4): line 3 continues line 1 (its
	// block list minus block 0, [1], is a prefix of [1 4 5]); line 6 (id 5)
	// continues line 2 (id 1) through line 2's whole list [3]; line 5's list
	// [1 4 6 7] extends line 3's full-block list [1 4].
	want := []struct {
		session  string
		turn     int
		prev     int64
		arrival  int64
		in, out  int
		lineNo   int
		nBlocks  int
		lastPart int
	}{
		{"m0", 0, -1, 0, 1100, 50, 1, 3, 76},
		{"m1", 0, -1, 500e6, 700, 20, 2, 2, 188},
		{"m0", 1, 0, 2000e6, 1700, 30, 3, 4, 164},
		{"m3", 0, -1, 2500e6, 512, 10, 5, 1, 512},
		{"m0", 2, 2, 4000e6, 2100, 40, 6, 5, 52},
		{"m1", 1, 1, 4000e6, 1024, 5, 7, 2, 512},
	}
	if len(reqs) != len(want) {
		t.Fatalf("%d requests, want %d", len(reqs), len(want))
	}
	checkInvariants(t, reqs)
	for i, w := range want {
		r := reqs[i]
		if r.Session != w.session || r.Turn != w.turn || r.Prev != w.prev || r.Arrival != w.arrival ||
			r.PromptLen != w.in || len(r.PromptTokens) != w.in || r.OutputTokens != w.out || r.Line != w.lineNo {
			t.Errorf("request %d = {%s %d %d %d %d/%d %d line %d}, want %+v", i, r.Session, r.Turn, r.Prev,
				r.Arrival, r.PromptLen, len(r.PromptTokens), r.OutputTokens, r.Line, w)
		}
		if r.AfterPrevious || r.ThinkTime != 0 {
			t.Errorf("request %d: open-loop replay set AfterPrevious", i)
		}
		if r.Endpoint != EndpointCompletions || r.Model != DefaultModel || r.HashBlockSize != 512 || len(r.HashIDs) != w.nBlocks {
			t.Errorf("request %d: endpoint %s model %s block size %d ids %v", i, r.Endpoint, r.Model, r.HashBlockSize, r.HashIDs)
		}
		if !bytes.HasPrefix(r.Body, []byte(`{"model":"meta-llama/Llama-3.1-8B-Instruct","prompt":" `)) {
			t.Errorf("request %d: body starts %q", i, r.Body[:60])
		}
	}
	// Equal hash-id prefixes give equal tokens: requests 0, 2 and 4 share
	// blocks 0 and 1 (1024 tokens); 2 and 4 also block 4 (1536 tokens).
	if !hasPrefix(reqs[2].PromptTokens, reqs[0].PromptTokens[:1024]) || !hasPrefix(reqs[4].PromptTokens, reqs[2].PromptTokens[:1536]) {
		t.Error("shared hash-id prefixes do not give shared token prefixes")
	}
	if reqs[2].PromptTokens[1024] == reqs[0].PromptTokens[1024] && reqs[2].PromptTokens[1025] == reqs[0].PromptTokens[1025] {
		t.Error("different ids (2 vs 4) start with the same tokens")
	}
}

func TestMooncakeClosedLoop(t *testing.T) {
	reqs := readFile(t, "testdata/mooncake.jsonl", Options{Mode: ModeClosedLoop, NoTokens: true})
	checkInvariants(t, reqs)
	// Think time is the gap to the previous turn's trace timestamp.
	want := map[int64]int64{2: 2000e6, 4: 2000e6, 5: 3500e6}
	for _, r := range reqs {
		if think, ok := want[r.ID]; ok {
			if !r.AfterPrevious || r.ThinkTime != think {
				t.Errorf("request %d: AfterPrevious %v think %d, want %d", r.ID, r.AfterPrevious, r.ThinkTime, think)
			}
		} else if r.AfterPrevious {
			t.Errorf("request %d: AfterPrevious on a first turn", r.ID)
		}
		if r.Body != nil || r.PromptTokens != nil {
			t.Errorf("request %d: NoTokens materialized tokens", r.ID)
		}
	}
}

func TestMooncakeBadLines(t *testing.T) {
	good := `{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}` + "\n"
	tests := []struct {
		name, line, want string
	}{
		{"ids mismatch", `{"timestamp": 0, "input_length": 1000, "output_length": 5, "hash_ids": [0]}`,
			"bad.jsonl:2: hash_ids: 1 ids for input_length 1000 (block size 512 needs 2)"},
		{"missing input", `{"timestamp": 0, "output_length": 5, "hash_ids": [0]}`,
			"bad.jsonl:2: input_length: missing"},
		{"missing hash_ids", `{"timestamp": 0, "input_length": 5, "output_length": 5}`,
			"bad.jsonl:2: hash_ids: missing"},
		{"wrong type", `{"timestamp": 0, "input_length": "many", "output_length": 5, "hash_ids": [0]}`,
			"bad.jsonl:2: input_length: expected int64, got JSON string"},
		{"zero input", `{"timestamp": 0, "input_length": 0, "output_length": 5, "hash_ids": []}`,
			"bad.jsonl:2: input_length: must be > 0, got 0"},
		{"negative id", `{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, -3]}`,
			"bad.jsonl:2: hash_ids[1]: id -3 out of range [0, 2^47)"},
		{"not json", `hello`,
			"bad.jsonl:2: invalid JSON: invalid character 'h' looking for beginning of value"},
		{"negative timestamp", `{"timestamp": -1, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}`,
			"bad.jsonl:2: timestamp: negative value -1"},
		{"huge output", `{"timestamp": 0, "input_length": 600, "output_length": 99999999, "hash_ids": [0, 1]}`,
			"bad.jsonl:2: output_length: 99999999 out of range [0, 2097152]"},
		{"unsorted", `{"timestamp": -0, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}` + "\n" +
			`{"timestamp": 7, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}` + "\n" +
			`{"timestamp": 6, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}`,
			"bad.jsonl:4: timestamp: 6 is before the previous line's (the trace must be sorted by time)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := firstError(t, "bad.jsonl", good+tt.line+"\n", Options{Format: FormatMooncake, NoTokens: true})
			if err == nil || err.Error() != tt.want {
				t.Fatalf("error %v\nwant        %s", err, tt.want)
			}
			var ie *InputError
			if !errors.As(err, &ie) || ie.File != "bad.jsonl" {
				t.Fatalf("not an *InputError: %T", err)
			}
		})
	}
}

func TestSkipInvalidCounts(t *testing.T) {
	data := strings.Join([]string{
		`{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}`,
		`{"timestamp": 1, "input_length": 600}`,
		`{"timestamp": 2, "input_length": 600, "output_length": 5, "hash_ids": [0, 1, 2]}`,
		`garbage`,
		`{"timestamp": 3, "input_length": 700, "output_length": 5, "hash_ids": [0, 1]}`,
	}, "\n")
	s, err := NewSource(strings.NewReader(data), "skip.jsonl", opts(Options{SkipInvalid: true, NoTokens: true}))
	if err != nil {
		t.Fatal(err)
	}
	reqs, err := Drain(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 2 || s.Skipped() != 3 || reqs[1].ID != 1 || reqs[1].Line != 5 {
		t.Fatalf("%d requests, %d skipped, second %+v", len(reqs), s.Skipped(), reqs[len(reqs)-1])
	}
	want := []string{
		"skip.jsonl:2: output_length: missing",
		"skip.jsonl:3: hash_ids: 3 ids for input_length 600 (block size 512 needs 2)",
		"skip.jsonl:4: invalid JSON: invalid character 'g' looking for beginning of value",
	}
	for i, e := range s.SkippedErrors() {
		if e.Error() != want[i] {
			t.Errorf("skipped error %d = %q, want %q", i, e, want[i])
		}
	}
	// Line 5 continues line 1 (block list [0 1] has prefix [1]).
	if reqs[1].Prev != 0 || reqs[1].Session != "m0" {
		t.Errorf("line 5: prev %d session %s", reqs[1].Prev, reqs[1].Session)
	}
}

func TestMooncakeBlockSizeOption(t *testing.T) {
	data := `{"timestamp": 0, "input_length": 40, "output_length": 5, "hash_ids": [3, 4, 5]}`
	reqs := readAll(t, "bs.jsonl", data, Options{Format: FormatMooncake, BlockSize: 16})
	if len(reqs[0].PromptTokens) != 40 || reqs[0].HashBlockSize != 16 {
		t.Fatalf("got %d tokens, block size %d", len(reqs[0].PromptTokens), reqs[0].HashBlockSize)
	}
}
