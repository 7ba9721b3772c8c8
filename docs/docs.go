// Package docs embeds the documentation that eppsim writes next to its
// outputs: metrics.md, the definition of every metric of summary.json,
// report.md and the CLI table, so that a report always links to the
// definitions of the version that wrote it.
package docs

import _ "embed"

// Metrics is docs/metrics.md.
//
//go:embed metrics.md
var Metrics []byte
