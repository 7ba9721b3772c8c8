package latency

import (
	"strings"
	"testing"
)

// TestParseFieldBounds: every integer field of an experiments file that is
// given must be in vLLM's range; 0 is refused like a negative value (it
// used to become the default silently: max_num_seqs 0 ran as 128), and
// the error names the file, the experiment and the field. Absent and null
// fields take the defaults.
func TestParseFieldBounds(t *testing.T) {
	const run = `{"id": "r", "model": "Qwen/Qwen2.5-7B-Instruct", "hardware": "H100", "tp": %TP%, "dp": %DP%,
	  "engine": {%ENGINE%},
	  "workload": {"shared_prefix_requested": {"system_prompt_len": 10, "question_len": 40, "output_len": 20 %SP%},
	   "stages": [%STAGES%]}}`
	doc := func(repl ...string) string {
		d := run
		vals := map[string]string{"%TP%": "1", "%DP%": "null", "%ENGINE%": `"max_num_seqs": 8`, "%SP%": "",
			"%STAGES%": `{"rate_rps": 1, "duration_s": 5}`}
		for i := 0; i+1 < len(repl); i += 2 {
			vals[repl[i]] = repl[i+1]
		}
		for k, v := range vals {
			d = strings.ReplaceAll(d, k, v)
		}
		return `{"experiments": [` + d + `]}`
	}
	eng := func(s string) []string { return []string{"%ENGINE%", s} }
	const where = "runs.json: experiments[0] (r): "
	bad := []struct {
		name string
		repl []string
		want string
	}{
		{"max_num_seqs 0", eng(`"max_num_seqs": 0`), "engine.max_num_seqs: must be at least 1, got 0"},
		{"max_num_seqs -7", eng(`"max_num_seqs": -7`), "engine.max_num_seqs: must be at least 1, got -7"},
		{"max_num_batched_tokens 0", eng(`"max_num_batched_tokens": 0`), "engine.max_num_batched_tokens: must be at least 1, got 0"},
		{"max_model_len 0", eng(`"max_model_len": 0`), "engine.max_model_len: must be at least 1, got 0"},
		{"max_model_len -1", eng(`"max_model_len": -1`), "engine.max_model_len: must be at least 1, got -1"},
		{"block_size 0", eng(`"block_size": 0`), "engine.block_size: must be at least 1, got 0"},
		{"total_gpu_kv_blocks 0", eng(`"total_gpu_kv_blocks": 0`), "engine.total_gpu_kv_blocks: must be at least 2, got 0"},
		{"total_gpu_kv_blocks 1", eng(`"total_gpu_kv_blocks": 1`), "engine.total_gpu_kv_blocks: must be at least 2, got 1"},
		{"cpu_kv_blocks -1", eng(`"cpu_kv_blocks": -1`), "engine.cpu_kv_blocks: must be at least 0, got -1"},
		{"gpu_memory_utilization 0", eng(`"gpu_memory_utilization": 0`), "engine.gpu_memory_utilization: must be in (0, 1], got 0"},
		{"gpu_memory_utilization 1.5", eng(`"gpu_memory_utilization": 1.5`), "engine.gpu_memory_utilization: must be in (0, 1], got 1.5"},
		{"max_num_seqs 1.5", eng(`"max_num_seqs": 1.5`), "runs.json: json: cannot unmarshal number 1.5 into Go struct field Engine.experiments.engine.max_num_seqs"},
		{"tp 0", []string{"%TP%", "0"}, "tp: must be at least 1, got 0"},
		{"tp -2", []string{"%TP%", "-2"}, "tp: must be at least 1, got -2"},
		{"dp 0", []string{"%DP%", "0"}, "dp: must be at least 1, got 0"},
		{"dp -2", []string{"%DP%", "-2"}, "dp: must be at least 1, got -2"},
		{"num_groups -1", []string{"%SP%", `, "num_groups": -1`}, "workload.shared_prefix_requested.num_groups: must be at least 0, got -1"},
		{"system_prompt_len -5", []string{"%SP%", `, "system_prompt_len": -5`}, "workload.shared_prefix_requested.system_prompt_len: must be at least 0, got -5"},
		{"a billion requests", []string{"%STAGES%", `{"rate_rps": 1000, "duration_s": 1000000}`}, "workload.stages[0]: more than 1000000 requests in all"},
		{"max_model_len beyond the KV cache", eng(`"max_model_len": 100000000`), "max_model_len 100000000 needs"},
		{"rate beyond inference-perf's", []string{"%STAGES%", `{"rate_rps": 2000000, "duration_s": 0.1}`}, "workload: "},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			d := doc(c.repl...)
			_, err := Parse([]byte(d), "runs.json")
			if err == nil {
				t.Fatalf("accepted:\n%s", d)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "runs.json: ") {
				t.Errorf("error %q, want it to name the file and say %q", err, c.want)
			}
			if !strings.HasPrefix(c.want, "runs.json") && !strings.HasPrefix(err.Error(), where) {
				t.Errorf("error %q does not name the experiment (%q)", err, where)
			}
		})
	}
	// Absent, null and legitimate zeros are accepted.
	for _, repl := range [][]string{
		eng(``),
		eng(`"max_num_seqs": null, "max_model_len": null, "total_gpu_kv_blocks": null, "cpu_kv_blocks": null, "gpu_memory_utilization": null`),
		eng(`"cpu_kv_blocks": 0, "total_gpu_kv_blocks": 2000, "gpu_memory_utilization": 0.9`),
		{"%SP%", `, "num_groups": 0, "num_prompts_per_group": 0, "system_prompt_len": 0`},
		{"%DP%", "1"},
	} {
		if _, err := Parse([]byte(doc(repl...)), "runs.json"); err != nil {
			t.Errorf("%v: %v", repl, err)
		}
	}
}
