package docs_test

import (
	"strings"
	"testing"

	"github.com/eppsim/eppsim/docs"
	"github.com/eppsim/eppsim/report"
)

// TestEveryMetricIsDefined: every number of a run summary (each path a
// threshold or an objective may name) is defined in metrics.md, which
// --out copies next to report.md.
func TestEveryMetricIsDefined(t *testing.T) {
	doc := string(docs.Metrics)
	for _, path := range report.MetricPaths() {
		segs := strings.Split(path, ".")
		leaf := ""
		for _, s := range segs {
			if s != "KEY" && s != "PRODUCER" {
				leaf = s
			}
		}
		if !strings.Contains(doc, "`"+leaf) {
			t.Errorf("%s: %q is not defined in docs/metrics.md", path, leaf)
		}
	}
	for _, group := range []string{"requests", "latency_ms", "offered_load", "throughput", "cache", "prediction.PRODUCER", "routing", "sim"} {
		if !strings.Contains(doc, "### `"+group+"`") {
			t.Errorf("docs/metrics.md has no section for %s", group)
		}
	}
	if !strings.Contains(doc, "### `classes`") {
		t.Error("docs/metrics.md has no section for classes")
	}
	for _, col := range strings.Split(report.RequestsHeader+","+report.PDColumns+","+report.ClassColumns+","+report.TimeseriesHeader, ",") {
		if !strings.Contains(doc, col) {
			t.Errorf("CSV column %s is not described in docs/metrics.md", col)
		}
	}
}
