package suggest

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

type inner struct {
	BlockSize int `json:"block_size"`
	Override  int `json:"num_gpu_blocks_override"`
}

type outer struct {
	Name   string            `json:"name"`
	Engine inner             `json:"engine"`
	Groups []struct{ X int } `json:"groups"`
	Skip   int               `json:"-"`
}

func TestClosest(t *testing.T) {
	if got := Closest("presett", []string{"preset", "model"}, 2); got != "preset" {
		t.Errorf("got %q", got)
	}
	if got := Closest("zzzzzz", []string{"preset"}, 2); got != "" {
		t.Errorf("got %q", got)
	}
}

func TestUnknownField(t *testing.T) {
	decode := func(src string) error {
		dec := json.NewDecoder(strings.NewReader(src))
		dec.DisallowUnknownFields()
		var o outer
		return dec.Decode(&o)
	}
	renames := map[string]string{"numGpuBlocks": "num_gpu_blocks_override"}
	tests := []struct{ src, want string }{
		{`{"engine": {"numGpuBlocks": 1}}`, `unknown field "numGpuBlocks"; did you mean num_gpu_blocks_override? (renamed)`},
		{`{"engine": {"block_sise": 1}}`, `unknown field "block_sise"; did you mean block_size?`},
		{`{"qqqqqqqqqq": 1}`, `unknown field "qqqqqqqqqq"`},
	}
	for _, tc := range tests {
		if err := UnknownField(decode(tc.src), outer{}, renames); err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v, want %s", tc.src, err, tc.want)
		}
	}
	other := errors.New("boom")
	if UnknownField(other, outer{}, nil) != other || UnknownField(nil, outer{}, nil) != nil {
		t.Error("other errors must pass through")
	}
	if got := FieldNames(reflect.TypeOf(outer{})); !slices.Equal(got, []string{"X", "block_size", "engine", "groups", "name", "num_gpu_blocks_override"}) {
		t.Errorf("field names %v", got)
	}
}
