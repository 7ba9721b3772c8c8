package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

type goldenHashCase struct {
	ID        string     `json:"id"`
	Model     string     `json:"model"`
	CacheSalt string     `json:"cache_salt"`
	BS64      [][]string `json:"block_hashes_bs64_dec"`
	BS16      [][]string `json:"block_hashes_bs16_dec"`
	Pseudo    []struct {
		N int `json:"num_tokens"`
	} `json:"pseudo_tokens"`
}

func loadGoldenHash(t *testing.T, id, salt string) goldenHashCase {
	t.Helper()
	raw, err := os.ReadFile("../../testdata/shared/golden/epp-golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		HashCases []goldenHashCase `json:"hash_cases"`
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	for _, c := range g.HashCases {
		if c.ID == id && c.CacheSalt == salt {
			return c
		}
	}
	t.Fatalf("no golden case %s/%s", id, salt)
	return goldenHashCase{}
}

func runHash(t *testing.T, stdin string, args ...string) (eppHashOutput, error) {
	t.Helper()
	cmd := newEPPHashCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		return eppHashOutput{}, err
	}
	var got eppHashOutput
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("output %q: %v", out.String(), err)
	}
	return got, nil
}

func TestEPPHashGolden(t *testing.T) {
	// chat2turn with salt s1, from a file, at the default block size 64.
	c := loadGoldenHash(t, "chat2turn", "s1")
	body := `{"model":"x","cache_salt":"s1","messages":[{"role":"user","content":"Hello, who are you?"},` +
		`{"role":"assistant","content":"I am an AI assistant."},{"role":"user","content":"Tell me a joke."}]}`
	f := filepath.Join(t.TempDir(), "req.json")
	if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := runHash(t, "", "--model", c.Model, "--request", f)
	if err != nil {
		t.Fatal(err)
	}
	if want := (eppHashOutput{BlockSize: 64, PseudoTokens: []int{c.Pseudo[0].N}, Prompts: c.BS64}); !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}

	// Multi-prompt completions from stdin at block size 16 (not clamped).
	c = loadGoldenHash(t, "completions_multi", "")
	got, err = runHash(t, `{"prompt":["abc","defgh"]}`, "--model", c.Model, "--block-size", "16")
	if err != nil {
		t.Fatal(err)
	}
	if want := (eppHashOutput{BlockSize: 16, PseudoTokens: []int{1, 2}, Prompts: c.BS16}); !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}

	// a300 at 16: five blocks, the last partial.
	c = loadGoldenHash(t, "a300", "")
	got, err = runHash(t, `{"prompt":"`+strings.Repeat("a", 300)+`"}`, "--model", c.Model, "--block-size", "16", "--request", "-")
	if err != nil || !reflect.DeepEqual(got.Prompts, c.BS16) || len(got.Prompts[0]) != 5 {
		t.Errorf("a300/16: %+v %v", got, err)
	}

	// Empty prompt: no tokens, empty lists.
	got, err = runHash(t, `{"prompt":""}`, "--model", "m")
	if err != nil || len(got.PseudoTokens) != 0 || len(got.Prompts) != 0 || got.BlockSize != 64 {
		t.Errorf("empty: %+v %v", got, err)
	}
}

func TestEPPHashErrors(t *testing.T) {
	for _, c := range []struct {
		stdin string
		args  []string
		err   string
	}{
		{`{"prompt":"x"}`, nil, "--model is required"},
		{`{"prompt":"x"}`, []string{"--model", "m", "--block-size", "0"}, "--block-size"},
		{`{"prompt":`, []string{"--model", "m"}, "not valid JSON"},
		{`{"input":"x"}`, []string{"--model", "m"}, "neither"},
		{`{"messages":{}}`, []string{"--model", "m"}, "HTTP 400 (spec §2.1 step 0): chat-completions request: messages: got an object, want an array"},
		{`{"messages":[],"add_generation_prompt":"yes"}`, []string{"--model", "m"}, "add_generation_prompt: got a string, want a boolean"},
		{`{"prompt":"x","t":1E400}`, []string{"--model", "m"}, "t: number 1E400 is outside the float64 range"},
		{``, []string{"--model", "m", "--request", "/nonexistent/file.json"}, "--request: open /nonexistent/file.json"},
		{`{"prompt":`, []string{"--model", "m", "--request", "-"}, "--request stdin: request body is not valid JSON"},
	} {
		// Every one is an input error (exit 2), naming the flag or file.
		_, err := runHash(t, c.stdin, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.err) || exitCode(err) != 2 {
			t.Errorf("%v %q: exit %d, err %v, want 2 and %q", c.args, c.stdin, exitCode(err), err, c.err)
		}
	}
}
