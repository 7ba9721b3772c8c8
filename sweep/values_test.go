package sweep

import (
	"slices"
	"strings"
	"testing"
)

func TestParseVary(t *testing.T) {
	for _, tc := range []struct {
		in     string
		name   string
		kind   dimKind
		values []string
	}{
		{"prefix-cache-scorer.weight=0:5:1", "prefix-cache-scorer.weight", kindWeight, []string{"0", "1", "2", "3", "4", "5"}},
		{"queue-scorer.weight=0,1,2,4", "queue-scorer.weight", kindWeight, []string{"0", "1", "2", "4"}},
		{"q.weight=0:1:0.25", "q.weight", kindWeight, []string{"0", "0.25", "0.5", "0.75", "1"}},
		{"q.weight=0:0.3:0.1", "q.weight", kindWeight, []string{"0", "0.1", "0.2", "0.3"}},
		{"q.weight=5:1:-2", "q.weight", kindWeight, []string{"5", "3", "1"}},
		{"q.weight=0:5:2", "q.weight", kindWeight, []string{"0", "2", "4"}},
		{"q.weight= 1.50 , 2e0 ,-1", "q.weight", kindWeight, []string{"1.5", "2", "-1"}},
		{"approx-prefix-cache-producer.lruCapacityPerServer=5000,31250", "approx-prefix-cache-producer.lruCapacityPerServer", kindParam, []string{"5000", "31250"}},
		{"p.lru=1e6", "p.lru", kindParam, []string{"1000000"}},
		{"p.tokenProcessorConfig.blockSizeTokens=16:64:16", "p.tokenProcessorConfig.blockSizeTokens", kindParam, []string{"16", "32", "48", "64"}},
		{`p.modelName=llama,"a:b:c",true,{"x": 1}`, "p.modelName", kindParam, []string{"llama", `"a:b:c"`, "true", `{"x":1}`}},
		{"replicas=8,16", "replicas", kindInt, []string{"8", "16"}},
		{"replicas=2:8:3", "replicas", kindInt, []string{"2", "5", "8"}},
		{"kv-blocks=1000,2000", "kv-blocks", kindInt, []string{"1000", "2000"}},
		{"kv-event-lag=0:10ms:5ms", "kv-event-lag", kindDuration, []string{"0s", "5ms", "10ms"}},
		{"kv-event-lag=0,1s,250ms", "kv-event-lag", kindDuration, []string{"0s", "1s", "250ms"}},
		{"refresh-metrics-interval=50ms,100ms", "refresh-metrics-interval", kindDuration, []string{"50ms", "100ms"}},
		{"seed=1:3:1", "seed", kindUint, []string{"1", "2", "3"}},
	} {
		d, err := ParseVary(tc.in)
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if d.Name != tc.name || d.kind != tc.kind || !slices.Equal(d.Values, tc.values) {
			t.Errorf("%s: got %s kind %d %q, want %s kind %d %q", tc.in, d.Name, d.kind, d.Values, tc.name, tc.kind, tc.values)
		}
	}
}

func TestParseVaryErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"prefix-cache-scorer.weight", "want NAME=VALUES"},
		{"=1", "empty name"},
		{"bogus=1", `unknown knob "bogus"`},
		{".weight=1", "empty plugin name"},
		{"p..x=1", "empty parameter name"},
		{"p.x.=1", "empty parameter name"},
		{"q.weight=a", `"a" is not a number`},
		{"q.weight=", "empty value"},
		{"q.weight=1,,2", "empty value"},
		{"q.weight=NaN", "not a finite number"},
		{"q.weight=inf", "not a finite number"},
		{"q.weight=0x10", "not a number"},
		{"q.weight=0:5:0", "step must not be zero"},
		{"q.weight=5:0:1", "empty: the step goes away"},
		{"q.weight=0:1e9:1", "more than 10000 values"},
		{"q.weight=1,1.0", "value 1 given twice"},
		{"q.weight=0:2:1,2", "value 2 given twice"},
		{"replicas=0", "replicas 0: must be at least 1"},
		{"replicas=1.5", `replicas "1.5": not an integer`},
		{"replicas=1:4:0.5", `"0.5" is not an integer`},
		{"kv-event-lag=5", "not a duration"},
		{"kv-event-lag=-1ms", "must not be negative"},
		{"refresh-metrics-interval=0s", "must be at least 1ms"},
		{"refresh-metrics-interval=1ns", "refresh-metrics-interval 1ns: must be at least 1ms"},
		{"refresh-metrics-interval=0:10ms:1ms", "refresh-metrics-interval 0s: must be at least 1ms"},
		{"seed=-1", "not a non-negative integer"},
		{`p.x={"a":`, "invalid JSON"},
		{"p x.weight=1", "invalid character"},
	} {
		_, err := ParseVary(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", tc.in, err, tc.want)
		}
	}
}

func TestFormatNum(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want string
	}{{0, "0"}, {3, "3"}, {0.1, "0.1"}, {31250, "31250"}, {1e6, "1000000"}, {-2.5, "-2.5"}, {1e-7, "1e-07"}, {1e21, "1e+21"}} {
		if got := formatNum(tc.in); got != tc.want {
			t.Errorf("formatNum(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestParseShard(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Shard
		err  bool
	}{{"0/4", Shard{0, 4}, false}, {"3/4", Shard{3, 4}, false}, {"0/1", Shard{0, 1}, false},
		{"4/4", Shard{}, true}, {"-1/2", Shard{}, true}, {"1", Shard{}, true}, {"a/b", Shard{}, true}, {"0/0", Shard{}, true}} {
		got, err := ParseShard(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseShard(%q) = %v, %v", tc.in, got, err)
		}
	}
	s := Shard{1, 3}
	var in []int
	for i := range 10 {
		if s.Has(i) {
			in = append(in, i)
		}
	}
	if !slices.Equal(in, []int{1, 4, 7}) {
		t.Errorf("shard 1/3 of 0..9 = %v", in)
	}
}

// FuzzParseVary: no input panics, and a parsed dimension's --vary form
// parses back to the same dimension.
func FuzzParseVary(f *testing.F) {
	for _, s := range []string{"prefix-cache-scorer.weight=0:5:1", "replicas=8,16", "kv-event-lag=0:10ms:5ms",
		`p.a.b=1,"x",true`, "q.weight=5:1:-2", "seed=1:3:1", "x=1", "a.b=::", "a.weight=1e308:1e308:1e300"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseVary(s)
		if err != nil {
			return
		}
		if len(d.Values) == 0 || len(d.Values) > maxValuesPerDim {
			t.Fatalf("%q: %d values", s, len(d.Values))
		}
		d2, err := ParseVary(d.String())
		if err != nil {
			t.Fatalf("%q → %q: %v", s, d.String(), err)
		}
		if d2.Name != d.Name || !slices.Equal(d2.Values, d.Values) {
			t.Fatalf("%q → %q → %q", s, d.String(), d2.String())
		}
	})
}
