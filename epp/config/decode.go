package config

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	yaml "sigs.k8s.io/yaml/goyaml.v2"
)

// decoded is a parsed document plus what is needed to locate its fields.
type decoded struct {
	cfg      *EndpointPickerConfig
	lines    *lineIndex
	warnings []string
	// oldAPI: the document had the deprecated apiVersion.
	oldAPI bool
}

// decode parses data strictly (spec §1.1): unknown fields, duplicate keys and
// ill-typed values are errors naming file, line and field path. It checks
// apiVersion and kind and moves the deprecated top-level fields.
func decode(data []byte, file string) (*decoded, error) {
	if err := checkNumbers(data, file); err != nil {
		return nil, err
	}
	idx := buildLineIndex(data)
	var cfg EndpointPickerConfig
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		return nil, yamlError(err, file, idx)
	}
	d := &decoded{cfg: &cfg, lines: idx}
	at := func(path string, err error) error {
		return &Error{File: file, Line: idx.line(path), Path: path, Err: err}
	}
	switch cfg.APIVersion {
	case APIVersion:
	case DeprecatedAPIVersion:
		d.oldAPI = true
		d.warnings = append(d.warnings, fmt.Sprintf("apiVersion %s is deprecated; use %s", DeprecatedAPIVersion, APIVersion))
	case "":
		return nil, at("apiVersion", fmt.Errorf("%w: apiVersion is missing (want %s)", ErrAPIVersion, APIVersion))
	default:
		return nil, at("apiVersion", fmt.Errorf("%w: apiVersion %q (want %s or the deprecated %s)", ErrAPIVersion, cfg.APIVersion, APIVersion, DeprecatedAPIVersion))
	}
	if cfg.Kind != Kind {
		if cfg.Kind == "" {
			return nil, at("kind", fmt.Errorf("%w: kind is missing (want %s)", ErrAPIVersion, Kind))
		}
		return nil, at("kind", fmt.Errorf("%w: kind %q (want %s)", ErrAPIVersion, cfg.Kind, Kind))
	}
	cfg.APIVersion = APIVersion
	if cfg.SaturationDetector != nil {
		d.warnings = append(d.warnings, "top-level saturationDetector is deprecated; use flowControl.saturationDetector (moved there)")
		if cfg.FlowControl == nil {
			cfg.FlowControl = &FlowControlConfig{}
		}
		if cfg.FlowControl.SaturationDetector == nil {
			sd := *cfg.SaturationDetector
			cfg.FlowControl.SaturationDetector = &sd
		}
		cfg.SaturationDetector = nil
	}
	if cfg.Parser != nil {
		d.warnings = append(d.warnings, "top-level parser is deprecated; use requestHandler.parsers (moved there)")
		if cfg.RequestHandler == nil {
			cfg.RequestHandler = &RequestHandlerConfig{}
		}
		if len(cfg.RequestHandler.Parsers) == 0 {
			cfg.RequestHandler.Parsers = []PluginRef{*cfg.Parser}
		}
		cfg.Parser = nil
	}
	return d, nil
}

var (
	reLine         = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
	reUnknownField = regexp.MustCompile(`^field (\S+) not found in type \S+$`)
	reDupField     = regexp.MustCompile(`^(?:field (\S+) already set in type \S+|key (.+) already set in map)$`)
)

// yamlError converts a goyaml.v2 error into located *Errors.
func yamlError(err error, file string, idx *lineIndex) error {
	var msgs []string
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	} else {
		msgs = []string{err.Error()}
	}
	var out []error
	for _, m := range msgs {
		e := &Error{File: file, Err: fmt.Errorf("%w: %s", ErrSyntax, strings.TrimPrefix(m, "yaml: "))}
		if sm := reLine.FindStringSubmatch(m); sm != nil {
			e.Line, _ = strconv.Atoi(sm[1])
			rest := sm[2]
			path := idx.pathAt(e.Line)
			switch {
			case reUnknownField.MatchString(rest):
				f := reUnknownField.FindStringSubmatch(rest)[1]
				e.Path = parentPath(path, f)
				e.Err = fmt.Errorf("%w %q", ErrUnknownField, f)
			case reDupField.MatchString(rest):
				sm := reDupField.FindStringSubmatch(rest)
				f := sm[1]
				if f == "" {
					f = strings.Trim(sm[2], `"`)
				}
				e.Path = parentPath(path, f)
				e.Err = fmt.Errorf("%w %q", ErrDuplicateField, f)
			default:
				e.Path = path
				e.Err = fmt.Errorf("%w: %s", ErrSyntax, rest)
			}
		}
		out = append(out, e)
	}
	if len(out) == 1 {
		return out[0]
	}
	return errors.Join(out...)
}

