package workload

import (
	"slices"
	"strings"
	"testing"
)

func TestChatPromptExact(t *testing.T) {
	got, err := testTokenizer().ChatPrompt([]Message{{Role: "user", Content: []string{"hello world"}}})
	if err != nil || !slices.Equal(got, helloWorldPrompt) {
		t.Fatalf("%v %v\nwant %v", got, err, helloWorldPrompt)
	}
	text, err := testTokenizer().Decode(got)
	want := "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhello world<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
	if err != nil || text != want {
		t.Fatalf("decoded %q", text)
	}
	// Parts are tokenized separately: "hello" + " world" as two parts gives
	// the same ids here, "hel" + "lo world" does not.
	split, _ := testTokenizer().ChatPrompt([]Message{{Role: "user", Content: []string{"hel", "lo world"}}})
	if slices.Equal(split, helloWorldPrompt) {
		t.Error("segments were merged before tokenizing")
	}
}

// TestMultiTurnPrefix: turn k+1's prompt is exactly turn k's prompt, turn
// k's output tokens and the template tokens of the new message(s), for
// awkward contents too; and prompts handed out earlier are never altered.
func TestMultiTurnPrefix(t *testing.T) {
	tok := testTokenizer()
	enc, err := newChatEncoder(tok, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	turns := []struct {
		add    []Message
		answer string
	}{
		{[]Message{{"system", []string{"You are terse."}}, {"user", []string{"  leading spaces"}}}, "trailing newline\n"},
		{[]Message{{"user", []string{"héllo 世界 🙂"}}}, ""},
		{[]Message{{"user", []string{"first"}}, {"user", []string{"second, right after"}}}, " spaced answer "},
		{[]Message{{"tool", []string{`{"result": 42}`}}}, "done<|eot_id|>"},
		{[]Message{{"user", []string{"doc\n\n", "question?"}}}, "ok"},
	}
	var c conv
	var msgs []Message
	var prompts [][]uint32
	var outputs [][]uint32
	for k, tr := range turns {
		if k > 0 {
			a := Message{Role: "assistant", Content: []string{turns[k-1].answer}}
			if err := c.add(enc, a); err != nil {
				t.Fatal(err)
			}
			msgs = append(msgs, a)
		}
		for _, m := range tr.add {
			if err := c.add(enc, m); err != nil {
				t.Fatal(err)
			}
			msgs = append(msgs, m)
		}
		p, err := c.prompt(enc)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := tok.ChatPrompt(msgs)
		if !slices.Equal(p, want) {
			t.Fatalf("turn %d: incremental prompt differs from the full rendering", k)
		}
		out, _ := tok.ChatAnswer(tr.answer)
		prompts = append(prompts, p)
		outputs = append(outputs, out)
	}
	for k := 1; k < len(prompts); k++ {
		prefix := slices.Concat(prompts[k-1], outputs[k-1])
		if !hasPrefix(prompts[k], prefix) || len(prompts[k]) <= len(prefix) {
			t.Errorf("turn %d is not a strict extension of turn %d's prompt + output", k, k-1)
		}
	}
	// Earlier prompts are intact (shared backing arrays are never overwritten).
	for k := range prompts {
		want, _ := tok.ChatPrompt(slices.Clone(msgsUpTo(turns, k)))
		if !slices.Equal(prompts[k], want) {
			t.Errorf("prompt of turn %d was modified later", k)
		}
	}
}

func msgsUpTo(turns []struct {
	add    []Message
	answer string
}, k int) []Message {
	var msgs []Message
	for i := 0; i <= k; i++ {
		if i > 0 {
			msgs = append(msgs, Message{Role: "assistant", Content: []string{turns[i-1].answer}})
		}
		msgs = append(msgs, turns[i].add...)
	}
	return msgs
}

func TestSegCacheBounded(t *testing.T) {
	c := newSegCache(testTokenizer(), 4096)
	texts := []string{}
	for i := range 50 {
		texts = append(texts, strings.Repeat("lorem ipsum dolor ", 5+i%7)+string(rune('a'+i%26)))
	}
	for _, s := range texts {
		ids, err := c.encode(s)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := testTokenizer().Encode(s)
		if !slices.Equal(ids, want) {
			t.Fatal("cached tokens differ")
		}
		if c.used > c.budget {
			t.Fatalf("cache holds %d > %d bytes", c.used, c.budget)
		}
	}
	if len(c.m) == 0 || len(c.m) == len(texts) {
		t.Errorf("%d entries cached of %d", len(c.m), len(texts))
	}
	// A hit returns the same slice.
	a, _ := c.encode(texts[len(texts)-1])
	b, _ := c.encode(texts[len(texts)-1])
	if &a[0] != &b[0] {
		t.Error("no cache hit for the most recent entry")
	}
}
