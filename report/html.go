package report

import (
	"bytes"
	"html"
	"strconv"
)

const htmlStyle = `body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2em auto;max-width:1200px;padding:0 1em;color:#222}
h1{font-size:1.6em}h2{font-size:1.25em;margin-top:1.6em;border-bottom:1px solid #ddd}
dl{display:grid;grid-template-columns:max-content auto;gap:.2em 1em}dt{font-weight:600}dd{margin:0}
table{border-collapse:collapse;font-variant-numeric:tabular-nums}
th,td{border:1px solid #ccc;padding:.3em .7em}td{text-align:right}td:first-child,th:first-child{text-align:left}
th{background:#f2f2f2}tr:nth-child(even) td{background:#fafafa}
figure{margin:1.2em 0}figcaption{font-weight:600;margin-bottom:.4em}
figure svg{max-width:100%;height:auto;border:1px solid #eee}
code{background:#f4f4f4;padding:0 .2em}p.note{color:#555;font-size:.9em}
`

// html renders report.html: self-contained, with the plots inline as SVG.
func (o *Output) html(plots []renderedPlot) []byte {
	var b bytes.Buffer
	esc := html.EscapeString
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>eppsim report</title>\n<style>\n")
	b.WriteString(htmlStyle)
	b.WriteString("</style>\n</head>\n<body>\n<h1>eppsim report</h1>\n<dl>\n")
	item := func(k, v string) {
		if v != "" {
			b.WriteString("<dt>" + k + "</dt><dd>" + v + "</dd>\n")
		}
	}
	item("trace", "<code>"+esc(o.meta.Trace)+"</code>")
	item("fleet", esc(o.meta.Fleet))
	item("seed", strconv.FormatUint(o.meta.Seed, 10))
	item("eppsim version", esc(o.meta.Version))
	if o.meta.Command != "" {
		item("command", "<code>"+esc(o.meta.Command)+"</code>")
	}
	b.WriteString("</dl>\n<h2>Headline metrics</h2>\n<table>\n<thead><tr><th>metric</th>")
	for _, r := range o.runs {
		b.WriteString("<th>" + esc(r.name) + "</th>")
	}
	b.WriteString("</tr></thead>\n<tbody>\n")
	for _, m := range o.headline() {
		b.WriteString("<tr><td>" + esc(m.label) + "</td>")
		for _, r := range o.runs {
			b.WriteString("<td>" + esc(m.cell(r)) + "</td>")
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</tbody>\n</table>\n")
	b.WriteString("<p class=\"note\">Latencies are nearest-rank percentiles over completed requests after warm-up. " +
		"Hit ratios are token-weighted over the fleet; regret is Σ(oracle − true) cached tokens. " +
		"Prediction rows compare the approximate prefix producer's predicted match with the true reuse on the chosen replica.</p>\n")
	if notes := o.allNotes(); len(notes) > 0 {
		b.WriteString("<h2>Notes</h2>\n<ul>\n")
		for _, n := range notes {
			b.WriteString("<li>" + esc(n) + "</li>\n")
		}
		b.WriteString("</ul>\n")
	}
	b.WriteString("<h2>Plots</h2>\n")
	for _, p := range plots {
		b.WriteString("<figure id=\"" + p.name + "\">\n<figcaption>" + esc(plotTitles[p.name]) +
			" <small>(" + p.name + ".svg, " + p.name + ".png)</small></figcaption>\n")
		b.Write(inlineSVG(p.svg))
		b.WriteString("</figure>\n")
	}
	b.WriteString("</body>\n</html>\n")
	return b.Bytes()
}

// inlineSVG strips the XML prolog and comments before the <svg> element so
// that the document can be embedded in HTML.
func inlineSVG(svg []byte) []byte {
	if i := bytes.Index(svg, []byte("<svg")); i >= 0 {
		svg = svg[i:]
	}
	return svg
}