// parentPath strips the trailing ".field" from path when it names field.
func parentPath(path, field string) string {
	if strings.HasSuffix(path, "."+field) {
		return strings.TrimSuffix(path, "."+field)
	}
	if path == field {
		return ""
	}
	return path
}

// lineIndex maps field paths of a block-style YAML document to lines and
// back. It is a best-effort scan (flow collections and multi-line quoted
// scalars are not followed); unknown locations are reported as line 0.
type lineIndex struct {
	byPath map[string]int
	byLine map[int]string
}

func (x *lineIndex) line(path string) int {
	if x == nil {
		return 0
	}
	return x.byPath[path]
}

func (x *lineIndex) pathAt(line int) string {
	if x == nil {
		return ""
	}
	return x.byLine[line]
}

type frame struct {
	indent int
	seg    string // ".key" or "[i]"
	item   bool
	count  int // items seen under this key
}

func buildLineIndex(data []byte) *lineIndex {
	x := &lineIndex{byPath: map[string]int{}, byLine: map[int]string{}}
	var stack []frame
	blockIndent := -1 // > -1 while inside a block scalar started at that indent
	path := func() string {
		var b strings.Builder
		for _, f := range stack {
			b.WriteString(f.seg)
		}
		return strings.TrimPrefix(b.String(), ".")
	}
	record := func(line int) {
		p := path()
		if _, ok := x.byPath[p]; !ok {
			x.byPath[p] = line
		}
		x.byLine[line] = p
	}
	for i, raw := range bytes.Split(data, []byte("\n")) {
		lineNo := i + 1
		s := strings.TrimRight(string(raw), " \t\r")
		trimmed := strings.TrimLeft(s, " ")
		indent := len(s) - len(trimmed)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if blockIndent >= 0 {
			if indent > blockIndent {
				x.byLine[lineNo] = path()
				continue
			}
			blockIndent = -1
		}
		if trimmed == "---" || strings.HasPrefix(trimmed, "--- ") || trimmed == "..." {
			stack = stack[:0]
			continue
		}
		// Sequence items: "- ", possibly nested ("- - x").
		for trimmed == "-" || strings.HasPrefix(trimmed, "- ") {
			for len(stack) > 0 {
				top := stack[len(stack)-1]
				if top.indent > indent || (top.indent == indent && top.item) {
					stack = stack[:len(stack)-1]
					continue
				}
				break
			}
			n := 0
			if len(stack) > 0 {
				n = stack[len(stack)-1].count
				stack[len(stack)-1].count++
			}
			stack = append(stack, frame{indent: indent, seg: "[" + strconv.Itoa(n) + "]", item: true})
			record(lineNo)
			rest := strings.TrimLeft(strings.TrimPrefix(trimmed, "-"), " ")
			indent += len(trimmed) - len(rest)
			trimmed = rest
			if rest == "" {
				break
			}
		}
		if trimmed == "" {
			continue
		}
		key, value, ok := splitKey(trimmed)
		if !ok {
			x.byLine[lineNo] = path()
			continue
		}
		for len(stack) > 0 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		stack = append(stack, frame{indent: indent, seg: "." + key})
		record(lineNo)
		if v := strings.TrimSpace(stripComment(value)); strings.HasPrefix(v, "|") || strings.HasPrefix(v, ">") {
			blockIndent = indent
		}
	}
	return x
}

// splitKey splits "key: value" (or "key:") at the first mapping colon
// outside quotes.
func splitKey(s string) (key, value string, ok bool) {
	if s == "" || s[0] == '{' || s[0] == '[' || s[0] == '#' {
		return "", "", false
	}
	inQuote := byte(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inQuote != 0:
			if c == inQuote {
				inQuote = 0
			}
		case c == '"' || c == '\'':
			if i == 0 {
				inQuote = c
			}
		case c == ':' && (i+1 == len(s) || s[i+1] == ' ' || s[i+1] == '\t'):
			k := strings.TrimSpace(s[:i])
			k = strings.Trim(k, `"'`)
			return k, s[i+1:], k != ""
		case c == ' ' && i+1 < len(s) && s[i+1] == '#':
			return "", "", false
		}
	}
	return "", "", false
}

func stripComment(v string) string {
	if i := strings.Index(v, " #"); i >= 0 {
		return v[:i]
	}
	return v
}
