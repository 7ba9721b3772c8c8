package filter

import (
	"testing"

	"github.com/eppsim/eppsim/epp"
)

// FuzzSelectorParams: arbitrary parameters never panic; accepted selectors
// filter without panicking and return a subset in order.
func FuzzSelectorParams(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"matchLabels":{"a":"b"}}`,
		`{"matchExpressions":[{"key":"llm-d.ai/role","operator":"In","values":["decode"]}]}`,
		`{"matchExpressions":[{"key":"x","operator":"DoesNotExist"}]}`, `null`, `[]`, `{"matchLabels":{"":""}}`,
	} {
		f.Add(s, "a", "b")
	}
	f.Fuzz(func(t *testing.T, params, k, v string) {
		p, err := tryBuild(LabelSelectorType, params, nil)
		if err != nil {
			return
		}
		eps := endpoints(map[string]string{k: v}, nil, map[string]string{"a": "b"})
		got := p.(epp.Filter).Filter(&epp.Cycle{}, &epp.Request{}, eps)
		last := -1
		for _, e := range got {
			i := 0
			for eps[i] != e {
				i++
			}
			if i <= last {
				t.Fatalf("not an ordered subset")
			}
			last = i
		}
	})
}
