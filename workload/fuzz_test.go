package workload

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/eppsim/eppsim/traces"
)

// fuzzRead reads data in format f and checks that nothing panics and that
// whatever comes out keeps the Request contract; that a byte order mark
// before the data changes nothing; and that with a small line limit every
// error is still an *InputError.
func fuzzRead(t *testing.T, f Format, data []byte, skip bool) {
	reqs, err := fuzzReadOnce(t, f, data, skip, 0)
	checkInvariants(t, reqs)
	if !bytes.HasPrefix(data, []byte(utf8BOM)) {
		bom, bomErr := fuzzReadOnce(t, f, append([]byte(utf8BOM), data...), skip, 0)
		if fmt.Sprint(err) != fmt.Sprint(bomErr) || !reflect.DeepEqual(reqs, bom) {
			t.Fatalf("with a byte order mark: %d requests, error %v; without: %d requests, error %v", len(bom), bomErr, len(reqs), err)
		}
	}
	small, _ := fuzzReadOnce(t, f, data, skip, 64)
	checkInvariants(t, small)
}

// fuzzReadOnce reads up to 300 requests and the error that ended reading
// (nil at the end, or when NewSource refused the input).
func fuzzReadOnce(t *testing.T, f Format, data []byte, skip bool, maxLine int) ([]*Request, error) {
	o := opts(Options{Format: f, SkipInvalid: skip, MaxPromptTokens: 1 << 14, MaxLineBytes: maxLine})
	s, err := NewSource(bytes.NewReader(data), "fuzz", o)
	if err != nil {
		return nil, nil
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
			return reqs, err
		}
		reqs = append(reqs, r)
	}
	return reqs, nil
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
	addFixture(f, "testdata/sharegpt.json", `{"conversation": [{"role": "user", "content": "x"}]}`+"\n"+`{"messages": []}`,
		"\n\n ["+`{"conversations": [{"from": "human", "value": "`+strings.Repeat("x\\n", 30)+`"}]}`+",\n"+strings.Repeat(" \n", 40)+"{}]")
	f.Fuzz(func(t *testing.T, data []byte, skip bool) { fuzzRead(t, FormatShareGPT, data, skip) })
}

func FuzzAzure(f *testing.F) {
	addFixture(f, "testdata/azure.csv", "ContextTokens,GeneratedTokens,TIMESTAMP\n5,1,0.5\n6,2,1",
		"\"TIMESTAMP\",ContextTokens,GeneratedTokens\n0,10,0\n\"1\n"+strings.Repeat("\n", 70)+"\",20,1\n")
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

// FuzzParseSpec: any synthesizer spec is read or refused, never a panic;
// what is read validates again as it is; a byte order mark before it
// changes nothing read.
func FuzzParseSpec(f *testing.F) {
	for _, name := range []string{"chat", "agentic", "rag"} {
		if data, err := traces.Preset(name); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte("base: chat\nsessions: 3\narrivals: {process: gamma, cv: 2, rate: 1}\n"))
	f.Add([]byte("base: rag\nrag: {probability: 1e309}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSpec(data)
		if err == nil {
			again := *s
			if err := again.Validate(); err != nil {
				t.Fatalf("accepted spec does not validate again: %v", err)
			}
		}
		if bytes.HasPrefix(data, []byte(utf8BOM)) {
			return
		}
		// (goyaml may word the error of invalid YAML differently.)
		bom, bomErr := ParseSpec(append([]byte(utf8BOM), data...))
		if (err == nil) != (bomErr == nil) || !reflect.DeepEqual(s, bom) {
			t.Fatalf("with a byte order mark: %v; without: %v", bomErr, err)
		}
	})
}
