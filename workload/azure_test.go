package workload

import (
	"testing"
)

func TestAzureFixture(t *testing.T) {
	reqs := readFile(t, "testdata/azure.csv", Options{SystemPromptTokens: 100})
	checkInvariants(t, reqs)
	want := []struct {
		arrival int64
		in, out int
		line    int
	}{
		{0, 374, 44, 2},
		{100e6, 396, 109, 3},
		{100e6, 879, 1, 4},
		{2520040000, 1200, 1, 5}, // 06.5 - 03.97996; GeneratedTokens 0 is read as 1
	}
	if len(reqs) != len(want) {
		t.Fatalf("%d requests", len(reqs))
	}
	for i, w := range want {
		r := reqs[i]
		if r.Arrival != w.arrival || len(r.PromptTokens) != w.in || r.OutputTokens != w.out || r.Line != w.line ||
			r.Prev != -1 || r.Session != "" || r.Endpoint != EndpointCompletions {
			t.Errorf("request %d = {%d %d %d line %d}, want %+v", i, r.Arrival, len(r.PromptTokens), r.OutputTokens, r.Line, w)
		}
	}
	// The 100-token system prompt is shared; the rest is unique.
	for i := 1; i < len(reqs); i++ {
		a, b := reqs[0].PromptTokens, reqs[i].PromptTokens
		if !hasPrefix(b, a[:100]) {
			t.Errorf("request %d does not share the system prompt", i)
		}
		if a[100] == b[100] && a[101] == b[101] && a[102] == b[102] {
			t.Errorf("request %d shares content beyond the system prompt", i)
		}
	}
	// Without a system prompt nothing is shared.
	plain := readFile(t, "testdata/azure.csv", Options{})
	if plain[0].PromptTokens[0] == plain[1].PromptTokens[0] && plain[0].PromptTokens[1] == plain[1].PromptTokens[1] {
		t.Error("requests share a prefix without a system prompt")
	}
}

func TestAzureBad(t *testing.T) {
	tests := []struct{ data, want string }{
		{"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.97,10,1\n2023-11-16 18:17:04,abc,5\n",
			`az.csv:3: ContextTokens: want a positive integer, got "abc"`},
		{"TIMESTAMP,ContextTokens\n", "az.csv:1: GeneratedTokens: column missing from the header"},
		{"TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,10,1\n", `az.csv:2: TIMESTAMP: "yesterday" is neither a date-time nor seconds`},
		{"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:04,10,1\n2023-11-16 18:17:03,10,1\n",
			"az.csv:3: TIMESTAMP: 2023-11-16 18:17:03 is before the previous row's (the trace must be sorted by time)"},
		{"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:04,10\n", "az.csv:2: 2 fields, the header has 3"},
		{"TIMESTAMP,ContextTokens,GeneratedTokens\n\"2023,10,1\n", "az.csv:2: bad CSV: extraneous or missing \" in quoted-field"},
	}
	for _, tt := range tests {
		err := firstError(t, "az.csv", tt.data, Options{Format: FormatAzure})
		if err == nil || err.Error() != tt.want {
			t.Errorf("error %v\nwant  %s", err, tt.want)
		}
	}
}

func TestAzureInspect(t *testing.T) {
	s, err := Open("testdata/azure.csv", opts(Options{SystemPromptTokens: 100, NoTokens: true}))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Inspect(s, 16)
	if err != nil {
		t.Fatal(err)
	}
	// The first request caches its 100-token system prompt (6 full blocks);
	// each later one hits those 96 tokens and nothing else.
	if got.Requests != 4 || got.HitTokens != 3*96 || got.PromptTokens != 374+396+879+1200 {
		t.Fatalf("%+v", got)
	}
}
