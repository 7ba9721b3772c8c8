package workload

import (
	"fmt"
	"reflect"
	"testing"
)

// showLine renders a hashIDLine with its pointers followed.
func showLine(l hashIDLine) string {
	s := fmt.Sprintf("ts=%q ids=%#v", l.Timestamp, l.HashIDs)
	for _, f := range []struct {
		name string
		v    any
	}{{"in", l.InputLength}, {"out", l.OutputLength}, {"chat", l.ChatID}, {"parent", l.ParentChatID}, {"turn", l.Turn}} {
		if v := reflect.ValueOf(f.v); !v.IsNil() {
			s += fmt.Sprintf(" %s=%v", f.name, v.Elem())
		}
	}
	return s
}

// checkFast checks that parseHashIDFast either declines line or returns
// exactly what encoding/json decodes, and reports whether it accepted.
func checkFast(t *testing.T, line string) bool {
	t.Helper()
	var st hashIDFast
	got, ok := parseHashIDFast([]byte(line), &st)
	if !ok {
		return false
	}
	want, err := decodeHashIDLine([]byte(line))
	if err != nil {
		t.Fatalf("%q: fast path accepted a line encoding/json rejects: %v", line, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\nfast path    %s\nencoding/json %s", line, showLine(got), showLine(want))
	}
	return true
}

func TestHashIDFastPath(t *testing.T) {
	tests := []struct {
		line string
		fast bool // taken by the fast path (else encoding/json decides)
	}{
		// The shapes of the shared traces.
		{`{"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2, 3]}`, true},
		{`{"chat_id": 159, "parent_chat_id": -1, "timestamp": 61.114, "input_length": 521, "output_length": 132, "type": "text", "turn": 1, "hash_ids": [1089, 1090]}`, true},
		{`{"chat_id": "a-7", "parent_chat_id": "a-6", "timestamp": 1.5e3, "input_length": 1, "output_length": 0, "turn": 2, "hash_ids": [140737488355327]}`, true},
		// Whitespace (JSON's four characters only) and key order.
		{"\t {\r\n\"hash_ids\"\t:[ 5 ,6 ] ,\"output_length\":1,\"input_length\" :600 ,\"timestamp\":3 }\r\n ", true},
		{"{\"timestamp\":3\v}", false},
		{"\ufeff{\"timestamp\":3}", false},
		{`{}`, true},
		{` { } `, true},
		{`{"timestamp":1}x`, false},
		{`{"timestamp":1}{}`, false},
		{`{"timestamp":1,}`, false},
		{`{"timestamp":1 "input_length":2}`, false},
		{`{"timestamp":1`, false},
		{``, false},
		{`[1]`, false},
		{`null`, false},
		// Numbers: timestamp takes any JSON number; integer fields only
		// integers that strconv.ParseInt takes.
		{`{"timestamp": -0}`, true},
		{`{"timestamp": 1E+2}`, true},
		{`{"timestamp": 0.000}`, true},
		{`{"timestamp": 1e999}`, true},
		{`{"timestamp": 01}`, false},
		{`{"timestamp": 1.}`, false},
		{`{"timestamp": .5}`, false},
		{`{"timestamp": +1}`, false},
		{`{"timestamp": 1e}`, false},
		{`{"timestamp": -}`, false},
		{`{"timestamp": "1"}`, false},
		{`{"timestamp": null}`, false},
		{`{"input_length": -0}`, true},
		{`{"input_length": -12}`, true},
		{`{"input_length": 999999999999999999}`, true},
		{`{"input_length": 9223372036854775807}`, false},
		{`{"input_length": 9223372036854775808}`, false},
		{`{"input_length": 1e3}`, false},
		{`{"input_length": 1.0}`, false},
		{`{"input_length": 00}`, false},
		{`{"input_length": true}`, false},
		{`{"turn": 3}`, true},
		{`{"turn": 3.5}`, false},
		{`{"hash_ids": [0]}`, true},
		{`{"hash_ids": []}`, false},
		{`{"hash_ids": [1,]}`, false},
		{`{"hash_ids": [1 2]}`, false},
		{`{"hash_ids": [-1, 1e2]}`, false},
		{`{"hash_ids": [[1]]}`, false},
		{`{"hash_ids": null}`, false},
		{`{"hash_ids": 1}`, false},
		// Chat ids: numbers as text, strings decoded.
		{`{"chat_id": 1.50, "parent_chat_id": "-1"}`, true},
		{`{"chat_id": ""}`, true},
		{`{"chat_id": "a\"b"}`, true},
		{`{"chat_id": "a\u0062"}`, true},
		{`{"chat_id": "é"}`, true},
		{"{\"chat_id\": \"a\xffb\"}", true},
		{`{"chat_id": true}`, false},
		{`{"chat_id": null}`, false},
		// Keys: exact spellings only; encoding/json also folds case (and
		// Unicode: "ſ" is "s") and unescapes.
		{`{"Timestamp": 1}`, false},
		{`{"HASH_IDS": [1]}`, false},
		{`{"hash_idſ": [1]}`, false},
		{`{"time\u0073tamp": 1}`, false},
		{`{"t\"": 1}`, false},
		{"{\"a\x01\": 1}", false},
		// Repeated keys (the last wins in encoding/json).
		{`{"timestamp": 1, "timestamp": 2}`, false},
		{`{"hash_ids": [1], "hash_ids": [2, 3]}`, false},
		{`{"x": 1, "x": 2}`, true},
		// Unknown keys: any well-formed value is skipped.
		{`{"type": "text", "x": null, "y": true, "z": false, "w": -1.5e-3, "v": "é\u00e9"}`, true},
		{"{\"type\": \"text\", \"x\": null, \"y\": true, \"z\": false, \"w\": -1.5e-3, \"v\": \"é\xff\x7f\"}", true},
		{`{"x": "a\"b"}`, true},
		{"{\"x\": \"a\tb\"}", false},
		{`{"x": {}}`, true},
		{`{"x": {"a": [1, {"b": null}]}}`, true},
		{`{"x": {"a" 1}}`, false},
		{`{"x": [1]}`, true},
		{`{"x": [1,]}`, false},
		{`{"x": nul}`, false},
		{`{"x": truex}`, false},
		{`{"x": tru}`, false},
		{`{"x": 1.5.3}`, false},
		{`{"x": }`, false},
	}
	for _, tt := range tests {
		if got := checkFast(t, tt.line); got != tt.fast {
			_, err := decodeHashIDLine([]byte(tt.line))
			t.Errorf("%q: fast path taken %v, want %v (encoding/json: %v)", tt.line, got, tt.fast, err)
		}
	}
}

// FuzzHashIDFast checks that the fast path and encoding/json agree on
// arbitrary input (or the fast path declines).
func FuzzHashIDFast(f *testing.F) {
	for _, s := range []string{
		`{"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2, 3]}`,
		`{"chat_id": 159, "parent_chat_id": -1, "timestamp": 61.114, "input_length": 521, "output_length": 132, "type": "text", "turn": 1, "hash_ids": [1089, 1090]}`,
		`{"chat_id": "x", "parent_chat_id": "y", "timestamp": -0.5e-3, "turn": -0, "k": null, "l": [], "hash_ids": [999999999999999999]}`,
		`{"TimeStamp": 1, "input_length": 1, "input_length": 2}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFast(t, string(data))
	})
}
