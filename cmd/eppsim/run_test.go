package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestRunBuiltinSideBySide(t *testing.T) {
	out, _, err := runCLI(t, "run", "--max-requests", "40", "--replicas", "2", "--epp-config", "default", "--epp-config", "default", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Runs map[string]struct {
			Summary struct {
				Requests struct{ Total, Completed int }
				Cache    struct {
					True   float64 `json:"true_hit_ratio"`
					Oracle float64 `json:"oracle_hit_ratio"`
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("bad JSON: %v\n%s", err, out)
	}
	s := doc.Runs["default"].Summary
	if s.Requests.Total != 40 || s.Requests.Completed != 40 || s.Cache.Oracle < s.Cache.True || s.Cache.True <= 0 {
		t.Fatalf("summary %+v", s)
	}
	table, _, err := runCLI(t, "run", "--max-requests", "20", "--replicas", "2")
	if err != nil || !strings.Contains(table, "true hit ratio") || !strings.Contains(table, "20/20") {
		t.Fatalf("table output (%v):\n%s", err, table)
	}
}

func TestRunBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"run", "--preset", "nope"},
		{"run", "--replicas", "0"},
		{"run", "--trace", "/nonexistent/trace.jsonl"},
		{"run", "--epp-config", "/nonexistent/config.yaml"},
	} {
		if _, _, err := runCLI(t, args...); err == nil || exitCode(err) != 2 {
			t.Errorf("%v: err %v (exit %d), want exit 2", args, err, exitCode(err))
		}
	}
}
