package workload

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
)

// formatReader is one format's parser. next returns *InputError for a bad
// record (skippable with Options.SkipInvalid), a *fatalError when the input
// cannot be read further, io.EOF at the end.
type formatReader interface {
	next() (*Request, error)
}

type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }
func (e *fatalError) Unwrap() error { return e.err }

// maxKeptErrors is how many skipped-line errors a Stream keeps for reporting.
const maxKeptErrors = 20

// Stream is a Source over one trace (a file, a reader or a builtin
// workload). It applies SkipInvalid and TimeScale on top of the format's
// reader.
type Stream struct {
	name        string
	format      Format
	mode        Mode
	rd          formatReader
	closer      io.Closer
	scale       float64
	skipInvalid bool
	skipped     int
	skipErrs    []error
	emitted     int64
	classes     *classAssigner // Options.Classes and FairnessID; nil: none
	api         API            // the API requests are rebuilt for (Options.API); APIDefault: none
}

// Next returns the next request, or io.EOF.
func (s *Stream) Next() (*Request, error) {
	for {
		r, err := s.rd.next()
		if err != nil {
			var fe *fatalError
			if errors.As(err, &fe) {
				return nil, fe.err
			}
			if s.skipInvalid && IsInputError(err) {
				s.skipped++
				if len(s.skipErrs) < maxKeptErrors {
					s.skipErrs = append(s.skipErrs, err)
				}
				continue
			}
			return nil, err
		}
		if s.scale != 1 {
			// floor(a·s) <= floor(p·s) + ceil(t·s) keeps Arrival <= prev + think.
			r.Arrival = int64(math.Floor(float64(r.Arrival) * s.scale))
			r.StageStart = int64(math.Floor(float64(r.StageStart) * s.scale))
			r.ThinkTime = int64(math.Ceil(float64(r.ThinkTime) * s.scale))
		}
		if s.classes != nil {
			s.classes.apply(r)
		}
		if s.api != APIDefault {
			applyAPI(r, s.api)
		}
		s.emitted++
		return r, nil
	}
}

// Close releases the underlying file, if any.
func (s *Stream) Close() error {
	if s.closer != nil {
		c := s.closer
		s.closer = nil
		return c.Close()
	}
	return nil
}

// Name is the file name (or builtin:NAME) used in error messages.
func (s *Stream) Name() string { return s.name }

// Format is the (detected) trace format.
func (s *Stream) Format() Format { return s.format }

// Mode is the effective replay mode (never ModeDefault).
func (s *Stream) Mode() Mode { return s.mode }

// Skipped is the number of invalid records skipped so far (SkipInvalid).
func (s *Stream) Skipped() int { return s.skipped }

// SkippedErrors returns the first few errors of skipped records.
func (s *Stream) SkippedErrors() []error { return s.skipErrs }

// EmptyRecords is the number of valid records that yield no request (ShareGPT
// conversations without a human turn).
func (s *Stream) EmptyRecords() int {
	if e, ok := s.rd.(interface{ emptyRecords() int }); ok {
		return e.emptyRecords()
	}
	return 0
}

// Emitted is the number of requests returned so far.
func (s *Stream) Emitted() int64 { return s.emitted }

// StagePlan is one load stage as the traffic's source declares it: an
// inference-perf config's load.stages entry, after --time-scale.
type StagePlan struct {
	// Rate is the requested rate (requests/s): the stage's rate divided by
	// the time scale.
	Rate float64
	// Duration is the stage's length (s): its duration times the time
	// scale.
	Duration float64
	// Requests is how many requests the stage sends, int(rate × duration)
	// of the config.
	Requests int
}

// Client returns the load generator's client model of the traffic's
// source, after --time-scale, or nil when it has none: only an
// inference-perf config has one (ClientPlan), unless
// InferencePerfOptions.OpenLoop.
func (s *Stream) Client() *ClientPlan {
	c, ok := s.rd.(interface{ client() *ClientPlan })
	if !ok {
		return nil
	}
	p := c.client()
	if p == nil {
		return nil
	}
	p.Interval = int64(math.Floor(float64(p.Interval) * s.scale))
	p.Lead = int64(math.Floor(float64(p.Lead) * s.scale))
	p.Poll = int64(math.Floor(float64(p.Poll) * s.scale))
	return p
}

// Stages returns the load stages the source declares, in order (stage k
// is Request.Stage k), or nil when it declares none: only an
// inference-perf config does. An OpenAI JSONL trace's x_stage numbers its
// requests' stages without saying their rates.
func (s *Stream) Stages() []StagePlan {
	st, ok := s.rd.(interface{ stages() []StagePlan })
	if !ok {
		return nil
	}
	plans := st.stages()
	for i := range plans {
		plans[i].Rate /= s.scale
		plans[i].Duration *= s.scale
	}
	return plans
}

// defaultMode is each format's natural replay mode.
func defaultMode(f Format) Mode {
	switch f {
	case FormatShareGPT, FormatSynth:
		return ModeClosedLoop
	}
	return ModeOpenLoop
}

// detectSize is how much of the input DetectFormat looks at.
const detectSize = 64 << 10

// NewSource reads a trace from r; name is used in error messages. With
// FormatAuto the format is detected from the content. Rate rescaling of
// timestamped traces needs two passes and is only available through Open.
func NewSource(r io.Reader, name string, opt Options) (*Stream, error) {
	o, err := opt.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if o.Format == FormatInferencePerf {
		return readInferencePerf(r, name, o, opt.Model)
	}
	return newStream(r, name, o)
}

