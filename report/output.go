package report

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/eppsim/eppsim/docs"
	"github.com/eppsim/eppsim/sim"
)

// Meta describes the run set for the report header.
type Meta struct {
	// Version is the eppsim version; Trace the workload (file or
	// builtin:NAME); Seed the run seed; Fleet a one-line description of the
	// fleet (e.g. "4 × llama-3.1-8b-h100"); Command the command line.
	Version, Trace string
	Seed           uint64
	Fleet          string
	Command        string
	// PD adds the P/D columns (PDColumns) to requests.csv: set it when a
	// config of the run set can disaggregate, so that other runs' files
	// keep their columns.
	PD bool
	// Classes adds the request identity and admission columns
	// (ClassColumns) to requests.csv: set it when a config has flow control
	// on or the workload has priority classes, objectives or fairness IDs.
	Classes bool
}

// File names written by Output.Close.
const (
	SummaryFile    = "summary.json"
	RequestsFile   = "requests.csv"
	TimeseriesFile = "timeseries.csv"
	MarkdownFile   = "report.md"
	HTMLFile       = "report.html"
	// MetricsFile is a copy of eppsim's docs/metrics.md, which report.md
	// and report.html link to.
	MetricsFile = "metrics.md"
)

// Plot base names; each is written as NAME.svg and NAME.png.
const (
	PlotHitLadder       = "hit_ladder"
	PlotTTFTCDF         = "ttft_cdf"
	PlotPredictedVsTrue = "predicted_vs_true"
	PlotHitRatio        = "hit_ratio_over_time"
	PlotReplicaLoad     = "replica_load"
)

// PlotNames lists the plots in the order the reports show them.
var PlotNames = []string{PlotHitLadder, PlotTTFTCDF, PlotPredictedVsTrue, PlotHitRatio, PlotReplicaLoad}

// RequestsHeader and TimeseriesHeader are the CSV header lines.
const (
	RequestsHeader = "config,id,session,turn,arrival_s,replica,prompt_tokens,output_tokens,cached_tokens," +
		"oracle_cached_tokens,routed_cached_tokens,infinite_cached_tokens,predicted_fraction,predicted_precise_fraction,ttft_ms,e2e_ms,queue_ms," +
		"preemptions,tied,outcome,reason,warmup"
	TimeseriesHeader = "config,time_s,replica,waiting,running,kv_usage,hit_ratio"
	// PDColumns follow RequestsHeader's when the run set has a P/D
	// configuration (Meta.PD): the record's PD part (sim.PDRecord).
	PDColumns = "disaggregated,pd_reason,decider_prompt_tokens,decider_cached_tokens,prefill_replica,prefill_queue_ms,prefill_ms," +
		"decode_queue_ms,transfer_ms,pull_wait_ms,decode_ms,pulled_blocks,transfer_bytes,decode_hit_tokens,decode_routed_cached_tokens"
	// ClassColumns follow (after any PDColumns) when Meta.Classes is set:
	// the request's identity (objective, priority, fairness ID), its waits
	// in the EPP (flow control, a data producer's window) and, when
	// rejected, the HTTP status and cause.
	ClassColumns = "objective,priority,fairness_id,epp_queue_ms,producer_wait_ms,http_status,cause"
)

// maxScatter bounds the predicted-vs-true points kept per config.
const maxScatter = 5000

// Output collects one or more config runs and writes the --out directory:
// summary.json, requests.csv, timeseries.csv, report.md, report.html and
// the plots as SVG and PNG.
//
// Request and sample rows are streamed to temporary files in the directory
// as they arrive, so memory stays bounded on long traces: per record the
// Output keeps one float32 (TTFT) plus a fixed-size reservoir of
// predicted/true pairs; per sample it keeps time series that are coarsened
// (adjacent bins merged) beyond a fixed number of points.
//
// Close writes every file to a temporary name in the directory and renames
// it into place, so an interrupted run leaves no half-written result; files
// already in the directory that Close does not write are left alone. Runs
// may record concurrently through their RunWriters (BeginRun); everything
// else about an Output — StartRun and the methods that act on its run,
// Close, Abort — belongs to one goroutine.
type Output struct {
	dir  string
	meta Meta
	// DPI is the resolution of the PNG plots (default 150).
	DPI int

	cur *RunWriter // the run of StartRun

	// mu guards the fields below; a RunWriter touches only its own runData
	// apart from them.
	mu      sync.Mutex
	runs    []*runData
	written int      // runs[:written] are ended and in the CSV files
	notes   []string // run-set notes (AddNote before any StartRun)
	names   map[string]bool
	req, ts *tempCSV // written by the first open run or by End's draining, never both at once
	err     error
	failed  atomic.Bool // err != nil
	closed  bool
	created bool // NewOutput created dir
}

