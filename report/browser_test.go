package report_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/png"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eppsim/eppsim/replica"
	"github.com/eppsim/eppsim/report"
	"github.com/eppsim/eppsim/scenario"
	"github.com/eppsim/eppsim/sim"
	"github.com/eppsim/eppsim/workload"
)

// chromiumBinary finds headless Chromium: $EPPSIM_CHROMIUM, or chromium
// (Debian's package) or chromium-browser on the PATH; "" when absent.
func chromiumBinary() string {
	if b := os.Getenv("EPPSIM_CHROMIUM"); b != "" {
		return b
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// artifactDir is where the screenshots go: $EPPSIM_ARTIFACTS, or out/browser
// at the repository root (CI keeps out/ as its artifacts).
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("EPPSIM_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "out", "browser")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// writeComparison writes the --out directory of a three-config comparison
// (default, round-robin, oracle) on the embedded chat workload, as
// `eppsim run --out` does, and returns the configs' summaries.
func writeComparison(t *testing.T, dir string) {
	t.Helper()
	p, err := replica.LookupPreset("llama-3.1-8b-h100")
	if err != nil {
		t.Fatal(err)
	}
	spec := &scenario.Spec{Version: "browser-test", Trace: workload.DefaultWorkload, Workload: workload.Options{Seed: 1},
		Fleet: sim.UniformFleet(8, p), Env: sim.Options{Seed: 1, MaxRequests: 400, SampleInterval: int64(2 * time.Second)}}
	names := make([]string, len(spec.Fleet))
	for i, r := range spec.Fleet {
		names[i] = r.Name
	}
	out, err := report.NewOutput(dir, report.Meta{Version: "browser-test", Trace: spec.Trace, Seed: 1, Fleet: "8 × llama-3.1-8b-h100",
		Command: "eppsim run --max-requests 400 --replicas 8 --epp-config default --epp-config round-robin --epp-config oracle"})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Abort()
	for _, src := range []string{"default", "round-robin", "oracle"} {
		w := out.BeginRun(src, names...)
		s, err := scenario.Run(spec, scenario.ForSource(src), scenario.Hooks{OnRecord: w.AddRecord, OnSample: w.AddSample})
		if err != nil {
			t.Fatal(err)
		}
		w.End(s, names)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestReportHTMLInChromium opens report.html (and the diff.html of the run
// against itself) in headless Chromium: every image must decode, with a
// size, and the page must log no error (console, exceptions, failed
// loads); "What this run shows" and the headline table must be there. A
// full-page screenshot of each goes to the artifacts directory.
func TestReportHTMLInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("the real-browser check of report.html runs in make test-long")
	}
	bin := chromiumBinary()
	if bin == "" {
		t.Skip("chromium not found: this check needs headless Chromium (Debian package chromium: apt-get install chromium; .ci/run installs it), or EPPSIM_CHROMIUM=/path/to/chrome")
	}
	dir := t.TempDir()
	run := filepath.Join(dir, "run")
	writeComparison(t, run)
	rs, err := report.LoadRunSet(run)
	if err != nil {
		t.Fatal(err)
	}
	res, err := report.Diff(rs, rs, report.DiffOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := report.WriteDiffOutput(filepath.Join(dir, "diff"), res, 150); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The profile is removed by hand once Chromium has exited: its helper
	// processes may still be writing to it just after the browser stops.
	profile, err := os.MkdirTemp("", "eppsim-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	defer removeEventually(profile)
	wsURL, cmd, err := startChromium(ctx, bin, profile)
	if err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	ws, err := dialWS(ctx, wsURL)
	if err != nil {
		cmd.Process.Kill()
		t.Fatal(err)
	}
	c := newCDPClient(ws)
	defer func() {
		// Close the browser (it ends its helpers), then make sure.
		c.call(ctx, "", "Browser.close", nil, nil)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	}()
	arts := artifactDir(t)
	for _, page := range []struct {
		path, shot string
		images     int
		selectors  []string
	}{
		{filepath.Join(run, report.HTMLFile), "report-html.png", len(report.PlotNames),
			[]string{"#what-this-run-shows + ul.findings li", "tr.group", "figure#hit_ladder img", "a[href='metrics.md']"}},
		{filepath.Join(dir, "diff", report.DiffHTMLFile), "diff-html.png", len(report.DiffPlotNames), []string{"table", "figure img"}},
	} {
		t.Run(filepath.Base(page.path), func(t *testing.T) {
			problems, err := checkPage(ctx, c, page.path, page.images, page.selectors, filepath.Join(arts, page.shot))
			if err != nil {
				t.Fatal(err)
			}
			if len(problems) > 0 {
				t.Errorf("%s:\n%s", filepath.Base(page.path), strings.Join(problems, "\n"))
			}
			t.Logf("screenshot of %s: %s", filepath.Base(page.path), filepath.Join(arts, page.shot))
		})
	}
	// The check itself catches a broken page: an image that does not
	// decode, one fewer image than expected, a console error, an element
	// that is missing.
	bad := filepath.Join(dir, "bad.html")
	if err := os.WriteFile(bad, []byte(`<!DOCTYPE html><html><head><meta charset="utf-8"><title>bad</title></head><body>`+
		`<img alt="broken" src="data:image/png;base64,iVBORw0KGgo="><script>console.error("boom")</script></body></html>`), 0o644); err != nil {
		t.Fatal(err)
	}
	problems, err := checkPage(ctx, c, bad, 2, []string{"table"}, filepath.Join(dir, "bad.png"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(problems, "\n")
	for _, want := range []string{"1 images, want 2", `image "broken" did not load`, "no element matches table", "console.error", "boom"} {
		if !strings.Contains(text, want) {
			t.Errorf("the broken page's problems lack %q:\n%s", want, text)
		}
	}
}

// removeEventually removes dir, retrying for a few seconds while
// processes that have just exited release it.
func removeEventually(dir string) {
	for range 50 {
		if os.RemoveAll(dir) == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkPage loads path in a new tab, checks it (see
// TestReportHTMLInChromium) and saves a full-page screenshot to shot. It
// returns the problems found; err is for failures of the check itself.
func checkPage(ctx context.Context, c *cdpClient, path string, images int, selectors []string, shot string) (problems []string, err error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	var target struct {
		TargetID string `json:"targetId"`
	}
	if err := c.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &target); err != nil {
		return nil, err
	}
	defer c.call(ctx, "", "Target.closeTarget", map[string]any{"targetId": target.TargetID}, nil)
	var att struct {
		SessionID string `json:"sessionId"`
	}
	if err := c.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &att); err != nil {
		return nil, err
	}
	s := att.SessionID
	for _, m := range []string{"Page.enable", "Runtime.enable", "Log.enable"} {
		if err := c.call(ctx, s, m, nil, nil); err != nil {
			return nil, err
		}
	}
	if err := c.call(ctx, s, "Emulation.setDeviceMetricsOverride", map[string]any{"width": 1280, "height": 1000, "deviceScaleFactor": 1, "mobile": false}, nil); err != nil {
		return nil, err
	}
	u := url.URL{Scheme: "file", Path: abs}
	var nav struct {
		ErrorText string `json:"errorText"`
	}
	if err := c.call(ctx, s, "Page.navigate", map[string]any{"url": u.String()}, &nav); err != nil || nav.ErrorText != "" {
		return nil, fmt.Errorf("navigating to %s: %v %s", u.String(), err, nav.ErrorText)
	}
	collect := func(m cdpMessage) (loaded bool) {
		if m.SessionID != s {
			return false
		}
		switch m.Method {
		case "Page.loadEventFired":
			return true
		case "Runtime.consoleAPICalled":
			var p struct {
				Type string            `json:"type"`
				Args []json.RawMessage `json:"args"`
			}
			json.Unmarshal(m.Params, &p)
			if p.Type == "error" || p.Type == "assert" || p.Type == "warning" {
				problems = append(problems, "console."+p.Type+": "+string(m.Params))
			}
		case "Runtime.exceptionThrown":
			problems = append(problems, "exception: "+string(m.Params))
		case "Log.entryAdded":
			var p struct {
				Entry struct {
					Level, Text, URL string
				} `json:"entry"`
			}
			json.Unmarshal(m.Params, &p)
			if p.Entry.Level == "error" || p.Entry.Level == "warning" {
				problems = append(problems, "log "+p.Entry.Level+": "+p.Entry.Text+" "+p.Entry.URL)
			}
		}
		return false
	}
	for loaded := false; !loaded; {
		select {
		case m := <-c.events:
			loaded = collect(m)
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: no load event: %w", path, ctx.Err())
		}
	}
	// Every image decodes, with a size.
	const js = `Promise.all([...document.images].map(i => i.decode().then(
		() => ({alt: i.alt, ok: i.complete, w: i.naturalWidth, h: i.naturalHeight}),
		e => ({alt: i.alt, ok: false, err: String(e)}))))`
	var ev struct {
		Result struct {
			Value []struct {
				Alt, Err string
				OK       bool
				W, H     int
			} `json:"value"`
		} `json:"result"`
		ExceptionDetails json.RawMessage `json:"exceptionDetails"`
	}
	if err := c.call(ctx, s, "Runtime.evaluate", map[string]any{"expression": js, "awaitPromise": true, "returnByValue": true}, &ev); err != nil || ev.ExceptionDetails != nil {
		return nil, fmt.Errorf("checking images: %v %s", err, ev.ExceptionDetails)
	}
	if len(ev.Result.Value) != images {
		problems = append(problems, fmt.Sprintf("%d images, want %d", len(ev.Result.Value), images))
	}
	for _, im := range ev.Result.Value {
		if !im.OK || im.W <= 0 || im.H <= 0 {
			problems = append(problems, fmt.Sprintf("image %q did not load: %+v", im.Alt, im))
		}
	}
	for _, sel := range selectors {
		var found struct {
			Result struct {
				Value bool `json:"value"`
			} `json:"result"`
		}
		q, _ := json.Marshal(sel)
		if err := c.call(ctx, s, "Runtime.evaluate", map[string]any{"expression": "document.querySelector(" + string(q) + ") !== null", "returnByValue": true}, &found); err != nil {
			return nil, err
		}
		if !found.Result.Value {
			problems = append(problems, "no element matches "+sel)
		}
	}
	// A full-page screenshot for the CI artifacts.
	var lm struct {
		CSSContentSize struct{ Width, Height float64 } `json:"cssContentSize"`
	}
	if err := c.call(ctx, s, "Page.getLayoutMetrics", nil, &lm); err != nil {
		return nil, err
	}
	var sc struct {
		Data string `json:"data"`
	}
	clip := map[string]any{"x": 0, "y": 0, "width": lm.CSSContentSize.Width, "height": lm.CSSContentSize.Height, "scale": 1}
	if err := c.call(ctx, s, "Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true, "clip": clip}, &sc); err != nil {
		return nil, err
	}
	img, err := base64.StdEncoding.DecodeString(sc.Data)
	if err != nil {
		return nil, fmt.Errorf("screenshot: %w", err)
	}
	if cfg, err := png.DecodeConfig(bytes.NewReader(img)); err != nil || cfg.Width < 500 || cfg.Height < 100 {
		return nil, fmt.Errorf("screenshot: %v, %dx%d", err, cfg.Width, cfg.Height)
	}
	if err := os.WriteFile(shot, img, 0o644); err != nil {
		return nil, err
	}
	// Late errors (none expected from a static page): what arrived by now.
	for settle := time.After(300 * time.Millisecond); ; {
		select {
		case m := <-c.events:
			collect(m)
			continue
		case <-settle:
		}
		break
	}
	return problems, nil
}
