package config

import (
	"errors"
	"strconv"
	"strings"
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
	if e.Path != "" {
		b.WriteString(e.Path + ": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }
