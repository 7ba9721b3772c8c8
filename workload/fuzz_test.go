package workload

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"
)

// fuzzRead reads data in format f and checks that nothing panics and that
// whatever comes out keeps the Request contract.
func fuzzRead(t *testing.T, f Format, data []byte, skip bool) {
	o := opts(Options{Format: f, SkipInvalid: skip, MaxPromptTokens: 1 << 14})
	s, err := NewSource(bytes.NewReader(data), "fuzz", o)
	if err != nil {
		return
	}
	var reqs []*Request
	for range 300 {
		r, err := s.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if !IsInputError(err) {
				t.Fatalf("error is not an *InputError: %v", err)
			}
			break
		}
		reqs = append(reqs, r)
	}
	checkInvariants(t, reqs)
}

func addFixture(f *testing.F, path string, extra ...string) {
	data, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data, false)
	f.Add(data, true)
	for _, e := range extra {
		f.Add([]byte(e), true)
	}
}

func FuzzMooncake(f *testing.F) {
	addFixture(f, "testdata/mooncake.jsonl", `{"timestamp": 1e3, "input_length": 1, "output_length": 0, "hash_ids": [140737488355327]}`)
	f.Fuzz(func(t *testing.T, data []byte, skip bool) { fuzzRead(t, FormatMooncake, data, skip) })
}

func FuzzAlibaba(f *testing.F) {
	addFixture(f, "testdata/alibaba.jsonl", `{"chat_id": "x", "parent_chat_id": "x", "timestamp": 0, "input_length": 3, "output_length": 1, "hash_ids": [0]}`)
	f.Fuzz(func(t *testing.T, data []byte, skip bool) { fuzzRead(t, FormatAlibaba, data, skip) })
}

func FuzzOpenAI(f *testing.F) {
	addFixture(f, "testdata/openai.jsonl", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"x_session_id":1,"x_think_ms":5}`)
	f.Fuzz(func(t *testing.T, data []byte, skip bool) { fuzzRead(t, FormatOpenAI, data, skip) })
}

func FuzzShareGPT(f *testing.F) {
	addFixture(f, "testdata/sharegpt.json", `{"conversation": [{"role": "user", "content": "x"}]}`+"\n"+`{"messages": []}`)
	f.Fuzz(func(t *testing.T, data []byte, skip bool) { fuzzRead(t, FormatShareGPT, data, skip) })
}

func FuzzAzure(f *testing.F) {
	addFixture(f, "testdata/azure.csv", "ContextTokens,GeneratedTokens,TIMESTAMP\n5,1,0.5\n6,2,1")
	f.Fuzz(func(t *testing.T, data []byte, skip bool) { fuzzRead(t, FormatAzure, data, skip) })
}

func FuzzDetect(f *testing.F) {
	for _, p := range []string{"testdata/mooncake.jsonl", "testdata/alibaba.jsonl", "testdata/openai.jsonl", "testdata/sharegpt.json", "testdata/azure.csv"} {
		addFixture(f, p)
	}
	f.Fuzz(func(t *testing.T, data []byte, skip bool) {
		if _, err := DetectFormat(data); err == nil {
			fuzzRead(t, FormatAuto, data, skip)
		}
	})
}