// runData is what Output keeps of one config run.
type runData struct {
	name     string
	index    int
	replicas []string // known replica names (BeginRun or End)
	ended    bool
	buf      []byte // row scratch

	sum   *Summary
	notes []string

	// When replica names are not known at StartRun, rows are spooled with
	// the replica index and resolved at EndRun.
	reqSpool, tsSpool *spool

	ttft []float32 // ms, completed non-warm-up requests
	// classTTFT splits ttft by priority class (Meta.Classes).
	classTTFT []classSeries

	// Predicted vs true, for the approximate and the precise producer.
	approx, precise predSample

	// Time series from samples.
	prev       []cumulative // per replica: last cumulative counters
	load       []series     // per replica: a = waiting requests, b = KV usage
	arrival    timeBins     // by arrival: the ladder's rungs and prompt tokens
	hasSamples bool
}

type cumulative struct{ hits, queries int64 }

type pair struct{ pred, true32 float32 }

const calBuckets = 10

type calBucket struct {
	n                int
	sumPred, sumTrue float64
}

// predSample keeps one producer's predicted/true pairs for the scatter
// plot (a seeded reservoir sample of at most maxScatter) and the
// calibration over every pair.
type predSample struct {
	pairs []pair
	seen  int64
	rng   *rand.Rand
	calib [calBuckets]calBucket
}

func (p *predSample) add(pred, truth float64) {
	k := min(max(int(pred*calBuckets), 0), calBuckets-1)
	p.calib[k].n++
	p.calib[k].sumPred += pred
	p.calib[k].sumTrue += truth
	pr := pair{float32(pred), float32(truth)}
	p.seen++
	if len(p.pairs) < maxScatter {
		p.pairs = append(p.pairs, pr)
	} else if j := p.rng.Int64N(p.seen); j < maxScatter {
		p.pairs[j] = pr
	}
}

// NewOutput prepares dir (created if needed) for the run set described by
// meta. Nothing is written under the final file names until Close; Abort
// removes the directory again if NewOutput created it.
func NewOutput(dir string, meta Meta) (*Output, error) {
	_, statErr := os.Stat(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("report: creating output directory: %w", err)
	}
	o := &Output{dir: dir, meta: meta, DPI: 150, names: map[string]bool{}, created: errors.Is(statErr, fs.ErrNotExist)}
	var err error
	header := RequestsHeader
	if meta.PD {
		header += "," + PDColumns
	}
	if meta.Classes {
		header += "," + ClassColumns
	}
	if o.req, err = newTempCSV(dir, RequestsFile, header); err != nil {
		return nil, err
	}
	if o.ts, err = newTempCSV(dir, TimeseriesFile, TimeseriesHeader); err != nil {
		o.req.remove()
		return nil, err
	}
	return o, nil
}

func (o *Output) fail(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.failLocked(err)
}

func (o *Output) failLocked(err error) {
	if o.err == nil {
		o.err = err
		o.failed.Store(true)
	}
}

// RunWriter records one config run of an Output. Its methods are called
// from the goroutine that simulates the run; several runs of one Output may
// record at the same time, each through its own RunWriter.
type RunWriter struct {
	o *Output
	r *runData
}

// BeginRun begins a config run and returns its recorder; runs are reported
// in the order begun, however they interleave. A name already used gets a
// " (2)", " (3)", ... suffix. When the fleet's replica names are passed here
// (index order, as sim.ReplicaSpec) and no other run is open, rows are
// written straight to the CSV files; otherwise they are spooled to a
// temporary file and join the CSV files once the run and every run begun
// before it have ended.
func (o *Output) BeginRun(name string, replicaNames ...string) *RunWriter {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		// A detached recorder: the Output has failed, so it records nothing.
		o.failLocked(errors.New("report: BeginRun after Close"))
		return &RunWriter{o: o, r: &runData{name: name}}
	}
	unique := name
	for k := 2; o.names[unique]; k++ {
		unique = name + " (" + strconv.Itoa(k) + ")"
	}
	o.names[unique] = true
	r := &runData{name: unique, index: len(o.runs), replicas: replicaNames}
	r.approx.rng = rand.New(rand.NewPCG(o.meta.Seed, 2*uint64(r.index)))
	r.precise.rng = rand.New(rand.NewPCG(o.meta.Seed, 2*uint64(r.index)+1))
	if len(replicaNames) == 0 || o.written < len(o.runs) {
		var err error
		if r.reqSpool, err = newSpool(o.dir, RequestsFile); err != nil {
			o.failLocked(err)
		}
		if r.tsSpool, err = newSpool(o.dir, TimeseriesFile); err != nil {
			o.failLocked(err)
		}
	}
	o.runs = append(o.runs, r)
	return &RunWriter{o: o, r: r}
}

