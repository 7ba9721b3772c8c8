package config

import (
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Error classes; every error Load returns wraps one of them (test with
// errors.Is) inside an *Error that says where.
var (
	// ErrSyntax: the document is not valid YAML or a value has the wrong type.
	ErrSyntax = errors.New("invalid YAML")
	// ErrUnknownField: strict decoding found a field the schema lacks.
	ErrUnknownField = errors.New("unknown field")
	// ErrDuplicateField: a mapping sets the same key twice.
	ErrDuplicateField = errors.New("duplicate field")
	// ErrAPIVersion: apiVersion or kind is missing or not supported.
	ErrAPIVersion = errors.New("unsupported apiVersion/kind")
	// ErrFeatureGate: an unknown feature gate or a non-boolean gate value.
	ErrFeatureGate = errors.New("invalid feature gate")
	// ErrPlugin: a plugin entry is invalid (missing type, duplicate name,
	// unregistered type) or its factory failed.
	ErrPlugin = errors.New("invalid plugin")
	// ErrReference: a reference names no defined plugin, or names one of
	// the wrong kind.
	ErrReference = errors.New("invalid reference")
	// ErrProfile: a scheduling profile is invalid.
	ErrProfile = errors.New("invalid scheduling profile")
	// ErrScheduler: the scheduler cannot be built (profile handlers).
	ErrScheduler = errors.New("invalid scheduler")
	// ErrDataDependency: a consumed data key has no (default) producer, or
	// producers depend on each other in a cycle.
	ErrDataDependency = errors.New("invalid data dependencies")
)

// Error is a configuration error with its location: the file, the 1-based
// line when it is known, and the field path (e.g.
// "schedulingProfiles[0].plugins[1].pluginRef").
type Error struct {
	File string
	Line int
	Path string
	Err  error
}

// Error is "FILE:LINE: PATH: message", at most maxErrorLen bytes plus
// the file name: a long field path (a deeply nested document) or message
// keeps its beginning and end around an ellipsis, so the location and the
// reason stay readable. Path and Err keep the whole text.
func (e *Error) Error() string {
	var b strings.Builder
	switch {
	case e.File != "" && e.Line > 0:
		b.WriteString(e.File + ":" + strconv.Itoa(e.Line) + ": ")
	case e.File != "":
		b.WriteString(e.File + ": ")
	case e.Line > 0:
		b.WriteString("line " + strconv.Itoa(e.Line) + ": ")
	}
	budget := maxErrorLen - b.Len() + len(e.File)
	if e.Path != "" {
		path := elide(e.Path, maxPathLen)
		b.WriteString(path + ": ")
		budget -= len(path) + 2
	}
	b.WriteString(elide(e.Err.Error(), max(budget, 80)))
	return b.String()
}

// Bounds of Error's text (bytes): the whole, without the file name, and
// the field path's share.
const (
	maxErrorLen = 300
	maxPathLen  = 120
)

// elide shortens s to at most n bytes by replacing its middle with "…",
// cutting only at rune boundaries.
func elide(s string, n int) string {
	const ellipsis = "…"
	if len(s) <= n {
		return s
	}
	keep := n - len(ellipsis)
	head, tail := keep*3/5, keep-keep*3/5
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	start := len(s) - tail
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	return s[:head] + ellipsis + s[start:]
}

func (e *Error) Unwrap() error { return e.Err }
