package workload

import (
	"os"
	"testing"
)

func TestDetectFormat(t *testing.T) {
	tests := []struct {
		head string
		want Format
	}{
		{`{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [0]}`, FormatMooncake},
		{`{"chat_id": 1, "parent_chat_id": -1, "timestamp": 0, "hash_ids": [0]}`, FormatAlibaba},
		{`{"custom_id": "a", "body": {}}`, FormatOpenAI},
		{`{"model": "m", "messages": []}`, FormatOpenAI},
		{`{"model": "m", "prompt": "x"}` + "\n", FormatOpenAI},
		{"\ufeff  [ {\"id\": 1}", FormatShareGPT},
		{`{"id": "x", "conversations": []}`, FormatShareGPT},
		{"{\n  \"id\": \"x\",\n  \"conversations\": [", FormatShareGPT},
		{`{"timestamp": 0, "input_length": 1, "hash_ids": [0, 1, 2, 3`, FormatMooncake},
		{"TIMESTAMP,ContextTokens,GeneratedTokens\n2023", FormatAzure},
	}
	for _, tt := range tests {
		got, err := DetectFormat([]byte(tt.head))
		if err != nil || got != tt.want {
			t.Errorf("DetectFormat(%q) = %s, %v; want %s", tt.head, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "   ", "hello", `{"a": 1}`, "a,b,c\n1,2,3"} {
		if f, err := DetectFormat([]byte(bad)); err == nil {
			t.Errorf("DetectFormat(%q) = %s, want an error", bad, f)
		}
	}
	for file, want := range map[string]Format{
		"testdata/mooncake.jsonl": FormatMooncake, "testdata/alibaba.jsonl": FormatAlibaba,
		"testdata/openai.jsonl": FormatOpenAI, "testdata/sharegpt.json": FormatShareGPT, "testdata/azure.csv": FormatAzure,
	} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := DetectFormat(data); got != want || err != nil {
			t.Errorf("%s: %s %v", file, got, err)
		}
	}
}

func TestParseFormatAndMode(t *testing.T) {
	for in, want := range map[string]Format{"": FormatAuto, "Mooncake": FormatMooncake, "openai": FormatOpenAI, "azure": FormatAzure, "qwen": FormatAlibaba} {
		if got, err := ParseFormat(in); got != want || err != nil {
			t.Errorf("ParseFormat(%q) = %s, %v", in, got, err)
		}
	}
	if _, err := ParseFormat("parquet"); err == nil {
		t.Error("ParseFormat accepted parquet")
	}
	for in, want := range map[string]Mode{"": ModeDefault, "open": ModeOpenLoop, "closed-loop": ModeClosedLoop} {
		if got, err := ParseMode(in); got != want || err != nil {
			t.Errorf("ParseMode(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseMode("half-open"); err == nil {
		t.Error("ParseMode accepted half-open")
	}
}
