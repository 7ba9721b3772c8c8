package report

import (
	"bytes"
	"encoding/base64"
	"html"
	"image/png"
	"slices"
	"strconv"
)

const htmlStyle = `body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2em auto;max-width:1200px;padding:0 1em;color:#222}
h1{font-size:1.6em}h2{font-size:1.25em;margin-top:1.6em;border-bottom:1px solid #ddd}
dl{display:grid;grid-template-columns:max-content auto;gap:.2em 1em}dt{font-weight:600}dd{margin:0}
table{border-collapse:collapse;font-variant-numeric:tabular-nums}
th,td{border:1px solid #ccc;padding:.3em .7em}td{text-align:right}td:first-child,th:first-child{text-align:left}
th{background:#f2f2f2}tr:nth-child(even) td{background:#fafafa}tr.group td{background:#e8eef6;font-weight:600;text-align:left}
figure{margin:1.2em 0}figcaption{font-weight:600;margin-bottom:.4em}
figure img{max-width:100%;height:auto;border:1px solid #eee}
code{background:#f4f4f4;padding:0 .2em}p.note{color:#555;font-size:.9em}ul.findings li{margin:.3em 0}
`

// html renders report.html: self-contained, with the plots as PNG images
// in data: URLs (the SVG files are next to it).
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
	b.WriteString("</dl>\n")
	runs := o.namedSummaries()

	b.WriteString("<h2 id=\"what-this-run-shows\">What this run shows</h2>\n<ul class=\"findings\">\n")
	for _, f := range Findings(runs) {
		b.WriteString("<li>" + esc(f) + "</li>\n")
	}
	b.WriteString("</ul>\n<p class=\"note\">Every metric is defined, with its formula, unit and when it is undefined, in <a href=\"" +
		MetricsDocLink + "\">" + MetricsDocLink + "</a> (eppsim's <code>docs/metrics.md</code>, copied next to this report).</p>\n")

	b.WriteString("<h2>Headline metrics</h2>\n<table>\n<thead><tr><th>metric</th>")
	for _, r := range o.runs {
		b.WriteString("<th>" + esc(r.name) + "</th>")
	}
	b.WriteString("</tr></thead>\n<tbody>\n")
	for _, row := range HeadlineRows(runs) {
		if row.Label == "" {
			b.WriteString("<tr class=\"group\"><td colspan=\"" + strconv.Itoa(len(o.runs)+1) + "\">" + esc(row.Group) + "</td></tr>\n")
			continue
		}
		b.WriteString("<tr><td>" + esc(row.Label) + "</td>")
		for _, c := range row.Cells {
			b.WriteString("<td>" + esc(c) + "</td>")
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</tbody>\n</table>\n<p class=\"note\">" + esc(tableNote) + "</p>\n")

	byName := map[string]renderedPlot{}
	for _, p := range plots {
		byName[p.name] = p
	}
	if HasStages(runs) {
		b.WriteString("<h2 id=\"stages\">Per-stage results</h2>\n<p class=\"note\">" + esc(stageNote) + "</p>\n")
		for _, r := range runs {
			header, rows := StageTable(r.Summary)
			if header == nil {
				continue
			}
			b.WriteString("<h3>" + esc(r.Name) + "</h3>\n")
			writeGridTable(&b, ` class="stages"`, header, rows)
		}
		for _, name := range StagePlotNames {
			if p, ok := byName[name]; ok {
				writeFigure(&b, p, plotTitles[name], o.DPI)
			}
		}
	}
	b.WriteString("<h2>Hit-rate ladder</h2>\n<p>" + esc(ladderNote) + "</p>\n")
	if p, ok := byName[PlotHitLadder]; ok {
		writeFigure(&b, p, plotTitles[p.name], o.DPI)
	}

	if cols := causeColumns(runs); len(cols) > 0 {
		b.WriteString("<h2>Prediction error by cause</h2>\n<p>" + esc(causeNote) + "</p>\n")
		writeHTMLTable(&b, "cause", cols, causeRows(cols))
		b.WriteString("<p class=\"note\">" + esc(rateNote) + "</p>\n")
		rcols := rateColumns(cols)
		writeHTMLTable(&b, "per-request rate", rcols, rateRows(rcols))
	}

	if header, rows := classTable(runs); len(rows) > 0 {
		b.WriteString("<h2>Priority classes</h2>\n<p>" + esc(classNote) + "</p>\n")
		writeGridTable(&b, "", header, rows)
		if p, ok := byName[PlotTTFTByClass]; ok {
			writeFigure(&b, p, plotTitles[p.name], o.DPI)
		}
	}

	b.WriteString("<h2>Routing</h2>\n<ul>\n")
	for _, line := range o.routingLines() {
		b.WriteString("<li>" + esc(line) + "</li>\n")
	}
	b.WriteString("</ul>\n")
	if names := o.replicaOrder(); len(names) > 0 {
		b.WriteString("<table>\n<thead><tr><th>replica (requests)</th>")
		for _, r := range o.runs {
			b.WriteString("<th>" + esc(r.name) + "</th>")
		}
		b.WriteString("</tr></thead>\n<tbody>\n")
		for _, n := range names {
			b.WriteString("<tr><td>" + esc(n) + "</td>")
			for _, r := range o.runs {
				b.WriteString("<td>" + esc(replicaCell(r.sum, n)) + "</td>")
			}
			b.WriteString("</tr>\n")
		}
		b.WriteString("</tbody>\n</table>\n")
	}

	if notes := o.allNotes(); len(notes) > 0 {
		b.WriteString("<h2>Notes</h2>\n<ul>\n")
		for _, n := range notes {
			b.WriteString("<li>" + esc(n) + "</li>\n")
		}
		b.WriteString("</ul>\n")
	}
	b.WriteString("<h2>Plots</h2>\n")
	for _, p := range plots {
		if p.name == PlotHitLadder || p.name == PlotTTFTByClass || slices.Contains(StagePlotNames, p.name) {
			continue
		}
		writeFigure(&b, p, plotTitles[p.name], o.DPI)
	}
	b.WriteString("</body>\n</html>\n")
	return b.Bytes()
}

