package workload

import (
	"bytes"
	"encoding/json"
	"testing"
)

// chatTraceRequests bounds how much of builtin:chat the chat-trace tests and
// benchmarks write out as OpenAI batch JSONL (builtinOpenAI): all of it,
// multi-turn conversations whose later turns carry the whole history.
const chatTraceRequests = 2000

// BenchmarkOpenAIChatTrace drains the chat trace through the OpenAI reader
// (decoding, tokenization, bodies), on the fast and on the general path.
func BenchmarkOpenAIChatTrace(b *testing.B) {
	data := builtinOpenAI(b, "chat", chatTraceRequests)
	for _, path := range []string{"fast", "general"} {
		b.Run("path="+path, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for range b.N {
				s := newOpenAIStream(b, "chat.jsonl", bytes.NewReader(data), Options{}, path == "general")
				n, err := drainCount(s)
				if err != nil {
					b.Fatal(err)
				}
				if n != bytes.Count(data, []byte("\n")) {
					b.Fatalf("%d requests", n)
				}
			}
		})
	}
}

// BenchmarkOpenAIDecode decodes every line of the chat trace as parse does
// before tokenizing (envelope, body, messages, contents, stripped body): with
// openaiFast, and with encoding/json as the general path does.
func BenchmarkOpenAIDecode(b *testing.B) {
	data := builtinOpenAI(b, "chat", chatTraceRequests)
	lines := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
	b.Run("path=fast", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		var f openaiFast
		for range b.N {
			for _, line := range lines {
				if !f.decode(line) {
					b.Fatal("declined")
				}
				var env openaiEnvelope
				var body openaiBody
				f.fill(&env, &body)
				_ = f.cleanBody()
			}
		}
	})
	b.Run("path=general", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for range b.N {
			for _, line := range lines {
				var env openaiEnvelope
				var body openaiBody
				var msgs []openaiMessage
				if json.Unmarshal(line, &env) != nil || json.Unmarshal(env.Body, &body) != nil || json.Unmarshal(body.Messages, &msgs) != nil {
					b.Fatal("bad line")
				}
				for _, m := range msgs {
					if _, err := contentParts(m.Content); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := stripXFields(env.Body); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