// StartRun begins a config run recorded through the Output's own methods
// (AddRecord, AddSample, AddNote, EndRun): BeginRun for one run at a time.
func (o *Output) StartRun(name string, replicaNames ...string) {
	if o.cur != nil {
		o.fail(fmt.Errorf("report: StartRun %q: run %q was not ended", name, o.cur.r.name))
		return
	}
	o.cur = o.BeginRun(name, replicaNames...)
}

// current returns the run being recorded, noting misuse.
func (o *Output) current(what string) *RunWriter {
	if o.cur == nil {
		o.fail(fmt.Errorf("report: %s outside a run (call StartRun first)", what))
	}
	return o.cur
}

// AddRecord is AddRecord of the run begun by StartRun.
func (o *Output) AddRecord(rec *sim.Record) {
	if w := o.current("AddRecord"); w != nil {
		w.AddRecord(rec)
	}
}

// AddSample is AddSample of the run begun by StartRun.
func (o *Output) AddSample(s *sim.Sample) {
	if w := o.current("AddSample"); w != nil {
		w.AddSample(s)
	}
}

// EndRun is End of the run begun by StartRun.
func (o *Output) EndRun(s *Summary, replicaNames []string) {
	if w := o.current("EndRun"); w != nil {
		o.cur = nil
		w.End(s, replicaNames)
	}
}

// AddRecord accounts one final record of the run: it streams its
// requests.csv row and keeps what the plots need.
func (w *RunWriter) AddRecord(rec *sim.Record) {
	o, r := w.o, w.r
	if o.failed.Load() {
		return
	}
	b, split := appendRequestRow(r.buf[:0], r.name, rec)
	if o.meta.PD {
		b = appendPDColumns(b[:len(b)-1], rec, r.replicas)
	}
	if o.meta.Classes {
		b = appendClassColumns(b[:len(b)-1], rec)
	}
	r.buf = b
	if r.reqSpool != nil {
		r.reqSpool.put(b[:split], rec.Replica, b[split:])
	} else {
		o.req.writeRow(b[:split], replicaName(r.replicas, rec.Replica), b[split:])
	}
	if rec.Outcome != sim.Completed || rec.Warmup {
		return
	}
	r.ttft = append(r.ttft, float32(float64(rec.TTFT)/1e6))
	if o.meta.Classes {
		r.addClassTTFT(rec)
	}
	r.arrival.add(rec.Arrival, binVals{binCached: int64(rec.CachedTokens), binOracle: int64(rec.OracleCachedTokens),
		binPrompt: int64(rec.PromptTokens), binRouted: int64(rec.RoutedCachedTokens), binInfinite: int64(rec.InfiniteCachedTokens)})
	if rec.PromptTokens > 0 {
		tf := float64(rec.CachedTokens) / float64(rec.PromptTokens)
		if rec.HasPredicted {
			r.approx.add(rec.Predicted, tf)
		}
		if rec.HasPrecise {
			r.precise.add(rec.PredictedPrecise, tf)
		}
	}
}

// AddSample accounts one replica sample of the run: it streams its
// timeseries.csv row (with the hit ratio since that replica's previous
// sample) and feeds the time-series plots.
func (w *RunWriter) AddSample(s *sim.Sample) {
	o, r := w.o, w.r
	if o.failed.Load() {
		return
	}
	if s.Replica < 0 {
		o.fail(fmt.Errorf("report: sample at %d ns has replica index %d", s.Time, s.Replica))
		return
	}
	for len(r.prev) <= s.Replica {
		r.prev = append(r.prev, cumulative{})
	}
	dh, dq := s.PrefixHits-r.prev[s.Replica].hits, s.PrefixQueries-r.prev[s.Replica].queries
	r.prev[s.Replica] = cumulative{s.PrefixHits, s.PrefixQueries}
	b, split := appendSampleRow(r.buf[:0], r.name, s, dh, dq)
	r.buf = b
	if r.tsSpool != nil {
		r.tsSpool.put(b[:split], s.Replica, b[split:])
	} else {
		o.ts.writeRow(b[:split], replicaName(r.replicas, s.Replica), b[split:])
	}
	r.hasSamples = true
	for len(r.load) <= s.Replica {
		r.load = append(r.load, series{})
	}
	r.load[s.Replica].add(float64(s.Time)/1e9, float64(s.Waiting), s.KVUsage)
}

