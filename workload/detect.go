package workload

import (
	"bytes"
	"encoding/json"
	"errors"
)

// DetectFormat guesses a trace's format from its first bytes:
//   - a JSON array is ShareGPT;
//   - a JSON object per line is told apart by its keys: "conversations"
//     (ShareGPT JSONL), "hash_ids" with "chat_id" (Alibaba), "hash_ids"
//     (Mooncake), "custom_id", "body", "messages" or "prompt" (OpenAI);
//   - a first line naming TIMESTAMP and ContextTokens is Azure CSV.
func DetectFormat(head []byte) (Format, error) {
	head = bytes.TrimPrefix(head, []byte("\xef\xbb\xbf"))
	trimmed := bytes.TrimLeft(head, " \t\r\n")
	if len(trimmed) == 0 {
		return "", errors.New("empty input: cannot detect the trace format")
	}
	switch trimmed[0] {
	case '[':
		return FormatShareGPT, nil
	case '{':
		line := trimmed[:firstLineEnd(trimmed)]
		var keys map[string]json.RawMessage
		if json.Unmarshal(line, &keys) != nil {
			// A pretty-printed or truncated object: look for key names.
			keys = map[string]json.RawMessage{}
			for _, k := range []string{"conversations", "hash_ids", "chat_id", "custom_id", "body", "messages", "prompt"} {
				if bytes.Contains(trimmed, []byte(`"`+k+`"`)) {
					keys[k] = nil
				}
			}
		}
		has := func(k string) bool { _, ok := keys[k]; return ok }
		switch {
		case has("conversations"):
			return FormatShareGPT, nil
		case has("hash_ids") && has("chat_id"):
			return FormatAlibaba, nil
		case has("hash_ids"):
			return FormatMooncake, nil
		case has("custom_id"), has("body"), has("messages"), has("prompt"):
			return FormatOpenAI, nil
		}
		return "", errors.New("JSON object with none of the keys of a known format (hash_ids, conversations, custom_id, body, messages, prompt)")
	}
	line := bytes.ToLower(head[:firstLineEnd(head)])
	if bytes.Contains(line, []byte("timestamp")) && bytes.Contains(line, []byte("contexttokens")) {
		return FormatAzure, nil
	}
	return "", errors.New("cannot detect the trace format (not JSON, JSONL or an Azure CSV header); give the format explicitly")
}