// writeHTMLTable writes a table with one column per cause column.
func writeHTMLTable(b *bytes.Buffer, corner string, cols []causeColumn, rows []Row) {
	esc := html.EscapeString
	b.WriteString("<table>\n<thead><tr><th>" + esc(corner) + "</th>")
	for _, c := range cols {
		b.WriteString("<th>" + esc(c.title) + "</th>")
	}
	b.WriteString("</tr></thead>\n<tbody>\n")
	for _, row := range rows {
		b.WriteString("<tr><td>" + esc(row.Label) + "</td>")
		for _, c := range row.Cells {
			b.WriteString("<td>" + esc(c) + "</td>")
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</tbody>\n</table>\n")
}

// writeGridTable writes a table of a header row and string cells; attrs
// are the table element's attributes (with a leading space), if any.
func writeGridTable(b *bytes.Buffer, attrs string, header []string, rows [][]string) {
	esc := html.EscapeString
	b.WriteString("<table" + attrs + ">\n<thead><tr>")
	for _, h := range header {
		b.WriteString("<th>" + esc(h) + "</th>")
	}
	b.WriteString("</tr></thead>\n<tbody>\n")
	for _, row := range rows {
		b.WriteString("<tr>")
		for _, c := range row {
			b.WriteString("<td>" + esc(c) + "</td>")
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</tbody>\n</table>\n")
}

// writeFigure writes a plot as a figure holding its PNG as a data: URL,
// displayed at its size in CSS pixels (96 per inch).
func writeFigure(b *bytes.Buffer, p renderedPlot, title string, dpi int) {
	esc := html.EscapeString
	b.WriteString("<figure id=\"" + p.name + "\">\n<figcaption>" + esc(title) +
		" <small>(" + p.name + ".svg, " + p.name + ".png)</small></figcaption>\n<img alt=\"" + esc(title) + "\"")
	if cfg, err := png.DecodeConfig(bytes.NewReader(p.png)); err == nil && dpi > 0 {
		b.WriteString(" width=\"" + strconv.Itoa(cfg.Width*96/dpi) + "\" height=\"" + strconv.Itoa(cfg.Height*96/dpi) + "\"")
	}
	b.WriteString(" src=\"data:image/png;base64,")
	b.WriteString(base64.StdEncoding.EncodeToString(p.png))
	b.WriteString("\">\n</figure>\n")
}
