package workload

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// InputError reports bad trace input: "file:line: field: what is wrong".
// Field is empty for errors that concern the whole line.
type InputError struct {
	File  string
	Line  int
	Field string
	Msg   string
	Err   error // underlying cause, if any
}

func (e *InputError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

func (e *InputError) Unwrap() error { return e.Err }

// IsInputError reports whether err (or an error it wraps) is an *InputError,
// i.e. the input, not the program, is at fault.
func IsInputError(err error) bool {
	var ie *InputError
	return errors.As(err, &ie)
}

// jsonProblem turns an encoding/json error into a field name and message.
func jsonProblem(err error) (field, msg string) {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		want := te.Type.String()
		switch te.Type.Kind() {
		case reflect.Struct, reflect.Map:
			want = "a JSON object"
		case reflect.Slice:
			want = "a JSON array"
		case reflect.String:
			want = "a string"
		}
		// Embedded structs show up in the path under their Go name.
		field = strings.ReplaceAll(te.Field, "openaiX.", "")
		return field, fmt.Sprintf("expected %s, got JSON %s", want, te.Value)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return "", "invalid JSON: " + se.Error()
	}
	return "", "invalid JSON: " + strings.TrimPrefix(err.Error(), "json: ")
}
