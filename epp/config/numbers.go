package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	yaml3 "go.yaml.in/yaml/v3"
)

// checkNumbers reports a plain scalar written as a number too large for a
// float64 (weight: 1e309). goyaml resolves such a scalar as a string, so
// the error would otherwise be a type mismatch ("cannot unmarshal !!str")
// for a typed field and a plugin's JSON error without a line for a plugin
// parameter, neither saying what is wrong. A quoted or !!str-tagged scalar
// is a string and stays one. Documents with no long digit run or 3-digit
// exponent (every real one) are not parsed a second time.
func checkNumbers(data []byte, file string) error {
	if !mayOverflow(data) {
		return nil
	}
	var doc yaml3.Node
	if yaml3.Unmarshal(data, &doc) != nil {
		return nil // the decoder reports the syntax error
	}
	return walkNumbers(&doc, "", file)
}

func walkNumbers(n *yaml3.Node, path, file string) error {
	switch n.Kind {
	case yaml3.DocumentNode:
		for _, c := range n.Content {
			if err := walkNumbers(c, path, file); err != nil {
				return err
			}
		}
	case yaml3.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := k.Value
			if path != "" {
				p = path + "." + k.Value
			}
			if err := walkNumbers(v, p, file); err != nil {
				return err
			}
		}
	case yaml3.SequenceNode:
		for i, c := range n.Content {
			if err := walkNumbers(c, fmt.Sprintf("%s[%d]", path, i), file); err != nil {
				return err
			}
		}
	case yaml3.ScalarNode:
		// Aliases are checked where their anchor is.
		if n.Style == 0 && n.Tag == "!!str" && overflowsFloat(n.Value) {
			return &Error{File: file, Line: n.Line, Path: path,
				Err: fmt.Errorf("%w: %s is out of range for a float64 (at most %g)", ErrSyntax, n.Value, 1.7976931348623157e308)}
		}
	}
	return nil
}

// overflowsFloat reports whether s is a number in YAML's float syntax (as
// goyaml resolves one: underscores dropped, an optional sign, digits with
// an optional point and exponent; not hexadecimal) whose magnitude a
// float64 cannot hold.
func overflowsFloat(s string) bool {
	t := strings.ReplaceAll(s, "_", "")
	num := strings.TrimPrefix(strings.TrimPrefix(t, "-"), "+")
	if len(t)-len(num) > 1 {
		return false // -+1e309
	}
	mant, exp, hasExp := strings.Cut(strings.ToLower(num), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	if hasExp {
		exp = strings.TrimPrefix(strings.TrimPrefix(exp, "+"), "-")
	}
	if intPart+frac == "" || !digits(intPart) || !digits(frac) || (hasExp && (exp == "" || !digits(exp))) {
		return false
	}
	_, err := strconv.ParseFloat(t, 64)
	return errors.Is(err, strconv.ErrRange)
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// mayOverflow is a cheap filter for checkNumbers: a float64 overflows only
// with an exponent of 3 digits or more, or with 210 digits or more (an
// exponent of 2 digits needs a mantissa of at least 1.8e209).
func mayOverflow(data []byte) bool {
	run := 0
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case c >= '0' && c <= '9' || c == '_' || c == '.':
			if run++; run >= 100 {
				return true
			}
			continue
		case (c == 'e' || c == 'E') && run > 0:
			j := i + 1
			if j < len(data) && (data[j] == '+' || data[j] == '-') {
				j++
			}
			n := 0
			for j < len(data) && (data[j] >= '0' && data[j] <= '9' || data[j] == '_') {
				j++
				n++
			}
			if n >= 3 {
				return true
			}
		}
		run = 0
	}
	return false
}