// AddNote attaches a note (e.g. a plugin that is not simulated) to the
// current run, or, outside a run, to the whole run set. Notes appear in
// report.md, report.html and summary.json; a summary's
// Config.NotSimulated entries are shown in the reports too.
func (o *Output) AddNote(note string) {
	if o.cur != nil {
		o.cur.AddNote(note)
		return
	}
	o.mu.Lock()
	o.notes = append(o.notes, note)
	o.mu.Unlock()
}

// AddNote attaches a note to the run (see Output.AddNote).
func (w *RunWriter) AddNote(note string) { w.r.notes = append(w.r.notes, note) }

// End ends the run with its summary. replicaNames (index order) name the
// replicas in the CSV files and plots when BeginRun did not get them; when
// both did, these win for the plots. The rows of the runs that have ended,
// up to the first begun that has not, are then written to the CSV files.
func (w *RunWriter) End(s *Summary, replicaNames []string) {
	r := w.r
	if len(replicaNames) > 0 {
		r.replicas = replicaNames
	}
	r.sum = s
	o := w.o
	o.mu.Lock()
	defer o.mu.Unlock()
	r.ended = true
	for o.written < len(o.runs) && o.runs[o.written].ended {
		done := o.runs[o.written]
		o.written++
		if o.err != nil {
			continue
		}
		if done.reqSpool != nil {
			if err := done.reqSpool.drain(o.req, done.replicas); err != nil {
				o.failLocked(err)
			}
			done.reqSpool = nil
		}
		if done.tsSpool != nil {
			if err := done.tsSpool.drain(o.ts, done.replicas); err != nil {
				o.failLocked(err)
			}
			done.tsSpool = nil
		}
	}
}

// Abort removes every temporary file without writing the outputs, and the
// directory itself if NewOutput created it and it is empty. It is a no-op
// after Close, so callers may defer it.
func (o *Output) Abort() {
	if o.closed {
		return
	}
	o.closed = true
	o.cleanup()
	if o.created {
		// Only if still empty: a failed run leaves no new directory, and
		// nothing that someone else put there is touched.
		os.Remove(o.dir)
	}
}

func (o *Output) cleanup() {
	o.req.remove()
	o.ts.remove()
	for _, r := range o.runs {
		if r.reqSpool != nil {
			r.reqSpool.remove()
		}
		if r.tsSpool != nil {
			r.tsSpool.remove()
		}
	}
}

// Close writes every output file: each goes to a temporary file first, and
// only when all of them are complete are they renamed into place. On error
// no temporary file is left behind.
func (o *Output) Close() (err error) {
	if o.closed {
		return errors.New("report: Close: output already closed")
	}
	o.closed = true
	var pending []pendingFile
	defer func() {
		if err != nil {
			o.cleanup()
			for _, p := range pending {
				os.Remove(p.tmp)
			}
			if o.created {
				os.Remove(o.dir)
			}
		}
	}()
	for _, r := range o.runs {
		if !r.ended {
			o.fail(fmt.Errorf("report: Close: run %q was not ended", r.name))
			break
		}
	}
	if o.err != nil {
		return o.err
	}
	for _, t := range []*tempCSV{o.req, o.ts} {
		if err := t.finish(); err != nil {
			return err
		}
		pending = append(pending, pendingFile{tmp: t.path, name: t.name})
	}
	write := func(name string, data []byte) error {
		tmp, err := writeTemp(o.dir, name, data)
		if err != nil {
			return err
		}
		pending = append(pending, pendingFile{tmp: tmp, name: name})
		return nil
	}
	sj, err := o.summaryJSON()
	if err != nil {
		return err
	}
	if err := write(SummaryFile, sj); err != nil {
		return err
	}
	plots, err := o.renderPlots()
	if err != nil {
		return err
	}
	for _, p := range plots {
		if err := write(p.name+".svg", p.svg); err != nil {
			return err
		}
		if err := write(p.name+".png", p.png); err != nil {
			return err
		}
	}
	if err := write(MarkdownFile, o.markdown()); err != nil {
		return err
	}
	if err := write(HTMLFile, o.html(plots)); err != nil {
		return err
	}
	if err := write(MetricsFile, docs.Metrics); err != nil {
		return err
	}
	for i, p := range pending {
		if err := os.Rename(p.tmp, filepath.Join(o.dir, p.name)); err != nil {
			pending = pending[i:]
			return fmt.Errorf("report: writing %s: %w", p.name, err)
		}
	}
	pending = nil
	return nil
}