func newStream(r io.Reader, name string, o Options) (*Stream, error) {
	br := bufio.NewReaderSize(r, detectSize)
	f := o.Format
	if f == FormatAuto {
		head, err := br.Peek(detectSize)
		if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if f, err = DetectFormat(head); err != nil {
			return nil, &InputError{File: name, Line: 1, Msg: err.Error(), Err: err}
		}
	}
	if o.Rate > 0 && (f == FormatMooncake || f == FormatAlibaba || f == FormatAzure) {
		return nil, fmt.Errorf("%s: rescaling a %s trace to a rate needs two passes over a file; use Open or TimeScale", name, f)
	}
	api, err := rewriteAPI(f, o.API)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	mode := o.Mode
	if mode == ModeDefault {
		mode = defaultMode(f)
	}
	o.Mode = mode
	// Every format is text: a byte order mark before it is no content (and
	// no line: line numbers are unchanged).
	skipBOM(br)
	var rd formatReader
	switch f {
	case FormatMooncake, FormatAlibaba:
		rd, err = newHashIDReader(br, name, f, &o)
	case FormatOpenAI:
		rd, err = newOpenAIReader(br, name, &o)
	case FormatShareGPT:
		rd, err = newShareGPTReader(br, name, &o)
	case FormatAzure:
		rd, err = newAzureReader(br, name, &o)
	default:
		err = fmt.Errorf("format %q cannot be read from a file", f)
	}
	if err != nil {
		var ie *InputError
		if errors.As(err, &ie) {
			return nil, err
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &Stream{name: name, format: f, mode: mode, rd: rd, scale: o.TimeScale, skipInvalid: o.SkipInvalid, classes: newClassAssigner(o), api: api}, nil
}

// timestamped formats have arrival times of their own (OpenAI JSONL may).
func timestamped(f Format) bool {
	switch f {
	case FormatMooncake, FormatAlibaba, FormatAzure, FormatOpenAI:
		return true
	}
	return false
}

// BuiltinPrefix names embedded workloads: "builtin:chat".
const BuiltinPrefix = "builtin:"

// DefaultWorkload is the workload eppsim runs without --trace.
const DefaultWorkload = "builtin:chat"

// Open opens a trace file, an embedded workload named "builtin:NAME" (see
// Builtin), or the traffic of an inference-perf config named
// "inference-perf:FILE" (see NewInferencePerfSource). With Options.Rate > 0
// a timestamped file is read twice: a first, token-free pass measures its
// mean rate. Options.Classes and FairnessID give requests their objective
// and fairness ID headers (classes.go).
func Open(path string, opt Options) (*Stream, error) {
	o, err := opt.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if name, ok := strings.CutPrefix(path, BuiltinPrefix); ok {
		return openBuiltin(name, o, opt.Model)
	}
	if name, ok := strings.CutPrefix(path, InferencePerfPrefix); ok {
		return openInferencePerf(name, o, opt.Model)
	}
	if o.Format == FormatInferencePerf {
		return openInferencePerf(path, o, opt.Model)
	}
	if o.Rate > 0 {
		if err := rateToScale(path, &o); err != nil {
			return nil, err
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("workload: %w", err)
	}
	s, err := newStream(f, path, o)
	if err != nil {
		f.Close()
		return nil, err
	}
	s.closer = f
	return s, nil
}

// rateToScale measures a timestamped trace's mean request rate and turns
// o.Rate into o.TimeScale. Untimestamped traces keep Rate as their session
// arrival rate.
func rateToScale(path string, o *Options) error {
	if o.TimeScale != 1 {
		return fmt.Errorf("%s: rate and time scale are exclusive", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("workload: %w", err)
	}
	defer f.Close()
	p := *o
	p.NoTokens = true
	p.Rate = 0
	p.Mode = ModeOpenLoop
	br := bufio.NewReaderSize(f, detectSize)
	if p.Format == FormatAuto {
		head, err := br.Peek(detectSize)
		if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
			return fmt.Errorf("%s: %w", path, err)
		}
		if p.Format, err = DetectFormat(head); err != nil {
			return &InputError{File: path, Line: 1, Msg: err.Error(), Err: err}
		}
	}
	if !timestamped(p.Format) {
		return nil
	}
	if p.Format == FormatOpenAI {
		// Untimestamped OpenAI lines use Rate as their arrival rate; only
		// rescale when the first line carries x_arrival_ms.
		line, _ := br.Peek(detectSize)
		if !strings.Contains(string(line[:firstLineEnd(line)]), `"x_arrival_ms"`) {
			return nil
		}
	}
	s, err := newStream(br, path, p)
	if err != nil {
		return err
	}
	var n int64
	var first, last int64
	for {
		r, err := s.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if n == 0 {
			first = r.Arrival
		}
		last = r.Arrival
		n++
	}
	if n < 2 || last == first {
		return fmt.Errorf("%s: cannot rescale to a rate: the trace spans no time", path)
	}
	traceRate := float64(n-1) / (float64(last-first) / 1e9)
	o.TimeScale = traceRate / o.Rate
	o.Rate = 0
	return nil
}

func firstLineEnd(b []byte) int {
	for i, c := range b {
		if c == '\n' {
			return i
		}
	}
	return len(b)
}
