package latency

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// FuzzParse: any experiments file is read or refused with the file named,
// never a panic; what is read has experiments with unique ids; a byte order
// mark before it changes nothing.
func FuzzParse(f *testing.F) {
	f.Add([]byte(miniFile))
	if data, err := os.ReadFile(experimentsFile); err == nil {
		f.Add(data)
	}
	f.Add([]byte("\xef\xbb\xbf" + `{"experiments": []}`))
	f.Add([]byte(`{"experiments": [{"id": "a", "model": "meta-llama/Llama-3.1-8B-Instruct", "hardware": "H100", "tp": 1, "dp": 2}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data, "e.json")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "e.json: ") {
				t.Fatalf("error %q does not name the file", err)
			}
		} else {
			if len(file.Experiments) == 0 {
				t.Fatal("no experiments accepted")
			}
			seen := map[string]bool{}
			for _, e := range file.Experiments {
				if e.ID == "" || seen[e.ID] || e.TP < 1 {
					t.Fatalf("experiment %+v accepted", e)
				}
				seen[e.ID] = true
			}
		}
		bom, bomErr := Parse(append([]byte("\xef\xbb\xbf"), data...), "e.json")
		if strings.HasPrefix(string(data), "\xef\xbb\xbf") {
			return
		}
		// (Not reflect.DeepEqual: measurements may be NaN.)
		if fmt.Sprint(err) != fmt.Sprint(bomErr) || (err == nil && !slices.Equal(ids(file), ids(bom))) {
			t.Fatalf("with a byte order mark: %v; without: %v", bomErr, err)
		}
	})
}

func ids(f *File) []string {
	var out []string
	for _, e := range f.Experiments {
		out = append(out, e.ID)
	}
	return out
}