type pendingFile struct{ tmp, name string }

// summaryDoc is summary.json.
type summaryDoc struct {
	Version      string              `json:"version"`
	Trace        string              `json:"trace"`
	Seed         uint64              `json:"seed"`
	Fleet        string              `json:"fleet"`
	Command      string              `json:"command,omitempty"`
	Runs         map[string]*Summary `json:"runs"`
	Notes        []string            `json:"notes,omitempty"`
	NotSimulated map[string][]string `json:"not_simulated,omitempty"`
}

func (o *Output) summaryJSON() ([]byte, error) {
	d := summaryDoc{Version: o.meta.Version, Trace: o.meta.Trace, Seed: o.meta.Seed, Fleet: o.meta.Fleet,
		Command: o.meta.Command, Runs: map[string]*Summary{}, Notes: o.notes}
	for _, r := range o.runs {
		d.Runs[r.name] = r.sum
		if len(r.notes) > 0 {
			if d.NotSimulated == nil {
				d.NotSimulated = map[string][]string{}
			}
			d.NotSimulated[r.name] = r.notes
		}
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("report: encoding %s: %w", SummaryFile, err)
	}
	return append(b, '\n'), nil
}

// filePerm is the mode of the output files (temporary files are created
// 0600 and widened before the rename).
const filePerm = 0o644

// writeTemp writes data to a new temporary file in dir and returns its path.
// WriteFileAtomic writes data to path through a temporary file in the same
// directory that is renamed into place, so that a reader never sees a
// half-written file and an interrupted write leaves nothing behind.
func WriteFileAtomic(path string, data []byte) error {
	tmp, err := writeTemp(filepath.Dir(path), filepath.Base(path), data)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("report: writing %s: %w", path, err)
	}
	return nil
}

func writeTemp(dir, name string, data []byte) (string, error) {
	f, err := os.CreateTemp(dir, "."+name+".*.tmp")
	if err != nil {
		return "", fmt.Errorf("report: writing %s: %w", name, err)
	}
	_, werr := f.Write(data)
	perr := f.Chmod(filePerm)
	cerr := f.Close()
	if err := errors.Join(werr, perr, cerr); err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("report: writing %s: %w", name, err)
	}
	return f.Name(), nil
}

// tempCSV is a CSV file being streamed to a temporary name.
type tempCSV struct {
	name, path string
	f          *os.File
	w          *bufio.Writer
	scratch    []byte
	err        error
}

func newTempCSV(dir, name, header string) (*tempCSV, error) {
	f, err := os.CreateTemp(dir, "."+name+".*.tmp")
	if err != nil {
		return nil, fmt.Errorf("report: writing %s: %w", name, err)
	}
	t := &tempCSV{name: name, path: f.Name(), f: f, w: bufio.NewWriterSize(f, 1<<16)}
	t.w.WriteString(header)
	t.w.WriteByte('\n')
	return t, nil
}

// writeRow writes prefix, the CSV-escaped replica name and suffix. Write
// errors are sticky in the bufio.Writer and reported by finish.
func (t *tempCSV) writeRow(prefix []byte, replica string, suffix []byte) {
	t.w.Write(prefix)
	t.scratch = appendField(t.scratch[:0], replica)
	t.w.Write(t.scratch)
	t.w.Write(suffix)
}

// finish flushes and closes the file (still under its temporary name).
func (t *tempCSV) finish() error {
	if t.f == nil {
		return t.err
	}
	ferr := t.w.Flush()
	perr := t.f.Chmod(filePerm)
	cerr := t.f.Close()
	t.f = nil
	if err := errors.Join(ferr, perr, cerr); err != nil {
		t.err = fmt.Errorf("report: writing %s: %w", t.name, err)
	}
	return t.err
}

// remove closes and deletes the temporary file.
func (t *tempCSV) remove() {
	if t == nil {
		return
	}
	if t.f != nil {
		t.f.Close()
		t.f = nil
	}
	os.Remove(t.path)
}

func replicaName(names []string, i int) string {
	switch {
	case i < 0:
		return ""
	case i < len(names):
		return names[i]
	default:
		return "replica-" + strconv.Itoa(i)
	}
}
