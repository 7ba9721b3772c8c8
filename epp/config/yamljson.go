package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"

	yaml "sigs.k8s.io/yaml/goyaml.v2"
)

type (
	yamlMapSlice = yaml.MapSlice
	yamlMapItem  = yaml.MapItem
)

// yamlValue captures any YAML value with mapping key order preserved.
type yamlValue struct {
	v   any
	set bool
}

// UnmarshalYAML keeps mappings as ordered MapSlices (nested mappings follow).
func (y *yamlValue) UnmarshalYAML(unmarshal func(any) error) error {
	var ms yaml.MapSlice
	if err := unmarshal(&ms); err == nil {
		y.v, y.set = ms, true
		return nil
	}
	var v any
	if err := unmarshal(&v); err != nil {
		return err
	}
	y.v, y.set = v, true
	return nil
}

// yamlToJSON converts a decoded YAML value to compact JSON, keeping mapping
// key order. Keys are stringified as sigs.k8s.io/yaml does; duplicate keys
// and non-finite floats are errors.
func yamlToJSON(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	if err := writeJSON(&b, v, 0); err != nil {
		return nil, err
	}
	return json.RawMessage(b.Bytes()), nil
}

const maxDepth = 200

func writeJSON(b *bytes.Buffer, v any, depth int) error {
	if depth > maxDepth {
		return errors.New("value nested too deeply")
	}
	switch t := v.(type) {
	case nil:
		b.WriteString("null")
	case yaml.MapSlice:
		b.WriteByte('{')
		seen := make(map[string]bool, len(t))
		for i, it := range t {
			k, err := keyString(it.Key)
			if err != nil {
				return err
			}
			if seen[k] {
				return fmt.Errorf("duplicate key %q", k)
			}
			seen[k] = true
			if i > 0 {
				b.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			b.Write(kb)
			b.WriteByte(':')
			if err := writeJSON(b, it.Value, depth+1); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case map[any]any:
		// Mappings reached through aliases may decode as plain maps.
		ms := make(yaml.MapSlice, 0, len(t))
		keys := make([]string, 0, len(t))
		byKey := map[string]any{}
		for k, val := range t {
			ks, err := keyString(k)
			if err != nil {
				return err
			}
			keys = append(keys, ks)
			byKey[ks] = val
		}
		slices.Sort(keys)
		for _, k := range keys {
			ms = append(ms, yaml.MapItem{Key: k, Value: byKey[k]})
		}
		return writeJSON(b, ms, depth)
	case []any:
		b.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSON(b, e, depth+1); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case float64:
		if math.IsNaN(t) || math.IsInf(t, 0) {
			return fmt.Errorf("unsupported number %v", t)
		}
		b.WriteString(strconv.FormatFloat(t, 'g', -1, 64))
	case string, bool, int, int64, uint64, uint, int32, float32:
		enc, err := json.Marshal(t)
		if err != nil {
			return err
		}
		b.Write(enc)
	default:
		enc, err := json.Marshal(t)
		if err != nil {
			return fmt.Errorf("unsupported value %v: %w", t, err)
		}
		b.Write(enc)
	}
	return nil
}

func keyString(k any) (string, error) {
	switch t := k.(type) {
	case string:
		return t, nil
	case nil:
		return "null", nil
	case bool, int, int64, uint64, uint, float64:
		return fmt.Sprint(t), nil
	default:
		return "", fmt.Errorf("unsupported mapping key %v", k)
	}
}

// jsonToYAML converts JSON to a YAML-marshalable value that keeps object key
// order (MapSlice) and number spelling.
func jsonToYAML(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := readJSONValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after JSON value")
	}
	return v, nil
}

func readJSONValue(dec *json.Decoder, depth int) (any, error) {
	if depth > maxDepth {
		return nil, errors.New("value nested too deeply")
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			ms := yaml.MapSlice{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, ok := kt.(string)
				if !ok {
					return nil, errors.New("object key is not a string")
				}
				v, err := readJSONValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				ms = append(ms, yaml.MapItem{Key: k, Value: v})
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return ms, nil
		case '[':
			list := []any{}
			for dec.More() {
				v, err := readJSONValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return list, nil
		}
		return nil, fmt.Errorf("unexpected delimiter %v", t)
	case json.Number:
		if i, err := strconv.ParseInt(string(t), 10, 64); err == nil {
			return i, nil
		}
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil {
			return nil, err
		}
		return f, nil
	default:
		return t, nil // string, bool, nil
	}
}
