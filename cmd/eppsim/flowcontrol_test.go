package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// overloadConfig turns flow control on with priority-holdback ceilings
// (flow-control.md §10: band 5 gated at saturation 1, band −1 at 0.5), a
// 2 s queueing budget (§6.4), room for 10 queued requests in each
// negative-priority band (§3.2, §6.2) and in-flight eviction (§12), so an
// overloaded run reaches every flow-control outcome.
const overloadConfig = `apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
featureGates: [flowControl]
plugins:
- type: queue-scorer
- type: priority-holdback-policy
  parameters: {minCeiling: 0.5}
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: queue-scorer
flowControl:
  defaultRequestTTL: 2s
  usageLimitPolicyPluginRef: priority-holdback-policy
  defaultNegativePriorityBand: {maxRequests: 10}
  enableEviction: true
`

// overloadTrace writes an OpenAI JSONL trace of 160 completions 20 ms
// apart (50 req/s of 3,008-token prompts and 40 output tokens, several
// times what one replica serves), every third naming the objective "hi"
// and the rest "lo" through x_objective.
func overloadTrace(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	for i := range 160 {
		obj := "lo"
		if i%3 == 0 {
			obj = "hi"
		}
		prompt := make([]string, 0, 3008)
		for range 8 {
			prompt = append(prompt, strconv.Itoa(1000+i))
		}
		for k := range 3000 {
			prompt = append(prompt, strconv.Itoa(2000+k))
		}
		fmt.Fprintf(&b, `{"x_arrival_ms": %d, "x_objective": %q, "x_output_tokens": 40, "body": {"model": "m", "prompt": [%s], "max_tokens": 40}}`+"\n",
			i*20, obj, strings.Join(prompt, ","))
	}
	path := filepath.Join(dir, "overload.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRunFlowControlConservation: under overload, with the legacy gate
// (default) and with flow control (overloadConfig), every request of the
// trace ends in exactly one outcome, EPP-side shedding included: one row
// per request in requests.csv, completed or rejected with an HTTP status
// and a cause, the causes adding up to the summary's counts; the high
// class loses nothing; and the same command twice (configs one after the
// other, then at once) writes byte-identical requests.csv and
// summary.json (wall-clock fields and command line aside). With -short
// the second run prints the summary (--json) instead of writing every
// file, whose plots are slow under the race detector, and its summary
// must hold the same values.
func TestRunFlowControlConservation(t *testing.T) {
	dir := t.TempDir()
	trace := overloadTrace(t, dir)
	cfg := filepath.Join(dir, "fc.yaml")
	if err := os.WriteFile(cfg, []byte(overloadConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	var outs [2]string
	var printed string
	for i, workers := range []string{"1", "2"} {
		outs[i] = filepath.Join(dir, "out"+workers)
		args := []string{"run", "--trace", trace, "--replicas", "1", "--inference-objective", "hi=5",
			"--inference-objective", "lo=-1", "--epp-config", "default", "--epp-config", cfg,
			"--workers", workers, "--progress", "never", "--out", outs[i]}
		if i == 1 && testing.Short() {
			args = append(args[:len(args)-2], "--json")
		}
		out, _, err := runCLI(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		printed = out
	}
	if testing.Short() {
		var a, b any
		sj, _ := os.ReadFile(filepath.Join(outs[0], "summary.json"))
		if err := json.Unmarshal(sj, &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(printed), &b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(dropKeys(a.(map[string]any)["runs"]), dropKeys(b.(map[string]any)["runs"])) {
			t.Error("the summaries of two identical runs differ")
		}
	} else {
		for _, name := range []string{"summary.json", "requests.csv"} {
			a, _ := os.ReadFile(filepath.Join(outs[0], name))
			b, _ := os.ReadFile(filepath.Join(outs[1], name))
			if name == "summary.json" {
				a, b = wallFree.ReplaceAll(a, nil), wallFree.ReplaceAll(b, nil)
				a, b = commandLineRE.ReplaceAll(a, nil), commandLineRE.ReplaceAll(b, nil)
			}
			if len(a) == 0 || !bytes.Equal(a, b) {
				t.Errorf("%s differs between two identical runs (or is empty)", name)
			}
		}
	}

	f, err := os.Open(filepath.Join(outs[0], "requests.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	type tally struct {
		ids                 map[string]bool
		completed, rejected int
		causes, statuses    map[string]int
		hiRejected          int
	}
	got := map[string]*tally{}
	for _, r := range rows[1:] {
		c := r[col["config"]]
		if got[c] == nil {
			got[c] = &tally{ids: map[string]bool{}, causes: map[string]int{}, statuses: map[string]int{}}
		}
		g := got[c]
		id := r[col["id"]]
		if g.ids[id] {
			t.Fatalf("%s: request %s has two rows", c, id)
		}
		g.ids[id] = true
		switch r[col["outcome"]] {
		case "completed":
			g.completed++
			if r[col["cause"]] != "" || r[col["http_status"]] != "" || r[col["ttft_ms"]] == "" {
				t.Errorf("%s: completed request %s: %v", c, id, r)
			}
		case "rejected":
			g.rejected++
			cause := r[col["cause"]]
			if cause == "" || r[col["http_status"]] == "" {
				t.Errorf("%s: rejected request %s without a cause or status: %v", c, id, r)
			}
			g.causes[cause]++
			g.statuses[r[col["http_status"]]]++
			if r[col["objective"]] == "hi" {
				g.hiRejected++
			}
		default:
			t.Errorf("%s: request %s outcome %q", c, id, r[col["outcome"]])
		}
		if want := map[string]string{"hi": "5", "lo": "-1"}[r[col["objective"]]]; r[col["priority"]] != want {
			t.Errorf("%s: request %s objective %q priority %q", c, id, r[col["objective"]], r[col["priority"]])
		}
	}

	var doc struct {
		Runs map[string]struct {
			Requests struct {
				Total, Completed, Rejected int
				InFlight                   int `json:"in_flight_at_end"`
			}
			Classes struct {
				RejectedByCause map[string]int `json:"rejected_by_cause"`
				ByClass         []struct {
					Objective           string
					Requests, Completed int
					Rejected            map[string]int
				} `json:"by_class"`
			}
		}
	}
	sj, _ := os.ReadFile(filepath.Join(outs[0], "summary.json"))
	if err := json.Unmarshal(sj, &doc); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"default", "fc"} {
		g, s := got[c], doc.Runs[c]
		if g == nil || len(g.ids) != 160 || g.completed+g.rejected != 160 {
			t.Fatalf("%s: %+v, want 160 requests each in one row", c, g)
		}
		if s.Requests.Total != 160 || s.Requests.Completed != g.completed || s.Requests.Rejected != g.rejected || s.Requests.InFlight != 0 {
			t.Errorf("%s: summary requests %+v, requests.csv %d completed %d rejected", c, s.Requests, g.completed, g.rejected)
		}
		if fmt.Sprint(s.Classes.RejectedByCause) != fmt.Sprint(g.causes) {
			t.Errorf("%s: rejected_by_cause %v, requests.csv %v", c, s.Classes.RejectedByCause, g.causes)
		}
		n := 0
		for _, row := range s.Classes.ByClass {
			sum := row.Completed
			for _, k := range row.Rejected {
				sum += k
			}
			if sum != row.Requests {
				t.Errorf("%s class %s: %d completed + %v rejected ≠ %d requests", c, row.Objective, row.Completed, row.Rejected, row.Requests)
			}
			n += row.Requests
		}
		if n != 160 {
			t.Errorf("%s: the classes hold %d requests, want 160", c, n)
		}
		if g.hiRejected != 0 {
			t.Errorf("%s: %d high-priority requests rejected", c, g.hiRejected)
		}
	}
	// The legacy gate sheds only sheddable requests, with 429 (§4); flow
	// control rejects at capacity, expires on the sweep grid and evicts,
	// each with 429 (§7).
	if d := got["default"]; len(d.causes) != 1 || d.causes["legacy-saturated"] == 0 || d.statuses["429"] != d.rejected {
		t.Errorf("default: causes %v, statuses %v", d.causes, d.statuses)
	}
	if fc := got["fc"]; fc.causes["fc-capacity"] == 0 || fc.causes["fc-ttl-expired"] == 0 || fc.causes["evicted"] == 0 ||
		len(fc.causes) != 3 || fc.statuses["429"] != fc.rejected {
		t.Errorf("fc: causes %v, statuses %v", fc.causes, fc.statuses)
	}
}

// dropKeys removes from a decoded JSON document what differs between two
// identical runs: the wall-clock fields and the command line.
func dropKeys(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for _, k := range []string{"wall_s", "requests_per_wall_s", "command"} {
			delete(x, k)
		}
		for k, e := range x {
			x[k] = dropKeys(e)
		}
	case []any:
		for i, e := range x {
			x[i] = dropKeys(e)
		}
	}
	return v
}
